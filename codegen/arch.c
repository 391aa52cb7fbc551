/* arch.c -- the target arch (arch.h): the resolution order over what the
 * context holds, and the arch-string predicates. */
#include "arch.h"

#include <string.h>

#include "context.h"

const char *fg_target_arch(const fg_context *ctx)
{
    if (!ctx)
        return NULL;
    if (ctx->arch && *ctx->arch)
        return ctx->arch;
    if (ctx->device_arch[0])
        return ctx->device_arch;
    return ctx->env.arch && *ctx->env.arch ? ctx->env.arch : NULL;
}

int fg_arch_hopper(const char *arch)
{
    if (!arch)
        return 0;
    const char *p = strncmp(arch, "sm_", 3) == 0 ? arch + 3 : strncmp(arch, "compute_", 8) == 0 ? arch + 8 : NULL;
    return p && (strcmp(p, "90") == 0 || strcmp(p, "90a") == 0);
}
