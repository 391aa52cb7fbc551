/*
 * test_emit_nvrtc.c -- every kernel the shipped rules produce on the example
 * graphs, whole networks included (and a coverage graph of pooling, flatten,
 * depthwise, batched / transposed gemm, pointwise chains and convolutions
 * that the tensor-core template takes in fp16 / bf16 NHWC) compiles under
 * NVRTC for sm_80 and sm_90, for fp32 / fp16 / bf16 and NCHW / NHWC,
 * specialized and not, with an empty log: no errors and no warnings.
 * Identical sources are compiled once, through the JIT's own compile path
 * (fg_jit_compile_all on all cores, disk cache off).  No GPU needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "jit.h"
#include "testutil.h"

static const char coverage_graph[] =
    "graph: coverage\n"
    "seed: 7\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 6, 9, 9] }\n"
    "  - { name: m, shape: [3, 7, 13] }\n"
    "  - { name: q, shape: [3, 13] }\n"
    "  - { name: r, shape: [3, 1] }\n"
    "  - { name: x16, shape: [2, 16, 9, 9] }\n"
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
    "  - { name: tc.w, shape: [13, 16, 3, 3] }\n"
    "  - { name: tc2.w, shape: [24, 16, 1, 1] }\n"
    "  - { name: tc2.b, shape: [24] }\n"
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
    "  - { name: tc, op: conv2d, inputs: [x16, tc.w], attrs: { stride: [2, 2], padding: [1, 1], dilation: [2, 2] } }\n"
    "  - { name: tc2, op: conv2d, inputs: [x16, tc2.w, tc2.b] }\n"
    "  - { name: tc2r, op: relu, inputs: [tc2] }\n"
    "outputs: [fl, dw, sq, sg, th, tc, tc2r]\n";

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

/* The distinct kernels to compile, and what each came from. */
static fg_kernel *kernels;
static char **origin;
static int nkernels, kernels_cap, norigin, origin_cap, nfailed;

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
        if (seen_add(s, fg_hash128_of(k.source, strlen(k.source)))) {
            *FG_PUSH(origin, norigin, origin_cap) = fg_xstrdup(what);
            *FG_PUSH(kernels, nkernels, kernels_cap) = k;
        } else {
            fg_kernel_free(&k);
        }
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
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile every kernel for real */
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
        run_graph(ctx, g, &s);
        graphs++;
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

    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info *infos = fg_xcalloc((size_t)nkernels, sizeof *infos);
    int clean = 0;
    for (int a = 0; a < 2; a++) {
        fg_status st = fg_jit_compile_all(ctx, kernels, nkernels, archs[a], infos);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        for (int i = 0; i < nkernels; i++) {
            if (infos[i].log[0] || !kernels[i].binary_size) {
                nfailed++;
                fprintf(stderr, "---- %s (%s, %s): log:\n%s\n---- source:\n%s\n", kernels[i].name, origin[i], archs[a],
                        infos[i].log, kernels[i].source);
            } else {
                clean++;
            }
        }
    }
    int ntc = 0;
    for (int i = 0; i < nkernels; i++)
        ntc += kernels[i].template_name && strcmp(kernels[i].template_name, "conv2d_tc") == 0;
    printf("nvrtc: %d graphs + coverage, %d distinct kernels (%d conv2d_tc), %d compiles clean, %d with a warning or "
           "no binary\n", graphs, nkernels, ntc, clean, nfailed);
    assert_true(ntc > 0);
    assert_true(graphs >= 6);
    assert_int_equal(clean, 2 * nkernels);
    assert_int_equal(nfailed, 0);
    for (int i = 0; i < nkernels; i++) {
        fg_kernel_free(&kernels[i]);
        free(origin[i]);
    }
    free(kernels);
    free(origin);
    free(infos);
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
