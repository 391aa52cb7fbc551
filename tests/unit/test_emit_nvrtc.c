/*
 * test_emit_nvrtc.c -- every kernel the shipped rules produce on the small
 * example graphs (and a coverage graph of pooling, flatten, depthwise,
 * batched / transposed gemm and pointwise chains) compiles under NVRTC for
 * sm_80 and sm_90, for fp32 / fp16 / bf16 and NCHW / NHWC, specialized and
 * not, with an empty log: no errors and no warnings.  Identical sources are
 * compiled once.  No GPU needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "testutil.h"

/* Graphs with more nodes than this are whole networks: their blocks are covered. */
#define MAX_NODES 20

static const char coverage_graph[] =
    "graph: coverage\n"
    "seed: 7\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 6, 9, 9] }\n"
    "  - { name: m, shape: [3, 7, 13] }\n"
    "  - { name: q, shape: [3, 13] }\n"
    "  - { name: r, shape: [3, 1] }\n"
    "weights:\n"
    "  - { name: dw.w, shape: [12, 1, 3, 3] }\n"
    "  - { name: gc.w, shape: [6, 3, 1, 3] }\n"
    "  - { name: slope, shape: [6] }\n"
    "  - { name: fcw, shape: [13, 5] }\n"
    "  - { name: fct, shape: [5, 13] }\n"
    "  - { name: bn.gamma, shape: [6], init: positive }\n"
    "  - { name: bn.beta, shape: [6] }\n"
    "  - { name: bn.mean, shape: [6] }\n"
    "  - { name: bn.var, shape: [6], init: positive }\n"
    "nodes:\n"
    "  - { name: mp, op: max_pool2d, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
    "  - { name: lr, op: leaky_relu, inputs: [mp], attrs: { alpha: 0.2 } }\n"
    "  - { name: ap, op: avg_pool2d, inputs: [lr], attrs: { kernel: [2, 2], stride: [1, 1], padding: [1, 1] } }\n"
    "  - { name: pr, op: prelu, inputs: [ap, slope] }\n"
    "  - { name: gp, op: global_avg_pool, inputs: [pr] }\n"
    "  - { name: fl, op: flatten, inputs: [gp] }\n"
    "  - { name: dw, op: conv2d, inputs: [x, dw.w], attrs: { groups: 6, stride: [2, 2], padding: [1, 1], dilation: [2, 2] } }\n"
    "  - { name: gc, op: conv2d, inputs: [x, gc.w], attrs: { groups: 2, padding: [0, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [gc, bn.gamma, bn.beta, bn.mean, bn.var] }\n"
    "  - { name: sq, op: mul, inputs: [bn, x] }\n"
    "  - { name: mm, op: matmul, inputs: [m, fcw] }\n"
    "  - { name: sg, op: sigmoid, inputs: [mm] }\n"
    "  - { name: mt, op: matmul, inputs: [q, fct], attrs: { trans_b: true } }\n"
    "  - { name: ad, op: add, inputs: [mt, r] }\n"
    "  - { name: th, op: tanh, inputs: [ad] }\n"
    "outputs: [fl, dw, sq, sg, th]\n";

typedef struct seen {
    fg_hash128 *h;
    int n, cap;
} seen;

static int seen_add(seen *s, fg_hash128 h)
{
    for (int i = 0; i < s->n; i++)
        if (s->h[i].lo == h.lo && s->h[i].hi == h.hi)
            return 0;
    *FG_PUSH(s->h, s->n, s->cap) = h;
    return 1;
}

static int compiled, failures;

static void compile_one(const fg_kernel *k, const char *what)
{
    static const char *const archs[] = {"-arch=sm_80", "-arch=sm_90"};
    const char *hdr_src[] = {fg_template_text("prelude.cuh")};
    const char *hdr_name[] = {"fusegen_prelude.cuh"};
    assert_non_null(hdr_src[0]);
    for (int a = 0; a < 2; a++) {
        nvrtcProgram prog;
        assert_int_equal(nvrtcCreateProgram(&prog, k->source, k->name, 1, hdr_src, hdr_name), NVRTC_SUCCESS);
        const char *opts[] = {archs[a], "--std=c++17", "-default-device"};
        nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = fg_xmalloc(n + 1);
        log[0] = 0;
        nvrtcGetProgramLog(prog, log);
        int bad = r != NVRTC_SUCCESS || strstr(log, "warning") || strstr(log, "error");
        if (bad) {
            failures++;
            fprintf(stderr, "---- %s (%s, %s): %s\n%s\n---- source:\n%s\n", k->name, what, archs[a],
                    nvrtcGetErrorString(r), log, k->source);
        } else {
            compiled++;
        }
        free(log);
        nvrtcDestroyProgram(&prog);
    }
}

/* Plans g with every tensor set to dtype d and layout l and compiles each new kernel. */
static void compile_graph(fg_context *ctx, fg_graph *g, fg_dtype d, fg_layout l, int specialize, seen *s)
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
    fg_emit_opts o = {.specialize = specialize};
    char what[160];
    snprintf(what, sizeof what, "%s %s %s%s", g->name, fg_dtype_name(d), fg_layout_name(l),
             specialize ? "" : " unspecialized");
    for (int i = 0; i < p->ngroups; i++) {
        fg_kernel k;
        st = fg_emit_group(ctx, p, i, &o, &k);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        if (seen_add(s, fg_hash128_of(k.source, strlen(k.source))))
            compile_one(&k, what);
        fg_kernel_free(&k);
    }
    fg_plan_free(p);
}

static void run_graph(fg_context *ctx, fg_graph *g, seen *s)
{
    for (int d = 0; d < FG_DTYPE_COUNT; d++)
        for (int l = 0; l < FG_LAYOUT_COUNT; l++)
            for (int spec = 1; spec >= 0; spec--) {
                if (!spec && (d != FG_DTYPE_F32 || l != FG_LAYOUT_NCHW) && d != FG_DTYPE_F16)
                    continue;   /* unspecialized: fp32 NCHW, and fp16 (tensor cores) */
                compile_graph(ctx, g, (fg_dtype)d, (fg_layout)l, spec, s);
            }
}

static void test_examples_compile(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    seen s = {0};
    int graphs = 0;
    DIR *dir = opendir(tu_src("examples"));
    assert_non_null(dir);
    struct dirent *e;
    char *names[64];
    int nnames = 0;
    while ((e = readdir(dir)) && nnames < 64) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".yaml") == 0)
            names[nnames++] = fg_xstrdup(e->d_name);
    }
    closedir(dir);
    for (int i = 0; i < nnames; i++) {
        char rel[300];
        snprintf(rel, sizeof rel, "examples/%s", names[i]);
        fg_graph *g = NULL;
        fg_status st = fg_graph_load(ctx, tu_src(rel), &g);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        if (g->nnodes <= MAX_NODES) {
            run_graph(ctx, g, &s);
            graphs++;
        }
        fg_graph_free(g);
        free(names[i]);
    }
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "coverage.yaml", coverage_graph, strlen(coverage_graph), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    run_graph(ctx, g, &s);
    fg_graph_free(g);
    printf("nvrtc: %d graphs + coverage, %d distinct kernels, %d compiles clean, %d failed\n", graphs, s.n, compiled,
           failures);
    assert_true(graphs >= 3);
    assert_true(compiled > 0);
    assert_int_equal(failures, 0);
    free(s.h);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
