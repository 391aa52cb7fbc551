/*
 * emit_pool2d.c -- the pool2d family: templates/pool2d.cuh (max / average
 * pooling with kernel, stride, begin/end padding, dilation; ceil_mode shows
 * only in the output size) and global_pool.cuh (mean or max over H, W, one
 * warp per output; an NHWC input: global_pool_nhwc.cuh, lanes over channels).  Semantics follow the host reference: padding is
 * skipped, a max propagates NaN, and an average divides by the taps inside
 * the input, or with count_include_pad by those inside the padded extent.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* Global pooling of an NHWC input: global_pool_nhwc.cuh, lanes over
 * channels (8 a lane when C is a multiple of 8), PG = threads / 32 pixel
 * groups a block, grid (channel blocks, N). */
static fg_status emit_global_nhwc(fg_emitter *em, int xt, int is_max, int64_t threads)
{
    const fg_tensor *x = &em->g->tensors[xt];
    int vec = x->shape[1] % 8 == 0 ? 8 : 1;
    fg_em_set(em, "T", "%s", fg_em_ctype(x->dtype));
    fg_em_set(em, "VEC", "%d", vec);
    fg_em_set(em, "VEC8", "%d", vec == 8);
    if (is_max) {
        fg_em_set(em, "INIT", "c0 + j < C ? fg_load(xn + c0 + j) : 0.0f /* an element of the plane */");
        fg_em_set(em, "REDUCE_J", "fg_maxf(acc[j], xv)");
        fg_em_set(em, "REDUCE_A", "fg_maxf(a, xv)");
        fg_em_set(em, "FINISH", "a");
    } else {
        fg_em_set(em, "INIT", "0.0f");
        fg_em_set(em, "REDUCE_J", "acc[j] + xv");
        fg_em_set(em, "REDUCE_A", "a + xv");
        fg_em_set(em, "FINISH", "H * W > 0 ? a / (float)(H * W) : 0.0f");
    }
    em->template_file = "global_pool_nhwc.cuh";
    int64_t cb = (x->shape[1] + 32 * vec - 1) / (32 * vec);
    em->threads = (unsigned)threads;
    em->k->grid[0] = (unsigned)cb;
    em->k->grid[1] = (unsigned)x->shape[0];
    em->k->grid[2] = 1;
    em->k->block[0] = (unsigned)threads;
    em->k->block[1] = em->k->block[2] = 1;
    fg_buf_printf(&em->notes, "//   lanes:     over channels (%d a lane), %d pixel groups a block, grid %" PRId64 " x %" PRId64 "\n",
               vec, (int)(threads / 32), cb, x->shape[0]);
    return FG_OK;
}

static fg_status emit_pool2d(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int is_max = nd->op->reduce && strcmp(nd->op->reduce, "max") == 0;
    int xt = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[xt], *y = em->ot;
    if (x->rank != 4)
        return fg_em_error(em, FG_ERR_INPUT, "pooling '%s' needs a rank-4 input", nd->name);
    fg_status st;
    int64_t threads;
    if ((st = fg_em_threads(em, 128, &threads)) != FG_OK)
        return st;
    fg_em_shape(em, "N", x->shape[0]);
    fg_em_shape(em, "C", x->shape[1]);
    fg_em_shape(em, "H", x->shape[2]);
    fg_em_shape(em, "W", x->shape[3]);
    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    static const char *const xc[] = {"n", "c", "h", "w"};
    if ((st = fg_em_offset_fn(em, "off_x", xt, xc)) != FG_OK)
        return st;

    if (nd->op->kind == FG_OPK_GLOBAL_POOL) {
        if (y->rank != 4 && y->rank != 2)
            return fg_em_error(em, FG_ERR_INPUT, "global pooling '%s' output must be [N, C, 1, 1] or [N, C]", nd->name);
        static const char *const yc4[] = {"n", "c", "0", "0"};
        static const char *const yc2[] = {"n", "c"};
        fg_buf off = {0};
        st = fg_em_offset(em, em->out, 0, y->rank == 4 ? yc4 : yc2, y->rank, y->shape, &off);
        if (st == FG_OK)
            fg_buf_printf(&em->helpers, "// offset of %s at (n, c%s)\nFG_DEVICE fg_i64 off_y(const fg_params_%s &p, "
                          "fg_i64 n, fg_i64 c)\n{\n    return %s;\n}\n\n", y->name, y->rank == 4 ? ", 0, 0" : "",
                          em->k->name, off.s);
        fg_buf_free(&off);
        if (st != FG_OK)
            return st;
        fg_em_set(em, "EPI_ARGS", "%s", y->rank == 4 ? "n, c, 0, 0" : "n, c");
        if (x->layout == FG_LAYOUT_NHWC && x->shape[1] > 1)
            return emit_global_nhwc(em, xt, is_max, threads);
        if (is_max) {
            fg_em_set(em, "INIT", "fg_load(p.%s + off_x(p, n, c, 0, 0))  /* an element of the plane */",
                      fg_em_tensor(em, xt, 0));
            fg_em_set(em, "REDUCE", "fg_maxf(acc, xv)");
            fg_em_set(em, "FINISH", "acc");
        } else {
            fg_em_set(em, "INIT", "0.0f");
            fg_em_set(em, "REDUCE", "acc + xv");
            fg_em_set(em, "FINISH", "H * W > 0 ? acc / (float)(H * W) : 0.0f");
        }
        em->template_file = "global_pool.cuh";
        fg_em_launch_1d(em, x->shape[0] * x->shape[1] * 32, threads);
        return FG_OK;
    }

    if (y->rank != 4)
        return fg_em_error(em, FG_ERR_INPUT, "pooling '%s' output must be rank 4", nd->name);
    int64_t beg[2], end[2];
    fg_node_pads(nd, beg, end);
    int include_pad = !is_max && fg_node_attr_num(nd, "count_include_pad", 0) != 0;
    fg_em_shape(em, "OH", y->shape[2]);
    fg_em_shape(em, "OW", y->shape[3]);
    fg_em_shape(em, "R", fg_em_attr_int(em, a, "kernel", 0));
    fg_em_shape(em, "S", fg_em_attr_int(em, a, "kernel", 1));
    fg_em_shape(em, "SH", fg_em_attr_int(em, a, "stride", 0));
    fg_em_shape(em, "SW", fg_em_attr_int(em, a, "stride", 1));
    fg_em_shape(em, "PH", beg[0]);
    fg_em_shape(em, "PW", beg[1]);
    fg_em_shape(em, "EH", end[0]);
    fg_em_shape(em, "EW", end[1]);
    int dilated = fg_node_attr(nd, "dilation") != NULL; /* an op without `dilation` reads every tap */
    fg_em_shape(em, "DH", dilated ? fg_em_attr_int(em, a, "dilation", 0) : 1);
    fg_em_shape(em, "DW", dilated ? fg_em_attr_int(em, a, "dilation", 1) : 1);
    static const char *const yc[] = {"n", "c", "oh", "ow"};
    if ((st = fg_em_offset_fn(em, "off_y", em->out, xc)) != FG_OK)
        return st;
    fg_buf coords = {0};
    fg_em_decompose(em, em->out, "i", yc, 2, &coords);
    if (coords.len)
        coords.s[--coords.len] = 0;
    fg_em_set(em, "COORDS", "%s", coords.s);
    fg_buf_free(&coords);
    fg_em_set(em, "INIT", "%s", is_max ? "-3.402823466e+38f  /* lowest float */" : "0.0f");
    fg_em_set(em, "REDUCE", "%s", is_max ? "xv > acc ? xv : acc" : "acc + xv");
    fg_em_set(em, "FINISH", "%s",
              is_max        ? "count > 0 ? acc : 0.0f"
              : include_pad ? "count > 0 ? acc / (float)taps : 0.0f  /* count_include_pad */"
                            : "count > 0 ? acc / (float)count : 0.0f");
    em->template_file = "pool2d.cuh";
    fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    return FG_OK;
}

/* Rank-4 input; global pooling writes [N, C, 1, 1] or [N, C]. */
static int check_pool2d(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *x = &c->g->tensors[nd->inputs[0]], *y = &c->g->tensors[nd->output];
    if (x->rank != 4 || (nd->op->kind == FG_OPK_POOL2D && y->rank != 4) || (y->rank != 4 && y->rank != 2)) {
        snprintf(why, whysz, "pooling needs a rank-4 input and output");
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "pool2d", .family = "pool2d", .order = 40, FG_TEMPLATE_LIMITS,
     .kinds = (1u << FG_OPK_POOL2D) | (1u << FG_OPK_GLOBAL_POOL), .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads,
     .check = check_pool2d, .emit = emit_pool2d, .summary = "max / average pooling and global average pooling"},
};
FG_TEMPLATE_FAMILY(pool2d, rows);
