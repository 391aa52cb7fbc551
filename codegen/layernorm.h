/*
 * layernorm.h -- the geometry of a layer_norm node (LayerNormalization,
 * RMSNormalization): its input viewed as [rows, len] with len the product of
 * the axes from `axis` to the last, and the checks of its scale, bias and
 * skip inputs against that row.  Shape inference, the emitter
 * (emit_layernorm.c) and the host reference (runtime/reference_norm.c) all
 * read it, so that the three agree on what the attributes mean.
 */
#ifndef FG_LAYERNORM_H
#define FG_LAYERNORM_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;

typedef struct fg_ln_geom {
    int axis;          /* first normalized axis, 0 .. rank - 1 */
    int64_t rows;      /* product of the axes before axis */
    int64_t len;       /* product of the axes from axis on: one row */
    int rms;           /* RMS normalization: no mean subtracted */
    double eps;
    int scale, bias, skip;   /* input slots, -1 when the op lacks them or they are absent */
    fg_dtype out;      /* the output's dtype: attribute `to`, or x's when it is `x` or absent */
} fg_ln_geom;

/* Fills d for layer_norm node n of graph g (its input 0 must have a known
 * shape).  Returns 0, or -1 with the reason in why: the axis out of range,
 * a scale or bias that does not broadcast onto the normalized axes
 * (right-aligned, each axis 1 or equal), a skip not of x's shape and dtype,
 * a `to` that names no float dtype (fp32, fp16, bf16) nor `x`. */
int fg_ln_geom_of(const fg_graph *g, const fg_node *n, fg_ln_geom *d, char *why, size_t whysz);

/* Shape inference of the layer_norm kind (kind.c's table): the output has
 * x's shape and layout and the dtype `to` names (x's by default); a bad
 * axis, parameter or `to` is a located error. */
fg_status fg_infer_layer_norm(struct fg_infer *s);

#endif /* FG_LAYERNORM_H */
