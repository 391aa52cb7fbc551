/*
 * emit_pointwise.c -- the pointwise family (templates/pointwise.cuh): a
 * group whose main node is an element-wise op (pointwise kind or an
 * unfolded batch_norm) or a flatten (a copy with re-indexing), followed by
 * the epilogue.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* Nonzero when every input of node nd has the output's shape and layout. */
static int full_size_inputs(const fg_emitter *em, int nd)
{
    const fg_node *n = &em->g->nodes[nd];
    for (int i = 0; i < n->ninputs; i++) {
        int t = n->inputs[i];
        if (t < 0)
            continue;
        const fg_tensor *x = &em->g->tensors[t];
        if (x->rank != em->ot->rank || (x->rank == 4 && x->layout != em->ot->layout))
            return 0;
        for (int j = 0; j < x->rank; j++)
            if (x->shape[j] != em->ot->shape[j])
                return 0;
    }
    return 1;
}

/* flatten: out (row, col) reads x at (row, col decomposed over x's axes 1..). */
static fg_status emit_flatten(fg_emitter *em, const fg_node *nd, fg_buf *loads, fg_buf *expr)
{
    int t = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[t];
    if (em->ot->rank != 2 || x->rank < 2)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "flatten of rank %d to rank %d", x->rank, em->ot->rank);
    static const char *const names[] = {"row", "x1", "x2", "x3", "x4", "x5"};
    const char *xc[FG_MAX_RANK];
    for (int a = 0; a < x->rank; a++)
        xc[a] = a > 0 && x->shape[a] == 1 ? "0" : names[a];   /* size-1 axes read index 0 */
    for (int a = 1; a < x->rank; a++) {
        if (x->shape[a] == 1)
            continue;
        fg_buf_iprintf(loads, 2, "const fg_i64 %s = col", xc[a]);
        if (a < x->rank - 1) {
            fg_buf_put(loads, " / (");
            int first = 1;
            for (int q = a + 1; q < x->rank; q++) {
                if (x->shape[q] == 1)
                    continue;
                if (!first)
                    fg_buf_put(loads, " * ");
                first = 0;
                fg_em_dim(em, t, q, loads);
            }
            if (first)
                fg_buf_put(loads, "1");
            fg_buf_put(loads, ")");
        }
        if (a > 1) {
            fg_buf_put(loads, " % ");
            fg_em_dim(em, t, a, loads);
        }
        fg_buf_printf(loads, ";  // %s axis %d\n", x->name, a);
    }
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, t, 0, xc, x->rank, x->shape, &off);
    if (st == FG_OK) {
        fg_buf_iprintf(loads, 2, "const float in_x = fg_load(p.%s + %s);  // %s\n", fg_em_tensor(em, t, 0), off.s,
                       x->name);
        fg_buf_put(expr, "in_x");
    }
    fg_buf_free(&off);
    return st;
}

fg_status fg_emit_pointwise(fg_emitter *em)
{
    const fg_node *nd = &em->g->nodes[em->main_node];
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    int64_t numel = fg_em_numel(em, em->out);
    fg_status st;

    const char *keys[] = {"threads"};
    int64_t threads = 256;
    if ((st = fg_em_tile_params(em, keys, 1, &threads)) != FG_OK)
        return st;
    if (threads < 32 || threads > 1024 || threads % 32)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: threads = %" PRId64 " (want a multiple of 32 in 32..1024)",
                           threads);
    em->template_file = "pointwise.cuh";
    em->threads = (unsigned)threads;

    int is_flatten = nd->op->kind == FG_OPK_FLATTEN;
    if (!is_flatten && nd->op->kind != FG_OPK_POINTWISE && nd->op->kind != FG_OPK_BATCH_NORM)
        return fg_em_error(em, FG_ERR_INPUT, "template pointwise cannot compute node '%s' (op %s, kind %s)", nd->name,
                           nd->op->name, fg_op_kind_name(nd->op->kind));
    int vec4 = !is_flatten && numel % 4 == 0 && full_size_inputs(em, em->main_node);

    fg_buf loads = {0}, expr = {0}, coord = {0}, args = {0};
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&args, "%s%s", i ? ", " : "", coords[i]);
    fg_em_decompose(em, em->out, "i", coords, vec4 ? 3 : 2, &coord);
    fg_em_tensor(em, em->out, 1);
    if (is_flatten) {
        st = emit_flatten(em, nd, &loads, &expr);
    } else if (vec4) {
        /* every input is read with the output's index: 4 at a time */
        for (int i = 0; i < nd->ninputs; i++) {
            int t = nd->inputs[i];
            if (t < 0)
                continue;
            fg_buf_iprintf(&loads, 2, "float in_%s[4];\n", nd->op->inputs[i].name);
            fg_buf_iprintf(&loads, 2, "fg_load4(p.%s + q * 4, in_%s);  // %s\n", fg_em_tensor(em, t, 0),
                           nd->op->inputs[i].name, em->g->tensors[t].name);
        }
        em->vec_names = 1;
        st = fg_em_apply(em, em->main_node, NULL, coords, 2, NULL, &expr);
        em->vec_names = 0;
    } else {
        st = fg_em_apply(em, em->main_node, NULL, coords, 2, &loads, &expr);
    }
    if (st == FG_OK) {
        fg_em_shape(em, "NUMEL", numel);
        fg_em_set(em, "OUT", "%s", fg_em_tensor(em, em->out, 1));
        fg_em_set(em, "VEC4", "%d", vec4);
        fg_em_set(em, "COORDS", "%s", coord.len ? coord.s : "");
        fg_em_set(em, "COORD_ARGS", "%s", args.s);
        /* strip the trailing newline: the template line supplies it */
        if (loads.len && loads.s[loads.len - 1] == '\n')
            loads.s[--loads.len] = 0;
        if (coord.len && coord.s[coord.len - 1] == '\n')
            fg_em_set(em, "COORDS", "%.*s", (int)coord.len - 1, coord.s);
        fg_em_set(em, "LOADS", "%s", vec4 ? "" : (loads.s ? loads.s : ""));
        fg_em_set(em, "LOADS4", "%s", vec4 ? loads.s : "");
        fg_em_set(em, "COMPUTE", "%s", expr.s ? expr.s : "0.0f");
        fg_em_set(em, "COMPUTE4", "%s", expr.s ? expr.s : "0.0f");
        int64_t work = vec4 ? numel / 4 : numel;
        int64_t blocks = (work + threads - 1) / threads;
        if (blocks > 8192)
            blocks = 8192;
        if (blocks < 1)
            blocks = 1;
        em->k->grid[0] = (unsigned)blocks;
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
    }
    fg_buf_free(&loads);
    fg_buf_free(&expr);
    fg_buf_free(&coord);
    fg_buf_free(&args);
    return st;
}

/* Capability check (template.h): a flatten main node maps rank >= 2 to rank 2. */
int fg_check_pointwise(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    if (nd->op->kind == FG_OPK_FLATTEN) {
        const fg_tensor *x = &c->g->tensors[nd->inputs[0]], *y = &c->g->tensors[nd->output];
        if (x->rank < 2 || y->rank != 2) {
            snprintf(why, whysz, "flatten of rank %d to rank %d", x->rank, y->rank);
            return 0;
        }
    }
    return 1;
}
