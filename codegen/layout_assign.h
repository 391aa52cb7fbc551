/*
 * layout_assign.h -- the planner's layout pass (layout_assign.c): the
 * intermediate activations and weights of a graph with tensor-core
 * convolutions are stored NHWC; inputs and outputs keep their layout.
 */
#ifndef FG_LAYOUT_ASSIGN_H
#define FG_LAYOUT_ASSIGN_H

#include "context.h"
#include "ir.h"

/* On the plan's copy g (called by fg_plan_build after the rewrites, before
 * matching): when g has a dense conv2d in fp16 / bf16 (fp32 with precision
 * tf32) whose input or weights are not NHWC, and ctx does not keep layouts
 * (FUSEGEN_KEEP_LAYOUT), every rank-4 tensor that is neither a graph input
 * nor a graph output becomes NHWC.  *acts and *weights receive how many
 * activations and weights changed (0 when none). */
void fg_layout_assign(const fg_context *ctx, fg_graph *g, int *acts, int *weights);

/* On the plan's copy g, after fg_layout_assign: when g's precision is tf32,
 * the target arch (fg_target_arch) is Hopper and ctx does not keep layouts,
 * the B of each matmul that reads it stored [K, N] (trans_b false, trans_a
 * false, A of rank 2 or more) and is a rank-2 fp32 weight read by that node
 * alone and not a graph output is stored transposed, [N, K], and the node
 * gets trans_b true: the same product, with B K-major as tf32 wgmma reads
 * it (gemm_wgmma refuses a [K, N] B in tf32).  Returns how many weights
 * changed. */
int fg_layout_kmajor_b(const fg_context *ctx, fg_graph *g);

#endif /* FG_LAYOUT_ASSIGN_H */
