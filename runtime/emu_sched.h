/*
 * emu_sched.h -- the scheduler of the CPU emulation backend: runs the blocks
 * of a grid one after another and the threads of a block as cooperative
 * contexts (ucontext) that switch only at barriers and warp collectives.  It
 * also holds each thread's outstanding cp.async copies, which land in shared
 * memory only at the thread's matching wait.
 *
 * struct fg_emu_api, the table a kernel's shared object calls, is declared
 * once for this side and the emulation prelude in templates/emu_api.h; the
 * kernel checks version and size when it is bound.
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

#include "../templates/emu_api.h"   /* fg_emu_api, shared with the emulation prelude */

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

/* With seed != 0 the scheduler runs a pseudo-random ready thread (a
 * generator started from seed) instead of the longest-waiting one, so that
 * interleavings the first-in, first-out order never makes (one warpgroup
 * running ahead of another) occur; 0 restores that order.  A kernel
 * correct on the device is correct under any seed. */
void fg_emu_sched_set_shuffle(fg_emu_sched *s, uint64_t seed);

/* Runs the whole grid.  Returns 0, or -1 with a message in err (which names
 * the block and thread where that is known). */
int fg_emu_sched_run(fg_emu_sched *s, fg_emu_entry entry, const void *params, const unsigned grid[3],
                     const unsigned block[3], char *err, size_t errsize);

#endif /* FG_EMU_SCHED_H */
