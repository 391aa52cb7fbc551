/*
 * shape.c -- shape inference per op kind (contract in shape.h).  Shapes are
 * logical (NCHW for rank 4); the layout travels from the first rank-4 input.
 */
#include "shape.h"

#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "context.h"
#include "kind.h"

const char *fg_shape_str(const int64_t *shape, int rank, char *buf, size_t size)
{
    size_t at = 0;
    if (size == 0)
        return buf;
    buf[0] = 0;
    at += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

#define SHAPE(t, buf) fg_shape_str((t)->shape, (t)->rank, buf, sizeof buf)

typedef struct fg_infer infer;

static fg_status fail(infer *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fg_status fail(infer *s, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, b.s);
    fg_buf_free(&b);
    s->out->rank = -1;
    return FG_ERR_INPUT;
}

/* An attribute as an integer, or def when the op does not define it. */
static int64_t attr_or(const fg_node *n, const char *name, int index, int64_t def)
{
    return fg_node_attr(n, name) ? fg_node_attr_int(n, name, index) : def;
}

static void set_out(infer *s, int rank, const int64_t *shape, const fg_tensor *like)
{
    s->out->rank = rank;
    memcpy(s->out->shape, shape, sizeof(int64_t) * (size_t)rank);
    s->out->dtype = like->dtype;
    for (int i = 0; i < s->n->ninputs; i++)
        if (s->in[i] && s->in[i]->rank == 4) {
            s->out->layout = s->in[i]->layout;
            break;
        }
}

int fg_broadcast_shape(int64_t *shape, int rank, const int64_t *other, int orank)
{
    int r = orank > rank ? orank : rank;
    int64_t res[FG_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int da = d - (r - rank), db = d - (r - orank);
        int64_t a = da >= 0 ? shape[da] : 1, b = db >= 0 ? other[db] : 1;
        if (a != b && a != 1 && b != 1)
            return -1;
        res[d] = a == 1 ? b : a;
    }
    memcpy(shape, res, sizeof(int64_t) * (size_t)r);
    return r;
}

fg_status fg_infer_pointwise(infer *s)
{
    char b1[128], b2[128];
    int64_t shape[FG_MAX_RANK];
    int rank = 0;
    const fg_tensor *first = NULL;
    for (int i = 0; i < s->n->ninputs; i++) {
        const fg_tensor *t = s->in[i];
        if (!t || s->n->op->inputs[i].per_channel)
            continue;
        if (!first) {
            first = t;
            rank = t->rank;
            memcpy(shape, t->shape, sizeof shape);
            continue;
        }
        int r = fg_broadcast_shape(shape, rank, t->shape, t->rank);
        if (r < 0)
            return fail(s, "shapes %s and %s do not broadcast", fg_shape_str(shape, rank, b1, sizeof b1),
                        SHAPE(t, b2));
        rank = r;
    }
    if (!first)
        return fail(s, "needs at least one input that is not per-channel");
    for (int i = 0; i < s->n->ninputs; i++) {
        const fg_tensor *t = s->in[i];
        if (!t || !s->n->op->inputs[i].per_channel)
            continue;
        if (rank < 2)
            return fail(s, "per-channel input '%s' needs an output of rank 2 or more, got %s",
                        s->n->op->inputs[i].name, fg_shape_str(shape, rank, b1, sizeof b1));
        if (t->rank != 1 || t->shape[0] != shape[1])
            return fail(s, "per-channel input '%s' has shape %s but the output %s has %lld channels",
                        s->n->op->inputs[i].name, SHAPE(t, b1), fg_shape_str(shape, rank, b2, sizeof b2),
                        (long long)shape[1]);
    }
    set_out(s, rank, shape, s->in[0] ? s->in[0] : first);
    const fg_opdef *op = s->n->op;
    if (op->dtype_fixed >= 0)
        s->out->dtype = (fg_dtype)op->dtype_fixed;
    else if (op->dtype_input >= 0 && s->in[op->dtype_input])
        s->out->dtype = s->in[op->dtype_input]->dtype;
    else if (op->dtype_attr >= 0) {
        const char *to = s->n->attrs[op->dtype_attr].s;
        int t = 0;
        while (t < FG_DTYPE_COUNT && !(to && strcmp(to, fg_dtype_name((fg_dtype)t)) == 0))
            t++;
        if (t == FG_DTYPE_COUNT)
            return fail(s, "attribute '%s' must name a dtype (fp32, fp16, bf16, int64, int32, bool), got '%s'",
                        op->attrs[op->dtype_attr].name, to ? to : "");
        s->out->dtype = (fg_dtype)t;
    }
    return FG_OK;
}

/* Output size along the two spatial axes:
 * floor((H + pb + pe - d*(R-1) - 1)/s) + 1, with pb / pe the begin / end
 * padding (fg_node_pads).  With a nonzero `ceil_mode` attribute (pooling)
 * the division rounds up, so a partial last window counts, unless that
 * window would start past the input and its begin padding (ONNX and
 * PyTorch drop it). */
static fg_status spatial_out(infer *s, const int64_t *hw, const int64_t *rs, int64_t *out)
{
    char what[160];
    int64_t beg[2], end[2];
    int ceil_mode = attr_or(s->n, "ceil_mode", 0, 0) != 0;
    fg_node_pads(s->n, beg, end);
    for (int a = 0; a < 2; a++) {
        int64_t st = attr_or(s->n, "stride", a, 1), pb = beg[a], pe = end[a],
                dil = attr_or(s->n, "dilation", a, 1);
        if (st < 1 || dil < 1 || pb < 0 || pe < 0)
            return fail(s, "stride and dilation must be positive and padding non-negative (stride %lld, "
                           "dilation %lld, padding %lld+%lld)",
                        (long long)st, (long long)dil, (long long)pb, (long long)pe);
        int64_t span, pads, reach;
        if (__builtin_add_overflow(pb, pe, &pads) || __builtin_mul_overflow(dil, rs[a] - 1, &reach) ||
            __builtin_add_overflow(hw[a], pads, &span) || __builtin_sub_overflow(span, reach + 1, &span) ||
            span > FG_MAX_NUMEL * 4)
            return fail(s, "padding %lld+%lld, dilation %lld with a kernel of %lld along axis %d give an output "
                           "too large to handle", (long long)pb, (long long)pe, (long long)dil, (long long)rs[a],
                        a + 2);
        if (span < 0)
            out[a] = -((-span + st - 1) / st) + 1; /* floor division: <= 0, refused below */
        else if (ceil_mode) {
            out[a] = (span + st - 1) / st + 1;
            if ((out[a] - 1) * st >= hw[a] + pb)
                out[a]--;
        } else
            out[a] = span / st + 1;
        if (out[a] <= 0) {
            snprintf(what, sizeof what, "input %lldx%lld, kernel %lldx%lld", (long long)hw[0], (long long)hw[1],
                     (long long)rs[0], (long long)rs[1]);
            return fail(s, "output size would be %lld along axis %d (%s, stride %lld, padding %lld+%lld, "
                           "dilation %lld)",
                        (long long)out[a], a + 2, what, (long long)st, (long long)pb, (long long)pe,
                        (long long)dil);
        }
    }
    return FG_OK;
}

fg_status fg_infer_conv(infer *s)
{
    char b1[128], b2[128];
    const fg_tensor *x = s->in[0], *w = s->in[1], *bias = s->n->ninputs > 2 ? s->in[2] : NULL;
    int64_t groups = attr_or(s->n, "groups", 0, 1);
    if (x->rank != 4)
        return fail(s, "input must be rank 4 [N, C, H, W], got %s", SHAPE(x, b1));
    if (w->rank != 4)
        return fail(s, "weight must be rank 4 [K, C/groups, R, S], got %s", SHAPE(w, b1));
    if (groups < 1)
        return fail(s, "groups must be positive, got %lld", (long long)groups);
    int64_t C = x->shape[1], K = w->shape[0];
    if (C % groups)
        return fail(s, "input channels %lld are not divisible by groups %lld", (long long)C, (long long)groups);
    if (K % groups)
        return fail(s, "output channels %lld (weight shape %s) are not divisible by groups %lld", (long long)K,
                    SHAPE(w, b1), (long long)groups);
    if (w->shape[1] * groups != C)
        return fail(s, "input has %lld channels but weight expects %lld (weight shape %s, groups %lld)", (long long)C,
                    (long long)(w->shape[1] * groups), SHAPE(w, b1), (long long)groups);
    if (bias && (bias->rank != 1 || bias->shape[0] != K))
        return fail(s, "bias has shape %s but the weight has %lld output channels (weight shape %s)", SHAPE(bias, b1),
                    (long long)K, SHAPE(w, b2));
    int64_t o[2];
    if (spatial_out(s, &x->shape[2], &w->shape[2], o))
        return FG_ERR_INPUT;
    int64_t shape[4] = {x->shape[0], K, o[0], o[1]};
    set_out(s, 4, shape, x);
    return FG_OK;
}

int fg_matmul_geom(const fg_tensor *a, const fg_tensor *b, int ta, int tb, fg_matmul_geom_t *d, char *why,
                   size_t whysz)
{
    char b1[128], b2[128];
    memset(d, 0, sizeof *d);
    if (a->rank < 1 || b->rank < 1 || a->rank > FG_MAX_RANK || b->rank > FG_MAX_RANK) {
        snprintf(why, whysz, "a %s and b %s: operands need rank 1 to %d", SHAPE(a, b1), SHAPE(b, b2), FG_MAX_RANK);
        return 0;
    }
    d->a_vec = a->rank == 1;
    d->b_vec = b->rank == 1;
    if (d->a_vec && d->b_vec) {
        snprintf(why, whysz, "a %s and b %s are both vectors: their product is a scalar, which graphs cannot hold",
                 SHAPE(a, b1), SHAPE(b, b2));
        return 0;
    }
    if ((d->a_vec && ta) || (d->b_vec && tb)) {
        snprintf(why, whysz, "a rank-1 operand cannot be transposed");
        return 0;
    }
    /* a [K] is [1, K]; b [K] is [K, 1] */
    int ra = a->rank, rb = b->rank;
    d->M = d->a_vec ? 1 : ta ? a->shape[ra - 1] : a->shape[ra - 2];
    d->K = d->a_vec ? a->shape[0] : ta ? a->shape[ra - 2] : a->shape[ra - 1];
    int64_t kb = d->b_vec ? b->shape[0] : tb ? b->shape[rb - 1] : b->shape[rb - 2];
    d->N = d->b_vec ? 1 : tb ? b->shape[rb - 2] : b->shape[rb - 1];
    if (d->K != kb) {
        snprintf(why, whysz, "a is %s%s (K = %lld) but b is %s%s (K = %lld)", SHAPE(a, b1), ta ? " transposed" : "",
                 (long long)d->K, SHAPE(b, b2), tb ? " transposed" : "", (long long)kb);
        return 0;
    }
    /* batch axes: numpy broadcasting of a[:-2] and b[:-2], right-aligned */
    int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0;
    d->nbatch = na > nb ? na : nb;
    int64_t sa = d->M * d->K, sb = d->K * d->N;   /* element strides of one matrix */
    d->batch = 1;
    for (int i = d->nbatch - 1; i >= 0; i--) {
        int ia = i - (d->nbatch - na), ib = i - (d->nbatch - nb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            snprintf(why, whysz, "batch axes of a %s and b %s do not broadcast (%lld vs %lld)", SHAPE(a, b1),
                     SHAPE(b, b2), (long long)da, (long long)db);
            return 0;
        }
        d->bshape[i] = da == 1 ? db : da;
        d->astride[i] = da == 1 ? 0 : sa;
        d->bstride[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
        d->batch *= d->bshape[i];
    }
    d->a_batched = na > 0 && sa != d->M * d->K;
    d->b_batched = nb > 0 && sb != d->K * d->N;
    /* the output: batch axes, then M unless a is a vector, then N unless b is */
    int r = 0;
    for (int i = 0; i < d->nbatch; i++)
        d->yshape[r++] = d->bshape[i];
    if (!d->a_vec)
        d->yshape[r++] = d->M;
    if (!d->b_vec)
        d->yshape[r++] = d->N;
    d->yrank = r;
    return 1;
}

fg_status fg_infer_matmul(infer *s)
{
    char b1[128], why[300];
    const fg_tensor *a = s->in[0], *b = s->in[1], *bias = s->n->ninputs > 2 ? s->in[2] : NULL;
    int ta = (int)attr_or(s->n, "trans_a", 0, 0), tb = (int)attr_or(s->n, "trans_b", 0, 0);
    fg_matmul_geom_t d;
    if (!fg_matmul_geom(a, b, ta, tb, &d, why, sizeof why))
        return fail(s, "%s", why);
    if (bias) {
        int64_t M = d.M, N = d.N;
        int ok = (bias->rank == 1 && bias->shape[0] == N) ||
                 (bias->rank == 2 && !d.a_vec && !d.b_vec && (bias->shape[0] == M || bias->shape[0] == 1) &&
                  (bias->shape[1] == N || bias->shape[1] == 1));
        if (!ok)
            return fail(s, "bias of shape %s does not broadcast onto [%lld, %lld]", SHAPE(bias, b1), (long long)M,
                        (long long)N);
    }
    if (d.batch * d.M * d.N > FG_MAX_NUMEL)
        return fail(s, "the output of %lld x %lld x %lld elements is too large", (long long)d.batch, (long long)d.M,
                    (long long)d.N);
    set_out(s, d.yrank, d.yshape, a);
    s->out->layout = FG_LAYOUT_NCHW;   /* row-major whatever the inputs' layout */
    return FG_OK;
}

fg_status fg_infer_batch_norm(infer *s)
{
    char b1[128], b2[128];
    const fg_tensor *x = s->in[0];
    if (x->rank < 2)
        return fail(s, "input must have rank 2 or more, got %s", SHAPE(x, b1));
    for (int i = 1; i < s->n->ninputs; i++) {
        const fg_tensor *p = s->in[i];
        if (p && (p->rank != 1 || p->shape[0] != x->shape[1]))
            return fail(s, "'%s' has shape %s but the input %s has %lld channels", s->n->op->inputs[i].name,
                        SHAPE(p, b1), SHAPE(x, b2), (long long)x->shape[1]);
    }
    set_out(s, x->rank, x->shape, x);
    return FG_OK;
}

fg_status fg_infer_pool(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    if (x->rank != 4)
        return fail(s, "input must be rank 4 [N, C, H, W], got %s", SHAPE(x, b1));
    int64_t k[2] = {attr_or(s->n, "kernel", 0, 1), attr_or(s->n, "kernel", 1, 1)};
    if (k[0] < 1 || k[1] < 1)
        return fail(s, "kernel must be positive, got %lldx%lld", (long long)k[0], (long long)k[1]);
    int64_t o[2];
    if (spatial_out(s, &x->shape[2], k, o))
        return FG_ERR_INPUT;
    int64_t shape[4] = {x->shape[0], x->shape[1], o[0], o[1]};
    set_out(s, 4, shape, x);
    return FG_OK;
}

fg_status fg_infer_global_pool(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    if (x->rank != 4)
        return fail(s, "input must be rank 4 [N, C, H, W], got %s", SHAPE(x, b1));
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    set_out(s, 4, shape, x);
    return FG_OK;
}

fg_status fg_infer_flatten(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    if (x->rank < 2)
        return fail(s, "input must have rank 2 or more, got %s", SHAPE(x, b1));
    int64_t shape[2] = {x->shape[0], 1};
    for (int i = 1; i < x->rank; i++)
        shape[1] *= x->shape[i];
    set_out(s, 2, shape, x);
    return FG_OK;
}

/* ---- re-indexing and row kinds (reshape, transpose, concat, softmax, lrn) ---- */

fg_status fg_infer_reshape(infer *s)
{
    char b1[128], b2[128];
    const fg_tensor *x = s->in[0];
    const fg_attr_value *sh = fg_node_attr(s->n, "shape");
    if (!sh || sh->type != FG_ATTR_INTS || sh->n < 1 || sh->n > FG_MAX_RANK)
        return fail(s, "'shape' must list 1 to %d dimensions", FG_MAX_RANK);
    int64_t m = 1;
    for (int d = 0; d < sh->n; d++) {
        if (sh->ints[d] < 1 || sh->ints[d] > FG_MAX_NUMEL)
            return fail(s, "shape[%d] = %lld is not a positive size", d, (long long)sh->ints[d]);
        m *= sh->ints[d];
        if (m > FG_MAX_NUMEL)
            break;
    }
    if (m != fg_tensor_numel(x))
        return fail(s, "cannot reshape %s (%lld elements) to %s", SHAPE(x, b1), (long long)fg_tensor_numel(x),
                    fg_shape_str(sh->ints, sh->n, b2, sizeof b2));
    set_out(s, sh->n, sh->ints, x);
    return FG_OK;
}

fg_status fg_infer_transpose(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    const fg_attr_value *pm = fg_node_attr(s->n, "perm");
    if (!pm || pm->type != FG_ATTR_INTS || pm->n != x->rank)
        return fail(s, "'perm' must have one entry per axis of the input %s", SHAPE(x, b1));
    int seen[FG_MAX_RANK] = {0};
    int64_t shape[FG_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        int64_t a = pm->ints[d];
        if (a < 0 || a >= x->rank || seen[a])
            return fail(s, "'perm' is not a permutation of 0..%d (entry %d is %lld)", x->rank - 1, d, (long long)a);
        seen[a] = 1;
        shape[d] = x->shape[a];
    }
    set_out(s, x->rank, shape, x);
    return FG_OK;
}

fg_status fg_infer_concat(infer *s)
{
    char b1[128], b2[128];
    const fg_tensor *x = s->in[0];
    int axis = fg_axis_norm((int64_t)fg_node_attr_num(s->n, "axis", 0), x->rank);
    if (axis < 0)
        return fail(s, "axis %lld is out of range for rank %d", (long long)fg_node_attr_num(s->n, "axis", 0),
                    x->rank);
    int64_t shape[FG_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    int gap = 0, count = 1;
    for (int i = 1; i < s->n->ninputs; i++) {
        const fg_tensor *t = s->in[i];
        if (!t) {
            gap = 1;
            continue;
        }
        if (gap)
            return fail(s, "input %d is given after an absent one", i);
        if (t->rank != x->rank || t->dtype != x->dtype)
            return fail(s, "input %d %s %s does not match input 0 %s %s", i, SHAPE(t, b1), fg_dtype_name(t->dtype),
                        SHAPE(x, b2), fg_dtype_name(x->dtype));
        for (int d = 0; d < x->rank; d++)
            if (d != axis && t->shape[d] != x->shape[d])
                return fail(s, "input %d %s and input 0 %s differ along axis %d (only axis %d may)", i, SHAPE(t, b1),
                            SHAPE(x, b2), d, axis);
        shape[axis] += t->shape[axis];
        count++;
    }
    if (count < 2)
        return fail(s, "needs at least two inputs");
    set_out(s, x->rank, shape, x);
    return FG_OK;
}

fg_status fg_infer_softmax(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    int64_t outer, len, inner;
    if (fg_softmax_rows(s->n, x, &outer, &len, &inner) != 0)
        return fail(s, "axis %lld with naxes %lld does not fit the input %s", (long long)fg_node_attr_num(s->n, "axis", -1),
                    (long long)fg_node_attr_num(s->n, "naxes", 1), SHAPE(x, b1));
    set_out(s, x->rank, x->shape, x);
    return FG_OK;
}

fg_status fg_infer_lrn(infer *s)
{
    char b1[128];
    const fg_tensor *x = s->in[0];
    if (x->rank < 2)
        return fail(s, "input must be [N, C, ...] (rank 2 or more), got %s", SHAPE(x, b1));
    if (fg_node_attr_num(s->n, "size", 0) < 1)
        return fail(s, "size must be positive, got %lld", (long long)fg_node_attr_num(s->n, "size", 0));
    set_out(s, x->rank, x->shape, x);
    return FG_OK;
}

/* Every inferred tensor must fit the bounds of a graph input: each axis
 * 1..FG_MAX_NUMEL and at most FG_MAX_NUMEL elements (overflow-checked). */
static fg_status check_size(infer *s)
{
    char b1[160];
    int64_t numel = 1;
    for (int i = 0; i < s->out->rank; i++) {
        int64_t d = s->out->shape[i];
        if (d < 1 || d > FG_MAX_NUMEL || __builtin_mul_overflow(numel, d, &numel) || numel > FG_MAX_NUMEL) {
            fg_status st = fail(s, "output shape %s has more than %lld elements (or an empty axis)",
                                SHAPE(s->out, b1), (long long)FG_MAX_NUMEL);
            return st;
        }
    }
    return FG_OK;
}

fg_status fg_shape_infer_by(fg_context *ctx, fg_graph *g, int node, fg_status (*infer_fn)(infer *s))
{
    infer s = {ctx, g, &g->nodes[node], {0}, &g->tensors[g->nodes[node].output]};
    for (int i = 0; i < s.n->ninputs; i++) {
        if (s.n->inputs[i] < 0)
            continue;
        s.in[i] = &g->tensors[s.n->inputs[i]];
        if (s.in[i]->rank < 0) {
            s.out->rank = -1;
            return FG_ERR_INPUT;
        }
    }
    if (!s.in[0])
        return fail(&s, "input 0 is missing");
    fg_status st = infer_fn(&s);
    if (st == FG_OK)
        st = check_size(&s);
    return st;
}
