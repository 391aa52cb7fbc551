/*
 * runtime.h -- the runtime's per-context state (ctx->rt): the kernel cache
 * and the resolved target arch.  Created on first use by fg_rt() and released
 * by fg_runtime_free() from fg_context_free().  (The CUDA driver's state is
 * per process, in cuda.c; emulation state lives in each kernel's handle.)
 */
#ifndef FG_RUNTIME_H
#define FG_RUNTIME_H

#include <pthread.h>

#include "cache.h"
#include "context.h"

struct fg_runtime {
    pthread_mutex_t lock;       /* guards the lazily created fields below (not ctx->lock) */

    /* ---- kernel cache and JIT (cache.c, jit.c) ---- */
    fg_cache *cache;            /* opened by fg_ctx_cache() on first use */
    int cache_opened;           /* nonzero once fg_ctx_cache() ran (cache may still be NULL) */
    char arch[32];              /* fg_jit_arch(): resolved once, "" until then */
};

/* The context's runtime state, created on first call (thread-safe). */
struct fg_runtime *fg_rt(fg_context *ctx);
/* Frees ctx->rt and everything it holds; ctx->rt becomes NULL.  Called by
 * fg_context_free(). */
void fg_runtime_free(fg_context *ctx);

/* Device query (cuda.c): writes the current GPU's arch ("sm_90") into out and
 * returns 0, or returns nonzero when no driver or GPU is present. */
int fg_cuda_device_arch(fg_context *ctx, char out[16]);

#endif /* FG_RUNTIME_H */
