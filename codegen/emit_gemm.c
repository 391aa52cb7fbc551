/*
 * emit_gemm.c -- the gemm family: templates/gemm.cuh (fp32, SIMT, shared
 * memory tiles) and gemm_tc.cuh (fp16 / bf16 on tensor cores, fp32
 * accumulation, a multistage cp.async pipeline; docs/codegen.md).
 *
 * A matmul is numpy's: A [..., M, K] (trans_a: [..., K, M]) by B [..., K, N]
 * (trans_b: [..., N, K]), the batch axes broadcast (fg_matmul_geom, shape.c),
 * a rank-1 A or B a vector whose added axis the output drops.  Every kernel
 * runs one output matrix per blockIdx.z (the flattened batch index); the
 * emitter writes the text that turns it into the batch coordinates (for the
 * epilogue) and each operand's matrix offset (0 along broadcast axes).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "kind.h"
#include "shape.h"
#include "template.h"
#include "tile_choice.h"

/* ---- geometry shared by the checks and the emitter ----------------------- */

typedef struct gemm_geom {
    fg_matmul_geom_t d;
    int at, bt, ta, tb;
} gemm_geom;

/* The matmul at node `anchor` whose group writes tensor `out`: its geometry,
 * or 0 with the reason in why. */
static int gemm_geometry(const fg_graph *g, int anchor, int out, gemm_geom *gg, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[anchor];
    gg->at = nd->inputs[0];
    gg->bt = nd->inputs[1];
    gg->ta = fg_node_attr(nd, "trans_a") && fg_node_attr_int(nd, "trans_a", 0) != 0;
    gg->tb = fg_node_attr(nd, "trans_b") && fg_node_attr_int(nd, "trans_b", 0) != 0;
    const fg_tensor *A = &g->tensors[gg->at], *B = &g->tensors[gg->bt], *Y = &g->tensors[nd->output];
    const fg_tensor *O = &g->tensors[out];
    if (!fg_matmul_geom(A, B, gg->ta, gg->tb, &gg->d, why, whysz))
        return 0;
    const fg_tensor *ts[] = {A, B, Y, O};
    for (int i = 0; i < 4; i++)
        if (ts[i]->rank == 4 && ts[i]->layout != FG_LAYOUT_NCHW) {
            snprintf(why, whysz, "%s is %s (matmul operands are row-major)", ts[i]->name,
                     fg_layout_name(ts[i]->layout));
            return 0;
        }
    if (O->rank != gg->d.yrank || memcmp(O->shape, gg->d.yshape, sizeof(int64_t) * (size_t)O->rank) != 0) {
        snprintf(why, whysz, "the group's output %s is not the matmul's shape", O->name);
        return 0;
    }
    if (gg->d.batch > 65535 || (gg->d.M + 31) / 32 > 65535) {
        snprintf(why, whysz, "batch %" PRId64 " or %" PRId64 " rows exceed the grid", gg->d.batch, gg->d.M);
        return 0;
    }
    return 1;
}

/* The epilogue's coordinate arguments: batch coordinates, then row unless A
 * is a vector, then col (or `col + 1`) unless B is. */
static void epi_args(const gemm_geom *gg, const char *col, fg_buf *b)
{
    for (int i = 0; i < gg->d.nbatch; i++)
        fg_buf_printf(b, "%syb%d", b->len ? ", " : "", i);
    if (!gg->d.a_vec)
        fg_buf_printf(b, "%srow", b->len ? ", " : "");
    if (!gg->d.b_vec)
        fg_buf_printf(b, "%s%s", b->len ? ", " : "", col);
}

/* Placeholders both templates share. */
static void set_common(fg_emitter *em, const gemm_geom *gg)
{
    fg_em_shape(em, "M", gg->d.M);
    fg_em_shape(em, "N", gg->d.N);
    fg_em_shape(em, "K", gg->d.K);
    fg_em_set(em, "A", "%s", fg_em_tensor(em, gg->at, 0));
    fg_em_set(em, "B", "%s", fg_em_tensor(em, gg->bt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_buf t = {0};
    fg_em_batch_text(em, &gg->d, &t);
    fg_em_set(em, "BATCH", "%s", t.s ? t.s : "");
    fg_buf_free(&t);
    epi_args(gg, "col", &t);
    fg_em_set(em, "EPI_ARGS", "%s", t.s);
    fg_buf_free(&t);
    epi_args(gg, "col + 1", &t);
    fg_em_set(em, "EPI_ARGS1", "%s", t.s);
    fg_buf_free(&t);
    fg_em_set(em, "TA", "%d", gg->ta);
    fg_em_set(em, "TB", "%d", gg->tb);
}

/* ---- gemm_tc: block tiles and the pipeline -------------------------------- */

/* Block tiles, largest first: BM x BN outputs, WARPS_M x WARPS_N warps; each
 * warp's patch a multiple of 16 x 16, and every thread copies whole 16-byte
 * chunks (BM * 4 and BN * 4 multiples of the block size). */
typedef struct tc_tile {
    int bm, bn, warps_m, warps_n;
} tc_tile;

static const tc_tile tc_tiles[] = {
    {128, 128, 2, 4}, {128, 64, 2, 2}, {64, 128, 2, 2}, {64, 64, 2, 2}, {32, 64, 1, 2}, {32, 32, 1, 2},
    {16, 64, 1, 2},
};

#define TC_ROW_BYTES 64             /* a reduction tile: 64 bytes of k (32 fp16 / bf16, 16 tf32) */
#define TC_SMEM_LIMIT (48 * 1024)   /* static shared memory */
#define TC_TARGET_SMS FG_TARGET_SMS /* blocks wanted: one per SM of an H100 / H200 */
#define TC_MAX_SPLITS 16            /* split-K: at most this many slices of the reduction */
#define TC_MIN_KT_SPLIT 4           /* and at least this many k tiles in each */

/* Shared memory of a tile and depth: stages of (BM + BN) rows of 64 bytes. */
static int tc_smem(const tc_tile *t, int stages) { return stages * (t->bm + t->bn) * TC_ROW_BYTES; }

_Static_assert(3 * (128 + 128) * TC_ROW_BYTES <= TC_SMEM_LIMIT, "the largest tile fits 3 stages");

/* What the choice depends on. */
typedef struct tc_shape {
    int64_t M, N, batch, KT;   /* KT: reduction tiles */
} tc_shape;

static tc_shape tc_shape_of(const gemm_geom *gg, fg_dtype dt)
{
    int64_t bk = dt == FG_DTYPE_F32 ? 16 : 32;
    tc_shape s = {gg->d.M, gg->d.N, gg->d.batch, (gg->d.K + bk - 1) / bk};
    return s;
}

static int64_t tc_blocks(const tc_tile *t, const tc_shape *s)
{
    return ((s->M + t->bm - 1) / t->bm) * ((s->N + t->bn - 1) / t->bn) * s->batch;
}

/* The default tile without split-K: the largest that still gives
 * TC_TARGET_SMS blocks (batch included) and is not mostly empty, else the
 * smallest that is not (16 rows only for M <= 16). */
static const tc_tile *tc_default_tile(const tc_shape *s)
{
    const int n = (int)FG_COUNTOF(tc_tiles);
    const tc_tile *last = &tc_tiles[n - 2];
    for (int i = 0; i < n; i++) {
        const tc_tile *t = &tc_tiles[i];
        if ((t->bm > 2 * s->M && t->bm > 32) || (t->bn > 2 * s->N && t->bn > 32) || (t->bm < 32 && s->M > 16))
            continue;
        last = t;
        if (tc_blocks(t, s) >= TC_TARGET_SMS)
            return t;
    }
    return last;
}

/* The default with split-K, by the blocks it launches (tile_choice.h):
 * every tile that is not mostly empty (as tc_default_tile) with every split
 * (each keeping TC_MIN_KT_SPLIT k tiles, at most TC_MAX_SPLITS) priced on
 * FG_TARGET_SMS SMs -- whole waves of math and of the k-tile chain, the
 * partials' traffic and reduction -- and the cheapest wins (ties: fewer
 * splits, less padding, the larger tile). */
static void tc_split_choice(const tc_shape *s, int eb, const tc_tile **tile, int *splits)
{
    enum { n = (int)FG_COUNTOF(tc_tiles) };
    fg_tc_cand cands[n];
    int skip[n];
    for (int i = 0; i < n; i++) {
        const tc_tile *t = &tc_tiles[i];
        int threads = 32 * t->warps_m * t->warps_n, smem = tc_smem(t, tc_smem(t, 4) <= TC_SMEM_LIMIT ? 4 : 3);
        cands[i] = (fg_tc_cand){t->bm, t->bn, fg_tc_blocks_per_sm(t->bm, t->bn, threads, smem)};
        /* tc_default_tile's filter; for M <= 16 (a matrix-vector product) only the 16-row tile */
        skip[i] = (t->bm > 2 * s->M && t->bm > 32) || (t->bn > 2 * s->N && t->bn > 32) || (t->bm < 32 && s->M > 16) ||
                  (s->M <= 16 && t->bm > 16);
    }
    fg_tc_problem p = {.M = s->M, .N = s->N, .batch = s->batch, .KT = s->KT, .bk = TC_ROW_BYTES / eb, .eb = eb,
                       .bytes = (double)eb * (double)((s->M * s->batch + s->N) * s->KT * (TC_ROW_BYTES / eb) +
                                                       s->M * s->N * s->batch),
                       .min_kt = TC_MIN_KT_SPLIT, .max_splits = TC_MAX_SPLITS};
    fg_tc_choice c = fg_tc_choose(&p, cands, n, skip, FG_TARGET_SMS);
    *tile = &tc_tiles[c.tile];
    *splits = c.splits;
}

/* k tiles per split, and the splits that then exist (none empty). */
static void tc_split_shape(int64_t KT, int splits, int64_t *kt_split, int *used)
{
    *kt_split = (KT + splits - 1) / splits;
    if (*kt_split < 1)
        *kt_split = 1;
    *used = (int)((KT + *kt_split - 1) / *kt_split);
    if (*used < 1)
        *used = 1;
}

/* Whether both operands' rows are 16-byte chunks: the contiguous axis of A
 * (K, or M when transposed) and of B (N, or K when transposed) a multiple
 * of epc elements, so every chunk and matrix start is aligned. */
static int tc_vec(const gemm_geom *gg, int epc)
{
    int64_t ca = gg->ta ? gg->d.M : gg->d.K, cb = gg->tb ? gg->d.K : gg->d.N;   /* a vector: ta = tb = 0 */
    return ca % epc == 0 && cb % epc == 0;
}

/* gemm_tc.cuh; splitk: the split-K variant, the same template with a split
 * chosen by default. */
static fg_status render_gemm_tc(fg_emitter *em, const gemm_geom *gg, int splitk)
{
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    const fg_tensor *A = &em->g->tensors[gg->at], *B = &em->g->tensors[gg->bt], *Y = em->ot;
    fg_dtype dt = Y->dtype;
    int tf32 = dt == FG_DTYPE_F32;
    if (A->dtype != dt || B->dtype != dt || (tf32 && em->g->precision != FG_PRECISION_TF32))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "tensor-core gemm '%s' needs fp16, bf16 (or fp32 with precision "
                           "tf32) operands of one dtype", nd->name);
    tc_shape sh = tc_shape_of(gg, dt);
    const tc_tile *tile;
    int splits = 1;
    if (splitk)
        tc_split_choice(&sh, tf32 ? 4 : 2, &tile, &splits);
    else
        tile = tc_default_tile(&sh);
    const char *keys[] = {"tile_m", "tile_n", "stages", "split_k"};
    int64_t v[4] = {tile->bm, tile->bn, tc_smem(tile, 4) <= TC_SMEM_LIMIT ? 4 : 3, splits};
    fg_status st = fg_em_tile_params(em, keys, 4, v);
    if (st != FG_OK)
        return st;
    tile = NULL;
    for (size_t i = 0; i < FG_COUNTOF(tc_tiles) && !tile; i++)
        if (tc_tiles[i].bm == v[0] && tc_tiles[i].bn == v[1])
            tile = &tc_tiles[i];
    if (!tile)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: tile_m = %" PRId64 ", tile_n = %" PRId64
                           " (want 128 x 128, 128 x 64, 64 x 128, 64 x 64, 32 x 64, 32 x 32 or 16 x 64)", v[0], v[1]);
    if (tc_smem(tile, (int)v[2]) > TC_SMEM_LIMIT)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: stages = %" PRId64 " (want 3 or 4, and %d x %d tiles of 64 "
                           "bytes of k in at most 48 KiB of shared memory)", v[2], tile->bm, tile->bn);
    if (v[3] > sh.KT)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: split_k = %" PRId64 " (want 1 to %" PRId64 ")", v[3],
                           sh.KT < TC_MAX_SPLITS ? sh.KT : (int64_t)TC_MAX_SPLITS);
    int stages = (int)v[2];
    int64_t kt_split;
    tc_split_shape(sh.KT, (int)v[3], &kt_split, &splits);
    if (gg->d.batch * splits > 65535)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "matmul '%s': batch %" PRId64 " x split-K %d exceed the grid",
                           nd->name, gg->d.batch, splits);

    set_common(em, gg);
    int epc = tf32 ? 4 : 8;
    int vec = tc_vec(gg, epc);
    fg_em_set(em, "T", "%s", fg_em_ctype(dt));
    fg_em_set(em, "PACK", "%s", dt == FG_DTYPE_BF16 ? "fg_pack_bf162" : "fg_pack_half2");
    fg_em_set(em, "MMA", "%s", tf32 ? "fg_mma_1688_tf32" : dt == FG_DTYPE_F16 ? "fg_mma_16816_f16"
                                                                               : "fg_mma_16816_bf16");
    fg_em_set(em, "TF32", "%d", tf32);
    fg_em_set(em, "EPC", "%d", epc);
    fg_em_set(em, "BM", "%d", tile->bm);
    fg_em_set(em, "BN", "%d", tile->bn);
    fg_em_set(em, "WARPS_M", "%d", tile->warps_m);
    fg_em_set(em, "WARPS_N", "%d", tile->warps_n);
    fg_em_set(em, "STAGES", "%d", stages);
    fg_em_set(em, "VEC", "%d", vec);
    /* A's tile rows run along M (k contiguous) unless A is stored [K, M]; B's
     * along N (k contiguous) only when B is stored [N, K] */
    fg_em_set(em, "A_KROW", "%d", gg->ta);
    fg_em_set(em, "B_KROW", "%d", !gg->tb);
    fg_em_set(em, "B_TF32_ELEM", "%d", tf32 && !gg->tb);
    fg_em_set(em, "PAIR", "%d", gg->d.N % 2 == 0);
    /* a warp's fragments per row in fours: the quad-transposed 16-byte epilogue
     * (VEC_EPI, set again by the epilogue when N is a multiple of 8) */
    fg_em_set(em, "VEC_EPI", "0");
    if (tile->bn / tile->warps_n / 8 % 4 == 0 && !gg->d.b_vec)
        em->epi_vec_axis = em->ot->rank;   /* the columns */
    fg_em_set(em, "SPLITS", "%d", splits);
    fg_em_set(em, "KT_SPLIT", "%" PRId64, kt_split);
    fg_em_set(em, "SPLIT", "%d", splits > 1);

    unsigned gm = (unsigned)((gg->d.M + tile->bm - 1) / tile->bm), gn = (unsigned)((gg->d.N + tile->bn - 1) / tile->bn);
    /* split-K: splits slots of BM x BN floats per tile, one counter per tile */
    int64_t tiles = (int64_t)gm * gn * gg->d.batch;
    fg_em_split_buffers(em, splits > 1 ? tiles * splits * tile->bm * tile->bn * 4 : 0, tiles);

    unsigned threads = 32u * (unsigned)(tile->warps_m * tile->warps_n);
    fg_buf_printf(&em->notes, "//   tile:      %d x %d x %d, %d stages, %u threads (%d x %d warps), split-K %d "
                  "(%" PRId64 " of %" PRId64 " k tiles each), %s, %s loads\n", tile->bm, tile->bn, 4 * epc, stages,
                  threads, tile->warps_m, tile->warps_n, splits, kt_split, sh.KT,
                  tf32 ? "mma m16n8k8 tf32" : "mma m16n8k16", vec ? "16-byte cp.async" : "element");
    fg_buf_printf(&em->notes, "//   operands:  A %s, B %s\n", gg->ta ? "[K, M] (k-row tile)" : "[M, K]",
                  gg->tb ? "[N, K]" : "[K, N] (k-row tile)");
    em->template_file = "gemm_tc.cuh";
    em->threads = threads;
    em->k->grid[0] = gn;
    em->k->grid[1] = gm;
    em->k->grid[2] = (unsigned)(gg->d.batch * splits);
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* ---- gemv: M <= 16, exact fp32 (templates/gemv.cuh) ---------------------------- */

#define GV_MAX_M 16          /* rows a gemv block holds in registers */
#define GV_SMEM (32 * 1024)  /* the warps' partial sums: at most this much shared memory */
#define GV_MAX_SPLITS 32     /* split-K across blocks: at most this many slices of K */
#define GV_TB_COLS 4         /* B [N, K]: columns per block (one dot product each per warp) */

/* A gemv launch: columns per block, elements per load, warps, the split of K. */
typedef struct gv_shape {
    int slice, vw, warps, splits, avec;
    int64_t kw, ks, slices;   /* k per warp, k per split, column slices */
} gv_shape;

/* The k per split for `splits` splits: a multiple of 4 * warps (so every
 * warp's run starts 16-byte aligned), then the splits that exist. */
static void gv_split(const gemm_geom *gg, gv_shape *s, int splits)
{
    int64_t q = 4 * (int64_t)s->warps, ks = (gg->d.K + splits - 1) / splits;
    s->ks = (ks + q - 1) / q * q;
    s->kw = s->ks / s->warps;
    s->splits = (int)((gg->d.K + s->ks - 1) / s->ks);
    if (s->splits < 1)
        s->splits = 1;
}

/* The default launch: B [K, N] puts 32 lanes x VW columns in a block (VW 4
 * when N % 4 == 0), B [N, K] GV_TB_COLS columns with lanes along k (VW 4
 * when K % 4 == 0); as many warps (up to 8) as GV_SMEM of partial sums
 * allows; K split across blocks until slices x batch x splits reaches
 * TC_TARGET_SMS, each warp keeping at least 16 k ([K, N]) or one full
 * 32 x VW sweep ([N, K]). */
static gv_shape gv_default(const gemm_geom *gg)
{
    gv_shape s = {0};
    const fg_matmul_geom_t *d = &gg->d;
    s.vw = (gg->tb ? d->K % 4 : d->N % 4) == 0 ? 4 : 1;
    s.avec = gg->tb && s.vw == 4 && !gg->ta;
    s.slice = gg->tb ? GV_TB_COLS : 32 * s.vw;
    s.warps = 8;
    while (s.warps > 1 && (int64_t)s.warps * d->M * s.slice * 4 > GV_SMEM)
        s.warps /= 2;
    s.slices = (d->N + s.slice - 1) / s.slice;
    int64_t blocks = s.slices * d->batch, want = (TC_TARGET_SMS + blocks - 1) / blocks;
    int64_t kw_min = gg->tb ? 32 * s.vw : 16, most = d->K / (s.warps * kw_min);
    if (want > most)
        want = most;
    if (want > GV_MAX_SPLITS)
        want = GV_MAX_SPLITS;
    while (want > 1 && d->batch * want > 65535)
        want--;
    gv_split(gg, &s, want < 1 ? 1 : (int)want);
    return s;
}

static fg_status render_gemv(fg_emitter *em, const gemm_geom *gg)
{
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    const fg_tensor *A = &em->g->tensors[gg->at], *B = &em->g->tensors[gg->bt];
    if (A->dtype != FG_DTYPE_F32 || B->dtype != FG_DTYPE_F32 || em->ot->dtype != FG_DTYPE_F32 || gg->d.M > GV_MAX_M)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "gemv '%s' needs fp32 operands and M <= %d (M is %" PRId64 ")",
                           nd->name, GV_MAX_M, gg->d.M);
    gv_shape s = gv_default(gg);
    const char *keys[] = {"split_k"};
    int64_t v[1] = {s.splits};
    fg_status st = fg_em_tile_params(em, keys, 1, v);
    if (st != FG_OK)
        return st;
    if (v[0] * gg->d.batch > 65535)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: split_k = %" PRId64 " (want 1 to %d, and batch %" PRId64
                           " x split_k within 65535)", v[0], GV_MAX_SPLITS, gg->d.batch);
    gv_split(gg, &s, (int)v[0]);

    set_common(em, gg);
    fg_em_set(em, "MR", "%" PRId64, gg->d.M);
    fg_em_set(em, "SLICE", "%d", s.slice);
    fg_em_set(em, "VW", "%d", s.vw);
    fg_em_set(em, "VEC", "%d", s.vw == 4);
    fg_em_set(em, "A_VEC", "%d", s.avec);
    fg_em_set(em, "WARPS", "%d", s.warps);
    fg_em_set(em, "SPLITS", "%d", s.splits);
    fg_em_set(em, "SPLIT", "%d", s.splits > 1);
    fg_em_set(em, "KW", "%" PRId64, s.kw);
    fg_em_set(em, "KS", "%" PRId64, s.ks);
    /* split-K: splits slots of M x SLICE floats per slice, one counter per slice */
    int64_t slices = s.slices * gg->d.batch;
    fg_em_split_buffers(em, s.splits > 1 ? slices * s.splits * gg->d.M * s.slice * 4 : 0, slices);
    unsigned threads = 32u * (unsigned)s.warps;
    fg_buf_printf(&em->notes, "//   tile:      gemv, %d columns x %" PRId64 " rows per block, %u threads (%d warps "
                  "of %" PRId64 " k), split-K %d (%" PRId64 " k each), %s loads of B\n", s.slice, gg->d.M, threads,
                  s.warps, s.kw, s.splits, s.ks, s.vw == 4 ? "16-byte" : "element");
    fg_buf_printf(&em->notes, "//   operands:  A %s, B %s\n", gg->ta ? "[K, M]" : "[M, K]",
                  gg->tb ? "[N, K] (lanes along k, shuffle sum)" : "[K, N] (lanes along n)");
    em->template_file = "gemv.cuh";
    em->threads = threads;
    em->k->grid[0] = (unsigned)s.slices;
    em->k->grid[1] = 1;
    em->k->grid[2] = (unsigned)(gg->d.batch * s.splits);
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* ---- gemm (fp32 SIMT) ------------------------------------------------------- */

static fg_status render_gemm_simt(fg_emitter *em, const gemm_geom *gg)
{
    const char *keys[] = {"tile_m", "tile_n", "tile_k"};
    int64_t v[3] = {64, 64, 16};
    fg_status st = fg_em_tile_params(em, keys, 3, v);
    if (st != FG_OK)
        return st;
    int64_t threads = (v[0] / 4) * (v[1] / 4);
    if (threads < 32 || threads > 1024)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: a %" PRId64 " x %" PRId64 " tile needs %" PRId64
                           " threads (want 32..1024)", v[0], v[1], threads);
    set_common(em, gg);
    fg_em_set(em, "TILE_M", "%" PRId64, v[0]);
    fg_em_set(em, "TILE_N", "%" PRId64, v[1]);
    fg_em_set(em, "TILE_K", "%" PRId64, v[2]);
    fg_buf_printf(&em->notes, "//   tile:      %" PRId64 " x %" PRId64 " x %" PRId64 ", %" PRId64 " threads\n", v[0],
                  v[1], v[2], threads);
    em->template_file = "gemm.cuh";
    em->threads = (unsigned)threads;
    em->k->grid[0] = (unsigned)((gg->d.N + v[1] - 1) / v[1]);
    em->k->grid[1] = (unsigned)((gg->d.M + v[0] - 1) / v[0]);
    em->k->grid[2] = (unsigned)gg->d.batch;
    em->k->block[0] = (unsigned)threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* The geometry of the group's matmul anchor, for an emitter (the check
 * accepted it, so only an internal error can refuse it here). */
static fg_status anchor_geometry(fg_emitter *em, gemm_geom *gg)
{
    int a = em->grp->anchor;
    char why[300];
    if (!gemm_geometry(em->g, a, em->out, gg, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template %s cannot run matmul '%s': %s", em->grp->template_name,
                           em->g->nodes[a].name, why);
    return FG_OK;
}

static fg_status emit_gemm(fg_emitter *em)
{
    gemm_geom gg;
    fg_status st = anchor_geometry(em, &gg);
    return st != FG_OK ? st : render_gemm_simt(em, &gg);
}

static fg_status emit_gemm_tc(fg_emitter *em)
{
    gemm_geom gg;
    fg_status st = anchor_geometry(em, &gg);
    return st != FG_OK ? st : render_gemm_tc(em, &gg, 0);
}

static fg_status emit_gemm_tc_splitk(fg_emitter *em)
{
    gemm_geom gg;
    fg_status st = anchor_geometry(em, &gg);
    return st != FG_OK ? st : render_gemm_tc(em, &gg, 1);
}

static fg_status emit_gemv(fg_emitter *em)
{
    gemm_geom gg;
    fg_status st = anchor_geometry(em, &gg);
    return st != FG_OK ? st : render_gemv(em, &gg);
}

/* ---- checks ------------------------------------------------------------------ */

static int cand_geometry(const fg_tcand *c, gemm_geom *gg, char *why, size_t whysz)
{
    /* the epilogue computes element-wise nodes only: a row op after the
     * matmul (a softmax) needs its own template (gemm_softmax) */
    for (int i = 1; i < c->nnodes; i++) {
        const fg_node *nd = &c->g->nodes[c->nodes[i]];
        if (fg_kind(nd->op->kind)->role != FG_ROLE_ELEMENTWISE && !nd->folded) {
            snprintf(why, whysz, "%s (op %s) after the matmul is not element-wise", nd->name, nd->op->name);
            return 0;
        }
    }
    return gemm_geometry(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, gg, why, whysz);
}

static int check_gemm(const fg_tcand *c, char *why, size_t whysz)
{
    gemm_geom gg;
    return cand_geometry(c, &gg, why, whysz);
}

/* Tensor cores: A, B and Y of one dtype, fp16 or bf16, or fp32 when the
 * graph's precision is tf32 (exact fp32 never runs on tensor cores). */
static int tc_ok(const fg_tcand *c, gemm_geom *gg, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *A = &c->g->tensors[nd->inputs[0]], *B = &c->g->tensors[nd->inputs[1]];
    const fg_tensor *Y = &c->g->tensors[nd->output];
    if (A->dtype != Y->dtype || B->dtype != Y->dtype) {
        snprintf(why, whysz, "operands %s and %s, output %s (needs one dtype)", fg_dtype_name(A->dtype),
                 fg_dtype_name(B->dtype), fg_dtype_name(Y->dtype));
        return 0;
    }
    if (Y->dtype == FG_DTYPE_F32 && c->g->precision != FG_PRECISION_TF32) {
        snprintf(why, whysz, "fp32 with precision %s (fp32 runs on tensor cores only with precision tf32)",
                 fg_precision_name(c->g->precision));
        return 0;
    }
    return cand_geometry(c, gg, why, whysz);
}

static int check_gemm_tc(const fg_tcand *c, char *why, size_t whysz)
{
    gemm_geom gg;
    return tc_ok(c, &gg, why, whysz);
}

/* Split-K: when the rows are few (M <= 16, a matrix-vector product) or the
 * plain tiles would leave SMs idle, and the reduction is long enough for two
 * splits of TC_MIN_KT_SPLIT k tiles. */
static int check_gemm_tc_splitk(const fg_tcand *c, char *why, size_t whysz)
{
    gemm_geom gg;
    if (!tc_ok(c, &gg, why, whysz))
        return 0;
    fg_dtype dt = c->g->tensors[c->g->nodes[c->anchor].output].dtype;
    tc_shape s = tc_shape_of(&gg, dt);
    int64_t blocks = tc_blocks(tc_default_tile(&s), &s);
    if (s.M > 16 && blocks >= TC_TARGET_SMS) {
        snprintf(why, whysz, "M %" PRId64 " > 16 and %" PRId64 " blocks without a split fill %d SMs", s.M, blocks,
                 TC_TARGET_SMS);
        return 0;
    }
    if (s.KT < 2 * TC_MIN_KT_SPLIT) {
        snprintf(why, whysz, "K %" PRId64 " is %" PRId64 " k tiles (a split needs %d each)", gg.d.K, s.KT,
                 TC_MIN_KT_SPLIT);
        return 0;
    }
    return 1;
}

static void describe_gemm_tc(const fg_tcand *c, char *buf, size_t size)
{
    gemm_geom gg;
    char why[256];
    buf[0] = 0;
    if (c->anchor < 0 || !tc_ok(c, &gg, why, sizeof why))
        return;
    fg_dtype dt = c->g->tensors[c->g->nodes[c->anchor].output].dtype;
    tc_shape s = tc_shape_of(&gg, dt);
    const tc_tile *t = tc_default_tile(&s);
    snprintf(buf, size, "tile %d x %d (M %" PRId64 ", N %" PRId64 ", K %" PRId64 ", batch %" PRId64 ": %" PRId64
             " blocks for %d SMs)", t->bm, t->bn, s.M, s.N, gg.d.K, s.batch, tc_blocks(t, &s), TC_TARGET_SMS);
}

static void describe_gemm_tc_splitk(const fg_tcand *c, char *buf, size_t size)
{
    gemm_geom gg;
    char why[256];
    buf[0] = 0;
    if (c->anchor < 0 || !tc_ok(c, &gg, why, sizeof why))
        return;
    fg_dtype dt = c->g->tensors[c->g->nodes[c->anchor].output].dtype;
    tc_shape s = tc_shape_of(&gg, dt);
    const tc_tile *t;
    int splits, used;
    int64_t kts;
    tc_split_choice(&s, dt == FG_DTYPE_F32 ? 4 : 2, &t, &splits);
    tc_split_shape(s.KT, splits, &kts, &used);
    snprintf(buf, size, "tile %d x %d, split-K %d (M %" PRId64 ", N %" PRId64 ", K %" PRId64 ", batch %" PRId64
             ": %" PRId64 " tiles x %d = %" PRId64 " blocks for %d SMs; fixed-order reduction)", t->bm, t->bn, used,
             s.M, s.N, gg.d.K, s.batch, tc_blocks(t, &s), used, tc_blocks(t, &s) * used, TC_TARGET_SMS);
}

/* gemv: fp32 operands and output in exact precision (with tf32 the
 * tensor-core templates take fp32), at most GV_MAX_M rows (a matrix-vector
 * product or a handful of rows). */
static int gv_ok(const fg_tcand *c, gemm_geom *gg, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *A = &c->g->tensors[nd->inputs[0]], *B = &c->g->tensors[nd->inputs[1]];
    if (A->dtype != FG_DTYPE_F32 || B->dtype != FG_DTYPE_F32) {
        snprintf(why, whysz, "operands %s and %s (gemv takes fp32)", fg_dtype_name(A->dtype), fg_dtype_name(B->dtype));
        return 0;
    }
    if (c->g->precision == FG_PRECISION_TF32) {
        snprintf(why, whysz, "precision tf32 (fp32 then runs on tensor cores)");
        return 0;
    }
    if (!cand_geometry(c, gg, why, whysz))
        return 0;
    if (gg->d.M > GV_MAX_M) {
        snprintf(why, whysz, "M %" PRId64 " > %d", gg->d.M, GV_MAX_M);
        return 0;
    }
    return 1;
}

static int check_gemv(const fg_tcand *c, char *why, size_t whysz)
{
    gemm_geom gg;
    return gv_ok(c, &gg, why, whysz);
}

static void describe_gemv(const fg_tcand *c, char *buf, size_t size)
{
    gemm_geom gg;
    char why[256];
    buf[0] = 0;
    if (c->anchor < 0 || !gv_ok(c, &gg, why, sizeof why))
        return;
    gv_shape s = gv_default(&gg);
    snprintf(buf, size, "%d columns per block, %d warps, split-K %d (M %" PRId64 ", N %" PRId64 ", K %" PRId64
             ", batch %" PRId64 ": %" PRId64 " blocks for %d SMs; fixed-order reductions)", s.slice, s.warps, s.splits,
             gg.d.M, gg.d.N, gg.d.K, gg.d.batch, s.slices * gg.d.batch * s.splits, TC_TARGET_SMS);
}

/* ---- the rows ------------------------------------------------------------------ */

static const int64_t simt_mn[] = {16, 32, 64, 128, 0}, simt_k[] = {8, 16, 32, 0};
static const fg_tile_key tiles_simt[] = {
    {.name = "tile_m", .min = 16, .max = 128, .values = simt_mn},
    {.name = "tile_n", .min = 16, .max = 128, .values = simt_mn},
    {.name = "tile_k", .min = 8, .max = 32, .values = simt_k},
    {0},
};
/* tile_m x tile_n is one of tc_tiles, which the emitter checks */
static const int64_t tc_stages[] = {3, 4, 0};
static const fg_tile_key tiles_tc[] = {
    {.name = "tile_m", .min = 16, .max = 128},
    {.name = "tile_n", .min = 32, .max = 128},
    {.name = "stages", .min = 3, .max = 4, .values = tc_stages},
    {.name = "split_k", .min = 1, .max = TC_MAX_SPLITS},
    {0},
};
static const fg_tile_key tiles_gemv[] = {
    {.name = "split_k", .min = 1, .max = GV_MAX_SPLITS},
    {0},
};

#define TC_MAP_REFUSAL "it loads 16-byte vectors of its operands (cp.async, ldmatrix)"

static const fg_template rows[] = {
    {.name = "gemm", .family = "gemm", .order = 30, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_MATMUL,
     .dtypes = 1u << FG_DTYPE_F32, .priority = 0, .tiles = tiles_simt, .check = check_gemm, .emit = emit_gemm,
     .summary = "fp32 GEMM on shared-memory tiles (SIMT)"},
    {.name = "gemm_tc", .family = "gemm", .order = 31, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_MATMUL,
     .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 10, .tiles = tiles_tc,
     .map_refusal = TC_MAP_REFUSAL, .check = check_gemm_tc, .describe = describe_gemm_tc, .emit = emit_gemm_tc,
     .summary = "GEMM on tensor cores: fp16/bf16 (mma m16n8k16), fp32 with precision tf32 (m16n8k8); ldmatrix, 3-4 "
                "stage cp.async pipeline, fp32 accumulation"},
    {.name = "gemm_tc_splitk", .family = "gemm", .order = 32, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_MATMUL,
     .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 15, .tiles = tiles_tc,
     .map_refusal = TC_MAP_REFUSAL, .check = check_gemm_tc_splitk, .describe = describe_gemm_tc_splitk,
     .emit = emit_gemm_tc_splitk,
     .summary = "gemm_tc with the reduction split across blocks (M <= 16, or too few tiles to fill the SMs); "
                "deterministic fixed-order sum in a workspace, epilogue once"},
    {.name = "gemv", .family = "gemm", .order = 34, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_MATMUL,
     .dtypes = 1u << FG_DTYPE_F32, .priority = 12, .tiles = tiles_gemv, .check = check_gemv,
     .describe = describe_gemv, .emit = emit_gemv,
     .summary = "exact fp32 GEMV / small-M GEMM (M <= 16): a block per column slice, K split across warps and, when "
                "the slices leave SMs idle, across blocks; fixed-order sums, epilogue once"},
};
FG_TEMPLATE_FAMILY(gemm, rows);
