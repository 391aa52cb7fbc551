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
 * A TMA kernel (gemm_wgmma) also holds 128-byte tensor maps aligned to 64
 * (FG_KPARAM_TMAP) and takes the struct as `__grid_constant__`; launchers
 * then lay the bytes out by fg_kparam_layout.
 */
#ifndef FG_EMIT_H
#define FG_EMIT_H

#include "ir.h"
#include "util.h"

#define FG_MAX_KPARAMS 256   /* capacity; a template's tensor limit is the real bound */

typedef enum fg_kparam_kind {
    FG_KPARAM_TENSOR = 0,   /* pointer to the data of plan-graph tensor `tensor` */
    FG_KPARAM_I64,          /* an int64 scalar with value `value` */
    FG_KPARAM_WORKSPACE,    /* scratch memory of `value` bytes (split-K partial sums): shared by the plan's
                               kernels, which run one at a time; its contents do not outlive a launch */
    FG_KPARAM_COUNTERS,     /* `value` bytes of int counters (split-K arrivals): a buffer of their own,
                               zeroed once before the first launch and shared by the plan's kernels,
                               each of which leaves its counters at zero again; nothing else writes it */
    FG_KPARAM_TMAP,         /* a TMA tensor map (fg_tmap: 128 bytes, 64-byte aligned in the params struct) over
                               tensor `tensor`, described by the kernel's tmaps[value]; encoded at launch
                               time by the backend (backend.h tensormap_encode) */
    FG_KPARAM_KIND_COUNT
} fg_kparam_kind;

typedef struct fg_kparam {
    fg_kparam_kind kind;
    int tensor;             /* TENSOR */
    int writes;             /* TENSOR: the kernel writes it */
    int64_t value;          /* I64 */
    char name[48];          /* field name in the params struct */
} fg_kparam;

/* A tensor map parameter (FG_KPARAM_TMAP): the view of its tensor that
 * runtime/tmap.h's fg_tmap_desc describes (rank 1..4 here, axis 0
 * contiguous), all but the base address, which the executor adds at launch. */
#define FG_KTMAP_MAX_RANK 4
typedef struct fg_kparam_tmap {
    int rank;                               /* axes */
    int64_t dim[FG_KTMAP_MAX_RANK];         /* elements along each axis */
    int64_t stride[FG_KTMAP_MAX_RANK - 1];  /* bytes between indices of axes 1.. */
    int box[FG_KTMAP_MAX_RANK];             /* box extent per axis (elements traversed) */
    int estride[FG_KTMAP_MAX_RANK];         /* traversal step per axis (1: every element) */
    int swizzle;                            /* 0, 32, 64 or 128 (bytes) */
    int elem_bytes;                         /* 2 or 4 */
} fg_kparam_tmap;

#define FG_MAX_TMAPS 4
#define FG_TMAP_PARAM_BYTES 128   /* sizeof (fg_tmap) */
#define FG_TMAP_PARAM_ALIGN 64

/* Emission choices that are part of a kernel's identity. */
typedef struct fg_emit_opts {
    int specialize;         /* 1 (default): shapes baked in as constants; 0: passed as params */
} fg_emit_opts;

typedef struct fg_kernel {
    int group;                      /* plan group */
    char name[64];                  /* entry point, e.g. "fg_conv_bn_act_3f09a1c2d4e5": the rule and the
                                       hash of the canonical source (emit_name.c), the same for every
                                       group that computes the same thing */
    char *source;                   /* full CUDA source (malloc'd) */
    const char *template_name;
    fg_dtype dtype;
    fg_layout layout;
    unsigned grid[3], block[3];
    unsigned smem;                  /* dynamic shared memory bytes (0: static only) */
    unsigned persistent;            /* 0: one block per grid point.  N > 0: a persistent kernel over grid[0]
                                       tiles (grid[1] = grid[2] = 1): block b runs tiles b, b + gridDim.x, ...,
                                       so a launcher may launch any number of blocks from 1 to grid[0]; the
                                       CUDA backend launches min(grid[0], SMs x N), N the blocks one SM holds
                                       at once; emulation FG_EMU_PERSISTENT_BLOCKS (emu.h) */
    int arch_specific;              /* nonzero: compiles only for the architecture-specific target of the
                                       arch (sm_90 -> sm_90a: wgmma, setmaxnreg); the JIT adds the suffix */
    int nparams;
    fg_kparam params[FG_MAX_KPARAMS];
    int ntmaps;                     /* FG_KPARAM_TMAP descriptions */
    fg_kparam_tmap tmaps[FG_MAX_TMAPS];
    fg_hash128 deps_hash;           /* hash of the rule / op / hook files involved */
    char choices[256];              /* the template's numeric choices as "NAME=value ..." in the order it made
                                       them (tiles, split-K, vector widths, switches; "..." when cut): with
                                       the sizes as parameters, what the source still specializes on */
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
/* fg_emit_group under the out-of-memory guard (codegen/oom.h), for callers
 * that are not guarded themselves (the command line, the report): when an
 * allocation fails, FG_ERR_NOMEM with "out of memory while emitting group N"
 * located at the plan graph's file, and *k left zeroed (what emission had
 * allocated freed).  Inside a guard it is fg_emit_group. */
fg_status fg_emit_group_guarded(fg_context *ctx, const fg_plan *p, int group, const fg_emit_opts *o, fg_kernel *k);
/* The canonical text of k's source into out: comments dropped, white space
 * runs as one space, the entry point as `@K`, parameter i as `@Pi`.  Sources
 * with equal canonical texts compile to the same machine code. */
void fg_kernel_canonical(const fg_kernel *k, fg_buf *out);
/* The hash of k's canonical text, in hex: what a cache key takes for the
 * source. */
void fg_kernel_source_hash(const fg_kernel *k, char hex[33]);
/* Names k after base and the hash of its canonical source, renaming the
 * entry point in k->source. */
void fg_kernel_name_by_content(fg_kernel *k, const char *base);
/* Releases source, binary and loaded handle (through k->release, so that
 * codegen/ needs nothing of the runtime); the struct may be reused. */
void fg_kernel_free(fg_kernel *k);

/* The C layout of k's params struct: the byte offset of each parameter in
 * offsets[0..nparams) (NULL: not wanted) and the struct's size.  Slots are 8
 * bytes, aligned to 8; a tensor map is FG_TMAP_PARAM_BYTES aligned to
 * FG_TMAP_PARAM_ALIGN (the struct then too).  Launchers lay out the
 * argument bytes by it. */
static inline size_t fg_kparam_layout(const fg_kernel *k, size_t *offsets)
{
    size_t at = 0, align = 8;
    for (int i = 0; i < k->nparams; i++) {
        size_t a = k->params[i].kind == FG_KPARAM_TMAP ? FG_TMAP_PARAM_ALIGN : 8;
        size_t sz = k->params[i].kind == FG_KPARAM_TMAP ? FG_TMAP_PARAM_BYTES : 8;
        at = (at + a - 1) / a * a;
        if (offsets)
            offsets[i] = at;
        at += sz;
        if (a > align)
            align = a;
    }
    return (at + align - 1) / align * align;
}

/* Text of a template file (embedded copy of templates/<name>), or NULL. */
const char *fg_template_text(const char *name);

#endif /* FG_EMIT_H */
