/*
 * exec.h -- the plan executor behind fg_plan_compile / fg_exec_run.
 *
 * A compiled plan (struct fg_exec) holds one emitted and compiled kernel per
 * group, the folded weights converted to each tensor's dtype and layout, and
 * one arena for the intermediates.  Intermediates are placed by liveness: a
 * tensor is live from the kernel that writes it to the last kernel that reads
 * it, and a first-fit free list over byte offsets reuses the space of dead
 * ones (a kernel's output never shares memory with any tensor it reads).
 * Graph inputs and outputs are bound per run.
 *
 * Emulation buffers the executor owns (weights, arena slots) are followed by
 * a guard zone of FG_EXEC_GUARD bytes; every emulated kernel launch is
 * followed by a guard check, so an out-of-bounds write names the kernel and
 * the tensor it overran.
 */
#ifndef FG_EXEC_H
#define FG_EXEC_H

#include "emit.h"
#include "tmap.h"

#define FG_EXEC_ALIGN 256
#define FG_EXEC_GUARD 64

/* Where a plan-graph tensor's data lives during a run. */
typedef enum fg_exec_place {
    FG_PLACE_NONE = 0,      /* not touched by any kernel */
    FG_PLACE_INPUT,         /* bound by the caller */
    FG_PLACE_OUTPUT,        /* bound by the caller */
    FG_PLACE_WEIGHT,        /* the weight block, at offset */
    FG_PLACE_ARENA,         /* the intermediate arena, at offset */
    FG_PLACE_VIEW,          /* inside another tensor's storage (a concat input written in place),
                               at offset from the start of that root tensor */
    FG_PLACE_COUNT
} fg_exec_place;

/* Arena placement of intermediates: first-fit over byte offsets.  Exposed for
 * tests.  A free list of [offset, size) holes below `top`; peak = max top. */
typedef struct fg_arena {
    size_t *off, *size;     /* free holes, sorted by offset */
    int n, cap;
    size_t top;             /* end of the highest allocation */
    size_t peak;
} fg_arena;

size_t fg_arena_alloc(fg_arena *a, size_t bytes);
void fg_arena_release(fg_arena *a, size_t off, size_t bytes);
void fg_arena_free(fg_arena *a);

/* The tensor map that kernel parameter description m (emit.h) makes over
 * the tensor at device address base. */
fg_tmap_desc fg_exec_tmap_desc(const fg_kparam_tmap *m, uint64_t base);

/* Internal queries used by `fusegen run` and the tests. */
struct fg_exec;
/* Plan-graph tensor index of graph input/output i. */
int fg_exec_input_tensor(const struct fg_exec *e, int i);
int fg_exec_output_tensor(const struct fg_exec *e, int i);
/* Placement of a plan-graph tensor (FG_PLACE_*) and its offset in its block. */
fg_exec_place fg_exec_tensor_place(const struct fg_exec *e, int tensor, size_t *offset);
/* Sum of the sizes of every arena-placed intermediate (without reuse). */
size_t fg_exec_intermediate_bytes(const struct fg_exec *e);
/* Milliseconds of the last run as a whole (CUDA events or wall clock); -1 if
 * timing was off. */
double fg_exec_total_ms(const struct fg_exec *e);
/* How many tensor maps the exec has had its backend encode, all runs
 * together: each map once per address of its tensor (for tests). */
uint64_t fg_exec_tmap_encodes(const struct fg_exec *e);
/* The emitted kernel i (its group, params, source). */
const fg_kernel *fg_exec_kernel(const struct fg_exec *e, int i);

#endif /* FG_EXEC_H */
