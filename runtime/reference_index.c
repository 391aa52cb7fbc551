/*
 * reference_index.c -- the host reference of slice, expand and pad
 * (contract in reference_index.h): for every output element, its
 * coordinates, the input coordinates it reads by the kind's definition,
 * the value.  Plain loops written from the definitions (not from the
 * generated index maps), as in reference.c.
 */
#include "reference_index.h"

#include <math.h>
#include <string.h>

#include "gather.h"
#include "index_kinds.h"

/* Row-major coordinates of linear index i over t's logical shape. */
static void coords_of(const fg_tensor *t, int64_t i, int64_t *c)
{
    for (int d = t->rank - 1; d >= 0; d--) {
        c[d] = i % t->shape[d];
        i /= t->shape[d];
    }
}

/* Linear row-major index of coordinates c in t. */
static int64_t index_of(const fg_tensor *t, const int64_t *c)
{
    int64_t at = 0;
    for (int d = 0; d < t->rank; d++)
        at = at * t->shape[d] + c[d];
    return at;
}

void fg_ref_slice(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *o = &g->tensors[nd->output];
    const fg_attr_value *st = fg_node_attr(nd, "starts"), *sp = fg_node_attr(nd, "steps");
    const double *xv = vals[nd->inputs[0]];
    int64_t total = fg_tensor_numel(o), c[FG_MAX_RANK], xc[FG_MAX_RANK];
    for (int64_t i = 0; i < total; i++) {
        coords_of(o, i, c);
        for (int d = 0; d < x->rank; d++)
            xc[d] = st->ints[d] + sp->ints[d] * c[d];
        y[i] = xv[index_of(x, xc)];
    }
}

void fg_ref_expand(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *o = &g->tensors[nd->output];
    const double *xv = vals[nd->inputs[0]];
    int64_t total = fg_tensor_numel(o), c[FG_MAX_RANK], xc[FG_MAX_RANK];
    for (int64_t i = 0; i < total; i++) {
        coords_of(o, i, c);
        for (int d = 0; d < x->rank; d++)   /* shapes right-aligned */
            xc[d] = c[d + o->rank - x->rank] % x->shape[d];
        y[i] = xv[index_of(x, xc)];
    }
}

void fg_ref_pad(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *o = &g->tensors[nd->output];
    const fg_attr_value *p = fg_node_attr(nd, "pads");
    int mode = fg_pad_mode_of(nd);
    double value = fg_node_attr_num(nd, "value", 0.0);
    const double *xv = vals[nd->inputs[0]];
    int64_t total = fg_tensor_numel(o), c[FG_MAX_RANK], xc[FG_MAX_RANK];
    for (int64_t i = 0; i < total; i++) {
        coords_of(o, i, c);
        int inside = 1;
        for (int d = 0; d < x->rank; d++) {
            int64_t r = c[d] - p->ints[d], n = x->shape[d];
            if (r < 0 || r >= n) {
                switch (mode) {
                case FG_PAD_REFLECT: r = r < 0 ? -r : 2 * (n - 1) - r; break;   /* mirror, edge not repeated */
                case FG_PAD_EDGE: r = r < 0 ? 0 : n - 1; break;
                case FG_PAD_WRAP: r = ((r % n) + n) % n; break;
                default: inside = 0; r = 0; break;
                }
            }
            xc[d] = r;
        }
        y[i] = inside ? xv[index_of(x, xc)] : value;
    }
}

void fg_ref_gather(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *ix = &g->tensors[nd->inputs[1]];
    fg_gather_geom d;
    char why[200];
    if (fg_gather_geom_of(nd, x, ix, &d, why, sizeof why) != 0)
        return;   /* shape inference refused the node before any run */
    const double *xv = vals[nd->inputs[0]], *iv = vals[nd->inputs[1]];
    double oob = fg_dtype_is_float(x->dtype) ? NAN : 0;
    int64_t k = 0;
    for (int64_t o = 0; o < d.outer; o++)
        for (int64_t q = 0; q < d.nidx; q++) {
            int64_t j = (int64_t)iv[q];
            if (j < 0)
                j += d.dim;
            for (int64_t r = 0; r < d.inner; r++)
                y[k++] = j >= 0 && j < d.dim ? xv[(o * d.dim + j) * d.inner + r] : oob;
        }
}
