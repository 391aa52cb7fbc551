/*
 * test_exec.c -- the executor and its helpers: dtype conversion (round trips
 * and rounding cases), NCHW<->NHWC permutation, arena first-fit placement,
 * the no-driver error path (FUSEGEN_CUDA_LIBRARY=/nonexistent), and whole
 * plans run in emulation against the host reference of the unfused graph,
 * including liveness reuse of intermediates.
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

#include "cuda_driver.h"
#include "exec.h"
#include "reference.h"
#include "tensor_convert.h"
#include "testutil.h"

/* ---- dtype conversion --------------------------------------------------- */

static void test_f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(fg_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(fg_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(fg_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(fg_f32_to_f16(65519.0f), 0x7bff);     /* below the halfway point */
    assert_int_equal(fg_f32_to_f16(65520.0f), 0x7c00);     /* halfway: ties to even = inf */
    assert_int_equal(fg_f32_to_f16(INFINITY), 0x7c00);
    assert_true((fg_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (fg_f32_to_f16(NAN) & 0x3ff));
    assert_int_equal(fg_f32_to_f16(ldexpf(1, -24)), 0x0001);  /* smallest subnormal */
    assert_int_equal(fg_f32_to_f16(ldexpf(1, -25)), 0x0000);  /* tie to even: 0 */
    assert_int_equal(fg_f32_to_f16(ldexpf(3, -25)), 0x0002);  /* tie to even: 2 */
    assert_int_equal(fg_f32_to_f16(ldexpf(1, -14)), 0x0400);  /* smallest normal */
    assert_int_equal(fg_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);      /* tie, even below */
    assert_int_equal(fg_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3c02);      /* tie, even above */
    assert_int_equal(fg_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01);
    assert_true(fg_f16_to_f32(0x0001) == ldexpf(1, -24));
    assert_true(isinf(fg_f16_to_f32(0xfc00)) && fg_f16_to_f32(0xfc00) < 0);
}

static void test_f16_bf16_round_trip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        int nan16 = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (!nan16)
            assert_int_equal(fg_f32_to_f16(fg_f16_to_f32((uint16_t)h)), h);
        int nanbf = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (!nanbf)
            assert_int_equal(fg_f32_to_bf16(fg_bf16_to_f32((uint16_t)h)), h);
    }
    assert_int_equal(fg_f32_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: even (1.0) wins. */
    assert_int_equal(fg_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
    assert_int_equal(fg_f32_to_bf16(1.0f + ldexpf(3, -8)), 0x3f82);
    /* Public whole-array conversion: fp32 -> fp16 -> fp32 keeps fp16-exact values. */
    float src[5] = {0.5f, -3.25f, 1024.0f, 0.0f, ldexpf(1, -20)}, back[5];
    uint16_t half[5];
    assert_int_equal(fg_convert_dtype(src, FG_DTYPE_F32, half, FG_DTYPE_F16, 5), FG_OK);
    assert_int_equal(fg_convert_dtype(half, FG_DTYPE_F16, back, FG_DTYPE_F32, 5), FG_OK);
    assert_memory_equal(src, back, sizeof src);
    assert_int_equal(fg_convert_dtype(src, FG_DTYPE_COUNT, half, FG_DTYPE_F16, 5), FG_ERR_INPUT);
    assert_true(fg_round_to_dtype(1.0 + 1e-4, FG_DTYPE_F16) == 1.0);
}

/* ---- layout ------------------------------------------------------------- */

static void test_layout_permutation(void **state)
{
    (void)state;
    const int64_t shape[4] = {2, 3, 4, 5};
    enum { NE = 2 * 3 * 4 * 5 };
    float nchw[NE], nhwc[NE], back[NE];
    for (int i = 0; i < NE; i++)
        nchw[i] = (float)i;
    assert_int_equal(fg_convert_layout(nchw, FG_LAYOUT_NCHW, nhwc, FG_LAYOUT_NHWC, shape, sizeof(float)), FG_OK);
    /* element (n=1, c=2, h=3, w=4) */
    int64_t logical = ((1 * 3 + 2) * 4 + 3) * 5 + 4, physical = ((1 * 4 + 3) * 5 + 4) * 3 + 2;
    assert_true(nhwc[physical] == (float)logical);
    assert_int_equal(fg_layout_offset(4, shape, FG_LAYOUT_NHWC, logical), physical);
    assert_true(nhwc[1] == (float)(1 * 4 * 5));   /* c=1 of pixel 0 comes second */
    assert_int_equal(fg_convert_layout(nhwc, FG_LAYOUT_NHWC, back, FG_LAYOUT_NCHW, shape, sizeof(float)), FG_OK);
    assert_memory_equal(nchw, back, sizeof nchw);
    assert_int_equal(fg_convert_layout(nchw, FG_LAYOUT_NCHW, nchw, FG_LAYOUT_NHWC, shape, 4), FG_ERR_INPUT);

    /* pack/unpack of a tensor: NHWC fp16 and back gives the rounded values. */
    fg_tensor t = {.dtype = FG_DTYPE_F16, .layout = FG_LAYOUT_NHWC, .rank = 4, .shape = {2, 3, 4, 5}};
    double in[NE], out[NE];
    uint16_t buf[NE];
    for (int i = 0; i < NE; i++)
        in[i] = (i - 60) * 0.01;
    fg_tensor_pack(&t, FG_LAYOUT_NHWC, in, buf);
    assert_int_equal(buf[physical], fg_f32_to_f16((float)in[logical]));
    fg_tensor_unpack(&t, FG_LAYOUT_NHWC, buf, out);
    for (int i = 0; i < NE; i++)
        assert_true(out[i] == fg_round_to_dtype(in[i], FG_DTYPE_F16));
}

/* ---- arena -------------------------------------------------------------- */

static void test_arena_first_fit(void **state)
{
    (void)state;
    fg_arena a = {0};
    size_t x = fg_arena_alloc(&a, 1000);    /* 1024 */
    size_t y = fg_arena_alloc(&a, 256);
    size_t z = fg_arena_alloc(&a, 512);
    assert_int_equal(x, 0);
    assert_int_equal(y, 1024);
    assert_int_equal(z, 1280);
    assert_int_equal(a.peak, 1792);
    fg_arena_release(&a, x, 1000);
    size_t u = fg_arena_alloc(&a, 300);     /* first fit: the hole at 0 */
    assert_int_equal(u, 0);
    fg_arena_release(&a, z, 512);           /* top hole: top drops to 1280 */
    assert_int_equal(a.top, 1280);
    size_t v = fg_arena_alloc(&a, 2048);    /* no hole fits: at the top */
    assert_int_equal(v, 1280);
    fg_arena_release(&a, y, 256);
    fg_arena_release(&a, u, 300);           /* merges with 512..1280 into one hole */
    assert_int_equal(a.n, 1);
    size_t w = fg_arena_alloc(&a, 1280);
    assert_int_equal(w, 0);
    assert_int_equal(a.peak, 1280 + 2048);
    fg_arena_free(&a);
}

/* ---- no driver ---------------------------------------------------------- */

static const char *conv_graph =
    "graph: g\nseed: 3\ndtype: fp32\nlayout: NCHW\n"
    "inputs:\n  - { name: x, shape: [1, 3, 7, 7] }\n"
    "weights:\n  - { name: c.w, shape: [5, 3, 3, 3] }\n"
    "  - { name: bn.gamma, shape: [5], init: positive }\n  - { name: bn.beta, shape: [5] }\n"
    "  - { name: bn.mean, shape: [5] }\n  - { name: bn.var, shape: [5], init: positive }\n"
    "nodes:\n"
    "  - { name: c, op: conv2d, inputs: [x, c.w], attrs: { padding: [1, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [c, bn.gamma, bn.beta, bn.mean, bn.var] }\n"
    "  - { name: r, op: relu, inputs: [bn] }\n"
    "outputs: [r]\n";

static void test_no_driver(void **state)
{
    (void)state;
    char *old = getenv("FUSEGEN_CUDA_LIBRARY") ? strdup(getenv("FUSEGEN_CUDA_LIBRARY")) : NULL;
    setenv("FUSEGEN_CUDA_LIBRARY", "/nonexistent/libcuda.so", 1);
    fg_context *ctx = tu_ctx_shipped();
    char arch[16] = "unchanged";
    assert_int_equal(fg_cuda_device_arch(ctx, arch), -1);
    assert_int_equal(fg_context_error_count(ctx), 0);       /* the query records nothing */
    assert_int_equal(fg_cuda_init(ctx), FG_ERR_NO_DEVICE);
    assert_true(tu_has_error(ctx, "/nonexistent/libcuda.so not found"));
    assert_true(tu_has_error(ctx, "--device emu"));
    fg_context_clear_errors(ctx);

    fg_graph *g;
    fg_plan *p;
    fg_exec *e = (fg_exec *)1;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", conv_graph, strlen(conv_graph), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_compile_options co = {.device = FG_DEVICE_CUDA};
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_ERR_NO_DEVICE);
    assert_null(e);
    assert_true(tu_has_error(ctx, "no CUDA driver"));
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    if (old)
        setenv("FUSEGEN_CUDA_LIBRARY", old, 1);
    else
        unsetenv("FUSEGEN_CUDA_LIBRARY");
    free(old);
}

/* CUDA graph replay with a new binding: the launches are captured again and
 * the graph is updated (backend_cuda.c, cuGraphExecUpdate) or instantiated
 * anew; either way the second binding's outputs are the first's for the
 * same inputs, and a third run on the first binding still agrees.  Needs a
 * GPU: skipped without one. */
static void test_cuda_graph_rebind(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    if (fg_cuda_init(ctx) != FG_OK) {
        fg_context_free(ctx);
        skip();
    }
    fg_graph *g;
    fg_plan *p;
    fg_exec *e = NULL;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", conv_graph, strlen(conv_graph), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_compile_options co = {.device = FG_DEVICE_CUDA, .graph_replay = 1, .size = sizeof co};
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_OK);
    fg_tensor_info xi, yi;
    assert_int_equal(fg_exec_input_info(e, 0, &xi), FG_OK);
    assert_int_equal(fg_exec_output_info(e, 0, &yi), FG_OK);
    float *x = malloc(xi.bytes), *y[3] = {malloc(yi.bytes), malloc(yi.bytes), malloc(yi.bytes)};
    for (size_t i = 0; i < xi.bytes / 4; i++)
        x[i] = (float)((int)(i * 7 % 23) - 11) / 8.0f;
    const fg_cu_api *cu = fg_cu();
    CUdeviceptr dx[2], dy[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(cu->MemAlloc(&dx[k], xi.bytes), CUDA_SUCCESS);
        assert_int_equal(cu->MemAlloc(&dy[k], yi.bytes), CUDA_SUCCESS);
        assert_int_equal(cu->MemcpyHtoD(dx[k], x, xi.bytes), CUDA_SUCCESS);
    }
    for (int run = 0; run < 3; run++) {
        int k = run == 1;
        fg_binding b[2] = {{xi.name, (void *)(uintptr_t)dx[k]}, {yi.name, (void *)(uintptr_t)dy[k]}};
        assert_int_equal(fg_exec_run(e, b, 2, NULL), FG_OK);
        assert_int_equal(cu->CtxSynchronize(), CUDA_SUCCESS);
        assert_int_equal(cu->MemcpyDtoH(y[run], dy[k], yi.bytes), CUDA_SUCCESS);
    }
    assert_memory_equal(y[0], y[1], yi.bytes);
    assert_memory_equal(y[0], y[2], yi.bytes);
    for (int k = 0; k < 2; k++) {
        cu->MemFree(dx[k]);
        cu->MemFree(dy[k]);
    }
    free(x);
    for (int k = 0; k < 3; k++)
        free(y[k]);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- plans in emulation vs the reference ---------------------------------- */

/* Compiles yaml for emulation, runs it on seeded inputs and compares every
 * output with the reference of the source graph; returns the exec's arena
 * numbers through *peak / *sum when not NULL. */
static void run_vs_reference_in(fg_context *ctx, const char *yaml, double tol, int want_kernels, size_t *peak,
                                size_t *sum)
{
    fg_graph *g;
    fg_plan *p;
    fg_exec *e = NULL;
    if (fg_graph_parse(ctx, "t.yaml", yaml, strlen(yaml), &g) != FG_OK || fg_plan_build(ctx, g, &p) != FG_OK) {
        tu_dump_errors(ctx);
        fail();
    }
    fg_compile_options co = {.device = FG_DEVICE_EMU};
    fg_status st = fg_plan_compile(ctx, p, &co, &e);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(fg_exec_device(e), FG_DEVICE_EMU);
    if (want_kernels > 0)
        assert_int_equal(fg_exec_kernel_count(e), want_kernels);

    tu_exec_vs_reference(ctx, g, e, 1234, tol);
    /* A wrong binding is an input error naming the tensor. */
    char dummy[16];
    fg_binding bad = {"nope", dummy};
    assert_int_equal(fg_exec_run_host(e, &bad, 1), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "binding 'nope' is not a graph input or output"));
    if (peak)
        *peak = fg_exec_arena_bytes(e);
    if (sum)
        *sum = fg_exec_intermediate_bytes(e);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

static void run_vs_reference(const char *yaml, double tol, int want_kernels, size_t *peak, size_t *sum)
{
    fg_context *ctx = tu_ctx_shipped();
    run_vs_reference_in(ctx, yaml, tol, want_kernels, peak, sum);
    fg_context_free(ctx);
}

static void test_emu_conv_bn_relu(void **state)
{
    (void)state;
    run_vs_reference(conv_graph, 1e-5, 1, NULL, NULL);
}

/* Four convs in a chain (no rule fuses conv into conv): three intermediates,
 * at most two live at once, so the arena is smaller than their sum. */
static void test_emu_chain_liveness(void **state)
{
    (void)state;
    const char *yaml =
        "graph: chain\nseed: 5\ndtype: fp32\nlayout: NHWC\n"
        "inputs:\n  - { name: x, shape: [1, 4, 6, 5] }\n"
        "weights:\n  - { name: w1, shape: [4, 4, 3, 3] }\n  - { name: w2, shape: [4, 4, 1, 1] }\n"
        "  - { name: w3, shape: [4, 4, 3, 3] }\n  - { name: w4, shape: [3, 4, 1, 1] }\n"
        "nodes:\n"
        "  - { name: c1, op: conv2d, inputs: [x, w1], attrs: { padding: [1, 1] } }\n"
        "  - { name: c2, op: conv2d, inputs: [c1, w2] }\n"
        "  - { name: c3, op: conv2d, inputs: [c2, w3], attrs: { padding: [1, 1] } }\n"
        "  - { name: c4, op: conv2d, inputs: [c3, w4] }\n"
        "outputs: [c4]\n";
    size_t peak = 0, sum = 0;
    run_vs_reference(yaml, 1e-5, 4, &peak, &sum);
    print_message("  arena peak %zu bytes, intermediates %zu bytes\n", peak, sum);
    assert_true(sum > 0);
    assert_true(peak < sum);
}

/* Intermediates of different sizes share arena memory over time: the guard
 * zone of a tensor that is not live yet lies inside another tensor's data
 * and must be neither filled nor checked then (a false "wrote past the end"
 * otherwise).  The transformer MLP planned with no fusion rules: five
 * kernels, intermediates of 4 and 16 KiB. */
static void test_emu_reuse_guards(void **state)
{
    (void)state;
    char *dir = tu_vocab_dir();
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
    const char *yaml =
        "graph: mlp\nseed: 6\n"
        "inputs:\n  - { name: x, shape: [16, 64] }\n"
        "weights:\n  - { name: w1, shape: [64, 256] }\n  - { name: b1, shape: [256] }\n"
        "  - { name: w2, shape: [256, 64] }\n  - { name: b2, shape: [64] }\n"
        "nodes:\n"
        "  - { name: fc1, op: matmul, inputs: [x, w1] }\n"
        "  - { name: add1, op: add, inputs: [fc1, b1] }\n"
        "  - { name: act, op: gelu, inputs: [add1] }\n"
        "  - { name: fc2, op: matmul, inputs: [act, w2] }\n"
        "  - { name: add2, op: add, inputs: [fc2, b2] }\n"
        "outputs: [add2]\n";
    size_t peak = 0, sum = 0;
    run_vs_reference_in(ctx, yaml, 1e-5, 5, &peak, &sum);
    assert_true(peak < sum);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* The kernel-spec API rejects what cannot be one kernel, with clear messages. */
static void test_kernel_spec_errors(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    float w[4 * 4];
    for (int i = 0; i < 16; i++)
        w[i] = 0.1f * (float)i;
    fg_spec_op typo[] = {{"act", "rellu", NULL}};
    fg_kernel_spec spec = {.nops = 1, .ops = typo, .rank = 2, .input_shape = {3, 4},
                           .compile = {.device = FG_DEVICE_EMU}};
    fg_kernel_handle *h = (fg_kernel_handle *)1;
    assert_int_equal(fg_kernel_create(ctx, &spec, &h), FG_ERR_INPUT);
    assert_null(h);
    assert_true(tu_has_error(ctx, "unknown op 'rellu' (did you mean 'relu'?)"));

    fg_spec_op convs[] = {{"c1", "conv2d", NULL}, {"c2", "conv2d", NULL}};
    fg_spec_weight ws[] = {{"c1.weight", 4, {4, 4, 1, 1}, w}, {"c2.weight", 4, {4, 4, 1, 1}, w}};
    spec = (fg_kernel_spec){.nops = 2, .ops = convs, .nweights = 1, .weights = ws, .rank = 4,
                            .input_shape = {1, 4, 3, 3}, .compile = {.device = FG_DEVICE_EMU}};
    assert_int_equal(fg_kernel_create(ctx, &spec, &h), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "conv2d step 'c2' needs a weight named 'c2.weight'"));
    spec.nweights = 2;
    assert_int_equal(fg_kernel_create(ctx, &spec, &h), FG_ERR_UNSUPPORTED);
    assert_true(tu_has_error(ctx, "make 2 kernels of this chain, not one"));
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_f16_bf16_round_trip),
        cmocka_unit_test(test_layout_permutation),
        cmocka_unit_test(test_arena_first_fit),
        cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_cuda_graph_rebind),
        cmocka_unit_test(test_emu_conv_bn_relu),
        cmocka_unit_test(test_emu_chain_liveness),
        cmocka_unit_test(test_emu_reuse_guards),
        cmocka_unit_test(test_kernel_spec_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
