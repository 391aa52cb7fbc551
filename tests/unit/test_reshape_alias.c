/*
 * test_reshape_alias.c -- Flatten / Reshape as an alias
 * (codegen/reshape_alias.c): a lone flatten or reshape whose input and
 * output are stored in row-major order gets no kernel, its output a view of
 * its input; each refusal rule keeps the copy kernel with its reason (the
 * --explain lines); and the results in CPU emulation match the host
 * reference of the unfused graph: a classifier head (conv, global average
 * pool, flatten, matmul) in NCHW and NHWC, fp32 and fp16, batch 1 and 3;
 * a chain of reshapes (views nested); a flatten after a concat written in
 * place; the refused forms (NHWC pixels and channels, a graph input, a
 * graph output).  ResNet-50 plans one kernel fewer than it has groups with
 * a copy (56, its flatten aliased).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "exec.h"
#include "plan.h"
#include "testutil.h"

static fg_graph *parse(fg_context *ctx, const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", yaml, strlen(yaml), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

/* Nonzero when some --explain line of p's reshapes contains want. */
static int has_line(const fg_plan *p, const char *want)
{
    for (int i = 0; p->views && i < p->views->nalias_lines; i++)
        if (strstr(p->views->alias_lines[i], want))
            return 1;
    return 0;
}

/* Kernels of plan p that run a flatten or reshape node. */
static int reshape_kernels(const fg_plan *p)
{
    int n = 0;
    for (int gi = 0; gi < p->ngroups; gi++)
        for (int k = 0; k < p->groups[gi].nnodes; k++) {
            fg_op_kind kind = p->graph->nodes[p->groups[gi].nodes[k]].op->kind;
            n += kind == FG_OPK_FLATTEN || kind == FG_OPK_RESHAPE;
        }
    return n;
}

/* Plans text, checks the aliases, the copy kernels left and the line
 * wanted, runs it in emulation against the reference. */
static void run_case(fg_context *ctx, const char *what, const char *text, int want_aliases, int want_copies,
                     const char *want_line, double tol)
{
    fg_graph *g = parse(ctx, text);
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    int aliases = p->views ? p->views->naliases : 0, copies = reshape_kernels(p);
    print_message("%s: %d aliased, %d copy kernels, %d kernels\n", what, aliases, copies, p->ngroups);
    if (aliases != want_aliases || copies != want_copies || (want_line && !has_line(p, want_line))) {
        for (int i = 0; p->views && i < p->views->nalias_lines; i++)
            fprintf(stderr, "    %s\n", p->views->alias_lines[i]);
        fail_msg("%s: %d aliased, %d copies (want %d, %d; line '%s')", what, aliases, copies, want_aliases,
                 want_copies, want_line ? want_line : "");
    }
    fg_exec *e = tu_compile_emu(ctx, p);
    for (int t = 0; t < g->ntensors; t++) {
        size_t off = 0;
        if (fg_exec_tensor_place(e, t, &off) == FG_PLACE_VIEW)
            assert_true(p->views && p->views->parent[t] >= 0);
    }
    tu_exec_vs_reference(ctx, g, e, 7, tol);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* dtype, layout, batch */
static const char head_fmt[] =
    "graph: head\nseed: 3\ndtype: %s\nlayout: %s\n"
    "inputs:\n  - { name: x, shape: [%d, 16, 7, 5] }\n"
    "weights:\n  - { name: w, shape: [24, 16, 3, 3] }\n  - { name: b, shape: [24] }\n"
    "  - { name: fc, shape: [24, 10] }\n  - { name: fb, shape: [10] }\n"
    "nodes:\n"
    "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
    "  - { name: r, op: relu, inputs: [c] }\n"
    "  - { name: pool, op: global_avg_pool, inputs: [r] }\n"
    "  - { name: flat, op: flatten, inputs: [pool] }\n"
    "  - { name: mm, op: matmul, inputs: [flat, fc] }\n"
    "  - { name: y, op: add, inputs: [mm, fb] }\n"
    "outputs: [y]\n";

static void test_classifier_head(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const struct {
        const char *dtype, *layout;
        int batch;
        double tol;
    } v[] = {
        {"fp32", "NCHW", 1, 1e-5}, {"fp32", "NHWC", 3, 1e-5}, {"fp16", "NHWC", 1, 5e-3}, {"fp16", "NCHW", 3, 5e-3},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char text[2048], what[64];
        snprintf(text, sizeof text, head_fmt, v[i].dtype, v[i].layout, v[i].batch);
        snprintf(what, sizeof what, "head %s %s batch %d", v[i].dtype, v[i].layout, v[i].batch);
        run_case(ctx, what, text, 1, 0, "flatten flat: no kernel (flat aliases pool", v[i].tol);
    }
    fg_context_free(ctx);
}

/* Reshapes after a kernel: the flatten aliases the sigmoid's output, and the
 * two reshapes after it (one group: the planner chains them) alias the
 * flatten (views nested); a matmul reads the last (a pointwise consumer
 * would take the reshapes into its own kernel's indexing). */
static const char chain_text[] =
    "graph: chain\nseed: 4\n"
    "inputs:\n  - { name: x, shape: [2, 6, 5, 7] }\n"
    "weights:\n  - { name: w, shape: [35, 4] }\n"
    "nodes:\n"
    "  - { name: s, op: sigmoid, inputs: [x] }\n"
    "  - { name: f, op: flatten, inputs: [s] }\n"
    "  - { name: r1, op: reshape, inputs: [f], attrs: { shape: [3, 4, 35] } }\n"
    "  - { name: r2, op: reshape, inputs: [r1], attrs: { shape: [12, 35] } }\n"
    "  - { name: y, op: matmul, inputs: [r2, w] }\n"
    "outputs: [y]\n";

/* A flatten of a concat whose inputs are written in place (NCHW batch 1):
 * the flatten's view is inside the concat's output, itself no kernel. */
static const char concat_text[] =
    "graph: catflat\nseed: 5\n"
    "inputs:\n  - { name: x, shape: [1, 4, 3, 3] }\n"
    "weights:\n  - { name: w, shape: [4, 4, 1, 1] }\n  - { name: fc, shape: [72, 5] }\n"
    "nodes:\n"
    "  - { name: a, op: conv2d, inputs: [x, w] }\n"
    "  - { name: b, op: conv2d, inputs: [a, w] }\n"
    "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n"
    "  - { name: f, op: flatten, inputs: [cat] }\n"
    "  - { name: y, op: matmul, inputs: [f, fc] }\n"
    "outputs: [y]\n";

static void test_nested_views(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    run_case(ctx, "reshape chain", chain_text, 2, 0, "reshape r2: no kernel (r2 aliases f", 1e-5);
    setenv("FUSEGEN_KEEP_LAYOUT", "1", 1);
    run_case(ctx, "flatten of an in-place concat", concat_text, 1, 0, "flatten f: no kernel (f aliases cat", 1e-5);
    unsetenv("FUSEGEN_KEEP_LAYOUT");
    fg_context_free(ctx);
}

/* The refused forms keep their copy kernel, with the reason. */
static void test_refusals(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    /* NHWC with pixels and channels: the flatten reorders the bytes */
    setenv("FUSEGEN_KEEP_LAYOUT", "1", 1);
    run_case(ctx, "NHWC pixels",
             "graph: nhwc\nseed: 6\nlayout: NHWC\n"
             "inputs:\n  - { name: x, shape: [2, 3, 4, 5] }\n"
             "weights:\n  - { name: fc, shape: [60, 7] }\n"
             "nodes:\n"
             "  - { name: s, op: relu, inputs: [x] }\n"
             "  - { name: f, op: flatten, inputs: [s] }\n"
             "  - { name: y, op: matmul, inputs: [f, fc] }\n"
             "outputs: [y]\n",
             0, 1, "flatten f: copied because s is stored NHWC with channels and pixels", 1e-5);
    unsetenv("FUSEGEN_KEEP_LAYOUT");
    run_case(ctx, "graph input",
             "graph: gin\nseed: 7\n"
             "inputs:\n  - { name: x, shape: [2, 3, 4, 5] }\n"
             "nodes:\n"
             "  - { name: f, op: flatten, inputs: [x] }\n"
             "  - { name: y, op: tanh, inputs: [f] }\n"
             "outputs: [y]\n",
             0, 1, "flatten f: copied because x is a graph input", 1e-5);
    run_case(ctx, "graph output",
             "graph: gout\nseed: 8\n"
             "inputs:\n  - { name: x, shape: [2, 3, 4, 5] }\n"
             "nodes:\n"
             "  - { name: s, op: sigmoid, inputs: [x] }\n"
             "  - { name: f, op: flatten, inputs: [s] }\n"
             "  - { name: y, op: tanh, inputs: [f] }\n"
             "outputs: [y, f]\n",
             0, 1, "flatten f: copied because f is a graph output", 1e-5);
    fg_context_free(ctx);
}

/* ResNet-50 (examples/resnet50.yaml, fp32 NCHW, and fp16 NHWC): the flatten
 * before the classifier aliases the global pool's output; 56 kernels. */
static void test_resnet50_kernels(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    for (int v = 0; v < 2; v++) {
        fg_graph *g = NULL;
        assert_int_equal(fg_graph_load(ctx, tu_src("examples/resnet50.yaml"), &g), FG_OK);
        for (int t = 0; v && t < g->ntensors; t++) {
            g->tensors[t].dtype = FG_DTYPE_F16;
            g->tensors[t].layout = FG_LAYOUT_NHWC;
        }
        fg_plan *p = NULL;
        fg_status st = fg_plan_build(ctx, g, &p);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        print_message("resnet50 %s: %d kernels, %d aliased\n", v ? "fp16 NHWC" : "fp32 NCHW", p->ngroups,
                      p->views ? p->views->naliases : 0);
        assert_int_equal(p->ngroups, 56);
        assert_int_equal(reshape_kernels(p), 0);
        assert_true(has_line(p, "flatten flatten: no kernel (flatten aliases pool"));
        fg_plan_free(p);
        fg_graph_free(g);
    }
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classifier_head),
        cmocka_unit_test(test_nested_views),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_resnet50_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
