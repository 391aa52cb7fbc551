/*
 * kind.c -- the op-kind table: what C knows about each fg_op_kind (see
 * kind.h).  Everything else about an op is data in rules/ *.yaml.
 */
#include "kind.h"

#include <string.h>

#include "axes.h"
#include "reduce.h"
#include "shape.h"
#include "util.h"

/* ---- capability variables ---------------------------------------------- */

static const fg_tensor *in_t(const fg_graph *g, int nd, int i)
{
    const fg_node *n = &g->nodes[nd];
    return i < n->ninputs && n->inputs[i] >= 0 ? &g->tensors[n->inputs[i]] : NULL;
}

static const fg_tensor *out_t(const fg_graph *g, int nd) { return &g->tensors[g->nodes[nd].output]; }

/* Element index of an attribute as a number, def when the op lacks it. */
static double attr_or(const fg_node *n, const char *name, int index, double def)
{
    return fg_node_attr(n, name) ? (double)fg_node_attr_int(n, name, index) : def;
}

static const char *const conv_vars[] = {"N", "C", "H", "W", "K", "R", "S", "OH", "OW", "groups",
                                        "stride_h", "stride_w", "dilation_h", "dilation_w", NULL};

static int conv_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *x = in_t(g, nd, 0), *w = in_t(g, nd, 1), *y = out_t(g, nd);
    const fg_node *n = &g->nodes[nd];
    if (!x || !w || x->rank != 4 || w->rank != 4 || y->rank != 4)
        return 0;
    double vals[] = {(double)x->shape[0], (double)x->shape[1], (double)x->shape[2], (double)x->shape[3],
                     (double)w->shape[0], (double)w->shape[2], (double)w->shape[3], (double)y->shape[2],
                     (double)y->shape[3], attr_or(n, "groups", 0, 1), attr_or(n, "stride", 0, 1),
                     attr_or(n, "stride", 1, 1), attr_or(n, "dilation", 0, 1), attr_or(n, "dilation", 1, 1)};
    FG_STATIC_ASSERT(FG_COUNTOF(vals) == FG_COUNTOF(conv_vars) - 1, "conv_vars out of sync");
    memcpy(v, vals, sizeof vals);
    return (int)FG_COUNTOF(vals);
}

static const char *const matmul_vars[] = {"M", "N", "K", "batch", NULL};

static int matmul_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *a = in_t(g, nd, 0), *b = in_t(g, nd, 1);
    const fg_node *n = &g->nodes[nd];
    fg_matmul_geom_t d;
    char why[160];
    if (!a || !b || !fg_matmul_geom(a, b, attr_or(n, "trans_a", 0, 0) != 0, attr_or(n, "trans_b", 0, 0) != 0, &d, why,
                                    sizeof why))
        return 0;
    v[0] = (double)d.M;
    v[1] = (double)d.N;
    v[2] = (double)d.K;
    v[3] = (double)d.batch;   /* the product of the batch axes */
    return 4;
}

static const char *const pool_vars[] = {"N", "C", "H", "W", "OH", "OW", NULL};

static int pool_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *x = in_t(g, nd, 0), *y = out_t(g, nd);
    if (!x || x->rank != 4 || y->rank < 2)
        return 0;
    for (int i = 0; i < 4; i++)
        v[i] = (double)x->shape[i];
    v[4] = y->rank == 4 ? (double)y->shape[2] : 1.0;
    v[5] = y->rank == 4 ? (double)y->shape[3] : 1.0;
    return 6;
}

static const char *const elementwise_vars[] = {"numel", "rank", NULL};

static int elementwise_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *y = out_t(g, nd);
    v[0] = (double)fg_tensor_numel(y);
    v[1] = (double)y->rank;
    return 2;
}

static const char *const softmax_vars[] = {"rows", "len", "inner", NULL};

static int softmax_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *x = in_t(g, nd, 0);
    int64_t outer, len, inner;
    if (!x || fg_softmax_rows(&g->nodes[nd], x, &outer, &len, &inner) != 0)
        return 0;
    v[0] = (double)(outer * inner);
    v[1] = (double)len;
    v[2] = (double)inner;
    return 3;
}

static const char *const reduce_vars[] = {"rows", "len", NULL};

static int reduce_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *x = in_t(g, nd, 0);
    fg_reduce_geom d;
    char why[160];
    if (!x || fg_reduce_geom_of(&g->nodes[nd], x, &d, why, sizeof why) != 0)
        return 0;
    v[0] = (double)d.rows;
    v[1] = (double)d.len;
    return 2;
}

/* ---- the table ----------------------------------------------------------- */

static const fg_kind_info kinds[] = {
    {"pointwise", 1, FG_MAX_INPUTS, "at least one input", FG_ROLE_ELEMENTWISE, 1, 0, "pointwise",
     fg_infer_pointwise, elementwise_vars, elementwise_vars_fn},
    {"conv2d", 2, 3, "inputs [x, weight, bias?]", FG_ROLE_ANCHOR, 0, 0, "conv2d", fg_infer_conv, conv_vars,
     conv_vars_fn},
    {"matmul", 2, 3, "inputs [a, b, bias?]", FG_ROLE_ANCHOR, 0, 0, "gemm", fg_infer_matmul, matmul_vars,
     matmul_vars_fn},
    {"batch_norm", 5, 5, "inputs [x, gamma, beta, mean, var]", FG_ROLE_ELEMENTWISE, 1, 0, "pointwise",
     fg_infer_batch_norm, elementwise_vars, elementwise_vars_fn},
    {"pool2d", 1, 1, "one input", FG_ROLE_ANCHOR, 0, 1, "pool2d", fg_infer_pool, pool_vars, pool_vars_fn},
    {"global_pool", 1, 1, "one input", FG_ROLE_ANCHOR, 0, 1, "pool2d", fg_infer_global_pool, pool_vars,
     pool_vars_fn},
    {"flatten", 1, 1, "one input", FG_ROLE_RESHAPE, 0, 0, "pointwise", fg_infer_flatten, elementwise_vars,
     elementwise_vars_fn},
    {"reshape", 1, 1, "one input", FG_ROLE_RESHAPE, 0, 0, "copy", fg_infer_reshape, elementwise_vars,
     elementwise_vars_fn},
    {"transpose", 1, 1, "one input", FG_ROLE_RESHAPE, 0, 0, "copy", fg_infer_transpose, elementwise_vars,
     elementwise_vars_fn},
    {"concat", 2, FG_MAX_INPUTS, "inputs [x0, x1, x2?, ...]", FG_ROLE_RESHAPE, 0, 0, "copy", fg_infer_concat,
     elementwise_vars, elementwise_vars_fn},
    {"softmax", 1, 1, "one input", FG_ROLE_ANCHOR, 0, 0, "softmax", fg_infer_softmax, softmax_vars, softmax_vars_fn},
    {"lrn", 1, 1, "one input", FG_ROLE_ANCHOR, 0, 0, "lrn", fg_infer_lrn, elementwise_vars, elementwise_vars_fn},
    {"reduce", 1, 1, "one input", FG_ROLE_ANCHOR, 0, 1, "reduce", fg_infer_reduce, reduce_vars, reduce_vars_fn},
};
FG_STATIC_ASSERT(FG_COUNTOF(kinds) == FG_OPK_COUNT, "kinds out of sync with fg_op_kind");

const fg_kind_info *fg_kind(fg_op_kind k) { return (unsigned)k < FG_COUNTOF(kinds) ? &kinds[k] : &kinds[0]; }

const char *fg_op_kind_name(fg_op_kind k) { return (unsigned)k < FG_COUNTOF(kinds) ? kinds[k].name : "?"; }

int fg_kind_find(const char *name)
{
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (strcmp(kinds[k].name, name) == 0)
            return k;
    return -1;
}

int fg_kind_nvars(fg_op_kind k)
{
    int n = 0;
    while (fg_kind(k)->var_names[n])
        n++;
    return n;
}

int fg_kind_var(fg_op_kind k, const char *name)
{
    const char *const *v = fg_kind(k)->var_names;
    for (int i = 0; v[i]; i++)
        if (strcmp(v[i], name) == 0)
            return i;
    return -1;
}
