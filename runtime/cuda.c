/*
 * cuda.c -- opens the CUDA driver with dlopen, resolves the entry points
 * fusegen uses, initialises device 0's primary context, and records failed
 * driver calls (CU_CHECK) with the call, its location and the driver's own
 * error name and text.  See cuda_driver.h.
 */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry point: where it lives in fg_cu_api and the exported names to try,
 * newest first (the versioned symbols that <cuda.h> maps the plain names to). */
typedef struct sym_def {
    size_t offset;
    const char *names[2];
} sym_def;

#define SYM(field, ...) {offsetof(fg_cu_api, field), {__VA_ARGS__}}
static const sym_def syms[] = {
    SYM(Init, "cuInit"),
    SYM(DriverGetVersion, "cuDriverGetVersion"),
    SYM(GetErrorName, "cuGetErrorName"),
    SYM(GetErrorString, "cuGetErrorString"),
    SYM(DeviceGetCount, "cuDeviceGetCount"),
    SYM(DeviceGet, "cuDeviceGet"),
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(DeviceGetName, "cuDeviceGetName"),
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYM(CtxSetCurrent, "cuCtxSetCurrent"),
    SYM(CtxSynchronize, "cuCtxSynchronize"),
    SYM(MemAlloc, "cuMemAlloc_v2"),
    SYM(MemFree, "cuMemFree_v2"),
    SYM(MemcpyHtoD, "cuMemcpyHtoD_v2"),
    SYM(MemcpyDtoH, "cuMemcpyDtoH_v2"),
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    SYM(MemsetD32, "cuMemsetD32_v2"),
    SYM(MemsetD32Async, "cuMemsetD32Async"),
    SYM(ModuleLoadData, "cuModuleLoadData"),
    SYM(ModuleUnload, "cuModuleUnload"),
    SYM(ModuleGetFunction, "cuModuleGetFunction"),
    SYM(ModuleGetGlobal, "cuModuleGetGlobal_v2"),
    SYM(FuncSetAttribute, "cuFuncSetAttribute"),
    SYM(LaunchKernel, "cuLaunchKernel"),
    SYM(StreamCreate, "cuStreamCreate"),
    SYM(StreamDestroy, "cuStreamDestroy_v2"),
    SYM(StreamSynchronize, "cuStreamSynchronize"),
    SYM(EventCreate, "cuEventCreate"),
    SYM(EventDestroy, "cuEventDestroy_v2"),
    SYM(EventRecord, "cuEventRecord"),
    SYM(EventSynchronize, "cuEventSynchronize"),
    SYM(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYM(StreamBeginCapture, "cuStreamBeginCapture_v2"),
    SYM(StreamEndCapture, "cuStreamEndCapture"),
    SYM(GraphInstantiate, "cuGraphInstantiateWithFlags"),
    SYM(GraphLaunch, "cuGraphLaunch"),
    SYM(GraphExecDestroy, "cuGraphExecDestroy"),
    SYM(GraphDestroy, "cuGraphDestroy"),
};
FG_STATIC_ASSERT(FG_COUNTOF(syms) == sizeof(fg_cu_api) / sizeof(void (*)(void)), "syms out of sync with fg_cu_api");

/* Process-wide driver state, guarded by mu.  `path` is the library the last
 * attempt used: a different FUSEGEN_CUDA_LIBRARY makes the next call retry. */
static struct {
    pthread_mutex_t mu;
    int tried;
    char path[512];
    fg_status st;           /* result of the last attempt */
    char msg[768];          /* its message when st != FG_OK */
    void *lib;
    fg_cu_api api;
    CUdevice dev;
    CUcontext pctx;
    int cc_major, cc_minor;
    int sms;                /* multiprocessors of device 0 (0: unknown) */
    int version;            /* cuDriverGetVersion: 12030 for CUDA 12.3 (0: unknown) */
    fg_cu_launch_ex_fn launch_ex;   /* fg_cuda_launch_ex */
    char arch[16];          /* "sm_XY" of device 0 once open */
    char name[128];
} drv = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The driver library a context asks for: $FUSEGEN_CUDA_LIBRARY as read at
 * context init, else libcuda.so.1. */
static const char *library_path(const fg_context *ctx)
{
    const char *e = ctx ? ctx->env.cuda_library : NULL;
    return e && *e ? e : "libcuda.so.1";
}

/* Error name and text of a driver result (usable before GetErrorName resolves). */
static void error_text(CUresult r, const char **name, const char **text)
{
    *name = *text = NULL;
    if (drv.api.GetErrorName)
        drv.api.GetErrorName(r, name);
    if (drv.api.GetErrorString)
        drv.api.GetErrorString(r, text);
    if (!*name)
        *name = "CUDA_ERROR_UNKNOWN";
    if (!*text)
        *text = "unrecognized error code";
}

/* Loads the library named by path and initialises device 0; fills drv.st and
 * drv.msg.  Called with drv.mu held. */
static void open_driver(const char *path)
{
    const char *hint = "use `--device emu` (or FG_DEVICE_EMU) to run the generated kernels on the CPU";
    /* A driver that worked stays loaded (its contexts may be in use); only a
     * failed attempt's handle is closed. */
    if (drv.lib && drv.st != FG_OK)
        dlclose(drv.lib);
    drv.lib = NULL;
    memset(&drv.api, 0, sizeof drv.api);
    drv.pctx = NULL;
    drv.name[0] = 0;
    drv.version = 0;
    drv.launch_ex = NULL;
    snprintf(drv.path, sizeof drv.path, "%s", path);
    drv.tried = 1;
    drv.st = FG_ERR_NO_DEVICE;

    drv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        const char *why = dlerror();
        snprintf(drv.msg, sizeof drv.msg, "no CUDA driver: %s not found (%s); %s", path, why ? why : "dlopen failed",
                 hint);
        return;
    }
    for (size_t i = 0; i < FG_COUNTOF(syms); i++) {
        void *f = NULL;
        for (int j = 0; j < 2 && syms[i].names[j] && !f; j++)
            f = dlsym(drv.lib, syms[i].names[j]);
        if (!f) {
            snprintf(drv.msg, sizeof drv.msg, "CUDA driver %s lacks %s (driver too old?); %s", path, syms[i].names[0],
                     hint);
            memset(&drv.api, 0, sizeof drv.api);
            dlclose(drv.lib);
            drv.lib = NULL;
            return;
        }
        memcpy((char *)&drv.api + syms[i].offset, &f, sizeof f);
    }
    const char *en, *es;
    CUresult r = drv.api.Init(0);
    if (r != CUDA_SUCCESS) {
        error_text(r, &en, &es);
        snprintf(drv.msg, sizeof drv.msg, "cuInit failed: no GPU (%s: %s); %s", en, es, hint);
        return;
    }
    int n = 0;
    r = drv.api.DeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n < 1) {
        snprintf(drv.msg, sizeof drv.msg, "cuInit succeeded but no CUDA device is visible; %s", hint);
        return;
    }
    if ((r = drv.api.DeviceGet(&drv.dev, 0)) != CUDA_SUCCESS ||
        (r = drv.api.DeviceGetAttribute(&drv.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, drv.dev)) !=
            CUDA_SUCCESS ||
        (r = drv.api.DeviceGetAttribute(&drv.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, drv.dev)) !=
            CUDA_SUCCESS ||
        (r = drv.api.DevicePrimaryCtxRetain(&drv.pctx, drv.dev)) != CUDA_SUCCESS) {
        error_text(r, &en, &es);
        snprintf(drv.msg, sizeof drv.msg, "cannot open CUDA device 0 (%s: %s); %s", en, es, hint);
        return;
    }
    if (drv.api.DeviceGetName(drv.name, (int)sizeof drv.name, drv.dev) != CUDA_SUCCESS)
        drv.name[0] = 0;
    if (drv.api.DeviceGetAttribute(&drv.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, drv.dev) != CUDA_SUCCESS)
        drv.sms = 0;
    snprintf(drv.arch, sizeof drv.arch, "sm_%d%d", drv.cc_major, drv.cc_minor);
    if (drv.api.DriverGetVersion(&drv.version) != CUDA_SUCCESS)
        drv.version = 0;
    if (drv.cc_major >= 9 && drv.version >= 12030) {
        void *f = dlsym(drv.lib, "cuLaunchKernelEx");
        memcpy(&drv.launch_ex, &f, sizeof f);
    }
    drv.st = FG_OK;
}

/* Makes sure the driver is open; returns its status without recording. */
static fg_status ensure_driver(const fg_context *ctx)
{
    const char *path = library_path(ctx);
    pthread_mutex_lock(&drv.mu);
    if (!drv.tried || strcmp(drv.path, path) != 0)
        open_driver(path);
    fg_status st = drv.st;
    pthread_mutex_unlock(&drv.mu);
    return st;
}

fg_status fg_cuda_init(fg_context *ctx)
{
    fg_status st = ensure_driver(ctx);
    if (st != FG_OK) {
        pthread_mutex_lock(&drv.mu);
        char msg[sizeof drv.msg];
        memcpy(msg, drv.msg, sizeof msg);
        pthread_mutex_unlock(&drv.mu);
        return fg_diag_error(ctx, st, FG_NOLOC, "%s", msg);
    }
    return CU_CHECK(ctx, drv.api.CtxSetCurrent(drv.pctx));
}

int fg_cuda_make_current(void)
{
    pthread_mutex_lock(&drv.mu);
    int ok = drv.st == FG_OK && drv.lib && drv.api.CtxSetCurrent(drv.pctx) == CUDA_SUCCESS;
    pthread_mutex_unlock(&drv.mu);
    return ok ? 0 : -1;
}

const fg_cu_api *fg_cu(void) { return &drv.api; }

const char *fg_cuda_device_name(void) { return drv.st == FG_OK ? drv.name : ""; }

int fg_cuda_sm_count(void) { return drv.st == FG_OK ? drv.sms : 0; }

fg_cu_launch_ex_fn fg_cuda_launch_ex(void) { return drv.st == FG_OK ? drv.launch_ex : NULL; }

void *fg_cuda_optional_sym(const char *name)
{
    pthread_mutex_lock(&drv.mu);
    void *f = drv.lib && drv.st == FG_OK ? dlsym(drv.lib, name) : NULL;
    pthread_mutex_unlock(&drv.mu);
    return f;
}

int fg_cuda_device_arch(fg_context *ctx, char out[16])
{
    if (ensure_driver(ctx) != FG_OK)
        return -1;
    snprintf(out, 16, "%s", drv.arch);
    return 0;
}

fg_status fg_cuda_fail(fg_context *ctx, CUresult r, const char *call, const char *file, int line, const char *kernel)
{
    const char *en, *es;
    error_text(r, &en, &es);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (kernel)
        return fg_diag_error(ctx, FG_ERR_CUDA, FG_NOLOC, "CUDA driver call failed in kernel %s: %s (%s:%d): %s: %s",
                             kernel, call, base, line, en, es);
    return fg_diag_error(ctx, FG_ERR_CUDA, FG_NOLOC, "CUDA driver call failed: %s (%s:%d): %s: %s", call, base, line,
                         en, es);
}
