/*
 * arch.h -- the target arch, a leaf of codegen/: what codegen plans for and
 * what an arch string names.  The context's arch option, the attached GPU's
 * arch (recorded on the context by the API layer before planning,
 * fg_ctx_set_device_arch) and $FUSEGEN_ARCH are read here; nothing here
 * asks a device.
 */
#ifndef FG_ARCH_H
#define FG_ARCH_H

#include "fusegen.h"

/* The target arch codegen plans for, in the order the JIT resolves its own
 * (runtime/jit.c): the context's arch option, else the attached GPU's as
 * recorded on the context, else $FUSEGEN_ARCH, else NULL (unknown: no GPU
 * and nothing said; the JIT then compiles for sm_90).  Templates that need
 * an arch (gemm_wgmma) refuse unknown.  NULL for a NULL context. */
const char *fg_target_arch(const fg_context *ctx);

/* Nonzero when arch (sm_90, sm_90a, compute_90, compute_90a) is a Hopper
 * target, the one gemm_wgmma and conv2d_wgmma need; 0 for NULL. */
int fg_arch_hopper(const char *arch);

#endif /* FG_ARCH_H */
