/*
 * reduce.c -- the reductions of the reduce kind and the geometry of a
 * reduce node (contract in reduce.h).
 */
#include "reduce.h"

#include <stdio.h>
#include <string.h>

#include "shape.h"
#include "util.h"

const char *const fg_reduction_names[] = {"sum", "mean", "max", "min", "prod", "sum_square", "l1", "l2",
                                         "log_sum", "log_sum_exp", "argmax", "argmin", "argmax_last",
                                         "argmin_last", NULL};
FG_STATIC_ASSERT(FG_COUNTOF(fg_reduction_names) == FG_RED_COUNT + 1, "reduction names out of sync with fg_reduction");

const char *fg_reduction_name(fg_reduction r) { return (unsigned)r < FG_RED_COUNT ? fg_reduction_names[r] : "?"; }

int fg_reduction_is_arg(fg_reduction r) { return r >= FG_RED_ARGMAX && r <= FG_RED_ARGMIN_LAST; }

int fg_reduction_find(const char *name)
{
    for (int r = 0; name && r < FG_RED_COUNT; r++)
        if (strcmp(fg_reduction_names[r], name) == 0)
            return r;
    return -1;
}

fg_reduction fg_node_reduction(const fg_node *n)
{
    int r = fg_reduction_find(n->op->reduce);
    return r < 0 ? FG_RED_SUM : (fg_reduction)r;
}

int fg_reduce_geom_of(const fg_node *n, const fg_tensor *x, fg_reduce_geom *d, char *why, size_t whysz)
{
    const fg_attr_value *ax = fg_node_attr(n, "axes");
    memset(d, 0, sizeof *d);
    if (!ax || ax->type != FG_ATTR_INTS || ax->n < 1) {
        snprintf(why, whysz, "'axes' must list at least one axis");
        return -1;
    }
    for (int i = 0; i < ax->n; i++) {
        int64_t a = ax->ints[i] < 0 ? ax->ints[i] + x->rank : ax->ints[i];
        if (a < 0 || a >= x->rank) {
            snprintf(why, whysz, "axis %lld is out of range for rank %d", (long long)ax->ints[i], x->rank);
            return -1;
        }
        if (d->mask & (1u << a)) {
            snprintf(why, whysz, "axis %lld is given twice", (long long)a);
            return -1;
        }
        d->mask |= 1u << a;
    }
    int keep = fg_node_attr_num(n, "keepdims", 1) != 0;
    d->rows = d->len = 1;
    for (int a = 0; a < x->rank; a++) {
        if (d->mask & (1u << a)) {
            d->len *= x->shape[a];
            if (keep)
                d->yshape[d->yrank++] = 1;
        } else {
            d->rows *= x->shape[a];
            d->yshape[d->yrank++] = x->shape[a];
        }
    }
    if (d->yrank == 0)   /* every axis reduced, none kept: rank 0 is [1] */
        d->yshape[d->yrank++] = 1;
    return 0;
}

fg_status fg_infer_reduce(fg_infer *s)
{
    char why[160];
    fg_reduce_geom d;
    const fg_tensor *x = s->in[0];
    if (fg_reduce_geom_of(s->n, x, &d, why, sizeof why) != 0) {
        s->out->rank = -1;
        return fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, why);
    }
    s->out->rank = d.yrank;
    memcpy(s->out->shape, d.yshape, sizeof(int64_t) * (size_t)d.yrank);
    s->out->dtype = s->n->op->dtype_fixed >= 0 ? (fg_dtype)s->n->op->dtype_fixed : x->dtype;
    s->out->layout = x->rank == 4 && d.yrank == 4 ? x->layout : FG_LAYOUT_NCHW;
    return FG_OK;
}
