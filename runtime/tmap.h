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
 * The view is 2-D and row-major: dim[0] elements along the contiguous axis,
 * dim[1] rows, row_stride bytes between rows.  A copy moves one box of
 * box[0] x box[1] elements whose first element is at coordinates (c0, c1);
 * elements outside [0, dim) read as zero.  With a swizzle the box's inner
 * extent (box[0] * elem_bytes) must not exceed the swizzle span and the
 * 16-byte chunks of each row of the box are permuted in shared memory as
 * the PTX ISA's swizzle modes say.
 */
#ifndef FG_TMAP_H
#define FG_TMAP_H

#include <stdint.h>

enum { FG_TMAP_BYTES = 128, FG_TMAP_ALIGN = 64 };

typedef enum fg_tmap_swizzle {
    FG_TMAP_SWIZZLE_NONE = 0,
    FG_TMAP_SWIZZLE_32B = 32,
    FG_TMAP_SWIZZLE_64B = 64,
    FG_TMAP_SWIZZLE_128B = 128
} fg_tmap_swizzle;

typedef struct fg_tmap_desc {
    uint64_t base;          /* device address of element (0, 0); 16-byte aligned */
    unsigned elem_bytes;    /* 2 (fp16 / bf16) or 4 (fp32 / tf32) */
    uint64_t dim[2];        /* elements along the contiguous axis, rows */
    uint64_t row_stride;    /* bytes between rows; a multiple of 16 */
    unsigned box[2];        /* box extent per axis, each 1..256 */
    fg_tmap_swizzle swizzle;
} fg_tmap_desc;

#endif /* FG_TMAP_H */
