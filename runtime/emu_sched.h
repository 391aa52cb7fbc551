/*
 * emu_sched.h -- the scheduler of the CPU emulation backend: runs the blocks
 * of a grid one after another and the threads of a block as cooperative
 * contexts (ucontext) that switch only at barriers and warp collectives.  It
 * also holds each thread's outstanding cp.async copies, which land in shared
 * memory only at the thread's matching wait.
 *
 * struct fg_emu_api is shared with the emulation prelude
 * (templates/prelude_emu.h), which declares the same layout; the kernel's
 * shared object checks version and size when it is bound.
 *
 * Hopper kernels add mbarriers (arrival counts, phases, transaction bytes),
 * TMA box copies that land when their barrier is waited on, the warpgroup
 * MMA (wgmma) whose operands are read and accumulators written at the
 * covering wait, and the generic / async proxy fence.
 */
#ifndef FG_EMU_SCHED_H
#define FG_EMU_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define FG_EMU_API_VERSION 4

/* Warp collective operations (same values in the prelude). */
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

typedef struct fg_emu_tinfo {
    unsigned tid[3];
    unsigned lane, warp;
} fg_emu_tinfo;

typedef struct fg_emu_api {
    unsigned version, size;
    const fg_emu_tinfo *cur;
    unsigned bid[3], bdim[3], gdim[3];
    void (*sync)(void);
    void (*warp)(int op, int arg, const uint32_t *in, int nin, uint32_t *out, int nout);
    void (*fail)(const char *msg);
    /* cp.async: queue a 16-byte copy (src NULL: zeros) in the running
     * thread's open group; close the group; land all but the n most recent
     * committed groups (n < 0: commit, then land everything). */
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

/* wgmma operand types (same values in the prelude). */
enum { FG_EMU_WGMMA_F16 = 1, FG_EMU_WGMMA_BF16, FG_EMU_WGMMA_TF32 };

typedef void (*fg_emu_entry)(const void *params);

/* The per-kernel scheduler state: stacks are kept between launches.  Not
 * thread-safe: callers serialize launches of one scheduler. */
typedef struct fg_emu_sched fg_emu_sched;

/* stack_bytes: per thread (the context's FUSEGEN_EMU_STACK_KB); 0: 64 KiB. */
fg_emu_sched *fg_emu_sched_new(size_t stack_bytes);
void fg_emu_sched_free(fg_emu_sched *s);
/* The table to hand to the kernel's fg_emu_bind (owned by s). */
fg_emu_api *fg_emu_sched_api(fg_emu_sched *s);
/* Memory poisoned with 0xff before every block (the kernel's shared arrays). */
void fg_emu_sched_set_shared(fg_emu_sched *s, void *begin, void *end);
/* Barrier divergence (threads of a block passing different numbers of
 * fg_sync() calls) is an error when strict; otherwise exited threads simply
 * stop counting, as on the device. */
void fg_emu_sched_set_strict(fg_emu_sched *s, int strict);

/* Runs the whole grid.  Returns 0, or -1 with a message in err (which names
 * the block and thread where that is known). */
int fg_emu_sched_run(fg_emu_sched *s, fg_emu_entry entry, const void *params, const unsigned grid[3],
                     const unsigned block[3], char *err, size_t errsize);

#endif /* FG_EMU_SCHED_H */
