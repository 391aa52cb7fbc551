/* test_graph_load.c -- model graphs from YAML (fg_graph_parse / _load):
 * parsed structures, topological order, shape inference, generated weights,
 * the graph helpers of ir.h, and one case per kind of bad input with its
 * located message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *const OPS =
    "op: conv2d\n"
    "kind: conv2d\n"
    "inputs: [x, weight, bias?]\n"
    "attrs:\n"
    "  stride:   { type: ints, len: 2, default: [1, 1] }\n"
    "  padding:  { type: ints, len: 2, default: [0, 0] }\n"
    "  dilation: { type: ints, len: 2, default: [1, 1] }\n"
    "  groups:   { type: int, default: 1 }\n"
    "---\n"
    "- { op: relu, kind: pointwise, expr: \"x > 0 ? x : 0\" }\n"
    "- { op: add, kind: pointwise, inputs: [a, b], expr: a + b }\n"
    "- op: prelu\n"
    "  kind: pointwise\n"
    "  inputs: [x, { name: slope, per_channel: true }]\n"
    "  expr: \"x > 0 ? x : slope * x\"\n"
    "- op: leaky_relu\n"
    "  kind: pointwise\n"
    "  attrs: { alpha: { type: float, default: 0.01 } }\n"
    "  expr: \"x > 0 ? x : alpha * x\"\n"
    "- op: gemm\n"
    "  kind: matmul\n"
    "  inputs: [a, b, bias?]\n"
    "  attrs: { trans_a: { type: bool, default: false }, trans_b: { type: bool, default: false } }\n"
    "- op: batch_norm\n"
    "  kind: batch_norm\n"
    "  inputs: [x, gamma, beta, mean, var]\n"
    "  attrs: { eps: { type: float, default: 1e-5 }, training: { type: bool, default: false } }\n"
    "  expr: (x - mean) * rsqrt(var + eps) * gamma + beta\n"
    "- op: maxpool\n"
    "  kind: pool2d\n"
    "  reduce: max\n"
    "  attrs:\n"
    "    kernel:  { type: ints, len: 2 }\n"
    "    stride:  { type: ints, len: 2, default: [1, 1] }\n"
    "    padding: { type: ints, len: 2, default: [0, 0] }\n"
    "- { op: gap, kind: global_pool }\n"
    "- { op: flatten, kind: flatten }\n";

static fg_context *ctx_ops(void)
{
    char *dir = tu_tmpdir();
    free(tu_write(dir, "ops.yaml", OPS));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    tu_rmtree(dir);
    free(dir);
    return ctx;
}

static fg_graph *parse_ok(fg_context *ctx, const char *text)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", text, strlen(text), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_non_null(g);
    return g;
}

/* Expects the text to fail with a message containing needle (which starts
 * with "g.yaml:line:col: error: ..."); returns the context for more checks. */
static fg_context *parse_bad(const char *text, const char *needle)
{
    fg_context *ctx = ctx_ops();
    fg_graph *g = (fg_graph *)1;
    fg_status st = fg_graph_parse(ctx, "g.yaml", text, strlen(text), &g);
    if (st != FG_ERR_INPUT || !tu_has_error(ctx, needle)) {
        fprintf(stderr, "expected: %s\n", needle);
        tu_dump_errors(ctx);
    }
    assert_int_equal(st, FG_ERR_INPUT);
    assert_null(g);
    assert_true(tu_has_error(ctx, needle));
    return ctx;
}

static void expect_bad(const char *text, const char *needle) { fg_context_free(parse_bad(text, needle)); }

static const fg_tensor *tensor(const fg_graph *g, const char *name)
{
    int i = fg_graph_find_tensor(g, name);
    assert_true(i >= 0);
    return &g->tensors[i];
}

static void assert_shape(const fg_tensor *t, int rank, const int64_t *want)
{
    assert_int_equal(t->rank, rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(t->shape[i], want[i]);
}

/* A residual block with the nodes listed out of order. */
static const char *const BLOCK =
    "graph: block\n"
    "seed: 42\n"
    "dtype: fp16\n"
    "layout: NHWC\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 8, 10, 10] }\n"
    "weights:\n"
    "  - { name: c1.w, shape: [8, 8, 3, 3] }\n"
    "  - { name: c2.w, shape: [16, 4, 3, 3] }\n"
    "  - { name: c2.b, shape: [16], init: zeros }\n"
    "  - { name: bn.g, shape: [16], init: ones }\n"
    "  - { name: bn.b, shape: [16], uniform: [-0.25, 0.25] }\n"
    "  - { name: bn.m, shape: [16] }\n"
    "  - { name: bn.v, shape: [16], init: positive }\n"
    "  - { name: sl, shape: [16], values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] }\n"
    "nodes:\n"
    "  - { name: out, op: add, inputs: [p, p] }\n"
    "  - { name: r1, op: relu, inputs: [c1] }\n"
    "  - { name: c1, op: conv2d, inputs: [x, c1.w], attrs: { padding: [1, 1] } }\n"
    "  - { name: c2, op: conv2d, inputs: [r1, c2.w, c2.b], attrs: { stride: [2, 2], groups: 2 } }\n"
    "  - { name: bn, op: batch_norm, inputs: [c2, bn.g, bn.b, bn.m, bn.v], output: bn_out }\n"
    "  - { name: p, op: prelu, inputs: [bn_out, sl] }\n"
    "outputs: [out, r1]\n";

static void test_good_block(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    fg_graph *g = parse_ok(ctx, BLOCK);
    assert_string_equal(g->name, "block");
    assert_null(g->path);
    assert_int_equal(g->seed, 42);
    assert_int_equal(g->nnodes, 6);
    assert_int_equal(g->ntensors, 1 + 8 + 6);
    /* topological order, stable in file order among ready nodes */
    const char *order[] = {"c1", "r1", "c2", "bn", "p", "out"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(g->nodes[i].name, order[i]);
    assert_int_equal(fg_graph_find_node(g, "bn"), 3);
    assert_int_equal(fg_graph_find_node(g, "nope"), -1);
    /* shapes */
    assert_shape(tensor(g, "c1"), 4, (int64_t[]){1, 8, 10, 10});
    assert_shape(tensor(g, "c2"), 4, (int64_t[]){1, 16, 4, 4});
    assert_shape(tensor(g, "bn_out"), 4, (int64_t[]){1, 16, 4, 4});
    assert_shape(tensor(g, "out"), 4, (int64_t[]){1, 16, 4, 4});
    assert_int_equal(fg_graph_find_tensor(g, "bn"), -1); /* the output was renamed */
    /* dtype/layout defaults carried through */
    assert_int_equal(tensor(g, "x")->dtype, FG_DTYPE_F16);
    assert_int_equal(tensor(g, "x")->layout, FG_LAYOUT_NHWC);
    assert_int_equal(tensor(g, "out")->dtype, FG_DTYPE_F16);
    assert_int_equal(tensor(g, "out")->layout, FG_LAYOUT_NHWC);
    /* producers and consumers */
    assert_int_equal(tensor(g, "x")->producer, -1);
    assert_true(tensor(g, "x")->is_input);
    assert_int_equal(tensor(g, "c2")->producer, 2);
    assert_int_equal(tensor(g, "p")->nconsumers, 2);
    assert_true(tensor(g, "out")->is_output);
    assert_true(tensor(g, "r1")->is_output);
    assert_false(tensor(g, "c1")->is_output);
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(g->outputs[1], fg_graph_find_tensor(g, "r1"));
    assert_int_equal(g->ninputs, 1);
    /* attributes: given and default */
    const fg_node *c2 = &g->nodes[2];
    assert_int_equal(fg_node_attr_int(c2, "stride", 1), 2);
    assert_int_equal(fg_node_attr_int(c2, "padding", 0), 0);
    assert_int_equal(fg_node_attr_int(c2, "groups", 0), 2);
    assert_int_equal(fg_node_attr(c2, "dilation")->n, 2);
    assert_null(fg_node_attr(c2, "alpha"));
    assert_true(fg_node_attr_float(&g->nodes[3], "eps") == 1e-5);
    assert_int_equal(g->nodes[0].inputs[2], -1); /* omitted optional bias */
    assert_int_equal(c2->inputs[2], fg_graph_find_tensor(g, "c2.b"));
    /* weight initialisation kinds */
    const fg_tensor *w;
    w = tensor(g, "c2.b");
    for (int i = 0; i < 16; i++)
        assert_true(w->data[i] == 0.0f);
    w = tensor(g, "bn.g");
    for (int i = 0; i < 16; i++)
        assert_true(w->data[i] == 1.0f);
    w = tensor(g, "bn.v");
    for (int i = 0; i < 16; i++)
        assert_true(w->data[i] >= 0.5f && w->data[i] < 1.5f);
    w = tensor(g, "bn.b");
    for (int i = 0; i < 16; i++)
        assert_true(w->data[i] >= -0.25f && w->data[i] <= 0.25f);
    w = tensor(g, "bn.m"); /* fan_in of a rank-1 weight: uniform [-1, 1) */
    int neg = 0;
    for (int i = 0; i < 16; i++) {
        assert_true(w->data[i] >= -1.0f && w->data[i] <= 1.0f);
        neg += w->data[i] < 0;
    }
    assert_true(neg > 0 && neg < 16);
    w = tensor(g, "sl");
    for (int i = 0; i < 16; i++)
        assert_true(w->data[i] == (float)(i + 1));
    w = tensor(g, "c1.w"); /* fan_in = 8*3*3 = 72 */
    float bound = 1.0f / sqrtf(72.0f), maxabs = 0;
    for (int i = 0; i < 8 * 8 * 9; i++) {
        assert_true(fabsf(w->data[i]) <= bound);
        if (fabsf(w->data[i]) > maxabs)
            maxabs = fabsf(w->data[i]);
    }
    assert_true(maxabs > 0.9f * bound); /* uses the whole range */
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* Replaces the seed line of BLOCK and reorders its weights. */
static char *block_variant(int seed, int reorder)
{
    fg_buf b = {0};
    const char *w1 = "  - { name: c1.w, shape: [8, 8, 3, 3] }\n";
    const char *rest = strstr(BLOCK, "nodes:");
    const char *ws = strstr(BLOCK, "weights:\n") + strlen("weights:\n");
    fg_buf_putn(&b, BLOCK, (size_t)(strstr(BLOCK, "seed:") - BLOCK));
    fg_buf_printf(&b, "seed: %d\n", seed);
    const char *after_seed = strchr(strstr(BLOCK, "seed:"), '\n') + 1;
    fg_buf_putn(&b, after_seed, (size_t)(ws - after_seed));
    if (reorder) {
        /* c1.w last instead of first */
        fg_buf_putn(&b, ws + strlen(w1), (size_t)(rest - ws - strlen(w1)));
        fg_buf_put(&b, w1);
    } else {
        fg_buf_putn(&b, ws, (size_t)(rest - ws));
    }
    fg_buf_put(&b, rest);
    return fg_buf_take(&b);
}

static void test_deterministic_weights(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    char *t42 = block_variant(42, 0), *t42r = block_variant(42, 1), *t7 = block_variant(7, 0);
    fg_graph *a = parse_ok(ctx, t42), *b = parse_ok(ctx, t42), *c = parse_ok(ctx, t42r), *d = parse_ok(ctx, t7);
    const char *names[] = {"c1.w", "c2.w", "bn.m", "bn.v", "bn.b"};
    for (size_t k = 0; k < FG_COUNTOF(names); k++) {
        const fg_tensor *ta = tensor(a, names[k]), *tb = tensor(b, names[k]), *tc = tensor(c, names[k]),
                        *td = tensor(d, names[k]);
        size_t bytes = sizeof(float) * (size_t)fg_tensor_numel(ta);
        assert_memory_equal(ta->data, tb->data, bytes); /* same seed, same data */
        assert_memory_equal(ta->data, tc->data, bytes); /* declaration order does not matter */
        assert_memory_not_equal(ta->data, td->data, bytes); /* another seed, other data */
    }
    /* two weights of the same shape get different streams */
    assert_memory_not_equal(tensor(a, "bn.m")->data, tensor(a, "bn.b")->data, 16 * sizeof(float));
    fg_graph_free(a);
    fg_graph_free(b);
    fg_graph_free(c);
    fg_graph_free(d);
    free(t42);
    free(t42r);
    free(t7);
    fg_context_free(ctx);
}

static void test_shapes_other_kinds(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    fg_graph *g = parse_ok(ctx,
                           "graph: kinds\n"
                           "inputs:\n"
                           "  - { name: x, shape: [2, 3, 9, 9] }\n"
                           "  - { name: a, shape: [4, 5, 6] }\n"
                           "weights:\n"
                           "  - { name: b, shape: [7, 6] }\n"
                           "  - { name: bias, shape: [5, 1] }\n"
                           "nodes:\n"
                           "  - { name: mp, op: maxpool, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
                           "  - { name: gp, op: gap, inputs: [mp] }\n"
                           "  - { name: fl, op: flatten, inputs: [mp] }\n"
                           "  - { name: mm, op: gemm, inputs: [a, b, bias], attrs: { trans_b: true } }\n"
                           "  - { name: lr, op: leaky_relu, inputs: [mm], attrs: { alpha: 1 } }\n"
                           "outputs: [gp, fl, lr]\n");
    assert_shape(tensor(g, "mp"), 4, (int64_t[]){2, 3, 5, 5});
    assert_shape(tensor(g, "gp"), 4, (int64_t[]){2, 3, 1, 1});
    assert_shape(tensor(g, "fl"), 2, (int64_t[]){2, 75});
    assert_shape(tensor(g, "mm"), 3, (int64_t[]){4, 5, 7});
    assert_shape(tensor(g, "lr"), 3, (int64_t[]){4, 5, 7});
    /* an integer literal for a float attribute */
    const fg_node *lr = &g->nodes[fg_graph_find_node(g, "lr")];
    assert_int_equal(fg_node_attr(lr, "alpha")->type, FG_ATTR_FLOAT);
    assert_true(fg_node_attr_float(lr, "alpha") == 1.0);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_null_optional_input(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    fg_graph *g = parse_ok(ctx,
                           "graph: n\ninputs: [ { name: x, shape: [1, 2, 4, 4] } ]\n"
                           "weights: [ { name: w, shape: [2, 2, 1, 1] } ]\n"
                           "nodes: [ { name: c, op: conv2d, inputs: [x, w, ~] } ]\noutputs: [c]\n");
    assert_int_equal(g->nodes[0].inputs[2], -1);
    assert_int_equal(g->nodes[0].ninputs, 3);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_graph_helpers(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    fg_graph *g = parse_ok(ctx, BLOCK);
    fg_graph *c = fg_graph_clone(g);
    assert_int_equal(c->nnodes, g->nnodes);
    assert_int_equal(c->ntensors, g->ntensors);
    const fg_tensor *w = tensor(g, "c1.w");
    fg_tensor *cw = &c->tensors[fg_graph_find_tensor(c, "c1.w")];
    /* weights are borrowed until written through fg_tensor_own */
    assert_true(cw->borrowed);
    assert_ptr_equal(w->data, cw->data);
    float *own = fg_tensor_own(cw);
    assert_false(cw->borrowed);
    assert_ptr_not_equal(w->data, own);
    assert_memory_equal(w->data, own, sizeof(float) * (size_t)fg_tensor_numel(w));
    assert_ptr_not_equal(c->nodes, g->nodes);
    assert_int_equal(c->outputs[0], g->outputs[0]);
    cw->data[0] = 123.0f;
    assert_true(w->data[0] != 123.0f);
    /* a pending per-slice scale: values see it, the data does not change
     * until it is made private */
    {
        fg_tensor *sw = &c->tensors[fg_graph_find_tensor(c, "c1.w")];
        int64_t n = fg_tensor_numel(sw), k = sw->shape[0], per = n / k;
        float *before = fg_xmalloc((size_t)n * sizeof *before), *v = fg_xmalloc((size_t)n * sizeof *v);
        memcpy(before, sw->data, (size_t)n * sizeof *before);
        double *s = fg_xmalloc((size_t)k * sizeof *s);
        for (int64_t i = 0; i < k; i++)
            s[i] = 0.5 + (double)i;
        fg_tensor_scale(sw, 0, s);
        fg_tensor_scale(sw, 0, s);   /* composes: s^2 */
        assert_memory_equal(sw->data, before, (size_t)n * sizeof *before);
        fg_tensor_values(sw, v);
        for (int64_t i = 0; i < n; i++)
            assert_true(v[i] == (float)((double)before[i] * (s[i / per] * s[i / per])));
        float *own = fg_tensor_own(sw);
        assert_null(sw->scale);
        assert_memory_equal(own, v, (size_t)n * sizeof *v);
        free(before);
        free(v);
        free(s);
    }
    /* append a node reading r1 twice */
    fg_tensor t = *tensor(c, "r1");
    t.name = fg_intern(ctx, "extra");
    t.is_output = 0;
    int ti = fg_graph_add_tensor(c, &t);
    fg_node n = c->nodes[fg_graph_find_node(c, "out")];
    n.name = fg_intern(ctx, "extra_node");
    n.inputs[0] = n.inputs[1] = fg_graph_find_tensor(c, "r1");
    n.output = ti;
    int ni = fg_graph_add_node(c, &n);
    assert_int_equal(ni, g->nnodes);
    assert_int_equal(tensor(c, "r1")->nconsumers, 1);
    fg_graph_recount(c);
    assert_int_equal(tensor(c, "r1")->nconsumers, 3);
    assert_int_equal(tensor(c, "extra")->producer, ni);
    assert_int_equal(tensor(g, "r1")->nconsumers, 1); /* the original is untouched */
    assert_int_equal(fg_tensor_numel(tensor(g, "c1.w")), 576);
    assert_int_equal(fg_dtype_size(FG_DTYPE_F32), 4);
    assert_int_equal(fg_dtype_size(FG_DTYPE_F16), 2);
    assert_int_equal(fg_dtype_size(FG_DTYPE_BF16), 2);
    fg_graph_free(c);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_load_file(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    char *dir = tu_tmpdir();
    char *path = tu_write(dir, "block.yaml", BLOCK);
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_load(ctx, path, &g), FG_OK);
    assert_string_equal(g->path, path);
    assert_int_equal(g->nnodes, 6);
    fg_graph_free(g);
    char *missing = fg_path_join(dir, "missing.yaml");
    assert_int_equal(fg_graph_load(ctx, missing, &g), FG_ERR_IO);
    assert_null(g);
    assert_true(tu_has_error(ctx, "missing.yaml: error: cannot read graph"));
    free(missing);
    free(path);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

/* A 1000-node chain listed backwards: sorting and lookups stay fast. */
static void test_long_chain(void **state)
{
    (void)state;
    fg_context *ctx = ctx_ops();
    fg_buf b = {0};
    enum { N = 1000 };
    fg_buf_put(&b, "graph: chain\ninputs: [ { name: n0, shape: [1, 4, 2, 2] } ]\nnodes:\n");
    for (int i = N; i >= 1; i--)
        fg_buf_printf(&b, "  - { name: n%d, op: %s, inputs: [n%d] }\n", i, i % 2 ? "relu" : "leaky_relu", i - 1);
    fg_buf_printf(&b, "outputs: [n%d]\n", N);
    double t0 = fg_now();
    fg_graph *g = parse_ok(ctx, b.s);
    double dt = fg_now() - t0;
    assert_int_equal(g->nnodes, N);
    for (int i = 0; i < N; i++) {
        char want[16];
        snprintf(want, sizeof want, "n%d", i + 1);
        assert_string_equal(g->nodes[i].name, want);
    }
    assert_shape(tensor(g, "n1000"), 4, (int64_t[]){1, 4, 2, 2});
    assert_true(dt < 1.0);
    fg_graph_free(g);
    fg_buf_free(&b);
    fg_context_free(ctx);
}

/* ---- bad input -------------------------------------------------------- */

static const char *const HEAD = "graph: g\ninputs:\n  - { name: x, shape: [1, 32, 56, 56] }\n";

static char *with_head(const char *rest)
{
    fg_buf b = {0};
    fg_buf_put(&b, HEAD);
    fg_buf_put(&b, rest);
    return fg_buf_take(&b);
}

static void expect_bad_h(const char *rest, const char *needle)
{
    char *t = with_head(rest);
    expect_bad(t, needle);
    free(t);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_bad("graph: g\ninputs: [ { name: x, shape: [1, 2 }\n", "g.yaml:2:");
    expect_bad("graph: g\nnodes:\n\t- { name: a }\n",
               "g.yaml:3:1: error: found character that cannot start any token (tab indentation is not allowed in "
               "YAML)");
    expect_bad("- 1\n- 2\n", "g.yaml:1:1: error: a graph file must be a mapping with a `graph:` key");
}

static void test_cycle(void **state)
{
    (void)state;
    expect_bad_h("nodes:\n"
                 "  - { name: a, op: add, inputs: [x, b] }\n"
                 "  - { name: b, op: relu, inputs: [a] }\n"
                 "  - { name: c, op: relu, inputs: [b] }\n"
                 "outputs: [c]\n",
                 "g.yaml:5:5: error: cycle in graph: a -> b -> a");
    expect_bad_h("nodes:\n  - { name: s, op: add, inputs: [x, s] }\noutputs: [s]\n",
                 "g.yaml:5:5: error: cycle in graph: s -> s");
}

static void test_conv_channels(void **state)
{
    (void)state;
    expect_bad_h("weights:\n  - { name: w, shape: [64, 64, 3, 3] }\n"
                 "nodes:\n  - { name: conv1, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
                 "outputs: [conv1]\n",
                 "g.yaml:7:5: error: conv2d 'conv1': input has 32 channels but weight expects 64 (weight shape "
                 "[64, 64, 3, 3], groups 1)");
}

static void test_add_broadcast(void **state)
{
    (void)state;
    expect_bad_h("  - { name: y, shape: [1, 64, 56, 56] }\n"
                 "nodes:\n  - { name: add3, op: add, inputs: [y, x] }\noutputs: [add3]\n",
                 "g.yaml:6:5: error: add 'add3': shapes [1, 64, 56, 56] and [1, 32, 56, 56] do not broadcast");
}

static void test_matmul_k(void **state)
{
    (void)state;
    expect_bad("graph: m\ninputs: [ { name: a, shape: [4, 8] } ]\nweights: [ { name: b, shape: [16, 32] } ]\n"
               "nodes: [ { name: mm, op: gemm, inputs: [a, b] } ]\noutputs: [mm]\n",
               "g.yaml:4:10: error: gemm 'mm': a is [4, 8] (K = 8) but b is [16, 32] (K = 16)");
    expect_bad("graph: m\ninputs: [ { name: a, shape: [4, 8] } ]\n"
               "weights: [ { name: b, shape: [8, 32] }, { name: bias, shape: [4, 2] } ]\n"
               "nodes: [ { name: mm, op: gemm, inputs: [a, b, bias] } ]\noutputs: [mm]\n",
               "g.yaml:4:10: error: gemm 'mm': bias of shape [4, 2] does not broadcast onto [4, 32]");
}

static void test_other_shape_errors(void **state)
{
    (void)state;
    expect_bad_h("weights: [ { name: s, shape: [16] } ]\n"
                 "nodes: [ { name: p, op: prelu, inputs: [x, s] } ]\noutputs: [p]\n",
                 "g.yaml:5:10: error: prelu 'p': per-channel input 'slope' has shape [16] but the output [1, 32, 56, "
                 "56] has 32 channels");
    expect_bad_h("weights: [ { name: w, shape: [8, 32, 7, 7] }, { name: b, shape: [4] } ]\n"
                 "nodes: [ { name: c, op: conv2d, inputs: [x, w, b] } ]\noutputs: [c]\n",
                 "g.yaml:5:10: error: conv2d 'c': bias has shape [4] but the weight has 8 output channels");
    expect_bad_h("weights: [ { name: w, shape: [8, 32, 70, 3] } ]\n"
                 "nodes: [ { name: c, op: conv2d, inputs: [x, w] } ]\noutputs: [c]\n",
                 "g.yaml:5:10: error: conv2d 'c': output size would be -13 along axis 2");
    expect_bad_h("weights: [ { name: w, shape: [6, 8, 3, 3] } ]\n"
                 "nodes: [ { name: c, op: conv2d, inputs: [x, w], attrs: { groups: 4 } } ]\noutputs: [c]\n",
                 "g.yaml:5:10: error: conv2d 'c': output channels 6 (weight shape [6, 8, 3, 3]) are not divisible by "
                 "groups 4");
}

static void test_unknown_tensor(void **state)
{
    (void)state;
    expect_bad_h("nodes:\n  - { name: r, op: relu, inputs: [y] }\noutputs: [r]\n",
                 "g.yaml:5:35: error: unknown tensor 'y' (input 'x' of node 'r') (did you mean 'x'?)");
    expect_bad_h("nodes:\n  - { name: relu1, op: relu, inputs: [x] }\noutputs: [relu2]\n",
                 "g.yaml:6:11: error: unknown tensor 'relu2' in outputs (did you mean 'relu1'?)");
}

static void test_unknown_op(void **state)
{
    (void)state;
    expect_bad_h("nodes:\n  - { name: r, op: rleu, inputs: [x] }\noutputs: [r]\n",
                 "g.yaml:5:20: error: unknown op 'rleu' (did you mean 'relu'?)");
}

/* A mode no kernel computes (batch_norm's `training`, named by the op-kind
 * table) is refused at the attribute's value. */
static void test_mode_refused(void **state)
{
    (void)state;
    expect_bad_h("weights: [ { name: p, shape: [32] } ]\n"
                 "nodes: [ { name: bn, op: batch_norm, inputs: [x, p, p, p, p], attrs: { training: true } } ]\n"
                 "outputs: [bn]\n",
                 "g.yaml:5:82: error: batch_norm 'bn': training mode (batch statistics) is not supported; fusegen "
                 "runs inference with the stored mean and var: set training: false");
}

static void test_attr_errors(void **state)
{
    (void)state;
    const char *w = "weights: [ { name: w, shape: [8, 32, 3, 3] } ]\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%snodes:\n  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: 1.5 } }\n"
                              "outputs: [c]\n", w);
    expect_bad_h(buf, "g.yaml:6:61: error: attribute 'stride' of conv2d must be ints, got float 1.5");
    snprintf(buf, sizeof buf, "%snodes:\n  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [1, 1, 1] } }\n"
                              "outputs: [c]\n", w);
    expect_bad_h(buf, "g.yaml:6:61: error: attribute 'stride' of conv2d must have 2 values, got 3");
    snprintf(buf, sizeof buf, "%snodes:\n  - { name: c, op: conv2d, inputs: [x, w], attrs: { strid: [1, 1] } }\n"
                              "outputs: [c]\n", w);
    expect_bad_h(buf, "g.yaml:6:53: error: unknown attribute 'strid' for conv2d (did you mean 'stride'?)");
    expect_bad_h("nodes:\n  - { name: m, op: maxpool, inputs: [x] }\noutputs: [m]\n",
                 "g.yaml:5:5: error: maxpool 'm' needs attribute 'kernel' (ints, no default)");
}

static void test_input_counts(void **state)
{
    (void)state;
    expect_bad_h("nodes:\n  - { name: r, op: relu, inputs: [x, x] }\noutputs: [r]\n",
                 "g.yaml:5:38: error: too many inputs for relu 'r': it takes at most 1, got 2");
    expect_bad_h("nodes:\n  - { name: c, op: conv2d, inputs: [x] }\noutputs: [c]\n",
                 "g.yaml:5:36: error: conv2d 'c' needs input 'weight' (input 1): too few inputs");
    expect_bad_h("nodes:\n  - { name: c, op: conv2d, inputs: [x, ~] }\noutputs: [c]\n",
                 "g.yaml:5:40: error: conv2d 'c' needs input 'weight' (input 1)");
}

static void test_duplicates(void **state)
{
    (void)state;
    expect_bad_h("nodes:\n  - { name: r, op: relu, inputs: [x] }\n  - { name: r, op: relu, inputs: [x], output: r2 }\n"
                 "outputs: [r]\n",
                 "g.yaml:6:13: error: duplicate node name 'r' (first at line 5)");
    expect_bad_h("nodes:\n  - { name: x, op: relu, inputs: [x] }\noutputs: [x]\n",
                 "g.yaml:5:13: error: duplicate tensor name 'x' (first at line 3)");
}

static void test_weight_errors(void **state)
{
    (void)state;
    expect_bad_h("weights: [ { name: w, shape: [2, 2], values: [1, 2, 3] } ]\nnodes: []\noutputs: []\n",
                 "g.yaml:4:46: error: weight 'w' of shape [2, 2] needs 4 values, got 3");
    expect_bad_h("weights: [ { name: w, shape: [2, 0] } ]\nnodes: []\noutputs: []\n",
                 "g.yaml:4:34: error: dimension must be positive, got 0");
    expect_bad_h("weights: [ { name: w, shape: [2], init: fanin } ]\nnodes: []\noutputs: []\n",
                 "g.yaml:4:41: error: unknown init 'fanin' (did you mean 'fan_in'?)");
    expect_bad_h("weights: [ { name: w, shape: [65536, 65536] } ]\nnodes: []\noutputs: []\n",
                 "g.yaml:4:30: error: tensor 'w' is too large (more than 2^31 elements)");
    expect_bad_h("weights: [ { name: w, shape: [1024, 1024, 1024] } ]\nnodes: []\noutputs: []\n",
                 "g.yaml:4:30: error: weight 'w' has 1073741824 elements; a weight may have at most 268435456");
    expect_bad("graph: g\ndtype: fp64\nnodes: []\noutputs: []\n",
               "g.yaml:2:8: error: unknown dtype 'fp64' (did you mean 'fp32'?)");
}

static void test_many_errors(void **state)
{
    (void)state;
    fg_context *ctx = parse_bad("graph: g\n"
                                "seed: lots\n"
                                "inputs: [ { name: x, shape: [1, 3, 8, 8] } ]\n"
                                "nodes:\n"
                                "  - { name: a, op: rleu, inputs: [x] }\n"
                                "  - { name: b, op: relu, inputs: [xx] }\n"
                                "  - { name: c, op: relu, inputs: [x], colour: red }\n"
                                "outputs: [a, b, d]\n",
                                "g.yaml:2:7: error: seed must be an integer, got string 'lots'");
    assert_true(tu_has_error(ctx, "g.yaml:5:20: error: unknown op 'rleu'"));
    assert_true(tu_has_error(ctx, "g.yaml:6:35: error: unknown tensor 'xx'"));
    assert_true(tu_has_error(ctx, "g.yaml:7:39: error: unknown key 'colour' in a node"));
    assert_true(tu_has_error(ctx, "g.yaml:8:17: error: unknown tensor 'd' in outputs"));
    assert_true(fg_context_error_count(ctx) >= 5);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_block),
        cmocka_unit_test(test_deterministic_weights),
        cmocka_unit_test(test_shapes_other_kinds),
        cmocka_unit_test(test_null_optional_input),
        cmocka_unit_test(test_graph_helpers),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_conv_channels),
        cmocka_unit_test(test_add_broadcast),
        cmocka_unit_test(test_matmul_k),
        cmocka_unit_test(test_other_shape_errors),
        cmocka_unit_test(test_unknown_tensor),
        cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_mode_refused),
        cmocka_unit_test(test_attr_errors),
        cmocka_unit_test(test_input_counts),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_weight_errors),
        cmocka_unit_test(test_many_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
