/*
 * test_layernorm.c -- the layer_norm kind and the layernorm template
 * (rules/norm.yaml, templates/layernorm.cuh): rows of 1, 7, 13, 768, 1000
 * and 2049 elements (a warp per row, a block per row, vector and scalar
 * accesses), with and without skip and bias, RMS, a normalized block of two
 * axes, a pointwise epilogue; fp32 / fp16 / bf16 and NCHW / NHWC in CPU
 * emulation against the host reference with NaN-poisoned outputs; cases
 * that must not fuse; every kernel compiles under NVRTC for sm_80 and sm_90
 * with an empty log, and (with cuobjdump / nvdisasm) without local memory,
 * with 16-byte loads and stores where the row allows them; fp32 rows
 * normalized into fp16 (`to`) with 16-byte loads and 8-byte stores; bad
 * axes, parameters and `to` are located errors.
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
#include "jit.h"
#include "testutil.h"

/* %s: dtype, layout */
static const char graph_fmt[] =
    "graph: norms\n"
    "seed: 7\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: a1, shape: [5, 1] }\n"
    "  - { name: a7, shape: [3, 7] }\n"
    "  - { name: a13, shape: [4, 13] }\n"
    "  - { name: s13, shape: [4, 13] }\n"
    "  - { name: a768, shape: [2, 3, 768] }\n"
    "  - { name: s768, shape: [2, 3, 768] }\n"
    "  - { name: a1000, shape: [3, 1000] }\n"
    "  - { name: a2049, shape: [2, 2049] }\n"
    "  - { name: s2049, shape: [2, 2049] }\n"
    "  - { name: x4, shape: [2, 3, 4, 8] }\n"
    "weights:\n"
    "  - { name: g1, shape: [1], init: positive }\n"
    "  - { name: g7, shape: [7], init: positive }\n"
    "  - { name: b7, shape: [7] }\n"
    "  - { name: g13, shape: [13], init: positive }\n"
    "  - { name: g768, shape: [768], init: positive }\n"
    "  - { name: b768, shape: [768] }\n"
    "  - { name: g1000, shape: [1000], init: positive }\n"
    "  - { name: b1000, shape: [1000] }\n"
    "  - { name: g2049, shape: [2049], init: positive }\n"
    "  - { name: b2049, shape: [2049] }\n"
    "  - { name: g48, shape: [4, 8], init: positive }\n"
    "  - { name: b8, shape: [8] }\n"
    "nodes:\n"
    "  - { name: n1, op: layer_norm, inputs: [a1, g1] }\n"
    "  - { name: n7, op: layer_norm, inputs: [a7, g7, b7], attrs: { eps: 1e-3 } }\n"
    "  - { name: u13, op: add, inputs: [a13, s13] }\n"
    "  - { name: n13, op: layer_norm, inputs: [u13, g13], attrs: { rms: true } }\n"
    "  - { name: u768, op: add, inputs: [s768, a768] }\n"
    "  - { name: n768, op: layer_norm, inputs: [u768, g768, b768], attrs: { eps: 1e-6 } }\n"
    "  - { name: r768, op: gelu, inputs: [n768] }\n"
    "  - { name: n1000, op: layer_norm, inputs: [a1000, g1000, b1000] }\n"
    "  - { name: t1000, op: tanh, inputs: [n1000] }\n"
    "  - { name: u2049, op: add, inputs: [a2049, s2049] }\n"
    "  - { name: n2049, op: layer_norm, inputs: [u2049, g2049, b2049], attrs: { axis: 1 } }\n"
    "  - { name: m2049, op: layer_norm, inputs: [a2049, g2049], attrs: { rms: true } }\n"
    "  - { name: n4, op: layer_norm, inputs: [x4, g48, b8], attrs: { axis: -2 } }\n"
    "  - { name: e4, op: relu, inputs: [n4] }\n"
    "outputs: [n1, n7, n13, r768, t1000, n2049, m2049, e4, n4]\n";

static fg_graph *load(fg_context *ctx, fg_dtype d, fg_layout l)
{
    char text[sizeof graph_fmt + 64];
    snprintf(text, sizeof text, graph_fmt, fg_dtype_name(d), fg_layout_name(l));
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "norms.yaml", text, strlen(text), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* The group of p computing node name (plan-graph names are the source's). */
static const fg_group *group_of(const fg_plan *p, const char *name)
{
    int nd = fg_graph_find_node(p->graph, name);
    assert_true(nd >= 0);
    int gi = p->node_group[nd];
    assert_true(gi >= 0);
    return &p->groups[gi];
}

/* Each variant in emulation against the host reference (outputs NaN-poisoned
 * first); what fused: the skips absorbed, the epilogues applied, n4 (a graph
 * output read by relu) not fused with it. */
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
            int used = 0;
            for (int i = 0; i < p->ngroups; i++)
                used += strcmp(p->groups[i].template_name, "layernorm") == 0;
            assert_int_equal(used, 8);   /* every layer_norm; the adds absorbed, gelu and tanh fused */
            assert_int_equal(p->ngroups, 9);   /* + the relu after n4, a graph output */
            assert_int_equal(group_of(p, "r768")->nnodes, 2);
            assert_int_equal(group_of(p, "t1000")->nnodes, 2);
            assert_int_equal(group_of(p, "n4")->nnodes, 1);
            assert_true(group_of(p, "e4") != group_of(p, "n4"));
            int n13 = fg_graph_find_node(p->graph, "n13");
            assert_true(p->graph->nodes[n13].inputs[3] >= 0);   /* the skip */
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

/* Must not fuse: an add whose sum is also read elsewhere, or that
 * broadcasts, is no skip; a layer_norm whose output is a graph output keeps
 * its pointwise consumer apart. */
static void test_not_fused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char text[] =
        "graph: nofuse\n"
        "inputs: [{ name: x, shape: [3, 16] }, { name: r, shape: [3, 16] }, { name: pe, shape: [16] }]\n"
        "weights: [{ name: g, shape: [16], init: positive }]\n"
        "nodes:\n"
        "  - { name: u, op: add, inputs: [x, r] }\n"
        "  - { name: n, op: layer_norm, inputs: [u, g] }\n"
        "  - { name: v, op: mul, inputs: [u, n] }\n"
        "  - { name: w, op: add, inputs: [x, pe] }\n"
        "  - { name: m, op: layer_norm, inputs: [w, g] }\n"
        "outputs: [v, m]\n";
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "nofuse.yaml", text, strlen(text), &g), FG_OK);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    for (int i = 0; i < p->graph->nnodes; i++)
        if (p->graph->nodes[i].op->kind == FG_OPK_LAYER_NORM && !p->graph->nodes[i].folded)
            assert_true(p->graph->nodes[i].inputs[3] < 0);   /* no skip absorbed */
    fg_exec *e = tu_compile_emu(ctx, p);
    tu_exec_vs_reference(ctx, g, e, 5, 1e-5);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
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

/* The cubins (fp32 and fp16, specialized): no local memory (the warp path's
 * row stays in registers), 16-byte loads and stores on the rows of a
 * multiple of 16 bytes (768 and 1000 elements). */
static void test_sass(void **state)
{
    (void)state;
    if (!tu_cuda_tools_found("SASS check"))
        skip();
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = tu_ctx_shipped();
    static const char *const archs[] = {"sm_80", "sm_90"};
    int failures = 0;
    for (int d = 0; d < 2; d++) {
        fg_graph *g = load(ctx, d ? FG_DTYPE_F16 : FG_DTYPE_F32, FG_LAYOUT_NCHW);
        fg_plan *p = NULL;
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
        int nk = p->ngroups;
        fg_kernel *ks = calloc((size_t)nk, sizeof *ks);
        fg_emit_opts o = {.specialize = 1};
        for (int i = 0; i < nk; i++)
            assert_int_equal(fg_emit_group(ctx, p, i, &o, &ks[i]), FG_OK);
        for (int a = 0; a < 2; a++) {
            fg_jit_info *infos = calloc((size_t)nk, sizeof *infos);
            assert_int_equal(fg_jit_compile_all(ctx, ks, nk, archs[a], infos), FG_OK);
            for (int i = 0; i < nk; i++) {
                if (strcmp(p->groups[i].template_name, "layernorm") != 0)
                    continue;
                fg_res_usage ru;
                fg_sass_mix mx;
                tu_cubin_read(&ks[i], &ru, &mx, NULL);
                const char *out = p->graph->tensors[p->groups[i].output].name;
                int vec = strcmp(out, "r768") == 0 || strcmp(out, "t1000") == 0;
                print_message("%s %s %-6s: REG %d LDG.128 %d STG.128 %d LDL %d STL %d\n", archs[a],
                              d ? "fp16" : "fp32", out, ru.registers, mx.ldg128, mx.stg128, mx.ldl, mx.stl);
                if (mx.ldl || mx.stl || ru.stack || ru.local || infos[i].log[0] ||
                    (vec && (!mx.ldg128 || !mx.stg128)))
                    failures++;
            }
            free(infos);
        }
        for (int i = 0; i < nk; i++)
            fg_kernel_free(&ks[i]);
        free(ks);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    assert_int_equal(failures, 0);
    fg_context_free(ctx);
}

/* fp32 rows normalized into fp16 (`to`): rows of 36 (a warp per row) and
 * 1036 (a block per row) elements read 16 bytes at a time and stored 8
 * bytes at a time (STG.E.64: four fp16 values), a row of 45 scalar; no
 * local memory, clean logs, on sm_80 and sm_90. */
static void test_mixed_sass(void **state)
{
    (void)state;
    if (!tu_cuda_tools_found("SASS check"))
        skip();
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = tu_ctx_shipped();
    static const char text[] =
        "graph: mixed\n"
        "dtype: fp16\n"
        "inputs:\n"
        "  - { name: a, shape: [7, 36], dtype: fp32 }\n"
        "  - { name: b, shape: [3, 1036], dtype: fp32 }\n"
        "  - { name: c, shape: [129, 45], dtype: fp32 }\n"
        "weights:\n"
        "  - { name: ga, shape: [36], init: positive }\n"
        "  - { name: gb, shape: [1036], init: positive }\n"
        "  - { name: gc, shape: [45], init: positive }\n"
        "nodes:\n"
        "  - { name: ya, op: layer_norm, inputs: [a, ga], attrs: { rms: true, to: fp16 } }\n"
        "  - { name: yb, op: layer_norm, inputs: [b, gb], attrs: { to: fp16 } }\n"
        "  - { name: yc, op: layer_norm, inputs: [c, gc], attrs: { rms: true, to: fp16 } }\n"
        "outputs: [ya, yb, yc]\n";
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "mixed.yaml", text, strlen(text), &g), FG_OK);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    int nk = p->ngroups;
    assert_int_equal(nk, 3);
    fg_kernel *ks = calloc((size_t)nk, sizeof *ks);
    fg_emit_opts o = {.specialize = 1};
    for (int i = 0; i < nk; i++) {
        assert_int_equal(fg_emit_group(ctx, p, i, &o, &ks[i]), FG_OK);
        assert_string_equal(p->groups[i].template_name, "layernorm");
        assert_int_equal(p->graph->tensors[p->groups[i].output].dtype, FG_DTYPE_F16);
    }
    static const char *const archs[] = {"sm_80", "sm_90"};
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        fg_jit_info *infos = calloc((size_t)nk, sizeof *infos);
        assert_int_equal(fg_jit_compile_all(ctx, ks, nk, archs[a], infos), FG_OK);
        for (int i = 0; i < nk; i++) {
            fg_res_usage ru;
            fg_sass_mix mx;
            char *sass = NULL;
            tu_cubin_read(&ks[i], &ru, &mx, &sass);
            int stg64 = 0;
            for (const char *s = sass; (s = strstr(s, "STG.E.64")) != NULL; s++)
                stg64++;
            const char *out = p->graph->tensors[p->groups[i].output].name;
            int vec = strcmp(out, "yc") != 0;
            print_message("%s fp32 -> fp16 %s: REG %d LDG.128 %d STG.E.64 %d LDL %d STL %d\n", archs[a], out,
                          ru.registers, mx.ldg128, stg64, mx.ldl, mx.stl);
            if (mx.ldl || mx.stl || ru.stack || ru.local || infos[i].log[0] || (vec && (!mx.ldg128 || !stg64)))
                failures++;
            free(sass);
        }
        free(infos);
    }
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    fg_plan_free(p);
    fg_graph_free(g);
    assert_int_equal(failures, 0);
    fg_context_free(ctx);
}

/* A graph that must fail to load with a message holding want. */
static void expect_bad(const char *nodes, const char *want)
{
    fg_context *ctx = tu_ctx_shipped();
    char text[1024];
    snprintf(text, sizeof text,
             "graph: bad\n"
             "inputs: [{ name: x, shape: [2, 3, 8] }, { name: k, shape: [2, 3, 4] }]\n"
             "weights: [{ name: g, shape: [8] }, { name: g5, shape: [5] }, { name: g38, shape: [3, 8] }]\n"
             "nodes:\n%s"
             "outputs: [y]\n",
             nodes);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "bad.yaml", text, strlen(text), &g);
    assert_int_equal(st, FG_ERR_INPUT);
    if (!tu_has_error(ctx, want))
        tu_dump_errors(ctx);
    assert_true(tu_has_error(ctx, want));
    assert_true(tu_has_error(ctx, "bad.yaml:5:"));
    fg_context_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g], attrs: { axis: 3 } }\n",
               "layer_norm 'y': axis 3 is out of range for the input [2, 3, 8] (rank 3)");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g5] }\n",
               "scale 'g5' [5] does not broadcast onto the normalized axes [8] of the input x");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g, g38] }\n",
               "bias 'g38' [3, 8] does not broadcast onto the normalized axes [8]");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g, ~, k] }\n",
               "skip 'k' [2, 3, 4] fp32 must have the input's shape and dtype [2, 3, 8] fp32");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g], attrs: { axis: 1, naxes: 1 } }\n",
               "which is not through its last axis");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g], attrs: { to: int32 } }\n",
               "layer_norm 'y': to 'int32' must be x (the input's dtype) or a float dtype (fp32, fp16, bf16)");
    expect_bad("  - { name: y, op: layer_norm, inputs: [x, g], attrs: { to: half } }\n",
               "to 'half' must be x (the input's dtype) or a float dtype");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emulation),
        cmocka_unit_test(test_not_fused),
        cmocka_unit_test(test_nvrtc),
        cmocka_unit_test(test_sass),
        cmocka_unit_test(test_mixed_sass),
        cmocka_unit_test(test_errors),
    };
    if (getenv("FUSEGEN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("FUSEGEN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
