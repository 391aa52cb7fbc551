/*
 * layout_assign.c -- the planner's layout pass: which layout the tensors a
 * plan stores for itself are kept in.
 *
 * The tensor-core convolutions (conv2d_tc, conv2d_wgmma) read an input
 * pixel's channels and a weight row's (r, s, c) as contiguous runs and store
 * channels side by side, so they take NHWC weights and outputs (and, but for
 * conv2d_tc's gather path, NHWC inputs).  ONNX models and most YAML graphs
 * are NCHW.  A graph's inputs and outputs are the caller's buffers and keep
 * the layout the caller gave; everything else -- the intermediate
 * activations and the weights -- is the plan's own, and its layout is free:
 * every template addresses tensors through per-tensor offset functions, the
 * executor packs weights by their layout once, and the host reference works
 * on logical coordinates.  So when a graph has a dense convolution that
 * could run on tensor cores (fp16 or bf16; fp32 with precision tf32) and is
 * not NHWC, the plan's copy stores every rank-4 intermediate and weight NHWC,
 * as cuDNN and TensorRT convert NCHW networks to channels-last for their
 * tensor-core kernels -- but for the operands and results of matmul and
 * gather nodes, whose templates address matrices row-major (a vision
 * transformer's 4-D attention scores stay so).  The first convolution then reads the NCHW graph input
 * through conv2d_tc's gather path, and a group writing an NCHW graph output
 * takes a template that stores NCHW.
 *
 * In tf32 on Hopper a matmul weight stored [K, N] (the usual MatMul layout)
 * is stored [N, K] instead, with the node's trans_b set: tf32 wgmma reads
 * B K-major only (fg_layout_kmajor_b).
 *
 * FUSEGEN_KEEP_LAYOUT=1 turns the pass off (every tensor as the graph says).
 * `--explain` prints what the pass changed (plan_print.c, `layout:`).
 */
#include "layout_assign.h"

#include <stdlib.h>

#include "arch.h"
#include "kind.h"
#include "util.h"

/* Nonzero when node nd is a dense convolution in a tensor-core dtype whose
 * input or weights are not NHWC. */
static int tc_conv_not_nhwc(const fg_graph *g, const fg_node *nd)
{
    if (nd->op->kind != FG_OPK_CONV2D || nd->folded || nd->ninputs < 2)
        return 0;
    if (fg_node_attr(nd, "groups") && fg_node_attr_int(nd, "groups", 0) != 1)
        return 0;
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *w = &g->tensors[nd->inputs[1]];
    if (x->rank != 4 || w->rank != 4)
        return 0;
    int tc_dtype = x->dtype == FG_DTYPE_F16 || x->dtype == FG_DTYPE_BF16 ||
                   (x->dtype == FG_DTYPE_F32 && g->precision == FG_PRECISION_TF32);
    return tc_dtype && (x->layout != FG_LAYOUT_NHWC || w->layout != FG_LAYOUT_NHWC);
}

void fg_layout_assign(const fg_context *ctx, fg_graph *g, int *acts, int *weights)
{
    *acts = *weights = 0;
    if (ctx->env.keep_layout)
        return;
    int want = 0;
    for (int n = 0; n < g->nnodes && !want; n++)
        want = tc_conv_not_nhwc(g, &g->nodes[n]);
    if (!want)
        return;
    /* a matmul's and a gather's operands and results stay row-major: their
     * templates address matrices in logical order (attention's 4-D scores) */
    unsigned char *rowmajor = fg_xcalloc((size_t)g->ntensors + 1, 1);
    for (int n = 0; n < g->nnodes; n++) {
        const fg_node *nd = &g->nodes[n];
        if (nd->op->kind != FG_OPK_MATMUL && nd->op->kind != FG_OPK_GATHER)
            continue;
        rowmajor[nd->output] = 1;
        for (int i = 0; i < nd->ninputs; i++)
            if (nd->inputs[i] >= 0)
                rowmajor[nd->inputs[i]] = 1;
    }
    for (int t = 0; t < g->ntensors; t++) {
        fg_tensor *tt = &g->tensors[t];
        if (tt->rank != 4 || tt->layout == FG_LAYOUT_NHWC || tt->is_input || tt->is_output || rowmajor[t])
            continue;
        tt->layout = FG_LAYOUT_NHWC;
        ++*(tt->is_weight ? weights : acts);
    }
    free(rowmajor);
}

int fg_layout_kmajor_b(const fg_context *ctx, fg_graph *g)
{
    if (ctx->env.keep_layout || g->precision != FG_PRECISION_TF32 || !fg_arch_hopper(fg_target_arch(ctx)))
        return 0;
    int changed = 0;
    for (int i = 0; i < g->nnodes; i++) {
        fg_node *nd = &g->nodes[i];
        if (nd->op->kind != FG_OPK_MATMUL || nd->folded || nd->ninputs < 2 || nd->inputs[0] < 0 || nd->inputs[1] < 0)
            continue;
        const fg_attr_value *ta = fg_node_attr(nd, "trans_a"), *tb = fg_node_attr(nd, "trans_b");
        if (!tb || tb->i != 0 || (ta && ta->i != 0))
            continue;
        fg_tensor *a = &g->tensors[nd->inputs[0]], *b = &g->tensors[nd->inputs[1]];
        if (!b->is_weight || !b->data || b->is_input || b->is_output || b->rank != 2 || b->dtype != FG_DTYPE_F32 ||
            a->rank < 2 || fg_graph_reads(g, nd->inputs[1]) != 1)
            continue;
        int64_t K = b->shape[0], N = b->shape[1];
        const float *src = fg_tensor_own(b);   /* private, any pending fold scale applied */
        float *t = fg_xmalloc(sizeof(float) * (size_t)(K * N > 0 ? K * N : 1));
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                t[n * K + k] = src[k * N + n];
        free(b->data);
        b->data = t;
        b->shape[0] = N;
        b->shape[1] = K;
        nd->attrs[tb - nd->attrs].i = 1;   /* tb points into nd's own attributes */
        changed++;
    }
    return changed;
}
