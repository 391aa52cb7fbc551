/*
 * emit_softmax.c -- the softmax family (templates/softmax.cuh): softmax (or,
 * with the node's `log` attribute, log-softmax) over the rows of a softmax
 * node's input, one block per row.  A row is the
 * elements of the reduced axes (axes.h, fg_softmax_rows); the template walks
 * it by logical index, and the helpers emitted here turn a logical index
 * into a memory offset (the identity for row-major tensors) and store
 * through the epilogue at the output's coordinates.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "emit_ops.h"
#include "template.h"

/* Body of a helper returning tensor t's element at logical index lin
 * (emit_ops.h). */
fg_status fg_em_lin_load_body(fg_emitter *em, int t, fg_buf *b)
{
    const fg_tensor *x = &em->g->tensors[t];
    if (fg_em_row_major(em, t)) {
        fg_buf_iprintf(b, 1, "return fg_load(p.%s + lin);  // %s, row-major", fg_em_tensor(em, t, 0), x->name);
        return FG_OK;
    }
    char names[FG_MAX_RANK][16];
    const char *xc[FG_MAX_RANK];
    fg_em_lin_coords(em, t, "lin", "x", names, 1, b);
    for (int d = 0; d < x->rank; d++)
        xc[d] = names[d];
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, t, 0, xc, x->rank, x->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "return fg_load(p.%s + %s);  // %s", fg_em_tensor(em, t, 0), off.s, x->name);
    fg_buf_free(&off);
    return st;
}

/* Body of a helper storing v at the output's logical index lin: the
 * coordinates, the epilogue, the store (emit_ops.h). */
fg_status fg_em_lin_store_body(fg_emitter *em, fg_buf *b)
{
    const fg_tensor *y = em->ot;
    char names[FG_MAX_RANK][16];
    const char *yc[FG_MAX_RANK];
    fg_em_lin_coords(em, em->out, "lin", NULL, names, 1, b);
    fg_buf off = {0}, args = {0};
    for (int d = 0; d < y->rank; d++) {
        yc[d] = names[d];
        fg_buf_printf(&args, "%s%s", d ? ", " : "", names[d]);
    }
    fg_status st = FG_OK;
    if (fg_em_row_major(em, em->out))
        fg_buf_put(&off, "lin");
    else
        st = fg_em_offset(em, em->out, 0, yc, y->rank, y->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "fg_store(p.%s + %s, fg_epilogue(p, v, %s));", fg_em_tensor(em, em->out, 1), off.s,
                       args.s);
    fg_buf_free(&off);
    fg_buf_free(&args);
    return st;
}

fg_status fg_emit_softmax(fg_emitter *em)
{
    int a = em->grp->anchor;
    if (a < 0 || em->g->nodes[a].op->kind != FG_OPK_SOFTMAX)
        return fg_em_error(em, FG_ERR_INPUT, "template softmax needs a softmax node");
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[xt];
    int64_t outer, len, inner, threads;
    if (fg_softmax_rows(nd, x, &outer, &len, &inner) != 0)
        return fg_em_error(em, FG_ERR_INPUT, "softmax '%s': axis and naxes do not fit its input", nd->name);
    /* a block per row: fewer threads for short rows (at least a warp) */
    int64_t def = len >= 1024 ? 256 : len >= 256 ? 128 : len >= 64 ? 64 : 32;
    fg_status st = fg_em_threads(em, def, &threads);
    if (st != FG_OK)
        return st;
    fg_em_tensor(em, em->out, 1);
    int vec4 = inner == 1 && len % 4 == 0 && fg_em_row_major(em, xt);
    fg_buf load = {0}, store = {0};
    st = fg_em_lin_load_body(em, xt, &load);
    if (st == FG_OK)
        st = fg_em_lin_store_body(em, &store);
    if (st == FG_OK) {
        fg_em_shape(em, "ROWS", outer * inner);
        fg_em_shape(em, "LEN", len);
        fg_em_shape(em, "INNER", inner);
        fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
        fg_em_set(em, "LOAD", "%s", load.s);
        fg_em_set(em, "STORE", "%s", store.s);
        fg_em_set(em, "VEC4", "%d", vec4);
        fg_em_set(em, "LOG", "%d", fg_node_attr_num(nd, "log", 0) != 0);
        em->template_file = "softmax.cuh";
        int64_t blocks = outer * inner;
        em->k->grid[0] = (unsigned)(blocks > 65535 ? 65535 : blocks);
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
        em->threads = (unsigned)threads;
    }
    fg_buf_free(&load);
    fg_buf_free(&store);
    return st;
}

/* Capability check (template.h): a softmax anchor whose axes fit its input. */
int fg_check_softmax(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    int64_t outer, len, inner;
    if (nd->op->kind != FG_OPK_SOFTMAX || fg_softmax_rows(nd, &c->g->tensors[nd->inputs[0]], &outer, &len, &inner)) {
        snprintf(why, whysz, "softmax computes a softmax node whose axes fit its input");
        return 0;
    }
    return 1;
}
