/*
 * index_map.c -- composed index maps of reshape / transpose chains (contract
 * in index_map.h): the backward map through each node, the offset helper of
 * an anchor that reads its input through the group's input map.  Which
 * templates can take one is a field of their rows (fg_template.input_map).
 */
#include "index_map.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "index_kinds.h"
#include "kind.h"


/* Appends dimension d of node nd's input 0 (literal or parameter). */
static void in_dim(fg_emitter *em, const fg_node *nd, int d, char *out, size_t size)
{
    fg_buf b = {0};
    fg_em_group_dim(em, nd->inputs[0], d, &b);
    snprintf(out, size, "%s", b.s ? b.s : "1");
    fg_buf_free(&b);
}

/* A slice, expand or pad node mapped backwards (see map_back); a constant
 * pad appends its in-range condition and value to masks. */
static void map_moves(fg_emitter *em, const fg_node *nd, int stage, int ind, char oc[][16], char ic[][16],
                      fg_imap_mask *masks, int *nmasks, fg_buf *b)
{
    const fg_tensor *y = &em->g->tensors[nd->output], *x = &em->g->tensors[nd->inputs[0]];
    char dim[48];
    if (nd->op->kind == FG_OPK_SLICE) {
        const fg_attr_value *st = fg_node_attr(nd, "starts"), *sp = fg_node_attr(nd, "steps");
        fg_buf_iprintf(b, ind, "// %s: slice, input coordinate start + step * output coordinate\n", nd->name);
        for (int d = 0; d < x->rank; d++) {
            if (x->shape[d] == 1 || (st->ints[d] == 0 && sp->ints[d] == 1)) {
                snprintf(ic[d], 16, "%s", x->shape[d] == 1 ? "0" : oc[d]);
                continue;
            }
            snprintf(ic[d], 16, "q%d_%d", stage, d);
            if (y->shape[d] == 1)
                fg_buf_iprintf(b, ind, "const fg_i64 %s = %" PRId64 ";\n", ic[d], st->ints[d]);
            else
                fg_buf_iprintf(b, ind, "const fg_i64 %s = %" PRId64 " + (%" PRId64 ") * %s;\n", ic[d], st->ints[d],
                               sp->ints[d], oc[d]);
        }
        return;
    }
    if (nd->op->kind == FG_OPK_EXPAND) {
        fg_buf_iprintf(b, ind, "// %s: expand, a size-1 input axis reads 0, a tiled one the coordinate modulo "
                               "its size\n", nd->name);
        for (int d = 0; d < x->rank; d++) {
            int od = d + y->rank - x->rank;
            if (x->shape[d] == 1 || x->shape[d] == y->shape[od]) {
                snprintf(ic[d], 16, "%s", x->shape[d] == 1 ? "0" : oc[od]);
                continue;
            }
            snprintf(ic[d], 16, "q%d_%d", stage, d);
            in_dim(em, nd, d, dim, sizeof dim);
            fg_buf_iprintf(b, ind, "const fg_i64 %s = %s %% %s;\n", ic[d], oc[od], dim);
        }
        return;
    }
    /* pad */
    const fg_attr_value *p = fg_node_attr(nd, "pads");
    int mode = fg_pad_mode_of(nd);
    fg_buf cond = {0};
    fg_buf_iprintf(b, ind, "// %s: pad (%s), input coordinate output coordinate - pad begin\n", nd->name,
                   fg_pad_mode_names[mode < 0 ? 0 : mode]);
    for (int d = 0; d < x->rank; d++) {
        int64_t beg = p->ints[d], end = p->ints[d + x->rank];
        if (beg == 0 && end == 0) {
            snprintf(ic[d], 16, "%s", x->shape[d] == 1 ? "0" : oc[d]);
            continue;
        }
        char r[16];
        snprintf(r, sizeof r, "r%d_%d", stage, d);
        int reach = mode == FG_PAD_CONSTANT && (beg > 0 || end > 0);   /* reads the pad value somewhere */
        if (x->shape[d] == 1 && !reach) {
            snprintf(ic[d], 16, "0");   /* every source is coordinate 0 */
            continue;
        }
        in_dim(em, nd, d, dim, sizeof dim);
        fg_buf_iprintf(b, ind, "const fg_i64 %s = %s - (%" PRId64 ");\n", r, oc[d], beg);
        if (x->shape[d] == 1)
            snprintf(ic[d], 16, "0");   /* constant mode's condition only */
        else if (mode == FG_PAD_REFLECT || mode == FG_PAD_WRAP || mode == FG_PAD_EDGE || mode == FG_PAD_CONSTANT) {
            snprintf(ic[d], 16, "q%d_%d", stage, d);
            if (mode == FG_PAD_REFLECT)
                fg_buf_iprintf(b, ind, "const fg_i64 %s = %s < 0 ? -%s : %s >= %s ? 2 * (%s - 1) - %s : %s;\n", ic[d],
                               r, r, r, dim, dim, r, r);
            else if (mode == FG_PAD_WRAP)
                fg_buf_iprintf(b, ind, "const fg_i64 %s = ((%s %% %s) + %s) %% %s;\n", ic[d], r, dim, dim, dim);
            else   /* edge, and constant mode's in-range read */
                fg_buf_iprintf(b, ind, "const fg_i64 %s = %s < 0 ? 0 : %s >= %s ? %s - 1 : %s;\n", ic[d], r, r, dim,
                               dim, r);
        }
        if (reach && beg > 0)   /* the sides that reach outside the input */
            fg_buf_printf(&cond, "%s%s >= 0", cond.len ? " && " : "", r);
        if (reach && end > 0)
            fg_buf_printf(&cond, "%s%s < %s", cond.len ? " && " : "", r, dim);
    }
    if (cond.len && masks && *nmasks < FG_IMAP_MAX_MASKS) {
        fg_imap_mask *m = &masks[(*nmasks)++];
        snprintf(m->name, sizeof m->name, "in%d", stage);
        m->value = fg_node_attr_num(nd, "value", 0.0);
        fg_buf_iprintf(b, ind, "const bool %s = %s;  // inside %s\n", m->name, cond.s, x->name);
    } else if (cond.len) {
        fg_em_fail(em, "%s: a constant pad in an input map or more than %d in one copy", nd->name,
                   FG_IMAP_MAX_MASKS);
    }
    fg_buf_free(&cond);
}

/* One reshape or transpose node of the chain, mapped backwards: from the
 * coordinates of its output (oc, rank of its output) to those of its input
 * (names written to ic), emitting the locals it needs.  stage numbers the
 * locals; lin, when not NULL, is the output's logical index. */
static void map_back(fg_emitter *em, int node, int stage, const char *lin_given, int ind, char oc[][16],
                     char ic[][16], fg_imap_mask *masks, int *nmasks, fg_buf *b)
{
    const fg_node *nd = &em->g->nodes[node];
    const fg_tensor *y = &em->g->tensors[nd->output], *x = &em->g->tensors[nd->inputs[0]];
    if (fg_kind(nd->op->kind)->traits & FG_KIND_MOVES) {
        map_moves(em, nd, stage, ind, oc, ic, masks, nmasks, b);
        return;
    }
    if (fg_kind(nd->op->kind)->traits & FG_KIND_AXES) {
        const fg_attr_value *pm = fg_node_attr(nd, "perm");
        for (int d = 0; d < y->rank; d++)
            snprintf(ic[pm->ints[d]], 16, "%s", x->shape[pm->ints[d]] == 1 ? "0" : oc[d]);
        fg_buf_iprintf(b, ind, "// %s: transpose, input axis perm[k] is output axis k\n", nd->name);
        return;
    }
    char lin[16], base[16];
    snprintf(lin, sizeof lin, "lin%d", stage);
    snprintf(base, sizeof base, "s%d_", stage);
    if (lin_given) {
        fg_buf_iprintf(b, ind, "const fg_i64 %s = %s;  // %s: logical index (row-major output)\n", lin, lin_given,
                       nd->name);
    } else {
        /* Horner: ((c0 * D1 + c1) * D2 + c2) ... */
        fg_buf e = {0};
        fg_buf_put(&e, oc[0]);
        for (int d = 1; d < y->rank; d++) {
            fg_buf nx = {0};
            fg_buf_printf(&nx, "(%s) * ", e.s);
            fg_em_group_dim(em, nd->output, d, &nx);
            fg_buf_printf(&nx, " + %s", oc[d]);
            fg_buf_free(&e);
            e = nx;
        }
        fg_buf_iprintf(b, ind, "const fg_i64 %s = %s;  // %s: logical index\n", lin, e.s, nd->name);
        fg_buf_free(&e);
    }
    fg_em_lin_coords(em, nd->inputs[0], lin, base, ic, ind, b);
}

void fg_imap_compose(fg_emitter *em, const int *nodes, int n, const char *const *oc, const char *out_lin, int ind,
                     char ic[][16], fg_buf *b)
{
    fg_imap_compose_masked(em, nodes, n, oc, out_lin, ind, ic, NULL, NULL, b);
}

void fg_imap_compose_masked(fg_emitter *em, const int *nodes, int n, const char *const *oc, const char *out_lin,
                            int ind, char ic[][16], fg_imap_mask *masks, int *nmasks, fg_buf *b)
{
    char names[2][FG_MAX_RANK][16];
    const fg_tensor *y = &em->g->tensors[em->g->nodes[nodes[n - 1]].output];
    for (int d = 0; d < y->rank; d++)
        snprintf(names[0][d], 16, "%s", y->shape[d] == 1 ? "0" : oc[d]);
    int cur = 0;
    for (int k = n - 1; k >= 0; k--) {
        const char *lin = k == n - 1 && out_lin && fg_em_row_major(em, em->out) ? out_lin : NULL;
        map_back(em, nodes[k], k, lin, ind, names[cur], names[1 - cur], masks, nmasks, b);
        cur = 1 - cur;
    }
    const fg_tensor *x = &em->g->tensors[em->g->nodes[nodes[0]].inputs[0]];
    for (int d = 0; d < x->rank; d++)
        snprintf(ic[d], 16, "%s", names[cur][d]);
}

int fg_imap_source(const fg_emitter *em, int t)
{
    const fg_group *grp = em->grp;
    if (grp->nmap <= 0 || em->g->nodes[grp->nodes[grp->nmap - 1]].output != t)
        return t;
    return em->g->nodes[grp->nodes[0]].inputs[0];
}

fg_status fg_imap_offset_fn(fg_emitter *em, const char *fname, int t, const char *const *coords)
{
    const fg_group *grp = em->grp;
    if (fg_imap_source(em, t) == t)
        return fg_em_offset_fn(em, fname, t, coords);
    const fg_tensor *x = &em->g->tensors[t];
    int src = em->g->nodes[grp->nodes[0]].inputs[0];
    const fg_tensor *s = &em->g->tensors[src];
    fg_buf body = {0}, off = {0};
    char ic[FG_MAX_RANK][16];
    fg_imap_compose(em, grp->nodes, grp->nmap, coords, NULL, 1, ic, &body);
    const char *sc[FG_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
        sc[d] = ic[d];
    fg_status st = fg_em_offset(em, src, 0, sc, s->rank, s->shape, &off);
    if (st == FG_OK) {
        fg_buf_printf(&em->helpers, "// offset of %s %s at the logical coordinates (", s->name,
                      fg_layout_name(s->layout));
        for (int i = 0; i < x->rank; i++)
            fg_buf_printf(&em->helpers, "%s%s", i ? ", " : "", coords[i]);
        fg_buf_printf(&em->helpers, ") of %s: the input map", x->name);
        for (int i = 0; i < grp->nmap; i++) {
            const fg_node *nd = &em->g->nodes[grp->nodes[i]];
            fg_buf_printf(&em->helpers, "%s%s (%s)", i ? ", " : " ", nd->name, nd->op->name);
        }
        fg_buf_printf(&em->helpers, " composed;\n// %s is never stored\n", x->name);
        fg_buf_printf(&em->helpers, "FG_DEVICE fg_i64 %s(const fg_params_%s &p", fname, em->k->name);
        for (int i = 0; i < x->rank; i++)
            fg_buf_printf(&em->helpers, ", fg_i64 %s", coords[i]);
        fg_buf_put(&em->helpers, ")\n{\n");
        for (int i = 0; i < x->rank; i++)
            if (x->shape[i] == 1)
                fg_buf_printf(&em->helpers, "    (void)%s;\n", coords[i]);
        fg_buf_put(&em->helpers, body.s ? body.s : "");
        fg_buf_printf(&em->helpers, "    return %s;\n}\n\n", off.s);
    }
    fg_buf_free(&body);
    fg_buf_free(&off);
    return st;
}
