/*
 * tmap.c -- the limits a tensor map description must meet on the device
 * (tmap.h): one check for both backends, the emulator adding its own
 * stricter swizzle rule (emu_tmap.c).
 */
#include "tmap.h"

#include <stddef.h>

const char *fg_tmap_invalid(const fg_tmap_desc *d)
{
    if (!d)
        return "no tensor map description";
    if (d->elem_bytes != 2 && d->elem_bytes != 4)
        return "elem_bytes must be 2 or 4";
    if (d->rank < 1 || d->rank > FG_TMAP_MAX_RANK)
        return "the rank must be 1 to 5";
    if (!d->base || d->base % 16)
        return "the base address must be non-zero and 16-byte aligned";
    for (unsigned i = 0; i < d->rank; i++)
        if (d->dim[i] < 1 || d->dim[i] > ((uint64_t)1 << 32))
            return "each dimension must be 1 to 2^32 elements";
    uint64_t extent = d->dim[0] * d->elem_bytes;   /* bytes spanned by the axes inside axis i */
    for (unsigned i = 1; i < d->rank; i++) {
        uint64_t st = d->stride[i - 1];
        if (st % 16 || st >= ((uint64_t)1 << 40))
            return "each stride must be a multiple of 16 bytes below 2^40";
        if (d->dim[i] > 1 && st < extent)
            return i == 1 ? "the row stride is shorter than a row" : "a stride is shorter than the axes inside it";
        extent = st * d->dim[i];
    }
    for (unsigned i = 0; i < d->rank; i++) {
        if (d->box[i] < 1 || d->box[i] > 256)
            return "each box extent must be 1 to 256 elements";
        if (d->estride[i] < 1 || d->estride[i] > 8 || (i == 0 && d->estride[i] != 1))
            return "each element stride must be 1 to 8, and 1 along axis 0";
    }
    unsigned inner = d->box[0] * d->elem_bytes;
    if (inner % 16)
        return "the box's inner extent must be a multiple of 16 bytes";
    switch (d->swizzle) {
    case FG_TMAP_SWIZZLE_NONE:
        return NULL;
    case FG_TMAP_SWIZZLE_32B:
    case FG_TMAP_SWIZZLE_64B:
    case FG_TMAP_SWIZZLE_128B:
        return inner > (unsigned)d->swizzle ? "a swizzled box's inner extent (box[0] * elem_bytes) must not exceed "
                                              "the swizzle span"
                                            : NULL;
    default:
        return "swizzle must be NONE, 32B, 64B or 128B";
    }
}
