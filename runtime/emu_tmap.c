/*
 * emu_tmap.c -- the emulation backend's tensor maps (see emu_tmap.h): checks
 * a device-independent fg_tmap_desc (rank 1 to 5, element strides) against
 * the limits of the device's cp.async.bulk.tensor (fg_tmap_invalid, tmap.c,
 * plus one the emulator adds: a swizzled box's row is exactly the swizzle
 * span), writes it as 128 bytes with a
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
    const char *why = fg_tmap_invalid(d);
    if (why)
        return why;
    if (d->swizzle != FG_TMAP_SWIZZLE_NONE && d->box[0] * d->elem_bytes != (unsigned)d->swizzle)
        return "with a swizzle the box's inner extent (box[0] * elem_bytes) must equal the swizzle span";
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
