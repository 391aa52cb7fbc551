/*
 * reference_ops.c -- the host reference of the reshape, transpose, concat,
 * softmax (and log-softmax), lrn and reduce kinds (contract in reference_ops.h).  Values are logical
 * (row-major over the logical shape) whatever the storage layout, in double
 * precision; plain loops, as in reference.c.
 */
#include "reference_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "reduce.h"
#include "util.h"

static const fg_tensor *in_t(const fg_graph *g, const fg_node *nd, int i) { return &g->tensors[nd->inputs[i]]; }

/* Row-major strides of t's logical shape. */
static void strides(const fg_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->shape[d];
    }
}

/* reshape keeps the logical order: a copy. */
void fg_ref_reshape(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    memcpy(y, vals[nd->inputs[0]], sizeof(double) * (size_t)fg_tensor_numel(&g->tensors[nd->output]));
}

/* y[i0, .., ir] = x at coordinate perm[k] = ik. */
void fg_ref_transpose(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = in_t(g, nd, 0), *o = &g->tensors[nd->output];
    const fg_attr_value *pm = fg_node_attr(nd, "perm");
    int64_t xs[FG_MAX_RANK], total = fg_tensor_numel(o);
    strides(x, xs);
    const double *xv = vals[nd->inputs[0]];
    for (int64_t i = 0; i < total; i++) {
        int64_t rest = i, off = 0;
        for (int d = o->rank - 1; d >= 0; d--) {
            off += (rest % o->shape[d]) * xs[pm->ints[d]];
            rest /= o->shape[d];
        }
        y[i] = xv[off];
    }
}

/* Inputs placed one after another along the axis. */
void fg_ref_concat(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *o = &g->tensors[nd->output];
    int axis = fg_concat_axis(nd, o);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < o->rank; d++) {
        if (d < axis)
            outer *= o->shape[d];
        else if (d > axis)
            inner *= o->shape[d];
    }
    int64_t at = 0;   /* first index along the axis of the input being placed */
    for (int i = 0; i < nd->ninputs && nd->inputs[i] >= 0; i++) {
        int64_t len = in_t(g, nd, i)->shape[axis];
        const double *xv = vals[nd->inputs[i]];
        for (int64_t q = 0; q < outer; q++)
            memcpy(y + (q * o->shape[axis] + at) * inner, xv + q * len * inner, sizeof(double) * (size_t)(len * inner));
        at += len;
    }
}

/* exp(x - max) / sum over each row (`log`: (x - max) - log(sum)); a NaN anywhere in a row makes the row
 * NaN (max propagates it), as does +inf (inf - inf) and a row of -inf. */
void fg_ref_softmax(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = in_t(g, nd, 0);
    const double *xv = vals[nd->inputs[0]];
    int64_t outer, len, inner;
    int lg = fg_node_attr_num(nd, "log", 0) != 0;   /* log-softmax: (x - max) - log(sum) */
    if (fg_softmax_rows(nd, x, &outer, &len, &inner) != 0)
        return;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const double *r = xv + o * len * inner + in;
            double *yr = y + o * len * inner + in;
            double m = -INFINITY, sum = 0.0;
            for (int64_t k = 0; k < len; k++)
                if (r[k * inner] > m || isnan(r[k * inner]))
                    m = isnan(m) ? m : r[k * inner];
            for (int64_t k = 0; k < len; k++)
                sum += exp(r[k * inner] - m);
            for (int64_t k = 0; k < len; k++)
                yr[k * inner] = lg ? (r[k * inner] - m) - log(sum) : exp(r[k * inner] - m) / sum;
        }
}

/* Each output: the reduction (reduce.h) of its elements in double, in
 * index order.  max / min propagate NaN; log_sum_exp is m + log(sum exp(x -
 * m)) with m the max (0 when infinite), which is log(sum exp(x)) without
 * overflow. */
void fg_ref_reduce(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = in_t(g, nd, 0);
    const double *xv = vals[nd->inputs[0]];
    fg_reduce_geom d;
    char why[160];
    if (fg_reduce_geom_of(nd, x, &d, why, sizeof why) != 0)
        return;
    fg_reduction rd = fg_node_reduction(nd);
    int64_t xs[FG_MAX_RANK], total = fg_tensor_numel(x);
    strides(x, xs);
    /* every input element, accumulated into its output: first the max
     * (log_sum_exp's shift; max and min themselves), then the sums */
    double *m = fg_xcalloc((size_t)d.rows, sizeof *m);
    char *seen = fg_xcalloc((size_t)d.rows, 1);
    int64_t *out = fg_xmalloc((size_t)(total ? total : 1) * sizeof *out);
    for (int64_t i = 0; i < total; i++) {
        int64_t o = 0;   /* the output's index: the kept coordinates, row-major */
        for (int a = 0; a < x->rank; a++)
            if (!(d.mask & (1u << a)))
                o = o * x->shape[a] + (i / xs[a]) % x->shape[a];
        out[i] = o;
    }
    if (fg_reduction_is_arg(rd)) {   /* the index over the reduced axes, in index order */
        int is_max = rd == FG_RED_ARGMAX || rd == FG_RED_ARGMAX_LAST;
        int last = rd == FG_RED_ARGMAX_LAST || rd == FG_RED_ARGMIN_LAST;
        for (int64_t i = 0; i < total; i++) {
            int64_t o = out[i], k = 0;
            for (int a = 0; a < x->rank; a++)
                if (d.mask & (1u << a))
                    k = k * x->shape[a] + (i / xs[a]) % x->shape[a];
            double v = xv[i], *mo = &m[o];
            int take = !seen[o] || (isnan(v) ? last || !isnan(*mo)
                                    : !isnan(*mo) && (is_max ? (last ? v >= *mo : v > *mo)
                                                             : (last ? v <= *mo : v < *mo)));
            if (take) {
                *mo = v;
                y[o] = (double)k;
            }
            seen[o] = 1;
        }
        free(m);
        free(seen);
        free(out);
        return;
    }
    for (int64_t i = 0; i < total; i++) {
        double v = xv[i], *mo = &m[out[i]];
        if (!seen[out[i]] || (!isnan(*mo) && (isnan(v) || (rd == FG_RED_MIN ? v < *mo : v > *mo))))
            *mo = v;   /* a NaN, once there, stays */
        seen[out[i]] = 1;
    }
    if (rd == FG_RED_MAX || rd == FG_RED_MIN) {
        memcpy(y, m, (size_t)d.rows * sizeof *y);
    } else {
        for (int64_t o = 0; o < d.rows; o++) {
            y[o] = rd == FG_RED_PROD ? 1.0 : 0.0;
            if (rd == FG_RED_LOG_SUM_EXP && isinf(m[o]))
                m[o] = 0.0;
        }
        for (int64_t i = 0; i < total; i++) {
            double v = xv[i];
            int64_t o = out[i];
            switch (rd) {
            case FG_RED_PROD: y[o] *= v; break;
            case FG_RED_SUM_SQUARE:
            case FG_RED_L2: y[o] += v * v; break;
            case FG_RED_L1: y[o] += fabs(v); break;
            case FG_RED_LOG_SUM_EXP: y[o] += exp(v - m[o]); break;
            default: y[o] += v; break;
            }
        }
        for (int64_t o = 0; o < d.rows; o++)
            switch (rd) {
            case FG_RED_MEAN: y[o] /= (double)d.len; break;
            case FG_RED_L2: y[o] = sqrt(y[o]); break;
            case FG_RED_LOG_SUM: y[o] = log(y[o]); break;
            case FG_RED_LOG_SUM_EXP: y[o] = m[o] + log(y[o]); break;
            default: break;
            }
    }
    free(m);
    free(seen);
    free(out);
}

/* y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta. */
void fg_ref_lrn(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *x = in_t(g, nd, 0);
    const double *xv = vals[nd->inputs[0]];
    int64_t size = (int64_t)fg_node_attr_num(nd, "size", 1), N = x->shape[0], C = x->shape[1], inner = 1;
    double alpha = fg_node_attr_num(nd, "alpha", 1e-4), beta = fg_node_attr_num(nd, "beta", 0.75),
           bias = fg_node_attr_num(nd, "bias", 1.0);
    for (int d = 2; d < x->rank; d++)
        inner *= x->shape[d];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t lo, hi;
            fg_lrn_window(c, C, size, &lo, &hi);
            for (int64_t i = 0; i < inner; i++) {
                double sq = 0.0;
                for (int64_t q = lo; q <= hi; q++) {
                    double v = xv[(n * C + q) * inner + i];
                    sq += v * v;
                }
                int64_t at = (n * C + c) * inner + i;
                y[at] = xv[at] / pow(bias + alpha / (double)size * sq, beta);
            }
        }
}
