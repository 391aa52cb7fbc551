/*
 * reshape_alias.c -- Flatten and Reshape without a kernel: when a lone
 * flatten / reshape group only copies its input's bytes in the order they are
 * stored, its output is made a view (concat_inplace.h) of its input at
 * offset 0 and the group is dropped, so the consumers read the producer's
 * buffer directly.
 *
 * A flatten or reshape keeps the logical (row-major) order of its elements,
 * so the copy is the identity on bytes exactly when both tensors are stored
 * in row-major order: any rank other than 4, NCHW, or NHWC whose channel
 * axis or whose spatial axes have extent 1 (the global pool's [N, C, 1, 1]
 * before a classifier).  The output is aliased (fg_reshape_alias_plan) when
 *
 *   - the group is the node alone, or a chain of flatten / reshape nodes
 *     (the planner groups consecutive ones), ending in the group's output;
 *   - input and output have one dtype and are both stored row-major;
 *   - the input is stored by a kernel of the plan (the output of a group, a
 *     view itself, or a concat output its producers write in place: views
 *     nest), not a graph input, a constant or a graph output;
 *   - the output is not a graph output (stored where the caller binds it)
 *     and is not written in place in a concat already.
 *
 * The executor then resolves the output to its root like any view, and keeps
 * the root live while the output is read.  The views' hazard check
 * (fg_concat_views_check) holds trivially: nothing writes the view.
 */
#include "reshape_alias.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "diag.h"
#include "expr.h"
#include "kind.h"
#include "util.h"

/* Nonzero when t's stored element order is its logical row-major order. */
static int stored_row_major(const fg_tensor *t)
{
    if (t->rank != 4 || t->layout != FG_LAYOUT_NHWC)
        return 1;
    return t->shape[1] == 1 || t->shape[2] * t->shape[3] == 1;
}

/* The views record of p, made empty when the plan has none yet. */
static fg_concat_views *views_of(fg_plan *p)
{
    if (p->views)
        return p->views;
    const fg_graph *g = p->graph;
    size_t nt = (size_t)g->ntensors + 1;
    fg_concat_views *v = fg_xcalloc(1, sizeof *v);
    v->ntensors = g->ntensors;
    v->parent = fg_xmalloc(nt * sizeof *v->parent);
    v->slot = fg_xmalloc(nt * sizeof *v->slot);
    v->offset = fg_xcalloc(nt, sizeof *v->offset);
    for (int t = 0; t < g->ntensors; t++)
        v->parent[t] = v->slot[t] = -1;
    p->views = v;
    return v;
}

/* The first node of group gi when the group is a chain of flatten /
 * reshape nodes (each reading the one before) ending in the group's output,
 * or -1.  The chain's input is that node's input 0. */
static int lone_reshape(const fg_plan *p, int gi)
{
    const fg_group *grp = &p->groups[gi];
    const fg_graph *g = p->graph;
    if (grp->nnodes < 1)
        return -1;
    for (int k = 0; k < grp->nnodes; k++) {
        const fg_node *nd = &g->nodes[grp->nodes[k]];
        fg_op_kind kind = nd->op->kind;
        if ((kind != FG_OPK_FLATTEN && kind != FG_OPK_RESHAPE) || nd->folded || nd->ninputs < 1 || nd->inputs[0] < 0)
            return -1;
        if (k > 0 && nd->inputs[0] != g->nodes[grp->nodes[k - 1]].output)
            return -1;
    }
    return g->nodes[grp->nodes[grp->nnodes - 1]].output == grp->output ? grp->nodes[0] : -1;
}

/* 1 with the reason in why when tensor yt (a chain's output) cannot alias
 * xt (its input); written[t]: t is the output of a group or a view. */
static int alias_refused(const fg_plan *p, int xt, int yt, const char *written, char *why, size_t whysz)
{
    const fg_graph *g = p->graph;
    const fg_tensor *x = &g->tensors[xt], *y = &g->tensors[yt];
    if (x->is_input || x->is_weight || x->is_output)
        return snprintf(why, whysz, "%s is a graph %s", x->name,
                        x->is_input ? "input" : x->is_weight ? "constant" : "output"), 1;
    if (!written[xt])
        return snprintf(why, whysz, "%s is not stored by a kernel", x->name), 1;
    if (y->is_output)
        return snprintf(why, whysz, "%s is a graph output (stored where the caller binds it)", y->name), 1;
    if (p->views && p->views->parent[yt] >= 0)
        return snprintf(why, whysz, "%s is written in place in %s", y->name, g->tensors[p->views->parent[yt]].name),
               1;
    if (x->dtype != y->dtype)
        return snprintf(why, whysz, "%s is %s, %s %s", x->name, fg_dtype_name(x->dtype), y->name,
                        fg_dtype_name(y->dtype)), 1;
    if (!stored_row_major(x) || !stored_row_major(y))
        return snprintf(why, whysz, "%s is stored %s with channels and pixels (not in row-major order)",
                        stored_row_major(x) ? y->name : x->name, fg_layout_name(FG_LAYOUT_NHWC)), 1;
    return 0;
}

fg_status fg_reshape_alias_plan(fg_context *ctx, fg_plan *p)
{
    const fg_graph *g = p->graph;
    int any = 0;
    for (int gi = 0; gi < p->ngroups && !any; gi++)
        any = lone_reshape(p, gi) >= 0;
    if (!any)
        return FG_OK;
    char *written = fg_xcalloc((size_t)g->ntensors + 1, 1);
    for (int gi = 0; gi < p->ngroups; gi++)
        if (p->groups[gi].output >= 0 && p->groups[gi].output < g->ntensors)
            written[p->groups[gi].output] = 1;
    for (int t = 0; p->views && t < g->ntensors; t++)
        if (p->views->parent[t] >= 0)   /* a view, and the concat output it lies in (its producers write it) */
            written[t] = written[p->views->parent[t]] = 1;
    int *remap = fg_xmalloc((size_t)p->ngroups * sizeof *remap);
    int kept = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        int n = lone_reshape(p, gi);
        char why[512];
        if (n >= 0) {
            const fg_node *nd = &g->nodes[n];
            int xt = nd->inputs[0], yt = p->groups[gi].output;
            fg_buf b = {0};
            fg_buf_printf(&b, "%s %s: ", nd->op->name, g->nodes[p->groups[gi].nodes[p->groups[gi].nnodes - 1]].name);
            fg_concat_views *v = views_of(p);
            if (!alias_refused(p, xt, yt, written, why, sizeof why)) {
                v->parent[yt] = xt;
                v->slot[yt] = -1;
                v->offset[yt] = 0;
                v->naliases++;
                fg_buf_printf(&b, "no kernel (%s aliases %s: the same bytes in the same order)", g->tensors[yt].name,
                              g->tensors[xt].name);
                *FG_PUSH(v->alias_lines, v->nalias_lines, v->alias_cap) = fg_buf_take(&b);
                remap[gi] = -1;
                free(p->groups[gi].choice);
                for (int k = 0; k < p->groups[gi].nepi; k++)
                    fg_expr_free(p->groups[gi].epi[k].expr);
                continue;
            }
            fg_buf_printf(&b, "copied because %s", why);
            *FG_PUSH(v->alias_lines, v->nalias_lines, v->alias_cap) = fg_buf_take(&b);
        }
        remap[gi] = kept;
        p->groups[kept++] = p->groups[gi];
    }
    fg_plan_renumber(p, remap, kept);
    free(remap);
    free(written);
    char why[512];
    if (!fg_concat_views_check(p, why, sizeof why))
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "reshape aliases: %s", why);
    return FG_OK;
}
