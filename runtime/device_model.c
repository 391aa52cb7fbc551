/*
 * device_model.c -- the GPU table of the performance report and the
 * occupancy arithmetic (device_model.h).  H200: the figures of the
 * performance issue (4.3 TB/s measured copy bandwidth, 67 TFLOP/s fp32,
 * 495 TF32, 990 fp16/bf16 dense).  H100 SXM and A100 SXM4 80GB: NVIDIA's
 * data-sheet figures (peak memory bandwidth, not a measured copy, so their
 * bounds are a little optimistic).  Per-SM limits: the CUDA programming
 * guide's table of compute capabilities 8.0 and 9.0.
 */
#include "device_model.h"

#include <strings.h>

#include "util.h"

static const fg_device_model models[] = {
    {"h200", "NVIDIA H200 SXM (sm_90, 132 SMs; 4.3 TB/s copy, 67 TFLOP/s fp32, 495 tf32, 990 fp16/bf16)", "sm_90",
     132, 4.3e12, 67e12, 495e12, 990e12, 2048, 32, 65536, 256, 233472, 232448, 1024, 128},
    {"h100", "NVIDIA H100 SXM (sm_90, 132 SMs; 3.35 TB/s data-sheet, 67 TFLOP/s fp32, 495 tf32, 990 fp16/bf16)",
     "sm_90", 132, 3.35e12, 67e12, 495e12, 990e12, 2048, 32, 65536, 256, 233472, 232448, 1024, 128},
    {"a100", "NVIDIA A100 SXM4 80GB (sm_80, 108 SMs; 2.04 TB/s data-sheet, 19.5 TFLOP/s fp32, 156 tf32, 312 "
             "fp16/bf16)",
     "sm_80", 108, 2.039e12, 19.5e12, 156e12, 312e12, 2048, 32, 65536, 256, 167936, 166912, 1024, 128},
};

const fg_device_model *fg_device_model_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < FG_COUNTOF(models); i++)
        if (strcasecmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

const fg_device_model *fg_device_model_default(void)
{
    return &models[0];
}

const char *fg_device_model_names(void)
{
    return "h200, h100, a100";
}

static long round_up(long v, long unit)
{
    return unit > 0 ? (v + unit - 1) / unit * unit : v;
}

int fg_device_model_blocks_per_sm(const fg_device_model *m, int threads, int registers, long smem_bytes,
                                  const char **limit)
{
    const char *lim = "blocks";
    int best = m->max_blocks_per_sm;
    if (threads <= 0 || threads > 1024 || registers > 255 || smem_bytes > m->max_smem_per_block) {
        *limit = "block too large";
        return 0;
    }
    int warps = (threads + 31) / 32;
    int by_threads = m->max_threads_per_sm / (warps * 32);
    if (by_threads < best) {
        best = by_threads;
        lim = "threads";
    }
    if (registers > 0) {
        long per_warp = round_up((long)registers * 32, m->reg_unit);
        int by_regs = (int)(m->regs_per_sm / (per_warp * warps));
        if (by_regs < best) {
            best = by_regs;
            lim = "registers";
        }
    }
    long per_block = round_up((smem_bytes > 0 ? smem_bytes : 0) + m->smem_reserved, m->smem_unit);
    int by_smem = (int)(m->smem_per_sm / per_block);
    if (by_smem < best) {
        best = by_smem;
        lim = "shared memory";
    }
    *limit = lim;
    return best;
}
