/*
 * device_model.h -- a small table of GPUs the performance report (report.h)
 * can estimate for without one: peak rates for the roofline and the per-SM
 * limits for the occupancy estimate.
 *
 * Occupancy (the CUDA occupancy calculator's arithmetic, simplified):
 *   warps      = ceil(threads / 32)
 *   regs/warp  = ceil(registers * 32 / reg_unit) * reg_unit
 *   smem/block = ceil((static + dynamic + smem_reserved) / smem_unit) * smem_unit
 *   blocks/SM  = min(max_blocks_per_sm,
 *                    floor(max_threads_per_sm / (warps * 32)),
 *                    floor(regs_per_sm / (regs/warp * warps)),
 *                    floor(smem_per_sm / smem/block))
 *   occupancy  = blocks/SM * warps / (max_threads_per_sm / 32)
 * A block that exceeds a per-block limit (more than max_smem_per_block
 * bytes, more than 255 registers) fits 0 times.
 *
 * Roofline lower bound of a kernel: max(FLOPs / peak, bytes / bandwidth),
 * with peak the tensor-core rate of the kernel's dtype (fp16 / bf16; TF32
 * for fp32) when its SASS holds tensor-core instructions, else the fp32
 * CUDA-core rate.
 */
#ifndef FG_DEVICE_MODEL_H
#define FG_DEVICE_MODEL_H

typedef struct fg_device_model {
    const char *name;           /* "h200" */
    const char *description;    /* "NVIDIA H200 SXM (sm_90, 132 SMs)" */
    const char *arch;           /* the NVRTC target for it */
    int sms;
    double bandwidth;           /* bytes/s a device-to-device copy reaches */
    double fp32;                /* FLOP/s, CUDA cores */
    double tf32;                /* FLOP/s, tensor cores, dense */
    double fp16;                /* FLOP/s, tensor cores, dense (bf16 the same) */
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int regs_per_sm;
    int reg_unit;               /* registers allocated per warp in units of this */
    int smem_per_sm;            /* bytes available to blocks */
    int max_smem_per_block;     /* bytes, opt-in maximum */
    int smem_reserved;          /* bytes the driver reserves per block */
    int smem_unit;              /* allocation granularity */
} fg_device_model;

/* The model called name (case-insensitive), or NULL. */
const fg_device_model *fg_device_model_find(const char *name);
/* The default model ("h200"). */
const fg_device_model *fg_device_model_default(void);
/* The models' names, comma-separated ("h200, h100, a100"), for messages. */
const char *fg_device_model_names(void);

/* Blocks of one kernel that fit on an SM at once (formula above), and which
 * limit bound it ("threads", "registers", "shared memory", "blocks",
 * "block too large").  registers <= 0 (unknown) leaves registers out. */
int fg_device_model_blocks_per_sm(const fg_device_model *m, int threads, int registers, long smem_bytes,
                                  const char **limit);

#endif /* FG_DEVICE_MODEL_H */
