/*
 * shape.h -- shape inference, one rule per op kind (see docs/graphs.md),
 * which the op-kind table (kind.h) points at: pointwise numpy broadcasting
 * with per-channel inputs, conv2d, matmul with transposes and a broadcast
 * bias, batch_norm, pool2d, global_pool, flatten, reshape, transpose,
 * concat, softmax, lrn (reduce: reduce.h).
 */
#ifndef FG_SHAPE_H
#define FG_SHAPE_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;

/* Sets rank, shape, dtype and layout of node's output tensor from its input
 * tensors and attributes through infer, the inference of the node's kind
 * (callers use fg_kind_infer_shape, kind.h, which passes the kind table's).
 * Inputs whose rank is negative are of unknown shape (an earlier error): the
 * output becomes unknown too (rank -1) and FG_ERR_INPUT is returned without
 * a new message.  A mismatch is recorded at the node's location, e.g.
 * "conv2d 'conv1': input has 32 channels but weight expects 64 (weight
 * shape [64, 64, 3, 3], groups 1)". */
fg_status fg_shape_infer_by(fg_context *ctx, fg_graph *g, int node, fg_status (*infer)(struct fg_infer *s));

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
/* Broadcasts shape[0..rank) with other[0..orank) numpy-style, in place
 * (shape holds FG_MAX_RANK values): returns the result's rank, or -1 (shape
 * unchanged) when they do not broadcast. */
int fg_broadcast_shape(int64_t *shape, int rank, const int64_t *other, int orank);
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

/* The geometry of a matmul a x b (numpy / ONNX MatMul semantics): a rank-1
 * a is [1, K] and b rank-1 is [K, 1], the added axis dropped from the
 * output; axes before the last two are batch axes, broadcast numpy-style.
 * yshape = batch axes, then M (unless a is a vector), then N (unless b is).
 * astride / bstride: element stride of a and b per output batch axis (0 where
 * the operand is broadcast); matrices are row-major (trans: stored [.., K, M]
 * / [.., N, K]).  1 when the shapes agree, else 0 with the reason in why. */
typedef struct fg_matmul_geom_t {
    int64_t M, N, K, batch;        /* batch: product of the batch axes */
    int nbatch, yrank;
    int a_vec, b_vec;              /* rank-1 operands */
    int a_batched, b_batched;      /* not the same matrix for every batch */
    int64_t bshape[FG_MAX_RANK], astride[FG_MAX_RANK], bstride[FG_MAX_RANK];
    int64_t yshape[FG_MAX_RANK];
} fg_matmul_geom_t;
int fg_matmul_geom(const fg_tensor *a, const fg_tensor *b, int ta, int tb, fg_matmul_geom_t *d, char *why,
                   size_t whysz);

#endif /* FG_SHAPE_H */
