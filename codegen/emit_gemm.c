/*
 * emit_gemm.c -- the gemm family: templates/gemm.cuh (fp32, SIMT, shared
 * memory tiles) and gemm_tc.cuh (fp16 / bf16 on tensor cores, fp32
 * accumulation, a multistage cp.async pipeline; docs/codegen.md).
 *
 * A matmul is numpy's: A [..., M, K] (trans_a: [..., K, M]) by B [..., K, N]
 * (trans_b: [..., N, K]), the batch axes broadcast (fg_matmul_geom, shape.c),
 * a rank-1 A or B a vector whose added axis the output drops.  Every kernel
 * runs one output matrix per blockIdx.z (the flattened batch index); the
 * emitter writes the text that turns it into the batch coordinates (for the
 * epilogue) and each operand's matrix offset (0 along broadcast axes).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "shape.h"
#include "template.h"

/* ---- geometry shared by the checks and the emitter ----------------------- */

typedef struct gemm_geom {
    fg_matmul_geom_t d;
    int at, bt, ta, tb;
} gemm_geom;

/* The matmul at node `anchor` whose group writes tensor `out`: its geometry,
 * or 0 with the reason in why. */
static int gemm_geometry(const fg_graph *g, int anchor, int out, gemm_geom *gg, char *why, size_t whysz)
{
    const fg_node *nd = &g->nodes[anchor];
    gg->at = nd->inputs[0];
    gg->bt = nd->inputs[1];
    gg->ta = fg_node_attr(nd, "trans_a") && fg_node_attr_int(nd, "trans_a", 0) != 0;
    gg->tb = fg_node_attr(nd, "trans_b") && fg_node_attr_int(nd, "trans_b", 0) != 0;
    const fg_tensor *A = &g->tensors[gg->at], *B = &g->tensors[gg->bt], *Y = &g->tensors[nd->output];
    const fg_tensor *O = &g->tensors[out];
    if (!fg_matmul_geom(A, B, gg->ta, gg->tb, &gg->d, why, whysz))
        return 0;
    const fg_tensor *ts[] = {A, B, Y, O};
    for (int i = 0; i < 4; i++)
        if (ts[i]->rank == 4 && ts[i]->layout != FG_LAYOUT_NCHW) {
            snprintf(why, whysz, "%s is %s (matmul operands are row-major)", ts[i]->name,
                     fg_layout_name(ts[i]->layout));
            return 0;
        }
    if (O->rank != gg->d.yrank || memcmp(O->shape, gg->d.yshape, sizeof(int64_t) * (size_t)O->rank) != 0) {
        snprintf(why, whysz, "the group's output %s is not the matmul's shape", O->name);
        return 0;
    }
    if (gg->d.batch > 65535 || (gg->d.M + 31) / 32 > 65535) {
        snprintf(why, whysz, "batch %" PRId64 " or %" PRId64 " rows exceed the grid", gg->d.batch, gg->d.M);
        return 0;
    }
    return 1;
}

/* The kernel text of the batch: coordinates yb<i> of blockIdx.z's output
 * matrix, the operands' matrix offsets a_base, b_base and y_base. */
static void batch_text(fg_emitter *em, const gemm_geom *gg, fg_buf *b)
{
    const fg_matmul_geom_t *d = &gg->d;
    char name[16];
    if (d->nbatch == 0) {
        fg_buf_put(b, "    const fg_i64 a_base = 0, b_base = 0, y_base = 0;   // one matrix\n");
        return;
    }
    fg_buf_printf(b, "    // batch bt of [");
    for (int i = 0; i < d->nbatch; i++)
        fg_buf_printf(b, "%s%" PRId64, i ? ", " : "", d->bshape[i]);
    fg_buf_put(b, "]: its coordinates, the operands' matrices (broadcast axes add 0)\n");
    for (int i = d->nbatch - 1; i >= 0; i--) {
        fg_buf_printf(b, "    const fg_i64 yb%d = bt", i);
        for (int j = d->nbatch - 1; j > i; j--) {
            snprintf(name, sizeof name, "YB%d", j);
            fg_em_shape(em, name, d->bshape[j]);
            fg_buf_printf(b, " / %s", name);
        }
        if (i > 0) {
            snprintf(name, sizeof name, "YB%d", i);
            fg_em_shape(em, name, d->bshape[i]);
            fg_buf_printf(b, " %% %s", name);
        }
        fg_buf_put(b, ";\n");
    }
    const char *which[2] = {"a", "b"};
    const int64_t *strides[2] = {d->astride, d->bstride};
    for (int o = 0; o < 2; o++) {
        fg_buf_printf(b, "    const fg_i64 %s_base = ", which[o]);
        int terms = 0;
        for (int i = 0; i < d->nbatch; i++)
            if (strides[o][i]) {
                snprintf(name, sizeof name, "S%c%d", o ? 'B' : 'A', i);
                fg_em_shape(em, name, strides[o][i]);
                fg_buf_printf(b, "%syb%d * %s", terms++ ? " + " : "", i, name);
            }
        fg_buf_put(b, terms ? ";\n" : "0;\n");
    }
    fg_buf_put(b, "    const fg_i64 y_base = bt * M * N;\n");
}

/* The epilogue's coordinate arguments: batch coordinates, then row unless A
 * is a vector, then col (or `col + 1`) unless B is. */
static void epi_args(const gemm_geom *gg, const char *col, fg_buf *b)
{
    for (int i = 0; i < gg->d.nbatch; i++)
        fg_buf_printf(b, "%syb%d", b->len ? ", " : "", i);
    if (!gg->d.a_vec)
        fg_buf_printf(b, "%srow", b->len ? ", " : "");
    if (!gg->d.b_vec)
        fg_buf_printf(b, "%s%s", b->len ? ", " : "", col);
}

/* Placeholders both templates share. */
static void set_common(fg_emitter *em, const gemm_geom *gg)
{
    fg_em_shape(em, "M", gg->d.M);
    fg_em_shape(em, "N", gg->d.N);
    fg_em_shape(em, "K", gg->d.K);
    fg_em_set(em, "A", "%s", fg_em_tensor(em, gg->at, 0));
    fg_em_set(em, "B", "%s", fg_em_tensor(em, gg->bt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_buf t = {0};
    batch_text(em, gg, &t);
    fg_em_set(em, "BATCH", "%s", t.s ? t.s : "");
    fg_buf_free(&t);
    epi_args(gg, "col", &t);
    fg_em_set(em, "EPI_ARGS", "%s", t.s);
    fg_buf_free(&t);
    epi_args(gg, "col + 1", &t);
    fg_em_set(em, "EPI_ARGS1", "%s", t.s);
    fg_buf_free(&t);
    fg_em_set(em, "TA", "%d", gg->ta);
    fg_em_set(em, "TB", "%d", gg->tb);
}

/* ---- gemm_tc: block tiles and the pipeline -------------------------------- */

/* Block tiles, largest first: BM x BN outputs, WARPS_M x WARPS_N warps; each
 * warp's patch a multiple of 16 x 16, and every thread copies whole 16-byte
 * chunks (BM * 4 and BN * 4 multiples of the block size). */
typedef struct tc_tile {
    int bm, bn, warps_m, warps_n;
} tc_tile;

static const tc_tile tc_tiles[] = {
    {128, 128, 2, 4}, {128, 64, 2, 2}, {64, 128, 2, 2}, {64, 64, 2, 2}, {32, 64, 1, 2}, {32, 32, 1, 2},
};

#define TC_BK 32
#define TC_SMEM_LIMIT (48 * 1024)   /* static shared memory */
/* blocks wanted before a larger tile is preferred: about one per SM of a large GPU */
#define TC_BLOCKS_WANTED 128

/* Shared memory of a tile and depth: stages of (BM + BN) rows of BK 16-bit elements. */
static int tc_smem(const tc_tile *t, int stages) { return stages * (t->bm + t->bn) * TC_BK * 2; }

_Static_assert(3 * (128 + 128) * TC_BK * 2 <= TC_SMEM_LIMIT, "the largest tile fits 3 stages");

/* The default tile: the largest that still gives TC_BLOCKS_WANTED blocks
 * (batch included) and is not mostly empty, else the smallest. */
static const tc_tile *tc_default_tile(int64_t M, int64_t N, int64_t batch)
{
    const int n = (int)FG_COUNTOF(tc_tiles);
    for (int i = 0; i < n - 1; i++) {
        const tc_tile *t = &tc_tiles[i];
        if ((t->bm > 2 * M && t->bm > 32) || (t->bn > 2 * N && t->bn > 32))
            continue;
        int64_t blocks = ((M + t->bm - 1) / t->bm) * ((N + t->bn - 1) / t->bn) * batch;
        if (blocks >= TC_BLOCKS_WANTED)
            return t;
    }
    return &tc_tiles[n - 1];
}

/* The default depth: 4 stages where they fit, else 3. */
static int tc_default_stages(const tc_tile *t) { return tc_smem(t, 4) <= TC_SMEM_LIMIT ? 4 : 3; }

/* Whether both operands' rows are 16-byte chunks: the contiguous axis of A
 * (K, or M when transposed) and of B (N, or K when transposed) a multiple
 * of 8 elements, so every chunk and matrix start is aligned. */
static int tc_vec(const gemm_geom *gg)
{
    int64_t ca = gg->ta ? gg->d.M : gg->d.K, cb = gg->tb ? gg->d.K : gg->d.N;   /* a vector: ta = tb = 0 */
    return ca % 8 == 0 && cb % 8 == 0;
}

static fg_status emit_gemm_tc(fg_emitter *em, const gemm_geom *gg)
{
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    const fg_tensor *A = &em->g->tensors[gg->at], *B = &em->g->tensors[gg->bt], *Y = em->ot;
    if (Y->dtype == FG_DTYPE_F32 || A->dtype != Y->dtype || B->dtype != Y->dtype)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "tensor-core gemm '%s' needs fp16 or bf16 operands of one dtype",
                           nd->name);
    const tc_tile *tile = tc_default_tile(gg->d.M, gg->d.N, gg->d.batch);
    const char *keys[] = {"tile_m", "tile_n", "stages"};
    int64_t v[3] = {tile->bm, tile->bn, tc_default_stages(tile)};
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
    if ((v[2] != 3 && v[2] != 4) || tc_smem(tile, (int)v[2]) > TC_SMEM_LIMIT)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: stages = %" PRId64 " (want 3 or 4, and %d x %d x %d tiles "
                           "in at most 48 KiB of shared memory)", v[2], tile->bm, tile->bn, TC_BK);
    int stages = (int)v[2];

    set_common(em, gg);
    int h = Y->dtype == FG_DTYPE_F16;
    int vec = tc_vec(gg);
    fg_em_set(em, "T", "%s", h ? "fg_half" : "fg_bf16");
    fg_em_set(em, "PACK", "%s", h ? "fg_pack_half2" : "fg_pack_bf162");
    fg_em_set(em, "MMA", "%s", h ? "fg_mma_16816_f16" : "fg_mma_16816_bf16");
    fg_em_set(em, "BM", "%d", tile->bm);
    fg_em_set(em, "BN", "%d", tile->bn);
    fg_em_set(em, "WARPS_M", "%d", tile->warps_m);
    fg_em_set(em, "WARPS_N", "%d", tile->warps_n);
    fg_em_set(em, "STAGES", "%d", stages);
    fg_em_set(em, "VEC", "%d", vec);
    /* A's tile rows run along M (k contiguous) unless A is stored [K, M]; B's
     * along N (k contiguous) only when B is stored [N, K] */
    fg_em_set(em, "A_KROW", "%d", gg->ta);
    fg_em_set(em, "B_KROW", "%d", !gg->tb);
    fg_em_set(em, "PAIR", "%d", gg->d.N % 2 == 0);

    unsigned threads = 32u * (unsigned)(tile->warps_m * tile->warps_n);
    fg_buf_printf(&em->notes, "//   tile:      %d x %d x %d, %d stages, %u threads (%d x %d warps), %s loads\n",
                  tile->bm, tile->bn, TC_BK, stages, threads, tile->warps_m, tile->warps_n,
                  vec ? "16-byte cp.async" : "element");
    fg_buf_printf(&em->notes, "//   operands:  A %s, B %s\n", gg->ta ? "[K, M] (ldmatrix.trans)" : "[M, K]",
                  gg->tb ? "[N, K]" : "[K, N] (ldmatrix.trans)");
    em->template_file = "gemm_tc.cuh";
    em->threads = threads;
    em->k->grid[0] = (unsigned)((gg->d.N + tile->bn - 1) / tile->bn);
    em->k->grid[1] = (unsigned)((gg->d.M + tile->bm - 1) / tile->bm);
    em->k->grid[2] = (unsigned)gg->d.batch;
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* ---- gemm (fp32 SIMT) ------------------------------------------------------- */

static fg_status emit_gemm_simt(fg_emitter *em, const gemm_geom *gg)
{
    const char *keys[] = {"tile_m", "tile_n", "tile_k"};
    int64_t v[3] = {64, 64, 16};
    fg_status st = fg_em_tile_params(em, keys, 3, v);
    if (st != FG_OK)
        return st;
    for (int i = 0; i < 2; i++)
        if (v[i] != 16 && v[i] != 32 && v[i] != 64 && v[i] != 128)
            return fg_em_error(em, FG_ERR_HOOK, "tile hook: %s = %" PRId64 " (want 16, 32, 64 or 128)", keys[i], v[i]);
    if (v[2] != 8 && v[2] != 16 && v[2] != 32)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: tile_k = %" PRId64 " (want 8, 16 or 32)", v[2]);
    int64_t threads = (v[0] / 4) * (v[1] / 4);
    if (threads < 32 || threads > 1024)
        return fg_em_error(em, FG_ERR_HOOK, "tile hook: a %" PRId64 " x %" PRId64 " tile needs %" PRId64
                           " threads (want 32..1024)", v[0], v[1], threads);
    set_common(em, gg);
    fg_em_set(em, "TILE_M", "%" PRId64, v[0]);
    fg_em_set(em, "TILE_N", "%" PRId64, v[1]);
    fg_em_set(em, "TILE_K", "%" PRId64, v[2]);
    fg_buf_printf(&em->notes, "//   tile:      %" PRId64 " x %" PRId64 " x %" PRId64 ", %" PRId64 " threads\n", v[0],
                  v[1], v[2], threads);
    em->template_file = "gemm.cuh";
    em->threads = (unsigned)threads;
    em->k->grid[0] = (unsigned)((gg->d.N + v[1] - 1) / v[1]);
    em->k->grid[1] = (unsigned)((gg->d.M + v[0] - 1) / v[0]);
    em->k->grid[2] = (unsigned)gg->d.batch;
    em->k->block[0] = (unsigned)threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

fg_status fg_emit_gemm(fg_emitter *em)
{
    int a = em->grp->anchor;
    if (a < 0 || em->g->nodes[a].op->kind != FG_OPK_MATMUL)
        return fg_em_error(em, FG_ERR_INPUT, "template %s needs a matmul anchor", em->grp->template_name);
    gemm_geom gg;
    char why[300];
    if (!gemm_geometry(em->g, a, em->out, &gg, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template %s cannot run matmul '%s': %s", em->grp->template_name,
                           em->g->nodes[a].name, why);
    if (strcmp(fg_template_base(em->tpl)->name, "gemm_tc") == 0)
        return emit_gemm_tc(em, &gg);
    return emit_gemm_simt(em, &gg);
}

/* ---- checks ------------------------------------------------------------------ */

static int cand_geometry(const fg_tcand *c, gemm_geom *gg, char *why, size_t whysz)
{
    return gemm_geometry(c->g, c->anchor, c->g->nodes[c->nodes[c->nnodes - 1]].output, gg, why, whysz);
}

int fg_check_gemm(const fg_tcand *c, char *why, size_t whysz)
{
    gemm_geom gg;
    return cand_geometry(c, &gg, why, whysz);
}

/* Tensor cores: A, B and Y of one 16-bit dtype. */
int fg_check_gemm_tc(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *A = &c->g->tensors[nd->inputs[0]], *B = &c->g->tensors[nd->inputs[1]];
    const fg_tensor *Y = &c->g->tensors[nd->output];
    if (A->dtype != Y->dtype || B->dtype != Y->dtype) {
        snprintf(why, whysz, "operands %s and %s, output %s (needs one dtype)", fg_dtype_name(A->dtype),
                 fg_dtype_name(B->dtype), fg_dtype_name(Y->dtype));
        return 0;
    }
    gemm_geom gg;
    return cand_geometry(c, &gg, why, whysz);
}
