/*
 * kernel_counts.c -- how many kernels a context compiled, and how many it
 * found in each tier of the kernel cache (fg_context_kernel_counts): the
 * counters live in the context's runtime state (runtime.h) and are counted
 * by the cache sequence (kcache.c) once per kernel it obtains.
 */
#include <stddef.h>
#include <string.h>

#include "diag.h"
#include "runtime.h"

void fg_rt_count_kernel(fg_context *ctx, fg_kcount c)
{
    if (ctx && (unsigned)c < FG_KC_COUNT)
        __atomic_add_fetch(&fg_rt(ctx)->obtained[c], 1, __ATOMIC_RELAXED);
}

/* Copies the counters into the fields of *out that out->size covers. */
FG_API fg_status fg_context_kernel_counts(fg_context *ctx, fg_kernel_counts *out)
{
    if (!ctx)
        return FG_ERR_INPUT;
    if (!out || out->size < offsetof(fg_kernel_counts, nvrtc_compiled) + sizeof(uint64_t))
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                             "fg_context_kernel_counts: out is NULL or its size field does not cover a counter");
    struct fg_runtime *rt = fg_rt(ctx);
    uint64_t v[FG_KC_COUNT];
    for (int i = 0; i < FG_KC_COUNT; i++)
        v[i] = __atomic_load_n(&rt->obtained[i], __ATOMIC_RELAXED);
    fg_kernel_counts full = {sizeof full, v[FG_KC_NVRTC], v[FG_KC_HOST], v[FG_KC_MEMORY], v[FG_KC_DISK],
                             v[FG_KC_REMOTE]};
    size_t n = out->size < sizeof full ? out->size : sizeof full;
    size_t keep = out->size;
    memcpy(out, &full, n);
    out->size = keep;
    return FG_OK;
}
