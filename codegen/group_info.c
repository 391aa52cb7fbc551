/*
 * group_info.c -- fg_plan_group_info: what `fusegen plan` shows of one
 * fused group (rule and its file:line, nodes, template, epilogue), as data,
 * so that tools need not parse kernel names (contract in fusegen.h).
 */
#include <stdio.h>
#include <string.h>

#include "context.h"

#define BAD(...) fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_group_info: " __VA_ARGS__)

FG_STATIC_ASSERT(FG_GROUP_INFO_MAX_NODES >= FG_MAX_GROUP_NODES, "fg_group_info.nodes too small");

/* Appends s to out[0..size) (size > 4), ending in "..." when it does not fit. */
static void put(char *out, size_t size, const char *s)
{
    size_t o = strlen(out);
    int n = snprintf(out + o, size - o, "%s", s);
    if (n < 0 || o + (size_t)n >= size)
        strcpy(out + size - 4, "...");
}

FG_API fg_status fg_plan_group_info(fg_context *ctx, const fg_plan *p, int i, fg_group_info *info)
{
    if (!ctx)
        return FG_ERR_INPUT;
    if (!p)
        return BAD("plan is NULL");
    if (!info)
        return BAD("info is NULL");
    if (i < 0 || i >= p->ngroups)
        return BAD("group %d does not exist (the plan has %d)", i, p->ngroups);
    const fg_group *grp = &p->groups[i];
    if (grp->rule >= ctx->nrules)
        return BAD("group %d names rule %d, which this context does not have (the plan was built with another "
                   "context)", i, grp->rule);
    memset(info, 0, sizeof *info);
    if (grp->rule >= 0) {
        const fg_rule *r = ctx->rules[grp->rule];
        info->rule = r->name;
        info->rule_file = r->loc.file;
        info->rule_line = r->loc.line;
    }
    const fg_graph *g = p->graph;
    info->nnodes = grp->nnodes < FG_GROUP_INFO_MAX_NODES ? grp->nnodes : FG_GROUP_INFO_MAX_NODES;
    for (int k = 0; k < info->nnodes; k++) {
        info->nodes[k] = g->nodes[grp->nodes[k]].name;
        info->folded[k] = g->nodes[grp->nodes[k]].folded;
    }
    info->anchor = grp->anchor >= 0 ? g->nodes[grp->anchor].name : NULL;
    info->template_name = grp->template_name ? grp->template_name : "?";
    info->output = grp->output >= 0 ? g->tensors[grp->output].name : NULL;
    if (grp->nepi == 0)
        put(info->epilogue, sizeof info->epilogue, "-");
    for (int k = 0; k < grp->nepi; k++) {
        const fg_group_epi *e = &grp->epi[k];
        char part[300];
        if (e->kind == FG_EPI_BIAS)
            snprintf(part, sizeof part, "bias");
        else if (e->kind == FG_EPI_APPLY)
            snprintf(part, sizeof part, "apply(%.200s)", g->nodes[e->node].op->name);
        else
            snprintf(part, sizeof part, "hook(%.200s)", e->hook ? e->hook : "?");
        if (k)
            put(info->epilogue, sizeof info->epilogue, ", ");
        put(info->epilogue, sizeof info->epilogue, part);
    }
    return FG_OK;
}
