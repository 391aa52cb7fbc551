/*
 * emit_epilogue.c -- the epilogue, one code path for every template: the
 * element-wise expression of each fused node (fg_em_apply), biases, hook
 * expressions, assembled into fg_epilogue(p, v, coordinates...) which the
 * template calls on each accumulator before its one store.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_impl.h"
#include "expr.h"
#include "kind.h"
#include "template.h"

/* Nonzero when node index nd belongs to the group. */
static int in_group(const fg_emitter *em, int nd)
{
    for (int i = 0; i < em->grp->nnodes; i++)
        if (em->grp->nodes[i] == nd)
            return 1;
    return 0;
}

int fg_em_chain_input(const fg_emitter *em, int node)
{
    const fg_node *nd = &em->g->nodes[node];
    for (int i = 0; i < nd->ninputs; i++) {
        int t = nd->inputs[i];
        if (t >= 0 && em->g->tensors[t].producer >= 0 && in_group(em, em->g->tensors[t].producer))
            return i;
    }
    return -1;
}

fg_status fg_em_apply(fg_emitter *em, int node, const char *chain, const char *const *coords, int ind,
                      fg_buf *code, fg_buf *expr)
{
    const fg_node *nd = &em->g->nodes[node];
    const fg_opdef *op = nd->op;
    if (!op->expr)
        return fg_em_error(em, FG_ERR_INPUT, "node '%s' (op %s, kind %s) cannot be applied element-wise", nd->name,
                           op->name, fg_op_kind_name(op->kind));
    const char *names[FG_MAX_INPUTS + FG_MAX_ATTRS];
    char store[FG_MAX_INPUTS + FG_MAX_ATTRS][64];
    for (int i = 0; i < op->ninputs; i++) {
        int t = i < nd->ninputs ? nd->inputs[i] : -1;
        names[i] = store[i];
        if (t < 0) {
            snprintf(store[i], sizeof store[i], "0.0f");
            continue;
        }
        const fg_tensor *x = &em->g->tensors[t];
        if (chain && x->producer >= 0 && in_group(em, x->producer)) {
            names[i] = chain;
            continue;
        }
        if (!chain && x->producer >= 0 && in_group(em, x->producer))
            return fg_em_error(em, FG_ERR_INTERNAL, "node '%s' reads '%s' produced inside its own kernel", nd->name,
                               x->name);
        int pre = -1;   /* loaded by the template, a parameter of the epilogue */
        for (int k = 0; chain && k < em->npre && pre < 0; k++)
            if (em->pre[k].t == t && em->pre[k].per_channel == op->inputs[i].per_channel)
                pre = k;
        if (pre >= 0) {
            snprintf(store[i], sizeof store[i], "pre_%d", pre);
            continue;
        }
        char local[48];
        fg_em_identifier(op->inputs[i].name, local, sizeof local);
        snprintf(store[i], sizeof store[i], "in_%s%s", local, em->vec_names ? "[j]" : "");
        if (em->vec_names)
            continue;
        const char *field = fg_em_tensor(em, t, 0);
        fg_buf off = {0};
        fg_status st = fg_em_offset(em, t, op->inputs[i].per_channel, coords, em->ot->rank, em->ot->shape, &off);
        if (st != FG_OK) {
            fg_buf_free(&off);
            return st;
        }
        fg_buf_iprintf(code, ind, "const float %s = fg_load(p.%s + %s);  // %s\n", store[i], field, off.s, x->name);
        fg_buf_free(&off);
    }
    for (int a = 0; a < op->nattrs; a++) {
        int s = op->ninputs + a;
        const fg_attr_value *v = &nd->attrs[a];
        names[s] = store[s];
        switch (op->attrs[a].type) {
        case FG_ATTR_FLOAT: fg_expr_float_literal(v->f, store[s]); break;
        case FG_ATTR_INT:
        case FG_ATTR_BOOL: fg_expr_float_literal((double)v->i, store[s]); break;
        default: snprintf(store[s], sizeof store[s], "0.0f"); break;
        }
    }
    fg_expr_emit_c(op->expr, names, expr);
    return FG_OK;
}

fg_status fg_em_tile_params(fg_emitter *em, const char *const *keys, int n, int64_t *vals)
{
    const fg_tile_key *tk = fg_template_base(em->tpl)->tiles;
    for (int i = 0; i < n; i++) {
        int at = 0;
        while (tk && tk[at].name && strcmp(tk[at].name, keys[i]) != 0)
            at++;
        if (!tk || !tk[at].name || at >= FG_MAX_TILE_KEYS)
            return fg_em_error(em, FG_ERR_INTERNAL, "template %s declares no tile key '%s'", em->tpl->name, keys[i]);
        if (em->grp->tile[at] > 0)
            vals[i] = em->grp->tile[at];
    }
    return FG_OK;
}

/* Nonzero when the group's anchor indexes its bias by output columns (a GEMM:
 * FG_KIND_BIAS_COLUMNS), not by channel. */
static int bias_columns(const fg_emitter *em)
{
    return em->grp->anchor >= 0 && (fg_kind(em->g->nodes[em->grp->anchor].op->kind)->traits & FG_KIND_BIAS_COLUMNS);
}

/* Axis a BIAS stage (and a hook's `c`) indexes: the gemm column for a matmul
 * anchor, else the channel axis. */
static int bias_axis(const fg_emitter *em)
{
    if (bias_columns(em))
        return em->ot->rank - 1;
    return fg_em_channel_axis(em->ot->rank);
}

/* ---- the epilogue ---------------------------------------------------------- */

/* Input slot of the anchor's `bias` input, or -1. */
static int anchor_bias(const fg_emitter *em)
{
    if (em->grp->anchor < 0)
        return -1;
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    int i = fg_node_input(nd, "bias");
    return i >= 0 && i < nd->ninputs && nd->inputs[i] >= 0 ? i : -1;
}

/* A BIAS stage: a conv's per-channel [K] vector, or a matmul bias that
 * broadcasts numpy-style onto the output ([N], [1, N], [M, 1], [M, N]). */
static fg_status emit_bias(fg_emitter *em, int t, const char *const *coords, fg_buf *b)
{
    const fg_tensor *x = &em->g->tensors[t];
    int ca = bias_axis(em);
    fg_buf off = {0};
    fg_status st;
    if (bias_columns(em)) {
        st = fg_em_offset(em, t, 0, coords, em->ot->rank, em->ot->shape, &off);
    } else if (x->rank != 1 || (x->shape[0] != em->ot->shape[ca] && x->shape[0] != 1)) {
        st = fg_em_error(em, FG_ERR_INPUT, "bias '%s' must be a vector of %" PRId64 " elements", x->name,
                         em->ot->shape[ca]);
    } else {
        fg_buf_put(&off, x->shape[0] == 1 ? "0" : coords[ca]);
        st = FG_OK;
    }
    int pre = -1;   /* loaded by the caller (the vector epilogue), a parameter */
    for (int k = 0; k < em->npre && pre < 0; k++)
        if (em->pre[k].t == t && em->pre[k].per_channel == !bias_columns(em))
            pre = k;
    if (st == FG_OK) {
        fg_buf_iprintf(b, 1, "// epilogue: bias (%s)\n", x->name);
        if (pre >= 0)
            fg_buf_iprintf(b, 1, "v = v + pre_%d;\n", pre);
        else
            fg_buf_iprintf(b, 1, "v = v + fg_load(p.%s + %s);\n", fg_em_tensor(em, t, 0), off.s);
    }
    fg_buf_free(&off);
    return st;
}

static fg_status emit_apply(fg_emitter *em, int node, const char *const *coords, fg_buf *b)
{
    const fg_node *nd = &em->g->nodes[node];
    if (nd->folded) {
        fg_buf_iprintf(b, 1, "// epilogue: %s (%s) folded into the weights\n", nd->name, nd->op->name);
        return FG_OK;
    }
    fg_buf loads = {0}, expr = {0};
    fg_status st = fg_em_apply(em, node, "v", coords, 2, &loads, &expr);
    if (st == FG_OK) {
        fg_buf_iprintf(b, 1, "// epilogue: apply %s: %s\n", nd->name, nd->op->expr_src ? nd->op->expr_src : "");
        if (loads.len) {
            fg_buf_iprintf(b, 1, "{\n%s", loads.s);
            fg_buf_iprintf(b, 2, "v = %s;\n", expr.s);
            fg_buf_iprintf(b, 1, "}\n");
        } else {
            fg_buf_iprintf(b, 1, "v = %s;\n", expr.s);
        }
    }
    fg_buf_free(&loads);
    fg_buf_free(&expr);
    return st;
}

/* Emits fg_epilogue(p, v, coordinates...) into the helpers: the group's
 * stages in order, preceded by the anchor's own bias when no stage adds it;
 * with no stages, every node after the main one is applied in chain order
 * but a re-indexing node (the copy template's index map) and the last
 * nodes a template owns (fg_template.owns_last: gemm_softmax's softmax,
 * attention's softmax and P V); any other node that is
 * not element-wise is a located error. */
static fg_status epilogue_at(fg_emitter *em, const char *fname);

fg_status fg_em_epilogue(fg_emitter *em)
{
    /* the stages index their inputs at the coordinates of em->ot: the
     * family's epilogue space when it named one */
    const fg_tensor *out = em->ot;
    if (em->epi_ot)
        em->ot = em->epi_ot;
    fg_status st = epilogue_at(em, "fg_epilogue");
    em->ot = out;
    if (st == FG_OK)
        st = fg_em_epilogue_vec(em);
    return st;
}

fg_status fg_em_epilogue_named(fg_emitter *em, const char *fname)
{
    return epilogue_at(em, fname);
}

/* fg_em_epilogue at em->ot's coordinates, as function fname. */
static fg_status epilogue_at(fg_emitter *em, const char *fname)
{
    const fg_group *grp = em->grp;
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    fg_buf b = {0};
    fg_status st = FG_OK;
    int has_hook = 0;
    for (int i = 0; i < grp->nepi; i++)
        has_hook |= grp->epi[i].kind == FG_EPI_HOOK;

    fg_buf_printf(&b, "// epilogue: applied to each accumulator before the one store;\n// (");
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&b, "%s%s", i ? ", " : "", coords[i]);
    fg_buf_printf(&b, ") are the logical coordinates of %s\n", em->ot->name);
    fg_buf_printf(&b, "FG_DEVICE float %s(const fg_params_%s &p, float v", fname, em->k->name);
    for (int k = 0; k < em->npre; k++)
        fg_buf_printf(&b, ", float pre_%d", k);
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&b, ", fg_i64 %s", coords[i]);
    fg_buf_put(&b, ")\n{\n");
    if (has_hook && strcmp(coords[bias_axis(em)], "c") != 0)
        fg_buf_printf(&b, "    const fg_i64 c = %s;  // channel, for hook text\n    (void)c;\n", coords[bias_axis(em)]);

    int bias_slot = anchor_bias(em);
    int bias_t = bias_slot >= 0 ? em->g->nodes[grp->anchor].inputs[bias_slot] : -1;
    int bias_done = 0;
    for (int i = 0; i < grp->nepi; i++)
        if (grp->epi[i].kind == FG_EPI_BIAS && grp->epi[i].tensor == bias_t)
            bias_done = 1;
    int nstages = 0;
    if (bias_t >= 0 && !bias_done) {
        st = emit_bias(em, bias_t, coords, &b);
        nstages++;
    }
    if (grp->nepi > 0) {
        for (int i = 0; i < grp->nepi && st == FG_OK; i++) {
            const fg_group_epi *e = &grp->epi[i];
            nstages++;
            switch (e->kind) {
            case FG_EPI_BIAS:
                if (e->tensor >= 0)
                    st = emit_bias(em, e->tensor, coords, &b);
                else
                    fg_buf_printf(&b, "    // epilogue: bias (absent)\n");
                break;
            case FG_EPI_APPLY:
                if (e->node == em->main_node && grp->anchor < 0)
                    break;   /* the pointwise template computes it */
                st = emit_apply(em, e->node, coords, &b);
                break;
            case FG_EPI_HOOK: {
                /* the hook returned a parsed expression over v and c at plan time, never text */
                if (!e->expr) {
                    st = fg_em_error(em, FG_ERR_INTERNAL, "epilogue hook %s has no expression (the plan ran no hooks)",
                                     e->hook);
                    break;
                }
                fg_buf ex = {0};
                fg_expr_emit_c(e->expr, (const char *[]){"v", "(float)c"}, &ex);
                fg_buf_printf(&b, "    // epilogue: hook %s\n    v = %s;\n", e->hook, ex.s);
                fg_buf_free(&ex);
                break;
            }
            default: st = fg_em_error(em, FG_ERR_INTERNAL, "unknown epilogue stage %d", (int)e->kind); break;
            }
        }
    } else {
        for (int i = 0; i < grp->nnodes && st == FG_OK; i++) {
            int nd = grp->nodes[i];
            if (nd == em->main_node || nd == grp->anchor || fg_kind(em->g->nodes[nd].op->kind)->role == FG_ROLE_RESHAPE)
                continue;   /* a re-indexing node is part of the template's index map (copy), not a stage */
            if (em->tpl && i >= grp->nnodes - fg_template_owned(em->tpl, em->g, grp))
                continue;   /* the nodes after the epilogue (a softmax, P V): the template computes them */
            nstages++;
            st = emit_apply(em, nd, coords, &b);
        }
    }
    if (!nstages)
        fg_buf_put(&b, "    // epilogue: none\n");
    fg_buf_put(&b, "    return v;\n}\n\n");
    if (st == FG_OK)
        fg_buf_put(&em->helpers, b.s);
    fg_buf_free(&b);
    return st;
}
