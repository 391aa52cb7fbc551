/*
 * rewrite_attn_cast.c -- the attention whose scores an fp16 / bf16 export
 * casts to fp32 (contract in rewrite.h, fg_rewrite_attention_casts).  The
 * TorchScript exporter writes scaled_dot_product_attention in a half model
 * with an fp32 mask as
 *
 *     S = MatMul(Q, K) (half) -> Cast(fp32) -> element-wise (+ mask, fp32)
 *       -> Softmax -> [nan_to_zero] -> MatMul(., Cast(V, fp32))
 *
 * whose dtype changes at the first Cast, so no attention group can hold it
 * (the attention kernel takes one dtype).  The pass moves that Cast onto
 * the scores' operands: MatMul(Cast(Q), Cast(K)) in fp32.  Q K^T of the
 * same half values, accumulated in fp32, is then not rounded to half
 * before the fp32 mask and softmax: the one difference, a rounding less.
 * The whole chain is fp32 and the attention rule takes it into one kernel.
 * The rewrite is a graph edit of its own (new nodes before the matmul),
 * which a `rewrite:` document, one node replacing a match, cannot say.
 */
#include "rewrite.h"

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kind.h"

/* The one node reading tensor t (t no graph output), or -1. */
static int sole_reader(const fg_graph *g, int t)
{
    if (t < 0 || g->tensors[t].is_output)
        return -1;
    int r = -1, n = 0;
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].ninputs; j++)
            if (g->nodes[i].inputs[j] == t) {
                r = i;
                n++;
            }
    return n == 1 ? r : -1;
}

static int is_op(const fg_node *nd, const char *name)
{
    return nd->op->name && strcmp(nd->op->name, name) == 0;
}

static int is_half(fg_dtype d)
{
    return d == FG_DTYPE_F16 || d == FG_DTYPE_BF16;
}

/* Nonzero when node c is a cast to fp32 of the scores S = matmul(Q, K) in a
 * half dtype (read by c alone, no bias), and c's output reaches, through
 * element-wise fp32 nodes each read once, a softmax whose rows (or their
 * nan_to_zero) are the A operand of a matmul whose B is a cast to fp32 of a
 * tensor of S's dtype.  *mm: the scores' matmul. */
static int attention_scores_cast(const fg_graph *g, int c, int *mm)
{
    const fg_node *cn = &g->nodes[c];
    if (!is_op(cn, "cast") || g->tensors[cn->output].dtype != FG_DTYPE_F32 || cn->inputs[0] < 0)
        return 0;
    int s = cn->inputs[0], m = g->tensors[s].producer;
    if (m < 0 || g->nodes[m].op->kind != FG_OPK_MATMUL || sole_reader(g, s) != c)
        return 0;
    const fg_node *mn = &g->nodes[m];
    fg_dtype h = g->tensors[s].dtype;
    int bias = fg_node_input(mn, "bias");
    if (!is_half(h) || (bias >= 0 && bias < mn->ninputs && mn->inputs[bias] >= 0) || mn->inputs[0] < 0 ||
        mn->inputs[1] < 0 || g->tensors[mn->inputs[0]].dtype != h || g->tensors[mn->inputs[1]].dtype != h)
        return 0;
    int t = cn->output, n;
    for (;;) {   /* the element-wise fp32 nodes, then the softmax */
        if ((n = sole_reader(g, t)) < 0)
            return 0;
        const fg_node *nd = &g->nodes[n];
        if (g->tensors[nd->output].dtype != FG_DTYPE_F32)
            return 0;
        if (nd->op->kind == FG_OPK_SOFTMAX)
            break;
        if (fg_kind(nd->op->kind)->role != FG_ROLE_ELEMENTWISE)
            return 0;
        t = nd->output;
    }
    t = g->nodes[n].output;
    if ((n = sole_reader(g, t)) >= 0 && is_op(&g->nodes[n], "nan_to_zero")) {
        t = g->nodes[n].output;
        n = sole_reader(g, t);
    }
    if (n < 0 || g->nodes[n].op->kind != FG_OPK_MATMUL || g->nodes[n].inputs[0] != t)
        return 0;
    int v = g->nodes[n].inputs[1], vc = v >= 0 ? g->tensors[v].producer : -1;
    if (vc < 0 || !is_op(&g->nodes[vc], "cast") || g->tensors[v].dtype != FG_DTYPE_F32 ||
        g->nodes[vc].inputs[0] < 0 || g->tensors[g->nodes[vc].inputs[0]].dtype != h)
        return 0;
    *mm = m;
    return 1;
}

/* A new fp32 tensor like t, named "<t>_f32" (made unique). */
static int f32_tensor(fg_context *ctx, fg_graph *g, int t)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s_f32", g->tensors[t].name);
    fg_tensor nt;
    memset(&nt, 0, sizeof nt);
    nt.name = fg_rewrite_fresh_name(ctx, g, b.s, 0);
    fg_buf_free(&b);
    nt.dtype = FG_DTYPE_F32;
    nt.layout = g->tensors[t].layout;
    nt.rank = g->tensors[t].rank;
    memcpy(nt.shape, g->tensors[t].shape, sizeof nt.shape);
    nt.producer = -1;
    nt.loc = g->tensors[t].loc;
    return fg_graph_add_tensor(g, &nt);
}

/* Edits one match: casts of Q and K (copies of the cast c, named after the
 * matmul, "<m>_cast_a" / "_b", made unique) inserted before the matmul m, which reads them and computes c's
 * output; c is removed. */
static void apply(fg_context *ctx, fg_graph *g, int c, int m)
{
    fg_node cast = g->nodes[c], mm = g->nodes[m];
    fg_node nc[2];
    for (int i = 0; i < 2; i++) {
        int in = mm.inputs[i];
        int out = f32_tensor(ctx, g, in);
        nc[i] = cast;
        nc[i].inputs[0] = in;
        nc[i].output = out;
        nc[i].loc = mm.loc;
        fg_buf stem = {0};
        fg_buf_printf(&stem, "%s_cast_%c", mm.name, i ? 'b' : 'a');
        nc[i].name = fg_rewrite_fresh_name(ctx, g, stem.s, 1);
        fg_buf_free(&stem);
        mm.inputs[i] = out;
    }
    mm.output = cast.output;
    /* the node list: ... casts, matmul ... (the cast c, after m, removed) */
    fg_graph_add_node(g, &nc[0]);
    fg_graph_add_node(g, &nc[1]);
    int n = g->nnodes;
    fg_node *all = fg_xmalloc((size_t)n * sizeof *all);
    int k = 0;
    for (int i = 0; i < n - 2; i++) {
        if (i == c)
            continue;
        if (i == m) {
            all[k++] = nc[0];
            all[k++] = nc[1];
            all[k++] = mm;
            continue;
        }
        all[k++] = g->nodes[i];
    }
    memcpy(g->nodes, all, (size_t)k * sizeof *all);
    g->nnodes = k;
    free(all);
    fg_graph_recount(g);
}

fg_status fg_rewrite_attention_casts(fg_context *ctx, fg_graph *g, char ***notes, int *nnotes)
{
    if (!ctx || !g)
        return FG_ERR_INPUT;
    fg_graph_recount(g);   /* producers as the graph is now */
    for (int c = 0; c < g->nnodes; c++) {
        int m;
        if (!attention_scores_cast(g, c, &m))
            continue;
        fg_buf b = {0};
        fg_buf_printf(&b, "rewrite attention_scores_fp32 (built in): %s, %s -> cast, cast, matmul %s (fp32)",
                      g->nodes[m].name, g->nodes[c].name, g->nodes[m].name);
        if (notes && nnotes) {
            *notes = fg_xrealloc(*notes, (size_t)(*nnotes + 1) * sizeof **notes);
            (*notes)[(*nnotes)++] = fg_buf_take(&b);
        } else {
            fg_buf_free(&b);
        }
        apply(ctx, g, c, m);
        c++;   /* the cast's slot now holds the node after it (two casts in, the cast out) */
    }
    return FG_OK;
}
