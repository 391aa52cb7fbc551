/*
 * test_capability.c -- capability before commitment (issue: valid input
 * never fails after planning).  Long pointwise chains and chains of
 * many-input ops are split by the planner where a template's limits would
 * be exceeded; a gemm takes every documented bias shape; a rules directory
 * registers a second conv2d template that the planner chooses by
 * capability, with --explain giving the reasons and a Lua `select` hook
 * overriding the choice.  Every plan is emitted, run in emulation and
 * compared with the host reference of the unfused graph.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "plan.h"
#include "testutil.h"

static fg_graph *parse(fg_context *ctx, const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", yaml, strlen(yaml), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static fg_plan *plan(fg_context *ctx, const fg_graph *g)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return p;
}

/* Emits every group (must succeed), compiles for emulation and compares
 * with the reference of the unfused graph. */
static void run_and_compare(fg_context *ctx, const fg_graph *g, const fg_plan *p, double tol)
{
    for (int k = 0; k < p->ngroups; k++) {
        fg_kernel K;
        fg_status st = fg_emit_group(ctx, p, k, NULL, &K);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        fg_kernel_free(&K);
    }
    fg_exec *e = tu_compile_emu(ctx, p);
    tu_exec_vs_reference(ctx, g, e, 1234, tol);
    fg_exec_free(e);
}

static int has_note(const fg_plan *p, const char *needle)
{
    for (int i = 0; i < p->nnotes; i++)
        if (strstr(p->notes[i], needle))
            return 1;
    fprintf(stderr, "no note contains: %s\n", needle);
    for (int i = 0; i < p->nnotes; i++)
        fprintf(stderr, "  %s\n", p->notes[i]);
    return 0;
}

/* ---- long relu chains --------------------------------------------------- */

static void relu_chain(int n)
{
    fg_context *ctx = tu_ctx_shipped();
    fg_buf y = {0};
    fg_buf_put(&y, "graph: chain\nseed: 3\ninputs:\n  - { name: x, shape: [2, 3, 5, 7] }\nnodes:\n");
    for (int i = 0; i < n; i++)
        fg_buf_printf(&y, "  - { name: r%d, op: relu, inputs: [%s%d] }\n", i, i ? "r" : "x", i ? i - 1 : 0);
    fg_buf_printf(&y, "outputs: [r%d]\n", n - 1);
    /* the first node reads x, not "x0" */
    char *s = y.s, *at = strstr(s, "[x0]");
    memmove(at + 2, at + 3, strlen(at + 3) + 1);
    fg_graph *g = parse(ctx, s);
    fg_plan *p = plan(ctx, g);
    int covered = 0;
    for (int i = 0; i < p->ngroups; i++) {
        assert_true(p->groups[i].nnodes <= FG_MAX_EPILOGUE);
        assert_string_equal(p->groups[i].template_name, "pointwise");
        covered += p->groups[i].nnodes;
    }
    assert_int_equal(covered, n);
    assert_int_equal(p->ngroups, (n + FG_MAX_EPILOGUE - 1) / FG_MAX_EPILOGUE);
    assert_true(has_note(p, "epilogue stages (at most 12)"));
    run_and_compare(ctx, g, p, 1e-6);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_buf_free(&y);
    fg_context_free(ctx);
}

static void test_relu_chain_13(void **state) { (void)state; relu_chain(13); }
static void test_relu_chain_16(void **state) { (void)state; relu_chain(16); }
static void test_relu_chain_40(void **state) { (void)state; relu_chain(40); }

/* ---- ten chained ops with five inputs each ------------------------------------ */

static void test_five_input_chain(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    char *dir = tu_tmpdir();
    free(tu_write(dir, "mix.yaml", "op: mix5\nkind: pointwise\ninputs: [x, a, b, c, d]\n"
                                   "expr: \"x * 0.5 + a * b - c * d\"\n"));
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_buf y = {0};
    fg_buf_put(&y, "graph: mix\nseed: 5\ninputs:\n  - { name: x, shape: [2, 4, 3, 3] }\nweights:\n");
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 4; j++)
            fg_buf_printf(&y, "  - { name: w%d_%d, shape: [2, 4, 3, 3] }\n", i, j);
    fg_buf_put(&y, "nodes:\n");
    for (int i = 0; i < 10; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "m%d" : "x", i - 1);
        fg_buf_printf(&y, "  - { name: m%d, op: mix5, inputs: [%s, w%d_0, w%d_1, w%d_2, w%d_3] }\n", i, prev, i, i, i,
                      i);
    }
    fg_buf_put(&y, "outputs: [m9]\n");
    fg_graph *g = parse(ctx, y.s);
    fg_plan *p = plan(ctx, g);
    /* x + 4 weights per op + the output: at most 7 ops fit 32 tensors */
    assert_int_equal(p->ngroups, 2);
    assert_int_equal(p->groups[0].nnodes, 7);
    assert_int_equal(p->groups[1].nnodes, 3);
    assert_true(has_note(p, "tensor parameters (at most 32)"));
    run_and_compare(ctx, g, p, 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_buf_free(&y);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* ---- gemm bias shapes --------------------------------------------------------- */

static void gemm_bias(const char *dtype, const char *bias_shape, const char *act)
{
    fg_context *ctx = tu_ctx_shipped();
    char y[1024];
    snprintf(y, sizeof y,
             "graph: gb\nseed: 9\ndtype: %s\ninputs:\n  - { name: a, shape: [5, 7] }\n"
             "weights:\n  - { name: b, shape: [7, 9] }\n  - { name: bias, shape: %s }\n"
             "nodes:\n  - { name: mm, op: gemm, inputs: [a, b, bias] }\n%s"
             "outputs: [%s]\n",
             dtype, bias_shape, act ? "  - { name: act, op: relu, inputs: [mm] }\n" : "", act ? "act" : "mm");
    fg_graph *g = parse(ctx, y);
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(p->groups[0].template_name, strcmp(dtype, "fp32") ? "gemm_tc" : "gemv");   /* M 5 */
    run_and_compare(ctx, g, p, strcmp(dtype, "fp32") ? 2e-2 : 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_gemm_bias_shapes(void **state)
{
    (void)state;
    static const char *const shapes[] = {"[9]", "[1, 9]", "[5, 1]", "[5, 9]"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        gemm_bias("fp32", shapes[i], NULL);
        gemm_bias("fp32", shapes[i], "relu");
        gemm_bias("bf16", shapes[i], NULL);
    }
}

/* ---- a registered conv2d template, chosen by capability ------------------------ */

static const char *const C8_RULES =
    "template: conv2d_c8\n"
    "base: conv2d\n"
    "where: \"floor(C / 8) * 8 == C\"\n"
    "priority: 5\n"
    "---\n"
    "rule: conv_relu\n"
    "match:\n"
    "  - conv: { op: conv2d }\n"
    "  - act:  { op: relu }\n"
    "kernel:\n"
    "  template: conv2d\n"
    "  epilogue:\n"
    "    - bias: conv.bias\n"
    "    - apply: act\n";

static const char *const CONV_GRAPH =
    "graph: c\nseed: 11\ninputs:\n  - { name: x, shape: [1, %d, 6, 5] }\n"
    "weights:\n  - { name: w, shape: [6, %d, 3, 3] }\n  - { name: bias, shape: [6] }\n"
    "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w, bias], attrs: { padding: [1, 1] } }\n"
    "  - { name: act, op: relu, inputs: [conv] }\noutputs: [act]\n";

static char *explain(const fg_context *ctx, const fg_plan *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fg_plan_print_opts o = {1};
    fg_plan_print(ctx, p, &o, f);
    fclose(f);
    return text;
}

static fg_context *ctx_dir(const char *rules, const char *lua, char **dir)
{
    *dir = tu_vocab_dir();
    free(tu_write(*dir, "rules.yaml", rules));
    if (lua)
        free(tu_write(*dir, "sel.lua", lua));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, *dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

static void test_registered_template(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_dir(C8_RULES, NULL, &dir);
    char y[1024];
    /* C = 16: the variant accepts and outranks the direct template */
    snprintf(y, sizeof y, CONV_GRAPH, 16, 16);
    fg_graph *g = parse(ctx, y);
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(p->groups[0].template_name, "conv2d_c8");
    char *text = explain(ctx, p);
    assert_non_null(strstr(text, "conv2d_c8 chosen (priority 5); conv2d accepted (priority 0)"));
    assert_non_null(strstr(text, "conv2d_depthwise refused: not depthwise"));
    free(text);
    fg_kernel K;
    assert_int_equal(fg_emit_group(ctx, p, 0, NULL, &K), FG_OK);
    assert_non_null(strstr(K.source, "//   template:  conv2d_c8 (conv2d.cuh)"));
    fg_kernel_free(&K);
    run_and_compare(ctx, g, p, 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    /* C = 12: refused by its constraint, the direct template runs it */
    snprintf(y, sizeof y, CONV_GRAPH, 12, 12);
    g = parse(ctx, y);
    p = plan(ctx, g);
    assert_string_equal(p->groups[0].template_name, "conv2d");
    text = explain(ctx, p);
    assert_non_null(strstr(text, "conv2d_c8 refused: where \"floor(C / 8) * 8 == C\" is false"));
    free(text);
    run_and_compare(ctx, g, p, 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_select_hook(void **state)
{
    (void)state;
    char rules[2048], *dir;
    snprintf(rules, sizeof rules, "%s", C8_RULES);
    char *at = strstr(rules, "rule: conv_relu\n");
    memmove(at + strlen("hooks: sel.lua\n"), at, strlen(at) + 1);
    memcpy(at, "hooks: sel.lua\n", strlen("hooks: sel.lua\n"));
    at = strstr(rules, "  template: conv2d\n") + strlen("  template: conv2d\n");
    memmove(at + strlen("  select: pick\n"), at, strlen(at) + 1);
    memcpy(at, "  select: pick\n", strlen("  select: pick\n"));
    fg_context *ctx = ctx_dir(rules,
                              "function pick(group, names)\n"
                              "  for _, n in ipairs(names) do if n == 'conv2d' then return n end end\n"
                              "  return names[1]\n"
                              "end\n"
                              "function bad(group, names) return 'gemm' end\n",
                              &dir);
    char y[1024];
    snprintf(y, sizeof y, CONV_GRAPH, 16, 16);
    fg_graph *g = parse(ctx, y);
    fg_plan *p = plan(ctx, g);
    assert_string_equal(p->groups[0].template_name, "conv2d");
    char *text = explain(ctx, p);
    assert_non_null(strstr(text, "conv2d_c8 chosen (priority 5)"));
    assert_non_null(strstr(text, "hook pick picked conv2d"));
    free(text);
    run_and_compare(ctx, g, p, 1e-5);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);

    /* a hook that names a template it was not offered: a located hook error */
    char *bad = strstr(rules, "select: pick");
    memcpy(bad, "select: bad ", strlen("select: bad "));
    ctx = ctx_dir(rules, "function bad(group, names) return 'gemm' end\n", &dir);
    g = parse(ctx, y);
    fg_plan *q = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &q), FG_ERR_HOOK);
    assert_null(q);
    assert_true(tu_has_error(ctx, "sel.lua:1"));
    assert_true(tu_has_error(ctx, "returned 'gemm', which is not among the templates offered (conv2d, conv2d_c8)"));
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* A bad template document: unknown base, a where over unknown variables. */
static void test_bad_template_doc(void **state)
{
    (void)state;
    char *dir = tu_vocab_dir();
    free(tu_write(dir, "t.yaml", "template: t1\nbase: conv3d\n---\ntemplate: t2\nbase: conv2d\nwhere: \"Q > 1\"\n"
                                 "---\ntemplate: conv2d\nbase: conv2d\n"));
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "t.yaml:2:7: error: unknown base template 'conv3d' (did you mean 'conv2d'?)"));
    assert_true(tu_has_error(ctx, "t.yaml:6:"));
    assert_true(tu_has_error(ctx, "template 'conv2d' is already defined"));
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* A lone node that no template can run is an error at plan time, located. */
static void test_no_template_is_plan_error(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    const char *y = "graph: big\nseed: 1\ninputs:\n  - { name: x, shape: [1, 1, 64, 64] }\n"
                    "weights:\n  - { name: w, shape: [8, 1, 40, 40] }\n"
                    "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w] }\noutputs: [conv]\n";
    fg_graph *g = parse(ctx, y);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_UNSUPPORTED);
    assert_null(p);
    assert_true(tu_has_error(ctx, "g.yaml:8:"));
    assert_true(tu_has_error(ctx, "conv2d refused: a 40x40 kernel does not fit the shared weight tile"));
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* A rule may name one template of a family: gemm_tc refuses exact fp32, so the
 * matmul runs alone (the family's default) and the note says why. */
static void test_rule_names_one_template(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_dir("rule: mm_relu_tc\nmatch:\n  - mm: { kind: matmul }\n  - act: { op: relu }\n"
                              "kernel:\n  template: gemm_tc\n  epilogue:\n    - apply: act\n",
                              NULL, &dir);
    const char *y = "graph: m\nseed: 2\ninputs:\n  - { name: a, shape: [4, 8] }\nweights:\n  - { name: b, shape: [8, 8] }\n"
                    "nodes:\n  - { name: mm, op: matmul, inputs: [a, b] }\n  - { name: act, op: relu, inputs: [mm] }\n"
                    "outputs: [act]\n";
    fg_graph *g = parse(ctx, y);
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 2);
    assert_string_equal(tu_group_desc(ctx, p, "mm"), "-:mm");
    assert_true(has_note(p, "act not fused into mm (rule mm_relu_tc"));
    assert_true(has_note(p, "gemm_tc refused: fp32 with precision exact (fp32 runs on tensor cores only with "
                            "precision tf32)"));
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* Sizes are bounded after inference, not only for graph inputs: an output
 * of 7.2e9 elements is refused with the node's location at load time (never
 * an allocation later), and a padding whose arithmetic overflows int64 too. */
static void test_inferred_size_bounds(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char *const pads[] = {"30000, 30000", "4611686018427387903, 1"};
    for (int i = 0; i < 2; i++) {
        char y[1024];
        snprintf(y, sizeof y,
                 "graph: pad\nseed: 1\ninputs:\n  - { name: x, shape: [1, 2, 4, 4] }\n"
                 "weights:\n  - { name: w, shape: [2, 2, 3, 3] }\n"
                 "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [%s] } }\n"
                 "outputs: [conv]\n", pads[i]);
        fg_graph *g = NULL;
        assert_int_equal(fg_graph_parse(ctx, "g.yaml", y, strlen(y), &g), FG_ERR_INPUT);
        assert_null(g);
        assert_true(tu_has_error(ctx, "g.yaml:8:5:"));
        assert_true(tu_has_error(ctx, i == 0 ? "elements (or an empty axis)" : "too large to handle"));
        fg_context_clear_errors(ctx);
    }
    /* an input listed as an output */
    const char *y = "graph: io\nseed: 1\ninputs:\n  - { name: x, shape: [4] }\n"
                    "nodes:\n  - { name: r, op: relu, inputs: [x] }\noutputs: [r, x]\n";
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", y, strlen(y), &g), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "g.yaml:7:14: error: output 'x' is a graph input; outputs are produced by nodes"));
    fg_context_free(ctx);
}

/* A batch norm whose var + eps is not positive is an error at the node; a
 * weight holding NaN plans with a warning naming it. */
static void test_bad_weights(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    const char *fmt = "graph: bn\nseed: 1\ninputs:\n  - { name: x, shape: [1, 2, 3, 3] }\n"
                      "weights:\n  - { name: g, shape: [2], values: [1, %s] }\n  - { name: b, shape: [2] }\n"
                      "  - { name: m, shape: [2] }\n  - { name: v, shape: [2], values: [1, %s] }\n"
                      "nodes:\n  - { name: bn, op: batch_norm, inputs: [x, g, b, m, v] }\noutputs: [bn]\n";
    char y[1024];
    snprintf(y, sizeof y, fmt, "1", "-2");
    fg_graph *g = parse(ctx, y);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_INPUT);
    assert_null(p);
    assert_true(tu_has_error(ctx, "g.yaml:11:5: error: batch_norm 'bn': var 'v' is -2 at channel 1; var + eps must "
                                  "be positive"));
    fg_graph_free(g);
    fg_context_clear_errors(ctx);
    snprintf(y, sizeof y, fmt, ".nan", "2");
    g = parse(ctx, y);
    p = plan(ctx, g);
    int warned = 0;
    for (int i = 0; i < ctx->nwarnings; i++)
        warned |= strstr(ctx->warnings[i], "weight 'g' has 1 non-finite value (the first at index 1)") != NULL;
    assert_true(warned);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu_chain_13),     cmocka_unit_test(test_relu_chain_16),
        cmocka_unit_test(test_relu_chain_40),     cmocka_unit_test(test_five_input_chain),
        cmocka_unit_test(test_gemm_bias_shapes),  cmocka_unit_test(test_registered_template),
        cmocka_unit_test(test_select_hook),       cmocka_unit_test(test_bad_template_doc),
        cmocka_unit_test(test_no_template_is_plan_error), cmocka_unit_test(test_rule_names_one_template),
        cmocka_unit_test(test_inferred_size_bounds),     cmocka_unit_test(test_bad_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
