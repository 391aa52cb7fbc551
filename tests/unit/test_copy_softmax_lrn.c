/*
 * test_copy_softmax_lrn.c -- the copy (reshape, transpose, concat), softmax
 * and lrn templates: a graph using each at several shapes (odd sizes, the
 * 4-wide softmax path, re-indexing through NHWC, a transpose and a reshape
 * composed into one copy by rules/copy_chain.yaml, a transpose with an
 * element-wise epilogue) runs in CPU emulation
 * against the host reference for fp32 / fp16 / bf16 and NCHW / NHWC; every
 * kernel compiles under NVRTC for sm_80 and sm_90 with an empty log,
 * specialized and not; bad attributes are located errors.
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
#include "testutil.h"

/* %s: dtype, layout */
static const char graph_fmt[] =
    "graph: rows_and_copies\n"
    "seed: 5\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 6, 5, 7] }\n"
    "  - { name: y, shape: [2, 3, 5, 7] }\n"
    "  - { name: z, shape: [3, 64] }\n"
    "  - { name: u, shape: [3, 1, 37] }\n"
    "weights:\n"
    "  - { name: w, shape: [2, 1, 5, 7] }\n"
    "nodes:\n"
    "  - { name: sm_c, op: softmax, inputs: [x], attrs: { axis: 1 } }\n"
    "  - { name: sm_tail, op: softmax, inputs: [x], attrs: { axis: 2, naxes: 0 } }\n"
    "  - { name: sm_v4, op: softmax, inputs: [z] }\n"
    "  - { name: sm_odd, op: softmax, inputs: [u], attrs: { axis: -1 } }\n"
    "  - { name: sm_n, op: softmax, inputs: [y], attrs: { axis: 0 } }\n"
    "  - { name: cat, op: concat, inputs: [sm_c, y, w, x], attrs: { axis: 1 } }\n"
    "  - { name: cat_w, op: concat, inputs: [y, y], attrs: { axis: -1 } }\n"
    "  - { name: tr, op: transpose, inputs: [cat], attrs: { perm: [0, 2, 3, 1] } }\n"
    "  - { name: tr3, op: transpose, inputs: [u], attrs: { perm: [2, 0, 1] } }\n"
    "  - { name: tr3a, op: hardswish, inputs: [tr3] }\n"
    "  - { name: rs, op: reshape, inputs: [tr], attrs: { shape: [10, 112] } }\n"
    "  - { name: rs4, op: reshape, inputs: [sm_tail], attrs: { shape: [3, 2, 7, 10] } }\n"
    "  - { name: rs6, op: reshape, inputs: [x], attrs: { shape: [2, 3, 2, 5, 7, 1] } }\n"
    "  - { name: lrn3, op: lrn, inputs: [x], attrs: { size: 3, alpha: 0.5, beta: 0.75, bias: 2.0 } }\n"
    "  - { name: lrn4, op: lrn, inputs: [y], attrs: { size: 4, alpha: 0.9, beta: 1.0, bias: 1.5 } }\n"
    "  - { name: lrn2d, op: lrn, inputs: [z], attrs: { size: 5 } }\n"
    "outputs: [rs, rs4, rs6, sm_v4, sm_odd, sm_n, cat_w, tr3a, lrn3, lrn4, lrn2d]\n";

static fg_graph *load(fg_context *ctx, fg_dtype d, fg_layout l)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, fg_dtype_name(d), fg_layout_name(l));
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "rows.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Each template, in emulation, against the host reference. */
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
            int used[3] = {0};
            static const char *const tpl[3] = {"copy", "softmax", "lrn"};
            for (int i = 0; i < p->ngroups; i++)
                for (int t = 0; t < 3; t++)
                    used[t] += strcmp(p->groups[i].template_name, tpl[t]) == 0;
            assert_int_equal(used[0], 6);   /* 2 concats, tr3 + hardswish (copy_act), rs4, rs6, tr + rs (copy_chain) */
            assert_int_equal(used[1], 5);
            assert_int_equal(used[2], 3);
            fg_compile_options co = {.device = FG_DEVICE_EMU};
            fg_exec *e = NULL;
            st = fg_plan_compile(ctx, p, &co, &e);
            if (st)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
            print_message("%s %s:\n", fg_dtype_name((fg_dtype)d), fg_layout_name((fg_layout)l));
            tu_exec_vs_reference(ctx, g, e, 77 + (uint64_t)d, tol[d]);
            fg_exec_free(e);
            fg_plan_free(p);
            fg_graph_free(g);
        }
    fg_context_free(ctx);
}

/* Every kernel compiles under NVRTC (sm_80, sm_90) with an empty log. */
static void test_nvrtc(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = tu_ctx_shipped();
    fg_kernel *ks = NULL;
    int nk = 0, cap = 0;
    for (int d = 0; d < TU_FLOAT_DTYPES; d++)
        for (int l = 0; l < FG_LAYOUT_COUNT; l++)
            for (int spec = 0; spec < 2; spec++) {
                if (!spec && !(d == FG_DTYPE_F32 && l == FG_LAYOUT_NCHW) && !(d == FG_DTYPE_F16 && l == FG_LAYOUT_NHWC))
                    continue;   /* unspecialized: two configurations are enough */
                fg_graph *g = load(ctx, (fg_dtype)d, (fg_layout)l);
                fg_plan *p = NULL;
                assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
                fg_emit_opts o = {.specialize = spec};
                for (int i = 0; i < p->ngroups; i++) {
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

/* Bad attributes: one located error each, no crash. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *node, *want;
    } cases[] = {
        {"{ name: b, op: reshape, inputs: [x], attrs: { shape: [5, 7] } }", "cannot reshape [2, 3, 5, 7]"},
        {"{ name: b, op: reshape, inputs: [x], attrs: { shape: [0, 210] } }", "is not a positive size"},
        {"{ name: b, op: transpose, inputs: [x], attrs: { perm: [0, 1, 1, 2] } }", "not a permutation"},
        {"{ name: b, op: transpose, inputs: [x], attrs: { perm: [1, 0] } }", "one entry per axis"},
        {"{ name: b, op: concat, inputs: [x, y], attrs: { axis: 2 } }", "differ along axis 1"},
        {"{ name: b, op: concat, inputs: [x, x], attrs: { axis: 4 } }", "axis 4 is out of range"},
        {"{ name: b, op: softmax, inputs: [x], attrs: { axis: 3, naxes: 2 } }", "does not fit the input"},
        {"{ name: b, op: softmax, inputs: [x], attrs: { axis: -5 } }", "does not fit the input"},
        {"{ name: b, op: lrn, inputs: [x], attrs: { size: 0 } }", "size must be positive"},
    };
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "graph: bad\ninputs:\n  - { name: x, shape: [2, 3, 5, 7] }\n  - { name: y, shape: [2, 4, 5, 7] }\n"
                 "nodes:\n  - %s\noutputs: [b]\n", cases[i].node);
        fg_graph *g = NULL;
        fg_context_clear_errors(ctx);
        assert_int_equal(fg_graph_parse(ctx, "bad.yaml", text, strlen(text), &g), FG_ERR_INPUT);
        if (!tu_has_error(ctx, cases[i].want) || !tu_has_error(ctx, "bad.yaml:6:")) {
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
        cmocka_unit_test(test_emulation),
        cmocka_unit_test(test_nvrtc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
