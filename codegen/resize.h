/*
 * resize.h -- the resize kind (ONNX Resize / Upsample over H and W of a
 * rank-4 tensor): the meaning of a resize node's attributes, shared by shape
 * inference, the emitter (emit_resize.c, templates/resize.cuh) and the host
 * reference (runtime/reference_resize.c), so that the three agree.
 *
 * Attributes: `mode` (nearest, linear, cubic), `coordinate_transformation_mode`
 * (half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
 * asymmetric, tf_half_pixel_for_nn), `nearest_mode` (round_prefer_floor,
 * round_prefer_ceil, floor, ceil), `cubic_coeff_a`, `exclude_outside`, and
 * the output size: `size` [OH, OW] when positive, else floor(H * scale_h),
 * floor(W * scale_w).  The scale the coordinate transform divides by is
 * scale_h / scale_w when given (positive), else OH / H, OW / W (ONNX's rule:
 * sizes given, the scale is their ratio).
 *
 * Output coordinate o maps to the input coordinate x = T(o) of the
 * transform; nearest reads input floor(x) or floor(x) + 1 by nearest_mode
 * (an integer x reads x), linear interpolates floor(x) and floor(x) + 1 with
 * weights 1 - f, f (f = x - floor(x)), cubic the four taps floor(x) - 1 ..
 * floor(x) + 2 with Keys' weights of parameter a; taps outside the input
 * read the edge, or with exclude_outside weigh 0 (the others renormalised).
 * The two axes are separable: a 2-D tap weighs wy * wx.
 */
#ifndef FG_RESIZE_H
#define FG_RESIZE_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;   /* shape.h */

typedef enum fg_resize_mode { FG_RESIZE_NEAREST = 0, FG_RESIZE_LINEAR, FG_RESIZE_CUBIC, FG_RESIZE_MODE_COUNT } fg_resize_mode;

typedef enum fg_resize_coord {
    FG_RESIZE_HALF_PIXEL = 0,
    FG_RESIZE_HALF_PIXEL_SYMMETRIC,
    FG_RESIZE_PYTORCH_HALF_PIXEL,
    FG_RESIZE_ALIGN_CORNERS,
    FG_RESIZE_ASYMMETRIC,
    FG_RESIZE_TF_HALF_PIXEL_FOR_NN,
    FG_RESIZE_COORD_COUNT
} fg_resize_coord;

typedef enum fg_resize_round {
    FG_RESIZE_ROUND_PREFER_FLOOR = 0,
    FG_RESIZE_ROUND_PREFER_CEIL,
    FG_RESIZE_FLOOR,
    FG_RESIZE_CEIL,
    FG_RESIZE_ROUND_COUNT
} fg_resize_round;

/* Names as written in the attributes, in enum order, NULL-terminated. */
extern const char *const fg_resize_mode_names[];
extern const char *const fg_resize_coord_names[];
extern const char *const fg_resize_round_names[];

/* A resize node over input x. */
typedef struct fg_resize_geom {
    fg_resize_mode mode;
    fg_resize_coord coord;
    fg_resize_round round;
    double cubic_a;
    int exclude_outside;
    int64_t in[2], out[2];     /* H, W and OH, OW */
    double scale[2];           /* what the transform divides by (positive) */
} fg_resize_geom;

/* Fills *d for node n over input x.  Returns 0, or -1 with the reason in why
 * (an unknown mode name, a rank other than 4, no positive size or scale,
 * tf_crop_and_resize). */
int fg_resize_geom_of(const fg_node *n, const fg_tensor *x, fg_resize_geom *d, char *why, size_t whysz);

/* The input coordinate of output coordinate o along axis (0: H, 1: W). */
double fg_resize_source(const fg_resize_geom *d, int axis, int64_t o);

/* The taps of output coordinate o along axis: input indices idx[0..n)
 * (clamped into the input) and their weights w (summing to 1); returns n
 * (1 for nearest, 2 linear, 4 cubic). */
int fg_resize_taps(const fg_resize_geom *d, int axis, int64_t o, int64_t idx[4], double w[4]);

/* Shape inference of the resize kind (the op-kind table points at it). */
fg_status fg_infer_resize(struct fg_infer *s);

#endif /* FG_RESIZE_H */
