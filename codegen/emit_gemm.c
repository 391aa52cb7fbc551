/*
 * emit_gemm.c -- the gemm family: templates/gemm.cuh (fp32, SIMT, shared
 * memory tiles) and gemm_tc.cuh (fp16 / bf16 on tensor cores, fp32
 * accumulation).  A is [M, K] or batched [B, M, K] (trans_a: [.., K, M]);
 * B is [K, N] or batched (trans_b: [.., N, K]); Y is [M, N] or [B, M, N].
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* Appends helper name(p, bt, i, j) = offset of element (i, j) of a row-major
 * matrix tensor t (stored transposed when trans), batch bt. */
static void matrix_offset_fn(fg_emitter *em, const char *name, const char *i, const char *j, int t, int trans)
{
    const fg_tensor *x = &em->g->tensors[t];
    fg_buf *b = &em->helpers;
    fg_buf_printf(b, "// %s(%s, %s) of batch bt: %s is [", name + 4, i, j, x->name);
    for (int d = 0; d < x->rank; d++)
        fg_buf_printf(b, "%s%" PRId64, d ? ", " : "", x->shape[d]);
    fg_buf_printf(b, "] row-major%s\n", trans ? ", transposed" : "");
    fg_buf_printf(b, "FG_DEVICE fg_i64 %s(const fg_params_%s &p, fg_i64 bt, fg_i64 %s, fg_i64 %s)\n{\n    return ", name,
                  em->k->name, i, j);
    int r = x->rank;
    if (r == 3) {
        fg_buf_put(b, "bt * ");
        fg_em_dim(em, t, 1, b);
        fg_buf_put(b, " * ");
        fg_em_dim(em, t, 2, b);
        fg_buf_put(b, " + ");
    }
    fg_buf_printf(b, "%s * ", trans ? j : i);
    fg_em_dim(em, t, r - 1, b);
    fg_buf_printf(b, " + %s;\n}\n\n", trans ? i : j);
}

fg_status fg_emit_gemm(fg_emitter *em)
{
    int a = em->grp->anchor;
    if (a < 0 || em->g->nodes[a].op->kind != FG_OPK_MATMUL)
        return fg_em_error(em, FG_ERR_INPUT, "template %s needs a matmul anchor", em->grp->template_name);
    const fg_node *nd = &em->g->nodes[a];
    int at = nd->inputs[0], bt = nd->inputs[1];
    const fg_tensor *A = &em->g->tensors[at], *B = &em->g->tensors[bt], *Y = em->ot;
    int ta = fg_em_attr_int(em, a, "trans_a", 0) != 0, tb = fg_em_attr_int(em, a, "trans_b", 0) != 0;
    if (A->rank < 2 || A->rank > 3 || B->rank < 2 || B->rank > 3 || Y->rank < 2 || Y->rank > 3)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "matmul '%s': operands must be rank 2 or 3", nd->name);
    int64_t M = ta ? A->shape[A->rank - 1] : A->shape[A->rank - 2];
    int64_t K = ta ? A->shape[A->rank - 2] : A->shape[A->rank - 1];
    int64_t KB = tb ? B->shape[B->rank - 1] : B->shape[B->rank - 2];
    int64_t N = tb ? B->shape[B->rank - 2] : B->shape[B->rank - 1];
    int64_t batch = Y->rank == 3 ? Y->shape[0] : 1;
    if (K != KB || Y->shape[Y->rank - 2] != M || Y->shape[Y->rank - 1] != N ||
        (A->rank == 3 && A->shape[0] != batch) || (B->rank == 3 && B->shape[0] != batch))
        return fg_em_error(em, FG_ERR_INPUT, "matmul '%s': shapes do not agree", nd->name);
    if (batch > 65535)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "matmul '%s': batch %" PRId64 " too large", nd->name, batch);

    fg_em_shape(em, "M", M);
    fg_em_shape(em, "N", N);
    fg_em_shape(em, "K", K);
    fg_em_set(em, "A", "%s", fg_em_tensor(em, at, 0));
    fg_em_set(em, "B", "%s", fg_em_tensor(em, bt, 0));
    fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
    fg_em_set(em, "EPI_ARGS", "%s", Y->rank == 3 ? "bt, row, col" : "row, col");
    matrix_offset_fn(em, "off_a", "m", "k", at, ta);
    matrix_offset_fn(em, "off_b", "k", "n", bt, tb);
    matrix_offset_fn(em, "off_y", "row", "col", em->out, 0);

    int tc = strcmp(fg_template_base(em->tpl)->name, "gemm_tc") == 0;
    if (tc) {
        if (Y->dtype == FG_DTYPE_F32 || A->dtype != Y->dtype || B->dtype != Y->dtype)
            return fg_em_error(em, FG_ERR_UNSUPPORTED, "tensor-core gemm '%s' needs fp16 or bf16 operands of one dtype",
                               nd->name);
        int h = Y->dtype == FG_DTYPE_F16;
        fg_em_set(em, "T", "%s", h ? "fg_half" : "fg_bf16");
        fg_em_set(em, "PACK", "%s", h ? "fg_pack_half2" : "fg_pack_bf162");
        fg_em_set(em, "MMA", "%s", h ? "fg_mma_16816_f16" : "fg_mma_16816_bf16");
        em->template_file = "gemm_tc.cuh";
        em->threads = 128;
        em->k->grid[0] = (unsigned)((N + 63) / 64);
        em->k->grid[1] = (unsigned)((M + 63) / 64);
        em->k->grid[2] = (unsigned)batch;
        em->k->block[0] = 128;
        em->k->block[1] = em->k->block[2] = 1;
        return FG_OK;
    }

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
    fg_em_set(em, "TILE_M", "%" PRId64, v[0]);
    fg_em_set(em, "TILE_N", "%" PRId64, v[1]);
    fg_em_set(em, "TILE_K", "%" PRId64, v[2]);
    em->template_file = "gemm.cuh";
    em->threads = (unsigned)threads;
    em->k->grid[0] = (unsigned)((N + v[1] - 1) / v[1]);
    em->k->grid[1] = (unsigned)((M + v[0] - 1) / v[0]);
    em->k->grid[2] = (unsigned)batch;
    em->k->block[0] = (unsigned)threads;
    em->k->block[1] = em->k->block[2] = 1;
    return FG_OK;
}

/* Shared by both gemm templates: operand ranks and the grid's limits (for
 * the default 64x64 tiles). */
static int gemm_shape_ok(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->anchor];
    const fg_tensor *A = &c->g->tensors[nd->inputs[0]], *B = &c->g->tensors[nd->inputs[1]];
    const fg_tensor *Y = &c->g->tensors[nd->output];
    if (A->rank < 2 || A->rank > 3 || B->rank < 2 || B->rank > 3 || Y->rank < 2 || Y->rank > 3) {
        snprintf(why, whysz, "operands must be rank 2 or 3");
        return 0;
    }
    int64_t batch = Y->rank == 3 ? Y->shape[0] : 1, M = Y->shape[Y->rank - 2];
    if (batch > 65535 || (M + 63) / 64 > 65535) {
        snprintf(why, whysz, "batch %" PRId64 " or %" PRId64 " rows exceed the grid", batch, M);
        return 0;
    }
    return 1;
}

int fg_check_gemm(const fg_tcand *c, char *why, size_t whysz) { return gemm_shape_ok(c, why, whysz); }

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
    return gemm_shape_ok(c, why, whysz);
}
