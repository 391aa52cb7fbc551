/*
 * backend_cuda.c -- the CUDA backend (backend.h): NVRTC compiles through the
 * toolchain of jit.c; the device, memory, streams, events, kernel launches
 * and CUDA graphs go through the driver opened by cuda.c.  Every driver call
 * is checked with CU_CHECK (the call, its place, the driver's message).
 *
 * Programmatic dependent launch: on a device and driver that have it
 * (fg_cuda_launch_ex: sm_90+, CUDA 12.3+, cuLaunchKernelEx), a kernel whose
 * module says it was compiled with the wait (FG_KERNEL's name__fg_grid_dep
 * constant is 1, prelude.cuh) is launched with
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION set to 1: it may
 * start while the kernel before it in the stream finishes, and waits for it
 * (griddepcontrol.wait) before touching global memory.  Every such kernel
 * is launched this way, a plan's first included: whatever precedes it in the
 * stream (an upload, a fill, the caller's own kernel) is complete and
 * visible when its wait returns, so the first kernel needs no state telling
 * it apart, and a predecessor that is no kernel serializes as usual.
 * FUSEGEN_PDL=0 (ctx->env.pdl) launches everything with cuLaunchKernel.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_driver.h"
#include "jit.h"

/* A loaded kernel: its module and entry point, and whether the entry point
 * waits for the grids it depends on (its module's marker is 1). */
typedef struct cuda_kernel {
    CUmodule mod;
    CUfunction fn;
    int grid_dep;
} cuda_kernel;

/* Whether module m of kernel `name` holds the marker FG_KERNEL writes
 * (the 4-byte constant name__fg_grid_dep, prelude.cuh): it is there only
 * when the entry point was compiled for sm_90 or newer, where it waits
 * before any global access.  A module without it (compiled for an older
 * arch, or a kernel not made through FG_KERNEL) is never launched with
 * programmatic serialization.  Returns 1, 0, or -1 with the error recorded. */
static int module_grid_dep(fg_context *ctx, CUmodule m, const char *name, fg_status *st)
{
    char sym[sizeof ((fg_kernel *)0)->name + 16];
    snprintf(sym, sizeof sym, "%s__fg_grid_dep", name);
    CUdeviceptr p = 0;
    size_t bytes = 0;
    CUresult r = fg_cu()->ModuleGetGlobal(&p, &bytes, m, sym);
    if (r == CUDA_ERROR_NOT_FOUND)
        return 0;
    if ((*st = CU_CHECK_K(ctx, r, name)) != FG_OK)
        return -1;
    return bytes == sizeof(int);
}

static int cuda_present(fg_context *ctx)
{
    char arch[16];
    return fg_cuda_device_arch(ctx, arch) == 0;
}

static fg_status cuda_open(fg_context *ctx) { return fg_cuda_init(ctx); }

/* Releases k->handle; safe without a context: it makes the driver's primary
 * context current on the calling thread first. */
static void cuda_release(fg_kernel *k)
{
    cuda_kernel *h = k->handle;
    if (h && h->mod && fg_cuda_make_current() == 0)
        fg_cu()->ModuleUnload(h->mod);
    free(h);
    k->handle = NULL;
    k->release = NULL;
}

static fg_status cuda_load(fg_context *ctx, fg_kernel *k)
{
    if (!k->binary)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s has no cubin", k->name);
    fg_status st = fg_cuda_init(ctx);
    if (st)
        return st;
    if (k->release)
        k->release(k);
    const fg_cu_api *cu = fg_cu();
    cuda_kernel *h = fg_xcalloc(1, sizeof *h);
    st = CU_CHECK_K(ctx, cu->ModuleLoadData(&h->mod, k->binary), k->name);
    if (!st)
        st = CU_CHECK_K(ctx, cu->ModuleGetFunction(&h->fn, h->mod, k->name), k->name);
    if (!st && k->smem > 48 * 1024)
        st = CU_CHECK_K(ctx, cu->FuncSetAttribute(h->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)k->smem),
                        k->name);
    if (!st && fg_cuda_launch_ex())
        h->grid_dep = module_grid_dep(ctx, h->mod, k->name, &st) == 1;
    k->handle = h;
    k->release = cuda_release;
    if (st)
        cuda_release(k);
    return st;
}

/* cuLaunchKernelEx of h with k's launch shape (gx blocks along x) and the
 * attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1.
 * Named for what a failure's message shows (CU_CHECK quotes the call). */
static CUresult cuLaunchKernelEx_programmatic_serialization(fg_cu_launch_ex_fn launch_ex, const cuda_kernel *h,
                                                            const fg_kernel *k, unsigned gx, void *stream,
                                                            void **params)
{
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = gx;
    cfg.gridDimY = k->grid[1];
    cfg.gridDimZ = k->grid[2];
    cfg.blockDimX = k->block[0];
    cfg.blockDimY = k->block[1];
    cfg.blockDimZ = k->block[2];
    cfg.sharedMemBytes = k->smem;
    cfg.hStream = (CUstream)stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return launch_ex(&cfg, h->fn, params, NULL);
}

/* Launches k: with programmatic stream serialization when its module waits
 * (h->grid_dep), the device and driver have it and FUSEGEN_PDL allows it,
 * else with cuLaunchKernel. */
static fg_status cuda_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *slots, void *stream)
{
    const cuda_kernel *h = k->handle;
    if (!h || k->release != cuda_release)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s is not loaded on the GPU", k->name);
    void *params[1] = {(void *)slots};   /* one struct argument made of 8-byte slots */
    /* a persistent kernel (emit.h): as many blocks as the device holds at once, each looping over tiles */
    unsigned gx = k->grid[0];
    unsigned long long resident = (unsigned long long)fg_cuda_sm_count() * k->persistent;
    if (k->persistent && resident > 0 && resident < gx)
        gx = (unsigned)resident;
    fg_cu_launch_ex_fn launch_ex = h->grid_dep && ctx->env.pdl ? fg_cuda_launch_ex() : NULL;
    if (launch_ex)
        return CU_CHECK_K(ctx, cuLaunchKernelEx_programmatic_serialization(launch_ex, h, k, gx, stream, params),
                          k->name);
    return CU_CHECK_K(ctx,
                      fg_cu()->LaunchKernel(h->fn, gx, k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                                            k->smem, (CUstream)stream, params, NULL),
                      k->name);
}

/* ---- tensor maps ---- */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled of a description of rank 1..5 with its element
 * strides: 16-bit elements as fp16 (TMA copies bytes: fp16 and bf16
 * alike), 32-bit as fp32; out-of-range elements zero (no NaN fill), L2
 * promotion of 128 bytes.  A description outside the device's limits
 * (fg_tmap_invalid) is refused with the reason before the driver sees it. */
static fg_status cuda_tensormap_encode(fg_context *ctx, const fg_tmap_desc *d, void *out128)
{
    fg_status st = fg_cuda_init(ctx);
    if (st)
        return st;
    encode_tiled_fn encode = (encode_tiled_fn)fg_cuda_optional_sym("cuTensorMapEncodeTiled");
    if (!encode)
        return fg_diag_error(ctx, FG_ERR_NO_DEVICE, FG_NOLOC,
                             "the CUDA driver lacks cuTensorMapEncodeTiled (TMA kernels need a CUDA 12 driver)");
    const char *why = fg_tmap_invalid(d);
    if (why)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "tensor map refused: %s", why);
    CUtensorMapSwizzle sw = d->swizzle == FG_TMAP_SWIZZLE_128B  ? CU_TENSOR_MAP_SWIZZLE_128B
                            : d->swizzle == FG_TMAP_SWIZZLE_64B ? CU_TENSOR_MAP_SWIZZLE_64B
                            : d->swizzle == FG_TMAP_SWIZZLE_32B ? CU_TENSOR_MAP_SWIZZLE_32B
                                                                : CU_TENSOR_MAP_SWIZZLE_NONE;
    cuuint64_t dim[FG_TMAP_MAX_RANK], stride[FG_TMAP_MAX_RANK - 1];
    cuuint32_t box[FG_TMAP_MAX_RANK], estride[FG_TMAP_MAX_RANK];
    for (unsigned i = 0; i < d->rank; i++) {
        dim[i] = d->dim[i];
        box[i] = d->box[i];
        estride[i] = d->estride[i];
        if (i > 0)
            stride[i - 1] = d->stride[i - 1];
    }
    return CU_CHECK(ctx, encode((CUtensorMap *)out128,
                                d->elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                                d->rank, (void *)(uintptr_t)d->base, dim, stride, box, estride,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

/* ---- memory ---- */

static fg_status cuda_alloc(fg_context *ctx, size_t bytes, const char *what, fg_loc loc, uint64_t *addr)
{
    CUdeviceptr p = 0;
    CUresult r = fg_cu()->MemAlloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return fg_diag_error(ctx, FG_ERR_NOMEM, loc, "out of GPU memory: %zu bytes for %s", bytes, what);
    fg_status st = CU_CHECK(ctx, r);
    *addr = st ? 0 : (uint64_t)p;
    return st;
}

static void cuda_free(uint64_t addr)
{
    if (addr && fg_cuda_make_current() == 0)
        fg_cu()->MemFree((CUdeviceptr)addr);
}

static fg_status cuda_upload(fg_context *ctx, uint64_t dst, const void *src, size_t bytes, void *stream)
{
    if (!stream)
        return CU_CHECK(ctx, fg_cu()->MemcpyHtoD((CUdeviceptr)dst, src, bytes));
    return CU_CHECK(ctx, fg_cu()->MemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, (CUstream)stream));
}

static fg_status cuda_download(fg_context *ctx, void *dst, uint64_t src, size_t bytes, void *stream)
{
    if (!stream)
        return CU_CHECK(ctx, fg_cu()->MemcpyDtoH(dst, (CUdeviceptr)src, bytes));
    return CU_CHECK(ctx, fg_cu()->MemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, (CUstream)stream));
}

static fg_status cuda_fill(fg_context *ctx, uint64_t dst, uint32_t value, size_t words, void *stream)
{
    if (!stream)
        return CU_CHECK(ctx, fg_cu()->MemsetD32((CUdeviceptr)dst, value, words));
    return CU_CHECK(ctx, fg_cu()->MemsetD32Async((CUdeviceptr)dst, value, words, (CUstream)stream));
}

/* ---- streams and events ---- */

static fg_status cuda_stream_new(fg_context *ctx, void **stream)
{
    CUstream s = NULL;
    fg_status st = CU_CHECK(ctx, fg_cu()->StreamCreate(&s, CU_STREAM_NON_BLOCKING));
    *stream = st ? NULL : (void *)s;
    return st;
}

static void cuda_stream_free(void *stream)
{
    if (stream && fg_cuda_make_current() == 0) {
        fg_cu()->StreamSynchronize((CUstream)stream);
        fg_cu()->StreamDestroy((CUstream)stream);
    }
}

static fg_status cuda_synchronize(fg_context *ctx, void *stream)
{
    return CU_CHECK(ctx, fg_cu()->StreamSynchronize((CUstream)stream));
}

static fg_status cuda_event_new(fg_context *ctx, void **event)
{
    CUevent e = NULL;
    fg_status st = CU_CHECK(ctx, fg_cu()->EventCreate(&e, CU_EVENT_DEFAULT));
    *event = st ? NULL : (void *)e;
    return st;
}

static void cuda_event_free(void *event)
{
    if (event && fg_cuda_make_current() == 0)
        fg_cu()->EventDestroy((CUevent)event);
}

static fg_status cuda_event_record(fg_context *ctx, void *event, void *stream)
{
    return CU_CHECK(ctx, fg_cu()->EventRecord((CUevent)event, (CUstream)stream));
}

static fg_status cuda_event_elapsed(fg_context *ctx, void *a, void *b, double *ms)
{
    float f = 0;
    fg_status st = CU_CHECK(ctx, fg_cu()->EventSynchronize((CUevent)b));
    if (!st)
        st = CU_CHECK(ctx, fg_cu()->EventElapsedTime(&f, (CUevent)a, (CUevent)b));
    *ms = f;
    return st;
}

/* ---- CUDA graphs ---- */

static fg_status cuda_capture_begin(fg_context *ctx, void *stream)
{
    return CU_CHECK(ctx, fg_cu()->StreamBeginCapture((CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

/* cuGraphExecUpdate (CUDA 12: cuGraphExecUpdate_v2), typed by the toolkit's
 * own prototype; the driver lookup is optional (update, else instantiate). */
typedef __typeof__(cuGraphExecUpdate) graph_exec_update_fn;

/* The backend's contract (backend.h): an earlier exec is updated with the
 * captured graph's kernel parameters by cuGraphExecUpdate, which succeeds
 * when the launches are the same but for their arguments (a run with other
 * bound addresses); when it refuses (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
 * or the driver lacks it, the exec is replaced by a new instantiation. */
static fg_status cuda_capture_end(fg_context *ctx, void *stream, void **graph)
{
    const fg_cu_api *cu = fg_cu();
    CUgraph g = NULL;
    CUgraphExec ge = NULL, old = (CUgraphExec)*graph;
    *graph = NULL;
    fg_status st = CU_CHECK(ctx, cu->StreamEndCapture((CUstream)stream, &g));
    if (!st && old) {
        graph_exec_update_fn *update = (graph_exec_update_fn *)fg_cuda_optional_sym("cuGraphExecUpdate_v2");
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        if (update && update(old, g, &info) == CUDA_SUCCESS) {
            ge = old;                              /* updated in place */
            old = NULL;
        }
    }
    if (old)
        cu->GraphExecDestroy(old);
    if (!st && !ge)
        st = CU_CHECK(ctx, cu->GraphInstantiate(&ge, g, 0));
    if (g)
        cu->GraphDestroy(g);
    if (!st)
        *graph = ge;
    else if (ge)
        cu->GraphExecDestroy(ge);
    return st;
}

static fg_status cuda_graph_launch(fg_context *ctx, void *graph, void *stream)
{
    return CU_CHECK(ctx, fg_cu()->GraphLaunch((CUgraphExec)graph, (CUstream)stream));
}

static void cuda_graph_free(void *graph)
{
    if (graph && fg_cuda_make_current() == 0)
        fg_cu()->GraphExecDestroy((CUgraphExec)graph);
}

const fg_backend fg_backend_cuda = {
    .name = "cuda",
    .device = FG_DEVICE_CUDA,
    .host_memory = 0,
    .present = cuda_present,
    .open = cuda_open,
    .toolchain_new = fg_nvrtc_toolchain_new,
    .toolchain_free = fg_nvrtc_toolchain_free,
    .key = fg_nvrtc_key,
    .after_key = fg_nvrtc_dump,
    .compile = fg_nvrtc_compile,
    .load = cuda_load,
    .launch = cuda_launch,
    .tensormap_encode = cuda_tensormap_encode,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill = cuda_fill,
    .stream_new = cuda_stream_new,
    .stream_free = cuda_stream_free,
    .synchronize = cuda_synchronize,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record = cuda_event_record,
    .event_elapsed = cuda_event_elapsed,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};
