/*
 * fold.c -- the builtin parameter folds that rules name in `fold:`.  A fold
 * rewrites weights of the plan's copy of the graph, in double precision,
 * storing float: it may give a node a new bias tensor and marks the node it
 * absorbed folded (that node then computes the identity of its input 0).
 * A weight shared with a node outside the fold is copied first, so only the
 * folded node sees the new values.
 */
#include "fold.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "fold_names.h"
#include "hook.h"
#include "util.h"

typedef fg_status (*fold_fn)(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g, fg_group *grp);

static fg_status fold_bn_into_conv(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                   fg_group *grp);
static fg_status fold_bn_into_matmul(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                     fg_group *grp);
static fg_status fold_affine_merge(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                   fg_group *grp);

/* One function per builtin fold, indexed like the names (fold_names.h). */
static const fold_fn builtin_fns[] = {
    [FG_FOLD_BN_INTO_CONV] = fold_bn_into_conv,
    [FG_FOLD_BN_INTO_MATMUL] = fold_bn_into_matmul,
    [FG_FOLD_AFFINE_MERGE] = fold_affine_merge,
};
FG_STATIC_ASSERT(FG_COUNTOF(builtin_fns) == FG_FOLD_BUILTIN_COUNT, "builtin_fns out of sync with fg_fold_builtin");

fg_status fg_fold_apply(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g, fg_group *grp)
{
    if (f->is_hook)
        return fg_hook_fold(ctx, f->name, f->loc, g, grp);
    int b = fg_fold_builtin_find(f->name);
    if (b >= 0)
        return builtin_fns[b](ctx, r, f, g, grp);
    return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "unknown fold '%s' in rule %s", f->name, r->name);
}

/* ---- helpers ----------------------------------------------------------- */

/* A tensor name not used in g yet, based on base. */
static const char *fresh_name(fg_context *ctx, const fg_graph *g, const char *base)
{
    char buf[560];
    snprintf(buf, sizeof buf, "%.500s", base);
    for (int k = 2; fg_graph_find_tensor(g, buf) >= 0; k++)
        snprintf(buf, sizeof buf, "%.500s%d", base, k);
    return fg_intern(ctx, buf);
}

/* Makes input `slot` of node a weight tensor that no other node reads: a
 * shared weight is copied to a new tensor first.  Returns the tensor index,
 * or -1 when the input is absent or not a constant.  The data may still be
 * borrowed: write it through fg_tensor_own, or rescale with fg_tensor_scale. */
static int private_weight(fg_context *ctx, fg_graph *g, int node, int slot)
{
    int t = g->nodes[node].inputs[slot];
    if (t < 0 || !g->tensors[t].is_weight || !g->tensors[t].data)
        return -1;
    if (fg_graph_reads(g, t) <= 1)
        return t;
    fg_tensor copy = g->tensors[t];
    size_t n = (size_t)fg_tensor_numel(&copy);
    char base[512];
    snprintf(base, sizeof base, "%s.%s", g->tensors[t].name, g->nodes[node].name);
    copy.name = fresh_name(ctx, g, base);
    copy.data = fg_xmalloc((n ? n : 1) * sizeof(float));
    copy.borrowed = 0;
    copy.scale = NULL;
    fg_tensor_values(&g->tensors[t], copy.data);
    copy.nconsumers = 1;
    copy.producer = -1;
    copy.is_input = 0;
    copy.is_output = 0;
    int nt = fg_graph_add_tensor(g, &copy);
    g->nodes[node].inputs[slot] = nt;
    fg_graph_recount(g);
    return nt;
}

/* Adds a zero vector of n floats as input `slot` (bias) of node. */
static int new_bias(fg_context *ctx, fg_graph *g, int node, int slot, int64_t n, fg_dtype dtype)
{
    fg_tensor t;
    memset(&t, 0, sizeof t);
    char base[512];
    snprintf(base, sizeof base, "%s.bias", g->nodes[node].name);
    t.name = fresh_name(ctx, g, base);
    t.dtype = dtype;
    t.layout = FG_LAYOUT_NCHW;
    t.rank = 1;
    t.shape[0] = n;
    t.producer = -1;
    t.is_weight = 1;
    t.data = fg_xcalloc((size_t)(n ? n : 1), sizeof(float));
    t.loc = g->nodes[node].loc;
    int idx = fg_graph_add_tensor(g, &t);
    g->nodes[node].inputs[slot] = idx;
    fg_graph_recount(g);
    return idx;
}

/* Per-channel scale s = gamma/sqrt(var+eps) and shift h = beta - mean*s of an
 * inference batch norm, in double. */
typedef struct bn_params {
    int64_t c;
    double *scale, *gamma, *beta, *mean, *var;
    double eps;
} bn_params;

static void bn_params_free(bn_params *b)
{
    free(b->scale);
    free(b->gamma);
    free(b->beta);
    free(b->mean);
    free(b->var);
}

/* Reads batch_norm node bn's constant parameters; refuses training mode and
 * non-constant parameters with an error at the fold's location. */
static fg_status bn_read(fg_context *ctx, const fg_fold *f, const fg_graph *g, int bn, bn_params *out)
{
    const fg_node *nd = &g->nodes[bn];
    static const char *const names[] = {"gamma", "beta", "mean", "var"};
    double **dst[] = {&out->gamma, &out->beta, &out->mean, &out->var};
    memset(out, 0, sizeof *out);
    if (fg_node_attr_num(nd, "training", 0) != 0)
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: %s is in training mode (training: true)",
                             f->name, nd->name);
    out->eps = fg_node_attr_num(nd, "eps", 1e-5);
    out->c = -1;
    for (int k = 0; k < 4; k++) {
        int slot = fg_node_input(nd, names[k]);
        if (slot < 0)
            slot = k + 1;
        int t = slot < nd->ninputs ? nd->inputs[slot] : -1;
        if (t < 0 || !g->tensors[t].is_weight || !g->tensors[t].data) {
            bn_params_free(out);
            return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: %s of %s is not a constant weight", f->name,
                                 names[k], nd->name);
        }
        int64_t n = fg_tensor_numel(&g->tensors[t]);
        if (out->c >= 0 && n != out->c) {
            bn_params_free(out);
            return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: parameters of %s differ in length", f->name,
                                 nd->name);
        }
        out->c = n;
        *dst[k] = fg_xmalloc((size_t)(n ? n : 1) * sizeof(double));
        fg_tensor_values_f64(&g->tensors[t], *dst[k]);
    }
    out->scale = fg_xmalloc((size_t)(out->c ? out->c : 1) * sizeof(double));
    for (int64_t i = 0; i < out->c; i++)
        out->scale[i] = out->gamma[i] / sqrt(out->var[i] + out->eps);
    return FG_OK;
}

/* The group's first unfolded node of kind k followed in the group by an
 * unfolded batch_norm that consumes its output; *bn set; -1 if none. */
static int find_pair(const fg_graph *g, const fg_group *grp, fg_op_kind k, int *bn)
{
    for (int i = 0; i + 1 < grp->nnodes; i++) {
        const fg_node *a = &g->nodes[grp->nodes[i]], *b = &g->nodes[grp->nodes[i + 1]];
        if (a->op->kind != k || a->folded || b->op->kind != FG_OPK_BATCH_NORM || b->folded)
            continue;
        if (b->ninputs > 0 && b->inputs[0] == a->output) {
            *bn = grp->nodes[i + 1];
            return grp->nodes[i];
        }
    }
    return -1;
}

/* ---- bn_into_conv ------------------------------------------------------ */

/* W'[k,...] = W[k,...]*s[k], b'[k] = (b[k]-mean[k])*s[k]+beta[k] with
 * s = gamma/sqrt(var+eps); a conv without bias gets b' (b = 0). */
static fg_status fold_bn_into_conv(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                   fg_group *grp)
{
    int bn = -1, conv = find_pair(g, grp, FG_OPK_CONV2D, &bn);
    if (conv < 0)
        return FG_OK;
    bn_params p;
    fg_status st = bn_read(ctx, f, g, bn, &p);
    if (st != FG_OK)
        return st;
    const fg_node *cn = &g->nodes[conv];
    int ws = fg_node_input(cn, "weight");
    if (ws < 0)
        ws = 1;
    int bs = fg_node_input(cn, "bias");
    if (bs < 0) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s (rule %s): op %s of %s has no bias input", f->name,
                             r->name, cn->op->name, cn->name);
    }
    int wt = private_weight(ctx, g, conv, ws);
    if (wt < 0) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: the weight of %s is not a constant", f->name,
                             g->nodes[conv].name);
    }
    int64_t k = g->tensors[wt].shape[0];
    if (k != p.c) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: %s has %lld output channels, %s has %lld",
                             f->name, g->nodes[conv].name, (long long)k, g->nodes[bn].name, (long long)p.c);
    }
    int bt;
    if (g->nodes[conv].inputs[bs] < 0)
        bt = new_bias(ctx, g, conv, bs, k, g->tensors[wt].dtype);
    else
        bt = private_weight(ctx, g, conv, bs);
    if (bt < 0 || fg_tensor_numel(&g->tensors[bt]) != k) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: the bias of %s is not a constant [%lld] vector",
                             f->name, g->nodes[conv].name, (long long)k);
    }
    fg_tensor_scale(&g->tensors[wt], 0, p.scale);   /* W'[k] = W[k]*s[k], applied when read */
    float *b = fg_tensor_own(&g->tensors[bt]);
    for (int64_t o = 0; o < k; o++)
        b[o] = (float)(((double)b[o] - p.mean[o]) * p.scale[o] + p.beta[o]);
    g->nodes[bn].folded = 1;
    bn_params_free(&p);
    return FG_OK;
}

/* ---- bn_into_matmul ---------------------------------------------------- */

/* The same per output column n of a 2-D matmul/gemm: B'[k,n] = B[k,n]*s[n]
 * (B stored [N,K] when trans_b), b'[.., n] = (b[.., n]-mean[n])*s[n]+beta[n]. */
static fg_status fold_bn_into_matmul(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                     fg_group *grp)
{
    int bn = -1, mm = find_pair(g, grp, FG_OPK_MATMUL, &bn);
    if (mm < 0)
        return FG_OK;
    const fg_node *mn = &g->nodes[mm];
    const fg_tensor *ot = &g->tensors[mn->output];
    if (ot->rank != 2)
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: %s has a rank-%d output (needs [M, N])", f->name,
                             mn->name, ot->rank);
    int64_t ncol = ot->shape[1];
    int bs = fg_node_input(mn, "bias");
    if (bs < 0)
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc,
                             "fold %s (rule %s): op %s of %s has no bias input to receive the shift", f->name,
                             r->name, mn->op->name, mn->name);
    bn_params p;
    fg_status st = bn_read(ctx, f, g, bn, &p);
    if (st != FG_OK)
        return st;
    if (p.c != ncol) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: %s has %lld columns, %s has %lld channels",
                             f->name, mn->name, (long long)ncol, g->nodes[bn].name, (long long)p.c);
    }
    int bslot = fg_node_input(mn, "b");
    if (bslot < 0)
        bslot = 1;
    int wt = private_weight(ctx, g, mm, bslot);
    if (wt < 0 || g->tensors[wt].rank != 2) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: input b of %s is not a constant 2-D weight",
                             f->name, g->nodes[mm].name);
    }
    int trans_b = fg_node_attr_num(&g->nodes[mm], "trans_b", 0) != 0;
    int bt;
    if (g->nodes[mm].inputs[bs] < 0)
        bt = new_bias(ctx, g, mm, bs, ncol, g->tensors[wt].dtype);
    else
        bt = private_weight(ctx, g, mm, bs);
    if (bt < 0 || (ncol && fg_tensor_numel(&g->tensors[bt]) % ncol) != 0 ||
        g->tensors[bt].shape[g->tensors[bt].rank - 1] != ncol) {
        bn_params_free(&p);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: the bias of %s is not a constant with %lld columns",
                             f->name, g->nodes[mm].name, (long long)ncol);
    }
    fg_tensor_scale(&g->tensors[wt], trans_b ? 0 : 1, p.scale);   /* per output column */
    float *b = fg_tensor_own(&g->tensors[bt]);
    int64_t nb = fg_tensor_numel(&g->tensors[bt]);
    for (int64_t i = 0; i < nb; i++) {
        int64_t col = i % ncol;
        b[i] = (float)(((double)b[i] - p.mean[col]) * p.scale[col] + p.beta[col]);
    }
    g->nodes[bn].folded = 1;
    bn_params_free(&p);
    return FG_OK;
}

/* ---- affine_merge ------------------------------------------------------ */

/* Two consecutive inference batch norms y = (x-m1)*s1+b1, z = (y-m2)*s2+b2
 * (s = gamma/sqrt(var+eps)) become one: the first keeps mean and var and
 * takes gamma' = gamma1*s2, beta' = (beta1-m2)*s2+beta2; the second is folded. */
static fg_status fold_affine_merge(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g,
                                   fg_group *grp)
{
    int second = -1, first = find_pair(g, grp, FG_OPK_BATCH_NORM, &second);
    if (first < 0)
        return FG_OK;
    bn_params a, b;
    fg_status st = bn_read(ctx, f, g, first, &a);
    if (st != FG_OK)
        return st;
    st = bn_read(ctx, f, g, second, &b);
    if (st != FG_OK) {
        bn_params_free(&a);
        return st;
    }
    if (a.c != b.c) {
        bn_params_free(&a);
        bn_params_free(&b);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s (rule %s): %s and %s differ in channels", f->name,
                             r->name, g->nodes[first].name, g->nodes[second].name);
    }
    int gs = fg_node_input(&g->nodes[first], "gamma"), bs = fg_node_input(&g->nodes[first], "beta");
    int gt = private_weight(ctx, g, first, gs < 0 ? 1 : gs);
    int bt = private_weight(ctx, g, first, bs < 0 ? 2 : bs);
    if (gt < 0 || bt < 0) {
        bn_params_free(&a);
        bn_params_free(&b);
        return fg_diag_error(ctx, FG_ERR_INPUT, f->loc, "fold %s: gamma/beta of %s are not constants", f->name,
                             g->nodes[first].name);
    }
    float *gam = fg_tensor_own(&g->tensors[gt]), *bet = fg_tensor_own(&g->tensors[bt]);
    for (int64_t i = 0; i < a.c; i++) {
        gam[i] = (float)(a.gamma[i] * b.scale[i]);
        bet[i] = (float)((a.beta[i] - b.mean[i]) * b.scale[i] + b.beta[i]);
    }
    g->nodes[second].folded = 1;
    bn_params_free(&a);
    bn_params_free(&b);
    return FG_OK;
}

/* ---- capability checks ---------------------------------------------------- */

static int is_const(const fg_graph *g, int t) { return t >= 0 && g->tensors[t].is_weight && g->tensors[t].data; }

/* find_pair over a candidate's node list. */
static int find_pair_in(const fg_graph *g, const int *nodes, int n, fg_op_kind k, int *bn)
{
    fg_group tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.nnodes = n < FG_MAX_GROUP_NODES ? n : FG_MAX_GROUP_NODES;
    memcpy(tmp.nodes, nodes, (size_t)tmp.nnodes * sizeof *nodes);
    return find_pair(g, &tmp, k, bn);
}

/* The conditions bn_read enforces, plus a positive var + eps everywhere
 * (a negative or NaN variance would fold into NaN weights). */
static int bn_ok(const fg_graph *g, int bn, int64_t *c, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[bn];
    static const char *const names[] = {"gamma", "beta", "mean", "var"};
    if (fg_node_attr_num(nd, "training", 0) != 0) {
        snprintf(why, whysz, "%s is in training mode", nd->name);
        return 0;
    }
    double eps = fg_node_attr_num(nd, "eps", 1e-5);
    *c = -1;
    for (int k = 0; k < 4; k++) {
        int slot = fg_node_input(nd, names[k]);
        if (slot < 0)
            slot = k + 1;
        int t = slot < nd->ninputs ? nd->inputs[slot] : -1;
        if (!is_const(g, t)) {
            snprintf(why, whysz, "%s of %s is not a constant weight", names[k], nd->name);
            return 0;
        }
        int64_t n = fg_tensor_numel(&g->tensors[t]);
        if (*c >= 0 && n != *c) {
            snprintf(why, whysz, "parameters of %s differ in length", nd->name);
            return 0;
        }
        *c = n;
        if (k == 3) {
            double *v = fg_xmalloc((size_t)(n ? n : 1) * sizeof *v);
            fg_tensor_values_f64(&g->tensors[t], v);
            int64_t bad = -1;
            for (int64_t i = 0; i < n && bad < 0; i++)
                if (!(v[i] + eps > 0))
                    bad = i;
            if (bad >= 0)
                snprintf(why, whysz, "var of %s has %s value at index %lld (var + eps must be positive)", nd->name,
                         v[bad] != v[bad] ? "a NaN" : "a negative", (long long)bad);
            free(v);
            if (bad >= 0)
                return 0;
        }
    }
    return 1;
}

int fg_fold_check(const fg_rule *r, const fg_fold *f, const fg_graph *g, const int *nodes, int n, char *why,
                  size_t whysz)
{
    if (f->is_hook)
        return 1;   /* a hook's preconditions are its own; its errors carry its location */
    int bn = -1, c = -1, which = fg_fold_builtin_find(f->name);
    char sub[256];
    if (which == FG_FOLD_BN_INTO_CONV) {
        int conv = find_pair_in(g, nodes, n, FG_OPK_CONV2D, &bn);
        if (conv < 0)
            return 1;
        const fg_node *cn = &g->nodes[conv];
        int ws = fg_node_input(cn, "weight"), bs = fg_node_input(cn, "bias");
        int64_t ch;
        if (!bn_ok(g, bn, &ch, sub, sizeof sub))
            c = -2;
        else if (bs < 0)
            snprintf(sub, sizeof sub, "op %s of %s has no bias input", cn->op->name, cn->name), c = -2;
        else if (!is_const(g, cn->inputs[ws < 0 ? 1 : ws]))
            snprintf(sub, sizeof sub, "the weight of %s is not a constant", cn->name), c = -2;
        else if (g->tensors[cn->inputs[ws < 0 ? 1 : ws]].shape[0] != ch)
            snprintf(sub, sizeof sub, "%s and %s differ in channels", cn->name, g->nodes[bn].name), c = -2;
        else if (cn->inputs[bs] >= 0 &&
                 (!is_const(g, cn->inputs[bs]) || fg_tensor_numel(&g->tensors[cn->inputs[bs]]) != ch))
            snprintf(sub, sizeof sub, "the bias of %s is not a constant [%lld] vector", cn->name, (long long)ch),
                c = -2;
    } else if (which == FG_FOLD_BN_INTO_MATMUL) {
        int mm = find_pair_in(g, nodes, n, FG_OPK_MATMUL, &bn);
        if (mm < 0)
            return 1;
        const fg_node *mn = &g->nodes[mm];
        const fg_tensor *ot = &g->tensors[mn->output];
        int bs = fg_node_input(mn, "bias"), bslot = fg_node_input(mn, "b");
        int64_t ch;
        if (ot->rank != 2)
            snprintf(sub, sizeof sub, "%s has a rank-%d output (needs [M, N])", mn->name, ot->rank), c = -2;
        else if (bs < 0)
            snprintf(sub, sizeof sub, "op %s of %s has no bias input", mn->op->name, mn->name), c = -2;
        else if (!bn_ok(g, bn, &ch, sub, sizeof sub))
            c = -2;
        else if (ch != ot->shape[1])
            snprintf(sub, sizeof sub, "%s has %lld columns, %s has %lld channels", mn->name,
                     (long long)ot->shape[1], g->nodes[bn].name, (long long)ch), c = -2;
        else if (!is_const(g, mn->inputs[bslot < 0 ? 1 : bslot]) || g->tensors[mn->inputs[bslot < 0 ? 1 : bslot]].rank != 2)
            snprintf(sub, sizeof sub, "input b of %s is not a constant 2-D weight", mn->name), c = -2;
        else if (mn->inputs[bs] >= 0 && (!is_const(g, mn->inputs[bs]) ||
                                         g->tensors[mn->inputs[bs]].shape[g->tensors[mn->inputs[bs]].rank - 1] != ch))
            snprintf(sub, sizeof sub, "the bias of %s is not a constant with %lld columns", mn->name, (long long)ch),
                c = -2;
    } else if (which == FG_FOLD_AFFINE_MERGE) {
        int second = -1, first = find_pair_in(g, nodes, n, FG_OPK_BATCH_NORM, &second);
        if (first < 0)
            return 1;
        int64_t a, b;
        if (!bn_ok(g, first, &a, sub, sizeof sub) || !bn_ok(g, second, &b, sub, sizeof sub))
            c = -2;
        else if (a != b)
            snprintf(sub, sizeof sub, "%s and %s differ in channels", g->nodes[first].name, g->nodes[second].name),
                c = -2;
    }
    if (c == -2) {
        snprintf(why, whysz, "fold %s: %s", f->name, sub);
        return 0;
    }
    return 1;
}
