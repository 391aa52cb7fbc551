/*
 * report_work.c -- FLOPs and minimum bytes of a fused group from its shapes
 * (report.h), for the roofline bound of the performance report.  A node's
 * FLOPs come from its kind's entry in the op-kind table (codegen/kind.h).
 */
#include "report.h"

#include <string.h>

#include "kind.h"

/* Whether plan-graph node `node` belongs to group grp. */
static int in_group(const fg_group *grp, int node)
{
    for (int k = 0; k < grp->nnodes; k++)
        if (grp->nodes[k] == node)
            return 1;
    return 0;
}

/* Adds tensor t to set[0..*n) unless there. */
static void add_tensor(int *set, int *n, int cap, int t)
{
    if (t < 0)
        return;
    for (int i = 0; i < *n; i++)
        if (set[i] == t)
            return;
    if (*n < cap)
        set[(*n)++] = t;
}

void fg_group_work(const fg_plan *p, int i, double *flops, double *bytes)
{
    *flops = 0;
    *bytes = 0;
    if (!p || i < 0 || i >= p->ngroups)
        return;
    const fg_group *grp = &p->groups[i];
    const fg_graph *g = p->graph;
    int set[FG_MAX_GROUP_NODES * FG_MAX_INPUTS + FG_MAX_EPILOGUE + 1], nset = 0;
    const int cap = (int)(sizeof set / sizeof set[0]);
    for (int k = 0; k < grp->nnodes; k++) {
        const fg_node *n = &g->nodes[grp->nodes[k]];
        if (n->folded)
            continue;
        const fg_kind_info *ki = fg_kind(n->op->kind);
        if (ki->flops)
            *flops += ki->flops(g, n);
        for (int j = 0; j < n->ninputs; j++) {
            int t = n->inputs[j];
            if (t < 0)
                continue;
            int prod = g->tensors[t].producer;
            if (prod >= 0 && in_group(grp, prod))
                continue;
            add_tensor(set, &nset, cap, t);
        }
    }
    /* the anchor's epilogue: bias vectors (a fold may have made them) and
     * one FLOP per output element per stage */
    if (grp->anchor >= 0) {
        double out = (double)fg_tensor_numel(&g->tensors[g->nodes[grp->anchor].output]);
        for (int k = 0; k < grp->nepi; k++) {
            const fg_group_epi *e = &grp->epi[k];
            if (e->kind == FG_EPI_BIAS) {
                add_tensor(set, &nset, cap, e->tensor);
                *flops += out;
            } else if (e->kind == FG_EPI_HOOK) {
                *flops += out;
            }
            /* APPLY stages are pointwise nodes of the group, counted above */
        }
    }
    add_tensor(set, &nset, cap, grp->output);
    for (int k = 0; k < nset; k++) {
        const fg_tensor *t = &g->tensors[set[k]];
        *bytes += (double)fg_tensor_numel(t) * (double)fg_dtype_size(t->dtype);
    }
}
