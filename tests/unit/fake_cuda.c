/*
 * fake_cuda.c -- a stand-in CUDA driver for the tests of the launch path
 * (test_cuda_launch.c): a shared object exporting every entry point
 * runtime/cuda.c resolves, so that FUSEGEN_CUDA_LIBRARY=<this file> gives
 * the CUDA backend a "device" without a GPU.  Memory calls work on host
 * memory, modules and functions are tokens, launches run nothing and are
 * recorded in `fake_cuda` (fake_cuda.h).  Built twice: with
 * cuLaunchKernelEx, and with -DFAKE_NO_LAUNCH_EX as a driver that lacks it.
 */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT fake_cuda_state fake_cuda = {
    .cc_major = 9, .cc_minor = 0, .sms = 132, .driver_version = 12080, .has_marker = 1,
    .launch_result = CUDA_SUCCESS,
};

/* A module remembers its image and owns its functions (freed with it); a
 * function remembers its name. */
typedef struct fake_fn {
    char name[64];
    struct fake_fn *next;
} fake_fn;
typedef struct fake_module {
    const unsigned char *image;
    size_t size;                 /* of the ELF image (0: not an ELF file) */
    fake_fn *fns;
} fake_module;
static int ctx_token, stream_token, event_token, graph_token;
static int marker_value = 1;

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = fake_cuda.driver_version; return CUDA_SUCCESS; }

EXPORT CUresult cuGetErrorName(CUresult e, const char **s)
{
    *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : e == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
         : e == CUDA_ERROR_NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_INVALID_VALUE ? "invalid argument (fake driver)" : "fake driver error";
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? fake_cuda.cc_major
         : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? fake_cuda.cc_minor
         : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     ? fake_cuda.sms
                                                             : 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    (void)d;
    strncpy(name, "fake GPU", (size_t)len);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&ctx_token; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }

EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t n)
{
    void *m = calloc(1, n ? n : 1);
    *p = (CUdeviceptr)(uintptr_t)m;
    return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuMemFree(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) { memcpy((void *)(uintptr_t)dst, src, n); return CUDA_SUCCESS; }
EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { memcpy(dst, (void *)(uintptr_t)src, n); return CUDA_SUCCESS; }
EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) { (void)s; return cuMemcpyHtoD(dst, src, n); }
EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) { (void)s; return cuMemcpyDtoH(dst, src, n); }

EXPORT CUresult cuMemsetD32(CUdeviceptr dst, unsigned v, size_t n)
{
    unsigned *w = (unsigned *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++)
        w[i] = v;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) { (void)s; return cuMemsetD32(dst, v, n); }

/* The size of an ELF64 image (the section header table ends it, as in
 * the cubins NVRTC writes), or 0 when image is no ELF64 file. */
static size_t elf_size(const unsigned char *image)
{
    if (memcmp(image, ELFMAG, SELFMAG) != 0 || image[EI_CLASS] != ELFCLASS64)
        return 0;
    Elf64_Ehdr h;
    memcpy(&h, image, sizeof h);
    return (size_t)h.e_shoff + (size_t)h.e_shnum * h.e_shentsize;
}

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    fake_module *mod = calloc(1, sizeof *mod);
    if (!mod)
        return CUDA_ERROR_OUT_OF_MEMORY;
    mod->image = image;   /* the caller keeps it while the module lives (backend_cuda.c: k->binary) */
    mod->size = elf_size(image);
    *m = (CUmodule)mod;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleUnload(CUmodule m)
{
    fake_module *mod = (fake_module *)m;
    while (mod && mod->fns) {
        fake_fn *next = mod->fns->next;
        free(mod->fns);
        mod->fns = next;
    }
    free(mod);
    return CUDA_SUCCESS;
}

/* Whether the image of m holds the symbol name (its string table entry,
 * NUL-terminated). */
static int image_names(const fake_module *m, const char *name)
{
    size_t n = strlen(name) + 1;
    for (size_t i = 0; m->size >= n && i <= m->size - n; i++)
        if (memcmp(m->image + i, name, n) == 0 && (i == 0 || m->image[i - 1] == 0))
            return 1;
    return 0;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    fake_module *mod = (fake_module *)m;
    fake_fn *fn = calloc(1, sizeof *fn);
    if (!fn)
        return CUDA_ERROR_OUT_OF_MEMORY;
    strncpy(fn->name, name, sizeof fn->name - 1);
    fn->next = mod->fns;   /* freed by cuModuleUnload */
    mod->fns = fn;
    *f = (CUfunction)fn;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetGlobal(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name)
{
    fake_cuda.global_lookups++;
    strncpy(fake_cuda.last_global, name, sizeof fake_cuda.last_global - 1);
    size_t n = strlen(name), s = strlen("__fg_grid_dep");
    int found = fake_cuda.has_marker < 0 ? image_names((const fake_module *)m, name) : fake_cuda.has_marker;
    if (!found || n <= s || strcmp(name + n - s, "__fg_grid_dep") != 0)
        return CUDA_ERROR_NOT_FOUND;
    fake_cuda.markers_found++;
    if (p)
        *p = (CUdeviceptr)(uintptr_t)&marker_value;
    if (bytes)
        *bytes = sizeof marker_value;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f; (void)a; (void)v; return CUDA_SUCCESS; }

/* Records one launch. */
static void record(int api, CUfunction f, const unsigned g[3], const unsigned b[3], unsigned smem, CUstream s,
                   void **params)
{
    fake_cuda.launches++;
    memset(&fake_cuda.last, 0, sizeof fake_cuda.last);
    fake_cuda.last.api = api;
    memcpy(fake_cuda.last.grid, g, sizeof fake_cuda.last.grid);
    memcpy(fake_cuda.last.block, b, sizeof fake_cuda.last.block);
    fake_cuda.last.smem = smem;
    fake_cuda.last.stream = s;
    fake_cuda.last.has_params = params != NULL;
    fake_cuda.last.param0 = params ? params[0] : NULL;
    strncpy(fake_cuda.last.fn, ((const fake_fn *)f)->name, sizeof fake_cuda.last.fn - 1);
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    (void)extra;
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    record(FAKE_LAUNCH_PLAIN, f, g, b, smem, s, params);
    return fake_cuda.launch_result;
}

#ifndef FAKE_NO_LAUNCH_EX
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)extra;
    const unsigned g[3] = {c->gridDimX, c->gridDimY, c->gridDimZ}, b[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    record(FAKE_LAUNCH_EX, f, g, b, c->sharedMemBytes, c->hStream, params);
    fake_cuda.launches_ex++;
    fake_cuda.last.nattrs = c->numAttrs;
    if (c->numAttrs > 0 && c->attrs)
        fake_cuda.last.attr0 = c->attrs[0];
    return fake_cuda.launch_result;
}
#endif

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) { (void)flags; *s = (CUstream)&stream_token; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamDestroy(CUstream s) { (void)s; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) { (void)flags; *e = (CUevent)&event_token; return CUDA_SUCCESS; }
EXPORT CUresult cuEventDestroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
EXPORT CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) { (void)s; (void)mode; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { (void)s; *g = (CUgraph)&graph_token; return CUDA_SUCCESS; }
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    (void)g;
    (void)flags;
    *e = (CUgraphExec)&graph_token;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) { (void)e; return CUDA_SUCCESS; }
EXPORT CUresult cuGraphDestroy(CUgraph g) { (void)g; return CUDA_SUCCESS; }
