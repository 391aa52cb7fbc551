/* test_rewrite.c -- rewrite rules (codegen/rewrite_load.c, rewrite_pass.c, rules/rewrites.yaml).
 * Every shipped rewrite fires on a graph written in the ops ONNX import
 * produces (and a shipped rewrite without a case here fails the test); the
 * plan then fuses the replacement (matmul + bias + GELU into one gemm
 * kernel, conv + SiLU, conv + per-channel scale and shift folded like a
 * batch norm); the plan computes, in emulation, what the ORIGINAL unfused
 * graph computes on the host reference.  Must-not-fire cases: a second
 * consumer of an intermediate, a constant outside its tolerance, a graph
 * output in the middle, another tensor where x must be, a non-commutative
 * op with swapped inputs, a broadcast that grows the output, an RMSNorm
 * cast to an integer type or whose cast's input is read elsewhere, a
 * layer_norm cast to int32 or whose result is a graph output too.  Rewrite
 * documents with errors give located messages; a user directory's rewrite
 * with two inputs, attribute predicates and replacement attributes works
 * with no C change; two rewrites that undo each other stop at the bound;
 * the built-in attention_scores_fp32 (rewrite_attn_cast.c) fires on an fp16
 * attention with fp32 scores and leaves three near forms alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "reference.h"
#include "rewrite.h"
#include "testutil.h"

static fg_context *g_ctx;
static char *g_cache;

static int setup(void **state)
{
    (void)state;
    if (!getenv("FUSEGEN_CACHE_DIR")) {
        g_cache = tu_tmpdir();
        setenv("FUSEGEN_CACHE_DIR", g_cache, 1);
    }
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    if (g_cache)
        tu_rmtree(g_cache);
    free(g_cache);
    return 0;
}

/* An activation x, a matrix a, the constants exporters write, per-channel
 * vectors and a matmul weight. */
static const char *HEADER =
    "graph: rw\nseed: 5\n"
    "inputs: [ { name: x, shape: [2, 8, 5, 3] }, { name: a, shape: [5, 8] } ]\n"
    "weights:\n"
    "  - { name: c_sqrt2, shape: [1], values: [1.4142135] }\n"
    "  - { name: c_isqrt2, shape: [1], values: [0.70710678] }\n"
    "  - { name: c_one, shape: [1], values: [1.0] }\n"
    "  - { name: c_zero, shape: [1], values: [0.0] }\n"
    "  - { name: c_half, shape: [1], values: [0.5] }\n"
    "  - { name: c_three, shape: [1], values: [3.0] }\n"
    "  - { name: c_six, shape: [1], values: [6.0] }\n"
    "  - { name: c_sixth, shape: [1], values: [0.16666667] }\n"
    "  - { name: c_kappa, shape: [1], values: [0.044715] }\n"
    "  - { name: c_beta, shape: [1], values: [0.7978845608] }\n"
    "  - { name: c_bad, shape: [1], values: [1.5] }\n"
    "  - { name: c_halves, shape: [2, 5, 6], uniform: [0.5, 0.5] }\n"
    "  - { name: c_hw, shape: [1, 1, 5, 3] }\n"
    "  - { name: s, shape: [1, 8, 1, 1], init: positive }\n"
    "  - { name: t, shape: [8, 1, 1] }\n"
    "  - { name: w, shape: [8, 8, 3, 3] }\n"
    "  - { name: m, shape: [8, 6] }\n  - { name: mb, shape: [6] }\n"
    "  - { name: c_two, shape: [1], values: [2.0] }\n  - { name: c_eps, shape: [1], values: [1e-5] }\n"
    "  - { name: ln_g, shape: [3], init: positive }\n  - { name: ln_b, shape: [3] }\n"
    "  - { name: ln_g16, shape: [3], dtype: fp16, init: positive }\n"
    "nodes:\n";

#define PW(n, op, ins) "  - { name: " n ", op: " op ", inputs: [" ins "] }\n"

/* The front of the erf form on X: d, e, a (a = 1 + erf(d)). */
#define ERF_DIV(X) PW("d", "div", X ", c_sqrt2") PW("e", "erf", "d") PW("a1", "add", "c_one, e")
#define ERF_MUL(X) PW("d", "mul", "c_isqrt2, " X) PW("e", "erf", "d") PW("a1", "add", "e, c_one")
/* The tails: (x*0.5)*a, x*(a*0.5), (x*a)*0.5. */
#define TAIL_A(X) PW("h", "mul", "c_half, " X) PW("y", "mul", "a1, h")
#define TAIL_B(X) PW("h", "mul", "a1, c_half") PW("y", "mul", X ", h")
#define TAIL_C(X) PW("h", "mul", "a1, " X) PW("y", "mul", "h, c_half")
/* The tanh form's front (x * (x * x) written both ways round). */
#define TANH_FRONT(X)                                                                                               \
    PW("sq", "mul", X ", " X) PW("cu", "mul", "sq, " X) PW("k", "mul", "c_kappa, cu") PW("s1", "add", "k, " X)      \
        PW("i", "mul", "c_beta, s1") PW("th", "tanh", "i") PW("a1", "add", "th, c_one")
#define HS_FRONT(X) PW("p", "add", "c_three, " X) PW("r", "relu6", "p")

/* A node with attributes. */
#define PWA(n, op, ins, attrs) "  - { name: " n ", op: " op ", inputs: [" ins "], attrs: { " attrs " } }\n"
/* Softmax's function body over axis A (ONNX import's normalized axes), and
 * LogSoftmax's up to its Log. */
#define SOFTMAX_FRONT(X, A)                                                                                         \
    PWA("mx", "reduce_max", X, "axes: [" A "]") PW("sb", "sub", X ", mx") PW("ex", "exp", "sb")                     \
        PWA("sm", "reduce_sum", "ex", "axes: [" A "]")

/* T5's overflow guard: F = any(isinf(x)) as exporters write it (a
 * reduction of the cast flags, kept), and the bound where(flag, 0.5, 1)
 * negated and cast for the lower bound, cast for the upper (l, h). */
#define T5_FLAG_INF(F)                                                                                              \
    PW("ii", "is_inf", "x") PWA("ci", "cast_int", "ii", "to: int64")                                                \
        PWA(F, "reduce_max", "ci", "axes: [0, 1, 2, 3], keepdims: false")
#define T5_BOUND(FLAGOP, FLAGIN)                                                                                    \
    PW("b", FLAGOP, FLAGIN) PW("bw", "where", "b, c_half, c_one") PW("n", "neg", "bw")                               \
        PWA("l", "cast", "n", "to: fp32") PWA("h", "cast", "bw", "to: fp32")

typedef struct rw_case {
    const char *rewrite;   /* shipped rewrite that must fire */
    const char *nodes;     /* nodes and outputs; the rewritten root is node y */
    const char *op;        /* the op y becomes */
    int removed;           /* nodes the rewrites remove */
    const char *input;     /* y's input 0 afterwards (NULL: x) */
    int kernels;           /* the plan's kernels (0: 1) */
    int nrewrites;         /* rewrites applied in all (0: 1) */
    double tol;            /* rel L2 against the unfused graph's reference (0: 1e-5) */
} rw_case;

static const rw_case CASES[] = {
    {"silu", PW("sg", "sigmoid", "x") PW("y", "mul", "sg, x") "outputs: [y]\n", "silu", 1},
    {"nan_to_zero", PW("n", "is_nan", "x") PW("y", "where", "n, c_zero, x") "outputs: [y]\n", "nan_to_zero", 1},
    {"gelu_erf_div_a", ERF_DIV("x") TAIL_A("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_erf_div_b", ERF_DIV("x") TAIL_B("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_erf_div_c", ERF_DIV("x") TAIL_C("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_erf_mul_a", ERF_MUL("x") TAIL_A("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_erf_mul_b", ERF_MUL("x") TAIL_B("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_erf_mul_c", ERF_MUL("x") TAIL_C("x") "outputs: [y]\n", "gelu", 4},
    {"gelu_tanh_a", TANH_FRONT("x") TAIL_A("x") "outputs: [y]\n", "gelu_tanh", 8},
    {"gelu_tanh_b", TANH_FRONT("x") TAIL_B("x") "outputs: [y]\n", "gelu_tanh", 8},
    {"gelu_tanh_c", TANH_FRONT("x") TAIL_C("x") "outputs: [y]\n", "gelu_tanh", 8},
    {"gelu_tanh_pow",
     PW("cu", "pow", "x, c_three") PW("k", "mul", "c_kappa, cu") PW("s1", "add", "k, x") PW("i", "mul", "c_beta, s1")
         PW("th", "tanh", "i") PW("a1", "add", "th, c_one") TAIL_A("x") "outputs: [y]\n",
     "gelu_tanh", 7},
    {"hardswish_div", HS_FRONT("x") PW("h", "mul", "r, x") PW("y", "div", "h, c_six") "outputs: [y]\n", "hardswish", 3},
    {"hardswish_mul", HS_FRONT("x") PW("h", "mul", "x, r") PW("y", "mul", "c_sixth, h") "outputs: [y]\n", "hardswish",
     3},
    {"hardswish_gate_div", HS_FRONT("x") PW("h", "div", "r, c_six") PW("y", "mul", "h, x") "outputs: [y]\n",
     "hardswish", 3},
    {"hardswish_gate_mul", HS_FRONT("x") PW("h", "mul", "r, c_sixth") PW("y", "mul", "x, h") "outputs: [y]\n",
     "hardswish", 3},
    {"hardswish_hardsigmoid", PW("h", "hardsigmoid", "x") PW("y", "mul", "h, x") "outputs: [y]\n", "hardswish", 1},
    {"hardswish_hardsigmoid_ab",
     "  - { name: h, op: hardsigmoid_ab, inputs: [x], attrs: { alpha: 0.16666667, beta: 0.5 } }\n" PW("y", "mul",
                                                                                                      "x, h")
         "outputs: [y]\n",
     "hardswish", 1},
    {"scale_shift", PW("h", "mul", "s, x") PW("y", "add", "t, h") "outputs: [y]\n", "batch_norm", 1},
    /* function bodies of the reductions, Softmax and LogSoftmax (tests/onnx/test_onnx_reduce.py imports the
     * ONNX forms) */
    {"reduce_l1_body", PW("ab", "abs", "x") PWA("y", "reduce_sum", "ab", "axes: [1, 3], keepdims: false")
     "outputs: [y]\n", "reduce_l1", 1},
    {"reduce_sum_square_body", PW("sq", "mul", "x, x") PWA("y", "reduce_sum", "sq", "axes: [2]") "outputs: [y]\n",
     "reduce_sum_square", 1},
    /* the sum of sigmoids is positive: its log is a number */
    {"reduce_log_sum_body", PW("sg", "sigmoid", "x") PWA("r", "reduce_sum", "sg", "axes: [0, 2, 3], keepdims: false")
     PW("y", "log", "r") "outputs: [y]\n", "reduce_log_sum", 1, "sg", 2},
    {"softmax_body", SOFTMAX_FRONT("x", "1") PW("y", "div", "ex, sm") "outputs: [y]\n", "softmax", 4},
    {"log_softmax_body", SOFTMAX_FRONT("x", "3") PW("lg", "log", "sm") PW("y", "sub", "sb, lg") "outputs: [y]\n",
     "log_softmax", 5, NULL, 1, 2},
    /* layer and RMS normalization (rules/norm.yaml): the residual add as the skip, the decomposed forms */
    {"layer_norm_skip", PW("r", "sigmoid", "x") PW("u", "add", "x, r")
     "  - { name: y, op: layer_norm, inputs: [u, ln_g, ln_b] }\noutputs: [y]\n", "layer_norm", 1, NULL, 2},
    {"layer_norm_skip_nobias", PW("r", "sigmoid", "x") PW("u", "add", "x, r")
     "  - { name: y, op: layer_norm, inputs: [u, ln_g], attrs: { rms: true } }\noutputs: [y]\n", "layer_norm", 1, NULL, 2},
    {"layer_norm_body", PWA("mn", "reduce_mean", "x", "axes: [3]") PW("d", "sub", "x, mn") PW("p", "pow", "d, c_two")
     PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "v, c_eps") PW("sq", "sqrt", "e") PW("n", "div", "d, sq")
     PW("w1", "mul", "n, ln_g") PW("y", "add", "ln_b, w1") "outputs: [y]\n", "layer_norm", 8},
    {"rms_norm_div", PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "c_eps, v")
     PW("sq", "sqrt", "e") PW("r", "div", "c_one, sq") PW("h", "mul", "x, r") PW("y", "mul", "ln_g, h") "outputs: [y]\n",
     "layer_norm", 6},
    {"rms_norm_reciprocal", PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]")
     PW("e", "add", "v, c_eps") PW("sq", "sqrt", "e") PW("r", "reciprocal", "sq") PW("h", "mul", "r, x")
     PW("y", "mul", "h, ln_g") "outputs: [y]\n", "layer_norm", 6},
    /* the statistics in fp32 between two casts (an fp16 model's LlamaRMSNorm; here the graph is fp32,
     * the casts are to fp32) */
    {"rms_norm_cast_div", PWA("c", "cast", "x", "to: fp32") PW("p", "pow", "c, c_two")
     PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "c_eps, v") PW("sq", "sqrt", "e")
     PW("r", "div", "c_one, sq") PW("h", "mul", "c, r") PWA("b", "cast", "h", "to: fp32") PW("y", "mul", "ln_g, b")
     "outputs: [y]\n", "layer_norm", 8},
    {"rms_norm_cast_reciprocal", PWA("c", "cast", "x", "to: fp32") PW("p", "pow", "c, c_two")
     PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "v, c_eps") PW("sq", "sqrt", "e")
     PW("r", "reciprocal", "sq") PW("h", "mul", "r, c") PWA("b", "cast", "h", "to: fp32") PW("y", "mul", "b, ln_g")
     "outputs: [y]\n", "layer_norm", 8},
    /* T5's RMSNorm as the TorchScript exporter writes it: x cast twice */
    {"rms_norm_cast2_div", PWA("c", "cast", "x", "to: fp32") PW("p", "pow", "c, c_two")
     PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "v, c_eps") PW("sq", "sqrt", "e")
     PW("r", "div", "c_one, sq") PWA("d", "cast", "x", "to: fp32") PW("h", "mul", "d, r")
     PWA("b", "cast", "h", "to: fp32") PW("y", "mul", "b, ln_g") "outputs: [y]\n", "layer_norm", 9},
    /* an fp32 x (an fp16 model's fp32 residual stream) whose normalized product is cast to fp16 before
     * the fp16 weight: one layer_norm, fp32 in, fp16 out (the fp16 TorchScript Llama's later norms); the
     * reciprocal form cast to bf16, the product by an fp16 weight in bf16 */
    {"rms_norm_div_cast", PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]")
     PW("e", "add", "c_eps, v") PW("sq", "sqrt", "e") PW("r", "div", "c_one, sq") PW("h", "mul", "x, r")
     PWA("b", "cast", "h", "to: fp16") PW("y", "mul", "ln_g16, b") "outputs: [y]\n", "layer_norm", 7, NULL, 0, 0,
     2e-3},
    {"rms_norm_reciprocal_cast", PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]")
     PW("e", "add", "v, c_eps") PW("sq", "sqrt", "e") PW("r", "reciprocal", "sq") PW("h", "mul", "r, x")
     PWA("b", "cast", "h", "to: bf16") PW("y", "mul", "b, ln_g16") "outputs: [y]\n", "layer_norm", 7, NULL, 0, 0,
     1e-2},
    /* a layer_norm cast to fp16 / bf16: one layer_norm with `to` (each set of present inputs; the skip
     * forms after layer_norm_skip*) */
    {"layer_norm_cast", PW("r", "sigmoid", "x") PW("u", "add", "x, r")
     "  - { name: ln, op: layer_norm, inputs: [u, ln_g, ln_b] }\n" PWA("y", "cast", "ln", "to: fp16") "outputs: [y]\n",
     "layer_norm", 2, NULL, 2, 2, 2e-3},
    {"layer_norm_cast_bias", "  - { name: ln, op: layer_norm, inputs: [x, ln_g, ln_b], attrs: { eps: 1e-3 } }\n"
     PWA("y", "cast", "ln", "to: fp16") "outputs: [y]\n", "layer_norm", 1, NULL, 0, 0, 2e-3},
    {"layer_norm_cast_scale", "  - { name: ln, op: layer_norm, inputs: [x, ln_g], attrs: { rms: true } }\n"
     PWA("y", "cast", "ln", "to: bf16") "outputs: [y]\n", "layer_norm", 1, NULL, 0, 0, 1e-2},
    {"layer_norm_cast_skip", PW("r", "sigmoid", "x") PW("u", "add", "x, r")
     "  - { name: ln, op: layer_norm, inputs: [u, ln_g] }\n" PWA("y", "cast", "ln", "to: fp16") "outputs: [y]\n",
     "layer_norm", 2, NULL, 2, 2, 2e-3},
    /* T5's fp16 overflow clamp (here fp32, the bounds 0.5 / 1): the any-inf flag of x (false) and a
     * positive max of x (true) pick the bound */
    {"t5_clamp_any", T5_FLAG_INF("f") T5_BOUND("cast_bool", "f") PW("mx", "max2", "x, l") PW("y", "min2", "mx, h")
     "outputs: [y]\n", "clip_sym_select", 6, NULL, 3},
    {"t5_clamp_sum", PWA("f", "reduce_max", "x", "axes: [0, 1, 2, 3], keepdims: false")
     T5_BOUND("cmp_greater", "f, c_zero") PW("y", "clip_t", "x, l, h") "outputs: [y]\n", "clip_sym_select", 5, NULL, 2},
};

static fg_graph *parse_nodes(fg_context *ctx, const char *nodes)
{
    fg_buf b = {0};
    fg_buf_put(&b, HEADER);
    fg_buf_put(&b, nodes);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "rw.yaml", b.s, b.len, &g);
    if (st != FG_OK) {
        tu_dump_errors(ctx);
        fprintf(stderr, "%s", b.s);
    }
    assert_int_equal(st, FG_OK);
    fg_buf_free(&b);
    return g;
}

static fg_plan *plan_of(fg_context *ctx, const fg_graph *g)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return p;
}

/* Number of plan notes that start with "rewrite NAME (" (NULL: any rewrite). */
static int rewrite_notes(const fg_plan *p, const char *name)
{
    char pre[128];
    snprintf(pre, sizeof pre, "rewrite %s (", name ? name : "");
    int n = 0;
    for (int i = 0; i < p->nnotes; i++)
        n += strncmp(p->notes[i], pre, name ? strlen(pre) : 8) == 0;
    return n;
}

/* Compiles p for emulation and compares it with the reference of g. */
static void check_numerics(fg_context *ctx, const fg_graph *g, const fg_plan *p, int want_kernels, double tol)
{
    fg_exec *e = NULL;
    fg_compile_options co = {.device = FG_DEVICE_EMU};
    fg_status st = fg_plan_compile(ctx, p, &co, &e);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    if (want_kernels > 0)
        assert_int_equal(fg_exec_kernel_count(e), want_kernels);
    tu_exec_vs_reference(ctx, g, e, 77, tol);
    fg_exec_free(e);
}

/* Every shipped rewrite has a case, and each case fires, leaves the source
 * graph alone, and computes what the unfused graph computes. */
static void test_shipped_rewrites_fire(void **state)
{
    (void)state;
    for (int r = 0; r < g_ctx->nrewrites; r++) {
        int have = 0;
        for (size_t c = 0; c < FG_COUNTOF(CASES) && !have; c++)
            have = strcmp(CASES[c].rewrite, g_ctx->rewrites[r]->name) == 0;
        if (!have)
            fail_msg("shipped rewrite %s has no case in test_rewrite.c", g_ctx->rewrites[r]->name);
    }
    for (size_t c = 0; c < FG_COUNTOF(CASES); c++) {
        const rw_case *k = &CASES[c];
        print_message("  %s\n", k->rewrite);
        fg_graph *g = parse_nodes(g_ctx, k->nodes);
        int n0 = g->nnodes;
        fg_plan *p = plan_of(g_ctx, g);
        if (rewrite_notes(p, k->rewrite) != 1) {
            for (int i = 0; i < p->nnotes; i++)
                fprintf(stderr, "  note: %s\n", p->notes[i]);
            fail_msg("rewrite %s did not fire once", k->rewrite);
        }
        int kernels = k->kernels ? k->kernels : 1;
        assert_int_equal(rewrite_notes(p, NULL), k->nrewrites ? k->nrewrites : 1);
        assert_int_equal(g->nnodes, n0);   /* the caller's graph is untouched */
        assert_int_equal(p->graph->nnodes, n0 - k->removed);
        int y = fg_graph_find_node(p->graph, "y");
        assert_true(y >= 0);
        assert_string_equal(p->graph->nodes[y].op->name, k->op);
        assert_int_equal(p->graph->nodes[y].inputs[0], fg_graph_find_tensor(g, k->input ? k->input : "x"));
        assert_int_equal(p->graph->nodes[y].loc.line, g->nodes[fg_graph_find_node(g, "y")].loc.line);
        assert_int_equal(p->ngroups, kernels);
        /* the replacement keeps the root's output dtype (fp16 / bf16 from an fp32 x for the _cast forms) */
        assert_int_equal(p->graph->tensors[p->graph->nodes[y].output].dtype,
                         g->tensors[g->nodes[fg_graph_find_node(g, "y")].output].dtype);
        check_numerics(g_ctx, g, p, kernels, k->tol > 0 ? k->tol : 1e-5);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

/* The explain line names the rule file and line and the replaced nodes. */
static void test_explain_line(void **state)
{
    (void)state;
    fg_graph *g = parse_nodes(g_ctx, ERF_DIV("x") TAIL_C("x") "outputs: [y]\n");
    fg_plan *p = plan_of(g_ctx, g);
    assert_int_equal(rewrite_notes(p, "gelu_erf_div_c"), 1);
    const char *note = p->notes[0];
    assert_non_null(strstr(note, "rewrites.yaml:"));
    assert_non_null(strstr(note, "): d, e, a1, h, y -> gelu y"));
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    fg_plan_print_opts o = {.explain = 1};
    fg_plan_print(g_ctx, p, &o, f);
    fclose(f);
    assert_non_null(strstr(txt, "rewrite gelu_erf_div_c ("));
    free(txt);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* After the rewrite the fusion rules take the op: matmul + bias + GELU is
 * one gemm kernel, conv + SiLU one conv kernel, a per-channel scale and
 * shift folds into the conv like a batch norm. */
static void test_rewrite_then_fuse(void **state)
{
    (void)state;
    static const struct {
        const char *nodes, *first, *want;
    } cases[] = {
        {PW("mm", "matmul", "a, m") PW("fc", "add", "mb, mm") ERF_DIV("fc") TAIL_C("fc") "outputs: [y]\n", "mm",
         "matmul_bias_act:mm,fc,y"},
        {PW("mm", "matmul", "a, m") PW("fc", "add", "mm, mb") ERF_MUL("fc") TAIL_A("fc") "outputs: [y]\n", "mm",
         "matmul_bias_act:mm,fc,y"},
        {PW("mm", "matmul", "a, m") PW("fc", "add", "mm, mb") TANH_FRONT("fc") TAIL_C("fc") "outputs: [y]\n", "mm",
         "matmul_bias_act:mm,fc,y"},
        {"  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n" PW("sg", "sigmoid", "c")
             PW("y", "mul", "c, sg") "outputs: [y]\n",
         "c", "conv_act:c,y"},
        {"  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n" PW("h", "mul", "c, s")
             PW("y", "add", "h, t") PW("act", "relu", "y") "outputs: [act]\n",
         "c", "conv_bn_act:c,y,act"},
        {"  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n" HS_FRONT("c")
             PW("h", "mul", "c, r") PW("y", "div", "h, c_six") "outputs: [y]\n",
         "c", "conv_act:c,y"},
        /* attention scores: MatMul, then Softmax's body over the last axis: one gemm_softmax kernel */
        {PW("mm", "matmul", "a, m") SOFTMAX_FRONT("mm", "1") PW("y", "div", "ex, sm") "outputs: [y]\n", "mm",
         "matmul_softmax:mm,y"},
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        fg_graph *g = parse_nodes(g_ctx, cases[i].nodes);
        fg_plan *p = plan_of(g_ctx, g);
        assert_int_equal(rewrite_notes(p, NULL), 1);
        assert_string_equal(tu_group_desc(g_ctx, p, cases[i].first), cases[i].want);
        assert_int_equal(p->ngroups, 1);
        check_numerics(g_ctx, g, p, 1, 1e-5);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

/* Graphs the shipped rewrites must leave alone. */
static void test_must_not_fire(void **state)
{
    (void)state;
    static const char *const cases[] = {
        /* erf's output also feeds another node */
        ERF_DIV("x") TAIL_C("x") PW("z", "tanh", "e") "outputs: [y, z]\n",
        /* a graph output in the middle */
        ERF_DIV("x") TAIL_C("x") "outputs: [y, a1]\n",
        /* a constant outside its tolerance: x / 1.5 */
        PW("d", "div", "x, c_bad") PW("e", "erf", "d") PW("a1", "add", "c_one, e") TAIL_C("x") "outputs: [y]\n",
        /* 0.5 where 1 must be */
        PW("d", "div", "x, c_sqrt2") PW("e", "erf", "d") PW("a1", "add", "c_half, e") TAIL_C("x") "outputs: [y]\n",
        /* div is not commutative: sqrt(2) / x */
        PW("d", "div", "c_sqrt2, x") PW("e", "erf", "d") PW("a1", "add", "c_one, e") TAIL_C("x") "outputs: [y]\n",
        /* x * sigmoid(relu(x)): another tensor where x must be */
        PW("r", "relu", "x") PW("sg", "sigmoid", "r") PW("y", "mul", "sg, x") "outputs: [y]\n",
        /* the sigmoid also feeds the output */
        PW("sg", "sigmoid", "x") PW("y", "mul", "sg, x") "outputs: [y, sg]\n",
        /* hardsigmoid_ab with another slope */
        "  - { name: h, op: hardsigmoid_ab, inputs: [x], attrs: { alpha: 0.2, beta: 0.5 } }\n" PW("y", "mul", "x, h")
            "outputs: [y]\n",
        /* the scale is not per channel (one value per H, W position) */
        "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n" PW("h", "mul", "c, c_hw")
            PW("y", "add", "h, t") "outputs: [y]\n",
        /* Softmax's body: the max and the sum over different axes */
        PWA("mx", "reduce_max", "x", "axes: [1]") PW("sb", "sub", "x, mx") PW("ex", "exp", "sb")
            PWA("sm", "reduce_sum", "ex", "axes: [2]") PW("y", "div", "ex, sm") "outputs: [y]\n",
        /* over two axes (softmax takes one) */
        SOFTMAX_FRONT("x", "2, 3") PW("y", "div", "ex, sm") "outputs: [y]\n",
        /* the max without keepdims (x - max over axis 0 broadcasts, but the rule wants keepdims) */
        PWA("mx", "reduce_max", "x", "axes: [0], keepdims: false") PW("sb", "sub", "x, mx") PW("ex", "exp", "sb")
            PWA("sm", "reduce_sum", "ex", "axes: [0]") PW("y", "div", "ex, sm") "outputs: [y]\n",
        /* T5's clamp with a lower bound that is not the upper one negated */
        T5_FLAG_INF("f") PW("b", "cast_bool", "f") PW("bw", "where", "b, c_half, c_one")
            PW("bw2", "where", "b, c_one, c_half") PW("n", "neg", "bw2") PWA("l", "cast", "n", "to: fp32")
                PWA("h", "cast", "bw", "to: fp32") PW("mx", "max2", "x, l") PW("y", "min2", "mx, h") "outputs: [y]\n",
        /* its flag compared with 0.5, not 0 */
        PWA("f", "reduce_max", "x", "axes: [0, 1, 2, 3], keepdims: false") T5_BOUND("cmp_greater", "f, c_half")
            PW("y", "clip_t", "x, l, h") "outputs: [y]\n",
        /* the fp32 RMSNorm's product cast to an integer type (the layer_norm's `to` must be a float
         * dtype): mul(int32, fp16) is int32 like the cast */
        PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "c_eps, v")
            PW("sq", "sqrt", "e") PW("r", "div", "c_one, sq") PW("h", "mul", "x, r") PWA("b", "cast", "h", "to: int32")
                PW("y", "mul", "b, ln_g16") "outputs: [y]\n",
        /* the same cast's input (the normalized fp32 product) read by another node too */
        PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "c_eps, v")
            PW("sq", "sqrt", "e") PW("r", "div", "c_one, sq") PW("h", "mul", "x, r") PWA("b", "cast", "h", "to: fp16")
                PW("y", "mul", "ln_g16, b") PW("z", "tanh", "h") "outputs: [y, z]\n",
        /* the cast a graph output */
        PW("p", "pow", "x, c_two") PWA("v", "reduce_mean", "p", "axes: [3]") PW("e", "add", "c_eps, v")
            PW("sq", "sqrt", "e") PW("r", "div", "c_one, sq") PW("h", "mul", "x, r") PWA("b", "cast", "h", "to: fp16")
                PW("y", "mul", "ln_g16, b") "outputs: [y, b]\n",
        /* a layer_norm cast to an integer type; a layer_norm whose fp32 result is a graph output too */
        "  - { name: ln, op: layer_norm, inputs: [x, ln_g, ln_b] }\n" PWA("y", "cast", "ln", "to: int32")
            "outputs: [y]\n",
        "  - { name: ln, op: layer_norm, inputs: [x, ln_g, ln_b] }\n" PWA("y", "cast", "ln", "to: fp16")
            "outputs: [y, ln]\n",
        /* the exponentials are a graph output too */
        SOFTMAX_FRONT("x", "1") PW("y", "div", "ex, sm") "outputs: [y, ex]\n",
        /* the max of another tensor than the one shifted */
        PWA("mx", "reduce_max", "a", "axes: [1]") PW("sb", "sub", "x, mx") PW("ex", "exp", "sb")
            PWA("sm", "reduce_sum", "ex", "axes: [3]") PW("y", "div", "ex, sm") "outputs: [y]\n",
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        fg_graph *g = parse_nodes(g_ctx, cases[i]);
        fg_plan *p = plan_of(g_ctx, g);
        if (rewrite_notes(p, NULL) != 0)
            fail_msg("case %zu: a rewrite fired: %s", i, p->notes[0]);
        assert_int_equal(p->graph->nnodes, g->nnodes);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    /* LogSoftmax's body subtracting the log from x, not from x - max: the
     * Log(ReduceSum) pair becomes reduce_log_sum, nothing more */
    fg_graph *g = parse_nodes(g_ctx, SOFTMAX_FRONT("x", "3") PW("lg", "log", "sm") PW("y", "sub", "x, lg")
                                         "outputs: [y]\n");
    fg_plan *p = plan_of(g_ctx, g);
    assert_int_equal(rewrite_notes(p, NULL), 1);
    assert_int_equal(rewrite_notes(p, "reduce_log_sum_body"), 1);
    assert_int_equal(p->graph->nnodes, g->nnodes - 1);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* A broadcast that would grow the output: (a * (1 + erf(a / sqrt 2))) *
 * [2, 5, 6] halves is [2, 5, 6], gelu(a) only [5, 6]. */
static void test_broadcast_refused(void **state)
{
    (void)state;
    fg_graph *g = parse_nodes(g_ctx, PW("mm", "matmul", "a, m") ERF_DIV("mm") PW("h", "mul", "a1, mm")
                                         PW("y", "mul", "h, c_halves") "outputs: [y]\n");
    fg_plan *p = plan_of(g_ctx, g);
    assert_int_equal(rewrite_notes(p, NULL), 0);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* Writes a rules directory: the shipped vocabulary, onnx_ops.yaml, and
 * extra.yaml holding text. */
static char *rules_dir_with(const char *text)
{
    char *dir = tu_vocab_dir();
    char *ops = fg_read_file(tu_src("rules/onnx_ops.yaml"), NULL);
    assert_non_null(ops);
    free(tu_write(dir, "onnx_ops.yaml", ops));
    free(ops);
    free(tu_write(dir, "extra.yaml", text));
    return dir;
}

static fg_context *ctx_for(const char *dir, fg_status want)
{
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st != want)
        tu_dump_errors(ctx);
    assert_int_equal(st, want);
    return ctx;
}

/* A user directory's rewrites: two inputs (the order kept through a
 * non-commutative sub), attribute predicates, replacement attributes, a new
 * op; no C change. */
static void test_user_rewrites(void **state)
{
    (void)state;
    char *dir = rules_dir_with("op: relu_diff\nkind: pointwise\ninputs: [a, b]\nexpr: \"max(a - b, 0)\"\n"
                               "---\n"
                               "rewrite: clip_pair\n"
                               "match:\n"
                               "  - c1: { op: clip_min, inputs: [x], where: \"lo == 0\" }\n"
                               "  - c2: { op: clip_max, inputs: [c1], where: \"hi == 6\" }\n"
                               "replace: { op: clip, inputs: [x], attrs: { lo: 0.0, hi: 6.0 } }\n"
                               "---\n"
                               "rewrite: relu_of_diff\n"
                               "inputs: [x, y]\n"
                               "match:\n"
                               "  - d: { op: sub, inputs: [x, y] }\n"
                               "  - r: { op: relu, inputs: [d] }\n"
                               "replace: { op: relu_diff, inputs: [x, y] }\n");
    fg_context *ctx = ctx_for(dir, FG_OK);
    assert_int_equal(ctx->nrewrites, 2);
    static const char *G = "graph: u\ninputs: [ { name: x, shape: [2, 4, 3, 3] }, { name: z, shape: [2, 4, 3, 3] } ]\n"
                           "nodes:\n"
                           "  - { name: c1, op: clip_min, inputs: [x], attrs: { lo: 0.0 } }\n"
                           "  - { name: c2, op: clip_max, inputs: [c1], attrs: { hi: 6.0 } }\n"
                           "  - { name: d, op: sub, inputs: [c2, z] }\n"
                           "  - { name: r, op: relu, inputs: [d] }\n"
                           "  - { name: k1, op: clip_min, inputs: [z], attrs: { lo: 1.0 } }\n"
                           "  - { name: k2, op: clip_max, inputs: [k1], attrs: { hi: 6.0 } }\n"
                           "outputs: [r, k2]\n";
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "u.yaml", G, strlen(G), &g), FG_OK);
    fg_plan *p = plan_of(ctx, g);
    assert_int_equal(rewrite_notes(p, "clip_pair"), 1);   /* not k1, k2: lo is 1 */
    assert_int_equal(rewrite_notes(p, "relu_of_diff"), 1);
    const fg_node *c2 = &p->graph->nodes[fg_graph_find_node(p->graph, "c2")];
    assert_string_equal(c2->op->name, "clip");
    assert_true(fg_node_attr_num(c2, "lo", -1) == 0.0 && fg_node_attr_num(c2, "hi", -1) == 6.0);
    const fg_node *r = &p->graph->nodes[fg_graph_find_node(p->graph, "r")];
    assert_string_equal(r->op->name, "relu_diff");
    assert_int_equal(r->inputs[0], fg_graph_find_tensor(g, "c2"));
    assert_int_equal(r->inputs[1], fg_graph_find_tensor(g, "z"));
    assert_int_equal(fg_graph_find_node(p->graph, "k1") >= 0, 1);
    check_numerics(ctx, g, p, 0, 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* Two rewrites that undo each other stop at the bound with a warning. */
static void test_rewrite_bound(void **state)
{
    (void)state;
    char *dir = rules_dir_with("rewrite: there\nmatch:\n  - r: { op: relu, inputs: [x] }\n"
                               "replace: { op: sigmoid, inputs: [x] }\n---\n"
                               "rewrite: back\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\n"
                               "replace: { op: relu, inputs: [x] }\n");
    fg_context *ctx = ctx_for(dir, FG_OK);
    static const char *G = "graph: b\ninputs: [ { name: x, shape: [4] } ]\nnodes:\n"
                           "  - { name: r, op: relu, inputs: [x] }\noutputs: [r]\n";
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "b.yaml", G, strlen(G), &g), FG_OK);
    int w0 = ctx->nwarnings;
    fg_plan *p = plan_of(ctx, g);
    assert_int_equal(p->nnotes, 4 * 1 + 64);
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_non_null(strstr(ctx->warnings[w0], "rewrites stopped after 68 applications"));
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* Located errors for bad rewrite documents: one error each, at the
 * offending key or value; in one file, every one is reported. */
static void test_bad_documents(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"rewrite: a\nmatch:\n  - s: { op: sigmoud, inputs: [x] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:14: error: unknown op 'sigmoud' (did you mean 'sigmoid'?)"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: silu, inputs: [y] }\n",
         "extra.yaml:4:31: error: replacement input 'y' is not bound by the pattern (it may read: x)"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [m] }\n  - m: { op: mul, inputs: [x, s] }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:32: error: step 's' consumes step 'm', which comes later"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [s] }\n  - m: { op: mul, inputs: [x, s] }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:32: error: step 's' consumes its own output (a cycle)"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\n  - m: { op: mul, inputs: [x, ss] }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:4:31: error: unknown name 'ss' in step 'm': not an input of the rewrite (inputs: x) nor an "
         "earlier step (did you mean 's'?)"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\n  - m: { op: mul, inputs: [x, x] }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:5: error: step 's' feeds no later step"},
        {"rewrite: a\ninputs: [x, y]\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:1:1: error: input 'y' of rewrite 'a' is read by no step"},
        {"rewrite: a\nmatch:\n  - m: { op: mul, inputs: [x, { const: any, tol: 0.1 }] }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:50: error: `tol` needs a numeric `const`, not `any`"},
        {"rewrite: a\nmatch:\n  - m: { op: mul, inputs: [x, { const: half }] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:40: error: const must be a finite number or `any`, got string 'half'"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: conv2d, inputs: [x] }\n",
         "extra.yaml:4:32: error: replace gives 1 input but op 'conv2d' takes 3 (some optional)"},
        /* attribute patterns */
        {"rewrite: a\nmatch:\n  - m: { op: mul, inputs: [x, x], attrs: { axes: A } }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:44: error: step 'm': op 'mul' has no attribute 'axes'"},
        {"rewrite: a\nmatch:\n  - m: { op: reduce_max, inputs: [x], attrs: { keepdims: [A] } }\n"
         "  - y: { op: exp, inputs: [m] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:58: error: attribute 'keepdims' is not an ints list: give one value"},
        {"rewrite: a\nmatch:\n  - m: { op: reduce_max, inputs: [x], attrs: { axes: 1 } }\n"
         "  - y: { op: exp, inputs: [m] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:54: error: attribute 'axes' is an ints list: give a list ([1, A]) or a variable"},
        {"rewrite: a\nmatch:\n  - m: { op: reduce_max, inputs: [x], attrs: { axes: A } }\n"
         "  - y: { op: reduce_sum, inputs: [m], attrs: { axes: [A] } }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:4:55: error: attribute variable 'A' stands for one number here but for an ints list before"},
        {"rewrite: a\nmatch:\n  - m: { op: reduce_max, inputs: [x], attrs: { axes: AX } }\n"
         "  - y: { op: exp, inputs: [m] }\nreplace: { op: softmax, inputs: [x], attrs: { axis: AX } }\n",
         "extra.yaml:5:53: error: attribute variable 'AX' stands for an ints list, but attribute 'axis' of softmax "
         "is one value"},
        {"rewrite: a\nmatch:\n  - c: { op: cast, inputs: [x], attrs: { to: T } }\n"
         "replace: { op: leaky_relu, inputs: [x], attrs: { alpha: T } }\n",
         "extra.yaml:4:57: error: attribute variable 'T' stands for a string, but attribute 'alpha' of leaky_relu "
         "is one value"},
        {"rewrite: a\nmatch:\n  - m: { op: leaky_relu, inputs: [x], attrs: { alpha: A } }\n"
         "replace: { op: cast, inputs: [x], attrs: { to: A } }\n",
         "extra.yaml:4:48: error: attribute variable 'A' stands for one number, but attribute 'to' of cast is a "
         "string"},
        {"rewrite: a\nmatch:\n  - s: { op: mul, inputs: [x] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:27: error: step 's' gives 1 input but op 'mul' takes 2"},
        {"rewrite: a\nmatch:\n  - m: { op: mul, inputs: [x, { const: any, as: k }] }\n"
         "replace: { op: batch_norm, inputs: [x, k, k, k, { fill: 1.0, like: k }] }\n",
         "extra.yaml:4:68: error: `like: k`: capture 'k' is not `per_channel: true`"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x], wher: \"1\" }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:36: error: unknown key 'wher' in a rewrite step (did you mean 'where'?)"},
        {"rewrite: a\nmatch:\n  - s: { op: leaky_relu, inputs: [x], where: \"alpah > 0\" }\n"
         "replace: { op: silu, inputs: [x] }\n",
         "extra.yaml:3:47: error: unknown variable 'alpah' in expression (did you mean 'alpha'?)"},
        {"rewrite: a\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: leaky_relu, inputs: [x], "
         "attrs: { alhpa: 0.1 } }\n",
         "extra.yaml:4:50: error: unknown attribute 'alhpa' (did you mean 'alpha'?)"},
        {"rewrite: silu\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: silu, inputs: [x] }\n"
         "---\nrewrite: silu\nmatch:\n  - s: { op: sigmoid, inputs: [x] }\nreplace: { op: silu, inputs: [x] }\n",
         "extra.yaml:6:1: error: duplicate rewrite 'silu' (first defined at "},
    };
    /* one at a time: the message and its location */
    fg_buf all = {0};
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        char *dir = rules_dir_with(cases[i].text);
        fg_context *ctx = ctx_for(dir, FG_ERR_INPUT);
        if (!tu_has_error(ctx, cases[i].want))
            fail_msg("case %zu: no error containing: %s", i, cases[i].want);
        if (fg_context_error_count(ctx) != 1) {   /* no follow-on errors */
            tu_dump_errors(ctx);
            fail_msg("case %zu: %d errors", i, fg_context_error_count(ctx));
        }
        assert_int_equal(ctx->nrewrites, i + 1 == FG_COUNTOF(cases) ? 1 : 0);
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
        if (i + 1 < FG_COUNTOF(cases))
            fg_buf_printf(&all, "%s---\n", cases[i].text);
    }
    /* all in one file: every error is reported */
    char *dir = rules_dir_with(all.s);
    fg_context *ctx = ctx_for(dir, FG_ERR_INPUT);
    assert_int_equal(fg_context_error_count(ctx), (int)FG_COUNTOF(cases) - 1);
    assert_int_equal(ctx->nrewrites, 0);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
    fg_buf_free(&all);
}

/* Planning twice gives the same rewrites and groups. */
static void test_deterministic(void **state)
{
    (void)state;
    fg_graph *g = parse_nodes(g_ctx, PW("mm", "matmul", "a, m") PW("fc", "add", "mb, mm") ERF_DIV("fc") TAIL_C("fc")
                                         PW("sg", "sigmoid", "y") PW("o", "mul", "y, sg") "outputs: [o]\n");
    fg_plan *p1 = plan_of(g_ctx, g), *p2 = plan_of(g_ctx, g);
    assert_int_equal(p1->nnotes, p2->nnotes);
    assert_int_equal(rewrite_notes(p1, NULL), 2);   /* gelu, then silu on its output */
    for (int i = 0; i < p1->nnotes; i++)
        assert_string_equal(p1->notes[i], p2->notes[i]);
    assert_string_equal(tu_group_desc(g_ctx, p1, "mm"), "matmul_bias_act:mm,fc,y");
    fg_plan_free(p1);
    fg_plan_free(p2);
    fg_graph_free(g);
}

/* The built-in attention_scores_fp32 (codegen/rewrite_attn_cast.c): fp16
 * scores cast to fp32 before an fp32 mask, the softmax and P V by a cast
 * V.  Q and K are cast instead; the chain, all fp32, is one attention
 * kernel (with the three casts: 4).  It computes what the unrewritten graph
 * does, but for the scores' rounding to fp16.  Left alone: the cast scores
 * also a graph output, no softmax before P V, the softmax read twice. */
#define ATTN_HEAD                                                                                                   \
    "graph: attn\nseed: 9\n"                                                                                        \
    "inputs: [ { name: q, shape: [2, 3, 6, 8], dtype: fp16 }, { name: kt, shape: [2, 3, 8, 6], dtype: fp16 },\n"   \
    "          { name: v, shape: [2, 3, 6, 8], dtype: fp16 } ]\n"                                                   \
    "weights: [ { name: mask, shape: [1, 1, 6, 6] } ]\nnodes:\n" PW("s", "matmul", "q, kt")                         \
        PWA("c", "cast", "s", "to: fp32") PW("a", "add", "c, mask") PWA("cv", "cast", "v", "to: fp32")
static void test_attention_scores_cast(void **state)
{
    (void)state;
    static const char *const fire = ATTN_HEAD PWA("sm", "softmax", "a", "axis: 3") PW("nz", "nan_to_zero", "sm")
        PW("y", "matmul", "nz, cv") "outputs: [y]\n";
    static const char *const keep[] = {
        ATTN_HEAD PWA("sm", "softmax", "a", "axis: 3") PW("y", "matmul", "sm, cv") "outputs: [y, c]\n",
        ATTN_HEAD PW("sm", "tanh", "a") PW("y", "matmul", "sm, cv") "outputs: [y]\n",
        ATTN_HEAD PWA("sm", "softmax", "a", "axis: 3") PW("y", "matmul", "sm, cv") PW("z", "sigmoid", "sm")
            "outputs: [y, z]\n",
    };
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(g_ctx, "attn.yaml", fire, strlen(fire), &g), FG_OK);
    fg_plan *p = plan_of(g_ctx, g);
    assert_int_equal(rewrite_notes(p, "attention_scores_fp32"), 1);
    assert_int_equal(p->graph->nnodes, g->nnodes + 1);   /* two casts in, one out */
    int s = fg_graph_find_node(p->graph, "s");
    assert_true(s >= 0);
    assert_int_equal(p->graph->tensors[p->graph->nodes[s].output].dtype, FG_DTYPE_F32);
    assert_string_equal(tu_group_desc(g_ctx, p, "s"), "attention:s,a,sm,nz,y");
    assert_int_equal(p->ngroups, 4);
    check_numerics(g_ctx, g, p, 4, 5e-3);
    fg_plan_free(p);
    fg_graph_free(g);
    for (size_t i = 0; i < FG_COUNTOF(keep); i++) {
        g = NULL;
        assert_int_equal(fg_graph_parse(g_ctx, "attn.yaml", keep[i], strlen(keep[i]), &g), FG_OK);
        p = plan_of(g_ctx, g);
        if (rewrite_notes(p, "attention_scores_fp32") != 0)
            fail_msg("case %zu: attention_scores_fp32 fired", i);
        assert_int_equal(p->graph->nnodes, g->nnodes);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_rewrites_fire), cmocka_unit_test(test_explain_line),
        cmocka_unit_test(test_rewrite_then_fuse),     cmocka_unit_test(test_must_not_fire),
        cmocka_unit_test(test_broadcast_refused),     cmocka_unit_test(test_user_rewrites),
        cmocka_unit_test(test_rewrite_bound),         cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_deterministic),         cmocka_unit_test(test_attention_scores_cast),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
