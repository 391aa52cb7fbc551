/*
 * emit_conv2d_tc.c -- template conv2d_tc of the conv2d family: implicit-GEMM
 * convolution on tensor cores (templates/conv2d_tc.cuh; docs/codegen.md).
 *
 * It takes NHWC fp16 / bf16 convolutions with one group and C a multiple of
 * 8; fg_check_conv2d_tc says why it refuses anything else, and the planner
 * then gives the group to the direct conv2d template (NCHW included: a gather
 * path for NCHW would read 2-byte elements a channel plane apart, so NCHW is
 * refused rather than made slow).  The weights need no re-layout: NHWC
 * weights are stored [K, R, S, C], which is the GEMM's B with the reduction
 * index (r, s, c) contiguous, the same order as an input pixel's channels.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* Block tiles, largest first: BM x BN outputs, WARPS_M x WARPS_N warps.  Each
 * warp's patch is a multiple of 16 x 16 (m16 fragments, pairs of n8
 * fragments per ldmatrix.x4), and each thread copies whole chunks: BM * 4 and
 * BN * 4 are multiples of the block size.  Shared memory: 3 stages of
 * (BM + BN) rows of 64 bytes, at most 48 KiB (the static limit). */
typedef struct tc_tile {
    int bm, bn, warps_m, warps_n;
} tc_tile;

static const tc_tile tc_tiles[] = {
    {128, 128, 2, 4},
    {128, 64, 2, 2},
    {64, 128, 2, 2},
    {64, 64, 2, 2},
};

#define TC_BK 32
#define TC_STAGES 3
/* blocks wanted before a larger tile is preferred: about one per SM of a large GPU */
#define TC_BLOCKS_WANTED 128

_Static_assert(TC_STAGES * (128 + 128) * TC_BK * 2 <= 48 * 1024, "the largest tile fits static shared memory");

/* The default tile for an M x K output: the largest that still gives
 * TC_BLOCKS_WANTED blocks and is not mostly empty, else the smallest. */
static const tc_tile *default_tile(int64_t M, int64_t K)
{
    const int n = (int)FG_COUNTOF(tc_tiles);
    for (int i = 0; i < n - 1; i++) {
        const tc_tile *t = &tc_tiles[i];
        if ((t->bm > 64 && M <= 64) || (t->bn > 64 && K <= 64))
            continue;
        int64_t blocks = ((M + t->bm - 1) / t->bm) * ((K + t->bn - 1) / t->bn);
        if (blocks >= TC_BLOCKS_WANTED)
            return t;
    }
    return &tc_tiles[n - 1];
}

/* The conv node's tensors and what the template needs of them, shared by the
 * check and the emitter; NULL-safe reasons in why. */
static int tc_supported(const fg_graph *g, int anchor, int out, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[anchor];
    const fg_tensor *x = &g->tensors[nd->inputs[0]], *w = &g->tensors[nd->inputs[1]];
    const fg_tensor *y = &g->tensors[nd->output], *o = &g->tensors[out];
    if (x->rank != 4 || w->rank != 4 || y->rank != 4) {
        snprintf(why, whysz, "needs rank-4 input, weight and output");
        return 0;
    }
    int64_t groups = fg_node_attr(nd, "groups") ? fg_node_attr_int(nd, "groups", 0) : 1;
    if (groups != 1) {
        snprintf(why, whysz, "groups %" PRId64 " (one group only; grouped and depthwise convolutions use conv2d or "
                 "conv2d_depthwise)", groups);
        return 0;
    }
    const fg_tensor *nchw = x->layout != FG_LAYOUT_NHWC ? x : w->layout != FG_LAYOUT_NHWC ? w
                          : y->layout != FG_LAYOUT_NHWC ? y : o->layout != FG_LAYOUT_NHWC ? o : NULL;
    if (nchw) {
        snprintf(why, whysz, "%s is %s (reads 8 channels at a time, so NHWC only)", nchw->name,
                 fg_layout_name(nchw->layout));
        return 0;
    }
    if (x->dtype != o->dtype || w->dtype != o->dtype || y->dtype != o->dtype) {
        snprintf(why, whysz, "input %s, weight %s, output %s (needs one dtype)", fg_dtype_name(x->dtype),
                 fg_dtype_name(w->dtype), fg_dtype_name(o->dtype));
        return 0;
    }
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t K = w->shape[0], R = w->shape[2], S = w->shape[3];
    if (C % 8 != 0) {
        snprintf(why, whysz, "C = %" PRId64 " is not a multiple of 8 (16-byte loads along C)", C);
        return 0;
    }
    if (w->shape[1] != C || y->shape[1] != K) {
        snprintf(why, whysz, "weight [%" PRId64 ", %" PRId64 ", ...] does not fit %" PRId64 " input channels", K,
                 w->shape[1], C);
        return 0;
    }
    /* 32-bit index arithmetic inside an image, a weight row and the pixel count */
    int64_t M = N * y->shape[2] * y->shape[3];
    const int64_t lim = INT32_MAX - 256;
    if (H * W * C > lim || R * S * C > lim || M > lim || (K + 63) / 64 > 65535) {
        snprintf(why, whysz, "too large for 32-bit tile indices (%" PRId64 " pixels, %" PRId64 " channels)", M, K);
        return 0;
    }
    return 1;
}

int fg_check_conv2d_tc(const fg_tcand *c, char *why, size_t whysz)
{
    return tc_supported(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, why, whysz);
}

fg_status fg_emit_conv2d_tc(fg_emitter *em)
{
    int a = em->grp->anchor;
    if (a < 0 || em->g->nodes[a].op->kind != FG_OPK_CONV2D)
        return fg_em_error(em, FG_ERR_INPUT, "template %s needs a conv2d anchor", em->grp->template_name);
    char why[256];
    if (!tc_supported(em->g, a, em->out, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template conv2d_tc cannot run conv2d '%s': %s",
                           em->g->nodes[a].name, why);
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0], wt = nd->inputs[1];
    const fg_tensor *x = &em->g->tensors[xt], *w = &em->g->tensors[wt], *y = em->ot;
    int64_t N = x->shape[0], C = x->shape[1], K = w->shape[0], R = w->shape[2], S = w->shape[3];
    int64_t OH = y->shape[2], OW = y->shape[3], M = N * OH * OW;

    const tc_tile *tile = default_tile(M, K);
    const char *keys[] = {"tile_m", "tile_n"};
    int64_t v[2] = {tile->bm, tile->bn};
    fg_status st = fg_em_tile_params(em, keys, 2, v);
    if (st != FG_OK)
        return st;
    tile = NULL;
    for (size_t i = 0; i < FG_COUNTOF(tc_tiles) && !tile; i++)
        if (tc_tiles[i].bm == v[0] && tc_tiles[i].bn == v[1])
            tile = &tc_tiles[i];
    if (!tile)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: tile_m = %" PRId64 ", tile_n = %" PRId64
                           " (want 64 or 128 each)", v[0], v[1]);

    fg_em_shape(em, "N", N);
    fg_em_shape(em, "C", C);
    fg_em_shape(em, "H", x->shape[2]);
    fg_em_shape(em, "W", x->shape[3]);
    fg_em_shape(em, "K", K);
    fg_em_shape(em, "OH", OH);
    fg_em_shape(em, "OW", OW);
    fg_em_shape(em, "R", R);
    fg_em_shape(em, "S", S);
    fg_em_shape(em, "SH", fg_em_attr_int(em, a, "stride", 0));
    fg_em_shape(em, "SW", fg_em_attr_int(em, a, "stride", 1));
    fg_em_shape(em, "PH", fg_em_attr_int(em, a, "padding", 0));
    fg_em_shape(em, "PW", fg_em_attr_int(em, a, "padding", 1));
    fg_em_shape(em, "DH", fg_em_attr_int(em, a, "dilation", 0));
    fg_em_shape(em, "DW", fg_em_attr_int(em, a, "dilation", 1));
    fg_em_shape(em, "M", M);
    fg_em_shape(em, "RSC", R * S * C);

    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "WGT", "%s", fg_em_tensor(em, wt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    static const char *const yc[] = {"n", "c", "h", "w"};
    if ((st = fg_em_offset_fn(em, "off_y", em->out, yc)) != FG_OK)
        return st;
    int h = y->dtype == FG_DTYPE_F16;
    fg_em_set(em, "T", "%s", h ? "fg_half" : "fg_bf16");
    fg_em_set(em, "MMA", "%s", h ? "fg_mma_16816_f16" : "fg_mma_16816_bf16");
    fg_em_set(em, "BM", "%d", tile->bm);
    fg_em_set(em, "BN", "%d", tile->bn);
    fg_em_set(em, "WARPS_M", "%d", tile->warps_m);
    fg_em_set(em, "WARPS_N", "%d", tile->warps_n);
    fg_em_set(em, "PAIR", "%d", K % 2 == 0);

    unsigned threads = 32u * (unsigned)(tile->warps_m * tile->warps_n);
    fg_buf_printf(&em->notes, "//   tile:      %d x %d x %d, %d stages, %u threads (%d x %d warps)\n", tile->bm,
                  tile->bn, TC_BK, TC_STAGES, threads, tile->warps_m, tile->warps_n);
    em->template_file = "conv2d_tc.cuh";
    em->threads = threads;
    em->k->grid[0] = (unsigned)((M + tile->bm - 1) / tile->bm);
    em->k->grid[1] = (unsigned)((K + tile->bn - 1) / tile->bn);
    em->k->grid[2] = 1;
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}
