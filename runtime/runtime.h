/*
 * runtime.h -- the runtime's per-context state (ctx->rt): the kernel cache,
 * the resolved target arch, and the device layer's state.  Created on first
 * use by fg_rt() and released by fg_runtime_free() from fg_context_free().
 *
 * Modules keep their own fields here, each in its marked section, and free
 * them from fg_runtime_free() through the release hooks declared below.
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

    /* ---- device layer (CUDA driver / emulation): add fields here ----
     * Release them in fg_runtime_device_free() (runtime.c calls it first). */
    void *device;               /* opaque device-layer state, NULL until used */
};

/* The context's runtime state, created on first call (thread-safe). */
struct fg_runtime *fg_rt(fg_context *ctx);
/* Frees ctx->rt and everything it holds; ctx->rt becomes NULL.  Called by
 * fg_context_free(). */
void fg_runtime_free(fg_context *ctx);

/* Release hook of the device layer: frees its fields of rt.  runtime.c has a
 * weak default that does nothing; the device layer defines the real one. */
void fg_runtime_device_free(struct fg_runtime *rt);

/* Device layer query (defined by the CUDA layer; referenced weakly, so a
 * build without it links): writes the current GPU's arch ("sm_90") into out
 * and returns 0, or returns nonzero when no driver or GPU is present. */
int fg_cuda_device_arch(fg_context *ctx, char out[16]);

#endif /* FG_RUNTIME_H */
