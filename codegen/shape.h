/*
 * shape.h -- shape inference, one rule per op kind (see docs/graphs.md):
 * pointwise numpy broadcasting with per-channel inputs, conv2d, matmul with
 * transposes and a broadcast bias, batch_norm, pool2d, global_pool, flatten.
 */
#ifndef FG_SHAPE_H
#define FG_SHAPE_H

#include "ir.h"

/* Sets rank, shape, dtype and layout of node's output tensor from its input
 * tensors and attributes.  Inputs whose rank is negative are of unknown
 * shape (an earlier error): the output becomes unknown too (rank -1) and
 * FG_ERR_INPUT is returned without a new message.  A mismatch is recorded at
 * the node's location, e.g. "conv2d 'conv1': input has 32 channels but
 * weight expects 64 (weight shape [64, 64, 3, 3], groups 1)". */
fg_status fg_shape_infer(fg_context *ctx, fg_graph *g, int node);

/* Formats a shape as "[1, 64, 56, 56]" into buf; returns buf. */
const char *fg_shape_str(const int64_t *shape, int rank, char *buf, size_t size);

#endif /* FG_SHAPE_H */
