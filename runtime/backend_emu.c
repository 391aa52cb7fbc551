/*
 * backend_emu.c -- the CPU emulation backend (backend.h): kernels are built
 * and run by emu.c; memory is host memory (an address is a host pointer);
 * everything runs synchronously on the calling thread, so the stream is
 * NULL, synchronizing does nothing and an event is the time it was recorded.
 * There are no launch graphs.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "emu.h"
#include "emu_tmap.h"

static int emu_present(fg_context *ctx)
{
    (void)ctx;
    return 1;
}

static fg_status emu_open(fg_context *ctx)
{
    (void)ctx;
    return FG_OK;
}

static fg_status emu_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *slots, void *stream)
{
    (void)stream;
    return fg_emu_launch(ctx, k, slots);
}

/* The emulated tensor map (emu_tmap.c), as fg_tma_load_2d / _4d in the
 * emulation prelude read it. */
static fg_status emu_tensormap_encode(fg_context *ctx, const fg_tmap_desc *d, void *out128)
{
    if (fg_emu_tmap_encode(d, out128) == 0)
        return FG_OK;
    const char *why = d ? fg_emu_tmap_invalid(d) : "no description";
    return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "tensor map refused: %s", why ? why : "invalid");
}

/* ---- memory: plain host memory, zeroed ---- */

static fg_status emu_alloc(fg_context *ctx, size_t bytes, const char *what, fg_loc loc, uint64_t *addr)
{
    void *p = calloc(1, bytes ? bytes : 1);   /* not tracked by the guard: the exec frees it */
    *addr = (uint64_t)(uintptr_t)p;
    if (!p)
        return fg_diag_error(ctx, FG_ERR_NOMEM, loc, "out of host memory: %zu bytes for %s", bytes, what);
    return FG_OK;
}

static void emu_free(uint64_t addr) { free((void *)(uintptr_t)addr); }

static fg_status emu_upload(fg_context *ctx, uint64_t dst, const void *src, size_t bytes, void *stream)
{
    (void)ctx, (void)stream;
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return FG_OK;
}

static fg_status emu_download(fg_context *ctx, void *dst, uint64_t src, size_t bytes, void *stream)
{
    (void)ctx, (void)stream;
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return FG_OK;
}

static fg_status emu_fill(fg_context *ctx, uint64_t dst, uint32_t value, size_t words, void *stream)
{
    (void)ctx, (void)stream;
    uint32_t *p = (uint32_t *)(uintptr_t)dst;
    for (size_t i = 0; i < words; i++)
        p[i] = value;
    return FG_OK;
}

/* ---- streams and events: synchronous ---- */

static fg_status emu_stream_new(fg_context *ctx, void **stream)
{
    (void)ctx;
    *stream = NULL;
    return FG_OK;
}

static void emu_stream_free(void *stream) { (void)stream; }

static fg_status emu_synchronize(fg_context *ctx, void *stream)
{
    (void)ctx, (void)stream;
    return FG_OK;
}

static fg_status emu_event_new(fg_context *ctx, void **event)
{
    double *t = calloc(1, sizeof *t);
    *event = t;
    return t ? FG_OK : fg_diag_error(ctx, FG_ERR_NOMEM, FG_NOLOC, "out of memory allocating a timing event");
}

static void emu_event_free(void *event) { free(event); }

static fg_status emu_event_record(fg_context *ctx, void *event, void *stream)
{
    (void)ctx, (void)stream;
    *(double *)event = fg_now();
    return FG_OK;
}

static fg_status emu_event_elapsed(fg_context *ctx, void *a, void *b, double *ms)
{
    (void)ctx;
    *ms = (*(const double *)b - *(const double *)a) * 1e3;
    return FG_OK;
}

const fg_backend fg_backend_emu = {
    .name = "emu",
    .device = FG_DEVICE_EMU,
    .host_memory = 1,
    .present = emu_present,
    .open = emu_open,
    .toolchain_new = fg_emu_toolchain_new,
    .toolchain_free = fg_emu_toolchain_free,
    .key = fg_emu_key,
    .after_key = NULL,
    .compile = fg_emu_compile,
    .load = fg_emu_load,
    .launch = emu_launch,
    .tensormap_encode = emu_tensormap_encode,
    .alloc = emu_alloc,
    .free = emu_free,
    .upload = emu_upload,
    .download = emu_download,
    .fill = emu_fill,
    .stream_new = emu_stream_new,
    .stream_free = emu_stream_free,
    .synchronize = emu_synchronize,
    .event_new = emu_event_new,
    .event_free = emu_event_free,
    .event_record = emu_event_record,
    .event_elapsed = emu_event_elapsed,
};
