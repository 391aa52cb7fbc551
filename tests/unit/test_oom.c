/*
 * test_oom.c -- running out of host memory (codegen/oom.h): allocation
 * failure injected at every allocation, one run each, over a sequence of
 * public calls that input reaches: loading the shipped rules directory, a
 * YAML graph with weights from an .npy and a .safetensors file, setting a
 * weight, planning it (a fold), two ONNX models (one with an import-time
 * constant fold, one that a rewrite turns back into an op) and planning
 * them, then compiling the YAML graph's plan for the emulation backend
 * (emission, placement, the weight block; obtaining the binaries is held,
 * codegen/oom.h) and running it once.  Every run must end with each call FG_OK or FG_ERR_NOMEM with an
 * "out of memory while ..." error, never a crash; the failed call, run again
 * without injection, must succeed (what the failure left is consistent).
 * Under AddressSanitizer the leak check at exit covers every run.
 *
 * Loading the rules directory (about ten thousand allocations) is run in a
 * fresh context each time and sampled: FUSEGEN_OOM_TEST_RUNS runs at most
 * (default 600, 250 in the sanitized build), with a stride whose offset moves
 * by one each run.  The other calls run in one context with the rules
 * loaded, failing at every one of the loading and planning allocations; the
 * compile and the run are sampled too (FUSEGEN_OOM_TEST_COMPILE_RUNS, default
 * 300, 150 sanitized: each such run first repeats the loading and planning
 * steps).  The test prints what it covered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oom.h"
#include "testutil.h"
#include "weights_file.h"

#define NSTEPS 11
#define STEP_COMPILE 9   /* the first step sampled with the compile budget */

static const char *const step_names[NSTEPS] = {
    "rules load", "graph load", "set weight", "plan", "ONNX load (fold)", "plan", "ONNX load (rewrite)", "plan",
    "ONNX load from memory", "compile (emulation)", "run",
};

static const char GRAPH[] =
    "graph: oom_block\n"
    "seed: 1\n"
    "dtype: fp32\n"
    "layout: NCHW\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 4, 6, 6] }\n"
    "weights:\n"
    "  - { name: c1.w, shape: [4, 4, 3, 3], file: c1_w.npy }\n"
    "  - { name: bn.gamma, file: bn.safetensors }\n"
    "  - { name: bn.beta, file: bn.safetensors }\n"
    "  - { name: bn.mean, shape: [4] }\n"
    "  - { name: bn.var, shape: [4], init: positive }\n"
    "nodes:\n"
    "  - { name: c1, op: conv2d, inputs: [x, c1.w], attrs: { stride: [1, 1], padding: [1, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [c1, bn.gamma, bn.beta, bn.mean, bn.var] }\n"
    "  - { name: act, op: relu, inputs: [bn] }\n"
    "  - { name: sum, op: add, inputs: [act, x] }\n"
    "outputs: [sum]\n";

typedef struct fixture {
    char *dir, *graph, *onnx_fold, *onnx_rewrite, *cache;
    float x[1 * 4 * 6 * 6], y[1 * 4 * 6 * 6];   /* the run's input and output */
    char *model;      /* the fold model's bytes, for fg_graph_load_onnx_memory */
    size_t model_len;
} fixture;

typedef struct run {
    fg_context *ctx;
    fg_graph *g[4];
    fg_plan *p[3];
    fg_exec *e;
} run;

static fixture F;

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static char *copy_file(const char *from, const char *dir, const char *name)
{
    size_t len;
    char *data = fg_read_file(from, &len);
    assert_non_null(data);
    char *to = fg_path_join(dir, name);
    write_bytes(to, data, len);
    free(data);
    return to;
}

static void fixture_make(void)
{
    char why[200];
    F.dir = tu_tmpdir();
    float w[4 * 4 * 3 * 3];
    for (size_t i = 0; i < FG_COUNTOF(w); i++)
        w[i] = (float)((int)(i % 7) - 3) * 0.125f;
    char *p = fg_path_join(F.dir, "c1_w.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F32, 4, (int64_t[]){4, 4, 3, 3}, w, why, sizeof why), 0);
    free(p);
    const char *json = "{\"bn.gamma\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, "
                       "\"bn.beta\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 32]}}";
    const float gb[8] = {1.0f, 0.5f, 2.0f, 1.5f, 0.0f, 0.25f, -0.5f, 1.0f};
    size_t hl = strlen(json);
    unsigned char st[512];
    for (int i = 0; i < 8; i++)
        st[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(st + 8, json, hl);
    memcpy(st + 8 + hl, gb, sizeof gb);
    p = fg_path_join(F.dir, "bn.safetensors");
    write_bytes(p, st, 8 + hl + sizeof gb);
    free(p);
    F.graph = tu_write(F.dir, "g.yaml", GRAPH);
    F.onnx_fold = copy_file(tu_src("tests/fuzz/corpus/fuzz_onnx/reshape_unsqueeze"), F.dir, "fold.onnx");
    F.onnx_rewrite = copy_file(tu_src("tests/fuzz/corpus/fuzz_onnx/matmul_fp16_gelu"), F.dir, "rewrite.onnx");
    F.model = fg_read_file(tu_src("tests/fuzz/corpus/fuzz_onnx/conv_bn_relu"), &F.model_len);
    assert_non_null(F.model);
    for (size_t i = 0; i < FG_COUNTOF(F.x); i++)
        F.x[i] = (float)((int)(i % 11) - 5) * 0.25f;
    F.cache = fg_path_join(F.dir, "cache");   /* compiled kernels: private to the test */
    setenv("FUSEGEN_CACHE_DIR", F.cache, 1);
}

static void run_free(run *r)
{
    fg_exec_free(r->e);
    for (int i = 0; i < 3; i++)
        fg_plan_free(r->p[i]);
    for (int i = 0; i < 4; i++)
        fg_graph_free(r->g[i]);
    fg_context_free(r->ctx);
    memset(r, 0, sizeof *r);
}

/* Step k of the sequence. */
static fg_status step(run *r, int k)
{
    static const float mean[4] = {0.1f, -0.2f, 0.0f, 0.3f};
    switch (k) {
    case 0:
        if (!r->ctx) {
            fg_options o = {0};
            o.no_rules = 1;
            assert_int_equal(fg_context_init(&r->ctx, &o), FG_OK);
            r->ctx->quiet = 1;
        }
        return fg_rules_load(r->ctx, tu_src("rules"));
    case 1: return fg_graph_load(r->ctx, F.graph, &r->g[0]);
    case 2: return fg_graph_set_weight(r->ctx, r->g[0], "bn.mean", FG_DTYPE_F32, (int64_t[]){4}, 1, mean);
    case 3: return fg_plan_build(r->ctx, r->g[0], &r->p[0]);
    case 4: return fg_graph_load(r->ctx, F.onnx_fold, &r->g[1]);
    case 5: return fg_plan_build(r->ctx, r->g[1], &r->p[1]);
    case 6: return fg_graph_load(r->ctx, F.onnx_rewrite, &r->g[2]);
    case 7: return fg_plan_build(r->ctx, r->g[2], &r->p[2]);
    case 8: return fg_graph_load_onnx_memory(r->ctx, "conv_bn_relu.onnx", F.model, F.model_len, NULL, &r->g[3]);
    case 9: {
        fg_compile_options co = {.device = FG_DEVICE_EMU};
        return fg_plan_compile(r->ctx, r->p[0], &co, &r->e);
    }
    default: {
        fg_binding b[2] = {{"x", F.x}, {"sum", F.y}};
        return fg_exec_run(r->e, b, 2, NULL);
    }
    }
}

/* What step k produced (NULL for none); it must be NULL after a failure. */
static const void *product(const run *r, int k)
{
    static const int graph_of[NSTEPS] = {-1, 0, -1, -1, 1, -1, 2, -1, 3, -1, -1};
    static const int plan_of[NSTEPS] = {-1, -1, -1, 0, -1, 1, -1, 2, -1, -1, -1};
    if (k == STEP_COMPILE)
        return r->e;
    if (graph_of[k] >= 0)
        return r->g[graph_of[k]];
    return plan_of[k] >= 0 ? (const void *)r->p[plan_of[k]] : NULL;
}

/* One run with the nth allocation failing (0: none), of steps first.. of the
 * sequence (first 0: in a fresh context; else in shared, whose rules are
 * loaded).  Returns the step that ran out of memory, or -1 when every step
 * succeeded; counts[] tallies. */
static int one_run(long n, int first, fg_context *shared, int counts[NSTEPS])
{
    run r = {0};
    r.ctx = first ? shared : NULL;
    int failed = -1;
    fg_oom_fail_at(n);
    for (int k = first; k < NSTEPS && failed < 0; k++) {
        int nerr = r.ctx ? fg_context_error_count(r.ctx) : 0;
        fg_status st = step(&r, k);
        int fired = fg_oom_fired();
        if (st == FG_OK) {
            if (fired)
                fail_msg("allocation %ld failed in step %d (%s), which still returned FG_OK", n, k, step_names[k]);
            continue;
        }
        if (st != FG_ERR_NOMEM) {
            tu_dump_errors(r.ctx);
            fail_msg("allocation %ld: step %d (%s) returned %s, not FG_ERR_NOMEM", n, k, step_names[k],
                     fg_status_name(st));
        }
        if (!fired)
            fail_msg("step %d (%s) returned FG_ERR_NOMEM with no allocation failed", k, step_names[k]);
        if (fg_context_error_count(r.ctx) <= nerr || !tu_has_error(r.ctx, "out of memory while "))
            fail_msg("allocation %ld: step %d (%s) recorded no out-of-memory error", n, k, step_names[k]);
        if (product(&r, k))
            fail_msg("allocation %ld: step %d (%s) failed but handed out its result", n, k, step_names[k]);
        failed = k;
        counts[k]++;
        /* What the failure left must work: the same call again succeeds. */
        fg_oom_fail_at(0);
        fg_context_clear_errors(r.ctx);
        st = step(&r, k);
        if (st != FG_OK) {
            tu_dump_errors(r.ctx);
            fail_msg("allocation %ld: step %d (%s) failed again (%s) after running out of memory", n, k,
                     step_names[k], fg_status_name(st));
        }
        /* Only the first step runs in a fresh context. */
        if (first == 0)
            break;
    }
    if (first) {
        fg_context_clear_errors(shared);
        r.ctx = NULL;
    }
    run_free(&r);
    fg_oom_fail_at(0);
    return failed;
}

/* Runs with the failure at allocations from..to of the sequence (counted
 * from the start of step first, from 1), every one or, beyond budget runs, with a
 * stride whose offset moves by one each time.  Returns the runs made. */
static long sweep(long from, long to, long budget, int first, fg_context *shared, int counts[NSTEPS], long *stride)
{
    long span = to - from + 1, runs = 0;
    *stride = span > budget ? (span + budget - 1) / budget : 1;
    for (long n = from, phase = 0; n <= to; n += *stride, phase++) {
        long at = n + phase % *stride;
        if (at > to)
            at = to;
        runs++;
        if (one_run(at, first, shared, counts) < 0)
            fail_msg("allocation %ld of %ld..%ld failed nowhere", at, from, to);
    }
    return runs;
}

static void test_every_allocation_fails(void **state)
{
    (void)state;
    fixture_make();
    int counts[NSTEPS] = {0};
    /* The allocations of each step, counted on a run without failure. */
    fg_oom_fail_at(0);
    run r = {0};
    long at[NSTEPS + 1];
    for (int k = 0; k < NSTEPS; k++) {
        at[k] = fg_oom_counted();
        fg_status st = step(&r, k);
        if (st != FG_OK)
            tu_dump_errors(r.ctx);
        assert_int_equal(st, FG_OK);
    }
    at[NSTEPS] = fg_oom_counted();
    run_free(&r);

    /* Loading the rules directory, in a fresh context each run: sampled
     * (FUSEGEN_OOM_TEST_RUNS runs at most).  The rest, in one context whose
     * rules are loaded: every allocation. */
#ifdef __SANITIZE_ADDRESS__
    long budget = 250;
#else
    long budget = 600;
#endif
    const char *env = getenv("FUSEGEN_OOM_TEST_RUNS");
    if (env && atol(env) > 0)
        budget = atol(env);
#ifdef __SANITIZE_ADDRESS__
    long cbudget = 150;
#else
    long cbudget = 300;
#endif
    env = getenv("FUSEGEN_OOM_TEST_COMPILE_RUNS");
    if (env && atol(env) > 0)
        cbudget = atol(env);
    long s0, s1, s2;
    long runs0 = sweep(1, at[1], budget, 0, NULL, counts, &s0);
    fg_context *shared = tu_ctx_shipped();
    long runs1 = sweep(1, at[STEP_COMPILE] - at[1], 20000, 1, shared, counts, &s1);
    long runs2 = sweep(at[STEP_COMPILE] - at[1] + 1, at[NSTEPS] - at[1], cbudget, 1, shared, counts, &s2);
    assert_int_equal(one_run(0, 1, shared, counts), -1);   /* without a failure nothing fails */
    fg_context_free(shared);

    printf("test_oom: %ld allocations; rules load: %ld runs (stride %ld), loading and planning: %ld runs (stride "
           "%ld), compile and run: %ld runs (stride %ld)\n",
           at[NSTEPS], runs0, s0, runs1, s1, runs2, s2);
    for (int k = 0; k < NSTEPS; k++)
        printf("  step %d %-22s %6ld allocations, %5d runs failed here\n", k, step_names[k], at[k + 1] - at[k],
               counts[k]);
    for (int k = 0; k < NSTEPS; k++)
        if (at[k + 1] > at[k])
            assert_true(counts[k] > 0);
    tu_rmtree(F.dir);
    free(F.dir);
    free(F.graph);
    free(F.onnx_fold);
    free(F.onnx_rewrite);
    free(F.model);
    free(F.cache);
    unsetenv("FUSEGEN_CACHE_DIR");
}

/* The guard's own rules: a held region never unwinds, and a guard inside a
 * guard is the outer one's. */
static fg_status nested_body_inner(void *arg);

static fg_status nested_body(void *arg)
{
    fg_context *ctx = arg;
    assert_true(fg_oom_guarded());
    fg_oom_hold();
    assert_false(fg_oom_guarded());
    fg_oom_release();
    fg_oom_fail_at(2);
    void *a = fg_xmalloc(16);   /* the first: succeeds, tracked */
    (void)a;
    return fg_oom_guard(ctx, FG_NOLOC, "the inner call", nested_body_inner, NULL, NULL);
}

static fg_status nested_body_inner(void *arg)
{
    (void)arg;
    void *b = fg_xmalloc(32);   /* the second: unwinds to the outer guard */
    (void)b;
    fail_msg("fg_xmalloc returned after an injected failure");
    return FG_OK;
}

static void test_guard_rules(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    assert_false(fg_oom_guarded());
    fg_status st = fg_oom_guard(ctx, FG_NOLOC, "the outer call", nested_body, NULL, ctx);
    assert_int_equal(st, FG_ERR_NOMEM);
    assert_true(fg_oom_fired());
    assert_true(tu_has_error(ctx, "out of memory while the outer call"));
    assert_false(fg_oom_guarded());
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard_rules),
        cmocka_unit_test(test_every_allocation_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
