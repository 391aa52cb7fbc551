/* test_reference.c -- the host reference against hand-checked values and
 * against independent formulations (im2col convolution, transposed copies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

static fg_context *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    return 0;
}

static fg_graph *parse(const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(g_ctx, "test.yaml", yaml, strlen(yaml), &g);
    if (st != FG_OK)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    assert_non_null(g);
    return g;
}

/* Runs g on inputs filled from seed; returns the slots (caller frees). */
static double **run(fg_graph *g, uint64_t seed)
{
    double **v = calloc((size_t)g->ntensors, sizeof *v);
    fg_reference_random_inputs(g, seed, v);
    fg_status st = fg_reference_run(g_ctx, g, v);
    if (st != FG_OK)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    return v;
}

static void release(fg_graph *g, double **v)
{
    fg_reference_free(g, v);
    free(v);
    fg_graph_free(g);
}

static int T(const fg_graph *g, const char *name)
{
    int t = fg_graph_find_tensor(g, name);
    assert_true(t >= 0);
    return t;
}

static void assert_close(double a, double b)
{
    if (fabs(a - b) > 1e-12 * (1.0 + fabs(b)))
        fail_msg("%.17g != %.17g", a, b);
}

/* A 1x1 convolution with bias, every value checked by hand. */
static void test_conv_1x1(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: c1\n"
                        "inputs: [ { name: x, shape: [1, 2, 1, 2] } ]\n"
                        "weights:\n"
                        "  - { name: w, shape: [3, 2, 1, 1], values: [1, 2, -1, 0, 0.5, 0.5] }\n"
                        "  - { name: b, shape: [3], values: [10, 20, 30] }\n"
                        "nodes:\n"
                        "  - { name: y, op: conv2d, inputs: [x, w, b] }\n"
                        "outputs: [y]\n");
    double **v = calloc((size_t)g->ntensors, sizeof *v);
    int x = T(g, "x");
    v[x] = malloc(4 * sizeof(double));
    /* x[c=0] = {1, 2}, x[c=1] = {3, 4} */
    v[x][0] = 1, v[x][1] = 2, v[x][2] = 3, v[x][3] = 4;
    assert_int_equal(fg_reference_run(g_ctx, g, v), FG_OK);
    const double *y = v[T(g, "y")];
    const double want[] = {1 * 1 + 2 * 3 + 10, 1 * 2 + 2 * 4 + 10, -1 * 1 + 0 + 20, -1 * 2 + 20,
                           0.5 * 1 + 0.5 * 3 + 30, 0.5 * 2 + 0.5 * 4 + 30};
    for (int i = 0; i < 6; i++)
        assert_close(y[i], want[i]);
    release(g, v);
}

/* Convolution by im2col: unfold patches into columns, then a plain product. */
static void conv_im2col(const double *x, const double *w, int N, int C, int H, int W, int K, int R, int S, int sh,
                        int sw, int ph, int pw, int dh, int dw, int groups, int OH, int OW, double *y)
{
    int Cg = C / groups, Kg = K / groups, rows = Cg * R * S;
    double *col = calloc((size_t)rows * OH * OW, sizeof *col);
    for (int n = 0; n < N; n++)
        for (int gi = 0; gi < groups; gi++) {
            for (int c = 0; c < Cg; c++)
                for (int r = 0; r < R; r++)
                    for (int s = 0; s < S; s++) {
                        int row = (c * R + r) * S + s;
                        for (int oh = 0; oh < OH; oh++)
                            for (int ow = 0; ow < OW; ow++) {
                                int ih = oh * sh + r * dh - ph, iw = ow * sw + s * dw - pw;
                                double val = 0;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    val = x[((n * C + gi * Cg + c) * H + ih) * W + iw];
                                col[row * OH * OW + oh * OW + ow] = val;
                            }
                    }
            for (int k = 0; k < Kg; k++)
                for (int p = 0; p < OH * OW; p++) {
                    double acc = 0;
                    for (int row = 0; row < rows; row++)
                        acc += w[(gi * Kg + k) * rows + row] * col[row * OH * OW + p];
                    y[((size_t)n * K + gi * Kg + k) * OH * OW + p] = acc;
                }
        }
    free(col);
}

static void check_conv(int N, int C, int H, int W, int K, int R, int S, int sh, int sw, int ph, int pw, int dh,
                       int dw, int groups)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "graph: c\nseed: 7\n"
             "inputs: [ { name: x, shape: [%d, %d, %d, %d] } ]\n"
             "weights: [ { name: w, shape: [%d, %d, %d, %d] } ]\n"
             "nodes:\n"
             "  - { name: y, op: conv2d, inputs: [x, w], attrs: { stride: [%d, %d], padding: [%d, %d], "
             "dilation: [%d, %d], groups: %d } }\n"
             "outputs: [y]\n",
             N, C, H, W, K, C / groups, R, S, sh, sw, ph, pw, dh, dw, groups);
    fg_graph *g = parse(yaml);
    double **v = run(g, 42);
    const fg_tensor *yt = &g->tensors[T(g, "y")];
    int OH = (int)yt->shape[2], OW = (int)yt->shape[3];
    assert_int_equal(OH, (H + 2 * ph - dh * (R - 1) - 1) / sh + 1);
    assert_int_equal(OW, (W + 2 * pw - dw * (S - 1) - 1) / sw + 1);
    double *want = calloc((size_t)N * K * OH * OW, sizeof *want);
    conv_im2col(v[T(g, "x")], v[T(g, "w")], N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, groups, OH, OW, want);
    double mx;
    double err = fg_rel_l2(v[T(g, "y")], want, (int64_t)N * K * OH * OW, &mx);
    if (err > 1e-13)
        fail_msg("conv mismatch: rel l2 %g, max abs %g", err, mx);
    free(want);
    release(g, v);
}

static void test_conv_3x3_variants(void **state)
{
    (void)state;
    check_conv(1, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1);    /* same padding */
    check_conv(2, 4, 13, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2);   /* stride 2, groups 2 */
    check_conv(1, 3, 9, 11, 5, 3, 3, 1, 2, 2, 1, 2, 1, 1);   /* dilation, asymmetric */
    check_conv(1, 6, 7, 7, 6, 3, 3, 2, 1, 1, 0, 1, 3, 6);    /* depthwise */
    check_conv(1, 1, 1, 1, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1);    /* 1x1 on 1x1 */
}

/* gemm with each transpose and each bias shape against explicitly
 * transposed copies and a bias expanded to [M, N]. */
static void check_gemm(int M, int K, int N, int ta, int tb, const char *bias_shape, int bm, int bn)
{
    char yaml[2048];
    int as0 = ta ? K : M, as1 = ta ? M : K, bs0 = tb ? N : K, bs1 = tb ? K : N;
    snprintf(yaml, sizeof yaml,
             "graph: m\nseed: 3\n"
             "inputs: [ { name: a, shape: [%d, %d] } ]\n"
             "weights: [ { name: b, shape: [%d, %d] }, { name: c, shape: %s } ]\n"
             "nodes:\n"
             "  - { name: y, op: gemm, inputs: [a, b, c], attrs: { trans_a: %s, trans_b: %s } }\n"
             "outputs: [y]\n",
             as0, as1, bs0, bs1, bias_shape, ta ? "true" : "false", tb ? "true" : "false");
    fg_graph *g = parse(yaml);
    double **v = run(g, 9);
    const double *a = v[T(g, "a")], *b = v[T(g, "b")], *c = v[T(g, "c")];
    assert_true(c[0] != 0.0); /* the bias must matter */
    double *A = malloc(sizeof(double) * M * K), *B = malloc(sizeof(double) * K * N), *want = malloc(sizeof(double) * M * N);
    for (int i = 0; i < as0; i++)
        for (int j = 0; j < as1; j++) {
            if (ta)
                A[j * K + i] = a[i * as1 + j];
            else
                A[i * K + j] = a[i * as1 + j];
        }
    for (int i = 0; i < bs0; i++)
        for (int j = 0; j < bs1; j++) {
            if (tb)
                B[j * N + i] = b[i * bs1 + j];
            else
                B[i * N + j] = b[i * bs1 + j];
        }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = c[(bm > 1 ? m : 0) * bn + (bn > 1 ? n : 0)];
            for (int k = 0; k < K; k++)
                s += A[m * K + k] * B[k * N + n];
            want[m * N + n] = s;
        }
    double err = fg_rel_l2(v[T(g, "y")], want, (int64_t)M * N, NULL);
    if (err > 1e-13)
        fail_msg("gemm %dx%dx%d ta=%d tb=%d bias %s: rel l2 %g", M, K, N, ta, tb, bias_shape, err);
    free(A), free(B), free(want);
    release(g, v);
}

static void test_matmul(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(5, 7, 3, ta, tb, "[3]", 1, 3);
            check_gemm(5, 7, 3, ta, tb, "[1, 3]", 1, 3);
            check_gemm(5, 7, 3, ta, tb, "[5, 1]", 5, 1);
            check_gemm(5, 7, 3, ta, tb, "[5, 3]", 5, 3);
        }
    /* A batched a: [2, 3, 4] x [4, 5]. */
    fg_graph *g = parse("graph: bm\ninputs: [ { name: a, shape: [2, 3, 4] } ]\n"
                        "weights: [ { name: b, shape: [4, 5] } ]\n"
                        "nodes: [ { name: y, op: matmul, inputs: [a, b] } ]\noutputs: [y]\n");
    double **v = run(g, 5);
    const double *a = v[T(g, "a")], *b = v[T(g, "b")], *y = v[T(g, "y")];
    for (int q = 0; q < 2; q++)
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 5; n++) {
                double s = 0;
                for (int k = 0; k < 4; k++)
                    s += a[(q * 3 + m) * 4 + k] * b[k * 5 + n];
                assert_close(y[(q * 3 + m) * 5 + n], s);
            }
    release(g, v);
}

/* numpy broadcasting: [2, 3, 1, 4] + [3, 5, 1] -> [2, 3, 5, 4]. */
static void test_broadcast_add(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: b\ninputs: [ { name: a, shape: [2, 3, 1, 4] }, { name: c, shape: [3, 5, 1] } ]\n"
                        "nodes: [ { name: y, op: add, inputs: [a, c] } ]\noutputs: [y]\n");
    double **v = run(g, 11);
    const fg_tensor *yt = &g->tensors[T(g, "y")];
    assert_int_equal(yt->rank, 4);
    assert_int_equal(yt->shape[2], 5);
    const double *a = v[T(g, "a")], *c = v[T(g, "c")], *y = v[T(g, "y")];
    for (int n = 0; n < 2; n++)
        for (int ch = 0; ch < 3; ch++)
            for (int h = 0; h < 5; h++)
                for (int w = 0; w < 4; w++)
                    assert_close(y[((n * 3 + ch) * 5 + h) * 4 + w], a[(n * 3 + ch) * 4 + w] + c[ch * 5 + h]);
    release(g, v);
}

/* prelu: the slope is one value per channel. */
static void test_prelu_per_channel(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: p\ninputs: [ { name: x, shape: [2, 3, 2, 2] } ]\n"
                        "weights: [ { name: s, shape: [3], values: [0.1, 0.2, 0.3] } ]\n"
                        "nodes: [ { name: y, op: prelu, inputs: [x, s] } ]\noutputs: [y]\n");
    double **v = run(g, 2);
    const double *x = v[T(g, "x")], *y = v[T(g, "y")];
    const double slope[] = {0.1, 0.2, 0.3};
    int negatives = 0;
    for (int i = 0; i < 24; i++) {
        int ch = (i / 4) % 3;
        double want = x[i] > 0 ? x[i] : (double)(float)slope[ch] * x[i];
        negatives += x[i] < 0;
        assert_close(y[i], want);
    }
    assert_true(negatives > 0);
    release(g, v);
}

static void test_pooling(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: pool\ninputs: [ { name: x, shape: [1, 1, 3, 4] } ]\n"
                        "nodes:\n"
                        "  - { name: mx, op: max_pool2d, inputs: [x], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
                        "  - { name: av, op: avg_pool2d, inputs: [x], attrs: { kernel: [3, 3], padding: [1, 1] } }\n"
                        "  - { name: gp, op: global_avg_pool, inputs: [x] }\n"
                        "  - { name: fl, op: flatten, inputs: [x] }\n"
                        "outputs: [mx, av, gp, fl]\n");
    double **v = calloc((size_t)g->ntensors, sizeof *v);
    int x = T(g, "x");
    v[x] = malloc(12 * sizeof(double));
    for (int i = 0; i < 12; i++)
        v[x][i] = (double)((i * 7) % 12); /* 0 7 2 9 / 4 11 6 1 / 8 3 10 5 */
    assert_int_equal(fg_reference_run(g_ctx, g, v), FG_OK);
    const double *mx = v[T(g, "mx")], *av = v[T(g, "av")], *gp = v[T(g, "gp")], *fl = v[T(g, "fl")];
    assert_int_equal(g->tensors[T(g, "mx")].shape[2], 1);
    assert_int_equal(g->tensors[T(g, "mx")].shape[3], 2);
    assert_close(mx[0], 11);
    assert_close(mx[1], 9);
    /* corner (0,0): in-bounds elements 0,7,4,11 -> 22/4 */
    assert_close(av[0], 22.0 / 4);
    /* centre (1,1): 0 7 2 4 11 6 8 3 10 -> 51/9 */
    assert_close(av[1 * 4 + 1], 51.0 / 9);
    /* edge (0,3): 2 9 6 1 -> 18/4 */
    assert_close(av[3], 18.0 / 4);
    assert_close(gp[0], 66.0 / 12);
    for (int i = 0; i < 12; i++)
        assert_close(fl[i], v[x][i]);
    release(g, v);
}

/* batch_norm: inference by formula; training normalizes by batch stats. */
static void test_batch_norm(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: bn\ninputs: [ { name: x, shape: [2, 2, 3, 3] } ]\n"
                        "weights:\n"
                        "  - { name: ga, shape: [2], values: [2, 0.5] }\n"
                        "  - { name: be, shape: [2], values: [1, -1] }\n"
                        "  - { name: mu, shape: [2], values: [0.25, -0.5] }\n"
                        "  - { name: va, shape: [2], values: [4, 0.25] }\n"
                        "nodes:\n"
                        "  - { name: inf, op: batch_norm, inputs: [x, ga, be, mu, va], attrs: { eps: 0.0 } }\n"
                        "  - { name: tr, op: batch_norm, inputs: [x, ga, be, mu, va] }\n"
                        "outputs: [inf, tr]\n");
    /* the loader refuses training mode (no kernel computes batch
     * statistics); the reference still does, so it is set here */
    fg_node *tn = &g->nodes[fg_graph_find_node(g, "tr")];
    for (int a = 0; a < tn->op->nattrs; a++)
        if (strcmp(tn->op->attrs[a].name, "training") == 0)
            tn->attrs[a].i = 1;
    double **v = run(g, 77);
    const double *x = v[T(g, "x")], *inf = v[T(g, "inf")], *tr = v[T(g, "tr")];
    const double ga[] = {2, 0.5}, be[] = {1, -1}, mu[] = {0.25, -0.5}, va[] = {4, 0.25};
    for (int i = 0; i < 36; i++) {
        int c = (i / 9) % 2;
        assert_close(inf[i], (x[i] - mu[c]) / sqrt(va[c]) * ga[c] + be[c]);
    }
    for (int c = 0; c < 2; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < 2; n++)
            for (int j = 0; j < 9; j++)
                s += tr[(n * 2 + c) * 9 + j];
        double m = s / 18;
        for (int n = 0; n < 2; n++)
            for (int j = 0; j < 9; j++)
                q += (tr[(n * 2 + c) * 9 + j] - m) * (tr[(n * 2 + c) * 9 + j] - m);
        assert_true(fabs(m - be[c]) < 1e-9);
        /* var of the output = gamma^2 * var/(var+eps), eps 1e-5 */
        assert_true(fabs(q / 18 - ga[c] * ga[c]) < 1e-3 * ga[c] * ga[c]);
    }
    release(g, v);
}

static void test_random_and_l2(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: r\ninputs: [ { name: x, shape: [100] } ]\n"
                        "nodes: [ { name: y, op: relu, inputs: [x] } ]\noutputs: [y]\n");
    double **a = calloc((size_t)g->ntensors, sizeof *a), **b = calloc((size_t)g->ntensors, sizeof *b),
           **c = calloc((size_t)g->ntensors, sizeof *c);
    int x = T(g, "x");
    fg_reference_random_inputs(g, 5, a);
    fg_reference_random_inputs(g, 5, b);
    fg_reference_random_inputs(g, 6, c);
    assert_memory_equal(a[x], b[x], 100 * sizeof(double));
    int differ = 0, neg = 0;
    for (int i = 0; i < 100; i++) {
        assert_true(a[x][i] >= -1.0 && a[x][i] < 1.0);
        differ += a[x][i] != c[x][i];
        neg += a[x][i] < 0;
    }
    assert_true(differ > 90);
    assert_true(neg > 20 && neg < 80);
    double ones[4] = {1, 1, 1, 1}, twos[4] = {1, 1, 1, 3}, mx = 0;
    assert_true(fabs(fg_rel_l2(twos, ones, 4, &mx) - 1.0) < 1e-15);
    assert_close(mx, 2.0);
    assert_close(fg_rel_l2(ones, ones, 4, NULL), 0.0);
    fg_reference_free(g, a);
    fg_reference_free(g, b);
    fg_reference_free(g, c);
    free(a), free(b), free(c);
    fg_graph_free(g);
}

/* A graph input with no value is an error, not a crash. */
static void test_missing_input(void **state)
{
    (void)state;
    fg_graph *g = parse("graph: r\ninputs: [ { name: x, shape: [4] } ]\n"
                        "nodes: [ { name: y, op: relu, inputs: [x] } ]\noutputs: [y]\n");
    double **v = calloc((size_t)g->ntensors, sizeof *v);
    assert_int_equal(fg_reference_run(g_ctx, g, v), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "has no value"));
    fg_context_clear_errors(g_ctx);
    release(g, v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_1x1),      cmocka_unit_test(test_conv_3x3_variants),
        cmocka_unit_test(test_matmul),        cmocka_unit_test(test_broadcast_add),
        cmocka_unit_test(test_prelu_per_channel), cmocka_unit_test(test_pooling),
        cmocka_unit_test(test_batch_norm),    cmocka_unit_test(test_random_and_l2),
        cmocka_unit_test(test_missing_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
