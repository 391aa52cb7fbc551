/*
 * kind.c -- the op-kind table: what C knows about each fg_op_kind (see
 * kind.h).  Everything else about an op is data in rules/ *.yaml.
 */
#include "kind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "conv_transpose.h"
#include "diag.h"
#include "gather.h"
#include "layernorm.h"
#include "index_kinds.h"
#include "reduce.h"
#include "resize.h"
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

static const char *const layer_norm_vars[] = {"rows", "len", NULL};

static int layer_norm_vars_fn(const fg_graph *g, int nd, double *v)
{
    fg_ln_geom d;
    char why[400];
    if (!in_t(g, nd, 0) || fg_ln_geom_of(g, &g->nodes[nd], &d, why, sizeof why) != 0)
        return 0;
    v[0] = (double)d.rows;
    v[1] = (double)d.len;
    return 2;
}

static const char *const convt_vars[] = {"N", "C", "H", "W", "K", "R", "S", "OH", "OW", "groups", NULL};

static int convt_vars_fn(const fg_graph *g, int nd, double *v)
{
    const fg_tensor *x = in_t(g, nd, 0), *w = in_t(g, nd, 1);
    fg_convt_geom d;
    char why[240];
    if (!x || !w || fg_convt_geom_of(&g->nodes[nd], x, w, NULL, &d, why, sizeof why) != 0)
        return 0;
    double vals[] = {(double)d.N, (double)d.C, (double)d.H, (double)d.W, (double)d.K,
                     (double)d.R, (double)d.S, (double)d.OH, (double)d.OW, (double)d.groups};
    FG_STATIC_ASSERT(FG_COUNTOF(vals) == FG_COUNTOF(convt_vars) - 1, "convt_vars out of sync");
    memcpy(v, vals, sizeof vals);
    return (int)FG_COUNTOF(vals);
}

/* ---- FLOPs (the performance report's roofline) ------------------------- */

/* 2 per multiply-add: out = N*K*P*Q, weight [K, C/groups, R, S]. */
static double conv_flops(const fg_graph *g, const fg_node *n)
{
    const fg_tensor *w = n->ninputs > 1 && n->inputs[1] >= 0 ? &g->tensors[n->inputs[1]] : NULL;
    if (!w || w->rank != 4)
        return 0;
    return 2.0 * (double)fg_tensor_numel(&g->tensors[n->output]) * (double)w->shape[1] * (double)w->shape[2] *
           (double)w->shape[3];
}

/* 2 per multiply-add: out = batch * M * N, each over K. */
static double matmul_flops(const fg_graph *g, const fg_node *n)
{
    const fg_tensor *a = n->inputs[0] >= 0 ? &g->tensors[n->inputs[0]] : NULL;
    if (!a || a->rank < 2)
        return 0;
    int trans_a = fg_node_attr_num(n, "trans_a", 0) != 0;
    double k = (double)a->shape[trans_a ? a->rank - 2 : a->rank - 1];
    return 2.0 * (double)fg_tensor_numel(&g->tensors[n->output]) * k;
}

/* One per window tap of each output. */
static double pool_flops(const fg_graph *g, const fg_node *n)
{
    const fg_attr_value *kv = fg_node_attr(n, "kernel");
    double taps = kv && kv->type == FG_ATTR_INTS && kv->n >= 2 ? (double)kv->ints[0] * (double)kv->ints[1] : 1;
    return (double)fg_tensor_numel(&g->tensors[n->output]) * taps;
}

/* 2 per multiply-add: every input element meets K/groups * R * S weights. */
static double convt_flops(const fg_graph *g, const fg_node *n)
{
    const fg_tensor *w = n->ninputs > 1 && n->inputs[1] >= 0 ? &g->tensors[n->inputs[1]] : NULL;
    if (!w || w->rank != 4 || n->inputs[0] < 0)
        return 0;
    return 2.0 * (double)fg_tensor_numel(&g->tensors[n->inputs[0]]) * (double)w->shape[1] * (double)w->shape[2] *
           (double)w->shape[3];
}

/* One per input element. */
static double global_pool_flops(const fg_graph *g, const fg_node *n)
{
    return n->inputs[0] >= 0 ? (double)fg_tensor_numel(&g->tensors[n->inputs[0]])
                             : (double)fg_tensor_numel(&g->tensors[n->output]);
}

/* A scale and a shift per output. */
static double batch_norm_flops(const fg_graph *g, const fg_node *n)
{
    return 2.0 * (double)fg_tensor_numel(&g->tensors[n->output]);
}

/* One per output. */
static double pointwise_flops(const fg_graph *g, const fg_node *n)
{
    return (double)fg_tensor_numel(&g->tensors[n->output]);
}

/* ---- checks ------------------------------------------------------------- */

/* An inference batch norm's var + eps must be positive: sqrt of a negative
 * or NaN would turn every output of the channel into NaN. */
static fg_status batch_norm_check_weights(fg_context *ctx, const fg_graph *g, int node)
{
    const fg_node *nd = &g->nodes[node];
    if (fg_node_attr_num(nd, "training", 0) != 0)
        return FG_OK;
    int vs = fg_node_input(nd, "var");
    int vt = vs >= 0 && vs < nd->ninputs ? nd->inputs[vs] : -1;
    if (vt < 0 || !g->tensors[vt].is_weight || !g->tensors[vt].data)
        return FG_OK;
    fg_status st = FG_OK;
    double eps = fg_node_attr_num(nd, "eps", 1e-5);
    int64_t n = fg_tensor_numel(&g->tensors[vt]);
    double *v = fg_xmalloc((size_t)(n ? n : 1) * sizeof *v);
    fg_tensor_values_f64(&g->tensors[vt], v);
    for (int64_t k = 0; k < n; k++)
        if (!(v[k] + eps > 0)) {
            st = fg_diag_error(ctx, FG_ERR_INPUT, nd->loc,
                               "batch_norm '%s': var '%s' is %g at channel %lld; var + eps must be positive",
                               nd->name, g->tensors[vt].name, v[k], (long long)k);
            break;
        }
    free(v);
    return st;
}

/* ---- the table ----------------------------------------------------------- */

static const char *const pool_reductions[] = {"max", "avg", NULL};

static const fg_kind_info kinds[] = {
    [FG_OPK_POINTWISE] = {.name = "pointwise", .min_inputs = 1, .max_inputs = FG_MAX_INPUTS,
                          .inputs_form = "at least one input", .role = FG_ROLE_ELEMENTWISE,
                          .traits = FG_KIND_EXPR | FG_KIND_REPEAT, .family = "pointwise",
                          .infer = fg_infer_pointwise, .var_names = elementwise_vars, .vars = elementwise_vars_fn,
                          .flops = pointwise_flops},
    [FG_OPK_CONV2D] = {.name = "conv2d", .min_inputs = 2, .max_inputs = 3, .inputs_form = "inputs [x, weight, bias?]",
                       .role = FG_ROLE_ANCHOR, .family = "conv2d", .infer = fg_infer_conv, .var_names = conv_vars,
                       .vars = conv_vars_fn, .flops = conv_flops},
    [FG_OPK_MATMUL] = {.name = "matmul", .min_inputs = 2, .max_inputs = 3, .inputs_form = "inputs [a, b, bias?]",
                       .role = FG_ROLE_ANCHOR, .traits = FG_KIND_BIAS_COLUMNS, .family = "gemm",
                       .infer = fg_infer_matmul, .var_names = matmul_vars,
                       .vars = matmul_vars_fn, .flops = matmul_flops},
    [FG_OPK_BATCH_NORM] = {.name = "batch_norm", .min_inputs = 5, .max_inputs = 5,
                           .inputs_form = "inputs [x, gamma, beta, mean, var]", .role = FG_ROLE_ELEMENTWISE,
                           .traits = FG_KIND_EXPR, .family = "pointwise", .infer = fg_infer_batch_norm,
                           .var_names = elementwise_vars, .vars = elementwise_vars_fn, .flops = batch_norm_flops,
                           .mode_attr = "training",
                           .mode_refused = "training mode (batch statistics) is not supported; fusegen runs "
                                           "inference with the stored mean and var: set training: false",
                           .check_weights = batch_norm_check_weights},
    [FG_OPK_POOL2D] = {.name = "pool2d", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                       .role = FG_ROLE_ANCHOR, .reductions = pool_reductions, .family = "pool2d",
                       .infer = fg_infer_pool, .var_names = pool_vars, .vars = pool_vars_fn, .flops = pool_flops},
    /* global_pool predates `reduce`: without one it is the mean */
    [FG_OPK_GLOBAL_POOL] = {.name = "global_pool", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                            .role = FG_ROLE_ANCHOR, .reductions = pool_reductions, .reduce_default = "avg",
                            .family = "pool2d", .infer = fg_infer_global_pool, .var_names = pool_vars,
                            .vars = pool_vars_fn, .flops = global_pool_flops},
    [FG_OPK_FLATTEN] = {.name = "flatten", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                        .role = FG_ROLE_RESHAPE, .family = "pointwise", .infer = fg_infer_flatten,
                        .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_RESHAPE] = {.name = "reshape", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                        .role = FG_ROLE_RESHAPE, .traits = FG_KIND_PERMUTATION, .family = "copy",
                        .infer = fg_infer_reshape, .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_TRANSPOSE] = {.name = "transpose", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                          .role = FG_ROLE_RESHAPE, .traits = FG_KIND_PERMUTATION | FG_KIND_AXES,
                          .family = "copy", .infer = fg_infer_transpose, .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_CONCAT] = {.name = "concat", .min_inputs = 2, .max_inputs = FG_MAX_INPUTS,
                       .inputs_form = "inputs [x0, x1, x2?, ...]", .role = FG_ROLE_RESHAPE, .family = "copy",
                       .infer = fg_infer_concat, .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_SOFTMAX] = {.name = "softmax", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                        .role = FG_ROLE_ANCHOR, .family = "softmax", .infer = fg_infer_softmax,
                        .var_names = softmax_vars, .vars = softmax_vars_fn},
    [FG_OPK_LRN] = {.name = "lrn", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                    .role = FG_ROLE_ANCHOR, .family = "lrn", .infer = fg_infer_lrn, .var_names = elementwise_vars,
                    .vars = elementwise_vars_fn},
    [FG_OPK_REDUCE] = {.name = "reduce", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                       .role = FG_ROLE_ANCHOR, .reductions = fg_reduction_names, .family = "reduce",
                       .infer = fg_infer_reduce, .var_names = reduce_vars, .vars = reduce_vars_fn},
    [FG_OPK_LAYER_NORM] = {.name = "layer_norm", .min_inputs = 1, .max_inputs = 4,
                           .inputs_form = "inputs [x, scale?, bias?, skip?]", .role = FG_ROLE_ANCHOR,
                           .traits = FG_KIND_BIAS_COLUMNS, .family = "layernorm", .infer = fg_infer_layer_norm,
                           .var_names = layer_norm_vars, .vars = layer_norm_vars_fn},
    [FG_OPK_RESIZE] = {.name = "resize", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                       .role = FG_ROLE_ANCHOR, .family = "resize", .infer = fg_infer_resize,
                       .var_names = elementwise_vars, .vars = elementwise_vars_fn, .flops = pointwise_flops},
    [FG_OPK_CONV_TRANSPOSE2D] = {.name = "conv_transpose2d", .min_inputs = 2, .max_inputs = 3,
                                 .inputs_form = "inputs [x, weight, bias?]", .role = FG_ROLE_ANCHOR,
                                 .family = "conv_transpose", .infer = fg_infer_conv_transpose,
                                 .var_names = convt_vars, .vars = convt_vars_fn, .flops = convt_flops},
    [FG_OPK_SLICE] = {.name = "slice", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                      .role = FG_ROLE_RESHAPE, .traits = FG_KIND_MOVES, .family = "copy", .infer = fg_infer_slice,
                      .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_EXPAND] = {.name = "expand", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                       .role = FG_ROLE_RESHAPE, .traits = FG_KIND_MOVES, .family = "copy", .infer = fg_infer_expand,
                       .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_PAD] = {.name = "pad", .min_inputs = 1, .max_inputs = 1, .inputs_form = "one input",
                    .role = FG_ROLE_RESHAPE, .traits = FG_KIND_MOVES, .family = "copy", .infer = fg_infer_pad,
                    .var_names = elementwise_vars, .vars = elementwise_vars_fn},
    [FG_OPK_GATHER] = {.name = "gather", .min_inputs = 2, .max_inputs = 2, .inputs_form = "inputs [data, indices]",
                       .role = FG_ROLE_ANCHOR, .family = "gather", .infer = fg_infer_gather,
                       .var_names = elementwise_vars, .vars = elementwise_vars_fn},
};
FG_STATIC_ASSERT(FG_COUNTOF(kinds) == FG_OPK_COUNT, "kinds out of sync with fg_op_kind");
FG_STATIC_ASSERT(FG_OPK_COUNT <= 32, "sets of kinds (rule steps, templates) are 32-bit masks");

fg_status fg_kind_infer_shape(fg_context *ctx, fg_graph *g, int node)
{
    return fg_shape_infer_by(ctx, g, node, fg_kind(g->nodes[node].op->kind)->infer);
}

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

unsigned fg_kinds_of_role(fg_kind_role role)
{
    unsigned m = 0;
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (kinds[k].role == role)
            m |= 1u << k;
    return m;
}

unsigned fg_kinds_with(unsigned traits)
{
    unsigned m = 0;
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if ((kinds[k].traits & traits) == traits)
            m |= 1u << k;
    return m;
}

unsigned fg_kinds_reducing(void)
{
    unsigned m = 0;
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (kinds[k].reductions)
            m |= 1u << k;
    return m;
}

/* Appends the words of list[0..n) to buf: "a", "a<last_sep>b", "a, b<last_sep>c". */
static const char *join_words(const char *const *list, int n, const char *last_sep, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < size; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? last_sep : ", ";
        int w = snprintf(buf + at, size - at, "%s%s", sep, list[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return buf;
}

const char *fg_kinds_text(unsigned mask, const char *last_sep, char *buf, size_t size)
{
    const char *names[FG_OPK_COUNT];
    int n = 0;
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (mask & (1u << k))
            names[n++] = kinds[k].name;
    return join_words(names, n, last_sep, buf, size);
}

const char *fg_kind_reductions_text(fg_op_kind k, char *buf, size_t size)
{
    const char *const *r = fg_kind(k)->reductions;
    int n = 0;
    while (r && r[n])
        n++;
    if (n == 2)
        return join_words(r, n, " or ", buf, size);
    int w = snprintf(buf, size, "one of ");
    if (w > 0 && (size_t)w < size)
        join_words(r, n, ", ", buf + w, size - (size_t)w);
    return buf;
}

int fg_kind_reduction_ok(fg_op_kind k, const char *r)
{
    const char *const *v = fg_kind(k)->reductions;
    for (int i = 0; v && v[i]; i++)
        if (strcmp(v[i], r) == 0)
            return 1;
    return 0;
}
