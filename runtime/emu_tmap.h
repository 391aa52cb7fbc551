/*
 * emu_tmap.h -- the tensor map of the CPU emulation backend: the 128 bytes
 * that the emulated cp.async.bulk.tensor (fg_tma_load_2d / _4d in
 * templates/prelude_emu.h, run by runtime/emu_sched.c) reads, written from a
 * device-independent fg_tmap_desc (tmap.h) the way the CUDA backend has the
 * driver's cuTensorMapEncodeTiled write the device's opaque map.
 *
 * The layout (struct fg_emu_tmap) is declared in templates/emu_api.h, which
 * the emulation prelude includes too; both sides assert its size, and the
 * magic word changes whenever the layout does.  The map holds a check word
 * over its fields, so bytes that are not a map this encoder wrote (a kernel
 * parameter passed in the wrong slot, a corrupted copy) are refused by the
 * emulated copy instead of being followed.
 *
 * Shared-memory layout of a loaded box (docs/emulation.md, "Hopper
 * primitives"): the landed elements packed, axis 0 fastest (tmap.h); row r
 * of the box (its r-th run along axis 0) starts at byte
 * r * box[0] * elem_bytes;
 * with a swizzle of S bytes (32, 64, 128) box[0] * elem_bytes must equal S
 * and the byte at offset o is stored at fg_emu_tmap_swizzle(o, S).
 */
#ifndef FG_EMU_TMAP_H
#define FG_EMU_TMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../templates/emu_api.h"   /* struct fg_emu_tmap, FG_EMU_TMAP_MAGIC */
#include "tmap.h"

_Static_assert(FG_EMU_TMAP_RANK == FG_TMAP_MAX_RANK, "the emulated map has the device's axes");
_Static_assert(sizeof(fg_emu_tmap) == FG_TMAP_BYTES, "the emulated tensor map is 128 bytes, like the device's");
_Static_assert(offsetof(fg_emu_tmap, check) == 112, "the check word covers the fields before it, no padding");

/* Why d is not a valid emulation tensor map (a constant sentence), or NULL
 * when it is: the device's limits (fg_tmap_invalid, tmap.h) and, with a
 * swizzle, box[0] * elem_bytes equal to its span (the device takes a
 * shorter row; the emulator refuses it rather than guess that layout). */
const char *fg_emu_tmap_invalid(const fg_tmap_desc *d);

/* Writes the emulation tensor map of d into out128 (128 bytes; the device's
 * map is 64-byte aligned, this one needs no alignment).  Returns 0, or -1
 * when d is invalid (fg_emu_tmap_invalid says why) or an argument is NULL;
 * out128 is then left untouched. */
int fg_emu_tmap_encode(const fg_tmap_desc *d, void *out128);

/* Reads a map that fg_emu_tmap_encode wrote back into *d.  Returns 0, or -1
 * when the 128 bytes are not such a map (magic, check word, reserved words)
 * or no longer describe a valid one. */
int fg_emu_tmap_decode(const void *map128, fg_tmap_desc *d);

/* The shared-memory position of byte `offset` of a box loaded with a swizzle
 * of `span` bytes (0: none): the 16-byte chunk index, offset bits 4..6, is
 * XORed with the 128-byte row index, bits 7..9, masked to span / 16 - 1
 * chunks (PTX ISA, tensor swizzling modes: 128B repeats every 1024 bytes,
 * 64B every 512, 32B every 256).  The offset is measured from an address
 * aligned to the repeat (the emulated shared address, see docs/emulation.md).
 * Any other span returns offset unchanged. */
uint64_t fg_emu_tmap_swizzle(uint64_t offset, unsigned span);

#endif /* FG_EMU_TMAP_H */
