/* test_fold.c -- the builtin folds: the plan's folded graph computes what
 * the source graph computes (host reference, fp32 weights, relative L2
 * below 1e-5), a conv or gemm without bias gets one, shared weights stay
 * intact for their other readers, and refusals are errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "plan.h"
#include "reference.h"
#include "testutil.h"

/* Rules naming each fold (plus copies of the shipped op definitions). */
static const char *RULES =
    "rule: conv_bn\npriority: 20\n"
    "match: [ { conv: { op: conv2d } }, { bn: { op: batch_norm, where: \"training == false\" } } ]\n"
    "fold: [ bn_into_conv ]\n"
    "kernel: { template: conv2d, epilogue: [ { bias: conv.bias } ] }\n"
    "---\n"
    "rule: gemm_bn\npriority: 20\n"
    "match: [ { mm: { op: gemm } }, { bn: { op: batch_norm, where: \"training == false\" } } ]\n"
    "fold: [ bn_into_matmul ]\n"
    "kernel: { template: gemm, epilogue: [ { bias: mm.bias } ] }\n"
    "---\n"
    "rule: bn_bn\npriority: 20\n"
    "match: [ { a: { op: batch_norm, where: \"training == false\" } }, { b: { op: batch_norm, where: \"training == false\" } } ]\n"
    "fold: [ affine_merge ]\n"
    "kernel: { template: pointwise, epilogue: [ { apply: a }, { apply: b } ] }\n";

static fg_context *g_ctx;
static char *g_dir;

static int setup(void **state)
{
    (void)state;
    g_dir = tu_vocab_dir();
    free(tu_write(g_dir, "folds.yaml", RULES));
    g_ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(g_ctx, g_dir);
    if (st != FG_OK)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

static fg_graph *parse(const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(g_ctx, "g.yaml", yaml, strlen(yaml), &g);
    if (st != FG_OK)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Plans g, checks that the folded plan graph computes the source graph's
 * outputs (relative L2 < 1e-5) and that `folded` nodes were folded. */
static fg_plan *check_folded(fg_graph *g, int folded)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(g_ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    fg_plan_stats s;
    fg_plan_get_stats(p, &s);
    assert_int_equal(s.folded, folded);
    double **a = calloc((size_t)g->ntensors, sizeof *a), **b = calloc((size_t)p->graph->ntensors, sizeof *b);
    fg_reference_random_inputs(g, 1234, a);
    fg_reference_random_inputs(p->graph, 1234, b);
    assert_int_equal(fg_reference_run(g_ctx, g, a), FG_OK);
    assert_int_equal(fg_reference_run(g_ctx, p->graph, b), FG_OK);
    for (int i = 0; i < g->noutputs; i++) {
        int t = g->outputs[i];
        double mx;
        double err = fg_rel_l2(b[t], a[t], fg_tensor_numel(&g->tensors[t]), &mx);
        if (!(err < 1e-5))
            fail_msg("output %s: folded vs unfused rel l2 %g (max abs %g)", g->tensors[t].name, err, mx);
    }
    fg_reference_free(g, a);
    fg_reference_free(p->graph, b);
    free(a);
    free(b);
    return p;
}

#define BN_W(p, c)                                                                                                  \
    "  - { name: " p ".g, shape: [" c "], init: positive }\n  - { name: " p ".b, shape: [" c "] }\n"              \
    "  - { name: " p ".m, shape: [" c "] }\n  - { name: " p ".v, shape: [" c "], init: positive }\n"
#define BN(n, x, p) "  - { name: " n ", op: batch_norm, inputs: [" x ", " p ".g, " p ".b, " p ".m, " p ".v], attrs: { eps: 0.001 } }\n"

static void test_conv_bn_without_bias(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: cb\ninputs: [ { name: x, shape: [2, 3, 7, 7] } ]\n"
                        "weights:\n  - { name: w, shape: [5, 3, 3, 3] }\n" BN_W("bn", "5")
                        "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
                        BN("bn", "conv", "bn") "outputs: [bn]\n");
    fg_plan *p = check_folded(g, 1);
    const fg_graph *pg = p->graph;
    int conv = fg_graph_find_node(pg, "conv");
    int bt = pg->nodes[conv].inputs[2];
    assert_true(bt >= g->ntensors);
    assert_string_equal(pg->tensors[bt].name, "conv.bias");
    assert_true(pg->tensors[bt].is_weight);
    assert_int_equal(pg->tensors[bt].rank, 1);
    assert_int_equal(pg->tensors[bt].shape[0], 5);
    assert_int_equal(pg->tensors[bt].nconsumers, 1);
    /* the seed formula for channel 0, computed here in double */
    int w = fg_graph_find_tensor(g, "w");
    const float *gam = g->tensors[fg_graph_find_tensor(g, "bn.g")].data, *bet = g->tensors[fg_graph_find_tensor(g, "bn.b")].data,
                *mu = g->tensors[fg_graph_find_tensor(g, "bn.m")].data, *var = g->tensors[fg_graph_find_tensor(g, "bn.v")].data;
    double s0 = gam[0] / sqrt(var[0] + 0.001);
    float *wv = fg_xmalloc((size_t)fg_tensor_numel(&pg->tensors[w]) * sizeof *wv);
    fg_tensor_values(&pg->tensors[w], wv);   /* the folded weight: W' = W*s */
    assert_float_equal(wv[0], (float)(g->tensors[w].data[0] * s0), 1e-7);
    free(wv);
    assert_float_equal(pg->tensors[bt].data[0], (float)(-mu[0] * s0 + bet[0]), 1e-6);
    fg_plan_free(p);
    fg_graph_free(g);
}

static void test_conv_bn_with_bias_groups(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: cb\ninputs: [ { name: x, shape: [1, 6, 9, 9] } ]\n"
                        "weights:\n  - { name: w, shape: [6, 1, 3, 3] }\n  - { name: b, shape: [6] }\n" BN_W("bn", "6")
                        "  - { name: w2, shape: [4, 3, 1, 1] }\n  - { name: b2, shape: [4] }\n" BN_W("bn2", "4")
                        "nodes:\n"
                        "  - { name: dw, op: conv2d, inputs: [x, w, b], attrs: { padding: [2, 2], dilation: [2, 2], groups: 6 } }\n"
                        BN("bn", "dw", "bn")
                        "  - { name: pw, op: conv2d, inputs: [bn, w2, b2], attrs: { groups: 2 } }\n" BN("bn2", "pw", "bn2")
                        "outputs: [bn2]\n");
    fg_plan *p = check_folded(g, 2);
    /* the existing bias tensor was rewritten in place, no new tensor */
    assert_int_equal(p->graph->nodes[fg_graph_find_node(p->graph, "dw")].inputs[2], fg_graph_find_tensor(g, "b"));
    assert_int_equal(p->graph->ntensors, g->ntensors);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* A weight shared with a conv outside the fold keeps its values there. */
static void test_shared_weight(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: sh\ninputs: [ { name: x, shape: [1, 4, 5, 5] } ]\n"
                        "weights:\n  - { name: w, shape: [4, 4, 3, 3] }\n" BN_W("bn", "4")
                        "nodes:\n"
                        "  - { name: c1, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n" BN("bn", "c1", "bn")
                        "  - { name: c2, op: conv2d, inputs: [bn, w], attrs: { padding: [1, 1] } }\n"
                        "outputs: [c2]\n");
    fg_plan *p = check_folded(g, 1);
    int w = fg_graph_find_tensor(g, "w");
    int c1 = fg_graph_find_node(p->graph, "c1"), c2 = fg_graph_find_node(p->graph, "c2");
    assert_int_equal(p->graph->nodes[c2].inputs[1], w);
    assert_int_not_equal(p->graph->nodes[c1].inputs[1], w);
    float wv[144];
    fg_tensor_values(&p->graph->tensors[w], wv);   /* c2's weight is not rescaled */
    assert_memory_equal(wv, g->tensors[w].data, sizeof(float) * 144);
    fg_plan_free(p);
    fg_graph_free(g);
}

static void test_gemm_bn(void **state)
{
    (void)state;
    static const char *const variants[] = {
        "  - { name: mm, op: gemm, inputs: [a, wb] }\n",                                        /* no bias */
        "  - { name: mm, op: gemm, inputs: [a, wt, bn1], attrs: { trans_b: true } }\n",        /* [N] bias */
        "  - { name: mm, op: gemm, inputs: [a, wb, bmn] }\n",                                   /* [M, N] bias */
        "  - { name: mm, op: gemm, inputs: [a, wb, b1n] }\n",                                   /* [1, N] bias */
    };
    for (size_t i = 0; i < FG_COUNTOF(variants); i++) {
        char yaml[4096];
        snprintf(yaml, sizeof yaml,
                 "graph: mb\ninputs: [ { name: a, shape: [5, 7] } ]\n"
                 "weights:\n  - { name: wb, shape: [7, 3] }\n  - { name: wt, shape: [3, 7] }\n"
                 "  - { name: bn1, shape: [3] }\n  - { name: bmn, shape: [5, 3] }\n  - { name: b1n, shape: [1, 3] }\n" BN_W("bn", "3")
                 "nodes:\n%s" BN("bn", "mm", "bn") "outputs: [bn]\n",
                 variants[i]);
        fg_graph *g = parse(yaml);
        fg_plan *p = check_folded(g, 1);
        const fg_group *grp = &p->groups[0];
        assert_int_equal(grp->nepi, 1);
        assert_int_equal(grp->epi[0].kind, FG_EPI_BIAS);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

static void test_affine_merge(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: bb\ninputs: [ { name: x, shape: [2, 4, 3, 3] } ]\n"
                        "weights:\n" BN_W("p", "4") BN_W("q", "4")
                        "nodes:\n" BN("bn1", "x", "p") BN("bn2", "bn1", "q") "outputs: [bn2]\n");
    fg_plan *p = check_folded(g, 1);
    assert_int_equal(p->graph->nodes[fg_graph_find_node(p->graph, "bn2")].folded, 1);
    assert_int_equal(p->groups[0].nepi, 1);
    assert_int_equal(p->groups[0].epi[0].node, fg_graph_find_node(p->graph, "bn1"));
    fg_plan_free(p);
    fg_graph_free(g);
}

/* Direct calls: training mode and a matmul without a bias input refuse. */
static void test_refusals(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: r\ninputs: [ { name: x, shape: [1, 4, 5, 5] }, { name: a, shape: [2, 4] } ]\n"
                        "weights:\n  - { name: w, shape: [4, 4, 1, 1] }\n  - { name: m, shape: [4, 4] }\n" BN_W("bn", "4")
                        "nodes:\n  - { name: c, op: conv2d, inputs: [x, w] }\n"
                        "  - { name: bn, op: batch_norm, inputs: [c, bn.g, bn.b, bn.m, bn.v] }\n"
                        "  - { name: mm, op: matmul, inputs: [a, m] }\n" BN("bn2", "mm", "bn")
                        "outputs: [bn, bn2]\n");
    fg_graph *pg = fg_graph_clone(g);
    /* the loader refuses training mode, so it is set on the copy */
    fg_node *tn = &pg->nodes[fg_graph_find_node(pg, "bn")];
    for (int a = 0; a < tn->op->nattrs; a++)
        if (strcmp(tn->op->attrs[a].name, "training") == 0)
            tn->attrs[a].i = 1;
    const fg_rule *r = g_ctx->rules[0];
    fg_fold f = {"bn_into_conv", 0, FG_NOLOC};
    fg_group grp;
    memset(&grp, 0, sizeof grp);
    grp.nnodes = 2;
    grp.nodes[0] = fg_graph_find_node(pg, "c");
    grp.nodes[1] = fg_graph_find_node(pg, "bn");
    assert_int_equal(fg_fold_apply(g_ctx, r, &f, pg, &grp), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "training mode"));
    assert_int_equal(pg->nodes[grp.nodes[1]].folded, 0);
    f.name = "bn_into_matmul";
    grp.nodes[0] = fg_graph_find_node(pg, "mm");
    grp.nodes[1] = fg_graph_find_node(pg, "bn2");
    assert_int_equal(fg_fold_apply(g_ctx, r, &f, pg, &grp), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "has no bias input"));
    f.name = "no_such_fold";
    assert_int_equal(fg_fold_apply(g_ctx, r, &f, pg, &grp), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "unknown fold 'no_such_fold'"));
    fg_context_clear_errors(g_ctx);
    fg_graph_free(pg);
    fg_graph_free(g);

    int n;
    const char *const *names = fg_fold_builtin_names(&n);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++)
        assert_true(fg_fold_is_builtin(names[i]));
    assert_false(fg_fold_is_builtin("bn_into_convv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bn_without_bias), cmocka_unit_test(test_conv_bn_with_bias_groups),
        cmocka_unit_test(test_shared_weight),        cmocka_unit_test(test_gemm_bn),
        cmocka_unit_test(test_affine_merge),         cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
