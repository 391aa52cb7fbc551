/*
 * test_resize.c -- the resize and conv_transpose2d kinds in YAML graphs:
 * every resize mode (nearest with each nearest_mode, linear, cubic with
 * exclude_outside) and coordinate transformation mode, on odd sizes (1, 7,
 * 13), up- and down-sampling, non-integer scales and explicit sizes;
 * transposed convolution with stride 2 and 3, per-side padding,
 * output_padding, dilation, groups, 1x1 kernels and a bias; the fusion rules
 * resize_pointwise and conv_transpose_act.  Run in CPU emulation against the
 * host reference for fp32 / fp16 / bf16 and NCHW / NHWC with NaN-poisoned
 * outputs; the kernels compile under NVRTC for sm_80 and sm_90 with an empty
 * log; the output sizes follow the ONNX formulas; bad attributes are located
 * errors.  (Agreement with onnxruntime: tests/onnx/test_onnx_resize.py.)
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

#include "emit.h"
#include "load.h"
#include "testutil.h"

/* %s: dtype, layout */
static const char graph_fmt[] =
    "graph: resize\n"
    "seed: 5\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 3, 7, 13] }\n"
    "  - { name: o, shape: [1, 2, 1, 7] }\n"
    "weights:\n"
    "  - { name: w3, shape: [3, 4, 3, 3] }\n"
    "  - { name: b4, shape: [4] }\n"
    "  - { name: wg, shape: [3, 2, 2, 3] }\n"
    "  - { name: w1, shape: [3, 5, 1, 1] }\n"
    "nodes:\n"
    "  - { name: n_hp, op: resize, inputs: [x], attrs: { size: [13, 7] } }\n"
    "  - { name: n_ceil_asym, op: resize, inputs: [x], attrs: { scale_h: 2.0, scale_w: 0.6,\n"
    "      coordinate_transformation_mode: asymmetric, nearest_mode: round_prefer_ceil } }\n"
    "  - { name: n_floor_ac, op: resize, inputs: [x], attrs: { size: [1, 20],\n"
    "      coordinate_transformation_mode: align_corners, nearest_mode: floor } }\n"
    "  - { name: n_cl_tf, op: resize, inputs: [x], attrs: { scale_h: 1.7, scale_w: 1.3,\n"
    "      coordinate_transformation_mode: tf_half_pixel_for_nn, nearest_mode: ceil } }\n"
    "  - { name: n_int2, op: resize, inputs: [x], attrs: { scale_h: 2.0, scale_w: 2.0,\n"
    "      coordinate_transformation_mode: asymmetric, nearest_mode: floor } }\n"
    "  - { name: l_hp, op: resize, inputs: [x], attrs: { mode: linear, scale_h: 1.5, scale_w: 0.5 } }\n"
    "  - { name: l_php, op: resize, inputs: [x], attrs: { mode: linear, size: [1, 29],\n"
    "      coordinate_transformation_mode: pytorch_half_pixel } }\n"
    "  - { name: l_ac, op: resize, inputs: [x], attrs: { mode: linear, size: [13, 7],\n"
    "      coordinate_transformation_mode: align_corners } }\n"
    "  - { name: l_asym_sym, op: resize, inputs: [x], attrs: { mode: linear, scale_h: 2.6, scale_w: 1.9,\n"
    "      coordinate_transformation_mode: half_pixel_symmetric } }\n"
    "  - { name: l_one, op: resize, inputs: [o], attrs: { mode: linear, size: [7, 13],\n"
    "      coordinate_transformation_mode: asymmetric } }\n"
    "  - { name: c_hp, op: resize, inputs: [x], attrs: { mode: cubic, scale_h: 2.0, scale_w: 0.7 } }\n"
    "  - { name: c_excl, op: resize, inputs: [x], attrs: { mode: cubic, size: [9, 20], cubic_coeff_a: -0.5,\n"
    "      exclude_outside: true } }\n"
    "  - { name: c_ac, op: resize, inputs: [o], attrs: { mode: cubic, size: [13, 13],\n"
    "      coordinate_transformation_mode: align_corners } }\n"
    "  - { name: t_s2, op: conv_transpose2d, inputs: [x, w3, b4], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
    "  - { name: t_s3, op: conv_transpose2d, inputs: [x, w3], attrs: { stride: [3, 2], padding: [0, 1, 2, 0],\n"
    "      output_padding: [2, 1] } }\n"
    "  - { name: t_dil, op: conv_transpose2d, inputs: [x, w3, b4], attrs: { stride: [2, 1], dilation: [2, 3],\n"
    "      output_padding: [1, 0] } }\n"
    "  - { name: t_grp, op: conv_transpose2d, inputs: [x, wg], attrs: { stride: [2, 3], groups: 3 } }\n"
    "  - { name: t_1x1, op: conv_transpose2d, inputs: [x, w1], attrs: { stride: [2, 2] } }\n"
    "  - { name: t_act_in, op: conv_transpose2d, inputs: [x, w3, b4], attrs: { stride: [2, 2] } }\n"
    "  - { name: t_act, op: relu, inputs: [t_act_in] }\n"
    "  - { name: r_in, op: resize, inputs: [x], attrs: { mode: linear, scale_h: 2.0, scale_w: 2.0 } }\n"
    "  - { name: r_sig, op: sigmoid, inputs: [r_in] }\n"
    "  - { name: r_mul, op: relu, inputs: [r_sig] }\n"
    "outputs: [n_hp, n_ceil_asym, n_floor_ac, n_cl_tf, n_int2, l_hp, l_php, l_ac, l_asym_sym, l_one, c_hp, c_excl,\n"
    "          c_ac, t_s2, t_s3, t_dil, t_grp, t_1x1, t_act, r_mul]\n";

#define NRESIZE 14   /* kernels of the resize template (r_in with its epilogue is one) */
#define NCONVT 6

static fg_graph *load(fg_context *ctx, fg_dtype d, fg_layout l)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, fg_dtype_name(d), fg_layout_name(l));
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "resize.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static const int64_t *out_shape(const fg_graph *g, const char *node)
{
    int n = fg_graph_find_node(g, node);
    assert_true(n >= 0);
    return g->tensors[g->nodes[n].output].shape;
}

/* Output sizes follow the ONNX formulas (written here from the operator
 * documentation, independently of resize.c and conv_transpose.c). */
static void test_shapes(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = load(ctx, FG_DTYPE_F32, FG_LAYOUT_NCHW);
    static const struct {
        const char *node;
        int64_t h, w;
    } want[] = {
        {"n_hp", 13, 7},        {"n_ceil_asym", 14, 7}, /* floor(13 * 0.6) */
        {"n_floor_ac", 1, 20},  {"n_cl_tf", 11, 16},    /* floor(7 * 1.7), floor(13 * 1.3) */
        {"l_hp", 10, 6},        {"l_asym_sym", 18, 24}, /* floor(7 * 2.6), floor(13 * 1.9) */
        {"c_hp", 14, 9},        {"l_one", 7, 13},
        /* (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - pads */
        {"t_s2", 6 * 2 + 3 - 2, 12 * 2 + 3 - 2},
        {"t_s3", 6 * 3 + 2 + 3 - 2, 12 * 2 + 1 + 3 - 1},
        {"t_dil", 6 * 2 + 1 + 2 * 2 + 1, 12 + 2 * 3 + 1},
        {"t_grp", 6 * 2 + 2, 12 * 3 + 3},
        {"t_1x1", 13, 25},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const int64_t *s = out_shape(g, want[i].node);
        if (s[2] != want[i].h || s[3] != want[i].w)
            fail_msg("%s: inferred [%lld, %lld], want [%lld, %lld]", want[i].node, (long long)s[2], (long long)s[3],
                     (long long)want[i].h, (long long)want[i].w);
    }
    assert_int_equal(out_shape(g, "t_grp")[1], 6);
    assert_int_equal(out_shape(g, "t_1x1")[1], 5);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* Every kernel in emulation against the host reference; the rules fuse
 * the activation into conv_transpose and the pointwise tail into resize. */
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
            int rs = 0, ct = 0;
            for (int i = 0; i < p->ngroups; i++) {
                rs += strcmp(p->groups[i].template_name, "resize") == 0;
                ct += strcmp(p->groups[i].template_name, "conv_transpose") == 0;
            }
            assert_int_equal(rs, NRESIZE);
            assert_int_equal(ct, NCONVT);
            assert_string_equal(tu_group_desc(ctx, p, "t_act"), "conv_transpose_act:t_act_in,t_act");
            assert_string_equal(tu_group_desc(ctx, p, "r_mul"), "resize_pointwise:r_in,r_sig,r_mul");
            fg_compile_options co = {.device = FG_DEVICE_EMU};
            fg_exec *e = NULL;
            st = fg_plan_compile(ctx, p, &co, &e);
            if (st)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
            print_message("%s %s:\n", fg_dtype_name((fg_dtype)d), fg_layout_name((fg_layout)l));
            tu_exec_vs_reference(ctx, g, e, 41 + (uint64_t)d, tol[d]);
            fg_exec_free(e);
            fg_plan_free(p);
            fg_graph_free(g);
        }
    fg_context_free(ctx);
}

/* Every resize and conv_transpose kernel compiles under NVRTC (sm_80,
 * sm_90) with an empty log, specialized and not. */
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
            if (strcmp(p->groups[i].template_name, "resize") != 0 &&
                strcmp(p->groups[i].template_name, "conv_transpose") != 0)
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

/* Bad attributes in a graph: one located error each, no crash. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *node, *want;
    } cases[] = {
        {"{ name: b, op: resize, inputs: [x], attrs: { mode: bicubic, size: [4, 4] } }",
         "'mode' is 'bicubic'; want one of nearest, linear, cubic"},
        {"{ name: b, op: resize, inputs: [x], attrs: { size: [4, 4],\n"
         "      coordinate_transformation_mode: tf_crop_and_resize } }",
         "tf_crop_and_resize (a region of interest) is not supported"},
        {"{ name: b, op: resize, inputs: [x], attrs: { nearest_mode: round, size: [4, 4] } }", "'nearest_mode' is"},
        {"{ name: b, op: resize, inputs: [x] }", "axis 2 needs a positive 'size' or 'scale_h'"},
        {"{ name: b, op: resize, inputs: [x], attrs: { scale_h: 0.1, scale_w: 1.0 } }",
         "output size 0 along axis 2"},
        {"{ name: b, op: conv_transpose2d, inputs: [x, w] }", "input has 3 channels but the weight"},
        {"{ name: b, op: conv_transpose2d, inputs: [x, v], attrs: { output_padding: [-1, 0] } }",
         "padding and output_padding must be non-negative"},
        {"{ name: b, op: conv_transpose2d, inputs: [x, v], attrs: { padding: [4, 4] } }",
         "output size -1 along axis 2"},
        {"{ name: b, op: conv_transpose2d, inputs: [x, v], attrs: { groups: 2 } }",
         "input channels 3 are not divisible by groups 2"},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "graph: bad\ninputs:\n  - { name: x, shape: [1, 3, 7, 7] }\nweights:\n"
                 "  - { name: w, shape: [4, 3, 3, 3] }\n  - { name: v, shape: [3, 2, 1, 1] }\nnodes:\n  - %s\n"
                 "outputs: [b]\n",
                 cases[i].node);
        fg_graph *g = NULL;
        fg_context_clear_errors(ctx);
        assert_int_equal(fg_graph_parse(ctx, "bad.yaml", text, strlen(text), &g), FG_ERR_INPUT);
        if (!tu_has_error(ctx, cases[i].want) || !tu_has_error(ctx, "bad.yaml:8:")) {
            tu_dump_errors(ctx);
            fail_msg("case %zu: no located error containing '%s'", i, cases[i].want);
        }
        assert_null(g);
    }
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_emulation),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
