/*
 * resize.c -- the geometry of a resize node: attribute names, output size,
 * the coordinate transform and the interpolation taps (contract in
 * resize.h).
 */
#include "resize.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shape.h"
#include "util.h"

const char *const fg_resize_mode_names[] = {"nearest", "linear", "cubic", NULL};
const char *const fg_resize_coord_names[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                             "align_corners", "asymmetric", "tf_half_pixel_for_nn", NULL};
const char *const fg_resize_round_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
FG_STATIC_ASSERT(FG_COUNTOF(fg_resize_mode_names) == FG_RESIZE_MODE_COUNT + 1, "resize mode names out of sync");
FG_STATIC_ASSERT(FG_COUNTOF(fg_resize_coord_names) == FG_RESIZE_COORD_COUNT + 1, "resize coord names out of sync");
FG_STATIC_ASSERT(FG_COUNTOF(fg_resize_round_names) == FG_RESIZE_ROUND_COUNT + 1, "resize round names out of sync");

/* Index of string attribute name of n in names (def when n's op lacks it),
 * or -1 with the reason in why. */
static int pick(const fg_node *n, const char *name, const char *const *names, int def, char *why, size_t whysz)
{
    const fg_attr_value *v = fg_node_attr(n, name);
    if (!v)
        return def;
    if (v->type != FG_ATTR_STRING || !v->s) {
        snprintf(why, whysz, "'%s' must be a string", name);
        return -1;
    }
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], v->s) == 0)
            return i;
    if (strcmp(name, "coordinate_transformation_mode") == 0 && strcmp(v->s, "tf_crop_and_resize") == 0) {
        snprintf(why, whysz, "coordinate_transformation_mode tf_crop_and_resize (a region of interest) is not "
                 "supported");
        return -1;
    }
    size_t at = (size_t)snprintf(why, whysz, "'%s' is '%s'; want one of", name, v->s);
    for (int i = 0; names[i] && at < whysz; i++)
        at += (size_t)snprintf(why + at, whysz - at, "%s %s", i ? "," : "", names[i]);
    return -1;
}

int fg_resize_geom_of(const fg_node *n, const fg_tensor *x, fg_resize_geom *d, char *why, size_t whysz)
{
    memset(d, 0, sizeof *d);
    if (x->rank != 4) {
        snprintf(why, whysz, "input must be rank 4 [N, C, H, W], got rank %d", x->rank);
        return -1;
    }
    int m = pick(n, "mode", fg_resize_mode_names, 0, why, whysz);
    int c = m < 0 ? -1 : pick(n, "coordinate_transformation_mode", fg_resize_coord_names, 0, why, whysz);
    int r = c < 0 ? -1 : pick(n, "nearest_mode", fg_resize_round_names, 0, why, whysz);
    if (r < 0)
        return -1;
    d->mode = (fg_resize_mode)m;
    d->coord = (fg_resize_coord)c;
    d->round = (fg_resize_round)r;
    d->cubic_a = fg_node_attr_num(n, "cubic_coeff_a", -0.75);
    d->exclude_outside = fg_node_attr_num(n, "exclude_outside", 0) != 0;
    const fg_attr_value *sz = fg_node_attr(n, "size");
    static const char *const scale_names[2] = {"scale_h", "scale_w"};
    for (int a = 0; a < 2; a++) {
        d->in[a] = x->shape[2 + a];
        double s = fg_node_attr_num(n, scale_names[a], 0);
        int64_t o = sz && sz->type == FG_ATTR_INTS && sz->n == 2 ? sz->ints[a] : 0;
        if (o <= 0) {
            if (!(s > 0) || !isfinite(s)) {
                snprintf(why, whysz, "axis %d needs a positive 'size' or '%s'", 2 + a, scale_names[a]);
                return -1;
            }
            double f = floor((double)d->in[a] * s);
            o = f < (double)FG_MAX_NUMEL ? (int64_t)f : FG_MAX_NUMEL;
        }
        if (o < 1 || o >= FG_MAX_NUMEL) {
            snprintf(why, whysz, "output size %lld along axis %d is not a positive size", (long long)o, 2 + a);
            return -1;
        }
        d->out[a] = o;
        /* the ratio as onnxruntime computes it, in float */
        d->scale[a] = s > 0 ? s : (double)((float)o / (float)d->in[a]);
    }
    return 0;
}

double fg_resize_source(const fg_resize_geom *d, int axis, int64_t o)
{
    double s = d->scale[axis], li = (double)d->in[axis], lo = (double)d->out[axis], x = (double)o;
    switch (d->coord) {
    case FG_RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adj = lo / (s * li), center = li / 2;
        return center * (1 - adj) + (x + 0.5) / s - 0.5;
    }
    case FG_RESIZE_PYTORCH_HALF_PIXEL: return lo > 1 ? (x + 0.5) / s - 0.5 : 0.0;
    case FG_RESIZE_ALIGN_CORNERS: return lo > 1 ? x * (li - 1) / (lo - 1) : 0.0;
    case FG_RESIZE_ASYMMETRIC: return x / s;
    case FG_RESIZE_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    default: return (x + 0.5) / s - 0.5;
    }
}

static int64_t clamp_i(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

int fg_resize_taps(const fg_resize_geom *d, int axis, int64_t o, int64_t idx[4], double w[4])
{
    double x = fg_resize_source(d, axis, o), f = floor(x), r = x - f;
    int64_t fi = (int64_t)f, n = d->in[axis];
    if (d->mode == FG_RESIZE_NEAREST) {
        int up = 0;
        if (r > 0)
            switch (d->round) {
            case FG_RESIZE_ROUND_PREFER_FLOOR: up = r > 0.5; break;
            case FG_RESIZE_ROUND_PREFER_CEIL: up = r >= 0.5; break;
            case FG_RESIZE_FLOOR: up = 0; break;
            default: up = 1; break;
            }
        idx[0] = clamp_i(fi + up, n);
        w[0] = 1.0;
        return 1;
    }
    int nt;
    int64_t first;
    if (d->mode == FG_RESIZE_LINEAR) {
        nt = 2;
        first = fi;
        w[0] = 1 - r;
        w[1] = r;
    } else {
        double A = d->cubic_a, t0 = r + 1, t3 = 2 - r, q = 1 - r;
        nt = 4;
        first = fi - 1;
        w[0] = ((A * t0 - 5 * A) * t0 + 8 * A) * t0 - 4 * A;
        w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
        w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        w[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
    }
    double sum = 0;
    for (int i = 0; i < nt; i++) {
        int64_t j = first + i;
        if (d->exclude_outside && (j < 0 || j >= n))
            w[i] = 0;
        sum += w[i];
        idx[i] = clamp_i(j, n);
    }
    if (d->exclude_outside && sum != 0)
        for (int i = 0; i < nt; i++)
            w[i] /= sum;
    return nt;
}

fg_status fg_infer_resize(fg_infer *s)
{
    char why[200];
    fg_resize_geom d;
    const fg_tensor *x = s->in[0];
    if (fg_resize_geom_of(s->n, x, &d, why, sizeof why) != 0) {
        s->out->rank = -1;
        return fg_diag_error(s->ctx, FG_ERR_INPUT, s->n->loc, "%s '%s': %s", s->n->op->name, s->n->name, why);
    }
    s->out->rank = 4;
    s->out->shape[0] = x->shape[0];
    s->out->shape[1] = x->shape[1];
    s->out->shape[2] = d.out[0];
    s->out->shape[3] = d.out[1];
    s->out->dtype = x->dtype;
    s->out->layout = x->layout;
    return FG_OK;
}
