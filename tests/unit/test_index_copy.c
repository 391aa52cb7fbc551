/*
 * test_index_copy.c -- the data-movement kinds slice, expand (and tile) and
 * pad in the copy family: a graph of each (odd sizes 1, 7, 13, negative
 * steps, a Gather-like slice + reshape dropping an axis, expand from rank 1
 * to 4, tile, pad in constant / reflect (pads reaching the edge element) /
 * edge / wrap modes, negative pads cropping, nested constant pads, chains
 * with a transpose and a reshape composed into one copy kernel, a slice with
 * an element-wise epilogue) runs in CPU emulation against the host
 * reference with NaN-poisoned outputs, fp32 / fp16 / bf16 and NCHW / NHWC;
 * every kernel compiles under NVRTC for sm_80 and sm_90 with an empty log;
 * bad attributes are located errors.
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
    "graph: index_copies\n"
    "seed: 9\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 7, 13, 5] }\n"
    "  - { name: v, shape: [7] }\n"
    "  - { name: u, shape: [1, 13, 7] }\n"
    "nodes:\n"
    "  - { name: sl_neg, op: slice, inputs: [x], attrs: { starts: [1, 6, 12, 0], steps: [1, -1, -2, 1], "
    "shape: [1, 7, 7, 5] } }\n"
    "  - { name: sl_step, op: slice, inputs: [x], attrs: { starts: [0, 2, 0, 1], steps: [1, 2, 3, 2], "
    "shape: [2, 3, 5, 2] } }\n"
    "  - { name: sl_one, op: slice, inputs: [u], attrs: { starts: [0, 12, 0], steps: [1, 1, 1], "
    "shape: [1, 1, 7] } }\n"
    "  - { name: sl_act, op: slice, inputs: [x], attrs: { starts: [0, 0, 3, 0], steps: [1, 1, 1, 1], "
    "shape: [2, 7, 7, 5] } }\n"
    "  - { name: sl_relu, op: relu, inputs: [sl_act] }\n"
    "  - { name: g0, op: slice, inputs: [x], attrs: { starts: [0, 3, 0, 0], steps: [1, 1, 1, 1], "
    "shape: [2, 1, 13, 5] } }\n"
    "  - { name: g0r, op: reshape, inputs: [g0], attrs: { shape: [2, 13, 5] } }\n"
    "  - { name: ex4, op: expand, inputs: [v], attrs: { shape: [2, 3, 1, 7] } }\n"
    "  - { name: ex3, op: expand, inputs: [u], attrs: { shape: [2, 1, 1, 7] } }\n"
    "  - { name: tl, op: tile, inputs: [u], attrs: { reps: [2, 1, 3] } }\n"
    "  - { name: pc, op: pad, inputs: [x], attrs: { pads: [0, 1, 2, 0, 0, 0, 3, 1], value: 1.5 } }\n"
    "  - { name: pr, op: pad, inputs: [x], attrs: { pads: [0, 0, 12, 4, 0, 0, 3, 4], mode: reflect } }\n"
    "  - { name: pe, op: pad, inputs: [u], attrs: { pads: [0, 2, 1, 1, 0, 3], mode: edge } }\n"
    "  - { name: pw, op: pad, inputs: [u], attrs: { pads: [0, 13, 2, 0, 5, 9], mode: wrap } }\n"
    "  - { name: crop, op: pad, inputs: [x], attrs: { pads: [0, -1, 2, 0, 0, -2, -3, 1] } }\n"
    "  - { name: pp1, op: pad, inputs: [u], attrs: { pads: [0, 1, 1, 0, 1, 1], value: -2.0 } }\n"
    "  - { name: pp2, op: pad, inputs: [pp1], attrs: { pads: [0, 1, 0, 0, 0, 2], value: 3.0 } }\n"
    "  - { name: tr, op: transpose, inputs: [x], attrs: { perm: [0, 2, 3, 1] } }\n"
    "  - { name: trs, op: slice, inputs: [tr], attrs: { starts: [1, 12, 4, 0], steps: [-1, -3, -1, 2], "
    "shape: [2, 5, 5, 4] } }\n"
    "  - { name: trr, op: reshape, inputs: [trs], attrs: { shape: [10, 20] } }\n"
    "  - { name: ps, op: pad, inputs: [u], attrs: { pads: [0, 2, 2, 0, 2, 2] } }\n"
    "  - { name: pst, op: transpose, inputs: [ps], attrs: { perm: [0, 2, 1] } }\n"
    "  - { name: psl, op: slice, inputs: [pst], attrs: { starts: [0, 10, 0], steps: [1, -1, 2], "
    "shape: [1, 11, 9] } }\n"
    "outputs: [sl_neg, sl_step, sl_one, sl_relu, g0r, ex4, ex3, tl, pc, pr, pe, pw, crop, pp2, trr, psl]\n";

static fg_graph *load(fg_context *ctx, fg_dtype d, fg_layout l)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, fg_dtype_name(d), fg_layout_name(l));
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "index.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Each kind, alone and composed, in emulation against the host reference. */
static void test_emulation(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const double tol[TU_FLOAT_DTYPES] = {1e-6, 1e-6, 1e-6};   /* copies: exact */
    for (int d = 0; d < TU_FLOAT_DTYPES; d++)
        for (int l = 0; l < FG_LAYOUT_COUNT; l++) {
            fg_graph *g = load(ctx, (fg_dtype)d, (fg_layout)l);
            fg_plan *p = NULL;
            fg_status st = fg_plan_build(ctx, g, &p);
            if (st != FG_OK)
                tu_dump_errors(ctx);
            assert_int_equal(st, FG_OK);
            int copies = 0;
            for (int i = 0; i < p->ngroups; i++)
                copies += strcmp(p->groups[i].template_name, "copy") == 0;
            /* one kernel per output: sl_act + relu, g0 + reshape, pp1 + pp2, tr + trs + trr, ps + pst + psl
             * each compose into one */
            assert_int_equal(p->ngroups, 16);
            assert_int_equal(copies, 16);
            fg_exec *e = tu_compile_emu(ctx, p);
            print_message("%s %s:\n", fg_dtype_name((fg_dtype)d), fg_layout_name((fg_layout)l));
            tu_exec_vs_reference(ctx, g, e, 31 + (uint64_t)d, tol[d]);
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
        {"{ name: b, op: slice, inputs: [x], attrs: { starts: [0, 0, 5, 0], steps: [1, 1, 1, 1], shape: [2, 3, 1, 7] } }",
         "starts[2] = 5 is outside axis 2 of size 5"},
        {"{ name: b, op: slice, inputs: [x], attrs: { starts: [0, 2, 0, 0], steps: [1, -1, 1, 1], shape: [2, 4, 5, 7] } }",
         "past its size 3"},
        {"{ name: b, op: slice, inputs: [x], attrs: { starts: [0, 0, 0, 0], steps: [1, 0, 1, 1], shape: [2, 3, 5, 7] } }",
         "steps[1] is 0"},
        {"{ name: b, op: slice, inputs: [x], attrs: { starts: [0, 0], steps: [1, 1], shape: [2, 3] } }",
         "'starts' must have 4 values"},
        {"{ name: b, op: expand, inputs: [x], attrs: { shape: [4, 5, 7] } }", "does not broadcast to shape [4, 5, 7]"},
        {"{ name: b, op: tile, inputs: [x], attrs: { reps: [1, 0, 1, 1] } }", "reps[1] is 0"},
        {"{ name: b, op: pad, inputs: [x], attrs: { pads: [0, 0, 5, 0, 0, 0, 0, 0], mode: reflect } }",
         "must be smaller than its size 5"},
        {"{ name: b, op: pad, inputs: [x], attrs: { pads: [0, 0, 0, 0, 0, 0, 0, 0], mode: mirror } }",
         "mode 'mirror' is not constant"},
        {"{ name: b, op: pad, inputs: [x], attrs: { pads: [0, -2, 0, 0, 0, -1, 0, 0] } }", "leave no element"},
        {"{ name: b, op: pad, inputs: [x], attrs: { pads: [1, 1] } }", "'pads' must have 8 values"},
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
