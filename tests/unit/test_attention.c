/*
 * test_attention.c -- the attention rule and template (softmax(Q K^T * scale
 * + mask) V in one FlashAttention-2-style kernel), against the host
 * reference of the unfused graph.
 *
 * Numerics: each case is planned (the scores' group: rule attention,
 * template attention; a Transpose giving K^T stays a copy kernel before it),
 * compiled for the emulator and run on seeded random inputs rounded to the
 * dtype, the output poisoned with NaN first.  The matrix: B*H 1 and 3 (as
 * one batch axis or as [B, H]), Sq / Sk 1, 7, 64, 77, 129, 130, head dims 32, 64,
 * 80, 128 (and a DV unlike D), fp32 / fp16 / bf16, scale by Mul, by Div and none,
 * K as trans_b, as a K^T tensor and through a Transpose node, no mask, a
 * padding mask [B, 1, 1, Sk] (one batch entirely masked: NaN rows, as the
 * unfused softmax gives) and a causal mask [Sq, Sk].
 *
 * Rules: the step key chain_input's located errors.
 *
 * Plans: an intermediate read elsewhere (the softmax also a graph output, the
 * scores also read by another node), D 160, and P V over more matrices than
 * the scores are not attention kernels, with the reason in the notes, and
 * the fallback plans match the reference.
 *
 * NVRTC: kernels of every dtype compile for sm_80 and sm_90 with an empty
 * log; their cubins have no stack and no local memory and the fp16 / bf16
 * ones hold HMMA (cuobjdump / nvdisasm; skipped, and said so, without them).
 *
 * Tolerances (relative L2): fp32 1e-5, fp16 5e-3, bf16 2e-2.  Seed:
 * FUSEGEN_SEED, else fixed; printed.
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

static uint64_t seed = 20261203;
static char *cache_dir;
static fg_context *g_ctx;
static int sanitizer_pass;   /* FUSEGEN_EMU_ASAN set: kernels built with ASan, NVRTC left out */

static double tol_of(fg_dtype d) { return d == FG_DTYPE_F16 ? 5e-3 : d == FG_DTYPE_BF16 ? 2e-2 : 1e-5; }

/* ---- cases ------------------------------------------------------------------ */

typedef enum { K_TRANS_B, K_TENSOR, K_NODE } k_form;       /* trans_b, K^T given, a Transpose node */
typedef enum { M_NONE, M_PAD, M_CAUSAL } mask_kind;
static const char *const kform_name[] = {"transb", "kt", "transpose"};
static const char *const mask_name[] = {"nomask", "pad", "causal"};

typedef struct at_case {
    int64_t b, h;          /* batch axes: h 0 gives one axis [b] (b*h heads as one), else [b, h] */
    int64_t sq, sk, d, dv;
    int div;               /* the scale: 0 by Mul, 1 by Div, 2 none (the scores straight into the softmax) */
    k_form kf;
    mask_kind mask;
    unsigned dtypes;       /* bit (1u << fg_dtype) */
} at_case;

#define F32 (1u << FG_DTYPE_F32)
#define F16 (1u << FG_DTYPE_F16)
#define BF16 (1u << FG_DTYPE_BF16)

static const at_case CASES[] = {
    {1, 0, 1, 1, 32, 32, 0, K_TRANS_B, M_NONE, F32 | F16},
    {3, 0, 7, 7, 32, 32, 1, K_TENSOR, M_NONE, F32 | F16 | BF16},
    {3, 0, 64, 64, 64, 64, 0, K_TRANS_B, M_CAUSAL, F32 | F16 | BF16},
    {1, 3, 77, 77, 80, 80, 0, K_NODE, M_PAD, F32 | F16},
    {3, 0, 130, 130, 128, 128, 1, K_TRANS_B, M_CAUSAL, F32 | F16 | BF16},
    {1, 0, 129, 7, 64, 64, 0, K_TENSOR, M_NONE, F16 | BF16},
    {3, 1, 7, 130, 128, 128, 0, K_TRANS_B, M_PAD, F32 | BF16},
    {1, 3, 64, 77, 32, 32, 1, K_TRANS_B, M_PAD, F32 | F16},
    {3, 0, 77, 64, 80, 20, 1, K_NODE, M_NONE, F32 | F16},
    {1, 1, 1, 129, 64, 64, 0, K_TRANS_B, M_PAD, F16},
    {3, 0, 33, 40, 64, 64, 2, K_TRANS_B, M_NONE, F32 | BF16},
    {2, 2, 20, 24, 48, 48, 2, K_NODE, M_PAD, F16},
};

static void case_name(const at_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "at_%" PRId64 "x%" PRId64 "_q%" PRId64 "_k%" PRId64 "_d%" PRId64 "_dv%" PRId64 "_%s_%s_%s",
             c->b, c->h, c->sq, c->sk, c->d, c->dv, c->div == 2 ? "noscale" : c->div ? "div" : "mul", kform_name[c->kf], mask_name[c->mask]);
}

/* The graph of case c in dtype d: the unfused attention subgraph. */
static char *case_graph(const at_case *c, fg_dtype d, const char *name)
{
    fg_buf b = {0};
    char bt[48];
    if (c->h)
        snprintf(bt, sizeof bt, "%" PRId64 ", %" PRId64 ", ", c->b, c->h);
    else
        snprintf(bt, sizeof bt, "%" PRId64 ", ", c->b);
    fg_buf_printf(&b, "graph: %s\nseed: %" PRIu64 "\ndtype: %s\ninputs:\n", name, seed, fg_dtype_name(d));
    fg_buf_printf(&b, "  - { name: q, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->sq, c->d);
    if (c->kf == K_TENSOR)
        fg_buf_printf(&b, "  - { name: k, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->d, c->sk);
    else
        fg_buf_printf(&b, "  - { name: k, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->sk, c->d);
    fg_buf_printf(&b, "  - { name: v, shape: [%s%" PRId64 ", %" PRId64 "] }\n", bt, c->sk, c->dv);
    if (c->div != 2)
        fg_buf_put(&b, "  - { name: s, shape: [1] }\n");
    if (c->mask == M_PAD)
        fg_buf_printf(&b, "  - { name: mask, shape: [%" PRId64 "%s, %" PRId64 "] }\n", c->b, c->h ? ", 1, 1" : ", 1",
                      c->sk);
    else if (c->mask == M_CAUSAL)
        fg_buf_printf(&b, "  - { name: mask, shape: [%" PRId64 ", %" PRId64 "] }\n", c->sq, c->sk);
    fg_buf_put(&b, "nodes:\n");
    const char *kin = "k";
    if (c->kf == K_NODE) {
        fg_buf_printf(&b, "  - { name: kt, op: transpose, inputs: [k], attrs: { perm: [%s] } }\n",
                      c->h ? "0, 1, 3, 2" : "0, 2, 1");
        kin = "kt";
    }
    fg_buf_printf(&b, "  - { name: qk, op: matmul, inputs: [q, %s]%s }\n", kin,
                  c->kf == K_TRANS_B ? ", attrs: { trans_b: true }" : "");
    const char *last = "qk";
    if (c->div != 2) {
        fg_buf_printf(&b, "  - { name: sc, op: %s, inputs: [qk, s] }\n", c->div ? "div" : "mul");
        last = "sc";
    }
    if (c->mask != M_NONE) {
        fg_buf_printf(&b, "  - { name: mk, op: add, inputs: [%s, mask] }\n", last);
        last = "mk";
    }
    fg_buf_printf(&b, "  - { name: sm, op: softmax, inputs: [%s] }\n", last);
    fg_buf_put(&b, "  - { name: y, op: matmul, inputs: [sm, v] }\noutputs: [y]\n");
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

/* The scale (1 / sqrt(D) by Mul, sqrt(D) by Div) and the masks: padding
 * [B, 1, 1, Sk] keeps the first Sk - 3 b keys of batch b (batch 2 and up
 * keep none when Sk is short: every row NaN), causal [Sq, Sk] masks key j
 * above query i with -inf. */
static const at_case *poke_case;

static void poke_att(const fg_graph *g, double **v)
{
    const at_case *c = poke_case;
    int s = fg_graph_find_tensor(g, "s"), m = fg_graph_find_tensor(g, "mask");
    if (c->div != 2)
        v[s][0] = c->div ? sqrt((double)c->d) : 1.0 / sqrt((double)c->d);
    if (c->mask == M_PAD) {
        for (int64_t b = 0; b < c->b; b++) {
            int64_t keep = c->b > 1 && b == c->b - 1 ? 0 : c->sk - 3 * b;
            for (int64_t j = 0; j < c->sk; j++)
                v[m][b * c->sk + j] = j < keep ? 0.0 : -INFINITY;
        }
    } else if (c->mask == M_CAUSAL) {
        for (int64_t i = 0; i < c->sq; i++)
            for (int64_t j = 0; j < c->sk; j++)
                v[m][i * c->sk + j] = j > i ? -INFINITY : 0.0;
    }
}

/* Index of the group holding node `name`. */
static int group_of(const fg_plan *p, const char *name)
{
    for (int i = 0; i < p->ngroups; i++)
        for (int k = 0; k < p->groups[i].nnodes; k++)
            if (strcmp(p->graph->nodes[p->groups[i].nodes[k]].name, name) == 0)
                return i;
    return -1;
}

/* Plans case c to the attention kernel (after the Transpose's copy kernel
 * for K_NODE), runs it, checks tolerance and the NaN rows. */
static void check_case(const at_case *c, fg_dtype d)
{
    char name[128];
    case_name(c, name, sizeof name);
    char *text = case_graph(c, d, name);
    fg_graph *g = parse(name, text);
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(g_ctx, g, &p);
    if (st)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    int gi = group_of(p, "qk");
    assert_true(gi >= 0);
    const fg_group *grp = &p->groups[gi];
    if (p->ngroups != (c->kf == K_NODE ? 2 : 1) || grp->rule < 0 ||
        strcmp(g_ctx->rules[grp->rule]->name, "attention") || strcmp(grp->template_name, "attention") ||
        grp->nnodes != 3 + (c->mask != M_NONE) + (c->div != 2)) {
        for (int k = 0; k < p->nnotes; k++)
            fprintf(stderr, "  note: %s\n", p->notes[k]);
        fail_msg("%s: %d groups, qk's rule %s template %s (want attention)", name, p->ngroups,
                 grp->rule >= 0 ? g_ctx->rules[grp->rule]->name : "-", grp->template_name);
    }
    fg_exec *e = tu_compile_emu(g_ctx, p);
    cmp_result r;
    poke_case = c;
    run_vs_reference(g, e, poke_att, seed ^ fg_hash64(name, strlen(name)), &r);
    print_message("  %-46s %-5s rel_l2 %.2e (tolerance %.0e), NaN %" PRId64 " as the reference, mismatches %" PRId64
                  " NaN, %" PRId64 " inf\n", name, fg_dtype_name(d), r.rel, tol_of(d), r.nan_ref, r.nan_mismatch,
                  r.inf_mismatch);
    assert_int_equal(r.nan_mismatch, 0);
    assert_int_equal(r.inf_mismatch, 0);
    assert_true(r.rel <= tol_of(d));   /* false for NaN too */
    if (c->mask == M_PAD && c->b > 1)  /* the last batch is masked entirely */
        assert_true(r.nan_ref >= c->sq * c->dv);
    else
        assert_int_equal(r.nan_ref, 0);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    free(text);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_numerics_matrix(void **state)
{
    (void)state;
    int runs = 0;
    for (size_t i = 0; i < FG_COUNTOF(CASES); i++)
        for (int d = 0; d < TU_FLOAT_DTYPES; d++)
            if (CASES[i].dtypes & (1u << d)) {
                check_case(&CASES[i], (fg_dtype)d);
                runs++;
            }
    assert_true(runs >= 20);
}

/* Must-not-fuse: each graph's qk is not in an attention group, a note holds
 * `why`, and the plan matches the reference in emulation. */
typedef struct neg_case {
    const char *name, *body, *why;
} neg_case;

#define NEG_HEAD "graph: %s\nseed: 5\ndtype: fp32\n"
#define NEG_IN(d, vb) \
    "inputs: [{ name: q, shape: [2, 9, " d "] }, { name: k, shape: [2, 11, " d "] }, { name: v, shape: [" vb \
    "11, " d "] }]\nweights: [{ name: s, shape: [1] }]\nnodes:\n" \
    "  - { name: qk, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\n" \
    "  - { name: sc, op: mul, inputs: [qk, s] }\n  - { name: sm, op: softmax, inputs: [sc] }\n"

static const neg_case NEGS[] = {
    {"softmax_also_output", NEG_IN("32", "2, ") "  - { name: y, op: matmul, inputs: [sm, v] }\noutputs: [y, sm]\n",
     "sm's output is a graph output"},
    {"scores_read_elsewhere",
     NEG_IN("32", "2, ") "  - { name: y, op: matmul, inputs: [sm, v] }\n"
     "  - { name: z, op: add, inputs: [sc, s] }\noutputs: [y, z]\n",
     "sc's output also feeds"},
    {"head_dim_160", NEG_IN("160", "2, ") "  - { name: y, op: matmul, inputs: [sm, v] }\noutputs: [y]\n",
     "head dim D 160 / DV 160 > 128"},
    {"v_more_batches",
     "inputs: [{ name: q, shape: [1, 9, 32] }, { name: k, shape: [1, 11, 32] }, { name: v, shape: [3, 11, 32] }]\n"
     "weights: [{ name: s, shape: [1] }]\nnodes:\n"
     "  - { name: qk, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\n"
     "  - { name: sc, op: mul, inputs: [qk, s] }\n  - { name: sm, op: softmax, inputs: [sc] }\n"
     "  - { name: y, op: matmul, inputs: [sm, v] }\noutputs: [y]\n",
     "mismatched batch dims"},
    {"softmax_as_b_operand",
     "inputs: [{ name: q, shape: [9, 32] }, { name: k, shape: [9, 32] }, { name: v, shape: [5, 9] }]\n"
     "weights: [{ name: s, shape: [1] }]\nnodes:\n"
     "  - { name: qk, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\n"
     "  - { name: sc, op: mul, inputs: [qk, s] }\n  - { name: sm, op: softmax, inputs: [sc] }\n"
     "  - { name: y, op: matmul, inputs: [v, sm] }\noutputs: [y]\n",
     "y does not read sm's output as its input 0"},
};

static void test_plans(void **state)
{
    (void)state;
    /* the pattern: what --explain says */
    static const at_case pos = {3, 0, 77, 64, 80, 80, 0, K_TRANS_B, M_NONE, F16};
    char *text = case_graph(&pos, FG_DTYPE_F16, "at_plan");
    fg_graph *g = parse("at_plan", text);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(tu_group_desc(g_ctx, p, "qk"), "attention:qk,sc,sm,y");
    print_message("  pattern: 1 kernel; %s\n", p->groups[0].choice);
    assert_non_null(strstr(p->groups[0].choice, "attention chosen"));
    assert_non_null(strstr(p->groups[0].choice, "64 query rows x key tiles of 64 per block, 4 warps"));
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
        print_message("  %-22s %d kernels (%s, ", NEGS[i].name, p->ngroups, tu_group_desc(g_ctx, p, "qk"));
        print_message("%s)\n", tu_group_desc(g_ctx, p, "y"));
        if (!found) {
            for (int k = 0; k < p->nnotes; k++)
                fprintf(stderr, "  note: %s\n", p->notes[k]);
            fail_msg("%s: no note says '%s'", NEGS[i].name, NEGS[i].why);
        }
        for (int k = 0; k < p->ngroups; k++)
            assert_string_not_equal(p->groups[k].template_name, "attention");
        fg_plan_free(p);
        fg_graph_free(g);
        fg_buf_free(&b);
    }
}

/* The step key chain_input: located errors on the first step and for a slot
 * out of range. */
static void test_chain_input_errors(void **state)
{
    (void)state;
    char *dir = tu_vocab_dir();
    free(tu_write(dir, "bad.yaml",
                  "rule: first_has_one\nmatch:\n  - mm: { kind: matmul, chain_input: 1 }\n"
                  "kernel: { template: gemm }\n"
                  "---\n"
                  "rule: slot_out_of_range\nmatch:\n  - mm: { kind: matmul }\n"
                  "  - sm: { op: softmax, chain_input: 9 }\nkernel: { template: gemm_softmax }\n"));
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "bad.yaml:3:38: error: the first step of a rule ('mm') has no chain input"));
    assert_true(tu_has_error(ctx, "bad.yaml:9:37: error: chain_input of step 'sm' must be an input slot in 0..7, got 9"));
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* The fallback plans of the must-not-fuse cases with one output, run. */
static void test_fallback_runs(void **state)
{
    (void)state;
    static const size_t which[] = {2, 3, 4};
    for (size_t w = 0; w < FG_COUNTOF(which); w++) {
        const neg_case *n = &NEGS[which[w]];
        fg_buf b = {0};
        fg_buf_printf(&b, NEG_HEAD "%s", n->name, n->body);
        fg_graph *g = parse(n->name, b.s);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
        fg_exec *e = tu_compile_emu(g_ctx, p);
        cmp_result r;
        run_vs_reference(g, e, NULL, 31 + w, &r);
        print_message("  %-22s unfused: rel_l2 %.2e\n", n->name, r.rel);
        assert_int_equal(r.nan_ref + r.nan_mismatch + r.inf_mismatch, 0);
        assert_true(r.rel <= 1e-5);
        fg_exec_free(e);
        fg_plan_free(p);
        fg_graph_free(g);
        fg_buf_free(&b);
    }
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

/* NVRTC: every dtype of a few cases (the async and the element loads, D 80
 * and 128, DV 20; one unspecialized): sm_80 and sm_90 with an empty log,
 * then each arch's cubins read. */
static void test_nvrtc(void **state)
{
    (void)state;
    if (sanitizer_pass) {
        printf("NVRTC check NOT RUN in the sanitizer pass (FUSEGEN_EMU_ASAN is set)\n");
        return;
    }
    enum { MAXK = 16 };
    fg_kernel ks[MAXK];
    char what[MAXK][160];
    const char *whatp[MAXK];
    int nk = 0;
    static const size_t which[] = {3, 4, 8};
    for (size_t w = 0; w < FG_COUNTOF(which); w++) {
        const at_case *c = &CASES[which[w]];
        for (int d = 0; d < TU_FLOAT_DTYPES; d++) {
            char name[128];
            case_name(c, name, sizeof name);
            char *text = case_graph(c, (fg_dtype)d, name);
            fg_graph *g = parse(name, text);
            fg_plan *p = NULL;
            assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
            int gi = group_of(p, "qk");
            for (int spec = 1; spec >= (w == 1 ? 0 : 1); spec--) {
                assert_true(nk < MAXK);
                fg_emit_opts eo = {.specialize = spec};
                assert_int_equal(fg_emit_group(g_ctx, p, gi, &eo, &ks[nk]), FG_OK);
                assert_string_equal(ks[nk].template_name, "attention");
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
    assert_int_equal(nk, 12);
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
    printf("test_attention: seed %" PRIu64 " (FUSEGEN_SEED overrides)\n", seed);
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
        cmocka_unit_test(test_chain_input_errors),
        cmocka_unit_test(test_numerics_matrix),
        cmocka_unit_test(test_fallback_runs),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
