/* kernel.c -- life cycle of an emitted kernel (fg_kernel, emit.h). */
#include <stdlib.h>

#include "emit.h"
#include "emu.h"

void fg_kernel_free(fg_kernel *k)
{
    if (!k)
        return;
    free(k->source);
    k->source = NULL;
    free(k->binary);
    k->binary = NULL;
    k->binary_size = 0;
    if (k->emu)
        fg_emu_release(k);
    k->emu = NULL;
}
