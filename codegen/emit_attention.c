/*
 * emit_attention.c -- the attention family (templates/attention.cuh):
 * softmax(epilogue(Q K^T)) V in one FlashAttention-2-style kernel.  The
 * group is a matmul (the scores, Q [.., SQ, D] by K^T: K stored [.., SK, D]
 * with trans_b, or the transposed tensor [.., D, SK] itself), the
 * element-wise ops a rule fuses after it (a scale by Mul or Div, an additive
 * mask broadcast to the scores), a softmax over the scores' last axis, and a
 * matmul reading the softmax as its A operand (P V, V [.., SK, DV]).  The
 * scores never reach memory: each block streams K / V tiles through shared
 * memory with an online softmax (fp32 running max and sum).  fp16 / bf16 on
 * tensor cores (mma m16n8k16, fp32 accumulation); fp32 exact (SIMT).
 *
 * The check refuses, with the reason, what the kernel cannot serve: head
 * dims (D, DV) above AT_MAX_D, batch axes of the two matmuls that differ
 * (V broadcast to more matrices than the scores), transposed Q or V, a
 * bias on P V, a log softmax, mixed dtypes; the planner then falls back to
 * the gemm / gemm_softmax / softmax kernels.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "emit_impl.h"
#include "kind.h"
#include "shape.h"
#include "template.h"

#define AT_MAX_D 128           /* head dims: Q's fragments and O's accumulators live in registers */
#define AT_MAX_WARPS 4         /* query rows per block: 16 per warp */
#define AT_SMEM (48 * 1024)    /* static shared memory of a block */

/* What the checks and the emitter derive from a candidate. */
typedef struct at_geom {
    fg_matmul_geom_t d1, d2;   /* Q K^T and P V */
    int mm1, sm, nz, mm2;      /* nodes (nz: a nan_to_zero of the softmax, or -1) */
    int q, k, v, s;            /* tensors: Q, K (as stored), V, the scores */
    int tb;                    /* K stored [SK, D] (mm1's trans_b) */
    fg_dtype dt;
    int tc, async;
    int warps, bn, dp, dvp, ks, vs, qs;
    int64_t smem;
} at_geom;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Shared bytes of a block of `warps` warps and key tiles of bn rows. */
static int64_t at_smem(const at_geom *ag, int warps, int bn)
{
    if (ag->tc)
        return 2 * (int64_t)bn * (ag->ks + ag->vs) * 2;
    return 4 * ((int64_t)16 * warps * ag->qs + (int64_t)bn * (ag->ks + ag->vs) + (int64_t)16 * warps * (bn + 4));
}

/* The launch shape: warps for the query rows (at most AT_MAX_WARPS), the
 * widest key tile (64, 32, 16) whose buffers fit AT_SMEM, fewer warps when
 * none does (fp32 keeps Q's rows in shared memory). */
static int at_shape(at_geom *ag, char *why, size_t whysz)
{
    int64_t D = ag->d1.K, DV = ag->d2.N;
    ag->dp = (int)round_up(D, ag->tc ? 16 : 8);
    ag->dvp = (int)round_up(DV, 8);
    int pad = ag->tc ? 8 : 4;
    ag->ks = ag->dp + pad;
    ag->vs = ag->dvp + pad;
    ag->qs = ag->dp + 4;
    int64_t w16 = (ag->d1.M + 15) / 16;
    for (int warps = (int)(w16 < AT_MAX_WARPS ? w16 : AT_MAX_WARPS); warps >= 1; warps--)
        for (int bn = 64; bn >= 16; bn /= 2)
            if (at_smem(ag, warps, bn) <= AT_SMEM) {
                ag->warps = warps;
                ag->bn = bn;
                ag->smem = at_smem(ag, warps, bn);
                return 1;
            }
    snprintf(why, whysz, "head dims D %" PRId64 ", DV %" PRId64 ": no key tile fits %d bytes of shared memory", D, DV,
             AT_SMEM);
    return 0;
}

static int refuse(char *why, size_t whysz, const char *fmt, const char *a, const char *b)
{
    snprintf(why, whysz, fmt, a, b);
    return 0;
}

/* The group of nodes[0..n): matmul, element-wise ops, softmax, matmul; the
 * geometry, or 0 with the reason. */
static int at_geometry(const fg_graph *g, const int *nodes, int n, at_geom *ag, char *why, size_t whysz)
{
    memset(ag, 0, sizeof *ag);
    if (n < 3)
        return refuse(why, whysz, "attention runs matmul, element-wise ops, softmax, matmul (%s: %s)",
                      g->nodes[nodes[0]].name, "too few nodes");
    ag->mm1 = nodes[0];
    ag->mm2 = nodes[n - 1];
    ag->nz = -1;
    if (n >= 4 && g->nodes[nodes[n - 2]].op->name && strcmp(g->nodes[nodes[n - 2]].op->name, "nan_to_zero") == 0)
        ag->nz = nodes[--n - 1];   /* the softmax's NaN rows made 0: the template's NANZERO */
    ag->sm = nodes[n - 2];
    const fg_node *mm1 = &g->nodes[ag->mm1], *sm = &g->nodes[ag->sm], *mm2 = &g->nodes[ag->mm2];
    if (mm1->op->kind != FG_OPK_MATMUL || sm->op->kind != FG_OPK_SOFTMAX || mm2->op->kind != FG_OPK_MATMUL)
        return refuse(why, whysz, "attention runs matmul, element-wise ops, softmax, matmul (nodes %s .. %s)",
                      mm1->name, mm2->name);
    if (fg_node_attr_num(sm, "log", 0) != 0)
        return refuse(why, whysz, "%s (op %s) is a log softmax (attention normalizes with exp / sum)", sm->name,
                      sm->op->name);
    for (int i = 1; i < n - 2; i++) {
        const fg_node *nd = &g->nodes[nodes[i]];
        if (nd->op->kind != FG_OPK_POINTWISE && !nd->folded)
            return refuse(why, whysz, "%s (op %s) between the scores and the softmax is not element-wise", nd->name,
                          nd->op->name);
    }
    int ta1 = fg_node_attr(mm1, "trans_a") && fg_node_attr_int(mm1, "trans_a", 0) != 0;
    int ta2 = fg_node_attr(mm2, "trans_a") && fg_node_attr_int(mm2, "trans_a", 0) != 0;
    int tb2 = fg_node_attr(mm2, "trans_b") && fg_node_attr_int(mm2, "trans_b", 0) != 0;
    ag->tb = fg_node_attr(mm1, "trans_b") && fg_node_attr_int(mm1, "trans_b", 0) != 0;
    if (ta1 || ta2 || tb2)
        return refuse(why, whysz, "%s or %s has trans_a, or P V has trans_b (attention reads Q [SQ, D] and V "
                      "[SK, DV])", mm1->name, mm2->name);
    int bias2 = fg_node_input(mm2, "bias");
    if (bias2 >= 0 && bias2 < mm2->ninputs && mm2->inputs[bias2] >= 0)
        return refuse(why, whysz, "%s adds a bias to P V (%s)", mm2->name, g->tensors[mm2->inputs[bias2]].name);
    ag->q = mm1->inputs[0];
    ag->k = mm1->inputs[1];
    ag->s = mm1->output;
    if (ag->nz >= 0 && g->nodes[ag->nz].inputs[0] != sm->output)
        return refuse(why, whysz, "%s does not read the softmax %s", g->nodes[ag->nz].name, sm->name);
    if (mm2->inputs[0] != (ag->nz >= 0 ? g->nodes[ag->nz].output : sm->output))
        return refuse(why, whysz, "%s does not read the softmax %s as its A operand", mm2->name, sm->name);
    ag->v = mm2->inputs[1];
    const fg_tensor *Q = &g->tensors[ag->q], *K = &g->tensors[ag->k], *V = &g->tensors[ag->v];
    const fg_tensor *S = &g->tensors[ag->s], *P = &g->tensors[sm->output], *O = &g->tensors[mm2->output];
    if (!fg_matmul_geom(Q, K, 0, ag->tb, &ag->d1, why, whysz) || !fg_matmul_geom(P, V, 0, 0, &ag->d2, why, whysz))
        return 0;
    if (ag->d1.a_vec || ag->d1.b_vec || ag->d2.b_vec)
        return refuse(why, whysz, "a vector operand (%s or %s): attention takes matrices", Q->name, V->name);
    const fg_tensor *ts[] = {Q, K, V, S, O};
    for (int i = 0; i < 5; i++)
        if (ts[i]->rank == 4 && ts[i]->layout != FG_LAYOUT_NCHW)
            return refuse(why, whysz, "%s is %s (matmul operands are row-major)", ts[i]->name,
                          fg_layout_name(ts[i]->layout));
    ag->dt = O->dtype;
    if (Q->dtype != ag->dt || K->dtype != ag->dt || V->dtype != ag->dt || S->dtype != ag->dt)
        return refuse(why, whysz, "Q, K, V and the output of mixed dtypes (%s, output %s)", fg_dtype_name(Q->dtype),
                      fg_dtype_name(ag->dt));
    int64_t outer, len, inner;
    if (fg_softmax_rows(sm, &g->tensors[sm->inputs[0]], &outer, &len, &inner) != 0 || inner != 1 ||
        len != ag->d1.N) {
        snprintf(why, whysz, "softmax %s does not normalize the scores' last axis alone", sm->name);
        return 0;
    }
    if (ag->d1.nbatch != ag->d2.nbatch ||
        memcmp(ag->d1.bshape, ag->d2.bshape, sizeof(int64_t) * (size_t)ag->d1.nbatch) != 0)
        return refuse(why, whysz, "mismatched batch dims: the scores' batch axes and those of P V (V %s, output "
                      "%s) differ", V->name, O->name);
    if (ag->d2.K != ag->d1.N || ag->d2.M != ag->d1.M)
        return refuse(why, whysz, "P V does not multiply the softmax's rows by V's keys (%s, %s)", P->name, V->name);
    if (ag->d1.K > AT_MAX_D || ag->d2.N > AT_MAX_D) {
        snprintf(why, whysz, "head dim D %" PRId64 " / DV %" PRId64 " > %d (Q's fragments and O's accumulators live "
                 "in registers)", ag->d1.K, ag->d2.N, AT_MAX_D);
        return 0;
    }
    if (ag->d1.batch > 65535 || (ag->d1.M + 15) / 16 > 2147483647) {
        snprintf(why, whysz, "batch %" PRId64 " or %" PRId64 " query rows exceed the grid", ag->d1.batch, ag->d1.M);
        return 0;
    }
    ag->tc = ag->dt != FG_DTYPE_F32;
    ag->async = ag->tc && ag->tb && ag->d1.K % 8 == 0 && ag->d2.N % 8 == 0;
    return at_shape(ag, why, whysz);
}

/* The loads of one key tile (rows j0 .. j0 + BN of K and V) into buffer
 * `buf`, as kernel text: 16-byte cp.async copies or element loads, zero past
 * SK, D and DV. */
static void load_text(const at_geom *ag, fg_buf *b)
{
    const char *T = ag->tc ? fg_em_ctype(ag->dt) : "float";
    fg_buf_printf(b, "        %s *const kd = k_s + buf * BN * KS;\n        %s *const vd = v_s + buf * BN * VS;\n", T,
                  T);
    if (ag->async) {
        fg_buf_put(b, "        // K [SK, D], V [SK, DV]: 16-byte copies (zero past SK, D, DV)\n"
                      "        for (int c = tid; c < BN * (DP / 8); c += THREADS) {\n"
                      "            const int r = c / (DP / 8), d = c % (DP / 8) * 8;\n"
                      "            const bool in = j0 + r < SK && d < D;\n"
                      "            fg_cp_async16_zfill(kd + r * KS + d, in ? (const void *)(Kp + (j0 + r) * D + d) : "
                      "(const void *)Kp, in);\n"
                      "        }\n"
                      "        for (int c = tid; c < BN * (DVP / 8); c += THREADS) {\n"
                      "            const int r = c / (DVP / 8), d = c % (DVP / 8) * 8;\n"
                      "            const bool in = j0 + r < SK && d < DV;\n"
                      "            fg_cp_async16_zfill(vd + r * VS + d, in ? (const void *)(V + (j0 + r) * DV + d) : "
                      "(const void *)V, in);\n"
                      "        }\n"
                      "        fg_cp_async_commit();\n");
        return;
    }
    if (ag->tb)
        fg_buf_put(b, "        for (int c = tid; c < BN * DP; c += THREADS) {   // K [SK, D]: d fastest\n"
                      "            const int r = c / DP, d = c % DP;\n"
                      "            const bool in = j0 + r < SK && d < D;\n"
                      "            const fg_i64 at = in ? (j0 + r) * D + d : 0;\n");
    else
        fg_buf_put(b, "        for (int c = tid; c < BN * DP; c += THREADS) {   // K^T [D, SK]: keys fastest\n"
                      "            const int d = c / BN, r = c % BN;\n"
                      "            const bool in = j0 + r < SK && d < D;\n"
                      "            const fg_i64 at = in ? d * SK + j0 + r : 0;\n");
    if (ag->tc)
        fg_buf_printf(b, "            %s x;\n            x.bits = 0;\n            if (in)\n                x = Kp[at];\n"
                         "            kd[r * KS + d] = x;\n        }\n", T);
    else
        fg_buf_put(b, "            kd[r * KS + d] = in ? Kp[at] : 0.0f;\n        }\n");
    fg_buf_put(b, "        for (int c = tid; c < BN * DVP; c += THREADS) {   // V [SK, DV]\n"
                  "            const int r = c / DVP, n = c % DVP;\n"
                  "            const bool in = j0 + r < SK && n < DV;\n"
                  "            const fg_i64 at = in ? (j0 + r) * DV + n : 0;\n");
    if (ag->tc)
        fg_buf_printf(b, "            %s x;\n            x.bits = 0;\n            if (in)\n                x = V[at];\n"
                         "            vd[r * VS + n] = x;\n        }\n", T);
    else
        fg_buf_put(b, "            vd[r * VS + n] = in ? V[at] : 0.0f;\n        }\n");
}

static fg_status emit_attention(fg_emitter *em)
{
    const fg_group *grp = em->grp;
    at_geom ag;
    char why[400];
    if (!at_geometry(em->g, grp->nodes, grp->nnodes, &ag, why, sizeof why))
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "template %s cannot run this group: %s", grp->template_name, why);
    /* the batch text names the scores' matmul: M, N, K */
    fg_em_shape(em, "M", ag.d1.M);
    fg_em_shape(em, "N", ag.d1.N);
    fg_em_shape(em, "K", ag.d1.K);
    fg_em_shape(em, "SQ", ag.d1.M);
    fg_em_shape(em, "SK", ag.d1.N);
    fg_em_shape(em, "D", ag.d1.K);
    fg_em_shape(em, "DV", ag.d2.N);
    fg_em_set(em, "Q", "%s", fg_em_tensor(em, ag.q, 0));
    fg_em_set(em, "K", "%s", fg_em_tensor(em, ag.k, 0));
    fg_em_set(em, "V", "%s", fg_em_tensor(em, ag.v, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_buf t = {0};
    fg_em_batch_text(em, &ag.d1, &t);
    fg_em_set(em, "BATCH", "%s", t.s);
    fg_buf_free(&t);
    /* V's matrix: its own strides along the (shared) batch axes */
    fg_buf_put(&t, "    const fg_i64 v_base = ");
    int terms = 0;
    for (int i = 0; i < ag.d2.nbatch; i++)
        if (ag.d2.bstride[i]) {
            char name[16];
            snprintf(name, sizeof name, "SV%d", i);
            fg_em_shape(em, name, ag.d2.bstride[i]);
            fg_buf_printf(&t, "%syb%d * %s", terms++ ? " + " : "", i, name);
        }
    fg_buf_put(&t, terms ? ";\n" : "0;\n");
    fg_em_set(em, "VBASE", "%s", t.s);
    fg_buf_free(&t);
    for (int i = 0; i < ag.d1.nbatch; i++)
        fg_buf_printf(&t, "%syb%d", t.len ? ", " : "", i);
    fg_buf_printf(&t, "%srow, col", t.len ? ", " : "");
    fg_em_set(em, "EPI_ARGS", "%s", t.s);
    fg_buf_free(&t);
    load_text(&ag, &t);
    fg_em_set(em, "LOAD", "%s", t.s);
    fg_buf_free(&t);
    fg_em_set(em, "T", "%s", fg_em_ctype(ag.dt));
    fg_em_set(em, "KT", "%s", ag.tc ? fg_em_ctype(ag.dt) : "float");
    fg_em_set(em, "TC", "%d", ag.tc);
    fg_em_set(em, "ASYNC", "%d", ag.async);
    fg_em_set(em, "PACK", "%s", ag.dt == FG_DTYPE_BF16 ? "fg_pack_bf162" : "fg_pack_half2");
    fg_em_set(em, "MMA", "%s", ag.dt == FG_DTYPE_BF16 ? "fg_mma_16816_bf16" : "fg_mma_16816_f16");
    fg_em_set(em, "CVT", "%s", ag.dt == FG_DTYPE_BF16 ? "fg_f2bf" : "fg_f2h");
    fg_em_set(em, "WARPS", "%d", ag.warps);
    fg_em_set(em, "BN", "%d", ag.bn);
    fg_em_set(em, "DP", "%d", ag.dp);
    fg_em_set(em, "DVP", "%d", ag.dvp);
    fg_em_set(em, "KS", "%d", ag.ks);
    fg_em_set(em, "VS", "%d", ag.vs);
    fg_em_set(em, "QS", "%d", ag.qs);
    fg_em_set(em, "PAIR", "%d", ag.d2.N % 2 == 0);
    fg_em_set(em, "NANZERO", "%d", ag.nz >= 0);
    /* the epilogue (scale, mask) runs at the scores' coordinates */
    em->epi_ot = &em->g->tensors[ag.s];

    unsigned threads = 32u * (unsigned)ag.warps;
    fg_buf_printf(&em->notes, "//   tile:      %d query rows (%d warps) x key tiles of %d, D %" PRId64 " (padded %d), "
                  "DV %" PRId64 " (padded %d), %" PRId64 " bytes shared; %s\n", 16 * ag.warps, ag.warps, ag.bn,
                  ag.d1.K, ag.dp, ag.d2.N, ag.dvp, ag.smem,
                  ag.tc ? "mma m16n8k16, fp32 accumulation" : "fp32 SIMT");
    fg_buf_printf(&em->notes, "//   operands:  Q [SQ, D], K %s, V [SK, DV]; %s; online softmax %s\n",
                  ag.tb ? "[SK, D]" : "as K^T [D, SK]",
                  ag.async ? "K / V tiles by cp.async, double buffered"
                           : ag.tc ? "K / V tiles by element loads, double buffered" : "K / V tiles by element loads",
                  em->g->nodes[ag.sm].name);
    em->template_file = "attention.cuh";
    em->threads = threads;
    em->k->grid[0] = (unsigned)((ag.d1.M + 16 * ag.warps - 1) / (16 * ag.warps));
    em->k->grid[1] = 1;
    em->k->grid[2] = (unsigned)ag.d1.batch;
    em->k->block[0] = threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* fg_template.owned: the softmax, a nan_to_zero of it and P V. */
static int owned_nodes(const fg_graph *g, const fg_group *grp)
{
    int n = grp->nnodes;
    return n >= 4 && strcmp(g->nodes[grp->nodes[n - 2]].op->name, "nan_to_zero") == 0 ? 3 : 2;
}

/* Capability check (fg_template.check): matmul, element-wise ops, softmax
 * over the scores' last axis, matmul of the softmax by V; head dims up to
 * AT_MAX_D; one dtype; equal batch axes. */
static int check_attention(const fg_tcand *c, char *why, size_t whysz)
{
    at_geom ag;
    if (c->anchor < 0) {
        snprintf(why, whysz, "attention needs a matmul first");
        return 0;
    }
    return at_geometry(c->g, c->nodes, c->nnodes, &ag, why, whysz);
}

static void describe_attention(const fg_tcand *c, char *buf, size_t size)
{
    at_geom ag;
    char why[400];
    buf[0] = 0;
    if (c->anchor < 0 || !at_geometry(c->g, c->nodes, c->nnodes, &ag, why, sizeof why))
        return;
    snprintf(buf, size, "%d query rows x key tiles of %d per block, %d warps (SQ %" PRId64 ", SK %" PRId64 ", D %" PRId64
             ", DV %" PRId64 ", batch %" PRId64 "; D, DV <= %d)", 16 * ag.warps, ag.bn, ag.warps, ag.d1.M, ag.d1.N,
             ag.d1.K, ag.d2.N, ag.d1.batch, AT_MAX_D);
}

static const fg_template rows[] = {
    {.name = "attention", .family = "attention", .order = 36, FG_TEMPLATE_LIMITS,
     .kinds = 1u << FG_OPK_MATMUL, .dtypes = FG_DTYPES_HALF | (1u << FG_DTYPE_F32), .priority = 0, .owns_last = 2,
     .owned = owned_nodes,
     .check = check_attention, .describe = describe_attention, .emit = emit_attention,
     .summary = "softmax(epilogue(Q K^T)) V in one kernel (FlashAttention-2 style: K / V tiles streamed, online "
                "softmax in fp32, scores never stored; head dims <= 128); fp16/bf16 mma m16n8k16, exact fp32 SIMT"},
};
FG_TEMPLATE_FAMILY(attention, rows);
