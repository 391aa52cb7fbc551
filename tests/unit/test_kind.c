/* test_kind.c -- the op-kind table (codegen/kind.h):
 *
 *  - every row is complete and consistent (a name the table finds again,
 *    input counts, shape inference, capability variables, a template
 *    family with a built-in template that computes the kind, traits that
 *    agree with the role, a default reduction among the allowed ones);
 *  - the kind sets and their texts, which the loaders' messages use;
 *  - the allowed `reduce:` values at op-definition load: pool kinds take
 *    max or avg, global_pool defaults to avg;
 *  - FLOPs per node of each kind that counts them, on a small graph.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kind.h"
#include "template.h"
#include "testutil.h"

#define K(k) (1u << (k))

static void test_rows_complete(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    for (int k = 0; k < FG_OPK_COUNT; k++) {
        const fg_kind_info *ki = fg_kind((fg_op_kind)k);
        assert_non_null(ki->name);
        assert_int_equal(fg_kind_find(ki->name), k);
        assert_string_equal(fg_op_kind_name((fg_op_kind)k), ki->name);
        assert_true(ki->min_inputs >= 1 && ki->min_inputs <= ki->max_inputs && ki->max_inputs <= FG_MAX_INPUTS);
        assert_non_null(ki->inputs_form);
        assert_true((unsigned)ki->role < FG_ROLE_COUNT);
        assert_non_null(ki->infer);
        assert_true(ki->var_names && ki->vars);
        assert_true(fg_kind_nvars((fg_op_kind)k) >= 1 && fg_kind_nvars((fg_op_kind)k) <= FG_KIND_MAX_VARS);
        assert_int_equal(fg_kind_var((fg_op_kind)k, ki->var_names[0]), 0);
        /* a lone node of the kind runs on its family */
        const fg_template *cands[32];
        assert_non_null(ki->family);
        assert_true(fg_template_candidates(ctx, ki->family, (fg_op_kind)k, cands, 32) > 0);
        /* expressions and repeat chains are epilogue stages; permutations re-index */
        if (ki->traits & (FG_KIND_EXPR | FG_KIND_REPEAT))
            assert_int_equal(ki->role, FG_ROLE_ELEMENTWISE);
        if (ki->traits & FG_KIND_PERMUTATION)
            assert_int_equal(ki->role, FG_ROLE_RESHAPE);
        if (ki->reduce_default) {
            assert_non_null(ki->reductions);
            assert_true(fg_kind_reduction_ok((fg_op_kind)k, ki->reduce_default));
        }
        assert_int_equal(ki->mode_attr != NULL, ki->mode_refused != NULL);
    }
    assert_int_equal(fg_kind_find("pointwize"), -1);
    fg_context_free(ctx);
}

static void test_sets_and_texts(void **state)
{
    (void)state;
    char b[256];
    assert_int_equal(fg_kinds_of_role(FG_ROLE_ELEMENTWISE), K(FG_OPK_POINTWISE) | K(FG_OPK_BATCH_NORM));
    assert_string_equal(fg_kinds_text(fg_kinds_of_role(FG_ROLE_ELEMENTWISE), " or ", b, sizeof b),
                        "pointwise or batch_norm");
    assert_int_equal(fg_kinds_with(FG_KIND_PERMUTATION), K(FG_OPK_RESHAPE) | K(FG_OPK_TRANSPOSE));
    assert_int_equal(fg_kinds_with(FG_KIND_REPEAT), K(FG_OPK_POINTWISE));
    assert_string_equal(fg_kinds_text(fg_kinds_with(FG_KIND_REPEAT), " and ", b, sizeof b), "pointwise");
    assert_string_equal(fg_kinds_text(fg_kinds_reducing(), " and ", b, sizeof b), "pool2d, global_pool and reduce");
    assert_string_equal(fg_kinds_text(0, " or ", b, sizeof b), "");
    assert_int_equal(fg_kinds_with(0), (1u << FG_OPK_COUNT) - 1);
    /* a buffer too small keeps a terminated prefix */
    char small[8];
    assert_string_equal(fg_kinds_text(fg_kinds_reducing(), " and ", small, sizeof small), "pool2d,");
    assert_string_equal(fg_kind_reductions_text(FG_OPK_POOL2D, b, sizeof b), "max or avg");
    assert_string_equal(fg_kind_reductions_text(FG_OPK_REDUCE, b, sizeof b),
                        "one of sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp, argmax, argmin, argmax_last, argmin_last");
    assert_true(fg_kind_reduction_ok(FG_OPK_REDUCE, "log_sum_exp"));
    assert_false(fg_kind_reduction_ok(FG_OPK_POOL2D, "sum"));
    assert_false(fg_kind_reduction_ok(FG_OPK_CONV2D, "max"));
}

/* Loads one op-definition file; returns the context (errors recorded). */
static fg_context *load_ops(const char *text, fg_status want)
{
    char *dir = tu_tmpdir();
    free(tu_write(dir, "o.yaml", text));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st != want)
        tu_dump_errors(ctx);
    assert_int_equal(st, want);
    tu_rmtree(dir);
    free(dir);
    return ctx;
}

static void test_reductions_at_load(void **state)
{
    (void)state;
    fg_context *ctx = load_ops("{ op: gap, kind: global_pool }\n", FG_OK);
    assert_string_equal(fg_ctx_find_op(ctx, "gap")->reduce, "avg");
    fg_context_free(ctx);
    ctx = load_ops("op: mp\nkind: pool2d\n", FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "o.yaml:1:1: error: pool2d op 'mp' has no `reduce` (max or avg)"));
    fg_context_free(ctx);
    ctx = load_ops("op: mp\nkind: global_pool\nreduce: sum\n", FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "o.yaml:3:9: error: reduce must be max or avg, got 'sum'"));
    fg_context_free(ctx);
    ctx = load_ops("op: c\nkind: conv2d\ninputs: [x, w]\nexpr: x\n", FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "o.yaml:4:1: error: `expr` is only for pointwise and batch_norm ops"));
    fg_context_free(ctx);
}

static const char *const GRAPH =
    "graph: flops\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 4, 8, 8] }\n"
    "  - { name: a, shape: [5, 7] }\n"
    "weights:\n"
    "  - { name: w, shape: [6, 4, 3, 3] }\n"
    "  - { name: b, shape: [7, 3] }\n"
    "  - { name: p, shape: [6], init: ones }\n"
    "nodes:\n"
    "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [c, p, p, p, p] }\n"
    "  - { name: r, op: relu, inputs: [bn] }\n"
    "  - { name: mp, op: max_pool2d, inputs: [r], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
    "  - { name: gp, op: global_avg_pool, inputs: [mp] }\n"
    "  - { name: t, op: transpose, inputs: [mp], attrs: { perm: [0, 2, 3, 1] } }\n"
    "  - { name: mm, op: matmul, inputs: [a, b] }\n"
    "outputs: [gp, t, mm]\n";

/* FLOPs of node name of g by its kind's row; -1 when the kind counts none. */
static double node_flops(const fg_graph *g, const char *name)
{
    const fg_node *n = &g->nodes[fg_graph_find_node(g, name)];
    const fg_kind_info *ki = fg_kind(n->op->kind);
    return ki->flops ? ki->flops(g, n) : -1;
}

static void test_flops(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", GRAPH, strlen(GRAPH), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    /* conv: 2 x out (1*6*8*8) x C*R*S (4*3*3) */
    assert_true(node_flops(g, "c") == 2.0 * 384 * 36);
    assert_true(node_flops(g, "bn") == 2.0 * 384);
    assert_true(node_flops(g, "r") == 384);
    /* pool: out (1*6*4*4) x taps (2*2); global pool: its input's elements */
    assert_true(node_flops(g, "mp") == 96.0 * 4);
    assert_true(node_flops(g, "gp") == 96);
    assert_true(node_flops(g, "mm") == 2.0 * 15 * 7);
    assert_true(node_flops(g, "t") == -1);
    fg_graph_free(g);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_complete),
        cmocka_unit_test(test_sets_and_texts),
        cmocka_unit_test(test_reductions_at_load),
        cmocka_unit_test(test_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
