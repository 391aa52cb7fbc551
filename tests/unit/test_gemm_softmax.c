/*
 * test_gemm_softmax.c -- the matmul_softmax rule and the gemm_softmax
 * template (a matmul, its element-wise epilogue and a softmax over the rows
 * in one kernel), against the host reference of the unfused graph.
 *
 * Numerics: each case is planned (one kernel, rule matmul_softmax, template
 * gemm_softmax), compiled for the emulator and run on seeded random inputs
 * rounded to the dtype (the reference reads the same values), the output
 * poisoned with NaN first.  The matrix: odd M, N 1, 7, 33, 64, 128, 1000,
 * odd K, fp32 / fp16 / bf16, the gemm op's own bias, a scale, an additive
 * mask, both transposes, B [K, N] in element and in 16-byte loads, batched
 * (attention scores [B, M, N]) and a rank-1 A.
 * NaN and infinities: a NaN in A, +inf and -inf in B, a -inf mask and a row
 * masked entirely; the NaN positions must be the reference's and the rest
 * within tolerance.
 *
 * Plans: the pattern is one kernel; a softmax over another axis, N above
 * the template's limit, a batch-1 classifier whose one block would do the
 * whole long reduction, and a matmul output read elsewhere are two or more,
 * with the reason in the near-miss notes, and those unfused plans still
 * match the reference in emulation (the classifier is planned only).
 *
 * NVRTC: kernels of the matrix (every dtype; the 1000-column one with its
 * shapes as parameters too) compile for sm_80 and sm_90 with an empty log
 * (tu_nvrtc_clean), the fp16 / bf16 ones hold tensor-core mma (HMMA), and
 * no cubin of either arch has a stack frame or local memory (tu_cubin_read:
 * cuobjdump and nvdisasm; skipped, and said so, without them).
 *
 * Tolerances (relative L2): fp32 1e-5, fp16 5e-3, bf16 2e-2 (fp32
 * accumulation: about the output's own rounding).  Seed: FUSEGEN_SEED, else
 * fixed; printed.  In CI's sanitizer pass (FUSEGEN_EMU_ASAN set) the
 * emulated kernels are built with AddressSanitizer, so an out-of-bounds
 * access of the generated code fails, and the NVRTC check is left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "jit.h"
#include "plan.h"
#include "reference.h"
#include "report_sass.h"
#include "tensor_convert.h"
#include "testutil.h"

static uint64_t seed = 20261214;
static char *cache_dir;
static fg_context *g_ctx;
static int sanitizer_pass;   /* FUSEGEN_EMU_ASAN set: CI's sanitizer pass (kernels built with ASan) */

static double tol_of(fg_dtype d) { return d == FG_DTYPE_F16 ? 5e-3 : d == FG_DTYPE_BF16 ? 2e-2 : 1e-5; }

/* ---- cases ------------------------------------------------------------------ */

typedef enum { E_NONE, E_BIAS, E_SCALE, E_MASK, E_BIAS_SCALE } epi_kind;
static const char *const epi_name[] = {"none", "bias", "scale", "mask", "bias_scale"};

typedef struct gs_case {
    int64_t M, N, K;
    int ta, tb;
    epi_kind epi;
    int64_t batch;   /* 0: no batch axis; else A and B both [batch, ...] */
    int avec;        /* A rank-1 [K] */
    unsigned dtypes; /* bit (1u << fg_dtype) */
} gs_case;

#define F32 (1u << FG_DTYPE_F32)
#define F16 (1u << FG_DTYPE_F16)
#define BF16 (1u << FG_DTYPE_BF16)

static const gs_case CASES[] = {
    {7, 1, 5, 0, 0, E_NONE, 0, 0, F32 | F16},                     /* one column: every output is 1 */
    {13, 7, 9, 0, 0, E_BIAS, 0, 0, F32 | F16 | BF16},             /* the gemm op's bias [N] */
    {17, 33, 19, 0, 0, E_SCALE, 2, 0, F32 | F16 | BF16},          /* attention scores [2, 17, 33] */
    {9, 128, 31, 0, 1, E_MASK, 0, 0, F32 | F16},                  /* B [N, K], an additive [M, N] mask */
    {11, 64, 9, 0, 0, E_MASK, 3, 0, F32 | BF16},                 /* B [K, N] in 16-byte loads, batched */
    {5, 1000, 7, 1, 0, E_BIAS_SCALE, 0, 0, F32 | F16 | BF16},     /* A [K, M]; 8 warps, a padded row */
    {1, 33, 11, 0, 0, E_SCALE, 0, 1, F32},                        /* A a vector: one row */
};

static void case_name(const gs_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "gs_%s%" PRId64 "x%" PRId64 "x%" PRId64 "%s%s%s_%s", c->batch ? "batched_" : "", c->M, c->N,
             c->K, c->ta ? "_ta" : "", c->tb ? "_tb" : "", c->avec ? "_avec" : "", epi_name[c->epi]);
}

/* The graph of case c in dtype d. */
static char *case_graph(const gs_case *c, fg_dtype d, const char *name)
{
    fg_buf b = {0};
    int64_t M = c->M, N = c->N, K = c->K;
    char bt[32] = "";
    if (c->batch)
        snprintf(bt, sizeof bt, "%" PRId64 ", ", c->batch);
    fg_buf_printf(&b, "graph: %s\nseed: %" PRIu64 "\ndtype: %s\ninputs:\n", name, seed, fg_dtype_name(d));
    if (c->avec)
        fg_buf_printf(&b, "  - { name: a, shape: [%" PRId64 "] }\n", K);
    else
        fg_buf_printf(&b, "  - { name: a, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->ta ? K : M, c->ta ? M : K);
    fg_buf_printf(&b, "  - { name: b, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->tb ? N : K, c->tb ? K : N);
    if (c->epi == E_MASK)
        fg_buf_printf(&b, "  - { name: mask, shape: [%" PRId64 ", %" PRId64 "] }\n", M, N);
    if (c->epi == E_BIAS || c->epi == E_BIAS_SCALE)
        fg_buf_printf(&b, "weights:\n  - { name: bias, shape: [%" PRId64 "] }\n", N);
    if (c->epi == E_SCALE || c->epi == E_BIAS_SCALE)
        fg_buf_printf(&b, "%s  - { name: s, shape: [1] }\n", c->epi == E_SCALE ? "weights:\n" : "");
    const char *attrs = c->ta && c->tb ? ", attrs: { trans_a: true, trans_b: true }"
                      : c->ta          ? ", attrs: { trans_a: true }"
                      : c->tb          ? ", attrs: { trans_b: true }"
                                       : "";
    int bias = c->epi == E_BIAS || c->epi == E_BIAS_SCALE;
    fg_buf_printf(&b, "nodes:\n  - { name: mm, op: %s, inputs: [a, b%s]%s }\n", bias ? "gemm" : "matmul",
                  bias ? ", bias" : "", attrs);
    const char *last = "mm";
    if (c->epi == E_SCALE || c->epi == E_BIAS_SCALE) {
        fg_buf_put(&b, "  - { name: sc, op: mul, inputs: [mm, s] }\n");
        last = "sc";
    } else if (c->epi == E_MASK) {
        fg_buf_put(&b, "  - { name: mk, op: add, inputs: [mm, mask] }\n");
        last = "mk";
    }
    fg_buf_printf(&b, "  - { name: y, op: softmax, inputs: [%s] }\noutputs: [y]\n", last);
    return fg_buf_take(&b);
}

static fg_graph *parse(const char *name, const char *text)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(g_ctx, name, text, strlen(text), &g);
    if (st)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* ---- running a plan in emulation ---------------------------------------------- */

typedef tu_poke_fn poke_fn;
typedef tu_cmp cmp_result;

/* tu_exec_compare in this file's context. */
static void run_vs_reference(const fg_graph *g, fg_exec *e, poke_fn poke, uint64_t s, cmp_result *res)
{
    tu_exec_compare(g_ctx, g, e, poke, s, res);
}

/* Plans graph text to one matmul_softmax kernel, runs it, checks tolerance. */
static void check_fused(const char *name, const char *text, fg_dtype d, poke_fn poke, int64_t want_nan)
{
    fg_graph *g = parse(name, text);
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(g_ctx, g, &p);
    if (st)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    if (p->ngroups != 1 || p->groups[0].rule < 0 || strcmp(g_ctx->rules[p->groups[0].rule]->name, "matmul_softmax") ||
        strcmp(p->groups[0].template_name, "gemm_softmax"))
        fail_msg("%s: %d groups, first rule %s template %s (want one matmul_softmax / gemm_softmax)", name, p->ngroups,
                 p->groups[0].rule >= 0 ? g_ctx->rules[p->groups[0].rule]->name : "-", p->groups[0].template_name);
    fg_exec *e = tu_compile_emu(g_ctx, p);
    cmp_result r;
    run_vs_reference(g, e, poke, seed ^ fg_hash64(name, strlen(name)), &r);
    print_message("  %-40s %-5s rel_l2 %.2e (tolerance %.0e), NaN %" PRId64 " as the reference, mismatches %" PRId64
                  " NaN, %" PRId64 " inf\n", name, fg_dtype_name(d), r.rel, tol_of(d), r.nan_ref, r.nan_mismatch,
                  r.inf_mismatch);
    assert_int_equal(r.nan_mismatch, 0);
    assert_int_equal(r.inf_mismatch, 0);
    assert_true(r.rel <= tol_of(d));   /* false for NaN too */
    if (want_nan >= 0)
        assert_int_equal(r.nan_ref, want_nan);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_numerics_matrix(void **state)
{
    (void)state;
    int runs = 0;
    for (size_t i = 0; i < FG_COUNTOF(CASES); i++)
        for (int d = 0; d < TU_FLOAT_DTYPES; d++) {
            if (!(CASES[i].dtypes & (1u << d)))
                continue;
            char name[96];
            case_name(&CASES[i], name, sizeof name);
            char *text = case_graph(&CASES[i], (fg_dtype)d, name);
            check_fused(name, text, (fg_dtype)d, NULL, 0);
            free(text);
            runs++;
        }
    assert_true(runs >= 16);
}

/* [7, 5] x [5, 33] + mask [7, 33]: A row 2 has a NaN (row 2 NaN); B column 3
 * holds +inf at k 1 (rows whose a[r][1] > 0 get +inf there: the whole row
 * NaN; < 0: -inf, exactly 0 there); column 9 of the mask is -inf (0 in every
 * row); mask row 5 is all -inf (NaN: 0 / 0, as the unfused softmax). */
static void poke_special(const fg_graph *g, double **v)
{
    int a = fg_graph_find_tensor(g, "a"), b = fg_graph_find_tensor(g, "b"), m = fg_graph_find_tensor(g, "mask");
    assert_true(a >= 0 && b >= 0 && m >= 0);
    v[a][2 * 5 + 3] = NAN;
    v[b][1 * 33 + 3] = INFINITY;
    for (int r = 0; r < 7; r++) {
        v[m][r * 33 + 9] = -INFINITY;
        if (v[a][r * 5 + 1] == 0)
            v[a][r * 5 + 1] = 0.5;   /* no inf * 0 */
    }
    for (int c = 0; c < 33; c++)
        v[m][5 * 33 + c] = -INFINITY;
}

static void test_nan_inf(void **state)
{
    (void)state;
    static const gs_case c = {7, 33, 5, 0, 0, E_MASK, 0, 0, F32 | F16};
    for (int d = 0; d < TU_FLOAT_DTYPES; d++) {
        if (!(c.dtypes & (1u << d)))
            continue;
        char name[64];
        snprintf(name, sizeof name, "gs_nan_inf_%s", fg_dtype_name((fg_dtype)d));
        char *text = case_graph(&c, (fg_dtype)d, name);
        /* at least rows 2 and 5 are NaN; the +inf rows depend on the signs */
        check_fused(name, text, (fg_dtype)d, poke_special, -1);
        free(text);
    }
}

/* Must-not-fuse: each graph plans to `groups` kernels, a note holds `why`,
 * and the plan matches the reference in emulation. */
typedef struct neg_case {
    const char *name, *body, *why;
    int groups;
    int run;    /* also run the unfused plan */
} neg_case;

#define NEG_HEAD "graph: %s\nseed: 5\ndtype: fp32\n"

static const neg_case NEGS[] = {
    {"softmax_axis0",
     "inputs: [{ name: a, shape: [9, 7] }, { name: b, shape: [7, 33] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: softmax, inputs: [mm], attrs: { axis: 0 } }\noutputs: [y]\n",
     "does not normalize the matmul's last axis alone", 2, 1},
    {"softmax_two_axes",
     "inputs: [{ name: a, shape: [2, 9, 7] }, { name: b, shape: [7, 5] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: softmax, inputs: [mm], attrs: { axis: 1, naxes: 0 } }\noutputs: [y]\n",
     "does not normalize the matmul's last axis alone", 2, 1},
    {"n_too_large",
     "inputs: [{ name: a, shape: [3, 5] }, { name: b, shape: [5, 1025] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: softmax, inputs: [mm] }\noutputs: [y]\n",
     "N 1025 > 1024", 2, 1},
    {"classifier_batch1",
     "inputs: [{ name: a, shape: [1, 4096] }, { name: b, shape: [4096, 1000] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: softmax, inputs: [mm] }\noutputs: [y]\n",
     "1 block (M 1, batch 1) of 16 x 1024 x K 4096 multiply-adds each would leave most SMs idle", 2, 0},
    {"output_read_elsewhere",
     "inputs: [{ name: a, shape: [9, 7] }, { name: b, shape: [7, 33] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: softmax, inputs: [mm] }\n"
     "  - { name: z, op: add, inputs: [y, mm] }\noutputs: [z]\n",
     "mm's output also feeds", 3, 1},
};

static void test_plans(void **state)
{
    (void)state;
    /* the pattern: one kernel, what --explain says about it */
    static const gs_case pos = {17, 33, 19, 0, 0, E_SCALE, 2, 0, F16};
    char *text = case_graph(&pos, FG_DTYPE_F16, "gs_plan");
    fg_graph *g = parse("gs_plan", text);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(tu_group_desc(g_ctx, p, "mm"), "matmul_softmax:mm,sc,y");
    print_message("  pattern: 1 kernel; %s\n", p->groups[0].choice);
    assert_non_null(strstr(p->groups[0].choice, "gemm_softmax chosen"));
    assert_non_null(strstr(p->groups[0].choice, "16 rows x 48 columns per block, 3 warps"));
    fg_plan_free(p);
    fg_graph_free(g);
    free(text);

    for (size_t i = 0; i < FG_COUNTOF(NEGS); i++) {
        fg_buf b = {0};
        fg_buf_printf(&b, NEG_HEAD "%s", NEGS[i].name, NEGS[i].body);
        g = parse(NEGS[i].name, b.s);
        p = NULL;
        assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
        int found = 0;
        for (int k = 0; k < p->nnotes && !found; k++)
            found = strstr(p->notes[k], NEGS[i].why) != NULL;
        print_message("  %-22s %d kernels (%s, ", NEGS[i].name, p->ngroups, tu_group_desc(g_ctx, p, "mm"));
        print_message("%s)\n", tu_group_desc(g_ctx, p, "y"));
        if (!found) {
            for (int k = 0; k < p->nnotes; k++)
                fprintf(stderr, "  note: %s\n", p->notes[k]);
            fail_msg("%s: no note says '%s'", NEGS[i].name, NEGS[i].why);
        }
        assert_int_equal(p->ngroups, NEGS[i].groups);
        for (int k = 0; k < p->ngroups; k++)
            assert_string_not_equal(p->groups[k].template_name, "gemm_softmax");
        if (NEGS[i].run) {
            fg_exec *e = tu_compile_emu(g_ctx, p);
            cmp_result r;
            run_vs_reference(g, e, NULL, 31 + i, &r);
            assert_int_equal(r.nan_ref + r.nan_mismatch + r.inf_mismatch, 0);
            assert_true(r.rel <= 1e-5);
            fg_exec_free(e);
        }
        fg_plan_free(p);
        fg_graph_free(g);
        fg_buf_free(&b);
    }

    /* a rule naming the gemm family for the same chain: the gemm templates
     * refuse the softmax (no silent drop of a row op); a rule giving
     * gemm_softmax a log softmax (a softmax-kind op with `log`): refused */
    char *dir = tu_vocab_dir();
    free(tu_write(dir, "mine.yaml",
                  "rule: mm_sm_gemm\npriority: 50\n"
                  "match:\n  - mm: { kind: matmul }\n  - sm: { op: softmax }\n"
                  "kernel:\n  template: gemm\n  epilogue: [ { bias: mm.bias } ]\n"
                  "---\n"
                  "op: my_log_softmax\nkind: softmax\ninputs: [x]\n"
                  "attrs: { axis: { type: int, default: -1 }, naxes: { type: int, default: 1 },\n"
                  "         log: { type: bool, default: true } }\n"
                  "---\n"
                  "rule: mm_lsm\npriority: 50\n"
                  "match:\n  - mm: { kind: matmul }\n  - sm: { op: my_log_softmax }\n"
                  "kernel:\n  template: gemm_softmax\n  epilogue: [ { bias: mm.bias } ]\n"));
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
    g = NULL;
    fg_buf b = {0};
    fg_buf_printf(&b, NEG_HEAD "inputs: [{ name: a, shape: [9, 7] }, { name: b, shape: [7, 33] }]\n"
                  "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
                  "  - { name: y, op: softmax, inputs: [mm] }\noutputs: [y]\n", "gemm_family");
    assert_int_equal(fg_graph_parse(ctx, "gemm_family", b.s, b.len, &g), FG_OK);
    p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 2);
    int found = 0;
    for (int k = 0; k < p->nnotes && !found; k++)
        found = strstr(p->notes[k], "y (op softmax) after the matmul is not element-wise") != NULL;
    assert_true(found);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_buf_free(&b);
    fg_buf_printf(&b, NEG_HEAD "inputs: [{ name: a, shape: [9, 7] }, { name: b, shape: [7, 33] }]\n"
                  "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
                  "  - { name: y, op: my_log_softmax, inputs: [mm] }\noutputs: [y]\n", "log_softmax");
    g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "log_softmax", b.s, b.len, &g), FG_OK);
    p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 2);
    found = 0;
    for (int k = 0; k < p->nnotes && !found; k++)
        found = strstr(p->notes[k], "y (op my_log_softmax) is a log softmax") != NULL;
    assert_true(found);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_buf_free(&b);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* Reads the cubins of ks[0..n) (one arch): no stack and no local memory,
 * HMMA in the fp16 / bf16 kernels and none in fp32. */
static void cubins_check(const fg_kernel *ks, const char *const *what, int n, const char *arch)
{
    for (int i = 0; i < n; i++) {
        fg_res_usage u;
        fg_sass_mix m = {0};
        tu_cubin_read(&ks[i], &u, &m, NULL);
        print_message("  %-52s %s: %d registers, %d bytes shared, stack %d, local %d, HMMA %d\n", what[i], arch,
                      u.registers, u.shared, u.stack, u.local, m.hmma);
        assert_int_equal(u.stack, 0);
        assert_int_equal(u.local, 0);
        if (ks[i].dtype == FG_DTYPE_F32)
            assert_int_equal(m.hmma, 0);
        else
            assert_true(m.hmma > 0);
    }
}

/* NVRTC: every dtype of the batched 33-column case, the batched 64-column
 * one (16-byte loads of B) and the 1000-column one (8 warps, the most
 * registers; shapes as parameters too): sm_80 and sm_90 with an empty log,
 * then each arch's cubins read. */
static void test_nvrtc(void **state)
{
    (void)state;
    if (sanitizer_pass) {
        /* the sanitizer pass leaves NVRTC and cuobjdump work out (docs/testing.md); the plain pass runs it */
        printf("NVRTC check NOT RUN in the sanitizer pass (FUSEGEN_EMU_ASAN is set)\n");
        return;
    }
    enum { MAXK = 16 };
    fg_kernel ks[MAXK];
    char what[MAXK][80];
    const char *whatp[MAXK];
    int nk = 0;
    static const size_t which[] = {2, 4, 5};
    for (size_t w = 0; w < FG_COUNTOF(which); w++) {
        const gs_case *c = &CASES[which[w]];
        for (int d = 0; d < TU_FLOAT_DTYPES; d++) {
            if (!(c->dtypes & (1u << d)))
                continue;
            char name[96];
            case_name(c, name, sizeof name);
            char *text = case_graph(c, (fg_dtype)d, name);
            fg_graph *g = parse(name, text);
            fg_plan *p = NULL;
            assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
            for (int spec = 1; spec >= (c->N == 1000 ? 0 : 1); spec--) {
                assert_true(nk < MAXK);
                fg_emit_opts eo = {.specialize = spec};
                assert_int_equal(fg_emit_group(g_ctx, p, 0, &eo, &ks[nk]), FG_OK);
                assert_string_equal(ks[nk].template_name, "gemm_softmax");
                /* B [K, N] with N a multiple of the vector (8 16-bit, 4 fp32 elements): 16-byte loads */
                int vec = !c->tb && c->N % (d == FG_DTYPE_F32 ? 4 : 8) == 0;
                assert_non_null(strstr(ks[nk].source, vec ? "(16-byte loads)" : "(element loads)"));
                snprintf(what[nk], sizeof what[nk], "%s %s%s", name, fg_dtype_name((fg_dtype)d),
                         spec ? "" : " unspecialized");
                whatp[nk] = what[nk];
                nk++;
            }
            fg_plan_free(p);
            fg_graph_free(g);
            free(text);
        }
    }
    assert_int_equal(nk, 11);
    int clean = tu_nvrtc_clean(g_ctx, ks, nk);   /* leaves the sm_90 cubins */
    print_message("  nvrtc: %d kernels x 2 archs, %d clean\n", nk, clean);
    assert_int_equal(clean, 2 * nk);
    if (tu_cuda_tools_found("cubin check (no local memory, HMMA)")) {
        cubins_check(ks, whatp, nk, "sm_90");
        assert_int_equal(fg_jit_compile_all(g_ctx, ks, nk, "sm_80", NULL), FG_OK);
        cubins_check(ks, whatp, nk, "sm_80");
    }
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
}

static int group_setup(void **state)
{
    (void)state;
    const char *s = getenv("FUSEGEN_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    printf("test_gemm_softmax: seed %" PRIu64 " (FUSEGEN_SEED overrides)\n", seed);
    cache_dir = tu_tmpdir();
    setenv("FUSEGEN_CACHE_DIR", cache_dir, 1);
    const char *asan = getenv("FUSEGEN_EMU_ASAN");
    sanitizer_pass = asan && *asan && strcmp(asan, "0") != 0;
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    tu_rmtree(cache_dir);
    free(cache_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_numerics_matrix),
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
