/*
 * emit_conv2d.c -- the conv2d family: templates/conv2d.cuh (direct
 * convolution, weights staged in shared memory; conv2d_nhwc.cuh, its NHWC
 * form with lanes on output channels) and conv2d_depthwise.cuh
 * (one input channel per group).  NCHW and NHWC, stride, padding (begin
 * pads from fg_node_pads; the end pads only size the output), dilation,
 * groups; every tensor is addressed in its own layout.  The three read x
 * element by element through off_x, so a group's input map (a channel
 * shuffle before the conv, index_map.h) composes into off_x for free.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "index_map.h"
#include "template.h"

/* The direct templates divide pixel and spatial indices in 32 bits (a 64-bit
 * division by a shape passed as a parameter is a call, and its live registers
 * go to a stack frame): the output pixels, the input rows and columns and the
 * window's reach must stay below 2^31.  0 (why filled) when they do not. */
static int direct_fits_32bit(const fg_graph *g, const fg_node *nd, char *why, size_t whysz)
{
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *w = &g->tensors[nd->inputs[1]], *y = &g->tensors[nd->output];
    const int64_t lim = INT64_C(1) << 31;
    int64_t pixels = y->shape[0] * y->shape[2] * y->shape[3];
    int64_t reach_h = y->shape[2] * fg_node_attr_int(nd, "stride", 0) + w->shape[2] * fg_node_attr_int(nd, "dilation", 0);
    int64_t reach_w = y->shape[3] * fg_node_attr_int(nd, "stride", 1) + w->shape[3] * fg_node_attr_int(nd, "dilation", 1);
    if (pixels < lim && x->shape[2] < lim && x->shape[3] < lim && reach_h < lim && reach_w < lim)
        return 1;
    snprintf(why, whysz, "%" PRId64 " output pixels or a %" PRId64 "x%" PRId64 " input exceed the direct conv's 32-bit "
             "indices", pixels, x->shape[2], x->shape[3]);
    return 0;
}

/* The NHWC form (conv2d_nhwc.cuh): lanes on output channels.  tile_k is the
 * number of channel lanes KL (a power of two up to 32 dividing threads;
 * default the smallest power of two >= min(Kg, 32)), each thread computes
 * PPT = 4 pixels of its channel. */
#define NHWC_PPT 4

static fg_status emit_nhwc(fg_emitter *em, const fg_node *nd, int64_t pixels, int64_t groups, int64_t Kg, int64_t Cg,
                           int64_t R, int64_t S)
{
    int64_t kl = 1;
    while (kl < 32 && kl < Kg)
        kl *= 2;
    while (kl > 1 && 2 * kl * R * S * 4 > 48 * 1024)   /* two stages of one channel chunk must fit */
        kl /= 2;
    const char *keys[] = {"threads", "tile_k"};
    int64_t vals[2] = {128, kl};
    fg_status st = fg_em_tile_params(em, keys, 2, vals);
    if (st != FG_OK)
        return st;
    kl = vals[1];
    if (kl < 1 || kl > 32 || (kl & (kl - 1)) || vals[0] % kl)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: tile_k = %" PRId64 " (NHWC: a power of two up to 32 that "
                           "divides threads = %" PRId64 ")", kl, vals[0]);
    int64_t chunk = 4096 / (kl * R * S);
    if (chunk < 1)
        chunk = 1;
    if (chunk > Cg)
        chunk = Cg;
    int64_t wtile = kl * chunk * R * S;
    if (2 * wtile * 4 > 48 * 1024)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "conv2d '%s': a %" PRId64 "x%" PRId64
                           " kernel does not fit the shared weight tile", nd->name, R, S);
    fg_em_set(em, "KL", "%" PRId64, kl);
    fg_em_set(em, "PPT", "%d", NHWC_PPT);
    fg_em_set(em, "CHUNK_C", "%" PRId64, chunk);
    fg_em_set(em, "WTILE", "%" PRId64, wtile);
    em->template_file = "conv2d_nhwc.cuh";
    em->threads = (unsigned)vals[0];
    int64_t per_block = vals[0] / kl * NHWC_PPT, tiles = (Kg + kl - 1) / kl;
    em->k->grid[0] = (unsigned)((pixels + per_block - 1) / per_block);
    em->k->grid[1] = (unsigned)(groups * tiles);
    em->k->grid[2] = 1;
    em->k->block[0] = (unsigned)vals[0];
    em->k->block[1] = em->k->block[2] = 1;
    if (em->k->grid[1] > 65535)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "conv2d '%s': too many channel tiles", nd->name);
    return FG_OK;
}

/* Renders conv2d_depthwise.cuh (depthwise: the check saw one input channel
 * per group) or conv2d.cuh / conv2d_nhwc.cuh for the group's conv2d anchor. */
static fg_status emit_conv(fg_emitter *em, int depthwise)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0], wt = nd->inputs[1];
    const fg_tensor *x = &em->g->tensors[xt], *w = &em->g->tensors[wt], *y = em->ot;
    if (x->rank != 4 || w->rank != 4 || y->rank != 4)
        return fg_em_error(em, FG_ERR_INPUT, "conv2d '%s' needs rank-4 input, weight and output", nd->name);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t K = w->shape[0], Cg = w->shape[1], R = w->shape[2], S = w->shape[3];
    int64_t groups = fg_em_attr_int(em, a, "groups", 0);
    if (groups < 1 || C != Cg * groups || K % groups != 0 || y->shape[1] != K)
        return fg_em_error(em, FG_ERR_INPUT, "conv2d '%s': %" PRId64 " input channels, weight [%" PRId64 ", %" PRId64
                           ", ...], groups %" PRId64 " do not agree", nd->name, C, K, Cg, groups);
    int64_t Kg = K / groups;

    fg_em_shape(em, "N", N);
    fg_em_shape(em, "C", C);
    fg_em_shape(em, "H", H);
    fg_em_shape(em, "W", W);
    fg_em_shape(em, "K", K);
    fg_em_shape(em, "OH", y->shape[2]);
    fg_em_shape(em, "OW", y->shape[3]);
    fg_em_shape(em, "R", R);
    fg_em_shape(em, "S", S);
    fg_em_shape(em, "Cg", Cg);
    fg_em_shape(em, "Kg", Kg);
    fg_em_shape(em, "SH", fg_em_attr_int(em, a, "stride", 0));
    fg_em_shape(em, "SW", fg_em_attr_int(em, a, "stride", 1));
    int64_t pb[2], pe[2];
    fg_node_pads(nd, pb, pe);   /* index arithmetic needs only the begin pads */
    fg_em_shape(em, "PH", pb[0]);
    fg_em_shape(em, "PW", pb[1]);
    fg_em_shape(em, "DH", fg_em_attr_int(em, a, "dilation", 0));
    fg_em_shape(em, "DW", fg_em_attr_int(em, a, "dilation", 1));

    /* x is read through off_x: its own offsets, or, when the group has an
     * input map (a channel shuffle), offsets in the map's source (index_map.h) */
    static const char *const xc[] = {"n", "c", "h", "w"};
    static const char *const wc[] = {"k", "c", "r", "s"};
    fg_em_set(em, "X", "%s", fg_em_tensor(em, fg_imap_source(em, xt), 0));
    fg_em_set(em, "WGT", "%s", fg_em_tensor(em, wt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_status st;
    if ((st = fg_imap_offset_fn(em, "off_x", xt, xc)) != FG_OK || (st = fg_em_offset_fn(em, "off_w", wt, wc)) != FG_OK ||
        (st = fg_em_offset_fn(em, "off_y", em->out, xc)) != FG_OK)
        return st;

    int64_t pixels = N * y->shape[2] * y->shape[3];
    if (depthwise) {
        int64_t threads;
        if ((st = fg_em_threads(em, 256, &threads)) != FG_OK)
            return st;
        static const char *const yc[] = {"n", "k", "oh", "ow"};
        fg_buf coords = {0};
        fg_em_decompose(em, em->out, "i", yc, 2, &coords);
        if (coords.len)
            coords.s[--coords.len] = 0;
        fg_em_set(em, "COORDS", "%s", coords.s);
        fg_buf_free(&coords);
        em->template_file = "conv2d_depthwise.cuh";
        em->threads = (unsigned)threads;
        int64_t blocks = (pixels * K + threads - 1) / threads;
        em->k->grid[0] = (unsigned)(blocks > 8192 ? 8192 : blocks < 1 ? 1 : blocks);
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
        return FG_OK;
    }

    char why[160];
    if (!direct_fits_32bit(em->g, nd, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "conv2d '%s': %s", nd->name, why);
    if (x->layout == FG_LAYOUT_NHWC && y->layout == FG_LAYOUT_NHWC)
        return emit_nhwc(em, nd, pixels, groups, Kg, Cg, R, S);

    const char *keys[] = {"threads", "tile_k"};
    int64_t vals[2] = {128, 8};
    if ((st = fg_em_tile_params(em, keys, 2, vals)) != FG_OK)
        return st;
    int64_t tile_k = vals[1] < Kg ? vals[1] : Kg;
    /* two weight stages of at most 4096 floats (16 KiB) each where the kernel allows */
    int64_t chunk = 4096 / (tile_k * R * S);
    if (chunk < 1)
        chunk = 1;
    if (chunk > Cg)
        chunk = Cg;
    int64_t wtile = tile_k * chunk * R * S;
    if (2 * wtile * 4 > 48 * 1024)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "conv2d '%s': a %" PRId64 "x%" PRId64
                           " kernel does not fit the shared weight tile", nd->name, R, S);
    fg_em_set(em, "TILE_K", "%" PRId64, tile_k);
    fg_em_set(em, "CHUNK_C", "%" PRId64, chunk);
    fg_em_set(em, "WTILE", "%" PRId64, wtile);
    em->template_file = "conv2d.cuh";
    em->threads = (unsigned)vals[0];
    int64_t tiles = (Kg + tile_k - 1) / tile_k;
    em->k->grid[0] = (unsigned)((pixels + vals[0] - 1) / vals[0]);
    em->k->grid[1] = (unsigned)(groups * tiles);
    em->k->grid[2] = 1;
    em->k->block[0] = (unsigned)vals[0];
    em->k->block[1] = em->k->block[2] = 1;
    if (em->k->grid[1] > 65535)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "conv2d '%s': too many channel tiles", nd->name);
    return FG_OK;
}

/* The default tile (threads 128, tile_k 8) must fit shared memory (two
 * weight stages) and the grid's second dimension; the indices, 32 bits. */
static int check_conv2d(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *w = &c->g->tensors[nd->inputs[1]];
    int64_t K = w->shape[0], R = w->shape[2], S = w->shape[3];
    int64_t groups = fg_node_attr(nd, "groups") ? fg_node_attr_int(nd, "groups", 0) : 1;
    int64_t Kg = groups > 0 ? K / groups : K, tile_k = Kg < 8 ? Kg : 8;
    if (2 * tile_k * R * S * 4 > 48 * 1024) {
        snprintf(why, whysz, "a %" PRId64 "x%" PRId64 " kernel does not fit the shared weight tile", R, S);
        return 0;
    }
    if (groups * ((Kg + tile_k - 1) / tile_k) > 65535) {
        snprintf(why, whysz, "%" PRId64 " channel tiles exceed the grid (65535)", groups * ((Kg + tile_k - 1) / tile_k));
        return 0;
    }
    return direct_fits_32bit(c->g, nd, why, whysz);
}

/* One input channel per group, more than one group. */
static int check_depthwise(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *w = &c->g->tensors[nd->inputs[1]];
    int64_t groups = fg_node_attr(nd, "groups") ? fg_node_attr_int(nd, "groups", 0) : 1;
    if (w->shape[1] != 1 || groups < 2) {
        snprintf(why, whysz, "not depthwise (%" PRId64 " input channels per group, %" PRId64 " groups)", w->shape[1],
                 groups);
        return 0;
    }
    return 1;
}

static fg_status emit_direct(fg_emitter *em) { return emit_conv(em, 0); }
static fg_status emit_depthwise(fg_emitter *em) { return emit_conv(em, 1); }

static const fg_tile_key tiles_direct[] = {
    {.name = "threads", .min = 32, .max = 1024, .step = 32},
    {.name = "tile_k", .min = 1, .max = 32},
    {0},
};

static const fg_template rows[] = {
    {.name = "conv2d", .family = "conv2d", .order = 20, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_CONV2D,
     .dtypes = FG_DTYPES_FLOAT, .priority = 0, .tiles = tiles_direct, .input_map = 1, .check = check_conv2d,
     .emit = emit_direct,
     .summary = "direct convolution, weight tiles staged in shared memory; any groups, stride, padding, dilation"},
    {.name = "conv2d_depthwise", .family = "conv2d", .order = 21, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_CONV2D,
     .dtypes = FG_DTYPES_FLOAT, .priority = 10, .tiles = fg_tile_threads, .input_map = 1, .check = check_depthwise,
     .emit = emit_depthwise,
     .summary = "depthwise convolution (one input channel per group), one thread per output element"},
};
FG_TEMPLATE_FAMILY(conv2d, rows);
