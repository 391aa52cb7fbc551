/*
 * axes.h -- axis arithmetic of the re-indexing and reduction kinds
 * (reshape, transpose, concat, softmax, lrn), shared by shape inference
 * (shape.c), the emitters (emit_copy.c, emit_softmax.c) and the host
 * reference (runtime/reference_ops.c), so that the three agree on what an
 * attribute means.
 */
#ifndef FG_AXES_H
#define FG_AXES_H

#include "ir.h"

/* Axis a of a rank-r tensor, negative counting from the end: the axis in
 * 0..r-1, or -1 when out of range. */
int fg_axis_norm(int64_t a, int r);

/* The rows a softmax node n reduces over its input x: x viewed as
 * [outer, len, inner], with len the product of the reduced axes
 * (`axis` .. `axis` + `naxes` - 1; `naxes` 0: through the last axis).
 * Returns 0, or -1 when the attributes do not fit x's rank. */
int fg_softmax_rows(const fg_node *n, const fg_tensor *x, int64_t *outer, int64_t *len, int64_t *inner);

/* The concat axis of node n (normalized against its output's rank), or -1. */
int fg_concat_axis(const fg_node *n, const fg_tensor *out);

/* LRN window of channel c over C channels with size `size` (ONNX):
 * [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C - 1];
 * sets lo and hi (inclusive). */
void fg_lrn_window(int64_t c, int64_t C, int64_t size, int64_t *lo, int64_t *hi);

#endif /* FG_AXES_H */
