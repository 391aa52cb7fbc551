/*
 * conv_transpose.c -- the geometry and shape inference of a
 * conv_transpose2d node (contract in conv_transpose.h).
 */
#include "conv_transpose.h"

#include <stdio.h>
#include <string.h>

#include "shape.h"

/* Element index of ints attribute name (the last one for a shorter list),
 * def when n's op lacks it. */
static int64_t ints_at(const fg_node *n, const char *name, int i, int64_t def)
{
    const fg_attr_value *v = fg_node_attr(n, name);
    if (!v || v->type != FG_ATTR_INTS || v->n < 1)
        return def;
    return v->ints[i < v->n ? i : v->n - 1];
}

int fg_convt_geom_of(const fg_node *n, const fg_tensor *x, const fg_tensor *w, const fg_tensor *bias,
                     fg_convt_geom *d, char *why, size_t whysz)
{
    memset(d, 0, sizeof *d);
    if (x->rank != 4 || w->rank != 4) {
        snprintf(why, whysz, "input and weight must be rank 4 (x [N, C, H, W], weight [C, K/groups, R, S]); got "
                 "ranks %d and %d", x->rank, w->rank);
        return -1;
    }
    d->groups = (int64_t)fg_node_attr_num(n, "groups", 1);
    d->N = x->shape[0];
    d->C = x->shape[1];
    d->H = x->shape[2];
    d->W = x->shape[3];
    d->R = w->shape[2];
    d->S = w->shape[3];
    if (d->groups < 1 || d->C % d->groups) {
        snprintf(why, whysz, "input channels %lld are not divisible by groups %lld", (long long)d->C,
                 (long long)d->groups);
        return -1;
    }
    if (w->shape[0] != d->C) {
        snprintf(why, whysz, "input has %lld channels but the weight [%lld, %lld, %lld, %lld] expects %lld (weight "
                 "[C, K/groups, R, S])", (long long)d->C, (long long)w->shape[0], (long long)w->shape[1],
                 (long long)w->shape[2], (long long)w->shape[3], (long long)w->shape[0]);
        return -1;
    }
    d->Cg = d->C / d->groups;
    d->Kg = w->shape[1];
    d->K = d->Kg * d->groups;
    if (bias && (bias->rank != 1 || bias->shape[0] != d->K)) {
        snprintf(why, whysz, "bias must be [%lld] (the output channels)", (long long)d->K);
        return -1;
    }
    const fg_attr_value *pv = fg_node_attr(n, "padding");
    int four = pv && pv->type == FG_ATTR_INTS && pv->n == 4;
    int64_t size[2] = {d->H, d->W}, k[2] = {d->R, d->S}, o[2];
    for (int a = 0; a < 2; a++) {
        d->stride[a] = ints_at(n, "stride", a, 1);
        d->dilation[a] = ints_at(n, "dilation", a, 1);
        d->out_pad[a] = ints_at(n, "output_padding", a, 0);
        d->pad_beg[a] = ints_at(n, "padding", a, 0);
        d->pad_end[a] = four ? pv->ints[2 + a] : d->pad_beg[a];
        if (d->stride[a] < 1 || d->dilation[a] < 1) {
            snprintf(why, whysz, "stride and dilation must be positive");
            return -1;
        }
        if (d->pad_beg[a] < 0 || d->pad_end[a] < 0 || d->out_pad[a] < 0) {
            snprintf(why, whysz, "padding and output_padding must be non-negative");
            return -1;
        }
        o[a] = d->stride[a] * (size[a] - 1) + d->out_pad[a] + d->dilation[a] * (k[a] - 1) + 1 - d->pad_beg[a] -
               d->pad_end[a];
        if (o[a] < 1 || o[a] >= FG_MAX_NUMEL) {
            snprintf(why, whysz, "output size %lld along axis %d is not a positive size", (long long)o[a], 2 + a);
            return -1;
        }
    }
    d->OH = o[0];
    d->OW = o[1];
    return 0;
}

fg_status fg_infer_conv_transpose(fg_infer *s)
{
    char why[240];
    fg_convt_geom d;
    const fg_tensor *bias = s->n->ninputs > 2 ? s->in[2] : NULL;
    if (fg_convt_geom_of(s->n, s->in[0], s->in[1], bias, &d, why, sizeof why) != 0) {
        s->out->rank = -1;
        return fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, why);
    }
    s->out->rank = 4;
    s->out->shape[0] = d.N;
    s->out->shape[1] = d.K;
    s->out->shape[2] = d.OH;
    s->out->shape[3] = d.OW;
    s->out->dtype = s->in[0]->dtype;
    s->out->layout = s->in[0]->layout;
    return FG_OK;
}
