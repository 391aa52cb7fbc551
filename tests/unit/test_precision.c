/*
 * test_precision.c -- the graph precision setting (fusegen.h fg_precision):
 * the YAML `precision:` key and its errors, fg_graph_set_precision's
 * argument checks, the plan's --explain text, the generated kernel's header
 * comment (so exact and tf32 kernels never share a cache key), and the
 * `--precision` flag of the command line.
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

static const char *graph_text(const char *precision_line)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "graph: prec\nseed: 3\ndtype: fp32\nlayout: NHWC\n%s"
             "inputs: [{ name: x, shape: [1, 8, 5, 5] }]\n"
             "weights: [{ name: w, shape: [8, 8, 3, 3] }, { name: b, shape: [8] }]\n"
             "nodes:\n"
             "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
             "  - { name: y, op: relu, inputs: [c] }\n"
             "outputs: [y]\n",
             precision_line);
    return buf;
}

static fg_graph *load(fg_context *ctx, const char *precision_line)
{
    const char *t = graph_text(precision_line);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "prec.yaml", t, strlen(t), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static void test_names_and_key(void **state)
{
    (void)state;
    assert_string_equal(fg_precision_name(FG_PRECISION_EXACT), "exact");
    assert_string_equal(fg_precision_name(FG_PRECISION_TF32), "tf32");
    assert_string_equal(fg_precision_name(FG_PRECISION_COUNT), "?");
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = load(ctx, "");
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_EXACT);
    fg_graph_free(g);
    g = load(ctx, "precision: tf32\n");
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_TF32);
    fg_graph_free(g);
    g = load(ctx, "precision: exact\n");
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_EXACT);
    fg_graph_free(g);

    /* a wrong value: located error with a suggestion */
    const char *t = graph_text("precision: tf23\n");
    g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "prec.yaml", t, strlen(t), &g), FG_ERR_INPUT);
    assert_null(g);
    assert_true(tu_has_error(ctx, "prec.yaml:5:"));
    assert_true(tu_has_error(ctx, "tf23"));
    assert_true(tu_has_error(ctx, "tf32"));
    fg_context_free(ctx);
}

static void test_api_checks(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = load(ctx, "");
    assert_int_equal(fg_graph_set_precision(NULL, g, FG_PRECISION_TF32), FG_ERR_INPUT);
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_EXACT);
    assert_int_equal(fg_graph_set_precision(ctx, NULL, FG_PRECISION_TF32), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "graph is NULL"));
    assert_int_equal(fg_graph_set_precision(ctx, g, (fg_precision)7), FG_ERR_INPUT);
    assert_int_equal(fg_graph_set_precision(ctx, g, (fg_precision)-1), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "precision 7 is not an fg_precision"));
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_EXACT);
    assert_int_equal(fg_graph_precision(NULL), FG_PRECISION_EXACT);
    fg_context_clear_errors(ctx);
    assert_int_equal(fg_graph_set_precision(ctx, g, FG_PRECISION_TF32), FG_OK);
    assert_int_equal(fg_graph_precision(g), FG_PRECISION_TF32);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* The plan carries the setting: --explain names it, each kernel's header
 * comment names it, so the sources (and cache keys) of the two differ. */
static void test_plan_and_source(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    char *src[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        fg_graph *g = load(ctx, "");
        if (i)
            assert_int_equal(fg_graph_set_precision(ctx, g, FG_PRECISION_TF32), FG_OK);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
        char *text = NULL;
        assert_int_equal(fg_plan_text(ctx, p, 1, &text), FG_OK);
        assert_non_null(strstr(text, i ? "precision: tf32" : "precision: exact"));
        fg_string_free(text);
        assert_int_equal(fg_plan_text(ctx, p, 0, &text), FG_OK);
        assert_null(strstr(text, "precision:"));   /* only with explain */
        fg_string_free(text);
        fg_kernel k;
        fg_emit_opts eo = {.specialize = 1};
        assert_int_equal(fg_emit_group(ctx, p, 0, &eo, &k), FG_OK);
        assert_non_null(strstr(k.source, i ? "//   precision: tf32\n" : "//   precision: exact\n"));
        src[i] = strdup(k.source);
        fg_kernel_free(&k);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    assert_string_not_equal(src[0], src[1]);
    free(src[0]);
    free(src[1]);
    fg_context_free(ctx);
}

static void test_cli_flag(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *path = tu_write(dir, "g.yaml", graph_text(""));
    const char *bin = getenv("FUSEGEN_BIN");
    assert_non_null(bin);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s plan %s --explain --precision tf32", bin, path);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "precision: tf32"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plan %s --precision=exact --explain", bin, path);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "precision: exact"));
    free(out);
    /* the flag overrides the graph's key */
    char *p2 = tu_write(dir, "g2.yaml", graph_text("precision: tf32\n"));
    snprintf(cmd, sizeof cmd, "%s plan %s --explain", bin, p2);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "precision: tf32"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plan %s --explain --precision exact", bin, p2);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "precision: exact"));
    free(out);
    /* bad values and commands that do not plan: usage errors, exit 2 */
    snprintf(cmd, sizeof cmd, "%s plan %s --precision fp64", bin, path);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "--precision takes exact or tf32, not 'fp64'"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plan %s --precision", bin, path);
    assert_int_equal(tu_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd, "%s rules check %s --precision tf32", bin, dir);
    assert_int_equal(tu_run(cmd, &out), 2);
    assert_non_null(strstr(out, "not 'rules'"));
    free(out);
    free(path);
    free(p2);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_key),
        cmocka_unit_test(test_api_checks),
        cmocka_unit_test(test_plan_and_source),
        cmocka_unit_test(test_cli_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
