/*
 * emu.h -- the CPU emulation backend.  Runs the exact generated kernel source
 * on the CPU: compiled with the host C++ compiler against the emulation
 * prelude (templates/prelude_emu.h, same function names as the device
 * prelude) into a shared object, cached like cubins.  Blocks run one after
 * another; the threads of a block run as cooperative contexts (ucontext) that
 * switch at barriers and warp collectives.  FUSEGEN_EMU_ASAN=1 builds the
 * kernels with AddressSanitizer (the host program must then be ASan-built too).
 */
#ifndef FG_EMU_H
#define FG_EMU_H

#include "emit.h"

/* Builds (or finds in the cache) k's host shared object; sets k->emu. */
fg_status fg_emu_build(fg_context *ctx, fg_kernel *k);
/* Runs k with grid/block from k and the 8-byte parameter slots args[0..k->nparams). */
fg_status fg_emu_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *args);
/* Releases k->emu. */
void fg_emu_release(fg_kernel *k);

#endif /* FG_EMU_H */
