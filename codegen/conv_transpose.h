/*
 * conv_transpose.h -- the conv_transpose2d kind (ONNX ConvTranspose, 2-D):
 * the geometry of a node, shared by shape inference, the emitter
 * (emit_conv_transpose.c, templates/conv_transpose.cuh) and the host
 * reference (runtime/reference_resize.c).
 *
 * x [N, C, H, W], weight [C, K/groups, R, S], bias? [K]; attributes stride,
 * padding ([top, left] both sides, or [top, left, bottom, right]),
 * output_padding (added at the end of each axis), dilation, groups.  The
 * output is [N, K, OH, OW] with
 *   OH = SH * (H - 1) + output_padding_h + DH * (R - 1) + 1 - pad_top - pad_bottom
 * and output (oh, ow) of channel k (group g = k / (K/groups)) sums
 * x[n, c, ih, iw] * w[c, k mod K/groups, r, s] over the group's input
 * channels c and the taps with ih * SH = oh + pad_top - r * DH (and the
 * same for columns), 0 <= ih < H.
 */
#ifndef FG_CONV_TRANSPOSE_H
#define FG_CONV_TRANSPOSE_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;   /* shape.h */

typedef struct fg_convt_geom {
    int64_t N, C, H, W, K, R, S, OH, OW, groups, Cg, Kg;
    int64_t stride[2], dilation[2], pad_beg[2], pad_end[2], out_pad[2];
} fg_convt_geom;

/* Fills *d for node n over input x, weight w (bias: NULL or the bias).
 * Returns 0, or -1 with the reason in why. */
int fg_convt_geom_of(const fg_node *n, const fg_tensor *x, const fg_tensor *w, const fg_tensor *bias,
                     fg_convt_geom *d, char *why, size_t whysz);

/* Shape inference of the conv_transpose2d kind (the op-kind table points at it). */
fg_status fg_infer_conv_transpose(struct fg_infer *s);

#endif /* FG_CONV_TRANSPOSE_H */
