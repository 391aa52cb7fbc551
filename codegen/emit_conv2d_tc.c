/*
 * emit_conv2d_tc.c -- template conv2d_tc of the conv2d family: implicit-GEMM
 * convolution on tensor cores (templates/conv2d_tc.cuh; docs/codegen.md).
 *
 * It takes NHWC convolutions with one group: fp16 / bf16 (mma m16n8k16),
 * and fp32 when the graph's precision is tf32 (mma m16n8k8 on operands
 * rounded to tf32; exact fp32 never runs on tensor cores).  Operands are
 * copied 16 bytes at a time with cp.async when C is a multiple of 8 (fp16,
 * bf16) or 4 (fp32); any other C -- a network's first layer, RGB -- and an
 * NCHW input (a graph's own: the planner's layout pass stores intermediates
 * NHWC) are gathered element by element (GATHER, X_NCHW), still on tensor
 * cores.  Weights and outputs must be NHWC.  check_conv2d_tc says why it
 * refuses anything else, and the planner then gives the group to the direct
 * conv2d template.  The weights need no re-layout: NHWC
 * weights are stored [K, R, S, C], which is the GEMM's B with the reduction
 * index (r, s, c) contiguous, the same order as an input pixel's channels.
 *
 * The block tile and split-K are chosen per shape (tc_choose) by the blocks
 * they launch (tile_choice.h: whole waves on the target's SMs, smaller tiles
 * before split-K partials); a rule's `params:` hook may override
 * tile_m, tile_n and split_k.  The planner shows the default in --explain
 * (describe_conv2d_tc), the kernel's header comment the one it uses.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"
#include "tile_choice.h"

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
    {32, 64, 2, 2},
    {32, 32, 2, 1},
};

#define TC_ROW_BYTES 64       /* one reduction tile row: four 16-byte chunks */
#define TC_STAGES 3
#define TC_TARGET_SMS FG_TARGET_SMS   /* the SMs to fill (an H200 has 132) */
#define TC_MAX_SPLITS 16      /* split-K: at most this many slices of the reduction */
#define TC_MIN_KT_SPLIT 4     /* and at least this many k tiles in each (the pipeline's depth + 1) */

_Static_assert(TC_STAGES * (128 + 128) * TC_ROW_BYTES <= 48 * 1024, "the largest tile fits static shared memory");

/* Elements per 16-byte chunk. */
static int tc_epc(fg_dtype d) { return d == FG_DTYPE_F32 ? 4 : 8; }

/* The shape of the GEMM a conv node is. */
typedef struct tc_shape {
    int64_t M, K, RSC;   /* output pixels, output channels, reduction length */
    int64_t KT;          /* reduction tiles of 4 chunks */
    int gather;          /* C is not a multiple of a chunk's elements, or x is NCHW: operands loaded element by element */
    int x_nchw;          /* x is NCHW (a graph's input): gathered a channel plane apart */
    int eb;              /* bytes an element */
    int64_t x_elems;     /* the input's elements */
} tc_shape;

/* The default tile and split for shape s, by the blocks they launch
 * (tile_choice.h): each tile (not mostly empty: BM 128 needs M > 64, BN 128
 * K > 64) with each split (each keeping TC_MIN_KT_SPLIT k tiles, at most
 * TC_MAX_SPLITS) is priced on FG_TARGET_SMS SMs -- whole waves of math and
 * of the k-tile chain, the partials' traffic and reduction -- and the
 * cheapest wins (ties: fewer splits, less padding, the larger tile). */
static void tc_choose(const tc_shape *s, const tc_tile **tile, int *splits)
{
    enum { n = (int)FG_COUNTOF(tc_tiles) };
    fg_tc_cand cands[n];
    int skip[n];
    for (int i = 0; i < n; i++) {
        const tc_tile *t = &tc_tiles[i];
        int threads = 32 * t->warps_m * t->warps_n, smem = TC_STAGES * (t->bm + t->bn) * TC_ROW_BYTES;
        cands[i] = (fg_tc_cand){t->bm, t->bn, fg_tc_blocks_per_sm(t->bm, t->bn, threads, smem)};
        skip[i] = (t->bm > 64 && s->M <= 64) || (t->bn > 64 && s->K <= 64);
    }
    int epc = s->eb == 4 ? 4 : 8;
    fg_tc_problem p = {.M = s->M, .N = s->K, .batch = 1, .KT = s->KT, .bk = 4 * epc, .eb = s->eb,
                       .bytes = (double)s->eb * (double)(s->x_elems + s->K * s->RSC + s->M * s->K),
                       .min_kt = TC_MIN_KT_SPLIT, .max_splits = TC_MAX_SPLITS};
    fg_tc_choice c = fg_tc_choose(&p, cands, n, skip, FG_TARGET_SMS);
    *tile = &tc_tiles[c.tile];
    *splits = c.splits;
}

/* k tiles per split and the splits that then exist (none empty). */
static void tc_split_shape(int64_t KT, int splits, int64_t *kt_split, int *used)
{
    *kt_split = (KT + splits - 1) / splits;
    *used = (int)((KT + *kt_split - 1) / *kt_split);
}

/* The conv node's tensors and what the template needs of them, shared by the
 * check and the emitter; NULL-safe reasons in why.  *s is filled on success. */
static int tc_supported(const fg_graph *g, int anchor, int out, char *why, size_t whysz, tc_shape *s)
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
    if (x->dtype != o->dtype || w->dtype != o->dtype || y->dtype != o->dtype) {
        snprintf(why, whysz, "input %s, weight %s, output %s (needs one dtype)", fg_dtype_name(x->dtype),
                 fg_dtype_name(w->dtype), fg_dtype_name(o->dtype));
        return 0;
    }
    if (o->dtype == FG_DTYPE_F32 && g->precision != FG_PRECISION_TF32) {
        snprintf(why, whysz, "fp32 with precision %s (fp32 runs on tensor cores only with precision tf32)",
                 fg_precision_name(g->precision));
        return 0;
    }
    const int epc = tc_epc(o->dtype);
    const fg_tensor *nchw = w->layout != FG_LAYOUT_NHWC ? w : y->layout != FG_LAYOUT_NHWC ? y
                          : o->layout != FG_LAYOUT_NHWC ? o : NULL;
    if (nchw) {
        snprintf(why, whysz, "%s is %s (weights are read as [K, R*S*C] and outputs stored %d channels at a time: "
                 "NHWC only; an NCHW input is gathered)", nchw->name, fg_layout_name(nchw->layout), epc);
        return 0;
    }
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t K = w->shape[0], R = w->shape[2], S = w->shape[3];
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
    s->M = M;
    s->K = K;
    s->RSC = R * S * C;
    s->x_nchw = x->layout != FG_LAYOUT_NHWC;
    s->gather = C % epc != 0 || s->x_nchw;
    s->KT = (s->RSC + 4 * epc - 1) / (4 * epc);
    s->eb = o->dtype == FG_DTYPE_F32 ? 4 : 2;
    s->x_elems = N * H * W * C;
    return 1;
}

static int check_conv2d_tc(const fg_tcand *c, char *why, size_t whysz)
{
    tc_shape s;
    return tc_supported(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, why, whysz, &s);
}

static void describe_conv2d_tc(const fg_tcand *c, char *buf, size_t size)
{
    tc_shape s;
    char why[256];
    buf[0] = 0;
    if (c->anchor < 0 || !tc_supported(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, why,
                                       sizeof why, &s))
        return;
    const tc_tile *t;
    int splits, used;
    int64_t kts;
    tc_choose(&s, &t, &splits);
    tc_split_shape(s.KT, splits, &kts, &used);
    int64_t blocks = ((s.M + t->bm - 1) / t->bm) * ((s.K + t->bn - 1) / t->bn);
    snprintf(buf, size, "tile %d x %d, split-K %d (M %" PRId64 ", N %" PRId64 ", K %" PRId64 ": %" PRId64
             " tiles x %d = %" PRId64 " blocks for %d SMs)", t->bm, t->bn, used, s.M, s.K, s.RSC, blocks, used,
             blocks * used, TC_TARGET_SMS);
}

static fg_status emit_conv2d_tc(fg_emitter *em)
{
    int a = em->grp->anchor;
    char why[256];
    tc_shape sh;
    if (!tc_supported(em->g, a, em->out, why, sizeof why, &sh))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template conv2d_tc cannot run conv2d '%s': %s",
                           em->g->nodes[a].name, why);
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0], wt = nd->inputs[1];
    const fg_tensor *x = &em->g->tensors[xt], *w = &em->g->tensors[wt], *y = em->ot;
    int64_t N = x->shape[0], C = x->shape[1], K = w->shape[0], R = w->shape[2], S = w->shape[3];
    int64_t OH = y->shape[2], OW = y->shape[3], M = sh.M;
    const int epc = tc_epc(y->dtype);

    const tc_tile *tile;
    int splits;
    tc_choose(&sh, &tile, &splits);
    const char *keys[] = {"tile_m", "tile_n", "split_k"};
    int64_t v[3] = {tile->bm, tile->bn, splits};
    fg_status st = fg_em_tile_params(em, keys, 3, v);
    if (st != FG_OK)
        return st;
    tile = NULL;
    for (size_t i = 0; i < FG_COUNTOF(tc_tiles) && !tile; i++)
        if (tc_tiles[i].bm == v[0] && tc_tiles[i].bn == v[1])
            tile = &tc_tiles[i];
    if (!tile)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: tile_m = %" PRId64 ", tile_n = %" PRId64
                           " (want 128 x 128, 128 x 64, 64 x 128, 64 x 64, 32 x 64 or 32 x 32)", v[0], v[1]);
    if (v[2] > sh.KT)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: split_k = %" PRId64 " (want 1 to %" PRId64
                           ", the reduction's %" PRId64 " k tiles, at most 64)", v[2], sh.KT < 64 ? sh.KT : 64,
                           sh.KT);
    int64_t kt_split;
    tc_split_shape(sh.KT, (int)v[2], &kt_split, &splits);

    int64_t pb[2], pe[2];
    fg_node_pads(nd, pb, pe);   /* index arithmetic needs only the begin pads */
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
    fg_em_shape(em, "PH", pb[0]);
    fg_em_shape(em, "PW", pb[1]);
    fg_em_shape(em, "DH", fg_em_attr_int(em, a, "dilation", 0));
    fg_em_shape(em, "DW", fg_em_attr_int(em, a, "dilation", 1));
    fg_em_shape(em, "M", M);
    fg_em_shape(em, "RSC", sh.RSC);

    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "WGT", "%s", fg_em_tensor(em, wt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    static const char *const yc[] = {"n", "c", "h", "w"};
    if ((st = fg_em_offset_fn(em, "off_y", em->out, yc)) != FG_OK)
        return st;
    fg_dtype dt = y->dtype;
    fg_em_set(em, "T", "%s", fg_em_ctype(dt));
    fg_em_set(em, "PACK", "%s", dt == FG_DTYPE_BF16 ? "fg_pack_bf162" : "fg_pack_half2");   /* gathered chunks */
    fg_em_set(em, "MMA", "%s", dt == FG_DTYPE_F32 ? "fg_mma_1688_tf32"
                             : dt == FG_DTYPE_F16 ? "fg_mma_16816_f16" : "fg_mma_16816_bf16");
    fg_em_set(em, "TF32", "%d", dt == FG_DTYPE_F32);
    fg_em_set(em, "EPC", "%d", epc);
    fg_em_set(em, "GATHER", "%d", sh.gather);
    fg_em_set(em, "X_NCHW", "%d", sh.x_nchw);
    fg_em_set(em, "BM", "%d", tile->bm);
    fg_em_set(em, "BN", "%d", tile->bn);
    fg_em_set(em, "WARPS_M", "%d", tile->warps_m);
    fg_em_set(em, "WARPS_N", "%d", tile->warps_n);
    fg_em_set(em, "PAIR", "%d", K % 2 == 0);
    /* a warp's fragments per row in fours: the quad-transposed 16-byte epilogue
     * (VEC_EPI, set again by the epilogue when K is a multiple of 8) */
    fg_em_set(em, "VEC_EPI", "0");
    if (tile->bn / tile->warps_n / 8 % 4 == 0)
        em->epi_vec_axis = 2;   /* the channel axis */
    fg_em_set(em, "SPLITS", "%d", splits);
    fg_em_set(em, "KT_SPLIT", "%" PRId64, kt_split);
    fg_em_set(em, "SPLIT", "%d", splits > 1);

    unsigned gm = (unsigned)((M + tile->bm - 1) / tile->bm), gn = (unsigned)((K + tile->bn - 1) / tile->bn);
    /* split-K: splits slots of BM x BN floats per tile, one counter per tile */
    int64_t tiles = (int64_t)gm * gn;
    fg_em_split_buffers(em, splits > 1 ? tiles * splits * tile->bm * tile->bn * 4 : 0, tiles);

    unsigned threads = 32u * (unsigned)(tile->warps_m * tile->warps_n);
    fg_buf_printf(&em->notes, "//   tile:      %d x %d x %d, %d stages, %u threads (%d x %d warps), split-K %d "
                  "(%" PRId64 " of %" PRId64 " k tiles each), %s%s\n", tile->bm, tile->bn, 4 * epc, TC_STAGES, threads,
                  tile->warps_m, tile->warps_n, splits, kt_split, sh.KT,
                  dt == FG_DTYPE_F32 ? "mma m16n8k8 tf32" : "mma m16n8k16",
                  sh.x_nchw ? ", element gather (x is NCHW), loads a tile ahead"
                  : sh.gather ? ", element gather (C not a multiple of 16 bytes), loads a tile ahead" : "");
    em->template_file = "conv2d_tc.cuh";
    em->threads = threads;
    em->k->grid[0] = gm;
    em->k->grid[1] = gn;
    em->k->grid[2] = (unsigned)splits;
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* tile_m x tile_n is one of tc_tiles, which the emitter checks */
static const fg_tile_key tiles[] = {
    {.name = "tile_m", .min = 32, .max = 128},
    {.name = "tile_n", .min = 32, .max = 128},
    {.name = "split_k", .min = 1, .max = 64},
    {0},
};

static const fg_template rows[] = {
    {.name = "conv2d_tc", .family = "conv2d", .order = 22, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_CONV2D,
     .dtypes = FG_DTYPES_FLOAT, .priority = 20, .tiles = tiles,
     .map_refusal = "it loads 16-byte channel vectors of its input (cp.async), which an input map does not keep "
                    "contiguous",
     .check = check_conv2d_tc, .describe = describe_conv2d_tc, .emit = emit_conv2d_tc,
     .summary = "NHWC implicit-GEMM convolution on tensor cores, groups 1: fp16/bf16 (C % 8 == 0), fp32 with "
                "precision tf32 (C % 4 == 0); tile and split-K chosen per shape"},
};
FG_TEMPLATE_FAMILY(conv2d_tc, rows);
