/*
 * emit_copy.c -- the copy family (templates/copy.cuh): a re-indexing copy
 * for reshape, transpose and concat, one thread per output element in
 * memory order.
 *
 * reshape keeps the logical (row-major) element order: the output element's
 * logical index is decomposed over the input's logical shape.  When both
 * tensors are stored row-major that is the memory index itself (a plain
 * copy); an NHWC rank-4 tensor on either side re-indexes.  transpose reads
 * input axis perm[k] at output coordinate k.  A group of several reshapes
 * and transposes (rules/copy_chain.yaml: ShuffleNet's channel shuffle)
 * composes their maps, last node to first, into one index remap
 * (index_map.c); the tensors between them are never stored.  slice, expand
 * and pad (index_kinds.h) map each axis on their own and chain the same
 * way; a constant pad reads its value where the element lies outside.  concat picks
 * the input whose slice holds the coordinate along the axis.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "concat_inplace.h"
#include "emit_impl.h"
#include "expr.h"
#include "index_map.h"
#include "kind.h"
#include "template.h"

/* ---- the copy family ----------------------------------------------------------- */

static int is_copy_kind(fg_op_kind k)
{
    return k == FG_OPK_RESHAPE || k == FG_OPK_TRANSPOSE || k == FG_OPK_CONCAT || (fg_kind(k)->traits & FG_KIND_MOVES);
}

/* `float v = <input t at coordinates xc>;` at indentation ind. */
static fg_status load_at(fg_emitter *em, int t, const char *const *xc, int ind, fg_buf *b)
{
    const fg_tensor *x = &em->g->tensors[t];
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, t, 0, xc, x->rank, x->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, ind, "v = fg_load(p.%s + %s);  // %s\n", fg_em_tensor(em, t, 0), off.s, x->name);
    fg_buf_free(&off);
    return st;
}

/* reshape and transpose nodes of the group, composed: the output element's
 * coordinates are mapped back through each node, last to first, to the
 * first node's input.  One reshape between row-major tensors reads
 * element i itself. */
static fg_status load_chain(fg_emitter *em, int ncopy, fg_buf *b)
{
    const fg_group *grp = em->grp;
    const fg_node *first = &em->g->nodes[grp->nodes[0]];
    int t = first->inputs[0];
    if (ncopy == 1 && first->op->kind == FG_OPK_RESHAPE && fg_em_row_major(em, t) &&
        fg_em_row_major(em, em->out)) {
        fg_buf_iprintf(b, 2, "v = fg_load(p.%s + i);  // %s: the same row-major order\n", fg_em_tensor(em, t, 0),
                       em->g->tensors[t].name);
        return FG_OK;
    }
    char names[FG_MAX_RANK][16];
    fg_imap_mask masks[FG_IMAP_MAX_MASKS];
    int nmasks = 0;
    fg_imap_compose_masked(em, grp->nodes, ncopy, fg_em_coord_names(em->ot->rank), "i", 2, names, masks, &nmasks,
                           b);
    const fg_tensor *x = &em->g->tensors[t];
    const char *xc[FG_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        xc[d] = names[d];
    /* constant pads: the value where the element lies outside a pad's input, the nearest pad first */
    for (int m = 0; m < nmasks; m++) {
        char lit[32];
        fg_expr_float_literal(masks[m].value, lit);
        fg_buf_iprintf(b, 2, "%sif (!%s) {\n", m ? "} else " : "", masks[m].name);
        fg_buf_iprintf(b, 3, "v = %s;\n", lit);
    }
    if (nmasks)
        fg_buf_iprintf(b, 2, "} else {\n");
    fg_status st = load_at(em, t, xc, nmasks ? 3 : 2, b);
    if (nmasks)
        fg_buf_iprintf(b, 2, "}\n");
    return st;
}

static fg_status load_concat(fg_emitter *em, const fg_node *nd, fg_buf *b)
{
    int axis = fg_concat_axis(nd, em->ot);
    const char *const *oc = fg_em_coord_names(em->ot->rank);
    int64_t at = 0;
    int last = 0;
    for (int i = 0; i < nd->ninputs && nd->inputs[i] >= 0; i++)
        last = i;
    fg_status st = FG_OK;
    for (int i = 0; i <= last && st == FG_OK; i++) {
        int t = nd->inputs[i];
        const fg_tensor *x = &em->g->tensors[t];
        int64_t len = x->shape[axis];
        if (i == 0)
            fg_buf_iprintf(b, 2, "if (%s < %" PRId64 ") {\n", oc[axis], at + len);
        else if (i < last)
            fg_buf_iprintf(b, 2, "} else if (%s < %" PRId64 ") {\n", oc[axis], at + len);
        else
            fg_buf_iprintf(b, 2, "} else {\n");
        const char *xc[FG_MAX_RANK];
        for (int d = 0; d < x->rank; d++)
            xc[d] = x->shape[d] == 1 ? "0" : oc[d];
        if (len > 1 && at > 0) {
            fg_buf_iprintf(b, 3, "const fg_i64 ca = %s - %" PRId64 ";  // along %s\n", oc[axis], at, x->name);
            xc[axis] = "ca";
        }
        st = load_at(em, t, xc, 3, b);
        at += len;
    }
    fg_buf_iprintf(b, 2, "}\n");
    return st;
}

/* A concat some of whose inputs their producers wrote in place
 * (concat_inplace.h): its slices are contiguous, so each copied input is one
 * range of the output.  templates/concat_rest.cuh walks the copied elements
 * packed one input after another; COPY maps packed index i to its input and
 * to its place in the output. */
static fg_status emit_concat_rest(fg_emitter *em, const fg_node *nd, int64_t threads)
{
    /* elements per index of the concat axis: the stored axes after it
     * (NHWC rank 4 is stored N, H, W, C) */
    static const int nhwc[4] = {0, 2, 3, 1};
    int axis = fg_concat_axis(nd, em->ot), nhwc4 = em->ot->rank == 4 && em->ot->layout == FG_LAYOUT_NHWC, pos = 0;
    while (pos < em->ot->rank && (nhwc4 ? nhwc[pos] : pos) != axis)
        pos++;
    int64_t inner = 1;
    for (int k = pos + 1; k < em->ot->rank; k++)
        inner *= em->ot->shape[nhwc4 ? nhwc[k] : k];
    const char *out = fg_em_tensor(em, em->out, 1);
    fg_buf copy = {0}, inplace = {0};
    int64_t at = 0, packed = 0;
    int ncopied = 0, last = -1;
    for (int i = 0; i < nd->ninputs && nd->inputs[i] >= 0; i++)
        if (!fg_concat_slot_inplace(em->plan, em->grp->nodes[0], i))
            last = i;
    for (int i = 0; i < nd->ninputs && nd->inputs[i] >= 0; i++) {
        int t = nd->inputs[i];
        const fg_tensor *x = &em->g->tensors[t];
        int64_t len = x->shape[axis] * inner;
        if (fg_concat_slot_inplace(em->plan, em->grp->nodes[0], i)) {
            fg_buf_printf(&inplace, "%s%s (input %d)", inplace.len ? ", " : "", x->name, i);
            at += len;
            continue;
        }
        char endn[24], atn[24];
        snprintf(endn, sizeof endn, "END%d", ncopied);
        snprintf(atn, sizeof atn, "AT%d", ncopied);
        fg_em_shape(em, endn, packed + len);
        fg_em_shape(em, atn, at);
        const char *src = fg_em_tensor(em, t, 0);
        if (ncopied == 0 && i == last)
            fg_buf_iprintf(&copy, 2, "{\n");
        else if (ncopied == 0)
            fg_buf_iprintf(&copy, 2, "if (i < %s) {\n", endn);
        else if (i < last)
            fg_buf_iprintf(&copy, 2, "} else if (i < %s) {\n", endn);
        else
            fg_buf_iprintf(&copy, 2, "} else {\n");
        if (ncopied == 0) {
            fg_buf_iprintf(&copy, 3, "fg_store(p.%s + %s + i, fg_load(p.%s + i));  // %s: input %d\n", out, atn, src,
                           x->name, i);
        } else {
            fg_buf_iprintf(&copy, 3, "const fg_i64 j = i - END%d;\n", ncopied - 1);
            fg_buf_iprintf(&copy, 3, "fg_store(p.%s + %s + j, fg_load(p.%s + j));  // %s: input %d\n", out, atn,
                           src, x->name, i);
        }
        packed += len;
        at += len;
        ncopied++;
    }
    fg_buf_iprintf(&copy, 2, "}");
    fg_buf_printf(&em->notes, "//   in place:  %s (written by their producers; copied here: the rest)\n",
                  inplace.s ? inplace.s : "-");
    fg_em_shape(em, "NUMEL", packed);
    fg_em_set(em, "COPY", "%s", copy.s);
    em->template_file = "concat_rest.cuh";
    fg_em_launch_1d(em, packed, threads);
    fg_buf_free(&copy);
    fg_buf_free(&inplace);
    return FG_OK;
}

static fg_status emit_copy(fg_emitter *em)
{
    const fg_node *nd = &em->g->nodes[em->main_node];
    fg_op_kind k = nd->op->kind;
    int64_t threads;
    fg_status st = fg_em_threads(em, 256, &threads);
    if (st != FG_OK)
        return st;
    if (k == FG_OPK_CONCAT && em->grp->nnodes == 1)
        for (int i = 0; i < nd->ninputs && nd->inputs[i] >= 0; i++)
            if (fg_concat_slot_inplace(em->plan, em->grp->nodes[0], i))
                return emit_concat_rest(em, nd, threads);
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    fg_buf coord = {0}, load = {0}, args = {0};
    fg_em_tensor(em, em->out, 1);
    fg_em_decompose(em, em->out, "i", coords, 2, &coord);
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&args, "%s%s", i ? ", " : "", coords[i]);
    fg_buf_iprintf(&load, 2, "float v;\n");
    int ncopy = 0;   /* the leading re-indexing nodes; element-wise nodes after them are the epilogue */
    while (ncopy < em->grp->nnodes && is_copy_kind(em->g->nodes[em->grp->nodes[ncopy]].op->kind))
        ncopy++;
    st = k == FG_OPK_CONCAT ? load_concat(em, nd, &load) : load_chain(em, ncopy, &load);
    if (st == FG_OK) {
        if (coord.len && coord.s[coord.len - 1] == '\n')
            coord.s[--coord.len] = 0;
        if (load.len && load.s[load.len - 1] == '\n')
            load.s[--load.len] = 0;
        fg_em_shape(em, "NUMEL", fg_em_numel(em, em->out));
        fg_em_set(em, "OUT", "%s", fg_em_tensor(em, em->out, 1));
        fg_em_set(em, "COORDS", "%s", coord.s ? coord.s : "");
        fg_em_set(em, "LOAD", "%s", load.s);
        fg_em_set(em, "COORD_ARGS", "%s", args.s);
        em->template_file = "copy.cuh";
        fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    }
    fg_buf_free(&coord);
    fg_buf_free(&load);
    fg_buf_free(&args);
    return st;
}

/* Capability check (template.h): a reshape, transpose or concat, or a chain
 * of reshapes and transposes (composed into one index map), then any
 * element-wise nodes (the epilogue). */
static int check_copy(const fg_tcand *c, char *why, size_t whysz)
{
    int ncopy = 0;
    while (ncopy < c->nnodes && is_copy_kind(c->g->nodes[c->nodes[ncopy]].op->kind))
        ncopy++;
    for (int i = 0; i < c->nnodes; i++) {
        fg_op_kind k = c->g->nodes[c->nodes[i]].op->kind;
        int ok = i < ncopy ? k != FG_OPK_CONCAT || ncopy == 1
                           : fg_kind(k)->role == FG_ROLE_ELEMENTWISE;
        if (ncopy == 0 || !ok) {
            snprintf(why, whysz, "copy computes a reshape, transpose, concat, slice, expand or pad, or a chain of "
                                 "reshapes, transposes, slices, expands and pads, then element-wise ops; not %s at "
                                 "node %d", fg_op_kind_name(k), i);
            return 0;
        }
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "copy", .family = "copy", .order = 50, FG_TEMPLATE_LIMITS,
     .kinds = (1u << FG_OPK_RESHAPE) | (1u << FG_OPK_TRANSPOSE) | (1u << FG_OPK_CONCAT) | (1u << FG_OPK_SLICE) |
              (1u << FG_OPK_EXPAND) | (1u << FG_OPK_PAD),
     .dtypes = FG_DTYPES_ANY,
     .tiles = fg_tile_threads, .check = check_copy, .emit = emit_copy,
     .summary = "re-indexing copy (reshape, transpose, concat, slice, expand, pad), one thread per output element"},
};
FG_TEMPLATE_FAMILY(copy, rows);
