/* test_reduce.c -- the reduce kind and log_softmax outside emulation
 * numerics (test_numerics.c has their emulation matrix,
 * tests/onnx/test_onnx_reduce.py the comparison with onnxruntime):
 *
 *  - every reduction, in each lane mapping of templates/reduce.cuh (a warp,
 *    a thread and a block per output, axes adjacent or not, keepdims both
 *    ways) and softmax / log_softmax in fp32 NCHW, and one of each mapping
 *    and log_softmax in fp16 / bf16, NHWC, and with shapes as parameters,
 *    compiles under NVRTC for sm_80 and sm_90 with an empty log; on sm_90
 *    no kernel uses local memory (cuobjdump; skipped with a note without
 *    it);
 *  - shape inference: keepdims, dropped axes, every axis dropped ([1]),
 *    negative axes;
 *  - located errors: an axis out of range or given twice in a graph, a
 *    reduce op definition without `reduce:` or with an unknown one.
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
#include "report_sass.h"
#include "testutil.h"

static const char graph_text[] =
    "graph: reduce_cover\n"
    "seed: 3\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 13, 7, 3] }\n"
    "  - { name: z, shape: [3, 4200] }\n"
    "  - { name: u, shape: [20000, 5] }\n"
    "nodes:\n"
    "  - { name: a, op: reduce_sum, inputs: [x], attrs: { axes: [2, 3] } }\n"           /* warp, contiguous */
    "  - { name: b, op: reduce_max, inputs: [x], attrs: { axes: [1] } }\n"              /* thread, outer axis */
    "  - { name: c, op: reduce_min, inputs: [x], attrs: { axes: [0, 2], keepdims: false } }\n"
    "  - { name: d, op: reduce_mean, inputs: [z], attrs: { axes: [1] } }\n"             /* block */
    "  - { name: e, op: reduce_log_sum_exp, inputs: [z], attrs: { axes: [-1], keepdims: false } }\n"
    "  - { name: f, op: reduce_prod, inputs: [u], attrs: { axes: [0] } }\n"             /* thread, many outputs */
    "  - { name: g, op: reduce_l1, inputs: [x], attrs: { axes: [0, 1, 2, 3], keepdims: false } }\n"
    "  - { name: h, op: reduce_l2, inputs: [u], attrs: { axes: [1] } }\n"
    "  - { name: i, op: reduce_sum_square, inputs: [x], attrs: { axes: [1, 3] } }\n"
    "  - { name: j, op: reduce_log_sum, inputs: [z], attrs: { axes: [0] } }\n"
    "  - { name: k, op: log_softmax, inputs: [x], attrs: { axis: 1 } }\n"
    "  - { name: l, op: softmax, inputs: [z], attrs: { axis: -1 } }\n"
    "  - { name: m, op: argmax, inputs: [x], attrs: { axes: [1] } }\n"                 /* index: thread, in order */
    "  - { name: n, op: argmin_last, inputs: [z], attrs: { axes: [1], keepdims: false } }\n"
    "outputs: [a, b, c, d, e, f, g, h, i, j, k, l, m, n]\n";

/* One of each lane mapping and log_softmax, compiled in every dtype and
 * layout (the full set above in fp32 NCHW only: NVRTC time). */
static const char small_text[] =
    "graph: reduce_small\n"
    "seed: 3\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 13, 7, 3] }\n"
    "  - { name: z, shape: [3, 4200] }\n"
    "nodes:\n"
    "  - { name: a, op: reduce_sum, inputs: [x], attrs: { axes: [2, 3] } }\n"
    "  - { name: b, op: reduce_max, inputs: [x], attrs: { axes: [1] } }\n"
    "  - { name: e, op: reduce_log_sum_exp, inputs: [z], attrs: { axes: [-1], keepdims: false } }\n"
    "  - { name: k, op: log_softmax, inputs: [x], attrs: { axis: 1 } }\n"
    "outputs: [a, b, e, k]\n";

static fg_graph *parse(fg_context *ctx, const char *text)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "reduce.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Emits every group of g's plan in dtype d and layout l, appending the
 * kernels whose source is new to ks. */
static void emit_all(fg_context *ctx, fg_graph *g, fg_dtype d, fg_layout l, int specialize, fg_kernel **ks, int *nk,
                     int *cap)
{
    for (int t = 0; t < g->ntensors; t++) {
        g->tensors[t].dtype = d;
        g->tensors[t].layout = l;
    }
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(p->ngroups, g->noutputs);
    fg_emit_opts o = {.specialize = specialize};
    for (int i = 0; i < p->ngroups; i++) {
        fg_kernel k;
        st = fg_emit_group(ctx, p, i, &o, &k);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        int dup = 0;
        for (int j = 0; j < *nk && !dup; j++)
            dup = strcmp((*ks)[j].source, k.source) == 0;
        if (dup)
            fg_kernel_free(&k);
        else
            *FG_PUSH(*ks, *nk, *cap) = k;
    }
    fg_plan_free(p);
}

static void test_nvrtc(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile every kernel for real */
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = parse(ctx, graph_text), *sg = parse(ctx, small_text);
    fg_kernel *ks = NULL;
    int nk = 0, cap = 0;
    emit_all(ctx, g, FG_DTYPE_F32, FG_LAYOUT_NCHW, 1, &ks, &nk, &cap);
    emit_all(ctx, sg, FG_DTYPE_F32, FG_LAYOUT_NCHW, 0, &ks, &nk, &cap);
    emit_all(ctx, sg, FG_DTYPE_F16, FG_LAYOUT_NHWC, 1, &ks, &nk, &cap);
    emit_all(ctx, sg, FG_DTYPE_F16, FG_LAYOUT_NCHW, 0, &ks, &nk, &cap);
    emit_all(ctx, sg, FG_DTYPE_BF16, FG_LAYOUT_NCHW, 1, &ks, &nk, &cap);
    emit_all(ctx, sg, FG_DTYPE_F32, FG_LAYOUT_NHWC, 1, &ks, &nk, &cap);
    /* the three lane mappings are there */
    int lanes[3] = {0, 0, 0};
    for (int i = 0; i < nk; i++) {
        lanes[0] += strstr(ks[i].source, "1 lane per output") != NULL;
        lanes[1] += strstr(ks[i].source, "32 lanes per output") != NULL;
        lanes[2] += strstr(ks[i].source, "256 lanes per output") != NULL;
    }
    print_message("%d distinct kernels; lanes per output 1: %d, 32: %d, 256: %d\n", nk, lanes[0], lanes[1], lanes[2]);
    assert_true(lanes[0] > 0 && lanes[1] > 0 && lanes[2] > 0);
    assert_int_equal(tu_nvrtc_clean(ctx, ks, nk), 2 * nk);
    if (tu_cuda_tools_found("no-local-memory check")) {   /* the binaries are sm_90's, compiled last */
        for (int i = 0; i < nk; i++) {
            fg_res_usage res;
            fg_sass_mix mix;
            tu_cubin_read(&ks[i], &res, &mix, NULL);
            if (res.stack || res.local)
                fail_msg("%s uses local memory on sm_90 (stack %d, local %d)", ks[i].name, res.stack, res.local);
        }
    }
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    fg_graph_free(g);
    fg_graph_free(sg);
    fg_context_free(ctx);
}

static void test_shapes(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = parse(ctx, graph_text);
    static const struct {
        const char *t;
        int rank;
        int64_t shape[4];
    } want[] = {{"a", 4, {2, 13, 1, 1}}, {"b", 4, {2, 1, 7, 3}}, {"c", 2, {13, 3}}, {"d", 2, {3, 1}},
                {"e", 1, {3}},           {"f", 2, {1, 5}},       {"g", 1, {1}},     {"k", 4, {2, 13, 7, 3}}};
    for (size_t i = 0; i < FG_COUNTOF(want); i++) {
        const fg_tensor *t = &g->tensors[fg_graph_find_tensor(g, want[i].t)];
        assert_int_equal(t->rank, want[i].rank);
        for (int d = 0; d < t->rank; d++)
            assert_int_equal(t->shape[d], want[i].shape[d]);
    }
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void expect_graph_error(const char *nodes, const char *msg)
{
    fg_context *ctx = tu_ctx_shipped();
    char text[1024];
    snprintf(text, sizeof text, "graph: bad\ninputs: [{ name: x, shape: [2, 3, 4, 5] }]\nnodes:\n%soutputs: [y]\n",
             nodes);
    fg_graph *g = NULL;
    assert_int_not_equal(fg_graph_parse(ctx, "bad.yaml", text, strlen(text), &g), FG_OK);
    if (!tu_has_error(ctx, msg)) {
        tu_dump_errors(ctx);
        fail_msg("no error containing: %s", msg);
    }
    fg_context_free(ctx);
}

static void expect_rules_error(const char *ops, const char *msg)
{
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    free(tu_write(dir, "r.yaml", ops));
    assert_int_not_equal(fg_rules_load(ctx, dir), FG_OK);
    if (!tu_has_error(ctx, msg)) {
        tu_dump_errors(ctx);
        fail_msg("no error containing: %s", msg);
    }
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    expect_graph_error("  - { name: y, op: reduce_sum, inputs: [x], attrs: { axes: [1, 4] } }\n",
                       "bad.yaml:4:5: error: reduce_sum 'y': axis 4 is out of range for rank 4");
    expect_graph_error("  - { name: y, op: reduce_max, inputs: [x], attrs: { axes: [3, -1] } }\n",
                       "bad.yaml:4:5: error: reduce_max 'y': axis 3 is given twice");
    expect_rules_error("op: r\nkind: reduce\ninputs: [x]\nattrs: { axes: { type: ints } }\n",
                       "r.yaml:1:1: error: reduce op 'r' has no `reduce` (one of sum, mean, max");
    expect_rules_error("op: r\nkind: reduce\nreduce: median\ninputs: [x]\n",
                       "r.yaml:3:9: error: reduce must be one of sum, mean, max, min, prod, sum_square, l1, l2, "
                       "log_sum, log_sum_exp, argmax, argmin, argmax_last, argmin_last, got 'median'");
    expect_rules_error("op: r\nkind: softmax\nreduce: max\ninputs: [x]\n",
                       "`reduce` is only for pool2d, global_pool and reduce ops");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
