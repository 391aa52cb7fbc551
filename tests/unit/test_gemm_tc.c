/*
 * test_gemm_tc.c -- the gemm family in emulation: the tensor-core template
 * gemm_tc (fp16, bf16) and the fp32 paths, against the host reference of
 * the unfused graph.
 *
 * The matrix: M 1, 7, 13, 16, 17, 100 (partial tiles), N and K multiples of
 * 8 (16-byte cp.async chunks) and not (element loads), both transposes of
 * each operand, batched with broadcast batch axes and rank-1 operands, and
 * the epilogues of the shipped rules: bias (N) (the gemm op's own), (1, N),
 * (M, 1), (M, N) / residual, relu, GELU in the erf and tanh forms.  Then every
 * block tile and pipeline depth chosen by a tile hook; the pipeline's
 * synchronization (a weakened or missing cp.async wait, or a missing
 * barrier, must fail: the emulator lands a copy only at its wait); and the
 * refusals --explain reports.  Exact fp32 with M <= 16 runs on gemv: its
 * matrix (M 1, 2, 7, 16; N 1, 7, 1000; K 1, 13, 2048; both transposes;
 * batched; every epilogue), its split-K choices, and mutations that drop a
 * warp's, a lane's or a split's partial sum (each must fail).
 *
 * The runner plans each case to one kernel, emits it (optionally mutated),
 * builds it for the emulator and launches it on buffers of its own (inputs
 * and weights rounded to the dtype for the reference too, so the comparison
 * measures the kernel; the output poisoned with NaN).  Seed: FUSEGEN_SEED,
 * else fixed; printed.  Tolerances (relative L2): fp16 5e-3, bf16 2e-2 (fp32
 * accumulation: about the output's own rounding, 2^-11 and 2^-8), fp32 1e-5.
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
#include "emu.h"
#include "plan.h"
#include "reference.h"
#include "tensor_convert.h"
#include "testutil.h"

static uint64_t seed = 20261201;
static char *cache_dir;

/* The dtypes of the matrix; TF32 is fp32 planned with precision tf32. */
typedef enum { D_F16, D_BF16, D_F32, D_TF32 } dkind;
static const char *const dk_name[] = {"fp16", "bf16", "fp32", "tf32"};
static fg_dtype dk_dtype(dkind d) { return d == D_F16 ? FG_DTYPE_F16 : d == D_BF16 ? FG_DTYPE_BF16 : FG_DTYPE_F32; }
static double tol_of(dkind d) { return d == D_F16 ? 5e-3 : d == D_BF16 ? 2e-2 : d == D_TF32 ? 5e-3 : 1e-5; }

/* ---- cases ------------------------------------------------------------------ */

typedef enum {
    E_NONE,          /* a lone matmul */
    E_BIAS_N,        /* gemm op with its bias [N] */
    E_BIAS_1N,       /* + add [1, N] */
    E_BIAS_M1_RELU,  /* + add [M, 1], relu */
    E_RES_GELU,      /* + add [M, N] (a residual input), gelu (erf) */
    E_BIAS_N_TANH,   /* gemm bias [N], gelu_tanh */
    E_COUNT
} epi_kind;
static const char *const epi_name[] = {"none", "bias_n", "bias_1n", "bias_m1_relu", "residual_gelu",
                                       "bias_n_gelu_tanh"};
static const char *const epi_rule[] = {"-", "-", "matmul_bias_act", "matmul_bias_act", "matmul_bias_act", "gemm_act"};

typedef struct mm_case {
    int64_t M, N, K;
    int ta, tb;
    epi_kind epi;
    const char *abatch, *bbatch;   /* batch axes ("2, 3, ") or "" */
    int avec, bvec;                /* rank-1 operand (no batch, no transpose) */
} mm_case;

static void case_name(const mm_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "mm_%s%s%" PRId64 "x%" PRId64 "x%" PRId64 "%s%s%s%s_%s", c->abatch[0] ? "batched_" : "",
             c->bbatch[0] ? "bbatched_" : "", c->M, c->N, c->K, c->ta ? "_ta" : "", c->tb ? "_tb" : "",
             c->avec ? "_avec" : "", c->bvec ? "_bvec" : "", epi_name[c->epi]);
}

/* The YAML body of case c (after the header). */
static char *case_body(const mm_case *c)
{
    fg_buf b = {0};
    int64_t M = c->M, N = c->N, K = c->K;
    if (c->avec)
        fg_buf_printf(&b, "inputs:\n  - { name: a, shape: [%" PRId64 "] }\n", K);
    else
        fg_buf_printf(&b, "inputs:\n  - { name: a, shape: [%s%" PRId64 ", %" PRId64 "] }\n", c->abatch,
                      c->ta ? K : M, c->ta ? M : K);
    if (c->bvec)
        fg_buf_printf(&b, "  - { name: b, shape: [%" PRId64 "] }\n", K);
    else
        fg_buf_printf(&b, "  - { name: b, shape: [%s%" PRId64 ", %" PRId64 "] }\n", c->bbatch, c->tb ? N : K,
                      c->tb ? K : N);
    if (c->epi == E_RES_GELU)
        fg_buf_printf(&b, "  - { name: r, shape: [%" PRId64 ", %" PRId64 "] }\n", M, N);
    switch (c->epi) {
    case E_BIAS_N:
    case E_BIAS_N_TANH: fg_buf_printf(&b, "weights:\n  - { name: bias, shape: [%" PRId64 "] }\n", N); break;
    case E_BIAS_1N: fg_buf_printf(&b, "weights:\n  - { name: bias, shape: [1, %" PRId64 "] }\n", N); break;
    case E_BIAS_M1_RELU: fg_buf_printf(&b, "weights:\n  - { name: bias, shape: [%" PRId64 ", 1] }\n", M); break;
    default: break;
    }
    const char *attrs = c->ta && c->tb ? ", attrs: { trans_a: true, trans_b: true }"
                      : c->ta          ? ", attrs: { trans_a: true }"
                      : c->tb          ? ", attrs: { trans_b: true }"
                                       : "";
    fg_buf_put(&b, "nodes:\n");
    int gemm = c->epi == E_BIAS_N || c->epi == E_BIAS_N_TANH;
    fg_buf_printf(&b, "  - { name: mm, op: %s, inputs: [a, b%s]%s }\n", gemm ? "gemm" : "matmul",
                  gemm ? ", bias" : "", attrs);
    const char *last = "mm";
    switch (c->epi) {
    case E_BIAS_1N: fg_buf_put(&b, "  - { name: y, op: add, inputs: [mm, bias] }\n"); last = "y"; break;
    case E_BIAS_M1_RELU:
        fg_buf_put(&b, "  - { name: s, op: add, inputs: [mm, bias] }\n  - { name: y, op: relu, inputs: [s] }\n");
        last = "y";
        break;
    case E_RES_GELU:
        fg_buf_put(&b, "  - { name: s, op: add, inputs: [mm, r] }\n  - { name: y, op: gelu, inputs: [s] }\n");
        last = "y";
        break;
    case E_BIAS_N_TANH: fg_buf_put(&b, "  - { name: y, op: gelu_tanh, inputs: [mm] }\n"); last = "y"; break;
    default: break;
    }
    fg_buf_printf(&b, "outputs: [%s]\n", last);
    return fg_buf_take(&b);
}

/* ---- the runner ------------------------------------------------------------- */

typedef struct mutation {
    const char *from, *to;
} mutation;

typedef struct run_result {
    double rel;           /* relative L2 error, NaN counted as +inf */
    int64_t nan_left;     /* output elements still NaN */
    char tmpl[32];        /* the group's template */
    char tile[128];       /* the "tile:" header line of the kernel */
} run_result;

static fg_graph *parse_case(fg_context *ctx, const char *name, const char *body, dkind d)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "graph: %s\nseed: %" PRIu64 "\ndtype: %s\n%s%s", name, seed, fg_dtype_name(dk_dtype(d)),
                  d == D_TF32 ? "precision: tf32\n" : "", body);
    char *text = fg_buf_take(&b);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, name, text, strlen(text), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    free(text);
    return g;
}

/* Plans the graph to one kernel (from rule `rule`, "-" for a lone op), runs
 * it in emulation and compares with the reference. */
static void run_graph(fg_context *ctx, const char *name, const char *body, const char *rule, dkind d,
                      const mutation *mut, run_result *res)
{
    memset(res, 0, sizeof *res);
    fg_dtype dt = dk_dtype(d);
    fg_graph *src = parse_case(ctx, name, body, d);
    for (int t = 0; t < src->ntensors; t++)
        if (src->tensors[t].is_weight && src->tensors[t].data) {
            float *v = fg_tensor_own(&src->tensors[t]);
            for (int64_t i = 0; i < fg_tensor_numel(&src->tensors[t]); i++)
                v[i] = (float)fg_round_to_dtype(v[i], dt);
        }
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, src, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(p->ngroups, 1);
    const fg_group *grp = &p->groups[0];
    snprintf(res->tmpl, sizeof res->tmpl, "%s", grp->template_name);
    const char *r = grp->rule >= 0 ? ctx->rules[grp->rule]->name : "-";
    if (strcmp(r, rule) != 0)
        fail_msg("%s: rule %s, expected %s", name, r, rule);
    const fg_graph *pg = p->graph;

    double **ref = fg_xcalloc((size_t)src->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(src, seed ^ fg_hash64(name, strlen(name)), ref);
    for (int t = 0; t < src->ntensors; t++)
        if (src->tensors[t].is_input)
            for (int64_t i = 0; i < fg_tensor_numel(&src->tensors[t]); i++)
                ref[t][i] = fg_round_to_dtype(ref[t][i], dt);

    fg_kernel k;
    fg_emit_opts eo = {.specialize = 1};
    st = fg_emit_group(ctx, p, 0, &eo, &k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const char *tl = strstr(k.source, "//   tile:");
    if (tl) {
        tl += strlen("//   tile:");
        tl += strspn(tl, " ");
        snprintf(res->tile, sizeof res->tile, "%.*s", (int)strcspn(tl, "\n"), tl);
    }
    if (mut) {
        char *at = strstr(k.source, mut->from);
        if (!at)
            fail_msg("mutation: \"%s\" not in the kernel", mut->from);
        fg_buf b = {0};
        fg_buf_putn(&b, k.source, (size_t)(at - k.source));
        fg_buf_put(&b, mut->to);
        fg_buf_put(&b, at + strlen(mut->from));
        free(k.source);
        k.source = fg_buf_take(&b);
    }
    st = fg_emu_build(ctx, &k);
    if (st) {
        tu_dump_errors(ctx);
        fprintf(stderr, "%s\n", k.source);
    }
    assert_int_equal(st, FG_OK);

    tu_kargs ka;
    tu_kargs_init(&ka, &k, pg, src, ref);
    st = fg_emu_launch(ctx, &k, ka.args);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    if (ka.has_workspace) {
        /* a second launch on the same workspace (its counters must be back
         * at zero), into a poisoned output: the one compared */
        tu_kargs_poison(&ka, &k, pg);
        st = fg_emu_launch(ctx, &k, ka.args);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
    }

    assert_int_equal(fg_reference_run(ctx, src, ref), FG_OK);
    const fg_tensor *ot = &pg->tensors[k.params[ka.out_slot].tensor];
    int so = fg_graph_find_tensor(src, ot->name);
    int64_t n = fg_tensor_numel(ot);
    double *got = fg_xmalloc((size_t)n * sizeof *got), max_abs;
    fg_tensor_unpack(ot, ot->layout, ka.bufs[ka.out_slot], got);
    for (int64_t i = 0; i < n; i++)
        res->nan_left += isnan(got[i]);
    res->rel = fg_rel_l2(got, ref[so], n, &max_abs);
    if (isnan(res->rel))
        res->rel = INFINITY;
    free(got);
    tu_kargs_free(&ka);
    fg_kernel_free(&k);
    fg_reference_free(src, ref);
    free(ref);
    fg_plan_free(p);
    fg_graph_free(src);
}

/* Runs case c in dtype d, checks the template and the tolerance. */
static void check_case(fg_context *ctx, const mm_case *c, dkind d, const char *want_template, const char *want_tile)
{
    char name[128];
    case_name(c, name, sizeof name);
    char *body = case_body(c);
    run_result r;
    run_graph(ctx, name, body, epi_rule[c->epi], d, NULL, &r);
    print_message("  %-44s %-9s %-8s rel_l2 %.2e (tolerance %.0e)  %s\n", name, dk_name[d], r.tmpl, r.rel, tol_of(d),
                  r.tile);
    if (want_template && strncmp(r.tmpl, want_template, strlen(want_template)) != 0)
        fail_msg("%s: template %s, expected %s", name, r.tmpl, want_template);
    if (want_tile && !strstr(r.tile, want_tile))
        fail_msg("%s: tile \"%s\", expected \"%s\"", name, r.tile, want_tile);
    assert_int_equal(r.nan_left, 0);
    assert_true(r.rel <= tol_of(d));
    free(body);
}

/* ---- tests ------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    const char *s = getenv("FUSEGEN_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    printf("test_gemm_tc: seed %" PRIu64 " (FUSEGEN_SEED overrides)\n", seed);
    cache_dir = tu_tmpdir();
    setenv("FUSEGEN_CACHE_DIR", cache_dir, 1);
    unsetenv("FUSEGEN_EMU_ASAN");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(cache_dir);
    free(cache_dir);
    return 0;
}

/* The shapes: every M of the matrix, N and K multiples of 8 (cp.async
 * chunks) or not (element loads), each transpose combination and every
 * epilogue at least once. */
static const mm_case matrix[] = {
    {1, 40, 24, 0, 0, E_BIAS_N, "", "", 0, 0},
    {7, 24, 40, 0, 1, E_BIAS_1N, "", "", 0, 0},
    {13, 9, 13, 0, 0, E_BIAS_M1_RELU, "", "", 0, 0},
    {16, 72, 48, 1, 0, E_RES_GELU, "", "", 0, 0},
    {17, 136, 72, 1, 1, E_BIAS_N_TANH, "", "", 0, 0},
    {100, 33, 100, 1, 1, E_NONE, "", "", 0, 0},
    {100, 200, 264, 0, 0, E_RES_GELU, "", "", 0, 0},
    {13, 17, 40, 0, 1, E_BIAS_M1_RELU, "", "", 0, 0},
    {17, 40, 9, 1, 0, E_BIAS_1N, "", "", 0, 0},
    {7, 13, 7, 0, 0, E_BIAS_N_TANH, "", "", 0, 0},
    /* batched: both sides, broadcast axes, rank-1 operands */
    {13, 24, 40, 0, 0, E_BIAS_1N, "2, 3, ", "3, ", 0, 0},
    {16, 9, 24, 1, 1, E_NONE, "2, 1, ", "3, ", 0, 0},
    {7, 16, 13, 0, 0, E_NONE, "", "2, ", 0, 0},
    {1, 24, 40, 0, 0, E_NONE, "", "3, ", 1, 0},
    {17, 1, 40, 0, 0, E_NONE, "2, ", "", 0, 1},
};

static void run_matrix(dkind d, const char *tmpl)
{
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof matrix / sizeof *matrix; i++)   /* exact fp32 with M <= 16: gemv */
        check_case(ctx, &matrix[i], d, d == D_F32 && matrix[i].M <= 16 ? "gemv" : tmpl, NULL);
    fg_context_free(ctx);
}

static void test_matrix_f16(void **state) { (void)state; run_matrix(D_F16, "gemm_tc"); }
static void test_matrix_bf16(void **state) { (void)state; run_matrix(D_BF16, "gemm_tc"); }
static void test_matrix_f32(void **state) { (void)state; run_matrix(D_F32, "gemm"); }
static void test_matrix_tf32(void **state) { (void)state; run_matrix(D_TF32, "gemm_tc"); }

/* Split-K: matrix-vector shapes (M <= 16) and grids too small for the SMs
 * take gemm_tc_splitk, whose blocks each reduce part of K; the sum over the
 * splits is in a fixed order, the epilogue applied once (a bias added per
 * split would show in the numerics).  fp16, bf16 and tf32. */
static void test_splitk(void **state)
{
    (void)state;
    static const mm_case shapes[] = {
        {1, 1000, 768, 0, 0, E_BIAS_N_TANH, "", "", 0, 0},
        {7, 100, 1000, 1, 0, E_BIAS_1N, "", "", 0, 0},
        {16, 72, 520, 0, 1, E_RES_GELU, "", "", 0, 0},
        {17, 40, 333, 1, 1, E_BIAS_M1_RELU, "", "", 0, 0},
        {100, 24, 1024, 0, 0, E_BIAS_N, "", "", 0, 0},
        {1, 33, 777, 0, 0, E_NONE, "2, ", "", 1, 0},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (dkind d = D_F16; d <= D_TF32; d++)
            if (d != D_F32)
                check_case(ctx, &shapes[i], d, "gemm_tc_splitk", "split-K");
    fg_context_free(ctx);
}

/* Every split count a tile hook may ask for, on one shape, and a select
 * hook that overrides the default split-K choice with plain gemm_tc. */
static void test_splitk_hooks(void **state)
{
    (void)state;
    const mm_case c = {13, 72, 700, 0, 0, E_BIAS_M1_RELU, "", "", 0, 0};
    static const int splits[] = {1, 2, 3, 5, 8, 11};   /* 22 k tiles: none of these leaves a split empty */
    for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
        char *dir = tu_vocab_dir();
        char lua[200];
        free(tu_write(dir, "rules.yaml",
                      "rule: matmul_bias_act\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n"
                      "  - add: { op: add }\n  - act: { op: relu }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  select: pick\n  epilogue:\n    - apply: add\n"
                      "    - apply: act\n"));
        snprintf(lua, sizeof lua,
                 "function tiles(group)\n  return { tile_m = 16, tile_n = 64, split_k = %d }\nend\n"
                 "function pick(group, names)\n  return '%s'\nend\n",
                 splits[i], i == 0 ? "gemm_tc" : "gemm_tc_splitk");
        free(tu_write(dir, "tiles.lua", lua));
        fg_context *ctx = tu_ctx_empty();
        fg_status st = fg_rules_load(ctx, dir);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        char want[32];
        snprintf(want, sizeof want, "split-K %d ", splits[i]);
        check_case(ctx, &c, D_F16, i == 0 ? "gemm_tc" : "gemm_tc_splitk", want);
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
}

/* The split-K kernel's structure: one workspace parameter, the splits on
 * gridDim.z, a fixed-order sum, the tile counter reset by the last block.
 * The runner launches split-K kernels twice on one workspace and compares
 * the second run: without the reset (a mutation) it fails. */
static void test_splitk_source(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    mm_case c = {1, 64, 1024, 0, 0, E_NONE, "", "", 0, 0};
    char *body = case_body(&c);
    fg_graph *g = parse_case(ctx, "splitk", body, D_F16);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_string_equal(p->groups[0].template_name, "gemm_tc_splitk");
    fg_kernel k;
    fg_emit_opts eo = {.specialize = 1};
    assert_int_equal(fg_emit_group(ctx, p, 0, &eo, &k), FG_OK);
    assert_non_null(strstr(k.source, "fg_atomic_add_i32(count, 1)"));
    assert_non_null(strstr(k.source, "*count = 0;"));
    assert_non_null(strstr(k.source, "for (int z = 1; z < SPLITS; z++)"));
    int ws = 0;
    for (int j = 0; j < k.nparams; j++)
        ws += k.params[j].kind == FG_KPARAM_WORKSPACE && k.params[j].value > 0;
    assert_int_equal(ws, 1);
    assert_true(k.grid[2] > 1);
    fg_kernel_free(&k);
    run_result r;
    run_graph(ctx, "splitk", body, "-", D_F16, NULL, &r);
    assert_true(r.rel <= tol_of(D_F16));
    static const mutation no_reset = {"*count = 0;", ";"};
    run_graph(ctx, "splitk", body, "-", D_F16, &no_reset, &r);
    print_message("  mutation: no counter reset: rel_l2 %.2e, %" PRId64 " NaN outputs\n", r.rel, r.nan_left);
    assert_true(r.rel > 100 * tol_of(D_F16));
    fg_plan_free(p);
    fg_graph_free(g);
    free(body);
    fg_context_free(ctx);
}

/* Every block tile and depth, chosen by a tile hook, on shapes with partial
 * tiles along M, N and K, both operand layouts of each side. */
static void test_every_tile(void **state)
{
    (void)state;
    static const int tiles[][3] = {{128, 128, 3}, {128, 64, 3}, {128, 64, 4}, {64, 128, 4}, {64, 64, 3},
                                   {64, 64, 4},   {32, 64, 4},  {32, 32, 3},  {32, 32, 4}};
    static const mm_case shapes[] = {
        {100, 136, 72, 0, 0, E_BIAS_M1_RELU, "", "", 0, 0},
        {137, 200, 104, 1, 1, E_BIAS_M1_RELU, "", "", 0, 0},
    };
    for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) {
        char *dir = tu_vocab_dir();
        char lua[200];
        free(tu_write(dir, "rules.yaml",
                      "rule: matmul_bias_act\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n"
                      "  - add: { op: add }\n  - act: { op: relu }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  epilogue:\n    - apply: add\n"
                      "    - apply: act\n"));
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { tile_m = %d, tile_n = %d, stages = %d }\nend\n",
                 tiles[i][0], tiles[i][1], tiles[i][2]);
        free(tu_write(dir, "tiles.lua", lua));
        fg_context *ctx = tu_ctx_empty();
        fg_status st = fg_rules_load(ctx, dir);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        char want[64];
        snprintf(want, sizeof want, "%d x %d x 32, %d stages", tiles[i][0], tiles[i][1], tiles[i][2]);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (dkind d = D_F16; d <= D_BF16; d++)
                check_case(ctx, &shapes[s], d, "gemm_tc", want);
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
}

/* A weakened or missing wait, or a missing barrier, reads tiles that have
 * not landed: wrong numbers (NaN from the poisoned shared memory, or a
 * stale stage).  The unmutated kernel passes. */
static void test_missing_wait_fails(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    mm_case c = {100, 136, 200, 0, 0, E_BIAS_1N, "", "", 0, 0};
    char *body = case_body(&c);
    static const char wait[] = "fg_cp_async_wait_group<STAGES - 2>();";
    static const mutation muts[] = {
        {wait, "fg_cp_async_wait_group<STAGES - 1>();"},
        {wait, ";"},
        {"        fg_sync();                              // everyone's", "        // everyone's"},
    };
    static const char *const what[] = {"wait_group<STAGES - 1>", "no wait", "no barrier"};
    run_result r;
    run_graph(ctx, "pipeline", body, "matmul_bias_act", D_F16, NULL, &r);
    assert_true(r.rel <= tol_of(D_F16));
    for (size_t i = 0; i < sizeof muts / sizeof *muts; i++) {
        run_graph(ctx, "pipeline", body, "matmul_bias_act", D_F16, &muts[i], &r);
        print_message("  mutation %-24s rel_l2 %.2e, %" PRId64 " NaN outputs\n", what[i], r.rel, r.nan_left);
        assert_true(r.rel > 100 * tol_of(D_F16));
    }
    free(body);
    fg_context_free(ctx);
}

/* Bad tile hooks are located errors. */
static void test_bad_tiles(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"tile_m = 96, tile_n = 64, stages = 3", "tile_m = 96, tile_n = 64"},
        {"tile_m = 128, tile_n = 128, stages = 4", "stages = 4"},
        {"tile_m = 64, tile_n = 64, stages = 2", "stages = 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *dir = tu_vocab_dir();
        char lua[200];
        free(tu_write(dir, "rules.yaml",
                      "rule: mm\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n  - act: { op: relu }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  epilogue:\n    - apply: act\n"));
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { %s }\nend\n", bad[i][0]);
        free(tu_write(dir, "tiles.lua", lua));
        fg_context *ctx = tu_ctx_empty();
        assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
        fg_graph *g = parse_case(ctx, "bad",
                                 "inputs: [{ name: a, shape: [16, 32] }, { name: b, shape: [32, 16] }]\n"
                                 "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n"
                                 "  - { name: y, op: relu, inputs: [mm] }\noutputs: [y]\n",
                                 D_F16);
        fg_plan *p = NULL;
        /* every one fails the plan, never a later emission: a value outside
         * a key's declared range (stages 2) in the registry's check, a tile
         * pair or stage count the shape's shared memory refuses in the
         * emitter, which fg_plan_build runs on each group a hook tiled */
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_HOOK);
        assert_null(p);
        if (i < 2 && !tu_has_error(ctx, "cannot run group 0")) {
            tu_dump_errors(ctx);
            fail_msg("expected the plan-time refusal of the hook's values");
        }
        if (!tu_has_error(ctx, bad[i][1])) {
            tu_dump_errors(ctx);
            fail_msg("expected an error mentioning \"%s\"", bad[i][1]);
        }
        fg_plan_free(p);
        fg_graph_free(g);
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
}

/* The source carries the structure: ldmatrix (.trans for [K, M] A and
 * [K, N] B), cp.async when the rows are 16-byte chunks, element loads when
 * not. */
static void test_structure(void **state)
{
    (void)state;
    static const struct {
        mm_case c;
        const char *has[3], *hasnot[2];
    } want[] = {
        {{64, 64, 64, 0, 0, E_NONE, "", "", 0, 0},
         {"fg_ldmatrix_x4(af[mi]", "fg_ldmatrix_x4_trans(t,", "fg_cp_async16_zfill"},
         {"fg_ldmatrix_x4_trans(af", "e[i] = src[i]"}},
        {{64, 64, 64, 1, 1, E_NONE, "", "", 0, 0},
         {"fg_ldmatrix_x4_trans(af[mi]", "fg_ldmatrix_x4(t,", "fg_cp_async16_zfill"},
         {"fg_ldmatrix_x4(af", "e[i] = src[i]"}},
        {{64, 63, 64, 0, 0, E_NONE, "", "", 0, 0}, {"e[i] = src[i]", "fg_ldmatrix_x4_trans(t,", NULL},
         {"fg_cp_async16_zfill", NULL}},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *body = case_body(&want[i].c);
        fg_graph *g = parse_case(ctx, "structure", body, D_F16);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
        fg_kernel k;
        fg_emit_opts eo = {.specialize = 1};
        assert_int_equal(fg_emit_group(ctx, p, 0, &eo, &k), FG_OK);
        for (int j = 0; j < 3; j++)
            if (want[i].has[j] && !strstr(k.source, want[i].has[j]))
                fail_msg("case %zu: \"%s\" missing", i, want[i].has[j]);
        for (int j = 0; j < 2; j++)
            if (want[i].hasnot[j] && strstr(k.source, want[i].hasnot[j]))
                fail_msg("case %zu: \"%s\" present", i, want[i].hasnot[j]);
        fg_kernel_free(&k);
        fg_plan_free(p);
        fg_graph_free(g);
        free(body);
    }
    fg_context_free(ctx);
}

/* ---- gemv (exact fp32, M <= 16) ------------------------------------------------ */

/* The gemv matrix: M 1, 2, 7, 16; N 1, 7, 1000; K 1, 13, 2048 (every pair
 * of N and K once per M, the epilogues in turn), both transposes of B (and
 * of A); the classifier shapes (1 x 2048 x 1000, 1 x 1280 x 1000) whose
 * slices split K across blocks; batched, broadcast and rank-1 operands. */
static void test_gemv(void **state)
{
    (void)state;
    static const int64_t Ms[] = {1, 2, 7, 16}, Ns[] = {1, 7, 1000}, Ks[] = {1, 13, 2048};
    fg_context *ctx = tu_ctx_shipped();
    int e = 0;
    for (int mi = 0; mi < 4; mi++)
        for (int ni = 0; ni < 3; ni++)
            for (int ki = 0; ki < 3; ki++) {
                /* the big ones (N 1000 with K 2048) once per transpose of B, for M 1 and 16 */
                if (Ns[ni] == 1000 && Ks[ki] == 2048 && Ms[mi] != 1 && Ms[mi] != 16)
                    continue;
                for (int tb = 0; tb < 2; tb++) {
                    mm_case c = {Ms[mi], Ns[ni], Ks[ki], (mi + ki) % 2, tb, (epi_kind)(e++ % E_COUNT), "", "", 0, 0};
                    check_case(ctx, &c, D_F32, "gemv", NULL);
                }
            }
    static const mm_case more[] = {
        {1, 1000, 1280, 0, 0, E_BIAS_N, "", "", 0, 0},
        {1, 1000, 1280, 0, 1, E_BIAS_N, "", "", 0, 0},
        {7, 24, 40, 0, 0, E_BIAS_1N, "2, 3, ", "3, ", 0, 0},
        {16, 9, 24, 1, 1, E_NONE, "2, 1, ", "3, ", 0, 0},
        {2, 1000, 2048, 0, 1, E_NONE, "", "2, ", 0, 0},
        {1, 24, 40, 0, 0, E_NONE, "", "3, ", 1, 0},
        {13, 1, 40, 0, 0, E_NONE, "2, ", "", 0, 1},
        {1, 7, 2048, 0, 0, E_NONE, "3, ", "", 1, 0},
    };
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        check_case(ctx, &more[i], D_F32, "gemv", NULL);
    /* past 16 rows, or with precision tf32, gemv steps aside */
    mm_case c17 = {17, 40, 64, 0, 0, E_NONE, "", "", 0, 0};
    check_case(ctx, &c17, D_F32, "gemm", NULL);
    mm_case c1 = {1, 40, 64, 0, 0, E_NONE, "", "", 0, 0};
    check_case(ctx, &c1, D_TF32, "gemm_tc", NULL);
    fg_context_free(ctx);
}

/* gemv's reductions hold every partial sum: dropping one warp's share, one
 * lane's shuffle step or one split's slot must fail the numerics, and so must
 * a counter the last block does not reset (the runner's second launch). */
static void test_gemv_mutations(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const struct {
        mm_case c;
        mutation mut;
        const char *what;
    } cases[] = {
        {{1, 1000, 2048, 0, 0, E_BIAS_N, "", "", 0, 0},
         {"s += red[w][t];", "s += w == 1 ? 0.0f : red[w][t];"}, "warp 1's partial sum dropped ([K, N])"},
        {{7, 13, 2048, 0, 1, E_NONE, "", "", 0, 0},
         {"s += red[w][t];", "s += w == WARPS - 1 ? 0.0f : red[w][t];"}, "last warp's partial sum dropped ([N, K])"},
        {{7, 13, 2048, 0, 1, E_NONE, "", "", 0, 0},
         {"for (int off = 16; off > 0;", "for (int off = 8; off > 0;"}, "shuffle tree one step short"},
        {{1, 1000, 2048, 0, 0, E_NONE, "", "", 0, 0},
         {"for (int z = 1; z < SPLITS; z++)", "for (int z = 2; z < SPLITS; z++)"}, "split 1's slot dropped"},
        {{1, 1000, 2048, 0, 0, E_NONE, "", "", 0, 0}, {"*count = 0;", ";"}, "no counter reset"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[128];
        case_name(&cases[i].c, name, sizeof name);
        char *body = case_body(&cases[i].c);
        run_result r;
        run_graph(ctx, name, body, epi_rule[cases[i].c.epi], D_F32, NULL, &r);
        assert_string_equal(r.tmpl, "gemv");
        assert_true(r.rel <= tol_of(D_F32));
        run_graph(ctx, name, body, epi_rule[cases[i].c.epi], D_F32, &cases[i].mut, &r);
        print_message("  mutation %-42s rel_l2 %.2e, %" PRId64 " NaN outputs\n", cases[i].what, r.rel, r.nan_left);
        assert_true(r.rel > 100 * tol_of(D_F32));
        free(body);
    }
    fg_context_free(ctx);
}

/* The gemv source: 16-byte loads of B when its contiguous axis is a
 * multiple of 4 (and of A too for [N, K] B with [M, K] A), element loads
 * when not; the split-K workspace only when the slices leave SMs idle;
 * every split count a tile hook asks for, and out-of-range ones refused. */
static void test_gemv_source(void **state)
{
    (void)state;
    static const struct {
        mm_case c;
        int load4, split;
    } want[] = {
        {{1, 1000, 2048, 0, 0, E_NONE, "", "", 0, 0}, 1, 1},
        {{1, 1000, 2048, 0, 1, E_NONE, "", "", 0, 0}, 2, 0},
        {{1, 1000, 2048, 1, 1, E_NONE, "", "", 0, 0}, 1, 0},
        {{16, 7, 13, 0, 0, E_NONE, "", "", 0, 0}, 0, 0},
        {{16, 7, 13, 0, 1, E_NONE, "", "", 0, 0}, 0, 0},
        {{16, 4000, 64, 0, 0, E_NONE, "", "", 0, 0}, 1, 0},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *body = case_body(&want[i].c);
        fg_graph *g = parse_case(ctx, "gemv_source", body, D_F32);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
        assert_string_equal(p->groups[0].template_name, "gemv");
        fg_kernel k;
        fg_emit_opts eo = {.specialize = 1};
        assert_int_equal(fg_emit_group(ctx, p, 0, &eo, &k), FG_OK);
        int n4 = 0;
        for (const char *s = strstr(k.source, "fg_load4("); s; s = strstr(s + 1, "fg_load4("))
            n4++;
        int ws = 0;
        for (int j = 0; j < k.nparams; j++)
            ws += k.params[j].kind == FG_KPARAM_WORKSPACE;
        if (n4 != want[i].load4 || ws != want[i].split || (k.grid[2] > 1) != want[i].split)
            fail_msg("case %zu: %d fg_load4, %d workspaces, grid z %u (want %d, %d)", i, n4, ws, k.grid[2],
                     want[i].load4, want[i].split);
        fg_kernel_free(&k);
        fg_plan_free(p);
        fg_graph_free(g);
        free(body);
    }
    fg_context_free(ctx);

    /* split_k by a tile hook: each count runs; 0 and 33 are located errors */
    const mm_case c = {7, 100, 1000, 0, 0, E_BIAS_M1_RELU, "", "", 0, 0};
    static const int splits[] = {1, 2, 5, 16, 32, 0, 33};
    for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
        char *dir = tu_vocab_dir();
        char lua[200];
        free(tu_write(dir, "rules.yaml",
                      "rule: matmul_bias_act\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n"
                      "  - add: { op: add }\n  - act: { op: relu }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  epilogue:\n    - apply: add\n"
                      "    - apply: act\n"));
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { split_k = %d }\nend\n", splits[i]);
        free(tu_write(dir, "tiles.lua", lua));
        fg_context *hc = tu_ctx_empty();
        assert_int_equal(fg_rules_load(hc, dir), FG_OK);
        if (splits[i] >= 1 && splits[i] <= 32) {
            char w[32];
            snprintf(w, sizeof w, "split-K %d ", splits[i] > 1 ? splits[i] : 1);
            /* 1000 k over 4 * 8-aligned runs: 5 asks 200 each, 16 asks 64, 32 asks 32 (all exist) */
            check_case(hc, &c, D_F32, "gemv", w);
        } else {
            char *body = case_body(&c);
            fg_graph *g = parse_case(hc, "gemv_bad", body, D_F32);
            fg_plan *p = NULL;
            /* out of the key's range: a located error of the planner */
            assert_int_equal(fg_plan_build(hc, g, &p), FG_ERR_HOOK);
            if (!tu_has_error(hc, "split_k"))
                fail_msg("split_k %d: expected a split_k error", splits[i]);
            fg_plan_free(p);
            fg_graph_free(g);
            free(body);
        }
        fg_context_free(hc);
        tu_rmtree(dir);
        free(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structure),   cmocka_unit_test(test_bad_tiles),
        cmocka_unit_test(test_matrix_f16),  cmocka_unit_test(test_matrix_bf16),
        cmocka_unit_test(test_matrix_f32),  cmocka_unit_test(test_matrix_tf32),
        cmocka_unit_test(test_splitk),      cmocka_unit_test(test_splitk_hooks),
        cmocka_unit_test(test_splitk_source), cmocka_unit_test(test_every_tile),
        cmocka_unit_test(test_missing_wait_fails),
        cmocka_unit_test(test_gemv),        cmocka_unit_test(test_gemv_mutations),
        cmocka_unit_test(test_gemv_source),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
