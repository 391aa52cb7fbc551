/*
 * tile_choice.h -- the block tile and split-K of a tiled GEMM-like kernel
 * chosen by the blocks they launch: whole waves on the target's SMs, short
 * k-tile chains, few and small fp32 split-K partials (docs/codegen.md,
 * "Tile and split-K by blocks").  Shared by conv2d_tc, gemm_tc_splitk and
 * the wgmma templates' split-K.
 */
#ifndef FG_TILE_CHOICE_H
#define FG_TILE_CHOICE_H

#include <stdint.h>

/* The SMs to fill: an H100 / H200 has 132 (the device model's count). */
#define FG_TARGET_SMS 132

/* The shape a choice is for: a GEMM of M x N outputs (times batch) over
 * KT reduction tiles of bk elements; eb bytes an element; wgmma the
 * kind of main loop (0 mma.sync, 1 wgmma: persistent, one fill). */
typedef struct fg_tc_problem {
    int64_t M, N, batch, KT;
    int bk, eb, wgmma;
    double bytes;     /* compulsory DRAM bytes: operands and output once */
    int min_kt;       /* k tiles each split keeps at least */
    int max_splits;   /* splits at most */
} fg_tc_problem;

/* A candidate block tile and the blocks of it one SM holds at once. */
typedef struct fg_tc_cand {
    int bm, bn, bps;
} fg_tc_cand;

/* The choice: the candidate's index, the splits, blocks (tiles x splits
 * x batch), and the modelled time in microseconds. */
typedef struct fg_tc_choice {
    int tile, splits;
    int64_t blocks;
    double est_us;
} fg_tc_choice;

/* The modelled time of tile t with `splits` splits of problem p on sms
 * SMs (the latency model of docs/codegen.md, the terms that depend on the
 * choice): max(math of the busiest SM, DRAM bytes incl. partials, per-wave
 * fill + k-tile chain) + per-wave split-K reduction. */
/* Blocks of a bm x bn tile that fit one SM: threads (at most 2048 an SM),
 * registers (about 64 + bm * bn / 256 a thread, what ptxas gives these
 * tiles; 64K an SM) and smem bytes (228 KB an SM, 1 KB reserved a block). */
int fg_tc_blocks_per_sm(int bm, int bn, int threads, int smem);

double fg_tc_estimate(const fg_tc_problem *p, const fg_tc_cand *t, int splits, int sms);

/* The candidate (of n, skipping those for which skip[i] is nonzero; skip
 * may be NULL) and split with the least modelled time; ties go to fewer
 * splits, then fewer padded outputs, then the earlier candidate (list them
 * largest first).  n >= 1 and at least one candidate not skipped. */
fg_tc_choice fg_tc_choose(const fg_tc_problem *p, const fg_tc_cand *cands, int n, const int *skip, int sms);

#endif
