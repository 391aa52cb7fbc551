/*
 * precision.c -- a graph's precision setting (fusegen.h, fg_precision):
 * its names and the public getter / setter.  The YAML key is read by
 * graph_load.c, the CLI flag by tools/cmd_common.c; templates read
 * g->precision of the plan's graph in their checks (template.h).
 */
#include <string.h>

#include "context.h"

static const char *const precision_names[] = {"exact", "tf32"};
FG_STATIC_ASSERT(FG_COUNTOF(precision_names) == FG_PRECISION_COUNT, "precision_names out of sync");

FG_API const char *fg_precision_name(fg_precision p)
{
    return (unsigned)p < FG_COUNTOF(precision_names) ? precision_names[p] : "?";
}

/* Precision named s ("exact", "tf32"), or -1. */
int fg_precision_parse(const char *s)
{
    for (int i = 0; s && i < FG_PRECISION_COUNT; i++)
        if (strcmp(s, precision_names[i]) == 0)
            return i;
    return -1;
}

FG_API fg_status fg_graph_set_precision(fg_context *ctx, fg_graph *g, fg_precision p)
{
    if (!ctx)
        return FG_ERR_INPUT;
    if (!g)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_graph_set_precision: graph is NULL");
    if ((unsigned)p >= FG_PRECISION_COUNT)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                             "fg_graph_set_precision: precision %d is not an fg_precision (exact or tf32)", (int)p);
    g->precision = p;
    return FG_OK;
}

FG_API fg_precision fg_graph_precision(const fg_graph *g) { return g ? g->precision : FG_PRECISION_EXACT; }
