/*
 * layernorm.c -- geometry, checks and shape inference of the layer_norm kind
 * (contract in layernorm.h).
 */
#include "layernorm.h"

#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "diag.h"
#include "shape.h"

/* Slot of input name of n when present, else -1. */
static int present(const fg_node *n, const char *name)
{
    int i = fg_node_input(n, name);
    return i >= 0 && i < n->ninputs && n->inputs[i] >= 0 ? i : -1;
}

/* Whether parameter p broadcasts onto axes axis.. of x (right-aligned; an
 * axis of p is 1 or x's; p has no more axes than the row has). */
static int row_broadcast(const fg_tensor *p, const fg_tensor *x, int axis)
{
    int nrow = x->rank - axis;
    int lead = 0;   /* leading size-1 axes beyond the row's rank are allowed */
    while (p->rank - lead > nrow && p->shape[lead] == 1)
        lead++;
    if (p->rank - lead > nrow)
        return 0;
    for (int i = p->rank - 1, d = x->rank - 1; i >= lead; i--, d--)
        if (p->shape[i] != 1 && p->shape[i] != x->shape[d])
            return 0;
    return 1;
}

int fg_ln_geom_of(const fg_graph *g, const fg_node *n, fg_ln_geom *d, char *why, size_t whysz)
{
    char b1[128], b2[128];
    const fg_tensor *x = &g->tensors[n->inputs[0]];
    int64_t a = (int64_t)fg_node_attr_num(n, "axis", -1);
    memset(d, 0, sizeof *d);
    d->axis = fg_axis_norm(a, x->rank);
    if (d->axis < 0) {
        snprintf(why, whysz, "axis %lld is out of range for the input %s (rank %d)", (long long)a,
                 fg_shape_str(x->shape, x->rank, b1, sizeof b1), x->rank);
        return -1;
    }
    int64_t na = (int64_t)fg_node_attr_num(n, "naxes", 0);
    if (na != 0 && d->axis + na != x->rank) {
        snprintf(why, whysz, "normalizes %lld axes from axis %d of the input %s, which is not through its last axis "
                 "(only trailing axes are normalized)", (long long)na, d->axis,
                 fg_shape_str(x->shape, x->rank, b1, sizeof b1));
        return -1;
    }
    d->rows = d->len = 1;
    for (int i = 0; i < x->rank; i++)
        *(i < d->axis ? &d->rows : &d->len) *= x->shape[i];
    d->rms = fg_node_attr_num(n, "rms", 0) != 0;
    d->eps = fg_node_attr_num(n, "eps", 1e-5);
    d->scale = present(n, "scale");
    d->bias = present(n, "bias");
    d->skip = present(n, "skip");
    const char *names[2] = {"scale", "bias"};
    int slots[2] = {d->scale, d->bias};
    for (int k = 0; k < 2; k++) {
        if (slots[k] < 0)
            continue;
        const fg_tensor *p = &g->tensors[n->inputs[slots[k]]];
        if (p->rank < 0 || !row_broadcast(p, x, d->axis)) {
            snprintf(why, whysz, "%s '%s' %s does not broadcast onto the normalized axes %s of the input %s",
                     names[k], p->name, fg_shape_str(p->shape, p->rank < 0 ? 0 : p->rank, b1, sizeof b1),
                     fg_shape_str(x->shape + d->axis, x->rank - d->axis, b2, sizeof b2), x->name);
            return -1;
        }
    }
    if (d->skip >= 0) {
        const fg_tensor *s = &g->tensors[n->inputs[d->skip]];
        if (s->rank != x->rank || memcmp(s->shape, x->shape, sizeof(int64_t) * (size_t)x->rank) != 0 ||
            s->dtype != x->dtype) {
            snprintf(why, whysz, "skip '%s' %s %s must have the input's shape and dtype %s %s", s->name,
                     fg_shape_str(s->shape, s->rank < 0 ? 0 : s->rank, b1, sizeof b1), fg_dtype_name(s->dtype),
                     fg_shape_str(x->shape, x->rank, b2, sizeof b2), fg_dtype_name(x->dtype));
            return -1;
        }
    }
    const fg_attr_value *to = fg_node_attr(n, "to");
    d->out = x->dtype;
    if (to && to->type == FG_ATTR_STRING && to->s && strcmp(to->s, "x") != 0) {
        int t = 0;
        while (t < FG_DTYPE_COUNT && strcmp(to->s, fg_dtype_name((fg_dtype)t)) != 0)
            t++;
        if (t == FG_DTYPE_COUNT || !fg_dtype_is_float((fg_dtype)t)) {
            snprintf(why, whysz, "to '%.40s' must be x (the input's dtype) or a float dtype (fp32, fp16, bf16)",
                     to->s);
            return -1;
        }
        d->out = (fg_dtype)t;
    }
    if (!(d->eps >= 0)) {
        snprintf(why, whysz, "eps %g must not be negative", d->eps);
        return -1;
    }
    return 0;
}

fg_status fg_infer_layer_norm(fg_infer *s)
{
    char why[400];
    fg_ln_geom d;
    const fg_tensor *x = s->in[0];
    if (fg_ln_geom_of(s->g, s->n, &d, why, sizeof why) != 0) {
        s->out->rank = -1;
        return fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, why);
    }
    s->out->rank = x->rank;
    memcpy(s->out->shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
    s->out->dtype = d.out;
    s->out->layout = x->layout;
    return FG_OK;
}
