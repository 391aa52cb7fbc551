/*
 * emit_reduce.c -- the reduce family (templates/reduce.cuh): a reduce node
 * (reduce.h) over any set of axes.  The input's axes are split into runs of
 * adjacent kept and reduced axes (size-1 axes dropped); the kernel finds the
 * logical index of an output's first element from the kept runs and of its
 * k-th element from the reduced runs, and the load helper turns a logical
 * index into a memory offset (the identity for row-major tensors).  The
 * reduction's init, map, combine and finish are fixed C text per
 * fg_reduction (nothing from a rules directory reaches the source).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "reduce.h"
#include "template.h"

/* The text of each reduction: INIT, MAP(v, m), COMBINE(a, b), FINISH(acc, m,
 * LEN); SHIFT: a first pass for the row's max m.  The index reductions
 * instead give BETTER(v, best): element v replaces the best so far (NaN
 * first, as numpy's argmax; >= and <= take the last index). */
static const struct {
    const char *init, *map, *combine, *finish;
    int shift;
    const char *better;
} red_text[] = {
    [FG_RED_SUM] = {"0.0f", "v", "a + b", "acc", 0},
    [FG_RED_MEAN] = {"0.0f", "v", "a + b", "acc / (float)LEN", 0},
    [FG_RED_MAX] = {"fg_rd_load(p, base)", "v", "fg_maxf(a, b)", "acc", 0},
    [FG_RED_MIN] = {"fg_rd_load(p, base)", "v", "fg_minf(a, b)", "acc", 0},
    [FG_RED_PROD] = {"1.0f", "v", "a * b", "acc", 0},
    [FG_RED_SUM_SQUARE] = {"0.0f", "v * v", "a + b", "acc", 0},
    [FG_RED_L1] = {"0.0f", "fabsf(v)", "a + b", "acc", 0},
    [FG_RED_L2] = {"0.0f", "v * v", "a + b", "sqrtf(acc)", 0},
    [FG_RED_LOG_SUM] = {"0.0f", "v", "a + b", "logf(acc)", 0},
    [FG_RED_LOG_SUM_EXP] = {"0.0f", "expf(v - m)", "a + b", "m + logf(acc)", 1},
    [FG_RED_ARGMAX] = {"0.0f", "v", "a", "acc", 0, "v > best || (v != v && best == best)"},
    [FG_RED_ARGMIN] = {"0.0f", "v", "a", "acc", 0, "v < best || (v != v && best == best)"},
    [FG_RED_ARGMAX_LAST] = {"0.0f", "v", "a", "acc", 0, "v >= best || v != v"},
    [FG_RED_ARGMIN_LAST] = {"0.0f", "v", "a", "acc", 0, "v <= best || v != v"},
};
FG_STATIC_ASSERT(FG_COUNTOF(red_text) == FG_RED_COUNT, "red_text out of sync with fg_reduction");

/* A run of adjacent axes of one kind: its element count and the logical
 * stride of its last axis. */
typedef struct run {
    int64_t n, stride;
} run;

/* Splits x's axes into kept and reduced runs, each in axis order. */
static void split_runs(const fg_tensor *x, unsigned mask, run *kept, int *nk, run *red, int *nr)
{
    int64_t stride = 1;
    *nk = *nr = 0;
    run tmp[FG_MAX_RANK];
    int kinds[FG_MAX_RANK], n = 0;   /* kinds[i]: run i is reduced */
    for (int d = x->rank - 1; d >= 0; d--) {   /* from the innermost axis; size-1 axes take no index */
        int k = (mask >> d) & 1u;
        if (x->shape[d] != 1) {
            if (n > 0 && kinds[n - 1] == k) {
                tmp[n - 1].n *= x->shape[d];
            } else {
                tmp[n] = (run){x->shape[d], stride};
                kinds[n++] = k;
            }
        }
        stride *= x->shape[d];
    }
    for (int i = n - 1; i >= 0; i--) {   /* back to axis order */
        if (kinds[i])
            red[(*nr)++] = tmp[i];
        else
            kept[(*nk)++] = tmp[i];
    }
}

/* Appends a line at indentation ind, after a newline when b holds text
 * (placeholder text ends without one). */
static void line(fg_buf *b, int ind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void line(fg_buf *b, int ind, const char *fmt, ...)
{
    if (b->len)
        fg_buf_put(b, "\n");
    for (int i = 0; i < ind; i++)
        fg_buf_put(b, "    ");
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* Statements at indentation ind adding to `var` (declared first, at 0, when
 * declare) the logical offset of index `idx` over runs r[0..n) (the last run
 * varies fastest); run i's count and stride are the shape constants
 * <pfx>N<i> and <pfx>S<i>. */
static void index_code(fg_emitter *em, const run *r, int n, const char *idx, const char *var, const char *pfx,
                       int declare, int ind, fg_buf *b)
{
    char nn[24], sn[24];
    if (declare)
        line(b, ind, "fg_i64 %s = 0;", var);
    if (n == 0)
        return;
    if (n > 1)
        line(b, ind, "fg_i64 q = %s;", idx);
    for (int i = n - 1; i >= 0; i--) {
        snprintf(nn, sizeof nn, "%sN%d", pfx, i);
        snprintf(sn, sizeof sn, "%sS%d", pfx, i);
        fg_em_shape(em, nn, r[i].n);
        fg_em_shape(em, sn, r[i].stride);
        const char *q = n > 1 ? "q" : idx;
        if (i > 0)
            line(b, ind, "%s += (q %% %s) * %s;", var, nn, sn);
        else
            line(b, ind, "%s += %s * %s;", var, q, sn);
        if (i > 0)
            line(b, ind, "q /= %s;", nn);
    }
}

static fg_status emit_reduce(fg_emitter *em)
{
    int a = em->grp->anchor;
    const fg_node *nd = &em->g->nodes[a];
    int xt = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[xt];
    fg_reduce_geom d;
    char why[160];
    if (fg_reduce_geom_of(nd, x, &d, why, sizeof why) != 0)
        return fg_em_error(em, FG_ERR_INPUT, "reduce '%s': %s", nd->name, why);
    run kept[FG_MAX_RANK], red[FG_MAX_RANK];
    int nk, nr;
    split_runs(x, d.mask, kept, &nk, red, &nr);
    /* Lanes per output: a warp over a contiguous row, a block over a long
     * one; a thread per output when the rows are short, or when the reduced
     * axes are outer ones and there are outputs enough to fill the GPU
     * (neighbouring outputs then read neighbouring elements). */
    /* The index reductions: a thread per output, in index order. */
    const fg_reduction rd = fg_node_reduction(nd);
    const int arg = fg_reduction_is_arg(rd);
    int contiguous = nr == 0 || red[nr - 1].stride == 1;
    int64_t group = arg || d.len <= 8 || (!contiguous && (d.rows >= 8192 || d.len <= 64)) ? 1
                    : d.len <= 2048 ? 32 : 0;
    int64_t def = group == 0 ? (d.len >= 8192 ? 512 : 256) : 256, threads;
    if (group != 0) {   /* no more threads than the outputs need */
        int64_t need = (d.rows * group + 31) / 32 * 32;
        def = need < def ? need : def;
    }
    fg_status st = fg_em_threads(em, def, &threads);
    if (st != FG_OK)
        return st;
    if (group == 0 || group > threads)
        group = threads;
    fg_em_tensor(em, em->out, 1);
    fg_buf load = {0}, store = {0}, base = {0}, off = {0};
    st = fg_em_lin_load_body(em, xt, &load);
    if (st == FG_OK)
        st = fg_em_lin_store_body(em, &store);
    if (st == FG_OK) {
        index_code(em, kept, nk, "r", "base", "K", 0, 3, &base);
        if (nk == 0)
            line(&base, 3, "(void)r;   // one output: every axis is reduced");
        index_code(em, red, nr, "k", "off", "R", 1, 4, &off);
        fg_em_shape(em, "ROWS", d.rows);
        fg_em_shape(em, "LEN", d.len);
        fg_em_set(em, "LOAD", "%s", load.s);
        fg_em_set(em, "STORE", "%s", store.s);
        fg_em_set(em, "BASE", "%s", base.s ? base.s : "");
        fg_em_set(em, "OFF", "%s", off.s);
        fg_em_set(em, "GROUP", "%" PRId64, group);
        fg_em_set(em, "WARP", "%d", group >= 32);
        fg_em_set(em, "BLOCK", "%d", group > 32);
        fg_em_set(em, "SHIFT", "%d", red_text[rd].shift);
        fg_em_set(em, "INIT", "%s", red_text[rd].init);
        fg_em_set(em, "MAP", "%s", red_text[rd].map);
        fg_em_set(em, "COMBINE", "%s", red_text[rd].combine);
        fg_em_set(em, "FINISH", "%s", red_text[rd].finish);
        fg_em_set(em, "ARG", "%d", arg);
        fg_em_set(em, "BETTER", "%s", arg ? red_text[rd].better : "false");
        fg_buf_printf(&em->notes, "//   reduce:    %s of %" PRId64 " elements into each of %" PRId64 " outputs, %" PRId64
                      " lane%s per output\n", fg_reduction_name(rd), d.len, d.rows, group, group == 1 ? "" : "s");
        em->template_file = "reduce.cuh";
        int64_t per_block = threads / group, blocks = (d.rows + per_block - 1) / per_block;
        em->k->grid[0] = (unsigned)(blocks > 65535 ? 65535 : blocks);
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
        em->threads = (unsigned)threads;
    }
    fg_buf_free(&load);
    fg_buf_free(&store);
    fg_buf_free(&base);
    fg_buf_free(&off);
    return st;
}

/* Capability check (fg_template.check): a reduce whose axes fit its input. */
static int check_reduce(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    fg_reduce_geom d;
    char r[160];
    if (fg_reduce_geom_of(nd, &c->g->tensors[nd->inputs[0]], &d, r, sizeof r) != 0) {
        snprintf(why, whysz, "reduce computes a reduce node whose axes fit its input");
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "reduce", .family = "reduce", .order = 80, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_REDUCE,
     .dtypes = FG_DTYPES_ANY, .tiles = fg_tile_threads, .check = check_reduce, .emit = emit_reduce,
     .summary = "reduction over any axes (sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp; "
                "argmax, argmin): a thread, a warp or a block per output, fp32 accumulation (integers exact to "
                "2^24)"},
};
FG_TEMPLATE_FAMILY(reduce, rows);
