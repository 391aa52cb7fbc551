/*
 * emit_gemm_softmax.c -- the gemm_softmax family (templates/gemm_softmax.cuh):
 * a matmul, the element-wise epilogue a rule fuses after it (the matmul's
 * bias, a scale, a mask), and a softmax over the rows of the result, in one
 * kernel.  A block holds 16 whole rows of the output in registers, so the
 * capability check asks that a row fit one block (N <= GS_MAX_N) and that
 * the softmax reduce exactly the matmul's last axis.  fp16 / bf16 multiply on
 * tensor cores (mma m16n8k16, fp32 accumulation); fp32 stays exact (SIMT).
 *
 * The matmul is numpy's as in the gemm family (fg_matmul_geom, shape.c):
 * batch axes broadcast, blockIdx.z the flattened batch, a rank-1 A a single
 * row; a rank-1 B (the output then has no column axis) is refused.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "emit_impl.h"
#include "kind.h"
#include "shape.h"
#include "template.h"

#define GS_MAX_N 1024      /* a row per block: 16 x N fp32 accumulators in the registers of 8 warps */
#define GS_MAX_WARPS 8     /* warps side by side along N */
#define GS_BM 16           /* rows per block: one m16 fragment */
/* A fused kernel runs one block per 16 rows and batch: with few of them it
 * is worth it only while a block's reduction is short.  Below GS_MIN_BLOCKS
 * blocks (half the 132 SMs of an H100 / H200) a block may do at most
 * GS_MAX_BLOCK_MACS multiply-adds; a batch-1 classifier ([1, 4096] x
 * [4096, 1000], Softmax) runs faster unfused: gemv / gemm_tc split the
 * reduction over the SMs, and the softmax reads back only M x N values. */
#define GS_MIN_BLOCKS 66
#define GS_MAX_BLOCK_MACS ((int64_t)1 << 20)

/* What the checks and the emitter derive from a candidate. */
typedef struct gs_geom {
    fg_matmul_geom_t d;
    int mm, sm;            /* the matmul and the softmax node */
    int at, bt, ta, tb;    /* operands and their transposes */
    fg_dtype dt;
    int warps, ni, np;     /* warps along N, n8 fragments per warp, padded row length */
} gs_geom;

/* The launch shape of a row of n: warps of 16 columns or more, at most
 * GS_MAX_WARPS, each an even number of n8 fragments (n16 steps), the row
 * padded to np = warps * ni * 8. */
static void gs_shape(gs_geom *gg)
{
    int64_t n16 = (gg->d.N + 15) / 16;
    gg->warps = (int)(n16 < GS_MAX_WARPS ? n16 : GS_MAX_WARPS);
    if (gg->warps < 1)
        gg->warps = 1;
    gg->ni = (int)(2 * ((n16 + gg->warps - 1) / gg->warps));
    if (gg->ni < 2)
        gg->ni = 2;
    gg->np = gg->warps * gg->ni * 8;
}

/* The group of nodes[0..n) writing tensor `out`: a matmul first, a softmax
 * last, only pointwise nodes between; the geometry, or 0 with the reason. */
static int gs_geometry(const fg_graph *g, const int *nodes, int n, gs_geom *gg, char *why, size_t whysz)
{
    memset(gg, 0, sizeof *gg);
    gg->mm = nodes[0];
    gg->sm = nodes[n - 1];
    const fg_node *mm = &g->nodes[gg->mm], *sm = &g->nodes[gg->sm];
    if (mm->op->kind != FG_OPK_MATMUL || n < 2 || sm->op->kind != FG_OPK_SOFTMAX) {
        snprintf(why, whysz, "gemm_softmax runs a matmul, element-wise ops and a softmax (nodes %s .. %s)", mm->name,
                 sm->name);
        return 0;
    }
    if (fg_node_attr_num(sm, "log", 0) != 0) {
        snprintf(why, whysz, "%s (op %s) is a log softmax (gemm_softmax normalizes with exp / sum)", sm->name,
                 sm->op->name);
        return 0;
    }
    for (int i = 1; i < n - 1; i++) {
        const fg_node *nd = &g->nodes[nodes[i]];
        if (nd->op->kind != FG_OPK_POINTWISE && !nd->folded) {
            snprintf(why, whysz, "%s (op %s) between the matmul and the softmax is not element-wise", nd->name,
                     nd->op->name);
            return 0;
        }
    }
    gg->at = mm->inputs[0];
    gg->bt = mm->inputs[1];
    gg->ta = fg_node_attr(mm, "trans_a") && fg_node_attr_int(mm, "trans_a", 0) != 0;
    gg->tb = fg_node_attr(mm, "trans_b") && fg_node_attr_int(mm, "trans_b", 0) != 0;
    const fg_tensor *A = &g->tensors[gg->at], *B = &g->tensors[gg->bt], *Y = &g->tensors[mm->output];
    const fg_tensor *O = &g->tensors[sm->output];
    if (!fg_matmul_geom(A, B, gg->ta, gg->tb, &gg->d, why, whysz))
        return 0;
    const fg_tensor *ts[] = {A, B, Y, O};
    for (int i = 0; i < 4; i++)
        if (ts[i]->rank == 4 && ts[i]->layout != FG_LAYOUT_NCHW) {
            snprintf(why, whysz, "%s is %s (matmul operands are row-major)", ts[i]->name,
                     fg_layout_name(ts[i]->layout));
            return 0;
        }
    gg->dt = Y->dtype;
    if (A->dtype != gg->dt || B->dtype != gg->dt || O->dtype != gg->dt) {
        snprintf(why, whysz, "operands %s and %s, output %s (needs one dtype)", fg_dtype_name(A->dtype),
                 fg_dtype_name(B->dtype), fg_dtype_name(O->dtype));
        return 0;
    }
    if (gg->d.b_vec) {
        snprintf(why, whysz, "B %s is a vector: the matmul's output has no row of columns to normalize", B->name);
        return 0;
    }
    if (O->rank != gg->d.yrank || memcmp(O->shape, gg->d.yshape, sizeof(int64_t) * (size_t)O->rank) != 0) {
        snprintf(why, whysz, "the group's output %s is not the matmul's shape", O->name);
        return 0;
    }
    int64_t outer, len, inner;
    if (fg_softmax_rows(sm, &g->tensors[sm->inputs[0]], &outer, &len, &inner) != 0 || inner != 1 ||
        len != gg->d.N) {
        snprintf(why, whysz, "softmax %s does not normalize the matmul's last axis alone (rows of %" PRId64
                 " elements, %" PRId64 " apart; the matmul's rows are %" PRId64 " long)", sm->name, len, inner,
                 gg->d.N);
        return 0;
    }
    if (gg->d.N > GS_MAX_N) {
        snprintf(why, whysz, "N %" PRId64 " > %d: a block keeps 16 whole rows in registers (16 x N fp32 "
                 "accumulators over %d warps)", gg->d.N, GS_MAX_N, GS_MAX_WARPS);
        return 0;
    }
    if (gg->d.batch > 65535 || (gg->d.M + GS_BM - 1) / GS_BM > 2147483647) {
        snprintf(why, whysz, "batch %" PRId64 " or %" PRId64 " rows exceed the grid", gg->d.batch, gg->d.M);
        return 0;
    }
    gs_shape(gg);
    int64_t blocks = (gg->d.M + GS_BM - 1) / GS_BM * gg->d.batch, macs = (int64_t)GS_BM * gg->np * gg->d.K;
    if (blocks < GS_MIN_BLOCKS && macs > GS_MAX_BLOCK_MACS) {
        snprintf(why, whysz, "%" PRId64 " block%s (M %" PRId64 ", batch %" PRId64 ") of 16 x %d x K %" PRId64
                 " multiply-adds each would leave most SMs idle (fewer than %d blocks may do at most %" PRId64
                 "); unfused, the matmul spreads its reduction", blocks, blocks == 1 ? "" : "s", gg->d.M, gg->d.batch,
                 gg->np, gg->d.K, GS_MIN_BLOCKS, GS_MAX_BLOCK_MACS);
        return 0;
    }
    return 1;
}

static fg_status emit_gemm_softmax(fg_emitter *em)
{
    const fg_group *grp = em->grp;
    gs_geom gg;
    char why[400];
    if (!gs_geometry(em->g, grp->nodes, grp->nnodes, &gg, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template %s cannot run this group: %s", grp->template_name, why);
    int tc = gg.dt != FG_DTYPE_F32;
    fg_em_shape(em, "M", gg.d.M);
    fg_em_shape(em, "N", gg.d.N);
    fg_em_shape(em, "K", gg.d.K);
    fg_em_set(em, "A", "%s", fg_em_tensor(em, gg.at, 0));
    fg_em_set(em, "B", "%s", fg_em_tensor(em, gg.bt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_buf t = {0};
    fg_em_batch_text(em, &gg.d, &t);
    fg_em_set(em, "BATCH", "%s", t.s);
    fg_buf_free(&t);
    /* the epilogue's coordinates: batch, row unless A is a vector, col */
    for (int i = 0; i < gg.d.nbatch; i++)
        fg_buf_printf(&t, "%syb%d", t.len ? ", " : "", i);
    if (!gg.d.a_vec)
        fg_buf_printf(&t, "%srow", t.len ? ", " : "");
    fg_buf_printf(&t, "%scol", t.len ? ", " : "");
    fg_em_set(em, "EPI_ARGS", "%s", t.s);
    fg_buf_free(&t);
    fg_em_set(em, "TA", "%d", gg.ta);
    fg_em_set(em, "TB", "%d", gg.tb);
    fg_em_set(em, "T", "%s", fg_em_ctype(gg.dt));
    fg_em_set(em, "TC", "%d", tc);
    fg_em_set(em, "BK", "%d", tc ? 16 : 8);
    fg_em_set(em, "PACK", "%s", gg.dt == FG_DTYPE_BF16 ? "fg_pack_bf162" : "fg_pack_half2");
    fg_em_set(em, "MMA", "%s", gg.dt == FG_DTYPE_BF16 ? "fg_mma_16816_bf16" : "fg_mma_16816_f16");
    fg_em_set(em, "WARPS_N", "%d", gg.warps);
    fg_em_set(em, "NI", "%d", gg.ni);
    fg_em_set(em, "NP", "%d", gg.np);
    fg_em_set(em, "PAIR", "%d", gg.d.N % 2 == 0);
    /* B [K, N] in 16-byte loads when every vector starts aligned: N a
     * multiple of the vector (the batch strides are multiples of N too) */
    int vw = tc ? 8 : 4, bvec = !gg.tb && gg.d.N % vw == 0;
    fg_em_set(em, "BVEC", "%d", bvec);
    fg_em_set(em, "VW", "%d", vw);
    fg_em_set(em, "CVT", "%s", gg.dt == FG_DTYPE_BF16 ? "fg_f2bf" : "fg_f2h");

    unsigned threads = 32u * (unsigned)gg.warps;
    fg_buf_printf(&em->notes, "//   tile:      %d rows x %d columns (N %" PRId64 "), k steps of %d, %u threads (%d "
                  "warps of %d columns), %s; softmax over the rows in registers\n", GS_BM, gg.np, gg.d.N, tc ? 16 : 8,
                  threads, gg.warps, gg.ni * 8, tc ? "mma m16n8k16, fp32 accumulation" : "fp32 SIMT");
    fg_buf_printf(&em->notes, "//   operands:  A %s, B %s (%s loads); softmax %s\n", gg.ta ? "[K, M]" : "[M, K]",
                  gg.tb ? "[N, K]" : "[K, N]", bvec ? "16-byte" : "element", em->g->nodes[gg.sm].name);
    em->template_file = "gemm_softmax.cuh";
    em->threads = threads;
    em->k->grid[0] = (unsigned)((gg.d.M + GS_BM - 1) / GS_BM);
    em->k->grid[1] = 1;
    em->k->grid[2] = (unsigned)gg.d.batch;
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* Capability check (fg_template.check): the group's shape (matmul, element-wise
 * ops, softmax), one dtype, the softmax over the matmul's last axis alone,
 * a row of at most GS_MAX_N elements. */
static int check_gemm_softmax(const fg_tcand *c, char *why, size_t whysz)
{
    gs_geom gg;
    if (c->anchor < 0) {
        snprintf(why, whysz, "gemm_softmax needs a matmul first");
        return 0;
    }
    return gs_geometry(c->g, c->nodes, c->nnodes, &gg, why, whysz);
}

static void describe_gemm_softmax(const fg_tcand *c, char *buf, size_t size)
{
    gs_geom gg;
    char why[400];
    buf[0] = 0;
    if (c->anchor < 0 || !gs_geometry(c->g, c->nodes, c->nnodes, &gg, why, sizeof why))
        return;
    snprintf(buf, size, "16 rows x %d columns per block, %d warps (M %" PRId64 ", N %" PRId64 ", K %" PRId64
             ", batch %" PRId64 ": %" PRId64 " blocks; N <= %d)", gg.np, gg.warps, gg.d.M, gg.d.N, gg.d.K, gg.d.batch,
             (gg.d.M + GS_BM - 1) / GS_BM * gg.d.batch, GS_MAX_N);
}

static const fg_template rows[] = {
    {.name = "gemm_softmax", .family = "gemm_softmax", .order = 35, FG_TEMPLATE_LIMITS,
     .kinds = 1u << FG_OPK_MATMUL, .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 0, .owns_last = 1,
     .check = check_gemm_softmax, .describe = describe_gemm_softmax, .emit = emit_gemm_softmax,
     .summary = "matmul, element-wise epilogue and softmax over the rows (N <= 1024) in one kernel: 16 whole rows per "
                "block in registers; fp16/bf16 mma m16n8k16, exact fp32 SIMT"},
};
FG_TEMPLATE_FAMILY(gemm_softmax, rows);
