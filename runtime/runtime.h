/*
 * runtime.h -- the runtime's per-context state (ctx->rt): the kernel cache
 * and the JIT's resolved arch; and the device target the runtime records on
 * the context for codegen (fg_rt_resolve_target).  Created on first use by fg_rt(), which
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

/* The ways a kernel's binary is obtained that fg_context_kernel_counts
 * reports (kernel_counts.c). */
typedef enum fg_kcount {
    FG_KC_NVRTC = 0,
    FG_KC_HOST,
    FG_KC_MEMORY,
    FG_KC_DISK,
    FG_KC_REMOTE,
    FG_KC_COUNT
} fg_kcount;

struct fg_runtime {
    pthread_mutex_t lock;       /* guards the lazily created fields below (not ctx->lock) */

    /* ---- kernel cache and JIT (cache.c, kcache.c, jit.c) ---- */
    fg_cache *cache;            /* opened by fg_ctx_cache() on first use */
    int cache_opened;           /* nonzero once fg_ctx_cache() ran (cache may still be NULL) */
    char arch[32];              /* fg_jit_arch(): resolved once, "" until then */

    /* ---- the remote tier and the per-tier counters (remote_cache.c) ---- */
    struct fg_tiers *tiers;     /* created by fg_ctx_remote() on first use; freed by its own teardown */

    /* ---- kernels obtained, per way (kernel_counts.c; atomic) ---- */
    uint64_t obtained[FG_KC_COUNT];
};

/* Counts one kernel of ctx obtained in way c (thread-safe). */
void fg_rt_count_kernel(fg_context *ctx, fg_kcount c);

/* The context's runtime state, created on first call (thread-safe). */
struct fg_runtime *fg_rt(fg_context *ctx);

/* Device query (cuda.c): writes the current GPU's arch ("sm_90") into out and
 * returns 0, or returns nonzero when no driver or GPU is present. */
int fg_cuda_device_arch(fg_context *ctx, char out[16]);

/* Resolves the device target of ctx for codegen and the JIT: unless the
 * arch option is set or ctx already holds a device arch, asks the CUDA
 * driver for the attached GPU's (fg_cuda_device_arch; records nothing when
 * there is none) and records it, or "no GPU", on the context
 * (fg_ctx_set_device_arch).  fg_target_arch (arch.h) then gives the target:
 * the option, the GPU's, $FUSEGEN_ARCH, or unknown.  Called by
 * fg_plan_build before planning and by the JIT before compiling. */
void fg_rt_resolve_target(fg_context *ctx);

#endif /* FG_RUNTIME_H */
