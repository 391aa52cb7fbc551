/*
 * cuda_driver.h -- the CUDA driver, opened at run time with dlopen.  fusegen never
 * links libcuda: without a driver or GPU everything but the GPU backend works,
 * and asking for the GPU gives FG_ERR_NO_DEVICE with a message that names the
 * missing piece and the alternative (`--device emu`).
 *
 * (Not named cuda.h: runtime/ is on the include path and would shadow the
 * toolkit's <cuda.h>.)
 *
 * <cuda.h> from the toolkit is included for its types only; every entry point
 * is a function pointer in fg_cu_api resolved with dlsym.  The driver state is
 * process-wide (the driver itself is): one library handle, device 0 and its
 * primary context, made current on each calling thread by fg_cuda_init.
 *
 * FUSEGEN_CUDA_LIBRARY=path (read at context init, ctx->env.cuda_library)
 * opens that file instead of libcuda.so.1 (tests use a nonexistent path to
 * exercise the no-driver path).
 */
#ifndef FG_CUDA_DRIVER_H
#define FG_CUDA_DRIVER_H

#include <cuda.h>

#include "context.h"

/* Driver entry points (names without the cu prefix, e.g. api->MemAlloc). */
typedef struct fg_cu_api {
    CUresult (*Init)(unsigned flags);
    CUresult (*DriverGetVersion)(int *v);
    CUresult (*GetErrorName)(CUresult e, const char **s);
    CUresult (*GetErrorString)(CUresult e, const char **s);
    CUresult (*DeviceGetCount)(int *n);
    CUresult (*DeviceGet)(CUdevice *d, int ordinal);
    CUresult (*DeviceGetAttribute)(int *v, CUdevice_attribute a, CUdevice d);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice d);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
    CUresult (*CtxSetCurrent)(CUcontext c);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *p, size_t n);
    CUresult (*MemFree)(CUdeviceptr p);
    CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t n);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
    CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t n, CUstream s);
    CUresult (*MemsetD32)(CUdeviceptr dst, unsigned v, size_t n);
    CUresult (*MemsetD32Async)(CUdeviceptr dst, unsigned v, size_t n, CUstream s);
    CUresult (*ModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*ModuleUnload)(CUmodule m);
    CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name);
    CUresult (*FuncSetAttribute)(CUfunction f, CUfunction_attribute a, int v);
    CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
    CUresult (*StreamCreate)(CUstream *s, unsigned flags);
    CUresult (*StreamDestroy)(CUstream s);
    CUresult (*StreamSynchronize)(CUstream s);
    CUresult (*EventCreate)(CUevent *e, unsigned flags);
    CUresult (*EventDestroy)(CUevent e);
    CUresult (*EventRecord)(CUevent e, CUstream s);
    CUresult (*EventSynchronize)(CUevent e);
    CUresult (*EventElapsedTime)(float *ms, CUevent a, CUevent b);
    CUresult (*StreamBeginCapture)(CUstream s, CUstreamCaptureMode mode);
    CUresult (*StreamEndCapture)(CUstream s, CUgraph *g);
    CUresult (*GraphInstantiate)(CUgraphExec *e, CUgraph g, unsigned long long flags);
    CUresult (*GraphLaunch)(CUgraphExec e, CUstream s);
    CUresult (*GraphExecDestroy)(CUgraphExec e);
    CUresult (*GraphDestroy)(CUgraph g);
} fg_cu_api;

/* Opens the driver (once per process and library path), initialises it, takes
 * device 0's primary context and makes it current on the calling thread.
 * Without a driver or GPU records FG_ERR_NO_DEVICE naming what is missing. */
fg_status fg_cuda_init(fg_context *ctx);
/* Makes the primary context current on the calling thread when the driver
 * is open (for releases that have no context at hand); 0 or -1. */
int fg_cuda_make_current(void);
/* The resolved entry points; only valid after fg_cuda_init returned FG_OK. */
const fg_cu_api *fg_cu(void);
/* An optional driver entry point by name (dlsym on the opened driver), or
 * NULL when the driver is not open or lacks it: entry points newer than the
 * oldest supported driver (cuTensorMapEncodeTiled, CUDA 12) are looked up
 * when first needed, so an older driver keeps everything else. */
void *fg_cuda_optional_sym(const char *name);
/* cuLaunchKernelEx when device 0 and its driver support programmatic
 * dependent launch as fusegen uses it: compute capability 9.0 or newer, a
 * driver of CUDA 12.3 or newer (stream capture turns the launch attribute
 * into a programmatic graph edge from 12.3 on; CUDA-graph replay captures
 * every launch) that exports cuLaunchKernelEx.  NULL otherwise, or before a
 * successful init.  Whether a launch uses it is the backend's choice
 * (backend_cuda.c: FUSEGEN_PDL, and a kernel compiled with the wait). */
typedef CUresult (*fg_cu_launch_ex_fn)(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
fg_cu_launch_ex_fn fg_cuda_launch_ex(void);
/* The device name ("NVIDIA H200"), or "" before a successful init. */
const char *fg_cuda_device_name(void);
/* Device 0's multiprocessor count, or 0 before a successful init (or when
 * the driver would not say). */
int fg_cuda_sm_count(void);

/* "sm_90" style arch of device 0: returns 0 and fills out when a driver and a
 * GPU are present, -1 otherwise.  Records no error. */
int fg_cuda_device_arch(fg_context *ctx, char out[16]);

/* Records a failed driver call: the call text, file:line, the driver's error
 * name and string, and the kernel when kernel != NULL.  Returns FG_ERR_CUDA. */
fg_status fg_cuda_fail(fg_context *ctx, CUresult r, const char *call, const char *file, int line,
                       const char *kernel);

/* Checks one driver call; evaluates to FG_OK or the recorded FG_ERR_CUDA. */
#define CU_CHECK(ctx, call) CU_CHECK_K(ctx, call, NULL)
#define CU_CHECK_K(ctx, call, kernel)                                                                \
    __extension__({                                                                                  \
        CUresult cu_r_ = (call);                                                                     \
        cu_r_ == CUDA_SUCCESS ? FG_OK : fg_cuda_fail((ctx), cu_r_, #call, __FILE__, __LINE__, (kernel)); \
    })

#endif /* FG_CUDA_DRIVER_H */
