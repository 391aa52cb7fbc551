/*
 * tmap.h -- what a TMA tensor map describes, independent of the device.
 *
 * Hopper kernels (sm_90a) copy tiles of global memory into shared memory
 * with cp.async.bulk.tensor, which reads a 128-byte, 64-byte aligned tensor
 * map passed to the kernel as a __grid_constant__ parameter (the device
 * prelude's fg_tmap).  The executor describes each map with an fg_tmap_desc
 * and asks the backend to encode it: the CUDA backend through the driver's
 * cuTensorMapEncodeTiled, the emulation backend in the layout its prelude
 * reads (fg_emu_tmap_encode, runtime/emu_tmap.c; mirrored in
 * templates/prelude_emu.h).
 *
 * The view has rank 1 to 5 (FG_TMAP_MAX_RANK), axis 0 contiguous: dim[i]
 * elements along axis i, stride[i - 1] bytes between consecutive indices of
 * axis i >= 1 (the driver's globalStrides).  A copy traverses a box of
 * box[i] elements along each axis from the coordinates (c0, c1, ...) of its
 * first element, taking every estride[i]-th (the driver's elementStrides,
 * 1 to 8; estride[0] is 1, as TMA has no stride along the contiguous axis),
 * so ceil(box[i] / estride[i]) elements of axis i land in shared memory,
 * packed, axis 0 fastest.  Elements outside [0, dim) read as zero.  With a
 * swizzle the box's inner extent (box[0] * elem_bytes) must not exceed the
 * swizzle span and the 16-byte chunks of each row of the box (one axis-0
 * run) are permuted in shared memory as the PTX ISA's swizzle modes say.
 */
#ifndef FG_TMAP_H
#define FG_TMAP_H

#include <stdint.h>

enum { FG_TMAP_BYTES = 128, FG_TMAP_ALIGN = 64, FG_TMAP_MAX_RANK = 5 };

typedef enum fg_tmap_swizzle {
    FG_TMAP_SWIZZLE_NONE = 0,
    FG_TMAP_SWIZZLE_32B = 32,
    FG_TMAP_SWIZZLE_64B = 64,
    FG_TMAP_SWIZZLE_128B = 128
} fg_tmap_swizzle;

typedef struct fg_tmap_desc {
    uint64_t base;                              /* device address of element (0, ...); 16-byte aligned */
    unsigned elem_bytes;                        /* 2 (fp16 / bf16) or 4 (fp32 / tf32) */
    unsigned rank;                              /* axes, 1..FG_TMAP_MAX_RANK */
    uint64_t dim[FG_TMAP_MAX_RANK];             /* elements along each axis, axis 0 contiguous */
    uint64_t stride[FG_TMAP_MAX_RANK - 1];      /* bytes between indices of axes 1..rank-1; multiples of 16 */
    unsigned box[FG_TMAP_MAX_RANK];             /* elements traversed per axis, each 1..256 */
    unsigned estride[FG_TMAP_MAX_RANK];         /* traversal step per axis, 1..8 (estride[0] 1) */
    fg_tmap_swizzle swizzle;
} fg_tmap_desc;

/* Why d is not a tensor map the device takes (a constant sentence), or NULL
 * when it is (tmap.c): elem_bytes 2 or 4; rank 1..5; base non-zero and
 * 16-byte aligned; each dim in 1..2^32; each stride a multiple of 16 below
 * 2^40 and, where the axis has more than one index, at least the extent of
 * the axes inside it (stride[0] >= dim[0] * elem_bytes, stride[i] >=
 * stride[i - 1] * dim[i]); each box extent in 1..256 with box[0] *
 * elem_bytes a multiple of 16; each estride in 1..8 and estride[0] 1;
 * swizzle NONE, 32B, 64B or 128B, a swizzled box's inner extent (box[0] *
 * elem_bytes) at most its span.  The limits cuTensorMapEncodeTiled
 * documents for a tiled map without interleave. */
const char *fg_tmap_invalid(const fg_tmap_desc *d);

/* Elements of axis i that a copy of d lands: ceil(box[i] / estride[i]). */
static inline unsigned fg_tmap_box_count(const fg_tmap_desc *d, unsigned i)
{
    unsigned e = d->estride[i] ? d->estride[i] : 1;
    return (d->box[i] + e - 1) / e;
}

#endif /* FG_TMAP_H */
