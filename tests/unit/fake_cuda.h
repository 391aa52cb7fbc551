/*
 * fake_cuda.h -- the control block of tests/unit/fake_cuda.c, a stand-in
 * for libcuda.so.1 that FUSEGEN_CUDA_LIBRARY can name: every entry point
 * runtime/cuda.c resolves, with a device of the test's choosing, and a
 * record of the last kernel launch.  A test dlopens the same file and looks
 * up `fake_cuda` (the one fake_cuda_state of the process).
 */
#ifndef FG_FAKE_CUDA_H
#define FG_FAKE_CUDA_H

#include <cuda.h>

/* Which launch entry point recorded `last`. */
enum { FAKE_LAUNCH_NONE, FAKE_LAUNCH_PLAIN, FAKE_LAUNCH_EX };

typedef struct fake_cuda_state {
    /* the device, read by cuDeviceGetAttribute / cuDriverGetVersion */
    int cc_major, cc_minor, sms;
    int driver_version;          /* 12080: CUDA 12.8 */
    /* whether cuModuleGetGlobal finds "<kernel>__fg_grid_dep" (4 bytes):
     * -1 when the loaded image (an ELF cubin) names it, as the driver would
     * find it; 0 or 1 for any image */
    int has_marker;
    CUresult launch_result;      /* what the next launches return */
    /* counts */
    int launches, launches_ex, global_lookups, markers_found;
    /* the last launch */
    struct {
        int api;                 /* FAKE_LAUNCH_* */
        unsigned grid[3], block[3], smem;
        CUstream stream;
        void *param0;            /* params[0] at the launch (the array itself is the caller's, gone after) */
        int has_params;
        unsigned nattrs;
        CUlaunchAttribute attr0; /* the first attribute (cuLaunchKernelEx) */
        char fn[64];             /* the function's name (cuModuleGetFunction) */
    } last;
    char last_global[96];        /* the name the last cuModuleGetGlobal asked for */
} fake_cuda_state;

#endif /* FG_FAKE_CUDA_H */
