/*
 * runtime.h -- the runtime's per-context state (ctx->rt): the kernel cache
 * and the resolved target arch.  Created on first use by fg_rt(), which
 * registers its release with the context (fg_ctx_on_free), so that freeing
 * the context frees it without codegen/ calling into runtime/.  (The CUDA
 * driver's state is per process, in cuda.c; a loaded kernel's state lives in
 * its handle.)
 */
#ifndef FG_RUNTIME_H
#define FG_RUNTIME_H

#include <pthread.h>

#include "cache.h"
#include "context.h"

struct fg_runtime {
    pthread_mutex_t lock;       /* guards the lazily created fields below (not ctx->lock) */

    /* ---- kernel cache and JIT (cache.c, kcache.c, jit.c) ---- */
    fg_cache *cache;            /* opened by fg_ctx_cache() on first use */
    int cache_opened;           /* nonzero once fg_ctx_cache() ran (cache may still be NULL) */
    char arch[32];              /* fg_jit_arch(): resolved once, "" until then */

    /* ---- the remote tier and the per-tier counters (remote_cache.c) ---- */
    struct fg_tiers *tiers;     /* created by fg_ctx_remote() on first use; freed by its own teardown */
};

/* The context's runtime state, created on first call (thread-safe). */
struct fg_runtime *fg_rt(fg_context *ctx);

/* Device query (cuda.c): writes the current GPU's arch ("sm_90") into out and
 * returns 0, or returns nonzero when no driver or GPU is present. */
int fg_cuda_device_arch(fg_context *ctx, char out[16]);

#endif /* FG_RUNTIME_H */
