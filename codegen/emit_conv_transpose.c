/*
 * emit_conv_transpose.c -- the conv_transpose family
 * (templates/conv_transpose.cuh): a transposed 2-D convolution as a direct
 * gather, one thread per output element, every tensor addressed in its own
 * layout.  The bias and any fused activation or residual run in the shared
 * epilogue (emit_epilogue.c), as for conv2d; the geometry is
 * conv_transpose.h's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "conv_transpose.h"
#include "emit_impl.h"
#include "template.h"

static fg_status emit_convt(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0], wt = nd->inputs[1];
    fg_convt_geom d;
    char why[240];
    if (fg_convt_geom_of(nd, &em->g->tensors[xt], &em->g->tensors[wt], NULL, &d, why, sizeof why) != 0 ||
        em->ot->rank != 4)
        return fg_em_error(em, FG_ERR_INPUT, "conv_transpose2d '%s': %s", nd->name, why);
    fg_status st;
    int64_t threads;
    if ((st = fg_em_threads(em, 128, &threads)) != FG_OK)
        return st;
    fg_em_shape(em, "N", d.N);
    fg_em_shape(em, "H", d.H);
    fg_em_shape(em, "W", d.W);
    fg_em_shape(em, "K", d.K);
    fg_em_shape(em, "OH", d.OH);
    fg_em_shape(em, "OW", d.OW);
    fg_em_shape(em, "R", d.R);
    fg_em_shape(em, "S", d.S);
    fg_em_shape(em, "Cg", d.Cg);
    fg_em_shape(em, "Kg", d.Kg);
    fg_em_shape(em, "SH", d.stride[0]);
    fg_em_shape(em, "SW", d.stride[1]);
    fg_em_shape(em, "PH", d.pad_beg[0]);
    fg_em_shape(em, "PW", d.pad_beg[1]);
    fg_em_shape(em, "DH", d.dilation[0]);
    fg_em_shape(em, "DW", d.dilation[1]);
    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "WGT", "%s", fg_em_tensor(em, wt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    static const char *const xc[] = {"n", "c", "h", "w"};
    static const char *const wc[] = {"c", "k", "r", "s"};
    static const char *const yc[] = {"n", "k", "oh", "ow"};
    if ((st = fg_em_offset_fn(em, "off_x", xt, xc)) != FG_OK || (st = fg_em_offset_fn(em, "off_w", wt, wc)) != FG_OK ||
        (st = fg_em_offset_fn(em, "off_y", em->out, xc)) != FG_OK)
        return st;
    fg_buf coords = {0};
    fg_em_decompose(em, em->out, "i", yc, 2, &coords);
    if (coords.len)
        coords.s[--coords.len] = 0;
    fg_em_set(em, "COORDS", "%s", coords.s);
    fg_buf_free(&coords);
    em->template_file = "conv_transpose.cuh";
    fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    return FG_OK;
}

/* Capability check (fg_template.check): the node's geometry is valid. */
static int check_convt(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    fg_convt_geom d;
    return fg_convt_geom_of(nd, &c->g->tensors[nd->inputs[0]], &c->g->tensors[nd->inputs[1]], NULL, &d, why,
                            whysz) == 0;
}

static const fg_template rows[] = {
    {.name = "conv_transpose", .family = "conv_transpose", .order = 96, FG_TEMPLATE_LIMITS,
     .kinds = 1u << FG_OPK_CONV_TRANSPOSE2D, .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads, .check = check_convt,
     .emit = emit_convt, .map_refusal = "conv_transpose reads its input at gathered taps only",
     .summary = "transposed 2-D convolution, a direct gather per output element"},
};
FG_TEMPLATE_FAMILY(conv_transpose, rows);
