/* test_shipped_rules.c -- every rule under rules/: one graph that it fuses
 * (the group's rule and nodes are checked, and the plan's folded graph
 * computes what the unfused graph computes), and at least one graph it must
 * not fuse.  A rule without a case here fails the test.  Last, a new
 * activation op and a new rule written into a temporary rules directory are
 * fused with no C change. */
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
#include "testutil.h"

static fg_context *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    return 0;
}

/* Shared graph header: an activation x, a matrix a, and weights for every case. */
static const char *HEADER =
    "graph: case\nseed: 11\n"
    "inputs: [ { name: x, shape: [1, 8, 6, 6] }, { name: a, shape: [5, 8] } ]\n"
    "weights:\n"
    "  - { name: w, shape: [8, 8, 3, 3] }\n"
    "  - { name: wd, shape: [8, 1, 3, 3] }\n"
    "  - { name: wg, shape: [8, 4, 3, 3] }\n"
    "  - { name: b, shape: [8] }\n"
    "  - { name: p.g, shape: [8], init: positive }\n  - { name: p.b, shape: [8] }\n"
    "  - { name: p.m, shape: [8] }\n  - { name: p.v, shape: [8], init: positive }\n"
    "  - { name: q.g, shape: [8], init: positive }\n  - { name: q.b, shape: [8] }\n"
    "  - { name: q.m, shape: [8] }\n  - { name: q.v, shape: [8], init: positive }\n"
    "  - { name: m, shape: [8, 6] }\n  - { name: mb, shape: [6] }\n"
    "  - { name: gi, shape: [3], dtype: int64, values: [0, 4, 2] }\n"
    "  - { name: r.g, shape: [6], init: positive }\n  - { name: r.b, shape: [6] }\n"
    "  - { name: r.m, shape: [6] }\n  - { name: r.v, shape: [6], init: positive }\n"
    "nodes:\n";

#define CONV(n, x, w, extra) "  - { name: " n ", op: conv2d, inputs: [" x ", " w "], attrs: { padding: [1, 1]" extra " } }\n"
#define BN(n, x, p, tr) "  - { name: " n ", op: batch_norm, inputs: [" x ", " p ".g, " p ".b, " p ".m, " p ".v], attrs: { training: " tr " } }\n"
#define PW(n, op, ins) "  - { name: " n ", op: " op ", inputs: [" ins "] }\n"

typedef struct fuse_case {
    const char *rule;      /* shipped rule the positive graph must use */
    const char *nodes;     /* positive graph: nodes and outputs */
    const char *want;      /* "rule:node,node,..." of the group of the first node */
    const char *neg;       /* negative graph: nodes and outputs */
    const char *neg_want;  /* what the first node's group is instead */
    const char *why;       /* text expected in a near-miss note of the negative ("" for none) */
} fuse_case;

static const fuse_case CASES[] = {
    {"conv_act", CONV("c", "x", "w", "") PW("act", "relu6", "c") "outputs: [act]\n", "conv_act:c,act",
     CONV("c", "x", "w", "") PW("act", "relu6", "c") "outputs: [act, c]\n", "-:c", "c's output is a graph output"},
    {"conv_bn", CONV("c", "x", "w", "") BN("bn", "c", "p", "false") "outputs: [bn]\n", "conv_bn:c,bn",
     CONV("c", "x", "w", "") BN("bn", "c", "p", "true") "outputs: [bn]\n", "-:c",
     "bn not fused into c (rule conv_bn at rules/conv_bn.yaml"},
    {"conv_bn_act", CONV("c", "x", "w", "") BN("bn", "c", "p", "false") PW("act", "silu", "bn") "outputs: [act]\n",
     "conv_bn_act:c,bn,act",
     CONV("c", "x", "w", "") BN("bn", "c", "p", "false") PW("act", "silu", "bn") PW("t", "tanh", "bn")
         "outputs: [act, t]\n",
     "conv_bn:c,bn", "bn's output also feeds"},
    {"conv_bn_add_act",
     CONV("c", "x", "w", "") BN("bn", "c", "p", "false") PW("add", "add", "bn, x") PW("act", "relu", "add")
         "outputs: [act]\n",
     "conv_bn_add_act:c,bn,add,act",
     CONV("c", "x", "w", "") BN("bn", "c", "p", "true") PW("add", "add", "bn, x") PW("act", "relu", "add")
         "outputs: [act]\n",
     "-:c", "where \"training == false\" is false"},
    {"conv_add_act",
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n" PW("add", "add", "x, c")
         PW("act", "leaky_relu", "add") "outputs: [act]\n",
     "conv_add_act:c,add,act",
     CONV("c", "x", "w", "") PW("add", "add", "x, c") PW("act", "relu", "add") PW("s", "sigmoid", "c")
         "outputs: [act, s]\n",
     "-:c", "c's output also feeds"},
    {"dw_conv_bn_act", CONV("c", "x", "wd", ", groups: 8") BN("bn", "c", "p", "false") PW("act", "relu6", "bn") "outputs: [act]\n",
     "dw_conv_bn_act:c,bn,act",
     CONV("c", "x", "wg", ", groups: 2") BN("bn", "c", "p", "false") PW("act", "relu6", "bn") "outputs: [act]\n",
     "conv_bn_act:c,bn,act", ""},
    {"dw_conv_act", CONV("c", "x", "wd", ", groups: 8") PW("act", "hardswish", "c") "outputs: [act]\n",
     "dw_conv_act:c,act", CONV("c", "x", "w", "") PW("act", "hardswish", "c") "outputs: [act]\n", "conv_act:c,act", ""},
    {"matmul_bias_act",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("act", "gelu", "add") "outputs: [act]\n",
     "matmul_bias_act:mm,add,act",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("act", "gelu", "add")
         "outputs: [act, mm]\n",
     "-:mm", "mm's output is a graph output"},
    {"gemm_act", "  - { name: mm, op: gemm, inputs: [a, m, mb] }\n" PW("act", "tanh", "mm") "outputs: [act]\n",
     "gemm_act:mm,act",
     "  - { name: mm, op: gemm, inputs: [a, m, mb] }\n" PW("act", "tanh", "mm") PW("s", "sigmoid", "mm") "outputs: [act, s]\n",
     "-:mm", "mm's output also feeds"},
    {"gemm_bn_act", "  - { name: mm, op: gemm, inputs: [a, m] }\n" BN("bn", "mm", "r", "false") PW("act", "relu", "bn") "outputs: [act]\n",
     "gemm_bn_act:mm,bn,act",
     "  - { name: mm, op: gemm, inputs: [a, m] }\n" BN("bn", "mm", "r", "true") PW("act", "relu", "bn") "outputs: [act]\n",
     "-:mm", "where \"training == false\" is false"},
    {"matmul_softmax",
     "  - { name: mm, op: gemm, inputs: [a, m, mb] }\n" PW("sc", "mul", "mm, mb") "  - { name: sm, op: softmax, inputs: [sc] }\n"
     "outputs: [sm]\n",
     "matmul_softmax:mm,sc,sm",
     "  - { name: mm, op: gemm, inputs: [a, m, mb] }\n"
     "  - { name: sm, op: softmax, inputs: [mm], attrs: { axis: 0 } }\noutputs: [sm]\n",
     "-:mm", "does not normalize the matmul's last axis alone"},
    {"bn_bn", BN("bn1", "x", "p", "false") BN("bn2", "bn1", "q", "false") PW("act", "relu", "bn2") "outputs: [act]\n",
     "bn_bn:bn1,bn2,act",
     BN("bn1", "x", "p", "false") BN("bn2", "bn1", "q", "true") "outputs: [bn2]\n", "-:bn1",
     "bn2 not fused into bn1 (rule bn_bn"},
    {"bn_pointwise", BN("bn", "x", "p", "false") PW("act", "relu", "bn") PW("add", "add", "act, x") "outputs: [add]\n",
     "bn_pointwise:bn,act,add",
     BN("bn", "x", "p", "true") PW("act", "relu", "bn") PW("add", "add", "act, x") "outputs: [add]\n", "-:bn", ""},
    {"pointwise_chain", PW("r", "relu", "x") PW("s", "sigmoid", "r") PW("mul", "mul", "s, x") "outputs: [mul]\n",
     "pointwise_chain:r,s,mul",
     /* (not s * r: that is silu(r), which a rewrite makes one op) */
     PW("r", "relu", "x") PW("s", "sigmoid", "r") PW("add", "add", "s, r") "outputs: [add]\n", "pointwise_chain:r",
     "r's output also feeds"},
    {"copy_chain",
     "  - { name: r1, op: reshape, inputs: [x], attrs: { shape: [1, 2, 4, 36] } }\n"
     "  - { name: t1, op: transpose, inputs: [r1], attrs: { perm: [0, 2, 1, 3] } }\noutputs: [t1]\n",
     "copy_chain:r1,t1",
     "  - { name: r1, op: reshape, inputs: [x], attrs: { shape: [1, 2, 4, 36] } }\n"
     "  - { name: t1, op: transpose, inputs: [r1], attrs: { perm: [0, 2, 1, 3] } }\noutputs: [t1, r1]\n",
     "-:r1", "r1's output is a graph output"},
    {"copy_bn_act",
     "  - { name: t1, op: transpose, inputs: [x], attrs: { perm: [0, 1, 3, 2] } }\n" BN("bn", "t1", "p", "false")
     PW("act", "relu", "bn") "outputs: [act]\n",
     "copy_bn_act:t1,bn,act",
     "  - { name: t1, op: transpose, inputs: [x], attrs: { perm: [0, 1, 3, 2] } }\n" BN("bn", "t1", "p", "true")
     PW("act", "relu", "bn") "outputs: [act]\n",
     "-:t1", "bn not fused into t1 (rule copy_bn_act"},
    {"copy_act",
     "  - { name: t1, op: transpose, inputs: [x], attrs: { perm: [0, 1, 3, 2] } }\n" PW("act", "relu6", "t1")
     "outputs: [act]\n",
     "copy_act:t1,act",
     "  - { name: t1, op: transpose, inputs: [x], attrs: { perm: [0, 1, 3, 2] } }\n" PW("act", "relu6", "t1")
     "outputs: [act, t1]\n",
     "-:t1", "t1's output is a graph output"},
    {"shuffle_conv",
     "  - { name: r1, op: reshape, inputs: [x], attrs: { shape: [1, 2, 4, 6, 6] } }\n"
     "  - { name: t1, op: transpose, inputs: [r1], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: r2, op: reshape, inputs: [t1], attrs: { shape: [1, 8, 6, 6] } }\n"
     CONV("c", "r2", "wd", ", groups: 8") BN("bn", "c", "p", "false") "outputs: [bn]\n",
     "shuffle_conv:r1,t1,r2,c,bn",
     "  - { name: r1, op: reshape, inputs: [x], attrs: { shape: [1, 2, 4, 6, 6] } }\n"
     "  - { name: t1, op: transpose, inputs: [r1], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: r2, op: reshape, inputs: [t1], attrs: { shape: [1, 8, 6, 6] } }\n"
     CONV("c", "r2", "wd", ", groups: 8") BN("bn", "c", "p", "false") "outputs: [bn, t1]\n",
     "copy_chain:r1,t1", "t1's output is a graph output"},
    {"layer_norm_epilogue",
     "  - { name: ln, op: layer_norm, inputs: [a, p.g, p.b] }\n" PW("act", "gelu", "ln") "outputs: [act]\n",
     "layer_norm_epilogue:ln,act",
     "  - { name: ln, op: layer_norm, inputs: [a, p.g, p.b] }\n" PW("act", "gelu", "ln") "outputs: [act, ln]\n",
     "-:ln", "ln's output is a graph output"},
    {"conv_transpose_act",
     "  - { name: t, op: conv_transpose2d, inputs: [x, w, b], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
     PW("act", "relu", "t") "outputs: [act]\n", "conv_transpose_act:t,act",
     "  - { name: t, op: conv_transpose2d, inputs: [x, w, b], attrs: { stride: [2, 2] } }\n"
     PW("act", "relu", "t") "outputs: [act, t]\n", "-:t", "t's output is a graph output"},
    {"gather_pointwise",
     "  - { name: g, op: gather, inputs: [a, gi] }\n" PW("act", "relu", "g") "outputs: [act]\n", "gather_pointwise:g,act",
     "  - { name: g, op: gather, inputs: [a, gi] }\n" PW("act", "relu", "g") "outputs: [act, g]\n", "-:g",
     "g's output is a graph output"},
    {"resize_pointwise",
     "  - { name: r, op: resize, inputs: [x], attrs: { mode: linear, scale_h: 2.0, scale_w: 2.0 } }\n"
     PW("s", "sigmoid", "r") PW("act", "relu", "s") "outputs: [act]\n", "resize_pointwise:r,s,act",
     "  - { name: r, op: resize, inputs: [x], attrs: { size: [9, 9] } }\n"
     PW("s", "sigmoid", "r") PW("mu", "add", "s, r") "outputs: [mu]\n", "-:r", "r's output also feeds"},
    {"attention",
     "  - { name: qk, op: matmul, inputs: [a, a], attrs: { trans_b: true } }\n"
     "  - { name: sm, op: softmax, inputs: [qk] }\n  - { name: pv, op: matmul, inputs: [sm, a] }\noutputs: [pv]\n",
     "attention:qk,sm,pv",
     "  - { name: qk, op: matmul, inputs: [a, a], attrs: { trans_b: true } }\n"
     "  - { name: sm, op: softmax, inputs: [qk] }\n  - { name: pv, op: matmul, inputs: [sm, a] }\noutputs: [pv, sm]\n",
     "matmul_softmax:qk,sm", "sm's output is a graph output"},
    {"matmul_gated",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("mul", "mul", "add, mb")
     "outputs: [mul]\n",
     "matmul_gated:mm,add,mul",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("mul", "mul", "add, mb")
     "outputs: [mul, add]\n",
     "matmul_bias_act:mm,add", "add's output is a graph output"},
    {"matmul_bias_residual",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("res", "add", "mb, add")
     "outputs: [res]\n",
     "matmul_bias_residual:mm,add,res",
     "  - { name: mm, op: matmul, inputs: [a, m] }\n" PW("add", "add", "mm, mb") PW("res", "add", "mb, add")
     "outputs: [res, add]\n",
     "matmul_bias_act:mm,add", "add's output is a graph output"},
};

/* The loader refuses `training: true` (no kernel computes batch
 * statistics), so a case's batch norms written with it are loaded with
 * `training: false` and put in training mode afterwards, for the rules'
 * `where` to refuse. */
static fg_graph *parse_case(const char *nodes)
{
    fg_buf b = {0};
    char names[8][32];
    int ntrain = 0;
    fg_buf_put(&b, HEADER);
    for (const char *q = nodes, *t; *q; q = t + strlen("training: true")) {
        if (!(t = strstr(q, "training: true"))) {
            fg_buf_put(&b, q);
            break;
        }
        const char *nm = t;
        while (nm > nodes && strncmp(nm, "{ name: ", 8) != 0)
            nm--;
        assert_true(ntrain < 8);
        snprintf(names[ntrain++], 32, "%.*s", (int)strcspn(nm + 8, ","), nm + 8);
        fg_buf_putn(&b, q, (size_t)(t - q));
        fg_buf_put(&b, "training: false");
    }
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(g_ctx, "case.yaml", b.s, b.len, &g);
    if (st != FG_OK) {
        tu_dump_errors(g_ctx);
        fprintf(stderr, "%s", b.s);
    }
    assert_int_equal(st, FG_OK);
    for (int k = 0; k < ntrain; k++) {
        fg_node *bn = &g->nodes[fg_graph_find_node(g, names[k])];
        for (int a = 0; a < bn->op->nattrs; a++)
            if (strcmp(bn->op->attrs[a].name, "training") == 0)
                bn->attrs[a].i = 1;
    }
    fg_buf_free(&b);
    return g;
}

/* The plan's folded graph computes the source graph's outputs (fp32 weights,
 * double arithmetic): relative L2 below 1e-5. */
static void check_numerics(fg_context *ctx, const fg_graph *g, const fg_plan *p, const char *what)
{
    double **a = calloc((size_t)g->ntensors, sizeof *a), **b = calloc((size_t)p->graph->ntensors, sizeof *b);
    fg_reference_random_inputs(g, 99, a);
    fg_reference_random_inputs(p->graph, 99, b);
    assert_int_equal(fg_reference_run(ctx, g, a), FG_OK);
    assert_int_equal(fg_reference_run(ctx, p->graph, b), FG_OK);
    for (int i = 0; i < g->noutputs; i++) {
        int t = g->outputs[i];
        double err = fg_rel_l2(b[t], a[t], fg_tensor_numel(&g->tensors[t]), NULL);
        if (!(err < 1e-5))
            fail_msg("%s: output %s folded vs unfused rel l2 %g", what, g->tensors[t].name, err);
    }
    fg_reference_free(g, a);
    fg_reference_free(p->graph, b);
    free(a);
    free(b);
}

static const char *first_node(const fg_graph *g) { return g->nodes[0].name; }

static void test_every_rule_fuses(void **state)
{
    (void)state;
    for (size_t i = 0; i < FG_COUNTOF(CASES); i++) {
        const fuse_case *c = &CASES[i];
        assert_true(fg_ctx_find_rule(g_ctx, c->rule) >= 0);
        fg_graph *g = parse_case(c->nodes);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
        const char *got = tu_group_desc(g_ctx, p, first_node(g));
        if (strcmp(got, c->want) != 0)
            fail_msg("rule %s: group is %s, want %s", c->rule, got, c->want);
        int folds = g_ctx->rules[fg_ctx_find_rule(g_ctx, c->rule)]->nfolds;
        fg_plan_stats s;
        fg_plan_get_stats(p, &s);
        if (folds)
            assert_true(s.folded >= 1);
        check_numerics(g_ctx, g, p, c->rule);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

static void test_every_rule_refuses(void **state)
{
    (void)state;
    for (size_t i = 0; i < FG_COUNTOF(CASES); i++) {
        const fuse_case *c = &CASES[i];
        fg_graph *g = parse_case(c->neg);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(g_ctx, g, &p), FG_OK);
        const char *got = tu_group_desc(g_ctx, p, first_node(g));
        if (strcmp(got, c->neg_want) != 0)
            fail_msg("rule %s, must-not-fuse case: group is %s, want %s", c->rule, got, c->neg_want);
        if (c->why[0]) {
            int found = 0;
            for (int k = 0; k < p->nnotes && !found; k++)
                found = strstr(p->notes[k], c->why) != NULL;
            if (!found) {
                for (int k = 0; k < p->nnotes; k++)
                    fprintf(stderr, "  note: %s\n", p->notes[k]);
                fail_msg("rule %s: no note says '%s'", c->rule, c->why);
            }
        }
        /* numerics hold whatever was fused */
        check_numerics(g_ctx, g, p, c->rule);
        fg_plan_free(p);
        fg_graph_free(g);
    }
}

/* Every shipped rule has a case above. */
static void test_cases_cover_rules(void **state)
{
    (void)state;
    assert_true(g_ctx->nrules > 0);
    for (int r = 0; r < g_ctx->nrules; r++) {
        int found = 0;
        for (size_t i = 0; i < FG_COUNTOF(CASES) && !found; i++)
            found = strcmp(CASES[i].rule, g_ctx->rules[r]->name) == 0;
        if (!found)
            fail_msg("shipped rule %s has no fuse / must-not-fuse case in test_shipped_rules.c", g_ctx->rules[r]->name);
    }
}

/* A new activation and a new rule, as data only: the planner fuses them. */
static void test_new_rule_without_c(void **state)
{
    (void)state;
    char *dir = tu_vocab_dir();
    free(tu_write(dir, "squash.yaml",
                  "op: squash\nkind: pointwise\ninputs: [x]\n"
                  "attrs: { k: { type: float, default: 2.0 } }\n"
                  "expr: \"x / (1 + abs(x)) * k\"\n"
                  "---\n"
                  "rule: conv_squash\npriority: 50\n"
                  "match:\n  - conv: { op: conv2d }\n  - sq: { op: squash, where: \"k > 1\" }\n"
                  "kernel:\n  template: conv2d\n  epilogue: [ { bias: conv.bias }, { apply: sq } ]\n"));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const char *yaml = "graph: sq\ninputs: [ { name: x, shape: [1, 3, 5, 5] } ]\n"
                       "weights: [ { name: w, shape: [4, 3, 3, 3] }, { name: b, shape: [4] } ]\n"
                       "nodes:\n"
                       "  - { name: c, op: conv2d, inputs: [x, w, b] }\n"
                       "  - { name: s, op: squash, inputs: [c], attrs: { k: 3.0 } }\n"
                       "  - { name: c2, op: conv2d, inputs: [s, w2] }\n"
                       "  - { name: s2, op: squash, inputs: [c2], attrs: { k: 0.5 } }\n"
                       "outputs: [s2]\n";
    /* c2 needs w2 [4, 4, 1, 1]: splice it into the weights list */
    fg_buf b = {0};
    const char *cut = strstr(yaml, " ]\nnodes:");
    fg_buf_putn(&b, yaml, (size_t)(cut - yaml));
    fg_buf_put(&b, ", { name: w2, shape: [4, 4, 1, 1] }");
    fg_buf_put(&b, cut);
    fg_graph *g = NULL;
    st = fg_graph_parse(ctx, "sq.yaml", b.s, b.len, &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_buf_free(&b);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_string_equal(tu_group_desc(ctx, p, "c"), "conv_squash:c,s");
    /* where "k > 1" is false for s2 */
    assert_string_equal(tu_group_desc(ctx, p, "c2"), "-:c2");
    const fg_group *grp = &p->groups[p->node_group[fg_graph_find_node(p->graph, "c")]];
    assert_int_equal(grp->nepi, 2);
    assert_int_equal(grp->epi[0].kind, FG_EPI_BIAS);
    assert_int_equal(grp->epi[1].kind, FG_EPI_APPLY);
    assert_string_equal(p->graph->nodes[grp->epi[1].node].op->name, "squash");
    int found = 0;
    for (int k = 0; k < p->nnotes; k++)
        found |= strstr(p->notes[k], "s2 not fused into c2 (rule conv_squash") != NULL &&
                 strstr(p->notes[k], "where \"k > 1\" is false") != NULL;
    assert_true(found);
    check_numerics(ctx, g, p, "conv_squash");
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_cover_rules),
        cmocka_unit_test(test_every_rule_fuses),
        cmocka_unit_test(test_every_rule_refuses),
        cmocka_unit_test(test_new_rule_without_c),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
