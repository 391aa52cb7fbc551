/*
 * emit_resize.c -- the resize family (templates/resize.cuh): nearest,
 * linear and cubic resize over H and W, one thread per output element,
 * every tensor addressed in its own layout (NCHW or NHWC).  The coordinate
 * transform of each axis is emitted as a float expression of the output
 * coordinate, computed as onnxruntime computes it (float arithmetic, the
 * scale divided by); the meaning of the attributes is resize.h's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "expr.h"
#include "resize.h"
#include "template.h"

/* The float expression of the input coordinate of output coordinate `o`
 * along axis a (the input and output sizes are the constants li, lo). */
static void source_expr(const fg_resize_geom *d, int a, const char *o, const char *li, const char *lo, fg_buf *b)
{
    char s[48], off[48];
    fg_expr_float_literal((double)(float)d->scale[a], s);
    switch (d->coord) {
    case FG_RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adj = (double)(float)((double)d->out[a] / (d->scale[a] * (double)d->in[a]));
        fg_expr_float_literal((double)(float)((double)d->in[a] / 2.0 * (1.0 - adj)), off);
        fg_buf_printf(b, "%s + ((float)%s + 0.5f) / %s - 0.5f", off, o, s);
        break;
    }
    case FG_RESIZE_PYTORCH_HALF_PIXEL:
        fg_buf_printf(b, "%s > 1 ? ((float)%s + 0.5f) / %s - 0.5f : 0.0f", lo, o, s);
        break;
    case FG_RESIZE_ALIGN_CORNERS:
        fg_buf_printf(b, "%s > 1 ? (float)%s * (float)(%s - 1) / (float)(%s - 1) : 0.0f", lo, o, li, lo);
        break;
    case FG_RESIZE_ASYMMETRIC: fg_buf_printf(b, "(float)%s / %s", o, s); break;
    case FG_RESIZE_TF_HALF_PIXEL_FOR_NN: fg_buf_printf(b, "((float)%s + 0.5f) / %s", o, s); break;
    default: fg_buf_printf(b, "((float)%s + 0.5f) / %s - 0.5f", o, s); break;
    }
}

static fg_status emit_resize(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[xt];
    fg_resize_geom d;
    char why[200];
    if (fg_resize_geom_of(nd, x, &d, why, sizeof why) != 0 || em->ot->rank != 4)
        return fg_em_error(em, FG_ERR_INPUT, "resize '%s': %s", nd->name, why);
    fg_status st;
    int64_t threads;
    if ((st = fg_em_threads(em, 256, &threads)) != FG_OK)
        return st;
    fg_em_shape(em, "N", x->shape[0]);
    fg_em_shape(em, "C", x->shape[1]);
    fg_em_shape(em, "H", d.in[0]);
    fg_em_shape(em, "W", d.in[1]);
    fg_em_shape(em, "OH", d.out[0]);
    fg_em_shape(em, "OW", d.out[1]);
    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    static const char *const xc[] = {"n", "c", "h", "w"};
    static const char *const yc[] = {"n", "c", "oh", "ow"};
    if ((st = fg_em_offset_fn(em, "off_x", xt, xc)) != FG_OK || (st = fg_em_offset_fn(em, "off_y", em->out, xc)) != FG_OK)
        return st;
    fg_buf coords = {0}, sh = {0}, sw = {0};
    fg_em_decompose(em, em->out, "i", yc, 2, &coords);
    if (coords.len)
        coords.s[--coords.len] = 0;
    fg_em_set(em, "COORDS", "%s", coords.s);
    source_expr(&d, 0, "oh", "H", "OH", &sh);
    source_expr(&d, 1, "ow", "W", "OW", &sw);
    fg_em_set(em, "SRC_H", "%s", sh.s);
    fg_em_set(em, "SRC_W", "%s", sw.s);
    fg_buf_free(&coords);
    fg_buf_free(&sh);
    fg_buf_free(&sw);
    static const char *const round_up[] = {"r > 0.5f", "r >= 0.5f", "r < 0.0f", "r > 0.0f"};
    FG_STATIC_ASSERT(FG_COUNTOF(round_up) == FG_RESIZE_ROUND_COUNT, "round_up out of sync with fg_resize_round");
    fg_em_set(em, "NEAREST", "%d", d.mode == FG_RESIZE_NEAREST);
    fg_em_set(em, "LINEAR", "%d", d.mode == FG_RESIZE_LINEAR);
    fg_em_set(em, "CUBIC", "%d", d.mode == FG_RESIZE_CUBIC);
    fg_em_set(em, "EXCLUDE", "%d", d.exclude_outside);
    fg_em_set(em, "ROUND_UP", "%s", round_up[d.round]);
    char lit[48];
    fg_expr_float_literal(d.cubic_a, lit);
    fg_em_set(em, "CUBIC_A", "%s", lit);
    fg_buf_printf(&em->notes, "//   resize:    %s, %s%s%s, [%" PRId64 ", %" PRId64 "] -> [%" PRId64 ", %" PRId64 "]\n",
                  fg_resize_mode_names[d.mode], fg_resize_coord_names[d.coord],
                  d.mode == FG_RESIZE_NEAREST ? ", " : "",
                  d.mode == FG_RESIZE_NEAREST ? fg_resize_round_names[d.round] : "", d.in[0], d.in[1], d.out[0],
                  d.out[1]);
    em->template_file = "resize.cuh";
    fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    return FG_OK;
}

/* Capability check (fg_template.check): the node's geometry is valid. */
static int check_resize(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    fg_resize_geom d;
    return fg_resize_geom_of(nd, &c->g->tensors[nd->inputs[0]], &d, why, whysz) == 0;
}

static const fg_template rows[] = {
    {.name = "resize", .family = "resize", .order = 95, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_RESIZE,
     .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads, .check = check_resize, .emit = emit_resize,
     .map_refusal = "resize reads its input through its own tap indices",
     .summary = "nearest / linear / cubic resize over H and W, one thread per output element"},
};
FG_TEMPLATE_FAMILY(resize, rows);
