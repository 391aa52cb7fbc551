/*
 * emit_layernorm.c -- the layernorm family (templates/layernorm.cuh): a
 * layer_norm node (layernorm.h) with its residual skip folded into the loads
 * and scale applied before the epilogue (the bias, an anchor bias that
 * broadcasts onto the output, then the rule's pointwise stages).  One row
 * per warp, held in registers, when the row has at most 1024 elements; one
 * row per block otherwise.  16-byte vector accesses when the row length is a
 * multiple of the vector and the tensors are row-major (an alignment check
 * at run time falls back to scalar accesses).  The output may have another
 * dtype than x (attribute `to`): the vector is x's (16 bytes), its store in
 * the output's dtype (8 bytes for fp32 -> fp16 / bf16, checked for 8-byte
 * alignment); statistics are fp32 either way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "layernorm.h"
#include "template.h"

/* Rows of at most this many elements take one warp each. */
#define LN_WARP_MAX 1024

/* Elements of a 16-byte vector of dtype t. */
static int vec_of(fg_dtype t) { return (int)(16 / fg_dtype_size(t)); }

/* Body of fg_ln_val: the output coordinates of lin, v times scale at them,
 * the epilogue. */
static fg_status val_body(fg_emitter *em, int scale_t, fg_buf *b)
{
    const fg_tensor *y = em->ot;
    char names[FG_MAX_RANK][16];
    const char *yc[FG_MAX_RANK];
    fg_em_lin_coords(em, em->out, "lin", NULL, names, 1, b);
    fg_buf args = {0}, off = {0};
    for (int d = 0; d < y->rank; d++) {
        yc[d] = names[d];
        fg_buf_printf(&args, "%s%s", d ? ", " : "", names[d]);
    }
    fg_status st = FG_OK;
    if (scale_t >= 0) {
        st = fg_em_offset(em, scale_t, 0, yc, y->rank, y->shape, &off);
        if (st == FG_OK)
            fg_buf_iprintf(b, 1, "v *= fg_load(p.%s + %s);  // scale %s\n", fg_em_tensor(em, scale_t, 0), off.s,
                           em->g->tensors[scale_t].name);
    }
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "return fg_epilogue(p, v, %s);", args.s);
    fg_buf_free(&args);
    fg_buf_free(&off);
    return st;
}

/* Body of fg_ln_store: fg_ln_val's value stored at the output's element lin. */
static fg_status store_body(fg_emitter *em, fg_buf *b)
{
    const fg_tensor *y = em->ot;
    if (fg_em_row_major(em, em->out)) {
        fg_buf_iprintf(b, 1, "fg_store(p.%s + lin, fg_ln_val(p, lin, v));", fg_em_tensor(em, em->out, 1));
        return FG_OK;
    }
    char names[FG_MAX_RANK][16];
    const char *yc[FG_MAX_RANK];
    fg_em_lin_coords(em, em->out, "lin", "y", names, 1, b);
    for (int d = 0; d < y->rank; d++)
        yc[d] = names[d];
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, em->out, 0, yc, y->rank, y->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "fg_store(p.%s + %s, fg_ln_val(p, lin, v));", fg_em_tensor(em, em->out, 1), off.s);
    fg_buf_free(&off);
    return st;
}

static fg_status emit_layernorm(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    fg_ln_geom d;
    char why[400];
    if (fg_ln_geom_of(em->g, nd, &d, why, sizeof why) != 0)
        return fg_em_error(em, FG_ERR_INPUT, "layer_norm '%s': %s", nd->name, why);
    int xt = nd->inputs[0], kt = d.skip >= 0 ? nd->inputs[d.skip] : -1;
    int st_t = d.scale >= 0 ? nd->inputs[d.scale] : -1;
    const fg_tensor *x = &em->g->tensors[xt];
    int warp = d.len <= LN_WARP_MAX;
    int vec = vec_of(x->dtype);
    int vin = d.len % vec == 0 && fg_em_row_major(em, xt) && (kt < 0 || fg_em_row_major(em, kt));
    /* the output in another dtype (`to`) stores VEC elements too: 8 bytes for fp32 -> fp16 / bf16 */
    int vout = vin && fg_em_row_major(em, em->out);
    int oalign = vec * (int)fg_dtype_size(em->ot->dtype);
    oalign = oalign > 16 ? 16 : oalign;
    if (!vin)
        vec = 1;
    int64_t per = (d.len + 32 * vec - 1) / (32 * vec), threads;
    int64_t def = warp ? 128 : d.len <= 4096 ? 256 : 512;
    if (warp) {   /* no more warps than rows */
        int64_t need = d.rows * 32;
        def = need < def ? need : def;
    }
    fg_status st = fg_em_threads(em, def, &threads);
    if (st != FG_OK)
        return st;
    fg_em_tensor(em, em->out, 1);
    const char *X = fg_em_tensor(em, xt, 0), *K = kt >= 0 ? fg_em_tensor(em, kt, 0) : NULL;
    const char *Y = fg_em_tensor(em, em->out, 1);
    fg_buf loadx = {0}, loadk = {0}, val = {0}, store = {0}, loadv = {0}, storev = {0};
    st = fg_em_lin_load_body(em, xt, &loadx);
    if (st == FG_OK && kt >= 0)
        st = fg_em_lin_load_body(em, kt, &loadk);
    if (st == FG_OK)
        st = val_body(em, st_t, &val);
    if (st == FG_OK)
        st = store_body(em, &store);
    if (st == FG_OK) {
        const char *plus = kt >= 0 ? " + fg_ln_skip(p, lin + j)" : "";
        if (vec > 1) {
            fg_buf_iprintf(&loadv, 1, "if (fg_aligned16(p.%s + lin)%s%s%s) {\n", X, K ? " && fg_aligned16(p." : "",
                           K ? K : "", K ? " + lin)" : "");
            fg_buf_iprintf(&loadv, 2, "fg_load%d(p.%s + lin, u);\n", vec, X);
            if (K) {
                fg_buf_iprintf(&loadv, 2, "float s[%d];\n", vec);
                fg_buf_iprintf(&loadv, 2, "fg_load%d(p.%s + lin, s);\n", vec, K);
                fg_buf_iprintf(&loadv, 2, "for (int j = 0; j < %d; j++)\n", vec);
                fg_buf_iprintf(&loadv, 3, "u[j] += s[j];\n");
            }
            fg_buf_iprintf(&loadv, 1, "} else {\n");
            fg_buf_iprintf(&loadv, 2, "for (int j = 0; j < %d; j++)\n", vec);
            fg_buf_iprintf(&loadv, 3, "u[j] = fg_ln_x(p, lin + j)%s;\n", plus);
            fg_buf_iprintf(&loadv, 1, "}");
        } else {
            fg_buf_iprintf(&loadv, 1, "u[0] = fg_ln_x(p, lin)%s;", kt >= 0 ? " + fg_ln_skip(p, lin)" : "");
        }
        if (vec > 1 && vout) {
            fg_buf_iprintf(&storev, 1, "float w[%d];\n", vec);
            fg_buf_iprintf(&storev, 1, "for (int j = 0; j < %d; j++)\n", vec);
            fg_buf_iprintf(&storev, 2, "w[j] = fg_ln_val(p, lin + j, v[j]);\n");
            if (oalign == 16)
                fg_buf_iprintf(&storev, 1, "if (fg_aligned16(p.%s + lin))\n", Y);
            else   /* fg_store4 of 2-byte elements: one 8-byte access */
                fg_buf_iprintf(&storev, 1, "if (((fg_u64)(p.%s + lin) & %du) == 0)\n", Y, oalign - 1);
            fg_buf_iprintf(&storev, 2, "fg_store%d(p.%s + lin, w);\n", vec, Y);
            fg_buf_iprintf(&storev, 1, "else\n");
            fg_buf_iprintf(&storev, 2, "for (int j = 0; j < %d; j++)\n", vec);
            fg_buf_iprintf(&storev, 3, "fg_store(p.%s + lin + j, w[j]);", Y);
        } else {
            fg_buf_iprintf(&storev, 1, "for (int j = 0; j < %d; j++)\n", vec);
            fg_buf_iprintf(&storev, 2, "fg_ln_store(p, lin + j, v[j]);");
        }
        fg_em_shape(em, "ROWS", d.rows);
        fg_em_shape(em, "LEN", d.len);
        fg_em_set(em, "LOADX", "%s", loadx.s);
        fg_em_set(em, "LOADSKIP", "%s", loadk.s ? loadk.s : "");
        fg_em_set(em, "SKIP", "%d", kt >= 0);
        fg_em_set(em, "VAL", "%s", val.s);
        fg_em_set(em, "STORE", "%s", store.s);
        fg_em_set(em, "LOADV", "%s", loadv.s);
        fg_em_set(em, "STOREV", "%s", storev.s);
        fg_em_set(em, "WARP", "%d", warp);
        fg_em_set(em, "RMS", "%d", d.rms);
        fg_em_set(em, "VEC", "%d", vec);
        fg_em_set(em, "PER", "%" PRId64, per);
        fg_em_set(em, "EPS", "%.9gf", d.eps);
        char io[64] = "";
        if (em->ot->dtype != x->dtype)
            snprintf(io, sizeof io, ", %s in, %s out", fg_dtype_name(x->dtype), fg_dtype_name(em->ot->dtype));
        fg_buf_printf(&em->notes, "//   layernorm: %s of %" PRId64 " rows of %" PRId64 " elements%s, %s, %d-element %s%s\n",
                      d.rms ? "RMS norm" : "layer norm", d.rows, d.len, kt >= 0 ? " (with skip)" : "",
                      warp ? "a warp per row" : "a block per row", vec,
                      vec > 1 ? (vout ? "loads and stores" : "loads") : "accesses", io);
        em->template_file = "layernorm.cuh";
        int64_t per_block = warp ? threads / 32 : 1, blocks = (d.rows + per_block - 1) / per_block;
        em->k->grid[0] = (unsigned)(blocks > 65535 ? 65535 : blocks);
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
        em->threads = (unsigned)threads;
    }
    fg_buf_free(&loadx);
    fg_buf_free(&loadk);
    fg_buf_free(&val);
    fg_buf_free(&store);
    fg_buf_free(&loadv);
    fg_buf_free(&storev);
    return st;
}

/* Capability check (fg_template.check): a layer_norm of a float input whose
 * parameters fit it (layernorm.h); the output's dtype (the family's dtypes,
 * checked by the planner) may differ from x's; any layouts (offsets follow
 * each tensor's). */
static int check_layernorm(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    fg_ln_geom d;
    char r[400];
    if (fg_ln_geom_of(c->g, nd, &d, r, sizeof r) != 0) {
        snprintf(why, whysz, "layernorm computes a layer_norm whose parameters fit its input: %s", r);
        return 0;
    }
    const fg_tensor *x = &c->g->tensors[nd->inputs[0]];
    if (!fg_dtype_is_float(x->dtype)) {
        snprintf(why, whysz, "layernorm reads a float input (fp32, fp16, bf16), not %s", fg_dtype_name(x->dtype));
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "layernorm", .family = "layernorm", .order = 90, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_LAYER_NORM,
     .dtypes = FG_DTYPES_FLOAT, .tiles = fg_tile_threads, .check = check_layernorm, .emit = emit_layernorm,
     .summary = "layer / RMS normalization over trailing axes with a fused residual skip: a warp per row (in "
                "registers) up to 1024 elements, else a block per row; fp32 statistics, 16-byte accesses"},
};
FG_TEMPLATE_FAMILY(layernorm, rows);
