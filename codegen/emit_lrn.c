/*
 * emit_lrn.c -- the lrn family (templates/lrn.cuh): ONNX's local response
 * normalization across channels, one thread per output element.  The
 * channel window of c is [c - floor((size-1)/2), c + ceil((size-1)/2)]
 * clipped to the channels (axes.h, fg_lrn_window); alpha is divided by
 * size, as ONNX defines it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* A C float literal of v ("1.0f", "0.0001f", "2.5e-05f"). */
static void float_lit(fg_emitter *em, const char *name, double v)
{
    char b[48];
    snprintf(b, sizeof b, "%.9g", v);
    fg_em_set(em, name, "%s%sf", b, strpbrk(b, ".e") ? "" : ".0");
}

static fg_status emit_lrn(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[xt], *y = em->ot;
    if (x->rank < 2 || y->rank != x->rank)
        return fg_em_error(em, FG_ERR_INPUT, "lrn '%s' needs an input [N, C, ...] and an output of its shape",
                           nd->name);
    int64_t threads, size = (int64_t)fg_node_attr_num(nd, "size", 1);
    fg_status st = fg_em_threads(em, 256, &threads);
    if (st != FG_OK)
        return st;
    int rank = y->rank;
    const char *const *coords = fg_em_coord_names(rank);
    fg_buf coord = {0}, args = {0}, off = {0}, offq = {0};
    fg_em_tensor(em, em->out, 1);
    fg_em_decompose(em, em->out, "i", coords, 2, &coord);
    if (coord.len && coord.s[coord.len - 1] == '\n')
        coord.s[--coord.len] = 0;
    const char *xc[FG_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        fg_buf_printf(&args, "%s%s", d ? ", " : "", coords[d]);
        xc[d] = coords[d];
    }
    st = fg_em_offset(em, xt, 0, xc, rank, x->shape, &off);
    xc[1] = "q";
    if (st == FG_OK)
        st = fg_em_offset(em, xt, 0, xc, rank, x->shape, &offq);
    if (st == FG_OK) {
        fg_em_shape(em, "NUMEL", fg_em_numel(em, em->out));
        fg_em_shape(em, "C", x->shape[1]);
        fg_em_shape(em, "BEFORE", (size - 1) / 2);
        fg_em_shape(em, "AFTER", size / 2);
        fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
        fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
        fg_em_set(em, "COORDS", "%s", coord.s ? coord.s : "");
        fg_em_set(em, "CH", "%s", coords[1]);
        fg_em_set(em, "OFF", "%s", off.s);
        fg_em_set(em, "OFF_Q", "%s", offq.s);
        fg_em_set(em, "COORD_ARGS", "%s", args.s);
        float_lit(em, "BIAS", fg_node_attr_num(nd, "bias", 1.0));
        float_lit(em, "ALPHA", fg_node_attr_num(nd, "alpha", 1e-4) / (double)size);
        float_lit(em, "BETA", fg_node_attr_num(nd, "beta", 0.75));
        em->template_file = "lrn.cuh";
        fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    }
    fg_buf_free(&coord);
    fg_buf_free(&args);
    fg_buf_free(&off);
    fg_buf_free(&offq);
    return st;
}

/* Capability check (fg_template.check): an lrn over [N, C, ...]. */
static int check_lrn(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    if (c->g->tensors[nd->inputs[0]].rank < 2) {
        snprintf(why, whysz, "lrn computes an lrn node over [N, C, ...]");
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "lrn", .family = "lrn", .order = 70, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_LRN,
     .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads, .check = check_lrn, .emit = emit_lrn,
     .summary = "local response normalization across channels, one thread per output element"},
};
FG_TEMPLATE_FAMILY(lrn, rows);
