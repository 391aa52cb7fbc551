/*
 * jit.h -- NVRTC compilation of emitted kernels through the kernel cache.
 *
 * Cache key = XXH3-128 over: generator version, the kernel's deps_hash (rule,
 * op and hook files), NVRTC version, target arch, compile options and the full
 * source.  Lookup: memory cache, disk cache, then NVRTC.  A compile failure
 * records NVRTC's log, the offending lines of the generated source and the
 * rule that produced the kernel.
 */
#ifndef FG_JIT_H
#define FG_JIT_H

#include "emit.h"

typedef enum fg_jit_source {
    FG_JIT_MEMORY = 0,
    FG_JIT_DISK,
    FG_JIT_COMPILED,
    FG_JIT_SOURCE_COUNT
} fg_jit_source;

typedef struct fg_jit_info {
    fg_jit_source from;
    double seconds;        /* time spent obtaining the binary */
    size_t size;
    char log[1024];        /* NVRTC warnings, if any (empty when none) */
} fg_jit_info;

/* The arch to compile for: ctx option, else the GPU's, else $FUSEGEN_ARCH, else "sm_90". */
const char *fg_jit_arch(fg_context *ctx);
/* Compiles (or finds) k's cubin for arch; fills k->key, k->binary, k->binary_size. */
fg_status fg_jit_compile(fg_context *ctx, fg_kernel *k, const char *arch, fg_jit_info *info);
/* Compiles n kernels on a thread pool of ctx->opts.jobs threads (progress line
 * on a terminal).  infos may be NULL.  Returns the first failure's status. */
fg_status fg_jit_compile_all(fg_context *ctx, fg_kernel *ks, int n, const char *arch, fg_jit_info *infos);
/* FG_OK when arch names a target this NVRTC supports (sm_NN or compute_NN,
 * optionally with an a/f suffix); else records FG_ERR_INPUT "unknown arch 'sm_9'". */
fg_status fg_jit_check_arch(fg_context *ctx, const char *arch);
/* "NVRTC 13.0" */
const char *fg_nvrtc_version(void);
/* The context's cache (opened on first use). */
struct fg_cache *fg_ctx_cache(fg_context *ctx);

#endif /* FG_JIT_H */
