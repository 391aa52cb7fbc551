/*
 * reference_norm.c -- the host reference of the layer_norm kind (contract in
 * reference_norm.h): per row, u = x + skip, the mean and the variance (two
 * passes) in double, then (u - mean) / sqrt(var + eps) * scale + bias; with
 * `rms`, u / sqrt(mean(u^2) + eps) * scale + bias.  Values are logical
 * (row-major), as everywhere in the reference; `to` (the output's dtype)
 * changes no value here: like a cast, it applies where a tensor is stored.
 */
#include "reference_norm.h"

#include <math.h>
#include <stdlib.h>

#include "layernorm.h"
#include "util.h"

/* Offset into parameter p (broadcast right-aligned onto x's axes axis..)
 * of element k of a row of x. */
static int64_t param_off(const fg_tensor *p, const fg_tensor *x, int64_t k)
{
    int64_t off = 0, stride = 1;
    for (int i = p->rank - 1, d = x->rank - 1; i >= 0 && d >= 0; i--, d--) {
        int64_t c = k % x->shape[d];
        k /= x->shape[d];
        if (p->shape[i] != 1)
            off += c * stride;
        stride *= p->shape[i];
    }
    return off;
}

void fg_ref_layer_norm(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    fg_ln_geom d;
    char why[400];
    if (fg_ln_geom_of(g, nd, &d, why, sizeof why) != 0)
        return;
    const fg_tensor *x = &g->tensors[nd->inputs[0]];
    const double *xv = vals[nd->inputs[0]];
    const double *sk = d.skip >= 0 ? vals[nd->inputs[d.skip]] : NULL;
    const fg_tensor *sc = d.scale >= 0 ? &g->tensors[nd->inputs[d.scale]] : NULL;
    const fg_tensor *bi = d.bias >= 0 ? &g->tensors[nd->inputs[d.bias]] : NULL;
    const double *scv = sc ? vals[nd->inputs[d.scale]] : NULL, *biv = bi ? vals[nd->inputs[d.bias]] : NULL;
    int64_t *soff = fg_xmalloc((size_t)d.len * sizeof *soff), *boff = fg_xmalloc((size_t)d.len * sizeof *boff);
    double *u = fg_xmalloc((size_t)d.len * sizeof *u);
    for (int64_t k = 0; k < d.len; k++) {
        soff[k] = sc ? param_off(sc, x, k) : 0;
        boff[k] = bi ? param_off(bi, x, k) : 0;
    }
    for (int64_t r = 0; r < d.rows; r++) {
        const int64_t base = r * d.len;
        double mean = 0.0, var = 0.0;
        for (int64_t k = 0; k < d.len; k++) {
            u[k] = xv[base + k] + (sk ? sk[base + k] : 0.0);
            mean += u[k];
        }
        mean = d.rms ? 0.0 : mean / (double)d.len;
        for (int64_t k = 0; k < d.len; k++)
            var += (u[k] - mean) * (u[k] - mean);
        const double inv = 1.0 / sqrt(var / (double)d.len + d.eps);
        for (int64_t k = 0; k < d.len; k++) {
            double v = (u[k] - mean) * inv;
            if (scv)
                v *= scv[soff[k]];
            if (biv)
                v += biv[boff[k]];
            y[base + k] = v;
        }
    }
    free(soff);
    free(boff);
    free(u);
}
