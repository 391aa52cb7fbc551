/* test_plan.c -- the planner on rules written for each case (next to copies
 * of the shipped op definitions): determinism, conflict resolution
 * (priority, longest match, load order, graph order), legality, epilogue
 * resolution, execution order and the --explain notes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "plan.h"
#include "testutil.h"

/* A context with the shipped op definitions and the given rule text. */
static fg_context *ctx_rules(const char *rules, char **dir)
{
    *dir = tu_vocab_dir();
    free(tu_write(*dir, "rules.yaml", rules));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, *dir);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

static void ctx_done(fg_context *ctx, char *dir)
{
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static fg_graph *parse(fg_context *ctx, const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", yaml, strlen(yaml), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static fg_plan *plan(fg_context *ctx, const fg_graph *g)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_non_null(p);
    return p;
}

static const fg_group *group_with(const fg_plan *p, const char *name)
{
    int n = fg_graph_find_node(p->graph, name);
    for (int gi = 0; gi < p->ngroups; gi++)
        for (int i = 0; i < p->groups[gi].nnodes; i++)
            if (p->groups[gi].nodes[i] == n)
                return &p->groups[gi];
    fail_msg("node %s is in no group", name);
    return NULL;
}

static int has_note(const fg_plan *p, const char *needle)
{
    for (int i = 0; i < p->nnotes; i++)
        if (strstr(p->notes[i], needle))
            return 1;
    fprintf(stderr, "no note contains: %s\nnotes:\n", needle);
    for (int i = 0; i < p->nnotes; i++)
        fprintf(stderr, "  %s\n", p->notes[i]);
    return 0;
}

static char *print_plan(const fg_context *ctx, const fg_plan *p, int explain)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fg_plan_print_opts o = {explain};
    fg_plan_print(ctx, p, &o, f);
    fclose(f);
    return text;
}

static const char *RULES_BASIC =
    "rule: conv_act\n"
    "priority: 10\n"
    "match:\n"
    "  - conv: { op: conv2d }\n"
    "  - act:  { op: [relu, silu] }\n"
    "kernel:\n"
    "  template: conv2d\n"
    "  epilogue: [ { bias: conv.bias }, { apply: act } ]\n"
    "---\n"
    "rule: conv_bn\n"
    "priority: 20\n"
    "match:\n"
    "  - conv: { op: conv2d }\n"
    "  - bn:   { op: batch_norm, where: \"training == false\" }\n"
    "  - act:  { op: relu, optional: true }\n"
    "fold: [ bn_into_conv ]\n"
    "kernel:\n"
    "  template: conv2d\n"
    "  epilogue: [ { bias: conv.bias }, { apply: act } ]\n"
    "---\n"
    "rule: conv_add\n"
    "priority: 15\n"
    "dtypes: [fp32]\n"
    "match:\n"
    "  - conv: { op: conv2d }\n"
    "  - add:  { op: add }\n"
    "kernel:\n"
    "  template: conv2d\n"
    "  epilogue: [ { bias: conv.bias }, { apply: add } ]\n"
    "---\n"
    "rule: chain\n"
    "priority: 0\n"
    "match:\n"
    "  - ops: { kind: pointwise, repeat: true }\n"
    "kernel:\n"
    "  template: pointwise\n"
    "  epilogue: [ { apply: ops } ]\n";

#define CONV_W(n) "  - { name: " n ", shape: [4, 4, 3, 3] }\n"
#define BN_W(p)                                                                                                     \
    "  - { name: " p ".g, shape: [4], init: positive }\n  - { name: " p ".b, shape: [4] }\n"                      \
    "  - { name: " p ".m, shape: [4] }\n  - { name: " p ".v, shape: [4], init: positive }\n"
#define CONV(n, x, w) "  - { name: " n ", op: conv2d, inputs: [" x ", " w "], attrs: { padding: [1, 1] } }\n"
#define BN(n, x, p, tr)                                                                                             \
    "  - { name: " n ", op: batch_norm, inputs: [" x ", " p ".g, " p ".b, " p ".m, " p ".v], attrs: { training: " tr \
    " } }\n"

static const char *GRAPH_BLOCK =
    "graph: block\nseed: 3\n"
    "inputs: [ { name: x, shape: [1, 4, 6, 6] } ]\n"
    "weights:\n" CONV_W("w1") CONV_W("w2") CONV_W("w3") BN_W("bn1") BN_W("bn2")
    "nodes:\n" CONV("conv1", "x", "w1") BN("bn1", "conv1", "bn1", "false")
    "  - { name: relu1, op: relu, inputs: [bn1] }\n" CONV("conv2", "relu1", "w2") BN("bn2", "conv2", "bn2", "false")
    "  - { name: relu2, op: relu, inputs: [bn2] }\n" CONV("conv3", "relu2", "w3")
    "  - { name: add3, op: add, inputs: [conv3, relu2] }\n"
    "  - { name: silu3, op: silu, inputs: [add3] }\n"
    "  - { name: sig3, op: sigmoid, inputs: [silu3] }\n"
    "outputs: [sig3]\n";

/* GRAPH_BLOCK with bn2 in training mode: the loader refuses `training: true`
 * (no kernel computes batch statistics), so it is set after loading, to
 * see the rule's `where` refuse it. */
static fg_graph *parse_block(fg_context *ctx)
{
    fg_graph *g = parse(ctx, GRAPH_BLOCK);
    fg_node *bn = &g->nodes[fg_graph_find_node(g, "bn2")];
    for (int a = 0; a < bn->op->nattrs; a++)
        if (strcmp(bn->op->attrs[a].name, "training") == 0)
            bn->attrs[a].i = 1;
    return g;
}

static void test_block_groups(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    fg_graph *g = parse_block(ctx);
    fg_plan *p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "conv_bn:conv1,bn1,relu1");
    /* bn2 is in training mode: conv_bn refuses, conv2 stays alone */
    assert_string_equal(tu_group_desc(ctx, p, "conv2"), "-:conv2");
    assert_string_equal(tu_group_desc(ctx, p, "bn2"), "-:bn2");
    assert_string_equal(tu_group_desc(ctx, p, "relu2"), "chain:relu2");
    assert_string_equal(tu_group_desc(ctx, p, "conv3"), "conv_add:conv3,add3");
    assert_string_equal(tu_group_desc(ctx, p, "silu3"), "chain:silu3,sig3");
    assert_int_equal(fg_plan_group_count(p), 6);

    /* the fold marked bn1, gave conv1 a bias, and the epilogue picked it up */
    const fg_group *g1 = group_with(p, "conv1");
    assert_int_equal(p->graph->nodes[fg_graph_find_node(p->graph, "bn1")].folded, 1);
    assert_int_equal(p->node_group[fg_graph_find_node(p->graph, "bn1")], -1);
    assert_int_equal(g1->nepi, 2);
    assert_int_equal(g1->epi[0].kind, FG_EPI_BIAS);
    assert_true(g1->epi[0].tensor >= g->ntensors); /* a new tensor in the plan's graph */
    assert_int_equal(g1->epi[1].kind, FG_EPI_APPLY);
    assert_int_equal(g1->epi[1].node, fg_graph_find_node(p->graph, "relu1"));
    assert_int_equal(g1->anchor, fg_graph_find_node(p->graph, "conv1"));
    assert_int_equal(g1->output, fg_graph_find_tensor(p->graph, "relu1"));
    /* two fused intermediates of 1*4*6*6 fp32 values, written and read back */
    assert_int_equal(g1->saved_bytes, 2 * 144 * 4 * 2);
    /* the source graph is untouched */
    assert_int_equal(g->nodes[fg_graph_find_node(g, "bn1")].folded, 0);
    assert_int_equal(g->nodes[fg_graph_find_node(g, "conv1")].inputs[2], -1);

    /* single-op groups: templates by kind; pointwise gets an apply */
    const fg_group *gb = group_with(p, "bn2");
    assert_int_equal(gb->rule, -1);
    assert_string_equal(gb->template_name, "pointwise");
    assert_int_equal(gb->nepi, 1);
    assert_int_equal(gb->anchor, -1);
    const fg_group *gc = group_with(p, "conv2");
    assert_string_equal(gc->template_name, "conv2d");
    assert_int_equal(gc->nepi, 0); /* no bias */

    /* chain: a repeat step gives one apply per node */
    const fg_group *gs = group_with(p, "silu3");
    assert_int_equal(gs->nepi, 2);
    assert_int_equal(gs->epi[1].node, fg_graph_find_node(p->graph, "sig3"));

    /* execution order follows the graph */
    for (int i = 1; i < p->ngroups; i++)
        assert_true(p->groups[i - 1].nodes[p->groups[i - 1].nnodes - 1] < p->groups[i].nodes[p->groups[i].nnodes - 1]);

    /* explain: the training BN */
    assert_true(has_note(p, "bn2 not fused into conv2 (rule conv_bn at "));
    assert_true(has_note(p, "rules.yaml:10): where \"training == false\" is false"));

    fg_plan_stats s;
    fg_plan_get_stats(p, &s);
    assert_int_equal(s.ops, 10);
    assert_int_equal(s.kernels, 6);
    assert_int_equal(s.folded, 1);
    char *text = print_plan(ctx, p, 1);
    assert_non_null(strstr(text, "ops: 10 -> kernels: 6 (folded: 1), intermediate bytes not written: "));
    assert_non_null(strstr(text, "conv_bn ("));
    assert_non_null(strstr(text, "conv1, bn1 (folded), relu1"));
    assert_non_null(strstr(text, "bias, apply(relu)"));
    assert_non_null(strstr(text, "near misses:"));
    free(text);

    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* Same input, same plan, same text. */
static void test_determinism(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    fg_graph *g = parse_block(ctx);
    fg_plan *a = plan(ctx, g), *b = plan(ctx, g);
    assert_int_equal(a->ngroups, b->ngroups);
    for (int i = 0; i < a->ngroups; i++) {
        fg_group ga = a->groups[i], gb = b->groups[i];
        assert_string_equal(ga.choice, gb.choice);
        ga.choice = gb.choice = NULL;   /* owned strings: compared above */
        assert_memory_equal(&ga, &gb, sizeof ga);
    }
    assert_int_equal(a->nnotes, b->nnotes);
    for (int i = 0; i < a->nnotes; i++)
        assert_string_equal(a->notes[i], b->notes[i]);
    char *ta = print_plan(ctx, a, 1), *tb = print_plan(ctx, b, 1);
    assert_string_equal(ta, tb);
    /* the folded weights agree bit for bit */
    for (int t = 0; t < a->graph->ntensors; t++)
        if (a->graph->tensors[t].data)
            assert_memory_equal(a->graph->tensors[t].data, b->graph->tensors[t].data,
                                sizeof(float) * (size_t)fg_tensor_numel(&a->graph->tensors[t]));
    free(ta), free(tb);
    fg_plan_free(a), fg_plan_free(b);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

static const char *GRAPH_CONV_RELU =
    "graph: cr\n"
    "inputs: [ { name: x, shape: [1, 4, 5, 5] } ]\n"
    "weights:\n" CONV_W("w1")
    "nodes:\n" CONV("conv1", "x", "w1")
    "  - { name: relu1, op: relu, inputs: [conv1] }\n"
    "outputs: [relu1]\n";

/* Priority beats length; length beats load order; load order breaks ties. */
static void test_tie_breaks(void **state)
{
    (void)state;
    static const char *const rules[] = {
        /* a short rule of higher priority wins over a longer one */
        "rule: long\npriority: 1\nmatch: [ { c: { op: conv2d } }, { a: { op: relu } } ]\n"
        "kernel: { template: conv2d, epilogue: [ { apply: a } ] }\n---\n"
        "rule: short\npriority: 2\nmatch: [ { c: { op: conv2d } } ]\nkernel: { template: conv2d }\n",
        /* same priority: the longer match wins */
        "rule: short\npriority: 1\nmatch: [ { c: { op: conv2d } } ]\nkernel: { template: conv2d }\n---\n"
        "rule: long\npriority: 1\nmatch: [ { c: { op: conv2d } }, { a: { op: relu } } ]\n"
        "kernel: { template: conv2d, epilogue: [ { apply: a } ] }\n",
        /* same priority and length: the rule loaded first */
        "rule: first\npriority: 1\nmatch: [ { c: { op: conv2d } }, { a: { op: relu } } ]\n"
        "kernel: { template: conv2d, epilogue: [ { apply: a } ] }\n---\n"
        "rule: second\npriority: 1\nmatch: [ { c: { op: conv2d } }, { a: { kind: pointwise } } ]\n"
        "kernel: { template: conv2d, epilogue: [ { apply: a } ] }\n",
    };
    static const char *const want[] = {"short:conv1", "long:conv1,relu1", "first:conv1,relu1"};
    for (int i = 0; i < 3; i++) {
        char *dir;
        fg_context *ctx = ctx_rules(rules[i], &dir);
        fg_graph *g = parse(ctx, GRAPH_CONV_RELU);
        fg_plan *p = plan(ctx, g);
        assert_string_equal(tu_group_desc(ctx, p, "conv1"), want[i]);
        fg_plan_free(p);
        fg_graph_free(g);
        ctx_done(ctx, dir);
    }
}

/* Graph order: the earlier anchor takes the node even when a later anchor's
 * rule has a higher priority. */
static void test_graph_order(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules("rule: pair\npriority: 1\nmatch: [ { a: { kind: pointwise } }, { b: { kind: pointwise } } ]\n"
                                "kernel: { template: pointwise, epilogue: [ { apply: a }, { apply: b } ] }\n---\n"
                                "rule: hi\npriority: 9\nmatch: [ { a: { op: sigmoid } }, { b: { op: tanh } } ]\n"
                                "kernel: { template: pointwise, epilogue: [ { apply: a }, { apply: b } ] }\n",
                                &dir);
    fg_graph *g = parse(ctx, "graph: o\ninputs: [ { name: x, shape: [8] } ]\nnodes:\n"
                             "  - { name: r, op: relu, inputs: [x] }\n"
                             "  - { name: s, op: sigmoid, inputs: [r] }\n"
                             "  - { name: t, op: tanh, inputs: [s] }\n"
                             "outputs: [t]\n");
    fg_plan *p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "r"), "pair:r,s");
    assert_string_equal(tu_group_desc(ctx, p, "t"), "-:t");
    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* An intermediate read twice, or a graph output, is not fused; the notes say why. */
static void test_legality(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    fg_graph *g = parse(ctx, "graph: two\ninputs: [ { name: x, shape: [1, 4, 5, 5] } ]\n"
                             "weights:\n" CONV_W("w1") CONV_W("w2")
                             "nodes:\n" CONV("conv1", "x", "w1")
                             "  - { name: relu1, op: relu, inputs: [conv1] }\n"
                             "  - { name: add3, op: add, inputs: [relu1, conv1] }\n" CONV("conv2", "add3", "w2")
                             "  - { name: relu2, op: relu, inputs: [conv2] }\n"
                             "outputs: [relu2, conv2]\n");
    fg_plan *p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "-:conv1");
    assert_string_equal(tu_group_desc(ctx, p, "conv2"), "-:conv2");
    assert_string_equal(tu_group_desc(ctx, p, "relu2"), "chain:relu2");
    assert_true(has_note(p, "relu1 not fused into conv1 (rule conv_act at "));
    assert_true(has_note(p, "rules.yaml:1): conv1's output also feeds add3"));
    assert_true(has_note(p, "add3 not fused into conv1 (rule conv_add at "));
    assert_true(has_note(p, "relu2 not fused into conv2 (rule conv_act at "));
    assert_true(has_note(p, "conv2's output is a graph output"));
    /* the notes come once each */
    for (int i = 0; i < p->nnotes; i++)
        for (int j = i + 1; j < p->nnotes; j++)
            assert_string_not_equal(p->notes[i], p->notes[j]);
    char *text = print_plan(ctx, p, 1);
    assert_non_null(strstr(text, "  relu1 not fused into conv1"));
    free(text);
    text = print_plan(ctx, p, 0);
    assert_null(strstr(text, "not fused"));
    free(text);
    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* A broadcast that grows the output cannot run in the producer's epilogue:
 * matmul [1,5] + r [7,1] -> [7,5] stays two kernels, with a note. */
static void test_broadcast_growth(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = parse(ctx, "graph: bc\ninputs: [ { name: a, shape: [1, 5] }, { name: r, shape: [7, 1] } ]\n"
                             "weights: [ { name: w, shape: [5, 5] } ]\n"
                             "nodes:\n  - { name: mm, op: matmul, inputs: [a, w] }\n"
                             "  - { name: add, op: add, inputs: [mm, r] }\noutputs: [add]\n");
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 2);
    assert_string_equal(tu_group_desc(ctx, p, "mm"), "-:mm");
    assert_true(has_note(p, "add's output [7, 5] is larger than mm's [1, 5] (broadcast)"));
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* The dtype guard of conv_add (fp32 only) keeps an fp16 graph unfused. */
static void test_dtype_guard(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    const char *fmt = "graph: h\ndtype: %s\ninputs: [ { name: x, shape: [1, 4, 5, 5] } ]\n"
                      "weights:\n" CONV_W("w1") "nodes:\n" CONV("conv1", "x", "w1")
                      "  - { name: add1, op: add, inputs: [conv1, x] }\noutputs: [add1]\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml, fmt, "fp16");
    fg_graph *g = parse(ctx, yaml);
    fg_plan *p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "-:conv1");
    assert_true(has_note(p, "add1 not fused into conv1 (rule conv_add at "));
    assert_true(has_note(p, "dtype fp16 not allowed by rule conv_add (dtypes: fp32)"));
    fg_plan_free(p);
    fg_graph_free(g);
    snprintf(yaml, sizeof yaml, fmt, "fp32");
    g = parse(ctx, yaml);
    p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "conv_add:conv1,add1");
    assert_int_equal(p->nnotes, 0);
    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* Groups run in an order where every input is ready: conv_add anchored at
 * conv1 reads conv2, which comes later in the graph. */
static void test_execution_order(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    fg_graph *g = parse(ctx, "graph: eo\ninputs: [ { name: x, shape: [1, 4, 5, 5] } ]\n"
                             "weights:\n" CONV_W("w1") CONV_W("w2")
                             "nodes:\n" CONV("conv1", "x", "w1") CONV("conv2", "x", "w2")
                             "  - { name: add1, op: add, inputs: [conv1, conv2] }\noutputs: [add1]\n");
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 2);
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "conv_add:conv1,add1");
    assert_int_equal(p->groups[0].nodes[0], fg_graph_find_node(p->graph, "conv2"));
    assert_int_equal(p->groups[1].nodes[0], fg_graph_find_node(p->graph, "conv1"));
    assert_int_equal(p->node_group[fg_graph_find_node(p->graph, "conv2")], 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fg_plan_dot(ctx, p, f);
    fclose(f);
    assert_non_null(strstr(text, "subgraph cluster_g1"));
    assert_non_null(strstr(text, "conv_add ("));
    assert_non_null(strstr(text, "->"));
    free(text);
    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* Optional steps may be skipped; the epilogue drops their stages. */
static void test_optional_and_single_ops(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_rules(RULES_BASIC, &dir);
    fg_graph *g = parse(ctx, "graph: o\ninputs: [ { name: x, shape: [1, 4, 6, 6] } ]\n"
                             "weights:\n" CONV_W("w1") BN_W("bn1")
                             "  - { name: b1, shape: [4] }\n  - { name: fw, shape: [144, 3] }\n"
                             "nodes:\n"
                             "  - { name: conv1, op: conv2d, inputs: [x, w1, b1], attrs: { padding: [1, 1] } }\n"
                             BN("bn1", "conv1", "bn1", "false")
                             "  - { name: pool1, op: max_pool2d, inputs: [bn1], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
                             "  - { name: gp, op: global_avg_pool, inputs: [bn1] }\n"
                             "  - { name: fl, op: flatten, inputs: [bn1] }\n"
                             "  - { name: fc, op: matmul, inputs: [fl, fw] }\n"
                             "outputs: [pool1, gp, fc]\n");
    fg_plan *p = plan(ctx, g);
    /* bn1's output has three consumers: relu is absent anyway, the optional step is skipped */
    assert_string_equal(tu_group_desc(ctx, p, "conv1"), "conv_bn:conv1,bn1");
    const fg_group *g1 = group_with(p, "conv1");
    assert_int_equal(g1->nepi, 1);
    assert_int_equal(g1->epi[0].kind, FG_EPI_BIAS);
    assert_int_equal(g1->epi[0].tensor, fg_graph_find_tensor(p->graph, "b1"));
    assert_int_equal(g1->output, fg_graph_find_tensor(p->graph, "bn1"));
    assert_string_equal(group_with(p, "pool1")->template_name, "pool2d");
    assert_int_equal(group_with(p, "pool1")->anchor, fg_graph_find_node(p->graph, "pool1"));
    assert_string_equal(group_with(p, "gp")->template_name, "pool2d");
    /* fl flattens bn1 (NCHW: row-major): an alias of the conv's output, no kernel */
    assert_int_equal(p->node_group[fg_graph_find_node(p->graph, "fl")], -1);
    assert_int_equal(p->views->parent[fg_graph_find_tensor(p->graph, "fl")], fg_graph_find_tensor(p->graph, "bn1"));
    assert_string_equal(group_with(p, "fc")->template_name, "gemv");   /* exact fp32, M 1 */
    assert_int_equal(group_with(p, "fc")->nepi, 0);
    fg_plan_free(p);
    fg_graph_free(g);
    ctx_done(ctx, dir);
}

/* ---- input maps (rules/shuffle.yaml) ------------------------------------- */

/* A channel shuffle of x [N, 16, 5, 7] in groups of 4, then the conv, a
 * batch norm (dw: true) and a relu; extra nodes / outputs appended. */
static fg_graph *shuffle_graph(fg_context *ctx, const char *dtype, const char *layout, int dw, const char *more,
                               const char *outputs)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "graph: shuffle\ndtype: %s\nlayout: %s\n"
                      "inputs: [ { name: x, shape: [2, 16, 5, 7] } ]\n"
                      "weights:\n"
                      "  - { name: wd, shape: [16, 1, 3, 3] }\n  - { name: w, shape: [8, 16, 1, 1] }\n"
                      "  - { name: g, shape: [%d], init: positive }\n  - { name: be, shape: [%d] }\n"
                      "  - { name: m, shape: [%d] }\n  - { name: v, shape: [%d], init: positive }\n"
                      "nodes:\n"
                      "  - { name: a, op: reshape, inputs: [x], attrs: { shape: [2, 4, 4, 5, 7] } }\n"
                      "  - { name: b, op: transpose, inputs: [a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
                      "  - { name: s, op: reshape, inputs: [b], attrs: { shape: [2, 16, 5, 7] } }\n",
                  dtype, layout, dw ? 16 : 8, dw ? 16 : 8, dw ? 16 : 8, dw ? 16 : 8);
    if (dw)
        fg_buf_put(&b, "  - { name: c, op: conv2d, inputs: [s, wd], attrs: { groups: 16, padding: [1, 1] } }\n");
    else
        fg_buf_put(&b, "  - { name: c, op: conv2d, inputs: [s, w] }\n");
    fg_buf_put(&b, "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
                   "  - { name: y, op: relu, inputs: [bn] }\n");
    fg_buf_printf(&b, "%soutputs: [%s]\n", more, outputs);
    fg_graph *g = parse(ctx, b.s);
    fg_buf_free(&b);
    return g;
}

/* The shuffle becomes the conv's input map: one kernel, the map's nodes
 * first, the conv the anchor, in every dtype and layout whose template reads
 * element by element. */
static void test_input_map_fuses(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char *const dts[] = {"fp32", "fp16", "bf16"}, *const lays[] = {"NCHW", "NHWC"};
    for (int dw = 0; dw < 2; dw++)
        for (int d = 0; d < 3; d++)
            for (int l = 0; l < 2; l++) {
                if (!dw && d > 0 && l == 1)
                    continue;   /* fp16 / bf16 NHWC 1x1: conv2d_tc, test_input_map_vector_template */
                fg_graph *g = shuffle_graph(ctx, dts[d], lays[l], dw, "", "y");
                fg_plan *p = plan(ctx, g);
                assert_int_equal(p->ngroups, 1);
                assert_string_equal(tu_group_desc(ctx, p, "c"), "shuffle_conv:a,b,s,c,bn,y");
                const fg_group *grp = &p->groups[0];
                assert_int_equal(grp->nmap, 3);
                assert_int_equal(grp->anchor, fg_graph_find_node(p->graph, "c"));
                assert_string_equal(grp->template_name, dw ? "conv2d_depthwise" : "conv2d");
                /* the shuffled tensor is never written: the group writes y */
                assert_int_equal(grp->output, fg_graph_find_tensor(p->graph, "y"));
                fg_plan_free(p);
                fg_graph_free(g);
            }
    fg_context_free(ctx);
}

/* The shuffle's output with a second reader, or a graph output: the copy
 * stays (copy_chain) and the conv is planned as before, with a note. */
static void test_input_map_legality(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = shuffle_graph(ctx, "fp32", "NCHW", 1, "  - { name: z, op: sigmoid, inputs: [s] }\n", "y, z");
    fg_plan *p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "a"), "copy_chain:a,b,s");
    assert_string_equal(tu_group_desc(ctx, p, "c"), "dw_conv_bn_act:c,bn,y");
    assert_int_equal(group_with(p, "c")->nmap, 0);
    assert_int_equal(p->ngroups, 3);
    assert_true(has_note(p, "c not fused into s (rule shuffle_conv at "));
    assert_true(has_note(p, "s's output also feeds"));
    fg_plan_free(p);
    fg_graph_free(g);

    g = shuffle_graph(ctx, "fp32", "NCHW", 1, "", "y, s");
    p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "a"), "copy_chain:a,b,s");
    assert_string_equal(tu_group_desc(ctx, p, "c"), "dw_conv_bn_act:c,bn,y");
    assert_int_equal(p->ngroups, 2);
    assert_true(has_note(p, "s's output is a graph output"));
    fg_plan_free(p);
    fg_graph_free(g);

    /* an intermediate of the shuffle read twice: the copy writes it (a, b),
     * and only the last reshape, read once, is the conv's input map */
    g = shuffle_graph(ctx, "fp32", "NCHW", 1, "  - { name: z, op: sigmoid, inputs: [b] }\n", "y, z");
    p = plan(ctx, g);
    assert_string_equal(tu_group_desc(ctx, p, "a"), "copy_chain:a,b");
    assert_string_equal(tu_group_desc(ctx, p, "c"), "shuffle_conv:s,c,bn,y");
    assert_int_equal(group_with(p, "c")->nmap, 1);
    assert_true(has_note(p, "b's output also feeds"));
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* fp16 / bf16 NHWC with 16 channels: the 1x1 conv alone runs on conv2d_tc,
 * which loads 16-byte channel vectors and cannot read through a map; the
 * copy stays rather than trading the tensor-core template for a direct
 * conv, and --explain says why. */
static void test_input_map_vector_template(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char *const dts[] = {"fp16", "bf16"};
    for (int d = 0; d < 2; d++) {
        fg_graph *g = shuffle_graph(ctx, dts[d], "NHWC", 0, "", "y");
        fg_plan *p = plan(ctx, g);
        assert_int_equal(p->ngroups, 2);
        assert_string_equal(tu_group_desc(ctx, p, "a"), "copy_chain:a,b,s");
        assert_string_equal(tu_group_desc(ctx, p, "c"), "conv_bn_act:c,bn,y");
        assert_string_equal(group_with(p, "c")->template_name, "conv2d_tc");
        assert_true(has_note(p, "c not fused into s (rule shuffle_conv at "));
        assert_true(has_note(p, "the input map stays a copy: conv2d_tc, the template for c alone, cannot read "
                                "through an input map: it loads 16-byte channel vectors"));
        char *text = print_plan(ctx, p, 1);
        assert_non_null(strstr(text, "the input map stays a copy: conv2d_tc"));
        free(text);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    fg_context_free(ctx);
}

/* `input_map:` steps: leading reshape / transpose steps followed by a
 * required anchor step; anything else is a located error. */
static void test_input_map_rule_errors(void **state)
{
    (void)state;
    static const struct {
        const char *match, *error;
    } bad[] = {
        {"  - c: { op: conv2d, input_map: true }\n  - r: { op: relu }\n",
         "`input_map` is only for reshape and transpose steps"},
        {"  - c: { op: conv2d }\n  - t: { op: transpose, input_map: true }\n", "`input_map` steps must lead the chain"},
        {"  - t: { op: transpose, input_map: true }\n  - r: { op: reshape, input_map: true }\n",
         "every step is an `input_map` step"},
        {"  - t: { op: transpose, input_map: true }\n  - c: { op: conv2d, optional: true }\n  - r: { op: relu }\n",
         "step 'c' reads the input map and cannot be optional"},
        {"  - t: { op: transpose, input_map: true }\n  - r: { op: relu }\n",
         "step 'r' after the `input_map` steps must match anchor ops only"},
        {"  - t: { op: transpose, input_map: 3 }\n  - c: { op: conv2d }\n", "input_map"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *dir = tu_vocab_dir();
        fg_buf b = {0};
        fg_buf_printf(&b, "rule: bad\nmatch:\n%skernel: { template: conv2d }\n", bad[i].match);
        free(tu_write(dir, "rules.yaml", b.s));
        fg_buf_free(&b);
        fg_context *ctx = tu_ctx_empty();
        assert_int_equal(fg_rules_load(ctx, dir), FG_ERR_INPUT);
        if (!tu_has_error(ctx, bad[i].error)) {
            tu_dump_errors(ctx);
            fail_msg("case %zu: no error containing: %s", i, bad[i].error);
        }
        ctx_done(ctx, dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_groups),  cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_tie_breaks),    cmocka_unit_test(test_graph_order),
        cmocka_unit_test(test_legality),      cmocka_unit_test(test_dtype_guard),
        cmocka_unit_test(test_execution_order), cmocka_unit_test(test_optional_and_single_ops),
        cmocka_unit_test(test_broadcast_growth),
        cmocka_unit_test(test_input_map_fuses),  cmocka_unit_test(test_input_map_legality),
        cmocka_unit_test(test_input_map_vector_template), cmocka_unit_test(test_input_map_rule_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
