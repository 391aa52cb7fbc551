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

/* The state of one inference: the node, its input tensors, its output. */
typedef struct fg_infer {
    fg_context *ctx;
    fg_graph *g;
    fg_node *n;
    const fg_tensor *in[FG_MAX_INPUTS]; /* NULL: absent optional input */
    fg_tensor *out;
} fg_infer;

/* The largest tensor fusegen handles, in elements (and per axis): offsets in
 * generated code are 64-bit, but every buffer is allocated, so bound it. */
#define FG_MAX_NUMEL (1ll << 31)

/* Shape rules of the op kinds (the op-kind table, kind.c, points at them). */
fg_status fg_infer_pointwise(fg_infer *s);
fg_status fg_infer_conv(fg_infer *s);
fg_status fg_infer_matmul(fg_infer *s);
fg_status fg_infer_batch_norm(fg_infer *s);
fg_status fg_infer_pool(fg_infer *s);
fg_status fg_infer_global_pool(fg_infer *s);
fg_status fg_infer_flatten(fg_infer *s);
fg_status fg_infer_reshape(fg_infer *s);
fg_status fg_infer_transpose(fg_infer *s);
fg_status fg_infer_concat(fg_infer *s);
fg_status fg_infer_softmax(fg_infer *s);
fg_status fg_infer_lrn(fg_infer *s);

/* Formats a shape as "[1, 64, 56, 56]" into buf; returns buf. */
const char *fg_shape_str(const int64_t *shape, int rank, char *buf, size_t size);

#endif /* FG_SHAPE_H */
