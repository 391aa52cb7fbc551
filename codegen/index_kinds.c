/*
 * index_kinds.c -- shape inference and pad modes of the data-movement
 * kinds slice, expand and pad (contract in index_kinds.h).
 */
#include "index_kinds.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

const char *const fg_pad_mode_names[] = {"constant", "reflect", "edge", "wrap", NULL};
FG_STATIC_ASSERT(FG_COUNTOF(fg_pad_mode_names) == FG_PAD_MODE_COUNT + 1, "pad mode names out of sync");

int fg_pad_mode_of(const fg_node *n)
{
    const fg_attr_value *v = fg_node_attr(n, "mode");
    const char *s = v && v->type == FG_ATTR_STRING && v->s ? v->s : "constant";
    for (int m = 0; m < FG_PAD_MODE_COUNT; m++)
        if (strcmp(fg_pad_mode_names[m], s) == 0)
            return m;
    return -1;
}

int64_t fg_pad_source(fg_pad_mode m, int64_t r, int64_t dim)
{
    if (r >= 0 && r < dim)
        return r;
    switch (m) {
    case FG_PAD_REFLECT: return r < 0 ? -r : 2 * (dim - 1) - r;
    case FG_PAD_EDGE: return r < 0 ? 0 : dim - 1;
    case FG_PAD_WRAP: return ((r % dim) + dim) % dim;
    default: return -1;
    }
}

static fg_status fail(fg_infer *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "op 'node': <message>" at the node; the output becomes unknown. */
static fg_status fail(fg_infer *s, const char *fmt, ...)
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

/* Output of rank r and shape sh, x's dtype; a rank-4 output of a rank-4
 * input keeps its layout. */
static fg_status set_out(fg_infer *s, int r, const int64_t *sh)
{
    const fg_tensor *x = s->in[0];
    int64_t n = 1;
    for (int d = 0; d < r; d++) {
        if (sh[d] < 1 || sh[d] > FG_MAX_NUMEL / n)
            return fail(s, "output axis %d has size %lld (sizes are 1 to %lld in all)", d, (long long)sh[d],
                        (long long)FG_MAX_NUMEL);
        n *= sh[d];
    }
    s->out->rank = r;
    memcpy(s->out->shape, sh, sizeof(int64_t) * (size_t)r);
    s->out->dtype = x->dtype;
    s->out->layout = x->rank == 4 && r == 4 ? x->layout : FG_LAYOUT_NCHW;
    return FG_OK;
}

/* An ints attribute of exactly want values, or NULL (reported). */
static const fg_attr_value *ints_of(fg_infer *s, const char *name, int want)
{
    const fg_attr_value *v = fg_node_attr(s->n, name);
    char b[128];
    if (!v || v->type != FG_ATTR_INTS || v->n != want) {
        fail(s, "'%s' must have %d values (%s of the input %s)", name, want,
             want == 2 * s->in[0]->rank ? "a begin and an end per axis" : "one per axis",
             fg_shape_str(s->in[0]->shape, s->in[0]->rank, b, sizeof b));
        return NULL;
    }
    return v;
}

fg_status fg_infer_slice(fg_infer *s)
{
    const fg_tensor *x = s->in[0];
    const fg_attr_value *st = ints_of(s, "starts", x->rank), *sp = st ? ints_of(s, "steps", x->rank) : NULL,
                        *sh = sp ? ints_of(s, "shape", x->rank) : NULL;
    if (!sh)
        return FG_ERR_INPUT;
    for (int d = 0; d < x->rank; d++) {
        int64_t a = st->ints[d], k = sp->ints[d], n = sh->ints[d];
        if (k == 0)
            return fail(s, "steps[%d] is 0", d);
        if (n < 1)
            return fail(s, "shape[%d] is %lld: an output axis has at least one element", d, (long long)n);
        if (a < 0 || a >= x->shape[d])
            return fail(s, "starts[%d] = %lld is outside axis %d of size %lld", d, (long long)a, d,
                        (long long)x->shape[d]);
        if ((k > 0 && (x->shape[d] - 1 - a) / k < n - 1) || (k < 0 && a / -k < n - 1))
            return fail(s, "axis %d reads %lld elements from %lld in steps of %lld, past its size %lld", d,
                        (long long)n, (long long)a, (long long)k, (long long)x->shape[d]);
    }
    return set_out(s, x->rank, sh->ints);
}

fg_status fg_infer_expand(fg_infer *s)
{
    const fg_tensor *x = s->in[0];
    char b1[128], b2[128];
    int64_t out[FG_MAX_RANK];
    const fg_attr_value *reps = fg_node_attr(s->n, "reps");
    if (reps) {
        if (!(reps = ints_of(s, "reps", x->rank)))
            return FG_ERR_INPUT;
        for (int d = 0; d < x->rank; d++) {
            if (reps->ints[d] < 1)
                return fail(s, "reps[%d] is %lld; repeats are at least 1", d, (long long)reps->ints[d]);
            if (reps->ints[d] > FG_MAX_NUMEL / x->shape[d])
                return fail(s, "reps[%d] = %lld makes axis %d too large", d, (long long)reps->ints[d], d);
            out[d] = x->shape[d] * reps->ints[d];
        }
        return set_out(s, x->rank, out);
    }
    const fg_attr_value *sh = fg_node_attr(s->n, "shape");
    if (!sh || sh->type != FG_ATTR_INTS || sh->n < 1 || sh->n > FG_MAX_RANK)
        return fail(s, "'shape' must have 1 to %d values", FG_MAX_RANK);
    memcpy(out, x->shape, sizeof(int64_t) * (size_t)x->rank);
    int r = fg_broadcast_shape(out, x->rank, sh->ints, sh->n);
    if (r < 0)
        return fail(s, "input %s does not broadcast to shape %s", fg_shape_str(x->shape, x->rank, b1, sizeof b1),
                    fg_shape_str(sh->ints, sh->n, b2, sizeof b2));
    return set_out(s, r, out);
}

fg_status fg_infer_pad(fg_infer *s)
{
    const fg_tensor *x = s->in[0];
    int mode = fg_pad_mode_of(s->n);
    if (mode < 0) {
        const fg_attr_value *m = fg_node_attr(s->n, "mode");
        return fail(s, "mode '%s' is not constant, reflect, edge or wrap", m && m->s ? m->s : "?");
    }
    if (2 * x->rank > FG_MAX_INTS)
        return fail(s, "input of rank %d: pad takes at most rank %d (a begin and an end per axis)", x->rank,
                    FG_MAX_INTS / 2);
    const fg_attr_value *p = ints_of(s, "pads", 2 * x->rank);
    if (!p)
        return FG_ERR_INPUT;
    int64_t out[FG_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        int64_t b = p->ints[d], e = p->ints[d + x->rank], n = x->shape[d];
        if (b < -n || e < -n || n + b + e < 1)
            return fail(s, "pads %lld and %lld of axis %d (size %lld) leave no element", (long long)b, (long long)e,
                        d, (long long)n);
        if (b > FG_MAX_NUMEL || e > FG_MAX_NUMEL)
            return fail(s, "pads of axis %d are too large", d);
        if (mode == FG_PAD_REFLECT && (b >= n || e >= n) )
            return fail(s, "reflect pads %lld and %lld of axis %d must be smaller than its size %lld", (long long)b,
                        (long long)e, d, (long long)n);
        out[d] = n + b + e;
    }
    return set_out(s, x->rank, out);
}
