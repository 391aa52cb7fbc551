/*
 * emu.h -- the CPU emulation backend's toolchain and kernels.  Runs the exact
 * generated kernel source on the CPU: compiled with the host C++ compiler
 * against the emulation prelude (templates/prelude_emu.h, same function names
 * as the device prelude) into a shared object, cached like cubins
 * (kcache.c).  Blocks run one after another; the threads of a block run as
 * cooperative contexts (ucontext) that switch at barriers and warp
 * collectives.  FUSEGEN_EMU_ASAN=1 builds the kernels with AddressSanitizer
 * (the host program must then be ASan-built too).  backend_emu.c makes these
 * the emulation entries of the backend table.
 */
#ifndef FG_EMU_H
#define FG_EMU_H

#include "emit.h"

/* Builds (or finds in the cache) k's host shared object and loads it: sets
 * k->key, k->handle and k->release (fg_kernel_obtain, then fg_emu_load; the
 * library's bytes are freed once it is loaded).  Does nothing when k is
 * already loaded for emulation. */
fg_status fg_emu_build(fg_context *ctx, fg_kernel *k);
/* Blocks an emulated launch of a persistent kernel (fg_kernel.persistent)
 * runs: few, so that every block loops over several tiles as on the GPU
 * (the tile loop, and barrier phases carried from tile to tile, are what
 * the emulation then checks). */
#define FG_EMU_PERSISTENT_BLOCKS 3

/* Runs k with grid/block from k (grid[0] at most FG_EMU_PERSISTENT_BLOCKS
 * for a persistent kernel) and the 8-byte parameter slots
 * args[0..k->nparams). */
fg_status fg_emu_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *args);
/* Releases k's emulation handle (nothing when k has none). */
void fg_emu_release(fg_kernel *k);

/* ---- toolchain and load entries of the emulation backend (backend.h) ---- */
fg_status fg_emu_toolchain_new(fg_context *ctx, const char *target, void **tc);
void fg_emu_toolchain_free(void *tc);
void fg_emu_key(const void *tc, const fg_kernel *k, char key[33]);
fg_status fg_emu_compile(fg_context *ctx, const void *tc, const fg_kernel *k, void **bin, size_t *size, char **meta,
                         char **log);
/* dlopens k->binary (through a private temporary file). */
fg_status fg_emu_load(fg_context *ctx, fg_kernel *k);

#endif /* FG_EMU_H */
