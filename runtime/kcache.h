/*
 * kcache.h -- how a kernel's binary is obtained, written once for every
 * backend: key -> memory cache -> disk cache -> remote cache -> compile ->
 * store.
 *
 * The backend's toolchain gives the key (backend.h); fg_cache_fetch looks it
 * up in memory, then on disk; then the remote tier asks the fleet's server
 * when there is one (remote_cache.h; a hit is written back to memory and
 * disk); on a miss the backend compiles, and the binary is stored in memory,
 * on disk and (read-write mode) in the remote tier, with a metadata text
 * (fg_meta_put lines: kernel name, compiler, its log) so that a later hit
 * reports the same compiler warnings.  A compile failure stores nothing.
 */
#ifndef FG_KCACHE_H
#define FG_KCACHE_H

#include "backend.h"
#include "cache.h"

typedef enum fg_jit_source {
    FG_JIT_MEMORY = 0,
    FG_JIT_DISK,
    FG_JIT_COMPILED,
    FG_JIT_REMOTE,         /* the remote tier (remote_cache.h) */
    FG_JIT_SHARED,         /* another kernel of the batch had the same key: its binary, copied */
    FG_JIT_SOURCE_COUNT
} fg_jit_source;

typedef struct fg_jit_info {
    fg_jit_source from;
    double seconds;        /* time spent obtaining the binary */
    size_t size;
    char log[1024];        /* compiler warnings, if any (empty when none) */
} fg_jit_info;

/* Finds or compiles k's binary for backend be: fills k->key, k->binary and
 * k->binary_size (an older binary is freed).  target: the CUDA arch (NULL:
 * the context's); emulation ignores it.  info may be NULL. */
fg_status fg_kernel_obtain(fg_context *ctx, const fg_backend *be, fg_kernel *k, const char *target, fg_jit_info *info);
/* The same for n kernels on a thread pool of ctx->opts.jobs threads (all
 * cores when 0), with a progress line on a terminal.  infos may be NULL.
 * Every kernel is attempted; returns the first failure's status. */
fg_status fg_kernel_obtain_all(fg_context *ctx, const fg_backend *be, fg_kernel *ks, int n, const char *target,
                               fg_jit_info *infos);

/* The context's kernel cache, opened on first use with the context's
 * settings (directory, size limit).  Thread-safe. */
fg_cache *fg_ctx_cache(fg_context *ctx);

/* Appends "name=value\n" to a metadata text, newlines and backslashes
 * escaped. */
void fg_meta_put(fg_buf *b, const char *name, const char *value);
/* The unescaped value of name in a metadata text into out ("" when absent). */
void fg_meta_value(const char *meta, const char *name, char *out, size_t size);

#endif /* FG_KCACHE_H */
