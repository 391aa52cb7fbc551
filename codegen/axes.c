/*
 * axes.c -- axis arithmetic of the reshape, transpose, concat, softmax and
 * lrn kinds (contract in axes.h).
 */
#include "axes.h"

int fg_axis_norm(int64_t a, int r)
{
    if (a < 0)
        a += r;
    return a >= 0 && a < r ? (int)a : -1;
}

int fg_softmax_rows(const fg_node *n, const fg_tensor *x, int64_t *outer, int64_t *len, int64_t *inner)
{
    int a0 = fg_axis_norm((int64_t)fg_node_attr_num(n, "axis", -1), x->rank);
    int64_t na = (int64_t)fg_node_attr_num(n, "naxes", 1);
    if (a0 < 0 || na < 0 || a0 + na > x->rank)
        return -1;
    int a1 = na == 0 ? x->rank : a0 + (int)na;
    *outer = *len = *inner = 1;
    for (int d = 0; d < x->rank; d++)
        *(d < a0 ? outer : d < a1 ? len : inner) *= x->shape[d];
    return 0;
}

int fg_concat_axis(const fg_node *n, const fg_tensor *out)
{
    return fg_axis_norm((int64_t)fg_node_attr_num(n, "axis", 0), out->rank);
}

void fg_lrn_window(int64_t c, int64_t C, int64_t size, int64_t *lo, int64_t *hi)
{
    *lo = c - (size - 1) / 2;
    *hi = c + size / 2;   /* ceil((size - 1) / 2) */
    if (*lo < 0)
        *lo = 0;
    if (*hi > C - 1)
        *hi = C - 1;
}
