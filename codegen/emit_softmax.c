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
#include "emit_impl.h"
#include "template.h"

static fg_status emit_softmax(fg_emitter *em)
{
    int a = em->grp->anchor;
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

/* Capability check (fg_template.check): a softmax whose axes fit its input. */
static int check_softmax(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    int64_t outer, len, inner;
    if (fg_softmax_rows(nd, &c->g->tensors[nd->inputs[0]], &outer, &len, &inner)) {
        snprintf(why, whysz, "softmax computes a softmax node whose axes fit its input");
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "softmax", .family = "softmax", .order = 60, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_SOFTMAX,
     .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads, .check = check_softmax, .emit = emit_softmax,
     .summary = "softmax over rows, one block per row: max, sum of exp, normalize (4-wide loads on contiguous rows)"},
};
FG_TEMPLATE_FAMILY(softmax, rows);
