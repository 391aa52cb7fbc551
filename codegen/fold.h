/*
 * fold.h -- host-side parameter folds named by rules (`fold: [bn_into_conv]`).
 * A fold rewrites the plan's copy of the graph: it changes weight data, may add
 * a bias tensor to a node that had none, and marks absorbed nodes folded.
 *
 * Builtin folds:
 *   bn_into_conv    W' = W*gamma/sqrt(var+eps), b' = (b-mean)*gamma/sqrt(var+eps)+beta;
 *                   a conv without bias gets b'.
 *   bn_into_matmul  the same per output column of a matmul/gemm.
 *   affine_merge    two consecutive per-channel affine ops (batch_norm, or mul/add
 *                   by per-channel vectors) merged into the first.
 */
#ifndef FG_FOLD_H
#define FG_FOLD_H

#include <stddef.h>

#include "fold_names.h"
#include "ir.h"

/* The builtin folds' names: fold_names.h (read by the rule loader too). */

/* Side-effect-free check that fold f can apply to the candidate group
 * nodes[0..n) of g (the planner calls it before committing a match): 1, or
 * 0 with the reason in why.  Lua folds are not checked here (their own
 * errors carry their location). */
int fg_fold_check(const fg_rule *r, const fg_fold *f, const fg_graph *g, const int *nodes, int n, char *why,
                  size_t whysz);
/* Applies fold f of rule r to group grp of plan graph g. */
fg_status fg_fold_apply(fg_context *ctx, const fg_rule *r, const fg_fold *f, fg_graph *g, fg_group *grp);

#endif /* FG_FOLD_H */
