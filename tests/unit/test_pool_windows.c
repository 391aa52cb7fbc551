/*
 * test_pool_windows.c -- pooling and convolution window semantics in YAML
 * graphs: per-side padding ([top, left, bottom, right]), ceil_mode with
 * partial windows, count_include_pad, dilation, global max pooling, and
 * convolution with per-side padding, run in CPU emulation against the host
 * reference for fp32 / fp16 / bf16 and NCHW / NHWC on odd sizes; the pool
 * kernels compile under NVRTC for sm_80 and sm_90 with an empty log;
 * `len: [2, 4]` in op definitions and bad padding are located errors.
 * (Agreement with onnxruntime and the ONNX node tests: tests/onnx/
 * test_onnx_windows.py.)
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
#include "load.h"
#include "testutil.h"

/* %s: dtype, layout */
static const char graph_fmt[] =
    "graph: windows\n"
    "seed: 11\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 3, 11, 9] }\n"
    "weights:\n"
    "  - { name: w, shape: [5, 3, 3, 2] }\n"
    "  - { name: wd, shape: [3, 1, 4, 3] }\n"
    "nodes:\n"
    "  - { name: mx_asym, op: max_pool2d, inputs: [x],\n"
    "      attrs: { kernel: [3, 2], stride: [2, 3], padding: [1, 0, 0, 1], dilation: [2, 1], ceil_mode: true } }\n"
    "  - { name: mx_plain, op: max_pool2d, inputs: [x], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
    "  - { name: av_incl, op: avg_pool2d, inputs: [x],\n"
    "      attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1, 0, 1], ceil_mode: true,\n"
    "               count_include_pad: true } }\n"
    "  - { name: av_excl, op: avg_pool2d, inputs: [x],\n"
    "      attrs: { kernel: [2, 3], stride: [3, 2], padding: [0, 1, 1, 0], dilation: [2, 2], ceil_mode: true } }\n"
    "  - { name: av_incl_dil, op: avg_pool2d, inputs: [x],\n"
    "      attrs: { kernel: [2, 2], stride: [2, 2], padding: [1, 1], dilation: [1, 2], count_include_pad: true } }\n"
    "  - { name: gmax, op: global_max_pool, inputs: [x] }\n"
    "  - { name: gavg, op: global_avg_pool, inputs: [x] }\n"
    "  - { name: cv, op: conv2d, inputs: [x, w], attrs: { stride: [2, 1], padding: [2, 0, 0, 1] } }\n"
    "  - { name: cvd, op: conv2d, inputs: [x, wd],\n"
    "      attrs: { stride: [1, 2], padding: [1, 2, 2, 0], dilation: [2, 1], groups: 3 } }\n"
    "outputs: [mx_asym, mx_plain, av_incl, av_excl, av_incl_dil, gmax, gavg, cv, cvd]\n";

static fg_graph *load(fg_context *ctx, fg_dtype d, fg_layout l)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, fg_dtype_name(d), fg_layout_name(l));
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "windows.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Output size of a pooling node as ONNX defines it (written here from the
 * ONNX operator documentation, independently of shape.c). */
static int64_t onnx_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, int ceil_mode)
{
    int64_t num = in + pb + pe - ((k - 1) * d + 1);
    int64_t out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + pb)
        out--;
    return out;
}

/* Inferred output shapes follow the ONNX formula. */
static void test_shapes(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = load(ctx, FG_DTYPE_F32, FG_LAYOUT_NCHW);
    static const struct {
        const char *node;
        int64_t k[2], s[2], pb[2], pe[2], d[2];
        int ceil_mode;
    } want[] = {
        {"mx_asym", {3, 2}, {2, 3}, {1, 0}, {0, 1}, {2, 1}, 1},
        {"mx_plain", {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 0},
        {"av_incl", {3, 3}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 1},
        {"av_excl", {2, 3}, {3, 2}, {0, 1}, {1, 0}, {2, 2}, 1},
        {"av_incl_dil", {2, 2}, {2, 2}, {1, 1}, {1, 1}, {1, 2}, 0},
        {"cv", {3, 2}, {2, 1}, {2, 0}, {0, 1}, {1, 1}, 0},
        {"cvd", {4, 3}, {1, 2}, {1, 2}, {2, 0}, {2, 1}, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int n = fg_graph_find_node(g, want[i].node);
        assert_true(n >= 0);
        const fg_tensor *y = &g->tensors[g->nodes[n].output];
        int64_t beg[2], end[2];
        fg_node_pads(&g->nodes[n], beg, end);
        for (int a = 0; a < 2; a++) {
            assert_int_equal(beg[a], want[i].pb[a]);
            assert_int_equal(end[a], want[i].pe[a]);
            int64_t o = onnx_out(g->tensors[g->nodes[n].inputs[0]].shape[2 + a], want[i].k[a], want[i].s[a],
                                 want[i].pb[a], want[i].pe[a], want[i].d[a], want[i].ceil_mode);
            if (y->shape[2 + a] != o)
                fail_msg("%s axis %d: inferred %lld, ONNX gives %lld", want[i].node, a + 2,
                         (long long)y->shape[2 + a], (long long)o);
        }
    }
    int gm = fg_graph_find_node(g, "gmax");
    assert_int_equal(g->tensors[g->nodes[gm].output].shape[2], 1);
    assert_string_equal(g->nodes[gm].op->reduce, "max");
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* Each pooling and convolution kernel, in emulation, against the host
 * reference. */
static void test_emulation(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const double tol[TU_FLOAT_DTYPES] = {1e-5, 5e-3, 3e-2};
    for (int d = 0; d < TU_FLOAT_DTYPES; d++)
        for (int l = 0; l < FG_LAYOUT_COUNT; l++) {
            fg_graph *g = load(ctx, (fg_dtype)d, (fg_layout)l);
            fg_plan *p = NULL;
            fg_status st = fg_plan_build(ctx, g, &p);
            if (st != FG_OK)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
            int pools = 0;
            for (int i = 0; i < p->ngroups; i++)
                pools += strcmp(p->groups[i].template_name, "pool2d") == 0;
            assert_int_equal(pools, 7);
            fg_compile_options co = {.device = FG_DEVICE_EMU};
            fg_exec *e = NULL;
            st = fg_plan_compile(ctx, p, &co, &e);
            if (st)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
            print_message("%s %s:\n", fg_dtype_name((fg_dtype)d), fg_layout_name((fg_layout)l));
            tu_exec_vs_reference(ctx, g, e, 31 + (uint64_t)d, tol[d]);
            fg_exec_free(e);
            fg_plan_free(p);
            fg_graph_free(g);
        }
    fg_context_free(ctx);
}

/* Every pooling kernel compiles under NVRTC (sm_80, sm_90) with an empty
 * log, specialized and not. */
static void test_nvrtc(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = tu_ctx_shipped();
    fg_kernel *ks = NULL;
    int nk = 0, cap = 0;
    for (int spec = 0; spec < 2; spec++) {
        fg_graph *g = load(ctx, spec ? FG_DTYPE_F16 : FG_DTYPE_F32, spec ? FG_LAYOUT_NHWC : FG_LAYOUT_NCHW);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
        fg_emit_opts o = {.specialize = spec};
        for (int i = 0; i < p->ngroups; i++) {
            if (strcmp(p->groups[i].template_name, "pool2d") != 0)
                continue;
            fg_kernel *k = FG_PUSH(ks, nk, cap);
            fg_status st = fg_emit_group(ctx, p, i, &o, k);
            if (st != FG_OK)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
        }
        fg_plan_free(p);
        fg_graph_free(g);
    }
    int clean = tu_nvrtc_clean(ctx, ks, nk);
    print_message("nvrtc: %d kernels x 2 archs, %d clean\n", nk, clean);
    assert_int_equal(clean, 2 * nk);
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    fg_context_free(ctx);
}

/* Bad padding in a graph: one located error each, no crash. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *node, *want;
    } cases[] = {
        {"{ name: b, op: max_pool2d, inputs: [x], attrs: { kernel: [2, 2], padding: [1, 1, 1] } }",
         "must have 2 or 4 values, got 3"},
        {"{ name: b, op: conv2d, inputs: [x, w], attrs: { padding: [1] } }", "must have 2 or 4 values, got 1"},
        {"{ name: b, op: avg_pool2d, inputs: [x], attrs: { kernel: [2, 2], padding: [0, 0, -1, 0] } }",
         "padding non-negative"},
        {"{ name: b, op: max_pool2d, inputs: [x], attrs: { kernel: [2, 2], dilation: [0, 1] } }",
         "stride and dilation must be positive"},
        {"{ name: b, op: max_pool2d, inputs: [x], attrs: { kernel: [9, 2], dilation: [2, 1] } }",
         "output size would be"},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "graph: bad\ninputs:\n  - { name: x, shape: [1, 3, 7, 7] }\nweights:\n"
                 "  - { name: w, shape: [4, 3, 3, 3] }\nnodes:\n  - %s\noutputs: [b]\n",
                 cases[i].node);
        fg_graph *g = NULL;
        fg_context_clear_errors(ctx);
        assert_int_equal(fg_graph_parse(ctx, "bad.yaml", text, strlen(text), &g), FG_ERR_INPUT);
        if (!tu_has_error(ctx, cases[i].want) || !tu_has_error(ctx, "bad.yaml:7:")) {
            tu_dump_errors(ctx);
            fail_msg("case %zu: no located error containing '%s'", i, cases[i].want);
        }
        assert_null(g);
    }
    fg_context_free(ctx);
}

/* `len:` in an op definition: one length or a list; bad ones are located
 * errors. */
static void test_opdef_len(void **state)
{
    (void)state;
    static const struct {
        const char *len, *want;
    } bad[] = {
        {"[]", "got an empty list"},
        {"[2, 9]", "len must be between 1 and 8, got 9"},
        {"[2, 2]", "len 2 listed twice"},
        {"[2, x]", "len must be a length or a list of lengths"},
        {"{a: 1}", "len must be a length or a list of lengths"},
    };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "op: p\nkind: pool2d\nreduce: max\nattrs:\n  kernel: { type: ints, len: %s }\n",
                 bad[i].len);
        free(tu_write(dir, "ops.yaml", text));
        fg_context *ctx = tu_ctx_empty();
        assert_int_not_equal(fg_rules_load(ctx, dir), FG_OK);
        if (!tu_has_error(ctx, bad[i].want) || !tu_has_error(ctx, "ops.yaml:5:")) {
            tu_dump_errors(ctx);
            fail_msg("len %s: no located error containing '%s'", bad[i].len, bad[i].want);
        }
        fg_context_free(ctx);
    }
    /* a list: lengths 1 and 3 accepted, 2 refused, in a graph */
    free(tu_write(dir, "ops.yaml", "op: p\nkind: pool2d\nreduce: max\nattrs:\n  kernel: { type: ints, len: [1, 3] }\n"));
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
    const fg_opdef *op = fg_ctx_find_op(ctx, "p");
    assert_non_null(op);
    assert_int_equal(op->attrs[0].lens, (1u << 1) | (1u << 3));
    static const char g_fmt[] = "graph: g\ninputs:\n  - { name: x, shape: [1, 1, 5, 5] }\nnodes:\n"
                                "  - { name: b, op: p, inputs: [x], attrs: { kernel: %s } }\noutputs: [b]\n";
    char text[512];
    fg_graph *g = NULL;
    snprintf(text, sizeof text, g_fmt, "[2, 2]");
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", text, strlen(text), &g), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "must have 1 or 3 values, got 2"));
    snprintf(text, sizeof text, g_fmt, "[2]");
    fg_context_clear_errors(ctx);
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", text, strlen(text), &g), FG_OK);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opdef_len),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_emulation),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
