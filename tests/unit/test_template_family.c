/*
 * test_template_family.c -- a template family from one file and its .cuh:
 * this file declares the family `streamed` (a template for element-wise
 * groups, its check, --explain text, tile key and emitter) and
 * test_template_family.cuh its kernel text, registers the family with a
 * context (fg_template_family_register), and plans, emits and runs a graph
 * with it in emulation against the host reference.  No other source file
 * knows the family.  The registry's own checks of a family (a taken name, a
 * row without an emitter) and of a hook's tile value against the declared
 * range are covered too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_impl.h"
#include "plan.h"
#include "template.h"
#include "testutil.h"

/* ---- the family ----------------------------------------------------------------- */

/* Refuses groups of more than 3 nodes (a constraint of the family's own). */
static int check_streamed(const fg_tcand *c, char *why, size_t whysz)
{
    if (c->nnodes > 3) {
        snprintf(why, whysz, "%d nodes (streamed takes at most 3)", c->nnodes);
        return 0;
    }
    return 1;
}

static void describe_streamed(const fg_tcand *c, char *buf, size_t size)
{
    snprintf(buf, size, "one loop over %d node(s)", c->nnodes);
}

/* Renders streamed.cuh: the main node's loads and op at each output
 * element's coordinates, a grid-stride launch of `threads` per block. */
static fg_status emit_streamed(fg_emitter *em)
{
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    int64_t threads, numel = fg_em_numel(em, em->out);
    fg_status st = fg_em_threads(em, 128, &threads);
    if (st != FG_OK)
        return st;
    fg_buf coord = {0}, loads = {0}, expr = {0}, args = {0};
    fg_em_decompose(em, em->out, "i", coords, 2, &coord);
    st = fg_em_apply(em, em->main_node, NULL, coords, 2, &loads, &expr);
    for (int d = 0; d < rank; d++)
        fg_buf_printf(&args, "%s%s", d ? ", " : "", coords[d]);
    if (st == FG_OK) {
        if (coord.len)
            coord.s[--coord.len] = 0;
        if (loads.len)
            loads.s[--loads.len] = 0;
        fg_em_shape(em, "NUMEL", numel);
        fg_em_set(em, "COORDS", "%s", coord.s ? coord.s : "");
        fg_em_set(em, "LOADS", "%s", loads.s ? loads.s : "");
        fg_em_set(em, "VALUE", "%s", expr.s);
        fg_em_set(em, "Y", "%s", fg_em_tensor(em, em->out, 1));
        fg_em_set(em, "COORD_ARGS", "%s", args.s);
        em->template_file = "streamed.cuh";
        fg_em_launch_1d(em, numel, threads);
    }
    fg_buf_free(&coord);
    fg_buf_free(&loads);
    fg_buf_free(&expr);
    fg_buf_free(&args);
    return st;
}

/* The kernel text: test_template_family.cuh, read when the test starts. */
static fg_template_source sources[] = {{.name = "streamed.cuh"}, {0}};

static const fg_tile_key tiles[] = {{.name = "threads", .min = 64, .max = 512, .step = 64}, {0}};

static const fg_template rows[] = {
    {.name = "streamed", .family = "streamed", FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_POINTWISE,
     .dtypes = 1u << FG_DTYPE_F32, .tiles = tiles, .check = check_streamed, .describe = describe_streamed,
     .emit = emit_streamed, .sources = sources, .summary = "a test's element-wise loop"},
};
static const fg_template_family streamed = {.name = "streamed", .templates = rows, .ntemplates = 1};

/* ---- the test ------------------------------------------------------------------- */

static const char *const RULES =
    "rule: add_act\n"
    "hooks: tiles.lua\n"
    "match:\n"
    "  - add: { op: add }\n"
    "  - act: { op: relu }\n"
    "kernel:\n"
    "  template: streamed\n"
    "  params: tiles\n"
    "  epilogue:\n"
    "    - apply: act\n";

static const char *const GRAPH =
    "graph: streamed\n"
    "dtype: fp32\n"
    "inputs: [{ name: x, shape: [3, 5, 7] }, { name: b, shape: [7] }]\n"
    "nodes:\n"
    "  - { name: s, op: add, inputs: [x, b] }\n"
    "  - { name: y, op: relu, inputs: [s] }\n"
    "outputs: [y]\n";

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* A context with the family registered and RULES loaded; hook: the body of
 * the tile hook `tiles`. */
static fg_context *ctx_with_family(const char *hook, char **dir)
{
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_template_family_register(ctx, &streamed), FG_OK);
    *dir = tu_vocab_dir();
    free(tu_write(*dir, "rules.yaml", RULES));
    char lua[256];
    snprintf(lua, sizeof lua, "function tiles(group)\n  %s\nend\n", hook);
    free(tu_write(*dir, "tiles.lua", lua));
    fg_status st = fg_rules_load(ctx, *dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

static fg_graph *parse(fg_context *ctx)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", GRAPH, strlen(GRAPH), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* The family is planned, emitted from its own .cuh and run in emulation. */
static void test_plan_emit_run(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_with_family("return { threads = 64 }", &dir);
    fg_graph *g = parse(ctx);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(p->groups[0].template_name, "streamed");
    assert_non_null(strstr(p->groups[0].choice, "streamed chosen"));
    assert_non_null(strstr(p->groups[0].choice, "streamed: one loop over 2 node(s)"));

    fg_kernel k;
    fg_status st = fg_emit_group(ctx, p, 0, NULL, &k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_non_null(strstr(k.source, "template streamed.cuh: a template family registered by a test"));
    assert_non_null(strstr(k.source, "template:  streamed (streamed.cuh)"));
    assert_int_equal(k.block[0], 64);
    fg_kernel_free(&k);

    fg_exec *e = tu_compile_emu(ctx, p);
    tu_exec_vs_reference(ctx, g, e, 99, 1e-6);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* A hook's value outside the family's declared range is a located error of
 * the planner (hooks run at plan time). */
static void test_tile_range(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_with_family("return { threads = 96 }", &dir);
    fg_graph *g = parse(ctx);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_HOOK);
    assert_null(p);
    assert_true(tu_has_error(ctx, "rules.yaml:1:1: error: tile hook: threads = 96 (want a multiple of 64 in 64..512) "
                                  "(kernel for s, rule 'add_act')"));
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* A family whose names are taken, or whose row has no emitter, is refused;
 * the registered template is listed after the built-ins. */
static void test_register_errors(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    int builtins = fg_template_count(ctx);
    assert_int_equal(fg_template_family_register(ctx, &streamed), FG_OK);
    assert_int_equal(fg_template_count(ctx), builtins + 1);
    assert_string_equal(fg_template_at(ctx, builtins)->name, "streamed");
    assert_int_equal(fg_template_family_register(ctx, &streamed), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "template family streamed: template 'streamed' is already defined"));
    fg_template bad = rows[0];
    bad.name = "gemm";
    fg_template_family taken = {.name = "taken", .templates = &bad, .ntemplates = 1};
    assert_int_equal(fg_template_family_register(ctx, &taken), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "template 'gemm' is already defined"));
    bad.name = "mute";
    bad.emit = NULL;
    fg_template_family mute = {.name = "mute", .templates = &bad, .ntemplates = 1};
    assert_int_equal(fg_template_family_register(ctx, &mute), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "lacks a name, family, kinds, dtypes, layouts or emitter"));
    assert_int_equal(fg_template_count(ctx), builtins + 1);
    fg_context_free(ctx);
}

int main(void)
{
    char *text = read_text(tu_src("tests/unit/test_template_family.cuh"));
    sources[0].text = text;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_emit_run),
        cmocka_unit_test(test_tile_range),
        cmocka_unit_test(test_register_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(text);
    return rc;
}
