/*
 * emit_gemm_wgmma.c -- the gemm_wgmma template of the gemm family
 * (templates/gemm_wgmma.cuh): fp16 / bf16 (and fp32 with precision tf32)
 * matmuls on Hopper with wgmma from
 * shared-memory descriptors, TMA loads into a ring of stages completed on
 * mbarriers, two warpgroups of which thread 0 also issues the loads
 * (docs/codegen.md, "gemm_wgmma").
 *
 * Selection is by capability: the target arch known to codegen (the context's
 * arch option, else $FUSEGEN_ARCH; the planner passes it in fg_tcand.arch) is
 * sm_90 / sm_90a, operands and output of one dtype, fp16 or bf16 (or fp32
 * when the graph's precision is tf32: wgmma k8 on tf32, which reads B only
 * K-major, so B stored [N, K]), A stored
 * [M, K] (K contiguous, as wgmma's A operand), B either way, K and N
 * multiples of 8 (16-byte rows for the tensor maps), batched only as
 * A [batch..., M, K] (contiguous) times a shared B, and a shape that gives
 * at least WG_MIN_TILES tiles.  Otherwise the mma.sync templates run it.
 * The kernel needs the architecture-specific target: fg_kernel.arch_specific.
 *
 * conv2d_wgmma (family conv2d) renders the same kernel for NHWC convolutions
 * with stride 1 and one group whose output is as large as the input.  A is
 * the input viewed as [N*H*W, C] (C contiguous), B the weights [K, R*S*C]
 * (K-major; a 1x1 kernel is stored so in either layout), the output
 * [N*H*W, K] (NHWC); the epilogue recovers (n, oh, ow) from the row.  A
 * 1x1 kernel is a plain GEMM; an R x S one (TAPS) loads, for each tap, the
 * rows of A shifted by that tap's constant offset, and each warpgroup
 * zeroes those of its rows that fell into the padding.  Both templates share the geometry
 * (wg_geom), the arch and tile-count conditions (wg_ok) and the emitter
 * (wg_emit); only the way the geometry is read off the anchor differs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "kind.h"
#include "shape.h"
#include "template.h"
#include "tile_choice.h"

#define WG_BM 128             /* rows of a block tile: two warpgroups of 64 */
#define WG_ROW 128            /* bytes of k per stage and row: one 128B swizzle row (64 fp16 / bf16, 32 tf32) */
#define WG_THREADS 256        /* two warpgroups; thread 0 also loads (no producer warpgroup) */
#define WG_MAX_BPS 2          /* blocks an SM at most: 65536 / (2 x 256) = 128 registers a thread */
#define WG_TARGET_SMS FG_TARGET_SMS   /* an H100 / H200 */
#define WG_MIN_TILES 66       /* half the SMs: a wgmma tile does about twice an mma.sync tile's work rate */
#define WG_SMEM_MAX (227 * 1024)
#define WG_SPLIT_MIN_FLOP 5e8 /* split-K only above this many FLOPs (below, launch and fill dominate) */
#define WG_SPLIT_MIN_KT 4     /* k tiles each split keeps at least */
#define WG_MAX_SPLITS 8       /* splits by default at most (the tile hook: 16) */

/* The default split-K of a kernel with `tiles` tiles of 128 x bn over KT k
 * tiles (flops in all; bps blocks an SM holds): 1 when the tiles fill the
 * SMs, the FLOPs are under WG_SPLIT_MIN_FLOP or KT is too short; else, of
 * the splits that give at least as many units (tile, split) as SMs, the one
 * the latency model prices lowest (tile_choice.h: whole waves of k tiles,
 * the partials and their reduction). */
/* The default depth of the ring for tiles of 128 x bn: 3 stages for BN 128
 * (99 KB of shared memory, two blocks an SM), else 4 (BN 64: 97 KB, two
 * blocks; BN 256: 193 KB, one). */
static int wg_default_stages(int bn) { return bn == 128 ? 3 : 4; }

/* Dynamic shared memory of a block: the ring, its full and empty mbarriers,
 * the taps' two `fixed` barriers, split-K's two meeting barriers, two
 * `told` barriers and two flags, and 1024 bytes to realign the ring. */
static int64_t wg_smem(int64_t stages, int64_t stage_bytes, int taps, int split)
{
    return stages * stage_bytes + 16 * stages + (taps ? 16 : 0) + (split ? 48 : 0) + 1024;
}

/* Blocks of WG_THREADS an SM holds at once with smem bytes of dynamic
 * shared memory each (228 KiB an SM; a block also takes 1 KiB reserved by
 * the system and the 1 KiB of static shared memory ptxas reports for the
 * 1024-byte aligned dynamic array), at most
 * WG_MAX_BPS; it is also the launch bound's minimum blocks, which caps the
 * registers. */
static int wg_blocks_per_sm(int64_t smem)
{
    int64_t n = (228 * 1024) / (smem + 2048);
    return n < 1 ? 1 : n > WG_MAX_BPS ? WG_MAX_BPS : (int)n;
}

static int wg_default_splits(int64_t tiles, int bn, int64_t KT, double flops, int eb, int bps)
{
    if (tiles >= WG_TARGET_SMS || flops < WG_SPLIT_MIN_FLOP || KT < 2 * WG_SPLIT_MIN_KT)
        return 1;
    fg_tc_problem p = {.M = tiles * 128, .N = bn, .batch = 1, .KT = KT, .bk = 128 / eb, .eb = eb, .wgmma = 1};
    fg_tc_cand t = {128, bn, bps};
    int best = 1, last = 0;
    double best_us = 0;
    for (int s = 2; s <= WG_MAX_SPLITS && KT / s >= WG_SPLIT_MIN_KT; s++) {
        int64_t kts = (KT + s - 1) / s;
        int used = (int)((KT + kts - 1) / kts);
        if (used == last || tiles * used < WG_TARGET_SMS)
            continue;
        last = used;
        double us = fg_tc_estimate(&p, &t, used, WG_TARGET_SMS);
        if (best == 1 || us < best_us * 0.99) {
            best = used;
            best_us = us;
        }
    }
    return best;
}

/* What the kernel needs of a matmul, or 0 with the reason. */
typedef struct wg_geom {
    fg_matmul_geom_t d;
    int at, bt, tb;      /* tb: B stored [N, K] (the node's trans_b) */
    int64_t rows;        /* MR: batch * M, the rows of the folded A and Y */
    int conv;            /* a convolution: d.M = rows = N*OH*OW, d.N = K, d.K = R*S*C */
    int64_t oh, ow;      /* conv: the output's height and width (= the input's when taps) */
    int taps;            /* conv: an R x S kernel with R*S > 1 (TAPS in the template) */
    int64_t c, s;        /* conv: input channels, kernel width */
    int64_t dh, dw, pt, pl;   /* conv with taps or pixel tiles: dilation, top and left padding */
    int pix;             /* conv: pixel tiles (PIX): any stride, padding and output size */
    int64_t ni, h, wd;   /* conv: images, the input's height and width */
    int64_t sh, sw;      /* conv: stride */
    int tw, th, tn;      /* pixel tiles: a tile of BM output pixels is tn images x th rows x tw columns */
    int64_t mtiles;      /* tiles along the rows (pixels) */
} wg_geom;

/* Whether the wgmma path takes dtype dt under the graph's precision (fp32
 * only as tf32, never exact); 0 with the reason. */
static int wg_dtype_ok(const fg_graph *g, fg_dtype dt, const char *what, char *why, size_t whysz)
{
    if (dt == FG_DTYPE_F16 || dt == FG_DTYPE_BF16 || (dt == FG_DTYPE_F32 && g->precision == FG_PRECISION_TF32))
        return 1;
    if (dt == FG_DTYPE_F32)
        snprintf(why, whysz, "fp32 with precision %s (fp32 runs on wgmma only with precision tf32)",
                 fg_precision_name(g->precision));
    else
        snprintf(why, whysz, "%s (wgmma takes fp16, bf16 or tf32, one dtype)", what);
    return 0;
}

/* Element bytes and k per stage of a dtype the path takes. */
static int wg_eb(fg_dtype dt) { return dt == FG_DTYPE_F32 ? 4 : 2; }
static int wg_bk(fg_dtype dt) { return WG_ROW / wg_eb(dt); }

static int64_t wg_tiles(const wg_geom *w, int bn) { return w->mtiles * ((w->d.N + bn - 1) / bn); }

/* BN: 64 for narrow outputs, and where 128 would leave more than half the
 * SMs idle (ResNet-50's last stage at batch 32); else 128 (256 by the tile
 * hook). */
static int default_bn(const wg_geom *w)
{
    return w->d.N <= 64 || wg_tiles(w, 128) < WG_MIN_TILES ? 64 : 128;
}

/* The pixel tile of a PIX conv: tn x th x tw = BM output pixels (powers of
 * two), each box extent within TMA's 256 (tw * sw, th * sh), covering the
 * ni x oh x ow output with the fewest padded pixels; ties go to wider
 * rows. */
static void pix_tile(wg_geom *w)
{
    int64_t best = -1;
    for (int tw = 1; tw <= WG_BM; tw *= 2)
        for (int th = 1; tw * th <= WG_BM; th *= 2) {
            int tn = WG_BM / (tw * th);
            if (tw * w->sw > 256 || th * w->sh > 256)
                continue;
            int64_t cw = (w->ow + tw - 1) / tw, ch = (w->oh + th - 1) / th, cn = (w->ni + tn - 1) / tn;
            int64_t cost = cw * ch * cn;   /* tiles of BM pixels */
            if (best < 0 || cost <= best) {
                best = cost;
                w->tw = tw;
                w->th = th;
                w->tn = tn;
            }
        }
    w->mtiles = best;
}

/* Whether the tiles (at the narrowest BN, 64) number below 2^31: the
 * persistent kernel's tile index and grid are 32-bit; 0 with the reason. */
static int tiles_fit(const wg_geom *w, char *why, size_t whysz)
{
    if (wg_tiles(w, 64) < ((int64_t)1 << 31) - 1)
        return 1;
    snprintf(why, whysz, "%" PRId64 " tiles of %d x 64 exceed the grid", wg_tiles(w, 64), WG_BM);
    return 0;
}

/* The text that makes a tile loop's `tile` into the tile's origin, at
 * indent spaces: n0 (its first column), and m0 (its first row) or, for
 * pixel tiles, (nb0, oh0, ow0) (its first image, output row and column). */
static void tile_origin(const wg_geom *w, int indent, fg_buf *b)
{
    fg_buf_printf(b, "%*sconst int mt = tile / NT, nt = tile %% NT;   // the tile's row and column tile\n", indent, "");
    if (w->pix) {
        fg_buf_printf(b, "%*sconst fg_i64 n0 = (fg_i64)nt * BN;\n", indent, "");
        fg_buf_printf(b, "%*sconst int ow0 = mt %% (int)TILES_W * TW, oh0 = mt / (int)TILES_W %% (int)TILES_H * TH;\n",
                      indent, "");
        fg_buf_printf(b, "%*sconst int nb0 = mt / (int)(TILES_W * TILES_H) * TN;\n", indent, "");
        return;
    }
    fg_buf_printf(b, "%*sconst fg_i64 m0 = (fg_i64)mt * BM, n0 = (fg_i64)nt * BN;\n", indent, "");
}

static int wg_geometry(const fg_graph *g, int anchor, int out, wg_geom *w, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[anchor];
    memset(w, 0, sizeof *w);
    w->at = nd->inputs[0];
    w->bt = nd->inputs[1];
    int ta = fg_node_attr(nd, "trans_a") && fg_node_attr_int(nd, "trans_a", 0) != 0;
    w->tb = fg_node_attr(nd, "trans_b") && fg_node_attr_int(nd, "trans_b", 0) != 0;
    const fg_tensor *A = &g->tensors[w->at], *B = &g->tensors[w->bt], *Y = &g->tensors[nd->output];
    const fg_tensor *O = &g->tensors[out];
    if (!fg_matmul_geom(A, B, ta, w->tb, &w->d, why, whysz))
        return 0;
    const fg_tensor *ts[] = {A, B, Y, O};
    for (int i = 0; i < 4; i++)
        if (ts[i]->rank == 4 && ts[i]->layout != FG_LAYOUT_NCHW) {
            snprintf(why, whysz, "%s is %s (matmul operands are row-major)", ts[i]->name,
                     fg_layout_name(ts[i]->layout));
            return 0;
        }
    if (O->rank != w->d.yrank || memcmp(O->shape, w->d.yshape, sizeof(int64_t) * (size_t)O->rank) != 0) {
        snprintf(why, whysz, "the group's output %s is not the matmul's shape", O->name);
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "operands %s and %s, output %s", fg_dtype_name(A->dtype), fg_dtype_name(B->dtype),
             fg_dtype_name(Y->dtype));
    if (A->dtype != Y->dtype || B->dtype != Y->dtype) {
        snprintf(why, whysz, "%s (wgmma takes fp16, bf16 or tf32, one dtype)", what);
        return 0;
    }
    if (!wg_dtype_ok(g, Y->dtype, what, why, whysz))
        return 0;
    if (Y->dtype == FG_DTYPE_F32 && !w->tb) {
        snprintf(why, whysz, "B %s stored [K, N] (tf32 wgmma reads B K-major only: [N, K], trans_b)", B->name);
        return 0;
    }
    if (ta || w->d.a_vec || w->d.b_vec) {
        snprintf(why, whysz, "%s", ta ? "A stored [K, M] (the template reads A K-major)" : "a vector operand");
        return 0;
    }
    if (w->d.K % 8 || w->d.N % 8) {
        snprintf(why, whysz, "K %" PRId64 " or N %" PRId64 " not a multiple of 8 (TMA needs 16-byte rows)", w->d.K,
                 w->d.N);
        return 0;
    }
    /* batches: A's matrices back to back (a_base = bt * M * K), one B */
    if (w->d.nbatch > 0) {
        int64_t step = w->d.M * w->d.K;
        for (int i = w->d.nbatch - 1; i >= 0; i--) {
            if (w->d.bshape[i] > 1 && w->d.astride[i] != step) {
                snprintf(why, whysz,
                         "A's batch axes are broadcast or not contiguous (the template folds them into rows)");
                return 0;
            }
            step *= w->d.bshape[i];
        }
        if (w->d.b_batched) {
            snprintf(why, whysz, "B differs per batch (the template takes one B for every batch)");
            return 0;
        }
    }
    w->rows = w->d.M * w->d.batch;
    w->mtiles = (w->rows + WG_BM - 1) / WG_BM;
    if (w->rows >= (int64_t)1 << 31 || w->d.N >= (int64_t)1 << 31 || w->d.K >= (int64_t)1 << 31) {
        snprintf(why, whysz, "a dimension reaches 2^31 (TMA coordinates are 32-bit)");
        return 0;
    }
    if (!tiles_fit(w, why, whysz))
        return 0;
    return 1;
}

/* The GEMM a convolution is, or 0 with the reason: groups 1; input,
 * output and the group's output NHWC; one dtype, fp16 or bf16 (fp32 with
 * precision tf32); C and K multiples of 8 (TMA's 16-byte rows).  Three
 * ways to read the input, the first that applies:
 *   - a 1x1 kernel, stride 1, no padding: x viewed as [N*H*W, C] is A (the
 *     weights' layout does not matter: a 1x1 kernel is [K, C] in both);
 *   - taps: an R x S kernel, stride 1, an output as large as the input, so
 *     a tap shifts the rows of that view by a constant (padding rows zeroed
 *     in shared memory);
 *   - pixel tiles (pix): anything else with strides up to 8 (TMA's element
 *     stride): a tile is a tn x th x tw block of output pixels, and each k
 *     tile one 4-D TMA box of x [N, H, W, C] stepping by the stride, its
 *     start moved by the tap and the padding (outside the image: zeros).
 * An R x S kernel needs NHWC weights ([K, R*S*C], K-major) and C a multiple
 * of BK (64 channels, 32 in tf32: a k tile lies in one tap). */
static int wg_conv_geometry(const fg_graph *g, int anchor, int out, wg_geom *w, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[anchor];
    memset(w, 0, sizeof *w);
    w->conv = 1;
    w->at = nd->inputs[0];
    w->bt = nd->inputs[1];
    w->tb = 1;   /* the weights are B stored [N, K]: K-major */
    const fg_tensor *x = &g->tensors[w->at], *wt = &g->tensors[w->bt], *y = &g->tensors[nd->output];
    const fg_tensor *o = &g->tensors[out];
    if (x->rank != 4 || wt->rank != 4 || y->rank != 4 || o->rank != 4) {
        snprintf(why, whysz, "needs rank-4 input, weight and output");
        return 0;
    }
    int64_t groups = fg_node_attr(nd, "groups") ? fg_node_attr_int(nd, "groups", 0) : 1;
    int64_t pb[2], pe[2];
    fg_node_pads(nd, pb, pe);
    int64_t R = wt->shape[2], S = wt->shape[3];
    int rs = R * S > 1;
    w->sh = fg_node_attr_int(nd, "stride", 0);
    w->sw = fg_node_attr_int(nd, "stride", 1);
    int stride1 = w->sh == 1 && w->sw == 1, padded = pb[0] || pb[1] || pe[0] || pe[1];
    int same = y->shape[2] == x->shape[2] && y->shape[3] == x->shape[3];
    w->taps = rs && stride1 && same;
    w->pix = !w->taps && (rs || !stride1 || padded);
    if (w->pix && (w->sh > 8 || w->sw > 8)) {
        snprintf(why, whysz, "stride %" PRId64 "x%" PRId64 " (TMA steps at most 8 elements)", w->sh, w->sw);
        return 0;
    }
    if (groups != 1) {
        snprintf(why, whysz, "groups %" PRId64 " (one group only)", groups);
        return 0;
    }
    const fg_tensor *nchw = x->layout != FG_LAYOUT_NHWC ? x : y->layout != FG_LAYOUT_NHWC ? y
                          : o->layout != FG_LAYOUT_NHWC ? o : NULL;
    if (!nchw && rs && wt->layout != FG_LAYOUT_NHWC)
        nchw = wt;
    if (nchw) {
        snprintf(why, whysz, "%s is %s (the GEMM view needs NHWC activations)", nchw->name,
                 fg_layout_name(nchw->layout));
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "input %s, weight %s, output %s", fg_dtype_name(x->dtype), fg_dtype_name(wt->dtype),
             fg_dtype_name(o->dtype));
    if (x->dtype != y->dtype || wt->dtype != y->dtype || o->dtype != y->dtype) {
        snprintf(why, whysz, "%s (wgmma takes fp16, bf16 or tf32, one dtype)", what);
        return 0;
    }
    if (!wg_dtype_ok(g, y->dtype, what, why, whysz))
        return 0;
    int64_t N = x->shape[0], C = x->shape[1], K = wt->shape[0];
    if (wt->shape[1] != C || y->shape[1] != K || y->shape[0] != N || memcmp(o->shape, y->shape, sizeof(int64_t) * 4)) {
        snprintf(why, whysz, "input %s, weight %s and output %s do not agree (or the group's output %s is not the "
                 "conv's shape)", x->name, wt->name, y->name, o->name);
        return 0;
    }
    if (C % 8 || K % 8) {
        snprintf(why, whysz, "C %" PRId64 " or K %" PRId64 " not a multiple of 8 (TMA needs 16-byte rows)", C, K);
        return 0;
    }
    if (rs && C % wg_bk(y->dtype)) {
        snprintf(why, whysz, "C %" PRId64 " not a multiple of %d (a k tile of a %" PRId64 "x%" PRId64 " kernel lies "
                 "in one tap)", C, wg_bk(y->dtype), R, S);
        return 0;
    }
    w->c = C;
    w->s = S;
    w->dh = fg_node_attr_int(nd, "dilation", 0);
    w->dw = fg_node_attr_int(nd, "dilation", 1);
    w->pt = pb[0];
    w->pl = pb[1];
    w->ni = N;
    w->h = x->shape[2];
    w->wd = x->shape[3];
    w->oh = y->shape[2];
    w->ow = y->shape[3];
    w->rows = N * w->oh * w->ow;
    w->d.M = w->rows;
    w->d.N = K;
    w->d.K = R * S * C;
    w->d.batch = 1;
    w->d.nbatch = 0;
    if (w->pix)
        pix_tile(w);
    else
        w->mtiles = (w->rows + WG_BM - 1) / WG_BM;
    if (w->rows >= (int64_t)1 << 31 || N * w->h * w->wd >= (int64_t)1 << 31 || K >= (int64_t)1 << 31 ||
        w->d.K >= (int64_t)1 << 31) {
        snprintf(why, whysz, "a dimension reaches 2^31 (TMA coordinates are 32-bit)");
        return 0;
    }
    if (!tiles_fit(w, why, whysz))
        return 0;
    return 1;
}

/* The geometry of the anchor: a conv2d's or a matmul's. */
static int wg_anchor_geometry(const fg_graph *g, int anchor, int out, wg_geom *w, char *why, size_t whysz)
{
    if (g->nodes[anchor].op->kind == FG_OPK_CONV2D)
        return wg_conv_geometry(g, anchor, out, w, why, whysz);
    return wg_geometry(g, anchor, out, w, why, whysz);
}

/* The candidate's geometry with the shape conditions (the registry checked
 * the arch, fg_template.arch_ok): 1 = the template takes it. */
static int wg_ok(const fg_tcand *c, wg_geom *w, char *why, size_t whysz)
{
    for (int i = 1; i < c->nnodes; i++) {
        const fg_node *nd = &c->g->nodes[c->nodes[i]];
        if (fg_kind(nd->op->kind)->role != FG_ROLE_ELEMENTWISE && !nd->folded) {
            snprintf(why, whysz, "%s (op %s) after the matmul is not element-wise", nd->name, nd->op->name);
            return 0;
        }
    }
    if (!wg_anchor_geometry(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, w, why, whysz))
        return 0;
    int64_t tiles = wg_tiles(w, default_bn(w));
    if (w->rows < WG_BM || tiles < WG_MIN_TILES) {
        if (w->conv)
            snprintf(why, whysz, "%" PRId64 " pixels x K %" PRId64 " is %" PRId64 " tiles of %d x %d (wants %d pixels "
                     "and %d tiles, half of %d SMs)", w->rows, w->d.N, tiles, WG_BM, default_bn(w), WG_BM,
                     WG_MIN_TILES, WG_TARGET_SMS);
        else
            snprintf(why, whysz, "M %" PRId64 " x N %" PRId64 " (batch %" PRId64 ") is %" PRId64 " tiles of %d x %d "
                     "(wants M >= %d and %d tiles, half of %d SMs)", w->d.M, w->d.N, w->d.batch, tiles, WG_BM,
                     default_bn(w), WG_BM, WG_MIN_TILES, WG_TARGET_SMS);
        return 0;
    }
    return 1;
}

/* Both templates' check (the kinds they compute tell a matmul from a conv). */
static int check_wgmma(const fg_tcand *c, char *why, size_t whysz)
{
    wg_geom w;
    if (c->anchor < 0) {
        snprintf(why, whysz, "no %s anchor", fg_op_kind_name(c->g->nodes[c->main_node].op->kind));
        return 0;
    }
    return wg_ok(c, &w, why, whysz);
}

/* Both templates' --explain line (the anchor tells which). */
static void describe_wgmma(const fg_tcand *c, char *buf, size_t size)
{
    wg_geom w;
    char why[256];
    buf[0] = 0;
    if (c->anchor < 0 || !wg_ok(c, &w, why, sizeof why))
        return;
    int bn = default_bn(&w);
    fg_dtype dt = c->g->tensors[c->g->nodes[c->anchor].output].dtype;
    int bk = wg_bk(dt);
    int64_t KT = (w.d.K + bk - 1) / bk;
    int splits = wg_default_splits(wg_tiles(&w, bn), bn, KT, 2.0 * w.rows * w.d.N * w.d.K, wg_eb(dt), 1);
    char mma[96];
    const int stages = wg_default_stages(bn);
    int64_t kts = (KT + splits - 1) / splits;
    if (splits > 1)
        snprintf(mma, sizeof mma, "%s, split-K %d (%" PRId64 " of %" PRId64 " k tiles each)",
                 dt == FG_DTYPE_F32 ? "TMA + wgmma tf32" : "TMA + wgmma", splits, kts, KT);
    else
        snprintf(mma, sizeof mma, "%s", dt == FG_DTYPE_F32 ? "TMA + wgmma tf32" : "TMA + wgmma");
    if (w.conv) {
        char how[160];
        if (w.pix)
            snprintf(how, sizeof how, "implicit GEMM over pixel tiles of %d x %d x %d, one strided TMA box per tap",
                     w.tn, w.th, w.tw);
        else
            snprintf(how, sizeof how, "%s",
                     w.taps ? "implicit GEMM over shifted rows, padding rows zeroed" : "1x1 conv as a GEMM");
        snprintf(buf, size, "tile %d x %d x %d, %d stages, %s, %s (%s: %" PRId64 " pixels, K %" PRId64
                 ", C %" PRId64 ": %" PRId64 " tiles for %d SMs)", WG_BM, bn, bk, stages, mma, c->arch, how, w.rows,
                 w.d.N, w.c, wg_tiles(&w, bn), WG_TARGET_SMS);
        return;
    }
    snprintf(buf, size, "tile %d x %d x %d, %d stages, %s, %s (M %" PRId64 " x batch %" PRId64 ", N %" PRId64
             ", K %" PRId64 ": %" PRId64 " tiles for %d SMs)", WG_BM, bn, bk, stages, mma, c->arch, w.d.M, w.d.batch,
             w.d.N, w.d.K, wg_tiles(&w, bn), WG_TARGET_SMS);
}

/* Adds a tensor-map parameter over tensor t, of elements of eb bytes:
 * rank axes, dims dim (axis 0 contiguous, the others packed inside each
 * other), box extents box, element steps estride (NULL: 1). */
static const char *add_tmap(fg_emitter *em, const char *name, int t, int rank, const int64_t *dim, const int *box,
                            const int *estride, int eb)
{
    fg_kernel *k = em->k;
    if (k->nparams >= FG_MAX_KPARAMS || k->ntmaps >= FG_MAX_TMAPS || rank > FG_KTMAP_MAX_RANK) {
        fg_em_fail(em, "too many kernel parameters");
        return "?";
    }
    fg_kparam_tmap *m = &k->tmaps[k->ntmaps];
    memset(m, 0, sizeof *m);
    m->rank = rank;
    int64_t stride = eb;
    for (int i = 0; i < rank; i++) {
        m->dim[i] = dim[i];
        if (i > 0)
            m->stride[i - 1] = stride;
        stride *= dim[i];
        m->box[i] = box[i];
        m->estride[i] = estride ? estride[i] : 1;
    }
    m->swizzle = 128;
    m->elem_bytes = eb;
    fg_kparam *kp = &k->params[k->nparams++];
    memset(kp, 0, sizeof *kp);
    kp->kind = FG_KPARAM_TMAP;
    kp->tensor = t;
    kp->value = k->ntmaps++;
    snprintf(kp->name, sizeof kp->name, "%s", name);
    return kp->name;
}

/* A 2-D tensor map: dim0 x dim1 elements, boxes of box0 x box1. */
static const char *add_tmap2(fg_emitter *em, const char *name, int t, int64_t dim0, int64_t dim1, int box0, int box1,
                             int eb)
{
    const int64_t dim[2] = {dim0, dim1};
    const int box[2] = {box0, box1};
    return add_tmap(em, name, t, 2, dim, box, NULL, eb);
}

/* The text that turns row r of the block's tile into the row `grow` of the
 * folded output, `live` (the row lies inside the output: the epilogue reads
 * and stores nothing for other rows), and recovers the batch
 * coordinates yb<i> and the matrix row `row` (a conv: the pixel's n, oh,
 * ow; pixel tiles: the pixel first, then its row). */
static void tile_rows(fg_emitter *em, const wg_geom *w, fg_buf *b)
{
    const fg_matmul_geom_t *d = &w->d;
    if (w->conv) {
        fg_em_shape(em, "OH", w->oh);
        fg_em_shape(em, "OW", w->ow);
    }
    if (w->pix) {   /* the tile is tn x th x tw pixels from (nb0, oh0, ow0) */
        fg_em_shape(em, "NI", w->ni);
        fg_buf_put(b, "            const fg_i64 n = nb0 + r / (TW * TH), oh = oh0 + r / TW % TH, ow = ow0 + r % TW;   "
                      "// the output pixel\n"
                      "            const bool live = n < NI && oh < OH && ow < OW;\n"
                      "            const fg_i64 grow = (n * OH + oh) * OW + ow;   // its row of Y [N*OH*OW, K]\n");
        return;
    }
    fg_buf_put(b, "            const fg_i64 grow = m0 + r;\n"
                  "            const bool live = grow < MR;\n");
    if (w->conv) {   /* the row is the output pixel (n, oh, ow) of an NHWC image */
        fg_buf_put(b, "            const fg_i64 ow = grow % OW, oh = grow / OW % OH, n = grow / (OW * OH);   "
                      "// the output pixel\n");
        return;
    }
    if (d->nbatch == 0) {
        fg_buf_put(b, "            const fg_i64 row = grow;\n");
        return;
    }
    fg_buf_put(b, "            const fg_i64 bt = grow / M, row = grow - bt * M;   // the batch, the row in it\n");
    fg_em_batch_coords(em, d, 3, b);
}

/* The coordinates fg_epilogue takes for column `col`: the output's logical
 * ones (a conv's (n, k, oh, ow); a matmul's batch coordinates, row, col). */
static void epi_args(const wg_geom *w, const char *col, fg_buf *b)
{
    if (w->conv) {
        fg_buf_printf(b, "n, %s, oh, ow", col);
        return;
    }
    for (int i = 0; i < w->d.nbatch; i++)
        fg_buf_printf(b, "%syb%d", b->len ? ", " : "", i);
    fg_buf_printf(b, "%srow, %s", b->len ? ", " : "", col);
}

/* Renders gemm_wgmma.cuh for the anchor (a matmul, or a 1x1 conv2d when
 * kind is FG_OPK_CONV2D): the geometry, the tile hook's tile_n and stages,
 * the tensor maps, the placeholders and the launch. */
static fg_status wg_emit(fg_emitter *em, fg_op_kind kind)
{
    int a = em->grp->anchor;
    wg_geom w;
    char why[300];
    const char *what = kind == FG_OPK_CONV2D ? "conv2d" : "matmul";
    if (!wg_anchor_geometry(em->g, a, em->out, &w, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template %s cannot run %s '%s': %s", em->grp->template_name,
                           what, em->g->nodes[a].name, why);
    fg_dtype dt = em->ot->dtype;
    const int eb = wg_eb(dt), bk = wg_bk(dt);
    const int64_t KT = (w.d.K + bk - 1) / bk;
    int bn0 = default_bn(&w);
    const char *keys[] = {"tile_n", "stages", "split_k"};
    int64_t v[3] = {bn0, 0,   /* stages: 0 until the hook has had its say, then the default of the tile */
                    wg_default_splits(wg_tiles(&w, bn0), bn0, KT, 2.0 * w.rows * w.d.N * w.d.K, eb, 1)};
    fg_status st = fg_em_tile_params(em, keys, 3, v);
    if (st != FG_OK)
        return st;
    int bn = (int)v[0];
    if (v[1] == 0)
        v[1] = wg_default_stages(bn);
    if (v[2] > KT)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: split_k = %" PRId64 " (want 1 to %" PRId64
                           ", the reduction's k tiles, at most 16)", v[2], KT < 16 ? KT : 16);
    int64_t kt_split = (KT + v[2] - 1) / v[2];
    int splits = (int)((KT + kt_split - 1) / kt_split);   /* none empty */
    int64_t stage_bytes = (int64_t)(WG_BM + bn) * WG_ROW;
    if (v[1] < 3 || v[1] > 5 || wg_smem(v[1], stage_bytes, w.taps, splits > 1) > WG_SMEM_MAX)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: stages = %" PRId64 " (want 3 to 5 stages of %" PRId64
                           " bytes within %d bytes of shared memory)", v[1], stage_bytes, WG_SMEM_MAX);
    int stages = (int)v[1];
    int trans_b = !w.tb;   /* wgmma's B N-major: B stored [K, N] */

    /* the operands as tensors (the executor's liveness, the header) and as tensor maps */
    fg_em_tensor(em, w.at, 0);
    fg_em_tensor(em, w.bt, 0);
    const char *ma;
    if (w.pix) {   /* x [N, H, W, C] as a 4-D map; a box of tn x th x tw pixels, stepping by the stride */
        const int64_t dim[4] = {w.c, w.wd, w.h, w.ni};
        const int box[4] = {bk, (int)(w.tw * w.sw), (int)(w.th * w.sh), w.tn};
        const int step[4] = {1, (int)w.sw, (int)w.sh, 1};
        ma = add_tmap(em, "tmap_a", w.at, 4, dim, box, step, eb);
    } else {
        ma = add_tmap2(em, "tmap_a", w.at, w.conv ? w.c : w.d.K, w.rows, bk, WG_BM, eb);
    }
    const char *mb = trans_b ? add_tmap2(em, "tmap_b", w.bt, w.d.N, w.d.K, 64, bk, eb)
                             : add_tmap2(em, "tmap_b", w.bt, w.d.K, w.d.N, bk, bn, eb);
    if (!w.pix)
        fg_em_shape(em, "MR", w.rows);
    if (!w.conv)
        fg_em_shape(em, "M", w.d.M);
    fg_em_shape(em, "N", w.d.N);
    fg_em_shape(em, "K", w.d.K);
    fg_em_set(em, "TMAP_A", "%s", ma);
    fg_em_set(em, "TMAP_B", "%s", mb);
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_buf t = {0};
    tile_rows(em, &w, &t);
    fg_em_set(em, "ROW", "%s", t.s ? t.s : "");
    fg_buf_free(&t);
    tile_origin(&w, 8, &t);
    fg_em_set(em, "TILE_P", "%s", t.s);
    fg_buf_free(&t);
    tile_origin(&w, 8, &t);
    fg_em_set(em, "TILE_C", "%s", t.s);
    fg_buf_free(&t);
    fg_em_shape(em, "MT", w.mtiles);
    epi_args(&w, "col", &t);
    fg_em_set(em, "EPI_ARGS", "%s", t.s);
    fg_buf_free(&t);
    epi_args(&w, "col + 1", &t);
    fg_em_set(em, "EPI_ARGS1", "%s", t.s);
    fg_buf_free(&t);
    em->epi_vec_axis = w.conv ? 2 : em->ot->rank;   /* columns: the channel axis, or the last */
    fg_em_set(em, "BN", "%d", bn);
    fg_em_set(em, "STAGES", "%d", stages);
    fg_em_set(em, "EB", "%d", eb);
    fg_em_set(em, "TB", "%d", trans_b);
    fg_em_set(em, "TAPS", "%d", w.taps);
    fg_em_set(em, "PIX", "%d", w.pix);
    if (w.pix) {
        fg_em_shape(em, "C", w.c);
        fg_em_shape(em, "S", w.s);
        fg_em_shape(em, "SH", w.sh);
        fg_em_shape(em, "SW", w.sw);
        fg_em_shape(em, "DH", w.dh);
        fg_em_shape(em, "DW", w.dw);
        fg_em_shape(em, "PT", w.pt);
        fg_em_shape(em, "PL", w.pl);
        fg_em_shape(em, "TILES_W", (w.ow + w.tw - 1) / w.tw);
        fg_em_shape(em, "TILES_H", (w.oh + w.th - 1) / w.th);
        fg_em_set(em, "TW", "%d", w.tw);
        fg_em_set(em, "TH", "%d", w.th);
        fg_em_set(em, "TN", "%d", w.tn);
    }
    if (w.taps) {
        const fg_tensor *x = &em->g->tensors[w.at];
        fg_em_shape(em, "C", w.c);
        fg_em_shape(em, "H", x->shape[2]);
        fg_em_shape(em, "W", x->shape[3]);
        fg_em_shape(em, "S", w.s);
        fg_em_shape(em, "DH", w.dh);
        fg_em_shape(em, "DW", w.dw);
        fg_em_shape(em, "PT", w.pt);
        fg_em_shape(em, "PL", w.pl);
    }
    fg_em_set(em, "WGMMA", "%s", dt == FG_DTYPE_BF16 ? "fg_wgmma_bf16" : dt == FG_DTYPE_F32 ? "fg_wgmma_tf32"
                                                                                       : "fg_wgmma_f16");
    fg_em_set(em, "SPLITS", "%d", splits);
    fg_em_set(em, "SPLIT", "%d", splits > 1);
    if (splits > 1)
        fg_em_set(em, "KT_SPLIT", "%" PRId64, kt_split);
    else
        fg_em_set(em, "KT_SPLIT", "%s", "KT");
    unsigned smem = (unsigned)wg_smem(stages, stage_bytes, w.taps, splits > 1);
    fg_em_set(em, "SMEM_BYTES", "%u", smem);
    /* persistent: the blocks one SM holds at once, also the launch bound's minimum */
    unsigned per_sm = (unsigned)wg_blocks_per_sm(smem);
    int max_regs = 65536 / (WG_THREADS * (int)per_sm) > 255 ? 255 : 65536 / (WG_THREADS * (int)per_sm);
    fg_em_set(em, "MIN_BLOCKS", "%u", per_sm);
    int64_t tiles = wg_tiles(&w, bn), units = tiles * splits;
    if (units >= ((int64_t)1 << 31) - 1)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "%s '%s': %" PRId64 " tiles x split-K %d exceed the grid", what,
                           em->g->nodes[a].name, tiles, splits);
    char split_text[96] = "";
    if (splits > 1)
        snprintf(split_text, sizeof split_text, ", split-K %d (%" PRId64 " of %" PRId64 " k tiles each)", splits,
                 kt_split, KT);
    /* (the split first: the report reads the line's first 95 characters) */
    fg_buf_printf(&em->notes, "//   tile:      %d x %d x %d, %d stages%s (%u bytes of shared memory), %d threads: two "
                  "wgmma%s warpgroups, thread 0 issuing the TMA loads; %u block(s) an SM, at most %d registers a "
                  "thread; sm_90a\n", WG_BM, bn, bk, stages, split_text, smem, WG_THREADS,
                  dt == FG_DTYPE_F32 ? " tf32" : "", per_sm, max_regs);
    if (splits > 1)
        fg_buf_printf(&em->notes, "//   schedule:  persistent over %" PRId64 " units (%" PRId64 " tiles (%" PRId64
                      " x %" PRId64 ") x %d k splits, fixed-order reduction of the fp32 partials): %u block(s) an "
                      "SM, each looping over units\n", units, tiles, w.mtiles, (w.d.N + bn - 1) / bn, splits, per_sm);
    else
        fg_buf_printf(&em->notes, "//   schedule:  persistent over %" PRId64 " tiles (%" PRId64 " x %" PRId64 "): %u "
                      "block(s) an SM, each looping over tiles\n", tiles, w.mtiles, (w.d.N + bn - 1) / bn, per_sm);
    /* split-K: per half tile (a warpgroup's 64 rows) splits slots of 64 x BN floats and a counter */
    fg_em_split_buffers(em, splits > 1 ? tiles * splits * WG_BM * bn * 4 : 0, tiles * 2);
    if (w.pix)
        fg_buf_printf(&em->notes, "//   operands:  A = tiles of %d x %d x %d output pixels (images x rows x columns), "
                      "each k tile one 4-D TMA box of x [N, H, W, C] stepping by the stride %" PRId64 "x%" PRId64
                      ", moved by the tap (%" PRId64 " taps) and the padding, zeros outside the image; B = w as "
                      "[K, R*S*C] (K-major), Y [N*OH*OW, K]: an implicit-GEMM conv; 128B swizzle\n", w.tn, w.th, w.tw,
                      w.sh, w.sw, w.d.K / w.c);
    else if (w.conv && w.taps)
        fg_buf_printf(&em->notes, "//   operands:  A = x as [N*H*W, C] (%" PRId64 " pixels, C %" PRId64 ") shifted "
                      "by each of the %" PRId64 " taps, padding rows zeroed by the warpgroups; B = w as [K, R*S*C] "
                      "(K-major), Y [N*H*W, K]: an implicit-GEMM conv; 128B swizzle\n", w.rows, w.c, w.d.K / w.c);
    else if (w.conv)
        fg_buf_printf(&em->notes, "//   operands:  A = x as [N*H*W, C] (%" PRId64 " pixels, C %" PRId64 "), B = w as "
                      "[K, C] (K-major), Y [N*H*W, K]: a 1x1 conv; 128B swizzle\n", w.rows, w.d.K);
    else
        fg_buf_printf(&em->notes, "//   operands:  A [M, K] (%" PRId64 " rows), B %s; 128B swizzle\n", w.rows,
                      w.tb ? "[N, K] (K-major)" : "[K, N] (N-major)");
    em->template_file = "gemm_wgmma.cuh";
    em->threads = WG_THREADS;
    em->k->arch_specific = 1;
    em->k->smem = smem;
    em->k->grid[0] = (unsigned)units;   /* < 2^31 (checked above) */
    em->k->grid[1] = 1;
    em->k->grid[2] = 1;
    em->k->persistent = per_sm;
    em->k->block[0] = WG_THREADS;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

static fg_status emit_gemm_wgmma(fg_emitter *em) { return wg_emit(em, FG_OPK_MATMUL); }

static fg_status emit_conv2d_wgmma(fg_emitter *em) { return wg_emit(em, FG_OPK_CONV2D); }

static const int64_t wg_tile_n[] = {64, 128, 256, 0};
static const fg_tile_key tiles[] = {
    {.name = "tile_n", .min = 64, .max = 256, .values = wg_tile_n},
    {.name = "stages", .min = 3, .max = 5},
    {.name = "split_k", .min = 1, .max = 16},
    {0},
};

static const fg_template rows[] = {
    {.name = "conv2d_wgmma", .family = "conv2d", .order = 23, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_CONV2D,
     .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 30, .tiles = tiles, .arch_ok = fg_arch_hopper,
     .arch_needs = "wgmma needs sm_90", .arch_hint = "sm_90", .check = check_wgmma, .describe = describe_wgmma,
     .emit = emit_conv2d_wgmma,
     .summary = "NHWC convolution (stride 1, groups 1; 1x1, or R x S with the output as large as the input) as an "
                "implicit GEMM on Hopper (sm_90a): gemm_wgmma's kernel with the conv's epilogue; fp16/bf16, fp32 with "
                "precision tf32, C and K multiples of 8, large shapes"},
    {.name = "gemm_wgmma", .family = "gemm", .order = 33, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_MATMUL,
     .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 20, .tiles = tiles, .arch_ok = fg_arch_hopper,
     .arch_needs = "wgmma needs sm_90", .arch_hint = "sm_90", .check = check_wgmma, .describe = describe_wgmma,
     .emit = emit_gemm_wgmma,
     .summary = "GEMM on Hopper (sm_90a): wgmma from 128B-swizzled shared memory, TMA loads into a 3- or 4-stage mbarrier "
                "ring, two warpgroups of 256 threads (two blocks an SM up to BN 128); fp16/bf16, fp32 with precision tf32 (B stored [N, K]), "
                "K and N multiples of 8, large shapes"},
};
FG_TEMPLATE_FAMILY(gemm_wgmma, rows);
