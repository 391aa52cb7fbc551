/* kernel.c -- life cycle of an emitted kernel (fg_kernel, emit.h).  The
 * runtime's handle is released through the function the runtime stored with
 * it, so this file needs nothing of runtime/. */
#include <stdlib.h>

#include "emit.h"

void fg_kernel_free(fg_kernel *k)
{
    if (!k)
        return;
    if (k->release)
        k->release(k);
    k->release = NULL;
    k->handle = NULL;
    free(k->source);
    k->source = NULL;
    free(k->binary);
    k->binary = NULL;
    k->binary_size = 0;
}
