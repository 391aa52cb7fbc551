/*
 * gather.c -- geometry and shape inference of the gather kind (gather.h).
 */
#include "gather.h"

#include <stdio.h>
#include <string.h>

#include "diag.h"
#include "shape.h"

int fg_gather_geom_of(const fg_node *nd, const fg_tensor *data, const fg_tensor *idx, fg_gather_geom *g, char *why,
                      size_t whysz)
{
    int64_t axis = (int64_t)fg_node_attr_num(nd, "axis", 0);
    if (axis < 0)
        axis += data->rank;
    if (axis < 0 || axis >= data->rank) {
        snprintf(why, whysz, "axis %lld is out of range for data of rank %d",
                 (long long)fg_node_attr_num(nd, "axis", 0), data->rank);
        return -1;
    }
    if (idx->dtype != FG_DTYPE_I64 && idx->dtype != FG_DTYPE_I32) {
        snprintf(why, whysz, "indices are %s; int64 or int32 expected", fg_dtype_name(idx->dtype));
        return -1;
    }
    if (data->rank - 1 + idx->rank > FG_MAX_RANK) {
        snprintf(why, whysz, "the output would have rank %d; at most %d is supported", data->rank - 1 + idx->rank,
                 FG_MAX_RANK);
        return -1;
    }
    g->axis = (int)axis;
    g->outer = g->inner = 1;
    for (int d = 0; d < axis; d++)
        g->outer *= data->shape[d];
    for (int d = (int)axis + 1; d < data->rank; d++)
        g->inner *= data->shape[d];
    g->dim = data->shape[axis];
    g->nidx = fg_tensor_numel(idx);
    return 0;
}

fg_status fg_infer_gather(fg_infer *s)
{
    char why[200];
    fg_gather_geom d;
    const fg_tensor *x = s->in[0], *ix = s->in[1];
    if (fg_gather_geom_of(s->n, x, ix, &d, why, sizeof why) != 0) {
        s->out->rank = -1;
        return fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, why);
    }
    int r = 0;
    for (int a = 0; a < d.axis; a++)
        s->out->shape[r++] = x->shape[a];
    for (int a = 0; a < ix->rank; a++)
        s->out->shape[r++] = ix->shape[a];
    for (int a = d.axis + 1; a < x->rank; a++)
        s->out->shape[r++] = x->shape[a];
    if (r == 0)
        s->out->shape[r++] = 1;   /* a scalar index into a vector: one element */
    s->out->rank = r;
    s->out->dtype = x->dtype;
    s->out->layout = FG_LAYOUT_NCHW;
    return FG_OK;
}
