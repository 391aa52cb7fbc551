/*
 * reduce.h -- the reduce kind (ONNX ReduceSum, ReduceMax, ...): the
 * reductions an op definition may name with `reduce:`, and the geometry of a
 * reduce node (which axes it reduces, its output shape), shared by shape
 * inference, the emitter (emit_reduce.c, templates/reduce.cuh) and the host
 * reference (runtime/reference_ops.c), so that the three agree on what the
 * attributes mean.
 *
 * A reduce node has attributes `axes` (ints: the reduced axes, negative
 * counting from the end, each at most once) and `keepdims` (bool: reduced
 * axes stay as size 1; else they are dropped, and a result of rank 0 is
 * [1]).  Every reduced element counts: fusegen tensors have no empty axis,
 * so no reduction is empty.
 */
#ifndef FG_REDUCE_H
#define FG_REDUCE_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;   /* shape.h */

/* The reductions: acc starts at the identity (max / min: the row's first
 * element), takes map(x) of every element, and the result is finish(acc). */
typedef enum fg_reduction {
    FG_RED_SUM = 0,      /* sum x */
    FG_RED_MEAN,         /* sum x / n */
    FG_RED_MAX,          /* max x; NaN propagates */
    FG_RED_MIN,          /* min x; NaN propagates */
    FG_RED_PROD,         /* product of x */
    FG_RED_SUM_SQUARE,   /* sum x^2 */
    FG_RED_L1,           /* sum |x| */
    FG_RED_L2,           /* sqrt(sum x^2) */
    FG_RED_LOG_SUM,      /* log(sum x) */
    FG_RED_LOG_SUM_EXP,  /* log(sum exp(x)), computed as m + log(sum exp(x - m)) with m the row's max
                            (0 when the max is infinite) */
    FG_RED_ARGMAX,       /* the index k (0 .. len - 1, over the reduced axes in index order) of the
                            first max; a NaN counts as the max (its first occurrence) */
    FG_RED_ARGMIN,       /* the same for the min */
    FG_RED_ARGMAX_LAST,  /* argmax, the last index of the max (ONNX select_last_index) */
    FG_RED_ARGMIN_LAST,  /* argmin, the last index */
    FG_RED_COUNT
} fg_reduction;

/* The names as written after `reduce:`, in fg_reduction order and
 * NULL-terminated (the reduce kind's allowed values in the op-kind table). */
extern const char *const fg_reduction_names[];

/* Name of reduction r as written after `reduce:` ("sum", "log_sum_exp"). */
const char *fg_reduction_name(fg_reduction r);
/* Reduction by name, or -1. */
int fg_reduction_find(const char *name);
/* Nonzero for the reductions that give an index (argmax, argmin and their
 * _last forms). */
int fg_reduction_is_arg(fg_reduction r);
/* The reduction of a reduce node's op (FG_RED_SUM when its op names none). */
fg_reduction fg_node_reduction(const fg_node *n);

/* A reduce node over input x: mask bit d set when axis d is reduced; rows
 * = output elements, len = elements reduced into each (both products of
 * x's axes); the output rank and shape. */
typedef struct fg_reduce_geom {
    unsigned mask;
    int64_t rows, len;
    int yrank;
    int64_t yshape[FG_MAX_RANK];
} fg_reduce_geom;

/* Fills *d for node n over input x.  Returns 0, or -1 with the reason in why
 * (an axis out of range or given twice, no axes). */
int fg_reduce_geom_of(const fg_node *n, const fg_tensor *x, fg_reduce_geom *d, char *why, size_t whysz);

/* Shape inference of the reduce kind (the op-kind table points at it). */
fg_status fg_infer_reduce(struct fg_infer *s);

#endif /* FG_REDUCE_H */
