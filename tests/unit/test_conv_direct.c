/*
 * test_conv_direct.c -- the fallback convolutions (templates conv2d.cuh and
 * conv2d_depthwise.cuh) and the executor's split-K workspace, in emulation
 * through fg_plan_compile / fg_exec_run_host against the host reference of
 * the unfused graph (exact fp32 1e-5, fp16 5e-3 relative L2).
 *
 * conv2d stages two weight chunks in shared memory (batched loads, one
 * barrier per chunk): the cases have one chunk, several chunks with a
 * short last one (130 input channels of a 3x3 kernel: 56 + 56 + 18), groups,
 * stride, dilation and asymmetric padding [top, left, bottom, right] (only
 * the begin pads enter the index arithmetic).
 * The split-K cases (a batch-1 7x7 layer on conv2d_tc, fp16 and fp32 with
 * tf32) check that the executor sizes and passes the workspace and the
 * zeroed counters, and that later runs on the same exec (counters reset)
 * are right too; two split-K kernels in one plan share both buffers.  Then the
 * direct and depthwise kernels under NVRTC for sm_80 and sm_90: no warnings,
 * and (with nvdisasm / cuobjdump, found as test_conv_tc_sass finds them) no
 * local memory: no LDL / STL, STACK:0, LOCAL:0.
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
#include "jit.h"
#include "plan.h"
#include "testutil.h"

static char *cache_dir;

static int group_setup(void **state)
{
    (void)state;
    cache_dir = tu_tmpdir();
    setenv("FUSEGEN_CACHE_DIR", cache_dir, 1);
    unsetenv("FUSEGEN_EMU_ASAN");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(cache_dir);
    free(cache_dir);
    return 0;
}

/* Plans yaml, checks that group 0 runs on template tpl, compiles for the
 * emulator and compares with the reference; returns the exec (caller frees
 * it, the plan and the graph through *pp / *gp). */
static fg_exec *run_yaml(fg_context *ctx, const char *yaml, const char *tpl, double tol, fg_plan **pp, fg_graph **gp)
{
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    if (fg_graph_parse(ctx, "t.yaml", yaml, strlen(yaml), &g) != FG_OK || fg_plan_build(ctx, g, &p) != FG_OK) {
        tu_dump_errors(ctx);
        fail();
    }
    assert_string_equal(p->groups[0].template_name, tpl);
    fg_exec *e = tu_compile_emu(ctx, p);
    tu_exec_vs_reference(ctx, g, e, 4321, tol);
    *pp = p;
    *gp = g;
    return e;
}

static void check_yaml(fg_context *ctx, const char *yaml, const char *tpl, double tol)
{
    fg_plan *p;
    fg_graph *g;
    fg_exec *e = run_yaml(ctx, yaml, tpl, tol, &p, &g);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* A one-conv graph: header, input [N, C, H, W], weight [K, C/groups, R, S], conv attrs, then relu. */
static const char *conv_graph(const char *dtype, const char *layout, int N, int C, int H, int W, int K, int groups,
                              int R, const char *attrs)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "graph: c\nseed: 5\ndtype: %s\nlayout: %s\n"
             "inputs: [{ name: x, shape: [%d, %d, %d, %d] }]\n"
             "weights: [{ name: w, shape: [%d, %d, %d, %d] }, { name: b, shape: [%d] }]\n"
             "nodes:\n"
             "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: %s }\n"
             "  - { name: y, op: relu, inputs: [c] }\n"
             "outputs: [y]\n",
             dtype, layout, N, C, H, W, K, C / groups, R, R, K, attrs);
    return buf;
}

static void test_direct_conv(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    /* one chunk, fp32 NCHW, exact */
    check_yaml(ctx, conv_graph("fp32", "NCHW", 2, 3, 9, 7, 5, 1, 3, "{ padding: [1, 1] }"), "conv2d", 1e-5);
    /* three chunks (56 + 56 + 18 channels), stride 2 */
    check_yaml(ctx, conv_graph("fp32", "NCHW", 1, 130, 7, 6, 9, 1, 3, "{ stride: [2, 2], padding: [1, 1] }"), "conv2d",
               1e-5);
    check_yaml(ctx, conv_graph("fp32", "NHWC", 1, 130, 5, 5, 16, 1, 3, "{ padding: [1, 1] }"), "conv2d", 1e-5);
    /* asymmetric padding, dilation, groups */
    check_yaml(ctx, conv_graph("fp32", "NCHW", 2, 6, 8, 7, 4, 2, 3, "{ groups: 2, padding: [2, 0, 1, 3], dilation: [2, 1] }"),
               "conv2d", 1e-5);
    check_yaml(ctx, conv_graph("fp16", "NHWC", 1, 6, 13, 13, 8, 2, 7, "{ stride: [2, 2], padding: [3, 2, 2, 3], groups: 2 }"),
               "conv2d", 5e-3);
    /* depthwise with asymmetric padding */
    check_yaml(ctx, conv_graph("fp32", "NHWC", 1, 8, 7, 7, 8, 8, 3, "{ groups: 8, padding: [0, 1, 2, 1] }"),
               "conv2d_depthwise", 1e-5);
    fg_context_free(ctx);
}

/* The executor's workspace: a batch-1 7x7 layer splits its reduction. */
static void test_split_k_in_exec(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char *const heads[] = {"fp16", "fp32"};
    for (int i = 0; i < 2; i++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml, "%s%s", i ? "precision: tf32\n" : "",
                 conv_graph(heads[i], "NHWC", 1, 64, 7, 7, 64, 1, 3, "{ padding: [1, 1] }"));
        fg_plan *p;
        fg_graph *g;
        fg_exec *e = run_yaml(ctx, yaml, "conv2d_tc", i ? 1e-2 : 5e-3, &p, &g);
        const char *src = fg_exec_kernel_source(e, 0);
        assert_non_null(strstr(src, i ? "split-K 9 (" : "split-K 4 ("));
        assert_non_null(strstr(src, "void *fg_workspace;"));
        /* a second and third run on the same workspace */
        tu_exec_vs_reference(ctx, g, e, 99, i ? 1e-2 : 5e-3);
        tu_exec_vs_reference(ctx, g, e, 4321, i ? 1e-2 : 5e-3);
        fg_exec_free(e);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    /* Two split-K kernels in one plan (ResNet-50's 14x14 stage at batch 1):
     * the 3x3 conv splits 56 tiles in 6, the 1x1 conv after it 56 tiles in
     * 2 (fewer slots).  Their counters live in a buffer of their own: placed
     * after each kernel's slots in one workspace, the second kernel's
     * counters lay inside the first one's partial sums and were not zero
     * (rel L2 0.28). */
    static const char two[] =
        "graph: two\nseed: 5\ndtype: fp16\nlayout: NHWC\n"
        "inputs: [{ name: x, shape: [1, 256, 14, 14] }]\n"
        "weights: [{ name: w1, shape: [256, 256, 3, 3] }, { name: w2, shape: [256, 256, 1, 1] }]\n"
        "nodes:\n  - { name: c1, op: conv2d, inputs: [x, w1], attrs: { padding: [1, 1] } }\n"
        "  - { name: r1, op: relu, inputs: [c1] }\n"
        "  - { name: y, op: conv2d, inputs: [r1, w2] }\n"
        "outputs: [y]\n";
    fg_plan *p;
    fg_graph *g;
    fg_exec *e = run_yaml(ctx, two, "conv2d_tc", 5e-3, &p, &g);
    assert_int_equal(p->ngroups, 2);
    assert_non_null(strstr(fg_exec_kernel_source(e, 0), "split-K 6 ("));
    assert_non_null(strstr(fg_exec_kernel_source(e, 1), "split-K 2 ("));
    assert_non_null(strstr(fg_exec_kernel_source(e, 1), "int *fg_counters;"));
    tu_exec_vs_reference(ctx, g, e, 7, 5e-3);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_nvrtc_no_local_memory(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile for real */
    fg_context *ctx = tu_ctx_shipped();
    struct { const char *yaml; const char *tpl; } cases[4];
    char y[4][2048];
    snprintf(y[0], sizeof y[0], "%s", conv_graph("fp32", "NCHW", 1, 130, 7, 6, 9, 1, 3, "{ padding: [1, 1] }"));
    snprintf(y[1], sizeof y[1], "%s", conv_graph("fp16", "NHWC", 1, 6, 13, 13, 8, 2, 7, "{ stride: [2, 2], padding: [3, 3], groups: 2 }"));
    snprintf(y[2], sizeof y[2], "%s", conv_graph("bf16", "NHWC", 1, 6, 8, 7, 4, 2, 3, "{ groups: 2, padding: [1, 1] }"));
    snprintf(y[3], sizeof y[3], "%s", conv_graph("fp32", "NHWC", 1, 8, 7, 7, 8, 8, 3, "{ groups: 8, padding: [0, 1, 2, 1] }"));
    for (int i = 0; i < 4; i++) {
        cases[i].yaml = y[i];
        cases[i].tpl = i == 3 ? "conv2d_depthwise" : "conv2d";
    }
    fg_kernel ks[4];
    fg_plan *plans[4];
    fg_graph *graphs[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(fg_graph_parse(ctx, "t.yaml", cases[i].yaml, strlen(cases[i].yaml), &graphs[i]), FG_OK);
        assert_int_equal(fg_plan_build(ctx, graphs[i], &plans[i]), FG_OK);
        assert_string_equal(plans[i]->groups[0].template_name, cases[i].tpl);
        assert_int_equal(fg_emit_group(ctx, plans[i], 0, NULL, &ks[i]), FG_OK);
    }
    const int tools = tu_cuda_tools_found("SASS part");
    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info infos[4];
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        memset(infos, 0, sizeof infos);
        fg_status st = fg_jit_compile_all(ctx, ks, 4, archs[a], infos);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        for (int i = 0; i < 4; i++) {
            if (infos[i].log[0]) {
                fprintf(stderr, "%s (%s): NVRTC log:\n%s\n", ks[i].name, archs[a], infos[i].log);
                failures++;
            }
            if (!tools)
                continue;
            fg_res_usage ru;
            fg_sass_mix mx;
            tu_cubin_read(&ks[i], &ru, &mx, NULL);
            printf("%s %-22s %s: REG %d, STACK %d, LOCAL %d, LDL/STL %d\n", archs[a], ks[i].name, cases[i].tpl,
                   ru.registers, ru.stack, ru.local, mx.ldl + mx.stl);
            if (mx.ldl || mx.stl || ru.stack != 0 || ru.local != 0)
                failures++;
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < 4; i++) {
        fg_kernel_free(&ks[i]);
        fg_plan_free(plans[i]);
        fg_graph_free(graphs[i]);
    }
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_conv),
        cmocka_unit_test(test_split_k_in_exec),
        cmocka_unit_test(test_nvrtc_no_local_memory),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
