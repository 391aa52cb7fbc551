/*
 * emu_api.h -- the interface between the CPU emulation runtime
 * (runtime/emu_sched.c, emu_tmap.c) and the emulation prelude
 * (templates/prelude_emu.h): the table of scheduler entry points a kernel's
 * shared object receives from fg_emu_bind, the operation codes passed
 * through it, and the layout of an emulated tensor map.  One header, valid C11
 * and C++17: the runtime includes it from the source tree, the emulation
 * build writes it beside the prelude as "fusegen_emu_api.h" (and its text is
 * part of the emulated kernel's cache key).
 *
 * Change FG_EMU_API_VERSION with the table (the kernel's fg_emu_bind also
 * checks its size), and the magic word of the tensor map with its layout.
 */
#ifndef FG_EMU_API_H
#define FG_EMU_API_H

#include <stdint.h>

#define FG_EMU_API_VERSION 4

/* Warp collective operations (the op of fg_emu_api.warp). */
enum {
    FG_EMU_WOP_SHFL_XOR = 1,
    FG_EMU_WOP_SHFL_DOWN,
    FG_EMU_WOP_SHFL_IDX,
    FG_EMU_WOP_MMA_F16,
    FG_EMU_WOP_MMA_BF16,
    FG_EMU_WOP_LDMATRIX_X4,
    FG_EMU_WOP_LDMATRIX_X4_TRANS,
    FG_EMU_WOP_MMA_TF32
};

/* wgmma operand types (the kind of fg_emu_api.wgmma). */
enum { FG_EMU_WGMMA_F16 = 1, FG_EMU_WGMMA_BF16, FG_EMU_WGMMA_TF32 };

/* The running thread's indices. */
typedef struct fg_emu_tinfo {
    unsigned tid[3];
    unsigned lane, warp;
} fg_emu_tinfo;

typedef struct fg_emu_api {
    unsigned version, size;
    const fg_emu_tinfo *cur;         /* the running thread */
    unsigned bid[3], bdim[3], gdim[3];
    void (*sync)(void);
    /* Warp collective: deposits in (nin words) with a per-lane argument,
     * waits for the warp, writes this lane's result (nout words) to out. */
    void (*warp)(int op, int arg, const uint32_t *in, int nin, uint32_t *out, int nout);
    /* Aborts the launch with a message (does not return). */
    void (*fail)(const char *msg);
    /* cp.async: queues a 16-byte copy (src NULL: 16 zero bytes) in the
     * running thread's open group; commit closes the group; wait(n) lands
     * every copy of the thread's committed groups but the n most recent
     * (n < 0: commit, then land everything). */
    void (*cp_async)(void *dst, const void *src);
    void (*cp_commit)(void);
    void (*cp_wait)(int n);
    /* Hopper (docs/emulation.md, "Hopper primitives").  mbarrier: init with
     * an arrival count; one arrival, after raising the expected transaction
     * bytes by tx when expect is set; wait until the phase of this parity
     * has completed (blocks the thread; lands the barrier's TMA copies). */
    void (*mbar_init)(void *bar, unsigned count);
    void (*mbar_arrive)(void *bar, int expect, unsigned tx);
    void (*mbar_wait)(void *bar, unsigned parity);
    /* TMA: reads the box of a rank-`rank` map at coordinates coord now,
     * lands it (and signals its bytes on bar) only when the barrier is
     * waited on. */
    void (*tma_load)(void *dst, const void *map, int rank, const int *coord, void *bar);
    /* fence.proxy.async: generic shared-memory writes become visible to
     * later async-proxy reads (wgmma operands). */
    void (*fence_proxy_async)(void);
    /* wgmma: queues D = A*B (+ D) in the thread's open group (kind
     * FG_EMU_WGMMA_*); fence; commit; wait(n) is a warpgroup rendezvous that
     * lands every group but the n most recent. */
    void (*wgmma)(int kind, int bn, int trans_b, uint64_t desc_a, uint64_t desc_b, int accumulate, float *d);
    void (*wgmma_fence)(void);
    void (*wgmma_commit)(void);
    void (*wgmma_wait)(int n);
} fg_emu_api;

/* "FGTMAPE2": bump the last character when the layout below changes. */
#define FG_EMU_TMAP_MAGIC 0x324550414d544746ull
/* Axes of an emulated tensor map (FG_TMAP_MAX_RANK, runtime/tmap.h). */
#define FG_EMU_TMAP_RANK 5

/* The 128 bytes of an emulated tensor map, written by fg_emu_tmap_encode
 * (runtime/emu_tmap.c) and read by the emulated TMA copy. */
typedef struct fg_emu_tmap {
    uint64_t magic;                          /* FG_EMU_TMAP_MAGIC */
    uint64_t base;                           /* host address of element (0, ...) */
    uint64_t dim[FG_EMU_TMAP_RANK];          /* elements per axis, axis 0 contiguous */
    uint64_t stride[FG_EMU_TMAP_RANK - 1];   /* bytes between indices of axes 1.. */
    uint32_t elem_bytes;                     /* 2 or 4 */
    uint32_t swizzle;                        /* 0, 32, 64 or 128 (the span in bytes) */
    uint16_t box[FG_EMU_TMAP_RANK];          /* box extent per axis */
    uint8_t rank;                            /* 1..5 */
    uint8_t estride[FG_EMU_TMAP_RANK];       /* traversal step per axis */
    uint64_t check;                          /* fg_emu_tmap_check_word of the 112 bytes above */
    uint64_t reserved;                       /* zero */
} fg_emu_tmap;

#endif /* FG_EMU_API_H */
