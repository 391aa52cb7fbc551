/* runtime.c -- life cycle of the per-context runtime state (runtime.h), and
 * the device target recorded on the context before planning and compiling. */
#include "runtime.h"

#include "oom.h"

#include <stdlib.h>

/* Frees ctx->rt and everything it holds (run by fg_context_free). */
static void runtime_free(fg_context *ctx)
{
    struct fg_runtime *rt = ctx->rt;
    if (!rt)
        return;
    fg_cache_close(rt->cache);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    ctx->rt = NULL;
}

/* Creates ctx->rt under ctx->lock on first call.  Only the struct is made
 * here: opening the cache may record warnings, which takes ctx->lock too, so
 * the members are created later under rt->lock. */
struct fg_runtime *fg_rt(fg_context *ctx)
{
    struct fg_runtime *rt = __atomic_load_n(&ctx->rt, __ATOMIC_ACQUIRE);
    if (rt)
        return rt;
    int created = 0;
    fg_oom_hold();   /* the context's, and under its lock (codegen/oom.h) */
    pthread_mutex_lock(&ctx->lock);
    rt = ctx->rt;
    if (!rt) {
        rt = fg_xcalloc(1, sizeof *rt);
        pthread_mutex_init(&rt->lock, NULL);
        __atomic_store_n(&ctx->rt, rt, __ATOMIC_RELEASE);
        created = 1;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (created)
        fg_ctx_on_free(ctx, runtime_free);
    fg_oom_release();
    return rt;
}

void fg_rt_resolve_target(fg_context *ctx)
{
    if ((ctx->arch && *ctx->arch) || fg_ctx_device_asked(ctx))
        return;
    char gpu[16] = "";
    fg_ctx_set_device_arch(ctx, fg_cuda_device_arch(ctx, gpu) == 0 ? gpu : NULL);
}
