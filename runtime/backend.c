/* backend.c -- which backend runs a request (backend.h). */
#include "backend.h"

#include "context.h"

static const fg_backend *const backends[] = {NULL, &fg_backend_cuda, &fg_backend_emu};
FG_STATIC_ASSERT(FG_COUNTOF(backends) == FG_DEVICE_COUNT, "backends out of sync with fg_device");

const fg_backend *fg_backend_get(fg_device d) { return (unsigned)d < FG_COUNTOF(backends) ? backends[d] : NULL; }

const fg_backend *fg_backend_choose(fg_context *ctx, fg_device d)
{
    if ((unsigned)d >= FG_DEVICE_COUNT) {
        fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "device %d is not an fg_device (0 to %d)", (int)d,
                      FG_DEVICE_COUNT - 1);
        return NULL;
    }
    if (d == FG_DEVICE_AUTO)
        d = (unsigned)ctx->opts.device < FG_DEVICE_COUNT ? ctx->opts.device : FG_DEVICE_AUTO;
    if (d == FG_DEVICE_AUTO)
        d = fg_backend_cuda.present(ctx) ? FG_DEVICE_CUDA : FG_DEVICE_EMU;
    return backends[d];
}
