/*
 * reference.c -- the host reference (the oracle): runs a graph op by op,
 * unfused, in double precision, on logical NCHW values whatever the storage
 * layout.  Deliberately plain loops: it must be obviously right, not fast.
 */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "expr.h"
#include "oom.h"
#include "reference_norm.h"
#include "reference_index.h"
#include "reference_ops.h"
#include "reference_resize.h"
#include "util.h"

/* ---- attributes -------------------------------------------------------- */

static const fg_attr_value *attr_find(const fg_node *nd, const char *name)
{
    for (int i = 0; i < nd->op->nattrs; i++)
        if (strcmp(nd->op->attrs[i].name, name) == 0)
            return &nd->attrs[i];
    return NULL;
}

/* Integer attribute (element index of an `ints` list, the last one when the
 * list is shorter), or def when the op has no such attribute. */
static int64_t attr_int(const fg_node *nd, const char *name, int index, int64_t def)
{
    const fg_attr_value *v = attr_find(nd, name);
    if (!v)
        return def;
    switch (v->type) {
    case FG_ATTR_INTS: return v->n == 0 ? def : v->ints[index < v->n ? index : v->n - 1];
    case FG_ATTR_FLOAT: return (int64_t)v->f;
    default: return v->i;
    }
}

static double attr_double(const fg_attr_value *v)
{
    switch (v->type) {
    case FG_ATTR_FLOAT: return v->f;
    case FG_ATTR_INTS: return v->n ? (double)v->ints[0] : 0.0;
    case FG_ATTR_STRING: return 0.0;
    default: return (double)v->i;
    }
}


/* Slot of nd's input called name, or def when its op has no such input. */
static int slot_or(const fg_node *nd, const char *name, int def)
{
    int s = fg_node_input(nd, name);
    return s >= 0 ? s : def;
}

/* ---- ops --------------------------------------------------------------- */

/* Element offset of each input along the output's index space: numpy
 * broadcasting (shapes right-aligned, size-1 axes repeat); a per-channel
 * input follows axis 1 only. */
typedef struct bcast {
    int64_t stride[FG_MAX_RANK];
} bcast;

static void bcast_init(bcast *b, const fg_tensor *in, const fg_tensor *out, int per_channel)
{
    memset(b, 0, sizeof *b);
    if (per_channel) {
        if (out->rank >= 2)
            b->stride[1] = 1;
        return;
    }
    int64_t s = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        int od = d + (out->rank - in->rank);
        if (od >= 0 && in->shape[d] != 1)
            b->stride[od] = s;
        s *= in->shape[d];
    }
}

/* Evaluates expression e elementwise: variables are the op's inputs (ins[i],
 * NULL for an absent optional input) then its attributes. */
static void run_expr(const fg_expr *e, const fg_node *nd, const fg_tensor *out, const fg_tensor *const *tin,
                     const double *const *ins, const int *per_channel, double *y)
{
    int ni = nd->op->ninputs, na = nd->op->nattrs;
    double v[FG_MAX_INPUTS + FG_MAX_ATTRS];
    bcast bc[FG_MAX_INPUTS];
    int64_t off[FG_MAX_INPUTS] = {0};
    int64_t idx[FG_MAX_RANK] = {0};
    for (int i = 0; i < ni; i++)
        if (ins[i])
            bcast_init(&bc[i], tin[i], out, per_channel[i]);
    for (int a = 0; a < na; a++)
        v[ni + a] = attr_double(&nd->attrs[a]);
    int64_t total = fg_tensor_numel(out);
    for (int64_t k = 0; k < total; k++) {
        for (int i = 0; i < ni; i++)
            v[i] = ins[i] ? ins[i][off[i]] : 0.0;
        y[k] = fg_expr_eval(e, v);
        /* advance the multi-index and every input offset */
        for (int d = out->rank - 1; d >= 0; d--) {
            idx[d]++;
            for (int i = 0; i < ni; i++)
                if (ins[i])
                    off[i] += bc[i].stride[d];
            if (idx[d] < out->shape[d])
                break;
            for (int i = 0; i < ni; i++)
                if (ins[i])
                    off[i] -= bc[i].stride[d] * out->shape[d];
            idx[d] = 0;
        }
    }
}

static void run_conv(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]], *wt = &g->tensors[nd->inputs[1]];
    const fg_tensor *ot = &g->tensors[nd->output];
    int bslot = slot_or(nd, "bias", 2);
    const double *x = vals[nd->inputs[0]], *w = vals[nd->inputs[1]];
    const double *bias = bslot < nd->ninputs && nd->inputs[bslot] >= 0 ? vals[nd->inputs[bslot]] : NULL;
    int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3];
    int64_t K = wt->shape[0], Cg = wt->shape[1], R = wt->shape[2], S = wt->shape[3];
    int64_t OH = ot->shape[2], OW = ot->shape[3];
    int64_t groups = attr_int(nd, "groups", 0, 1);
    int64_t sh = attr_int(nd, "stride", 0, 1), sw = attr_int(nd, "stride", 1, 1);
    int64_t ph = attr_int(nd, "padding", 0, 0), pw = attr_int(nd, "padding", 1, 0);
    int64_t dh = attr_int(nd, "dilation", 0, 1), dw = attr_int(nd, "dilation", 1, 1);
    int64_t Kg = K / groups;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            int64_t c0 = (k / Kg) * Cg;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = bias ? bias[k] : 0.0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t r = 0; r < R; r++) {
                            int64_t ih = oh * sh - ph + r * dh;
                            if (ih < 0 || ih >= H)
                                continue;
                            for (int64_t s = 0; s < S; s++) {
                                int64_t iw = ow * sw - pw + s * dw;
                                if (iw < 0 || iw >= W)
                                    continue;
                                acc += x[((n * C + c0 + c) * H + ih) * W + iw] * w[((k * Cg + c) * R + r) * S + s];
                            }
                        }
                    y[((n * K + k) * OH + oh) * OW + ow] = acc;
                }
        }
}

/* numpy matmul: a rank-1 a is [1, K], a rank-1 b is [K, 1]; the batch axes
 * (all but the last two) broadcast, right-aligned.  Loops over the output's
 * batch index, M, N and K. */
static void run_matmul(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *at = &g->tensors[nd->inputs[0]], *bt = &g->tensors[nd->inputs[1]];
    int ta = attr_int(nd, "trans_a", 0, 0) != 0, tb = attr_int(nd, "trans_b", 0, 0) != 0;
    int bslot = slot_or(nd, "bias", 2);
    const fg_tensor *biast = bslot < nd->ninputs && nd->inputs[bslot] >= 0 ? &g->tensors[nd->inputs[bslot]] : NULL;
    const double *a = vals[nd->inputs[0]], *b = vals[nd->inputs[1]], *bias = biast ? vals[nd->inputs[bslot]] : NULL;
    /* the operands as [batch..., rows, cols] of their own storage */
    int ra = at->rank, rb = bt->rank;
    int64_t arows = ra == 1 ? 1 : at->shape[ra - 2], acols = at->shape[ra - 1];
    int64_t brows = rb == 1 ? bt->shape[0] : bt->shape[rb - 2], bcols = rb == 1 ? 1 : bt->shape[rb - 1];
    int64_t M = ta ? acols : arows, K = ta ? arows : acols, N = tb ? brows : bcols;
    int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0, nbat = na > nb ? na : nb;
    int64_t bshape[FG_MAX_RANK], nbatch = 1;
    for (int i = 0; i < nbat; i++) {
        int ia = i - (nbat - na), ib = i - (nbat - nb);
        int64_t da = ia >= 0 ? at->shape[ia] : 1, db = ib >= 0 ? bt->shape[ib] : 1;
        bshape[i] = da > db ? da : db;
        nbatch *= bshape[i];
    }
    for (int64_t q = 0; q < nbatch; q++) {
        /* the batch coordinates of q, then each operand's matrix index */
        int64_t coord[FG_MAX_RANK], rem = q, qa = 0, qb = 0;
        for (int i = nbat - 1; i >= 0; i--) {
            coord[i] = rem % bshape[i];
            rem /= bshape[i];
        }
        for (int i = 0; i < nbat; i++) {
            int ia = i - (nbat - na), ib = i - (nbat - nb);
            if (ia >= 0)
                qa = qa * at->shape[ia] + (at->shape[ia] == 1 ? 0 : coord[i]);
            if (ib >= 0)
                qb = qb * bt->shape[ib] + (bt->shape[ib] == 1 ? 0 : coord[i]);
        }
        const double *aq = a + qa * arows * acols, *bq = b + qb * brows * bcols;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    double av = ta ? aq[k * acols + m] : aq[m * acols + k];
                    double bv = tb ? bq[n * bcols + k] : bq[k * bcols + n];
                    acc += av * bv;
                }
                if (bias) {
                    if (biast->rank == 1)
                        acc += bias[biast->shape[0] == 1 ? 0 : n];
                    else {
                        int64_t i0 = biast->shape[biast->rank - 2] == 1 ? 0 : m;
                        int64_t i1 = biast->shape[biast->rank - 1] == 1 ? 0 : n;
                        acc += bias[i0 * biast->shape[biast->rank - 1] + i1];
                    }
                }
                y[(q * M + m) * N + n] = acc;
            }
    }
}

/* Max / average pooling over the window taps (r, s) at
 * (oh*sh - pb + r*dh, ow*sw - pw + s*dw), begin pads pb / pw (fg_node_pads).
 * Max: NaN propagates (PyTorch's max_pool2d), a window of -inf gives -inf.
 * Average: the sum over the taps inside the input, divided by their count,
 * or with count_include_pad by the taps inside the padded extent
 * [-begin, size + end) (a ceil_mode overhang past it never counts).  A
 * window with no tap inside the input gives 0. */
static void run_pool(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]], *ot = &g->tensors[nd->output];
    const double *x = vals[nd->inputs[0]];
    int is_max = nd->op->reduce && strcmp(nd->op->reduce, "max") == 0;
    int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3];
    int64_t OH = ot->shape[2], OW = ot->shape[3];
    int64_t kh = attr_int(nd, "kernel", 0, 1), kw = attr_int(nd, "kernel", 1, 1);
    int64_t sh = attr_int(nd, "stride", 0, 1), sw = attr_int(nd, "stride", 1, 1);
    int64_t dh = attr_int(nd, "dilation", 0, 1), dw = attr_int(nd, "dilation", 1, 1);
    int include_pad = attr_int(nd, "count_include_pad", 0, 0) != 0;
    int64_t beg[2], end[2];
    fg_node_pads(nd, beg, end);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = is_max ? -INFINITY : 0.0;
                int64_t cnt = 0, taps = 0;
                for (int64_t r = 0; r < kh; r++)
                    for (int64_t s = 0; s < kw; s++) {
                        int64_t ih = oh * sh - beg[0] + r * dh, iw = ow * sw - beg[1] + s * dw;
                        if (ih < H + end[0] && iw < W + end[1])
                            taps++;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        double v = x[(nc * H + ih) * W + iw];
                        acc = !is_max ? acc + v : isnan(acc) ? acc : (v > acc || isnan(v)) ? v : acc;
                        cnt++;
                    }
                int64_t div = include_pad ? taps : cnt;
                y[(nc * OH + oh) * OW + ow] = cnt == 0 ? 0.0 : is_max ? acc : acc / (double)div;
            }
}

/* Global pooling: the mean (reduce: avg) or the max (NaN propagating) of
 * each [H, W] plane. */
static void run_global_pool(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]];
    const double *x = vals[nd->inputs[0]];
    int is_max = nd->op->reduce && strcmp(nd->op->reduce, "max") == 0;
    int64_t NC = xt->shape[0] * xt->shape[1], HW = xt->shape[2] * xt->shape[3];
    for (int64_t i = 0; i < NC; i++) {
        double s = is_max ? -INFINITY : 0.0;
        for (int64_t j = 0; j < HW; j++) {
            double v = x[i * HW + j];
            s = !is_max ? s + v : isnan(s) ? s : (v > s || isnan(v)) ? v : s;
        }
        y[i] = HW == 0 ? 0.0 : is_max ? s : s / (double)HW;
    }
}

/* Batch norm: the op's expression over x and per-channel parameters; in
 * training mode mean and var are the batch statistics over every axis but
 * the channel axis (biased variance). */
static void run_batch_norm(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]], *ot = &g->tensors[nd->output];
    const fg_tensor *tin[FG_MAX_INPUTS] = {0};
    const double *ins[FG_MAX_INPUTS] = {0};
    int per[FG_MAX_INPUTS] = {0};
    int ni = nd->ninputs;
    for (int i = 0; i < ni; i++) {
        if (nd->inputs[i] < 0)
            continue;
        tin[i] = &g->tensors[nd->inputs[i]];
        ins[i] = vals[nd->inputs[i]];
        per[i] = i > 0;
    }
    double *bmean = NULL, *bvar = NULL;
    int64_t C = xt->rank >= 2 ? xt->shape[1] : 1;
    if (attr_int(nd, "training", 0, 0)) {
        int64_t outer = xt->shape[0], inner = 1;
        for (int d = 2; d < xt->rank; d++)
            inner *= xt->shape[d];
        bmean = fg_xcalloc((size_t)C + 1, sizeof *bmean);
        bvar = fg_xcalloc((size_t)C + 1, sizeof *bvar);
        const double *x = ins[0];
        double cnt = (double)(outer * inner);
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0, q = 0.0;
            for (int64_t n = 0; n < outer; n++)
                for (int64_t j = 0; j < inner; j++)
                    s += x[(n * C + c) * inner + j];
            double mu = cnt > 0 ? s / cnt : 0.0;
            for (int64_t n = 0; n < outer; n++)
                for (int64_t j = 0; j < inner; j++) {
                    double d = x[(n * C + c) * inner + j] - mu;
                    q += d * d;
                }
            bmean[c] = mu;
            bvar[c] = cnt > 0 ? q / cnt : 0.0;
        }
        int ms = slot_or(nd, "mean", 3), vs = slot_or(nd, "var", 4);
        if (ms < ni) {
            ins[ms] = bmean;
            per[ms] = 1;
        }
        if (vs < ni) {
            ins[vs] = bvar;
            per[vs] = 1;
        }
    }
    if (nd->op->expr) {
        run_expr(nd->op->expr, nd, ot, tin, ins, per, y);
    } else {
        /* No expression given: the inference formula. */
        double eps = attr_find(nd, "eps") ? attr_double(attr_find(nd, "eps")) : 1e-5;
        int gs = slot_or(nd, "gamma", 1), bs = slot_or(nd, "beta", 2);
        int ms = slot_or(nd, "mean", 3), vs = slot_or(nd, "var", 4);
        int64_t inner = 1;
        for (int d = 2; d < xt->rank; d++)
            inner *= xt->shape[d];
        int64_t total = fg_tensor_numel(xt);
        for (int64_t i = 0; i < total; i++) {
            int64_t c = (i / inner) % C;
            y[i] = (ins[0][i] - ins[ms][c]) / sqrt(ins[vs][c] + eps) * ins[gs][c] + ins[bs][c];
        }
    }
    free(bmean);
    free(bvar);
}

static void run_pointwise(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *tin[FG_MAX_INPUTS] = {0};
    const double *ins[FG_MAX_INPUTS] = {0};
    int per[FG_MAX_INPUTS] = {0};
    for (int i = 0; i < nd->ninputs; i++) {
        if (nd->inputs[i] < 0)
            continue;
        tin[i] = &g->tensors[nd->inputs[i]];
        ins[i] = vals[nd->inputs[i]];
        per[i] = nd->op->inputs[i].per_channel;
    }
    run_expr(nd->op->expr, nd, &g->tensors[nd->output], tin, ins, per, y);
}

/* ---- driver ------------------------------------------------------------ */

/* flatten: the values in logical order are unchanged. */
static void run_copy(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    int64_t nx = fg_tensor_numel(&g->tensors[nd->inputs[0]]), total = fg_tensor_numel(&g->tensors[nd->output]);
    memcpy(y, vals[nd->inputs[0]], (size_t)(nx < total ? nx : total) * sizeof(double));
}

/* The reference of each op kind (the op-kind table of codegen/kind.h holds
 * the rest of what a kind means): run computes node nd's output y from the
 * values of its inputs; needs_expr: it evaluates the op's expression. */
typedef struct ref_op {
    void (*run)(const fg_graph *g, const fg_node *nd, double **vals, double *y);
    int needs_expr;
} ref_op;

static const ref_op ref_ops[] = {
    [FG_OPK_POINTWISE] = {.run = run_pointwise, .needs_expr = 1},
    [FG_OPK_CONV2D] = {.run = run_conv},
    [FG_OPK_MATMUL] = {.run = run_matmul},
    [FG_OPK_BATCH_NORM] = {.run = run_batch_norm},
    [FG_OPK_POOL2D] = {.run = run_pool},
    [FG_OPK_GLOBAL_POOL] = {.run = run_global_pool},
    [FG_OPK_FLATTEN] = {.run = run_copy},
    [FG_OPK_RESHAPE] = {.run = fg_ref_reshape},
    [FG_OPK_TRANSPOSE] = {.run = fg_ref_transpose},
    [FG_OPK_CONCAT] = {.run = fg_ref_concat},
    [FG_OPK_SOFTMAX] = {.run = fg_ref_softmax},
    [FG_OPK_LRN] = {.run = fg_ref_lrn},
    [FG_OPK_REDUCE] = {.run = fg_ref_reduce},
    [FG_OPK_LAYER_NORM] = {.run = fg_ref_layer_norm},
    [FG_OPK_RESIZE] = {.run = fg_ref_resize},
    [FG_OPK_CONV_TRANSPOSE2D] = {.run = fg_ref_conv_transpose},
    [FG_OPK_SLICE] = {.run = fg_ref_slice},
    [FG_OPK_EXPAND] = {.run = fg_ref_expand},
    [FG_OPK_PAD] = {.run = fg_ref_pad},
    [FG_OPK_GATHER] = {.run = fg_ref_gather},
};
FG_STATIC_ASSERT(FG_COUNTOF(ref_ops) == FG_OPK_COUNT, "ref_ops out of sync with fg_op_kind");

/* The values of tensor t (n of them), checked: the reference's buffers are
 * sized by the graph, so NULL after "out of host memory" located at loc
 * (the graph's file when loc has none).  Not tracked by the out-of-memory
 * guard: they are the caller's (vals) at once. */
static double *values_alloc(fg_context *ctx, const fg_graph *g, const fg_tensor *t, fg_loc loc, int64_t n)
{
    double *v = n < 0 || (uint64_t)n > SIZE_MAX / sizeof(double) ? NULL : malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!v)
        fg_diag_error(ctx, FG_ERR_NOMEM, loc.file ? loc : (fg_loc){g->path, 0, 0},
                      "out of host memory: %lld values of tensor '%s' for the reference", (long long)n,
                      fg_tensor_user_name(t));
    return v;
}

fg_status fg_reference_run(fg_context *ctx, const fg_graph *g, double **vals)
{
    for (int t = 0; t < g->ntensors; t++) {
        const fg_tensor *tt = &g->tensors[t];
        if (vals[t] || tt->producer >= 0)
            continue;
        if (tt->is_weight && tt->data) {
            int64_t n = fg_tensor_numel(tt);
            if (!(vals[t] = values_alloc(ctx, g, tt, tt->loc, n)))
                return FG_ERR_NOMEM;
            fg_tensor_values_f64(tt, vals[t]);   /* folded weights: pending scale applied */
        }
    }
    for (int n = 0; n < g->nnodes; n++) {
        const fg_node *nd = &g->nodes[n];
        for (int i = 0; i < nd->ninputs; i++) {
            int t = nd->inputs[i];
            if (t >= 0 && !vals[t])
                return fg_diag_error(ctx, FG_ERR_INPUT, g->tensors[t].loc, "reference: tensor '%s' (input of %s) has no value",
                                     g->tensors[t].name, nd->name);
        }
        const fg_tensor *ot = &g->tensors[nd->output];
        int64_t total = fg_tensor_numel(ot);
        free(vals[nd->output]);
        vals[nd->output] = NULL;   /* nothing dangles if the allocation below unwinds */
        double *y = values_alloc(ctx, g, ot, nd->loc, total);
        if (!y)
            return FG_ERR_NOMEM;
        memset(y, 0, (size_t)(total ? total : 1) * sizeof(double));
        vals[nd->output] = y;
        if (nd->folded) {
            const fg_tensor *xt = &g->tensors[nd->inputs[0]];
            int64_t nx = fg_tensor_numel(xt);
            memcpy(y, vals[nd->inputs[0]], (size_t)(nx < total ? nx : total) * sizeof(double));
            continue;
        }
        const ref_op *ro = (unsigned)nd->op->kind < FG_OPK_COUNT ? &ref_ops[nd->op->kind] : NULL;
        if (!ro || !ro->run || (ro->needs_expr && !nd->op->expr))
            return fg_diag_error(ctx, FG_ERR_INPUT, nd->loc, "reference: op %s of %s cannot be evaluated",
                                 nd->op->name, nd->name);
        ro->run(g, nd, vals, y);
    }
    return FG_OK;
}

void fg_reference_free(const fg_graph *g, double **vals)
{
    for (int t = 0; t < g->ntensors; t++) {
        free(vals[t]);
        vals[t] = NULL;
    }
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The smallest extent that integer tensor t indexes as a gather's indices,
 * or 8 when no gather reads it so. */
static int64_t index_range(const fg_graph *g, int t)
{
    int64_t r = -1;
    for (int i = 0; i < g->nnodes; i++) {
        const fg_node *n = &g->nodes[i];
        if (n->op->kind != FG_OPK_GATHER || n->inputs[1] != t)
            continue;
        const fg_tensor *x = &g->tensors[n->inputs[0]];
        int64_t a = (int64_t)fg_node_attr_num(n, "axis", 0);
        a = a < 0 ? a + x->rank : a;
        if (a >= 0 && a < x->rank && (r < 0 || x->shape[a] < r))
            r = x->shape[a];
    }
    return r < 0 ? 8 : r;
}

void fg_reference_random_inputs(const fg_graph *g, uint64_t seed, double **vals)
{
    uint64_t s = seed;
    for (int i = 0; i < g->ninputs; i++) {
        int t = g->inputs[i];
        fg_dtype dt = g->tensors[t].dtype;
        int64_t n = fg_tensor_numel(&g->tensors[t]), range = dt == FG_DTYPE_BOOL ? 0 : index_range(g, t);
        double *v = vals[t] ? vals[t] : fg_xmalloc((size_t)(n ? n : 1) * sizeof(double));
        for (int64_t k = 0; k < n; k++) {
            double u = (double)(splitmix64(&s) >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) */
            v[k] = fg_dtype_is_float(dt) ? u * 2.0 - 1.0
                   : dt == FG_DTYPE_BOOL  ? (double)(u < 0.5)
                                          : floor(u * 2.0 * (double)range) - (double)range;
        }
        vals[t] = v;
    }
}

/* ---- under the out-of-memory guard ---------------------------------------- */

typedef struct ref_call {
    fg_context *ctx;
    const fg_graph *g;
    double **vals;
    uint64_t seed;
} ref_call;

static fg_status run_body(void *arg)
{
    ref_call *c = arg;
    return fg_reference_run(c->ctx, c->g, c->vals);
}

static fg_status inputs_body(void *arg)
{
    ref_call *c = arg;
    fg_reference_random_inputs(c->g, c->seed, c->vals);
    return FG_OK;
}

/* After unwinding: the slots the call filled point at memory about to be
 * freed with the rest of what it allocated. */
static void ref_undo(void *arg)
{
    ref_call *c = arg;
    for (int t = 0; t < c->g->ntensors; t++)
        if (fg_oom_owns(c->vals[t]))
            c->vals[t] = NULL;
}

fg_status fg_reference_run_guarded(fg_context *ctx, const fg_graph *g, double **vals)
{
    ref_call c = {ctx, g, vals, 0};
    return fg_oom_guard(ctx, (fg_loc){g->path, 0, 0}, "running the reference", run_body, ref_undo, &c);
}

fg_status fg_reference_random_inputs_guarded(fg_context *ctx, const fg_graph *g, uint64_t seed, double **vals)
{
    for (int i = 0; i < g->ninputs; i++) {   /* the buffers, checked, so that filling allocates nothing */
        const fg_tensor *t = &g->tensors[g->inputs[i]];
        if (!vals[g->inputs[i]] && !(vals[g->inputs[i]] = values_alloc(ctx, g, t, t->loc, fg_tensor_numel(t)))) {
            for (int j = 0; j < i; j++) {
                free(vals[g->inputs[j]]);
                vals[g->inputs[j]] = NULL;
            }
            return FG_ERR_NOMEM;
        }
    }
    ref_call c = {ctx, g, vals, seed};
    return fg_oom_guard(ctx, (fg_loc){g->path, 0, 0}, "making the random inputs", inputs_body, ref_undo, &c);
}

double fg_rel_l2(const double *a, const double *b, int64_t n, double *max_abs)
{
    double num = 0.0, den = 0.0, mx = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
        if (fabs(d) > mx || d != d)
            mx = d != d ? NAN : fabs(d);
    }
    if (max_abs)
        *max_abs = mx;
    double r = sqrt(num) / fmax(sqrt(den), 1e-30);
    return r;
}
