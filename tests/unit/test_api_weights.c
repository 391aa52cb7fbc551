/*
 * test_api_weights.c -- fg_graph_set_weight (a weight's values from memory:
 * fp32 copied, fp16 / bf16 kept exactly, a plan built afterwards computes
 * with them) and fg_plan_group_info (rule, file:line, nodes, template,
 * epilogue of each group); both given bad arguments return FG_ERR_INPUT
 * with a message, never crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "reference.h"
#include "testutil.h"

static fg_graph *parse(fg_context *ctx, const char *text)
{
    fg_graph *g = NULL;
    if (fg_graph_parse(ctx, "t.yaml", text, strlen(text), &g) != FG_OK)
        tu_dump_errors(ctx);
    assert_non_null(g);
    return g;
}

/* The call must fail with FG_ERR_INPUT and an error containing needle. */
#define REFUSED(call, needle)                                                                                          \
    do {                                                                                                               \
        fg_context_clear_errors(ctx);                                                                                  \
        assert_int_equal((call), FG_ERR_INPUT);                                                                        \
        if (!tu_has_error(ctx, needle)) {                                                                              \
            tu_dump_errors(ctx);                                                                                       \
            fail_msg("no error containing '%s'", needle);                                                              \
        }                                                                                                              \
    } while (0)

static void test_set_weight(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = parse(ctx, "graph: s\ninputs: [ { name: x, shape: [2, 3] } ]\n"
                             "weights:\n  - { name: w, shape: [3, 2] }\n  - { name: h, shape: [2], dtype: fp16 }\n"
                             "nodes:\n  - { name: mm, op: matmul, inputs: [x, w] }\n"
                             "  - { name: r, op: relu, inputs: [mm] }\n  - { name: hh, op: add, inputs: [h, h] }\n"
                             "outputs: [r, hh]\n");
    const int64_t shape[2] = {3, 2}, hs[1] = {2};
    const float v[6] = {1, 2, 3, 4, NAN, -INFINITY};
    const uint16_t hv[2] = {0x3555, 0x0001};   /* 0.33325195 and the smallest subnormal, exact in fp32 */

    assert_int_equal(fg_graph_set_weight(NULL, g, "w", FG_DTYPE_F32, shape, 2, v), FG_ERR_INPUT);
    REFUSED(fg_graph_set_weight(ctx, NULL, "w", FG_DTYPE_F32, shape, 2, v), "graph is NULL");
    REFUSED(fg_graph_set_weight(ctx, g, NULL, FG_DTYPE_F32, shape, 2, v), "name is NULL");
    REFUSED(fg_graph_set_weight(ctx, g, "w", (fg_dtype)7, shape, 2, v), "dtype 7 is not an fg_dtype");
    REFUSED(fg_graph_set_weight(ctx, g, "w", (fg_dtype)-1, shape, 2, v), "is not an fg_dtype");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, shape, 0, v), "rank 0 is out of range");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, shape, 7, v), "rank 7 is out of range");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, NULL, 2, v), "shape is NULL");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, shape, 2, NULL), "data is NULL");
    REFUSED(fg_graph_set_weight(ctx, g, "ww", FG_DTYPE_F32, shape, 2, v), "has no weight 'ww' (did you mean 'w'?)");
    REFUSED(fg_graph_set_weight(ctx, g, "x", FG_DTYPE_F32, shape, 2, v), "'x' is a graph input, not a weight");
    REFUSED(fg_graph_set_weight(ctx, g, "mm", FG_DTYPE_F32, shape, 2, v), "the output of a node");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, (int64_t[]){2, 3}, 2, v),
            "weight 'w' has shape [3, 2], the data is [2, 3]");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, (int64_t[]){6}, 1, v), "the data is [6]");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, (int64_t[]){3, -2}, 2, v), "dimensions are positive");
    REFUSED(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F16, shape, 2, hv), "weight 'w' is fp32, the data is fp16");

    fg_context_clear_errors(ctx);
    assert_int_equal(fg_graph_set_weight(ctx, g, "w", FG_DTYPE_F32, shape, 2, v), FG_OK);
    assert_int_equal(fg_graph_set_weight(ctx, g, "h", FG_DTYPE_F16, hs, 1, hv), FG_OK);
    const fg_tensor *w = &g->tensors[fg_graph_find_tensor(g, "w")], *h = &g->tensors[fg_graph_find_tensor(g, "h")];
    assert_true(w->data[0] == 1 && w->data[3] == 4 && isnan(w->data[4]) && w->data[5] == -INFINITY);
    assert_true(h->data[0] == 0.33325195f && h->data[1] == 5.9604644775390625e-08f);
    /* a plan built afterwards computes with the new values: x @ w on ones */
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    double **vals = calloc((size_t)g->ntensors, sizeof *vals);
    int xt = fg_graph_find_tensor(g, "x");
    vals[xt] = malloc(6 * sizeof(double));
    for (int i = 0; i < 6; i++)
        vals[xt][i] = 1;
    assert_int_equal(fg_reference_run(ctx, p->graph, vals), FG_OK);
    const double *r = vals[fg_graph_find_tensor(p->graph, "r")];
    /* column 0: 1 + 3 + NaN = NaN (relu keeps it), column 1: 2 + 4 - inf -> relu 0 */
    assert_true(isnan(r[0]) && r[1] == 0);
    fg_reference_free(p->graph, vals);
    free(vals);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_group_info(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = parse(ctx, "graph: gi\ninputs: [ { name: x, shape: [1, 8, 6, 6] } ]\nweights:\n"
                             "  - { name: w, shape: [8, 8, 3, 3] }\n  - { name: bn.g, shape: [8] }\n"
                             "  - { name: bn.b, shape: [8] }\n  - { name: bn.m, shape: [8] }\n"
                             "  - { name: bn.v, shape: [8], init: positive }\n"
                             "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
                             "  - { name: bn, op: batch_norm, inputs: [conv, bn.g, bn.b, bn.m, bn.v] }\n"
                             "  - { name: act, op: relu, inputs: [bn] }\n"
                             "  - { name: pool, op: max_pool2d, inputs: [act], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
                             "outputs: [pool]\n");
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(fg_plan_group_count(p), 2);
    fg_group_info info;
    assert_int_equal(fg_plan_group_info(NULL, p, 0, &info), FG_ERR_INPUT);
    REFUSED(fg_plan_group_info(ctx, NULL, 0, &info), "plan is NULL");
    REFUSED(fg_plan_group_info(ctx, p, 0, NULL), "info is NULL");
    REFUSED(fg_plan_group_info(ctx, p, -1, &info), "group -1 does not exist (the plan has 2)");
    REFUSED(fg_plan_group_info(ctx, p, 2, &info), "group 2 does not exist");

    fg_context_clear_errors(ctx);
    assert_int_equal(fg_plan_group_info(ctx, p, 0, &info), FG_OK);
    assert_string_equal(info.rule, "conv_bn_act");
    assert_non_null(strstr(info.rule_file, "conv_bn.yaml"));
    assert_true(info.rule_line > 0);
    assert_int_equal(info.nnodes, 3);
    assert_string_equal(info.nodes[0], "conv");
    assert_string_equal(info.nodes[1], "bn");
    assert_string_equal(info.nodes[2], "act");
    assert_true(!info.folded[0] && info.folded[1] && !info.folded[2]);
    assert_string_equal(info.anchor, "conv");
    assert_string_equal(info.template_name, "conv2d");
    assert_string_equal(info.output, "act");
    assert_string_equal(info.epilogue, "bias, apply(relu)");
    /* the same rule file:line as the plan table prints */
    char line[64];
    snprintf(line, sizeof line, "conv_bn.yaml:%d", info.rule_line);
    char *out = NULL;
    char cmd[512];
    char *dir = tu_tmpdir();
    char *gp = tu_write(dir, "g.yaml", "graph: gi\ninputs: [ { name: x, shape: [1, 8, 6, 6] } ]\nweights:\n"
                                       "  - { name: w, shape: [8, 8, 3, 3] }\n  - { name: bn.g, shape: [8] }\n"
                                       "  - { name: bn.b, shape: [8] }\n  - { name: bn.m, shape: [8] }\n"
                                       "  - { name: bn.v, shape: [8], init: positive }\n"
                                       "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
                                       "  - { name: bn, op: batch_norm, inputs: [conv, bn.g, bn.b, bn.m, bn.v] }\n"
                                       "  - { name: act, op: relu, inputs: [bn] }\noutputs: [act]\n");
    snprintf(cmd, sizeof cmd, "'%s' plan '%s'", getenv("FUSEGEN_BIN") ? getenv("FUSEGEN_BIN") : "build/fusegen", gp);
    if (tu_run(cmd, &out) == 0)
        assert_non_null(strstr(out, line));
    free(out);
    free(gp);
    tu_rmtree(dir);
    free(dir);

    assert_int_equal(fg_plan_group_info(ctx, p, 1, &info), FG_OK);
    assert_null(info.rule);
    assert_null(info.rule_file);
    assert_int_equal(info.rule_line, 0);
    assert_int_equal(info.nnodes, 1);
    assert_string_equal(info.nodes[0], "pool");
    assert_string_equal(info.template_name, "pool2d");
    assert_string_equal(info.epilogue, "-");
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_weight),
        cmocka_unit_test(test_group_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
