/*
 * onnx_convert_resize.c -- the ONNX converters of Resize (opsets 10 to 19),
 * Upsample (7, 9) and ConvTranspose onto the resize and conv_transpose2d
 * ops of the loaded vocabulary (rules/resize.yaml, rules/conv_transpose.yaml;
 * geometry: resize.h, conv_transpose.h).  Scales and sizes must be
 * constants; only H and W of a rank-4 tensor may change.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"

/* A string attribute into buf (def when absent); NULL when it is no string
 * (reported). */
static const char *str_attr(struct nctx *nc, const char *name, const char *def, char *buf, size_t size)
{
    const Onnx__AttributeProto *a = fg_onnx_nc_attr(nc, name);
    if (!a)
        return def;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
        fg_onnx_nc_err(nc, "attribute '%s' must be a string", name);
        return NULL;
    }
    size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
    if (n)   /* a string attribute without its value has no data (NULL) */
        memcpy(buf, a->s.data, n);
    buf[n] = 0;
    return buf;
}

static int64_t int_attr(struct nctx *nc, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = fg_onnx_nc_attr(nc, name);
    return a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ? a->i : def;
}

/* An ints attribute of 2 values (H, W) into out; 1 absent or read, 0 on an
 * error (reported). */
static int ints2_attr(struct nctx *nc, const char *name, int64_t *out, int want)
{
    const Onnx__AttributeProto *a = fg_onnx_nc_attr(nc, name);
    if (!a)
        return 1;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || (int)a->n_ints != want)
        return fg_onnx_nc_err(nc, "attribute '%s' must be %d ints (2-D only)", name, want), 0;
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)want);
    return 1;
}

/* Emits the resize node: scale[4] (NCHW; <= 0 unknown) or size[4] (<= 0
 * unknown) per axis; N and C must stay. */
static int emit_resize(struct nctx *nc, int x, const char *mode, const char *coord, const char *nearest,
                       const double *scale, const int64_t *size)
{
    const fg_tensor *xt = &fg_onnx_nc_loader(nc)->g->tensors[x];
    for (int a = 0; a < 2; a++)
        if ((size[a] > 0 && size[a] != xt->shape[a]) || (size[a] <= 0 && scale[a] != 1.0))
            return fg_onnx_nc_err(nc, "only H and W may be resized (axis %d: scale %g, size %lld of %lld)", a,
                                  scale[a], (long long)size[a], (long long)xt->shape[a]), -1;
    for (int a = 2; a < 4; a++)
        if (size[a] <= 0 && !(scale[a] > 0))
            return fg_onnx_nc_err(nc, "scale %g of axis %d is not positive", scale[a], a), -1;
    if (strcmp(mode, "bilinear") == 0)
        mode = "linear";
    const char *names[8] = {"mode", "coordinate_transformation_mode", "nearest_mode"};
    fg_attr_value v[8] = {{.type = FG_ATTR_STRING, .s = fg_intern(fg_onnx_nc_loader(nc)->ctx, mode)},
                          {.type = FG_ATTR_STRING, .s = fg_intern(fg_onnx_nc_loader(nc)->ctx, coord)},
                          {.type = FG_ATTR_STRING, .s = fg_intern(fg_onnx_nc_loader(nc)->ctx, nearest)}};
    int n = 3;
    const Onnx__AttributeProto *ca = fg_onnx_nc_attr(nc, "cubic_coeff_a");
    if (ca && ca->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        names[n] = "cubic_coeff_a";
        v[n++] = (fg_attr_value){.type = FG_ATTR_FLOAT, .f = ca->f};
    }
    names[n] = "exclude_outside";
    v[n++] = (fg_attr_value){.type = FG_ATTR_BOOL, .i = int_attr(nc, "exclude_outside", 0) != 0};
    if (size[2] > 0 && size[3] > 0) {
        names[n] = "size";
        v[n] = (fg_attr_value){.type = FG_ATTR_INTS, .n = 2};
        v[n].ints[0] = size[2];
        v[n++].ints[1] = size[3];
    }
    if (scale[2] > 0) {
        names[n] = "scale_h";
        v[n++] = (fg_attr_value){.type = FG_ATTR_FLOAT, .f = scale[2]};
    }
    if (scale[3] > 0) {
        names[n] = "scale_w";
        v[n++] = (fg_attr_value){.type = FG_ATTR_FLOAT, .f = scale[3]};
    }
    return fg_onnx_nc_emit_out(nc, "resize", &x, 1, names, v, n);
}

/* Scales (floats) or sizes (ints) of constant input i into out[4] along
 * axes ax[0..nax) (all four when nax is 0); 1 when read, 0 when absent or
 * empty, -1 on an error (reported). */
static int const_axes(struct nctx *nc, int i, int is_size, const int64_t *ax, int nax, double *fs, int64_t *is)
{
    if (!fg_onnx_nc_has_in(nc, i))
        return 0;
    fg_onnx_const *k = fg_onnx_nc_in_const(nc, i);
    if (!k)
        return fg_onnx_nc_err(nc, "input %d (%s) must be a constant", i, is_size ? "sizes" : "scales"), -1;
    if (k->numel == 0)
        return 0;
    int want = nax ? nax : 4;
    if (k->numel != want)
        return fg_onnx_nc_err(nc, "%s has %lld values; want %d", is_size ? "sizes" : "scales", (long long)k->numel,
                              want), -1;
    if (is_size ? !k->i : !k->f)
        return fg_onnx_nc_err(nc, "%s must be %s", is_size ? "sizes" : "scales", is_size ? "int64" : "float"), -1;
    for (int j = 0; j < want; j++) {
        int a = nax ? (int)ax[j] : j;
        if (is_size)
            is[a] = k->i[j];
        else
            fs[a] = k->f[j];
    }
    return 1;
}

int fg_onnx_op_resize(struct nctx *nc)
{
    loader *L = fg_onnx_nc_loader(nc);
    int x = fg_onnx_nc_x(nc);
    if (x < 0)
        return -1;
    const fg_tensor *xt = &L->g->tensors[x];
    if (xt->rank != 4)
        return fg_onnx_nc_err(nc, "only rank-4 [N, C, H, W] inputs are supported, got rank %d", xt->rank), -1;
    char b1[64], b2[64], b3[64], b4[64];
    const char *mode = str_attr(nc, "mode", "nearest", b1, sizeof b1);
    const char *coord = str_attr(nc, "coordinate_transformation_mode", "half_pixel", b2, sizeof b2);
    const char *nearest = str_attr(nc, "nearest_mode", "round_prefer_floor", b3, sizeof b3);
    const char *policy = str_attr(nc, "keep_aspect_ratio_policy", "stretch", b4, sizeof b4);
    if (!mode || !coord || !nearest || !policy)
        return -1;
    if (int_attr(nc, "antialias", 0) != 0)
        return fg_onnx_nc_err(nc, "antialias=1 is not supported"), -1;
    double scale[4] = {1, 1, 1, 1};
    int64_t size[4] = {0, 0, 0, 0}, ax[4];
    int nax = 0;
    const Onnx__AttributeProto *aa = fg_onnx_nc_attr(nc, "axes");
    if (aa) {
        if (aa->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || aa->n_ints < 1 || aa->n_ints > 4)
            return fg_onnx_nc_err(nc, "attribute 'axes' must list 1 to 4 axes"), -1;
        nax = (int)aa->n_ints;
        for (int j = 0; j < nax; j++) {
            ax[j] = aa->ints[j] < 0 ? aa->ints[j] + 4 : aa->ints[j];
            if (ax[j] < 0 || ax[j] > 3)
                return fg_onnx_nc_err(nc, "axis %lld is out of range for rank 4", (long long)aa->ints[j]), -1;
        }
    }
    int got_scale, got_size = 0;
    if (L->opset < 11) {   /* Resize-10: X, scales; asymmetric, nearest as Upsample */
        got_scale = const_axes(nc, 1, 0, ax, 0, scale, size);
        if (got_scale <= 0)
            return got_scale < 0 ? -1 : (fg_onnx_nc_err(nc, "needs the scales input"), -1);
        coord = "asymmetric";
        nearest = scale[2] < 1 || scale[3] < 1 ? "ceil" : "floor";
    } else {
        if ((got_scale = const_axes(nc, 2, 0, ax, nax, scale, size)) < 0 ||
            (got_size = const_axes(nc, 3, 1, ax, nax, scale, size)) < 0)
            return -1;
        if (got_scale == got_size)
            return fg_onnx_nc_err(nc, "needs exactly one of scales and sizes"), -1;
    }
    if (got_size) {
        for (int a = 0; a < 4; a++)
            if (size[a] <= 0 && !nax)
                return fg_onnx_nc_err(nc, "sizes must be positive"), -1;
        for (int a = 0; a < 4; a++)
            if (size[a] <= 0)
                size[a] = xt->shape[a];
        if (strcmp(policy, "stretch") != 0) {
            int larger = strcmp(policy, "not_smaller") == 0;
            if (!larger && strcmp(policy, "not_larger") != 0)
                return fg_onnx_nc_err(nc, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or not_smaller",
                                      policy), -1;
            double s = 0;
            for (int j = 0; j < (nax ? nax : 4); j++) {
                int a = nax ? (int)ax[j] : j;
                double r = (double)((float)size[a] / (float)xt->shape[a]);
                s = j == 0 ? r : larger ? (r > s ? r : s) : (r < s ? r : s);
            }
            for (int j = 0; j < (nax ? nax : 4); j++) {
                int a = nax ? (int)ax[j] : j;
                size[a] = (int64_t)llround(s * (double)xt->shape[a]);
                scale[a] = s;
            }
            for (int a = 0; a < 2; a++)
                if (size[a] == xt->shape[a])
                    scale[a] = 1;
        } else {
            scale[2] = scale[3] = 0;   /* the ratio of the sizes */
        }
    }
    if (strcmp(coord, "tf_crop_and_resize") == 0)
        return fg_onnx_nc_err(nc, "coordinate_transformation_mode tf_crop_and_resize (a region of interest) is not "
                              "supported"), -1;
    return emit_resize(nc, x, mode, coord, nearest, scale, size);
}

/* Upsample-7 (scales attribute) and -9 (scales input): asymmetric; nearest
 * rounds down when upsampling (onnxruntime's rule, up when downsampling). */
int fg_onnx_op_upsample(struct nctx *nc)
{
    loader *L = fg_onnx_nc_loader(nc);
    int x = fg_onnx_nc_x(nc);
    if (x < 0)
        return -1;
    const fg_tensor *xt = &L->g->tensors[x];
    if (xt->rank != 4)
        return fg_onnx_nc_err(nc, "only rank-4 [N, C, H, W] inputs are supported, got rank %d", xt->rank), -1;
    char b1[64];
    const char *mode = str_attr(nc, "mode", "nearest", b1, sizeof b1);
    if (!mode)
        return -1;
    double scale[4] = {1, 1, 1, 1};
    int64_t size[4] = {0, 0, 0, 0};
    const Onnx__AttributeProto *sa = fg_onnx_nc_attr(nc, "scales");
    if (sa) {
        if (sa->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS || sa->n_floats != 4)
            return fg_onnx_nc_err(nc, "attribute 'scales' must be 4 floats"), -1;
        for (int a = 0; a < 4; a++)
            scale[a] = sa->floats[a];
    } else {
        int got = const_axes(nc, 1, 0, NULL, 0, scale, size);
        if (got <= 0)
            return got < 0 ? -1 : (fg_onnx_nc_err(nc, "needs the scales input"), -1);
    }
    return emit_resize(nc, x, mode, "asymmetric", scale[2] < 1 || scale[3] < 1 ? "ceil" : "floor", scale, size);
}

/* ConvTranspose: pads, auto_pad and output_shape follow onnxruntime: with
 * output_shape, or SAME_* (out = in * stride), the total padding (stride *
 * (in - 1) + output_padding + (k - 1) * dilation + 1 - out) is split with
 * the larger half at the start (SAME_UPPER: at the end); a negative total
 * is extra output_padding. */
int fg_onnx_op_conv_transpose(struct nctx *nc)
{
    loader *L = fg_onnx_nc_loader(nc);
    int x = fg_onnx_nc_x(nc);
    if (x >= 0 && L->g->tensors[x].rank == 3)
        return fg_onnx_lift_1d(nc, fg_onnx_op_conv_transpose, 1);   /* 1-D: the 2-D form with H = 1 */
    int w = fg_onnx_nc_in_tensor(nc, 1);
    int b = fg_onnx_nc_has_in(nc, 2) ? fg_onnx_nc_in_tensor(nc, 2) : -1;
    if (x < 0 || w < 0 || (fg_onnx_nc_has_in(nc, 2) && b < 0))
        return fg_onnx_nc_failed(nc) ? -1 : (fg_onnx_nc_err(nc, "needs inputs X and W"), -1);
    const fg_tensor *xt = &L->g->tensors[x], *wt = &L->g->tensors[w];
    if (xt->rank != 4 || wt->rank != 4)
        return fg_onnx_nc_err(nc, "only 1-D and 2-D transposed convolution is supported (input rank 3 or 4, weight rank 3 or 4; got "
                              "%d and %d)", xt->rank, wt->rank), -1;
    int64_t k[2] = {wt->shape[2], wt->shape[3]}, kk[2] = {k[0], k[1]}, s[2] = {1, 1}, d[2] = {1, 1};
    int64_t op[2] = {0, 0}, os[2] = {0, 0}, pads[4] = {0, 0, 0, 0};
    if (!ints2_attr(nc, "kernel_shape", kk, 2) || !ints2_attr(nc, "strides", s, 2) ||
        !ints2_attr(nc, "dilations", d, 2) || !ints2_attr(nc, "output_padding", op, 2) ||
        !ints2_attr(nc, "pads", pads, 4))
        return -1;
    if (kk[0] != k[0] || kk[1] != k[1])
        return fg_onnx_nc_err(nc, "kernel_shape [%lld, %lld] differs from the weight's [%lld, %lld]",
                              (long long)kk[0], (long long)kk[1], (long long)k[0], (long long)k[1]), -1;
    const Onnx__AttributeProto *osa = fg_onnx_nc_attr(nc, "output_shape");
    int has_os = osa != NULL;
    if (has_os) {
        if (osa->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || (osa->n_ints != 2 && osa->n_ints != 4))
            return fg_onnx_nc_err(nc, "attribute 'output_shape' must be 2 ints (or 4: N, C, H, W)"), -1;
        os[0] = osa->ints[osa->n_ints - 2];
        os[1] = osa->ints[osa->n_ints - 1];
    }
    char b1[32];
    const char *ap = str_attr(nc, "auto_pad", "NOTSET", b1, sizeof b1);
    if (!ap)
        return -1;
    int upper = strcmp(ap, "SAME_UPPER") == 0, same = upper || strcmp(ap, "SAME_LOWER") == 0;
    if (!same && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
        return fg_onnx_nc_err(nc, "auto_pad='%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap), -1;
    if (strcmp(ap, "VALID") == 0)
        memset(pads, 0, sizeof pads);
    for (int a = 0; a < 2; a++) {
        if (s[a] < 1 || d[a] < 1 || op[a] < 0 || pads[a] < 0 || pads[a + 2] < 0)
            return fg_onnx_nc_err(nc, "strides and dilations must be positive, pads and output_padding "
                                  "non-negative"), -1;
        int64_t full = s[a] * (xt->shape[2 + a] - 1) + op[a] + (k[a] - 1) * d[a] + 1;
        if (has_os || same) {
            int64_t want = has_os ? os[a] : xt->shape[2 + a] * s[a];
            int64_t total = full - want;
            if (total < 0) {
                op[a] += -total;
                total = 0;
            }
            int64_t half = total / 2;
            int head_big = !upper;   /* onnxruntime's split */
            pads[a] = head_big ? total - half : half;
            pads[a + 2] = head_big ? half : total - half;
        }
    }
    const char *names[5] = {"stride", "padding", "output_padding", "dilation", "groups"};
    fg_attr_value v[5] = {{.type = FG_ATTR_INTS, .n = 2, .ints = {s[0], s[1]}},
                          {.type = FG_ATTR_INTS, .n = 4, .ints = {pads[0], pads[1], pads[2], pads[3]}},
                          {.type = FG_ATTR_INTS, .n = 2, .ints = {op[0], op[1]}},
                          {.type = FG_ATTR_INTS, .n = 2, .ints = {d[0], d[1]}},
                          {.type = FG_ATTR_INT, .i = int_attr(nc, "group", 1)}};
    v[4].f = (double)v[4].i;
    if (pads[0] == pads[2] && pads[1] == pads[3])
        v[1].n = 2;
    int ins[3] = {x, w, b};
    return fg_onnx_nc_emit_out(nc, "conv_transpose2d", ins, 3, names, v, 5);
}
