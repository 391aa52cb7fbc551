/*
 * emit.h -- CUDA source emission: one kernel per fused group, from a template
 * in templates/ plus a generated epilogue.  The source includes only
 * "fusegen_prelude.cuh" (templates/prelude.cuh on the GPU, the emulation
 * prelude on the CPU), so NVRTC and the host C++ compiler accept the same text.
 *
 * Kernel parameter convention: every kernel takes one struct of 8-byte slots
 *   FG_KERNEL(name, fg_params_<name>, threads) { ... p.x ... }
 * each slot a pointer to a tensor or an int64 scalar, in the order of
 * fg_kernel.params.  Launchers pack the slots into an array of 8-byte values.
 */
#ifndef FG_EMIT_H
#define FG_EMIT_H

#include "ir.h"
#include "util.h"

#define FG_MAX_KPARAMS 256   /* capacity; a template's tensor limit is the real bound */

typedef enum fg_kparam_kind {
    FG_KPARAM_TENSOR = 0,   /* pointer to the data of plan-graph tensor `tensor` */
    FG_KPARAM_I64,          /* an int64 scalar with value `value` */
    FG_KPARAM_WORKSPACE,    /* scratch memory of `value` bytes (split-K partial sums): zeroed once before
                               the first launch and shared by the plan's kernels, which run one at a
                               time; a kernel leaves whatever it counts in it at zero again */
    FG_KPARAM_KIND_COUNT
} fg_kparam_kind;

typedef struct fg_kparam {
    fg_kparam_kind kind;
    int tensor;             /* TENSOR */
    int writes;             /* TENSOR: the kernel writes it */
    int64_t value;          /* I64 */
    char name[48];          /* field name in the params struct */
} fg_kparam;

/* Emission choices that are part of a kernel's identity. */
typedef struct fg_emit_opts {
    int specialize;         /* 1 (default): shapes baked in as constants; 0: passed as params */
} fg_emit_opts;

typedef struct fg_kernel {
    int group;                      /* plan group */
    char name[64];                  /* entry point, e.g. "fg_k3_conv_bn_act" */
    char *source;                   /* full CUDA source (malloc'd) */
    const char *template_name;
    fg_dtype dtype;
    fg_layout layout;
    unsigned grid[3], block[3];
    unsigned smem;                  /* dynamic shared memory bytes (0: static only) */
    int nparams;
    fg_kparam params[FG_MAX_KPARAMS];
    fg_hash128 deps_hash;           /* hash of the rule / op / hook files involved */
    /* Runtime fields, filled by runtime/ (codegen/ only releases them): */
    char key[33];                   /* cache key of the last compile (kcache.c) */
    void *binary;                   /* the compiled binary (malloc'd): a cubin or PTX, or an emulation library */
    size_t binary_size;
    void *handle;                   /* the loaded kernel of a backend (CUDA module or emulation library) */
    void (*release)(struct fg_kernel *k);   /* set with handle: releases it and clears both */
    double emit_seconds;
} fg_kernel;

/* Emits the kernel of group `group` of plan p.  Errors (unknown template, a
 * failing hook, an unsupported shape) are recorded with the rule's location. */
fg_status fg_emit_group(fg_context *ctx, const fg_plan *p, int group, const fg_emit_opts *o, fg_kernel *k);
/* Releases source, binary and loaded handle (through k->release, so that
 * codegen/ needs nothing of the runtime); the struct may be reused. */
void fg_kernel_free(fg_kernel *k);

/* Text of a template file (embedded copy of templates/<name>), or NULL. */
const char *fg_template_text(const char *name);

#endif /* FG_EMIT_H */
