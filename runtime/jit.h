/*
 * jit.h -- the NVRTC side of the CUDA backend: the target arch, and the
 * toolchain entries (key, compile) that kcache.c drives for backend_cuda.c.
 *
 * Cache key = XXH3-128 over: generator version, the kernel's deps_hash (rule,
 * op and hook files), NVRTC version, target arch, compile options and the full
 * source.  Lookup: memory cache, disk cache, then NVRTC (kcache.h).  A compile
 * failure records NVRTC's log, the offending lines of the generated source and
 * the rule that produced the kernel.
 */
#ifndef FG_JIT_H
#define FG_JIT_H

#include "kcache.h"

/* The arch to compile for: ctx option, else the GPU's, else $FUSEGEN_ARCH, else "sm_90". */
const char *fg_jit_arch(fg_context *ctx);
/* Compiles (or finds) k's cubin for arch (NULL: fg_jit_arch); fills k->key,
 * k->binary, k->binary_size.  fg_kernel_obtain on the CUDA backend. */
fg_status fg_jit_compile(fg_context *ctx, fg_kernel *k, const char *arch, fg_jit_info *info);
/* Compiles n kernels on a thread pool of ctx->opts.jobs threads (progress line
 * on a terminal).  infos may be NULL.  Returns the first failure's status. */
fg_status fg_jit_compile_all(fg_context *ctx, fg_kernel *ks, int n, const char *arch, fg_jit_info *infos);
/* FG_OK when arch names a target this NVRTC supports (sm_NN or compute_NN,
 * optionally with an a/f suffix); else records FG_ERR_INPUT "unknown arch 'sm_9'". */
fg_status fg_jit_check_arch(fg_context *ctx, const char *arch);
/* "NVRTC 13.0" */
const char *fg_nvrtc_version(void);

/* ---- toolchain entries of the CUDA backend (backend.h) ---- */
fg_status fg_nvrtc_toolchain_new(fg_context *ctx, const char *arch, void **tc);
void fg_nvrtc_toolchain_free(void *tc);
void fg_nvrtc_key(const void *tc, const fg_kernel *k, char key[33]);
/* FUSEGEN_DUMP_SOURCE: a copy of the source and the prelude in that directory. */
void fg_nvrtc_dump(fg_context *ctx, const void *tc, const fg_kernel *k);
fg_status fg_nvrtc_compile(fg_context *ctx, const void *tc, const fg_kernel *k, void **bin, size_t *size, char **meta,
                           char **log);

#endif /* FG_JIT_H */
