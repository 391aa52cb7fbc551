/*
 * emu_tmap.c -- the emulation backend's tensor maps (see emu_tmap.h): checks
 * a device-independent fg_tmap_desc (rank 1 to 5, element strides) against
 * the limits of the device's cp.async.bulk.tensor (the same limits
 * cuTensorMapEncodeTiled enforces, plus one the emulator adds: a swizzled
 * box's row is exactly the swizzle span), writes it as 128 bytes with a
 * magic and a check word, reads it back, and defines the swizzle of a
 * loaded box.
 */
#include "emu_tmap.h"

#include <stddef.h>
#include <string.h>

/* A mix of the fields (splitmix64 steps over the 112 bytes before the
 * check word), so that a map whose bytes were changed or shifted is refused
 * rather than followed. */
static uint64_t check_word(const fg_emu_tmap *m)
{
    uint64_t words[offsetof(fg_emu_tmap, check) / 8];
    memcpy(words, m, sizeof words);
    uint64_t h = 0x6a09e667f3bcc909ull;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        h ^= words[i];
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

const char *fg_emu_tmap_invalid(const fg_tmap_desc *d)
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
        break;
    case FG_TMAP_SWIZZLE_32B:
    case FG_TMAP_SWIZZLE_64B:
    case FG_TMAP_SWIZZLE_128B:
        if (inner != (unsigned)d->swizzle)
            return "with a swizzle the box's inner extent (box[0] * elem_bytes) must equal the swizzle span";
        break;
    default:
        return "swizzle must be NONE, 32B, 64B or 128B";
    }
    return NULL;
}

int fg_emu_tmap_encode(const fg_tmap_desc *d, void *out128)
{
    if (!out128 || fg_emu_tmap_invalid(d))
        return -1;
    fg_emu_tmap m;
    memset(&m, 0, sizeof m);
    m.magic = FG_EMU_TMAP_MAGIC;
    m.base = d->base;
    m.elem_bytes = d->elem_bytes;
    m.swizzle = (uint32_t)d->swizzle;
    m.rank = (uint8_t)d->rank;
    for (unsigned i = 0; i < d->rank; i++) {
        m.dim[i] = d->dim[i];
        if (i > 0)
            m.stride[i - 1] = d->stride[i - 1];
        m.box[i] = (uint16_t)d->box[i];
        m.estride[i] = (uint8_t)d->estride[i];
    }
    m.check = check_word(&m);
    memcpy(out128, &m, sizeof m);
    return 0;
}

int fg_emu_tmap_decode(const void *map128, fg_tmap_desc *d)
{
    if (!map128 || !d)
        return -1;
    fg_emu_tmap m;
    memcpy(&m, map128, sizeof m);
    if (m.magic != FG_EMU_TMAP_MAGIC || m.check != check_word(&m) || m.reserved || m.rank < 1 ||
        m.rank > FG_TMAP_MAX_RANK)
        return -1;
    fg_tmap_desc t;
    memset(&t, 0, sizeof t);
    t.base = m.base;
    t.elem_bytes = m.elem_bytes;
    t.rank = m.rank;
    for (unsigned i = 0; i < t.rank; i++) {
        t.dim[i] = m.dim[i];
        if (i > 0)
            t.stride[i - 1] = m.stride[i - 1];
        t.box[i] = m.box[i];
        t.estride[i] = m.estride[i];
    }
    t.swizzle = (fg_tmap_swizzle)m.swizzle;
    if (fg_emu_tmap_invalid(&t))
        return -1;
    *d = t;
    return 0;
}

uint64_t fg_emu_tmap_swizzle(uint64_t offset, unsigned span)
{
    if (span != 32 && span != 64 && span != 128)
        return offset;
    uint64_t mask = span / 16 - 1;
    return offset ^ (((offset >> 7) & mask) << 4);
}
