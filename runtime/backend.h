/*
 * backend.h -- the two devices behind one interface: a table of functions
 * per backend (CUDA through NVRTC and the driver: backend_cuda.c; the CPU
 * emulation: backend_emu.c).  The executor (exec.c) and the cache sequence
 * (kcache.c) are written once against this table; only the two backend
 * files know which device they drive.
 *
 * Addresses of device memory are uint64_t: a CUdeviceptr on CUDA, a host
 * pointer in emulation (host_memory = 1: the executor may then read guard
 * zones and bind host data directly).  Streams, events and launch graphs are
 * opaque pointers; emulation runs everything synchronously, so its stream is
 * NULL and its events are host timestamps.
 *
 * Compiling goes through a toolchain: the compiler and its options resolved
 * once per batch of kernels (CUDA: the arch, NVRTC options; emulation: the
 * host compiler command, flags and version), shared by the threads that
 * compile the batch.
 */
#ifndef FG_BACKEND_H
#define FG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "tmap.h"

typedef struct fg_backend {
    const char *name;            /* "cuda", "emu" */
    fg_device device;            /* FG_DEVICE_CUDA or FG_DEVICE_EMU */
    int host_memory;             /* device addresses are host pointers */

    /* ---- the device ---- */
    /* Nonzero when the device can be used (records nothing). */
    int (*present)(fg_context *ctx);
    /* Makes the device usable on the calling thread; FG_OK or the recorded
     * reason (FG_ERR_NO_DEVICE naming what is missing). */
    fg_status (*open)(fg_context *ctx);

    /* ---- compiling (kcache.c drives these) ---- */
    /* Resolves the toolchain for target (CUDA: an arch, NULL for the
     * context's; emulation: ignored) into *tc; records why it cannot. */
    fg_status (*toolchain_new)(fg_context *ctx, const char *target, void **tc);
    void (*toolchain_free)(void *tc);
    /* The cache key of k under tc: 32 hex digits over everything that
     * determines the binary (never the same as another backend's). */
    void (*key)(const void *tc, const fg_kernel *k, char key[33]);
    /* Optional (NULL: none): called after the key is known, hit or miss
     * (CUDA: FUSEGEN_DUMP_SOURCE). */
    void (*after_key)(fg_context *ctx, const void *tc, const fg_kernel *k);
    /* Compiles k.  On success *bin (malloc'd, *size bytes), *meta (malloc'd
     * "name=value" lines stored beside the entry, see fg_meta_put) and *log
     * (malloc'd compiler warnings, possibly empty). */
    fg_status (*compile)(fg_context *ctx, const void *tc, const fg_kernel *k, void **bin, size_t *size, char **meta,
                         char **log);

    /* ---- kernels ---- */
    /* Makes k->binary launchable: sets k->handle and k->release. */
    fg_status (*load)(fg_context *ctx, fg_kernel *k);
    /* Launches k (loaded) with its k->nparams 8-byte parameter slots on
     * stream (NULL: the default stream).  Emulation returns when it is done. */
    fg_status (*launch)(fg_context *ctx, const fg_kernel *k, const uint64_t *slots, void *stream);

    /* Writes the 128-byte tensor map of d (2-D, tmap.h) that this device's
     * TMA reads into out128 (64-byte aligned): CUDA through the driver's
     * cuTensorMapEncodeTiled, emulation in its own layout (emu_tmap.h).
     * Records why it cannot (FG_ERR_INPUT for a description the device
     * refuses); the executor calls it for each FG_KPARAM_TMAP at launch. */
    fg_status (*tensormap_encode)(fg_context *ctx, const fg_tmap_desc *d, void *out128);

    /* ---- memory ---- */
    /* bytes > 0; FG_ERR_NOMEM when the memory is not there, recorded at loc
     * (the tensor or graph the block is for) naming what and the size. */
    fg_status (*alloc)(fg_context *ctx, size_t bytes, const char *what, fg_loc loc, uint64_t *addr);
    void (*free)(uint64_t addr);                  /* 0: nothing */
    fg_status (*upload)(fg_context *ctx, uint64_t dst, const void *src, size_t bytes, void *stream);
    fg_status (*download)(fg_context *ctx, void *dst, uint64_t src, size_t bytes, void *stream);
    /* Fills words 32-bit words at dst with value. */
    fg_status (*fill)(fg_context *ctx, uint64_t dst, uint32_t value, size_t words, void *stream);

    /* ---- streams and timing ---- */
    fg_status (*stream_new)(fg_context *ctx, void **stream);
    void (*stream_free)(void *stream);
    fg_status (*synchronize)(fg_context *ctx, void *stream);
    fg_status (*event_new)(fg_context *ctx, void **event);
    void (*event_free)(void *event);
    fg_status (*event_record)(fg_context *ctx, void *event, void *stream);
    /* Waits for event b, then the milliseconds from a to b. */
    fg_status (*event_elapsed)(fg_context *ctx, void *a, void *b, double *ms);

    /* ---- launch graphs (all NULL when the backend has none) ---- */
    fg_status (*capture_begin)(fg_context *ctx, void *stream);
    /* Ends the capture and makes a launchable graph of it in *graph.  With
     * *graph an earlier launch graph of the same launches (the exec's, made
     * with other bound addresses), it is updated in place with the new
     * kernel parameters when the backend can (no new instantiation), else
     * freed and replaced; on failure *graph is NULL and nothing leaks. */
    fg_status (*capture_end)(fg_context *ctx, void *stream, void **graph);
    fg_status (*graph_launch)(fg_context *ctx, void *graph, void *stream);
    void (*graph_free)(void *graph);
} fg_backend;

extern const fg_backend fg_backend_cuda;   /* backend_cuda.c */
extern const fg_backend fg_backend_emu;    /* backend_emu.c */

/* The backend of device d (CUDA or EMU), or NULL (AUTO, out of range). */
const fg_backend *fg_backend_get(fg_device d);
/* The backend a request for d runs on: AUTO takes the context's device
 * option, and AUTO there means CUDA when present, else emulation.  NULL
 * (with FG_ERR_INPUT recorded) for a value that is no fg_device. */
const fg_backend *fg_backend_choose(fg_context *ctx, fg_device d);

#endif /* FG_BACKEND_H */
