/*
 * test_report.c -- the performance report (fg_plan_report, runtime/report.c)
 * read without a GPU, and the structure it must show:
 *
 *  - FLOPs and bytes: a graph of one grouped, strided, padded convolution
 *    and one matmul; the report's FLOPs and bytes of each kernel equal the
 *    values computed here from the YAML's numbers (2 N K P Q (C/g) R S,
 *    2 M N K; inputs + weights + output once).
 *  - argument checks: NULL arguments, an unknown device model, a PTX target.
 *  - ResNet-50 in fp16 NHWC: every dense convolution whose channels are a
 *    multiple of 8 runs on conv2d_tc and its SASS holds tensor-core mma
 *    (HMMA), no kernel touches local memory (no stack, no LDL / STL), the
 *    roofline bound of every kernel is positive, and the totals are the sums
 *    of the kernels.
 *
 * That no kernel of the shipped rules uses local memory, on every example
 * graph in every dtype and layout, is checked where those kernels are
 * compiled anyway: test_emit_nvrtc.c reads each sm_80 and sm_90 cubin.
 *
 * Kernels go through the kernel cache: $FUSEGEN_CACHE_DIR when set (a rerun
 * then reads the cached cubins, which are what a GPU would load), else a
 * fresh temporary directory (everything compiled for real).
 *
 * cuobjdump and nvdisasm come from the CUDA toolkit or pip
 * (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm); without them the SASS tests
 * are skipped and say so.
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

#include "cuda_tools.h"
#include "plan.h"
#include "report.h"
#include "testutil.h"

static int tools_present(void)
{
    if (fg_cuda_tool_path(FG_TOOL_CUOBJDUMP) && fg_cuda_tool_path(FG_TOOL_NVDISASM))
        return 1;
    printf("SASS check NOT RUN: cuobjdump / nvdisasm not found (pip install nvidia-cuda-cuobjdump "
           "nvidia-cuda-nvdisasm, or set FUSEGEN_CUDA_TOOLS)\n");
    fflush(stdout);
    return 0;
}

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * fabs(want)) {
        fprintf(stderr, "%s: report %.17g, computed %.17g\n", what, got, want);
        fail();
    }
}

/* ---- FLOPs and bytes ------------------------------------------------------- */

/* The shapes, written into the graph text below. */
enum { CN = 2, CC = 12, CH = 17, CW = 13, CK = 10, CG = 2, CR = 3, CS = 5, CSH = 2, CSW = 1, CPH = 1, CPW = 2 };
enum { MM = 7, MK = 24, MN = 40 };

static void test_flops_and_bytes(void **state)
{
    (void)state;
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "graph: work\nseed: 3\ndtype: fp32\nlayout: NCHW\n"
             "inputs:\n  - { name: x, shape: [%d, %d, %d, %d] }\n  - { name: a, shape: [%d, %d] }\n"
             "weights:\n  - { name: w, shape: [%d, %d, %d, %d] }\n  - { name: b, shape: [%d, %d] }\n"
             "nodes:\n"
             "  - { name: conv, op: conv2d, inputs: [x, w], attrs: { stride: [%d, %d], padding: [%d, %d], groups: %d } }\n"
             "  - { name: mm, op: matmul, inputs: [a, b] }\n"
             "outputs: [conv, mm]\n",
             CN, CC, CH, CW, MM, MK, CK, CC / CG, CR, CS, MK, MN, CSH, CSW, CPH, CPW, CG);
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "work.yaml", yaml, strlen(yaml), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(fg_plan_group_count(p), 2);
    fg_report *r = NULL;
    st = fg_plan_report(ctx, p, NULL, &r);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(fg_report_kernel_count(r), 2);

    long P = (CH + 2 * CPH - CR) / CSH + 1, Q = (CW + 2 * CPW - CS) / CSW + 1;
    double conv_flops = 2.0 * CN * CK * P * Q * (CC / CG) * CR * CS;
    double conv_bytes = 4.0 * (CN * CC * CH * CW + CK * (CC / CG) * CR * CS + CN * CK * P * Q);
    double mm_flops = 2.0 * MM * MN * MK, mm_bytes = 4.0 * (MM * MK + MK * MN + MM * MN);
    int seen = 0;
    double flops = 0, bytes = 0, bound = 0, est = 0;
    for (int i = 0; i < 2; i++) {
        const fg_kernel_report *k = fg_report_kernel(r, i);
        assert_non_null(k);
        fg_group_info gi;
        assert_int_equal(fg_plan_group_info(ctx, p, k->group, &gi), FG_OK);
        printf("%s (%s): %.0f FLOP, %.0f bytes, bound %.4f us (%s)\n", k->name, k->template_name, k->flops, k->bytes,
               k->bound_us, k->bound_by);
        if (!strcmp(gi.anchor, "conv")) {
            near(k->flops, conv_flops, "conv FLOPs");
            near(k->bytes, conv_bytes, "conv bytes");
            seen |= 1;
        } else {
            assert_string_equal(gi.anchor, "mm");
            near(k->flops, mm_flops, "matmul FLOPs");
            near(k->bytes, mm_bytes, "matmul bytes");
            seen |= 2;
        }
        /* the bound from the H200 figures, recomputed */
        double peak = k->hmma || k->hgmma ? 495e12 : 67e12;
        double want = fmax(k->flops / peak, k->bytes / 4.3e12) * 1e6;
        near(k->bound_us, want, "roofline bound");
        /* the latency model: its terms add up, and it never beats the roofline */
        double main_us = fmax(k->est_math_us, fmax(k->est_mem_us, k->est_chain_us));
        near(k->est_us, k->est_launch_us + main_us + k->est_epi_us + k->est_split_us, "latency model sum");
        assert_true(k->est_launch_us > 0 && k->est_math_us > 0 && k->est_mem_us > 0);
        assert_true(k->est_us - k->est_launch_us >= k->bound_us);
        est += k->est_us;
        flops += k->flops;
        bytes += k->bytes;
        bound += k->bound_us;
    }
    assert_int_equal(seen, 3);
    assert_null(fg_report_kernel(r, 2));
    assert_null(fg_report_kernel(r, -1));
    const fg_report_summary *s = fg_report_summary_of(r);
    near(s->flops, flops, "total FLOPs");
    near(s->bytes, bytes, "total bytes");
    near(s->bound_us, bound, "total bound");
    near(s->est_us, est, "total estimate");
    assert_string_equal(s->device_model, "h200");
    assert_non_null(strstr(fg_report_text(r), "roofline lower bound"));
    assert_non_null(strstr(fg_report_text(r), "latency model:"));
    fg_report_free(r);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- argument checks ---------------------------------------------------------- */

static void test_bad_arguments(void **state)
{
    (void)state;
    static const char yaml[] = "graph: t\nseed: 1\ninputs:\n  - { name: x, shape: [64] }\n"
                               "nodes:\n  - { name: r, op: relu, inputs: [x] }\noutputs: [r]\n";
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = NULL;
    assert_int_equal(fg_graph_parse(ctx, "t.yaml", yaml, strlen(yaml), &g), FG_OK);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_report *r = (fg_report *)1;
    assert_int_equal(fg_plan_report(NULL, p, NULL, &r), FG_ERR_INPUT);
    assert_null(r);
    assert_int_equal(fg_plan_report(ctx, NULL, NULL, &r), FG_ERR_INPUT);
    assert_int_equal(fg_plan_report(ctx, p, NULL, NULL), FG_ERR_INPUT);
    fg_report_options o = {.device_model = "h2000", .size = sizeof o};
    assert_int_equal(fg_plan_report(ctx, p, &o, &r), FG_ERR_INPUT);
    const fg_error *e = fg_context_error(ctx, fg_context_error_count(ctx) - 1);
    assert_non_null(strstr(e->message, "unknown device model 'h2000'"));
    o.device_model = NULL;
    o.arch = "compute_90";
    assert_int_equal(fg_plan_report(ctx, p, &o, &r), FG_ERR_INPUT);
    o.arch = "sm_9";
    assert_int_equal(fg_plan_report(ctx, p, &o, &r), FG_ERR_INPUT);
    /* the device model's arch is the default target */
    o.arch = NULL;
    o.device_model = "A100";
    assert_int_equal(fg_plan_report(ctx, p, &o, &r), FG_OK);
    assert_string_equal(fg_report_summary_of(r)->arch, "sm_80");
    assert_int_equal(fg_report_kernel_count(r), 1);
    fg_report_free(r);
    /* getters on NULL */
    assert_int_equal(fg_report_kernel_count(NULL), 0);
    assert_null(fg_report_kernel(NULL, 0));
    assert_null(fg_report_summary_of(NULL));
    assert_null(fg_report_text(NULL));
    fg_report_free(NULL);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- ResNet-50, fp16 NHWC ------------------------------------------------------ */

static fg_graph *load_variant(fg_context *ctx, const char *example, fg_dtype dt, fg_layout lay)
{
    char rel[256];
    snprintf(rel, sizeof rel, "examples/%s.yaml", example);
    fg_graph *g = NULL;
    fg_status st = fg_graph_load(ctx, tu_src(rel), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    for (int t = 0; t < g->ntensors; t++) {
        g->tensors[t].dtype = dt;
        g->tensors[t].layout = lay;
    }
    return g;
}

static void test_resnet50_fp16_nhwc(void **state)
{
    (void)state;
    if (!tools_present())
        skip();
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = load_variant(ctx, "resnet50", FG_DTYPE_F16, FG_LAYOUT_NHWC);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_report *r = NULL;
    fg_status st = fg_plan_report(ctx, p, NULL, &r);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fputs(fg_report_text(r), stdout);
    const fg_graph *pg = p->graph;
    int dense = 0, on_tc = 0, failures = 0, tc_kernels = 0, local = 0;
    double flops = 0, split_bytes = 0;
    for (int i = 0; i < fg_report_kernel_count(r); i++) {
        const fg_kernel_report *k = fg_report_kernel(r, i);
        const fg_group *grp = &p->groups[k->group];
        assert_true(k->sass_read);
        assert_true(k->registers > 0);
        assert_true(k->bound_us > 0);
        assert_true(k->est_us > k->bound_us);
        /* split-K partials exactly where the kernel splits */
        assert_true((k->est_splits > 1) == (k->est_split_bytes > 0) || !strstr(k->tile, "x"));
        split_bytes += k->est_split_bytes;
        flops += k->flops;
        tc_kernels += k->hmma + k->hgmma > 0;
        if (k->stack_bytes || k->local_bytes || k->ldl || k->stl) {
            fprintf(stderr, "%s: stack %d, local %d, LDL %d, STL %d\n", k->name, k->stack_bytes, k->local_bytes,
                    k->ldl, k->stl);
            local++;
        }
        if (grp->anchor < 0 || pg->nodes[grp->anchor].op->kind != FG_OPK_CONV2D)
            continue;
        const fg_node *nd = &pg->nodes[grp->anchor];
        if (fg_node_attr(nd, "groups") && fg_node_attr_int(nd, "groups", 0) != 1)
            continue;
        dense++;
        on_tc++;
        if (strcmp(k->template_name, "conv2d_tc") || k->hmma == 0) {
            fprintf(stderr, "%s: template %s, HMMA %d\n", k->name, k->template_name, k->hmma);
            failures++;
        }
        if (strcmp(k->peak_name, "fp16 tensor core"))
            failures++;
    }
    printf("resnet50 fp16 NHWC: %d dense convolutions, %d checked, all on tensor cores: %s; "
           "%d kernels using local memory\n", dense, on_tc, failures ? "NO" : "yes", local);
    assert_true(dense >= 50);
    assert_true(on_tc == dense);   /* the 7x7 stem, C = 3, included */
    assert_int_equal(failures, 0);
    assert_int_equal(local, 0);
    const fg_report_summary *s = fg_report_summary_of(r);
    assert_int_equal(s->tensor_core_kernels, tc_kernels);
    assert_int_equal(s->local_memory_kernels, 0);
    near(s->flops, flops, "total FLOPs");
    near(s->est_split_bytes, split_bytes, "split-K partials");
    fg_report_free(r);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

int main(void)
{
    char *own = NULL;
    if (!getenv("FUSEGEN_CACHE_DIR")) {
        own = tu_tmpdir();
        setenv("FUSEGEN_CACHE_DIR", own, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops_and_bytes),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_resnet50_fp16_nhwc),
    };
    /* FUSEGEN_TEST_FILTER=test_flops* runs the tests whose names match */
    if (getenv("FUSEGEN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("FUSEGEN_TEST_FILTER"));
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (own) {
        tu_rmtree(own);
        free(own);
    }
    return rc;
}
