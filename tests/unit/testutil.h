/*
 * testutil.h -- helpers shared by the cmocka unit tests.  Include after
 * <cmocka.h>'s prerequisites (stdarg, stddef, setjmp, stdint).
 */
#ifndef FG_TESTUTIL_H
#define FG_TESTUTIL_H

#include "context.h"
#include "emit.h"
#include "report_sass.h"

/* The float dtypes (fp32, fp16, bf16: the first of fg_dtype), which the
 * arithmetic templates take and the numerics cases sweep. */
#define TU_FLOAT_DTYPES 3
FG_STATIC_ASSERT(FG_DTYPE_BF16 == TU_FLOAT_DTYPES - 1, "the float dtypes come first in fg_dtype");

/* Absolute path of a file in the source tree (static buffer per call slot). */
const char *tu_src(const char *rel);
/* Creates a fresh temporary directory; returns its malloc'd path. */
char *tu_tmpdir(void);
/* Writes text to dir/name (creating dir); returns the malloc'd full path. */
char *tu_write(const char *dir, const char *name, const char *text);
/* Removes a directory tree (rm -rf). */
void tu_rmtree(const char *dir);
/* A fresh temporary directory holding copies of the shipped vocabulary
 * (rules/ops.yaml, rules/pointwise.yaml) and no fusion rules; malloc'd path. */
char *tu_vocab_dir(void);
/* "rule:node1,node2" of the plan group holding node `name` ("-" for no rule);
 * fails the test when the node is in no group.  Static buffer. */
const char *tu_group_desc(const fg_context *ctx, const fg_plan *p, const char *name);
/* Compiles plan p for the emulation backend; a failure prints the
 * context's errors and fails the test. */
struct fg_exec *tu_compile_emu(fg_context *ctx, const fg_plan *p);
/* Runs compiled plan e of source graph g once on seeded random inputs
 * (rounded to each input's dtype) with NaN-poisoned outputs, and asserts that
 * every output is within relative L2 `tol` of the host reference of g. */
void tu_exec_vs_reference(fg_context *ctx, const fg_graph *g, struct fg_exec *e, uint64_t seed, double tol);
/* Sets special values in the inputs before a run (NULL: none). */
typedef void (*tu_poke_fn)(const fg_graph *g, double **vals);
typedef struct tu_cmp {
    double rel;           /* relative L2 over the elements that are not NaN in the reference */
    int64_t nan_ref, nan_mismatch, inf_mismatch;
} tu_cmp;
/* Runs compiled plan e (one output) of graph g on seeded random inputs
 * (rounded to the dtype; poke sets special values), the output poisoned with
 * NaN, and compares the output with the reference: NaN where the reference
 * is NaN and nowhere else, the same infinities, relative L2 over the rest. */
void tu_exec_compare(fg_context *ctx, const fg_graph *g, struct fg_exec *e, tu_poke_fn poke, uint64_t seed,
                     tu_cmp *res);
/* A context with no rules loaded (quiet warnings). */
fg_context *tu_ctx_empty(void);
/* A context with the shipped rules/ loaded; fails the test if they do not load. */
fg_context *tu_ctx_shipped(void);
/* Nonzero when some recorded error's formatted text contains needle. */
int tu_has_error(const fg_context *ctx, const char *needle);
/* Prints all recorded errors to stderr (for failing tests). */
void tu_dump_errors(const fg_context *ctx);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd), returns
 * the exit status (0..255) or -1. */
int tu_run(const char *cmd, char **out);

/* ---- kernels run by the emulator outside the executor ---- */

/* The launch arguments of kernel k (emitted from plan graph pg, built for
 * the emulator), bound as the executor binds them: one malloc'd (16-byte
 * aligned) buffer per tensor parameter -- the output poisoned with 0xff
 * bytes (NaN in every dtype), inputs packed from ref[] (values of the
 * source graph src, looked up by tensor name), weights from pg's values --
 * workspaces zeroed once, scalars by value. */
typedef struct tu_kargs {
    uint64_t args[FG_MAX_KPARAMS];
    void *bufs[FG_MAX_KPARAMS];
    int out_slot;          /* the parameter the kernel writes */
    int has_workspace;     /* a split-K workspace (counters must return to zero) */
} tu_kargs;

void tu_kargs_init(tu_kargs *a, const fg_kernel *k, const fg_graph *pg, const fg_graph *src,
                   double *const *ref);
/* Poisons the output buffer again (before a further launch). */
void tu_kargs_poison(tu_kargs *a, const fg_kernel *k, const fg_graph *pg);
void tu_kargs_free(tu_kargs *a);

/* Runs group 0 of plan p (planned from src) with the first `from` of its
 * source replaced by `to` (NULL: unmutated), launched directly in the
 * emulator (tensor maps included) on fresh inputs of `seed`; returns the
 * output's relative L2 error against src's reference (INFINITY for NaN), or
 * -1 when the launch failed. */
double tu_mutated_rel_l2(fg_context *ctx, const fg_plan *p, const fg_graph *src, const char *from, const char *to,
                         uint64_t seed);

/* ---- NVRTC and NVIDIA's binary tools, no GPU needed ---- */

/* Compiles ks[0..nk) with NVRTC for sm_80 and for sm_90 and returns how
 * many of the 2 * nk compiles produced a cubin with an empty log (no error,
 * no warning); each other one's log and source go to stderr. */
int tu_nvrtc_clean(fg_context *ctx, fg_kernel *ks, int nk);
/* Nonzero when cuobjdump and nvdisasm are found (runtime/cuda_tools.h);
 * otherwise prints "<what> NOT RUN: ... not found ..." for the test log
 * and returns 0, and the caller skips. */
int tu_cuda_tools_found(const char *what);
/* Reads the cubin of kernel k (k->binary, one arch): its function's line
 * of `cuobjdump -res-usage` into *res and the instruction mix of its SASS
 * (`nvdisasm -c`) into *mix; the SASS text into *sass (malloc'd) unless
 * sass is NULL.  Fails the test when a tool fails or lists no function. */
void tu_cubin_read(const fg_kernel *k, fg_res_usage *res, fg_sass_mix *mix, char **sass);

#endif
