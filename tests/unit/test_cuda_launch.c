/*
 * test_cuda_launch.c -- the CUDA backend's launch path without a GPU: the
 * driver is tests/unit/fake_cuda.c, opened through FUSEGEN_CUDA_LIBRARY
 * (the seam cuda.c has for the no-driver tests), which records every launch.
 *
 * Programmatic dependent launch (backend_cuda.c): a kernel whose module
 * holds FG_KERNEL's marker goes through cuLaunchKernelEx with
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1 and its launch
 * shape, stream and parameters; cuLaunchKernel takes it when the device is
 * older than sm_90, the driver older than CUDA 12.3 or without
 * cuLaunchKernelEx, the module has no marker, or FUSEGEN_PDL=0.  A failed
 * launch is recorded with the call and the driver's message.  Then whole
 * plans: compiled for sm_90 by NVRTC (the fake reads each cubin for the
 * marker, as the driver would), every kernel launches with the attribute,
 * with CUDA-graph replay too; compiled for sm_80, none does.
 *
 * FUSEGEN_FAKE_CUDA / FUSEGEN_FAKE_CUDA_OLD (set by CTest) name the fake
 * built with and without cuLaunchKernelEx.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_driver.h"
#include "fake_cuda.h"
#include "testutil.h"

/* The control blocks of the two fakes (each file has its own), and the one
 * the context made last drives. */
static fake_cuda_state *fakes[2];
static fake_cuda_state *fake;
static int respell;               /* makes each library path new, so that cuda.c opens the driver again */

/* Sets FUSEGEN_CUDA_LIBRARY to the fake (old: the one without
 * cuLaunchKernelEx) under a path spelled as never before ("dir/./././lib"):
 * cuda.c keeps the driver it opened for one path and opens it again for
 * another, reading the device anew; the file, and so `fake`, is the same. */
static void use_fake(int old)
{
    const char *path = getenv(old ? "FUSEGEN_FAKE_CUDA_OLD" : "FUSEGEN_FAKE_CUDA");
    assert_non_null(path);
    const char *slash = strrchr(path, '/');
    assert_non_null(slash);
    char spelled[1024];
    int n = snprintf(spelled, sizeof spelled, "%.*s", (int)(slash - path), path);
    respell++;
    for (int i = 0; i < respell && n < 900; i++)
        n += snprintf(spelled + n, sizeof spelled - (size_t)n, "/.");
    snprintf(spelled + n, sizeof spelled - (size_t)n, "%s", slash);
    setenv("FUSEGEN_CUDA_LIBRARY", spelled, 1);
}

/* A context on the fake with the device and driver given (cc 9.0 / 12.8 by
 * default), the fake's marker answer and FUSEGEN_PDL (NULL: unset). */
static fg_context *fake_ctx(int old, int cc_major, int driver_version, int has_marker, const char *pdl)
{
    fake = fakes[old];
    fake->cc_major = cc_major;
    fake->cc_minor = 0;
    fake->driver_version = driver_version;
    fake->has_marker = has_marker;
    fake->launch_result = CUDA_SUCCESS;
    fake->launches = fake->launches_ex = fake->global_lookups = fake->markers_found = 0;
    memset(&fake->last, 0, sizeof fake->last);
    use_fake(old);
    if (pdl)
        setenv("FUSEGEN_PDL", pdl, 1);
    else
        unsetenv("FUSEGEN_PDL");
    fg_context *ctx = tu_ctx_shipped();
    fg_status st = fg_backend_cuda.open(ctx);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

/* A kernel made by hand: any bytes as its binary (the fake loads anything). */
static void probe_kernel(fg_kernel *k)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "fg_probe_kernel");
    k->binary = fg_xstrdup("not a cubin");
    k->binary_size = strlen(k->binary) + 1;
    k->grid[0] = 7;
    k->grid[1] = 3;
    k->grid[2] = 2;
    k->block[0] = 128;
    k->block[1] = 1;
    k->block[2] = 1;
    k->smem = 4096;
}

/* Loads and launches the probe kernel on ctx; returns the launch's status. */
static fg_status launch_probe(fg_context *ctx, uint64_t *slots, void *stream)
{
    fg_kernel k;
    probe_kernel(&k);
    fg_status st = fg_backend_cuda.load(ctx, &k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    st = fg_backend_cuda.launch(ctx, &k, slots, stream);
    fg_kernel_free(&k);
    return st;
}

static void test_pdl_launch(void **state)
{
    (void)state;
    fg_context *ctx = fake_ctx(0, 9, 12080, 1, NULL);
    _Alignas(64) uint64_t slots[4] = {1, 2, 3, 4};
    void *stream = (void *)(uintptr_t)0x5000;
    assert_int_equal(launch_probe(ctx, slots, stream), FG_OK);
    printf("sm_90, CUDA 12.8, marker: %s, attribute %d = %d\n",
           fake->last.api == FAKE_LAUNCH_EX ? "cuLaunchKernelEx" : "cuLaunchKernel", (int)fake->last.attr0.id,
           fake->last.attr0.value.programmaticStreamSerializationAllowed);
    assert_int_equal(fake->launches, 1);
    assert_int_equal(fake->last.api, FAKE_LAUNCH_EX);
    assert_int_equal(fake->last.nattrs, 1);
    assert_int_equal(fake->last.attr0.id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    assert_int_equal(fake->last.attr0.value.programmaticStreamSerializationAllowed, 1);
    assert_string_equal(fake->last_global, "fg_probe_kernel__fg_grid_dep");
    assert_string_equal(fake->last.fn, "fg_probe_kernel");
    assert_int_equal(fake->last.grid[0], 7);
    assert_int_equal(fake->last.grid[1], 3);
    assert_int_equal(fake->last.grid[2], 2);
    assert_int_equal(fake->last.block[0], 128);
    assert_int_equal(fake->last.block[1], 1);
    assert_int_equal(fake->last.block[2], 1);
    assert_int_equal(fake->last.smem, 4096);
    assert_ptr_equal(fake->last.stream, stream);
    assert_true(fake->last.has_params);
    assert_ptr_equal(fake->last.param0, slots);   /* one struct argument: the slots */
    fg_context_free(ctx);
}

/* Each reason to launch plainly, one at a time. */
static void test_plain_launch(void **state)
{
    (void)state;
    static const struct {
        const char *why;
        int old, cc, version, marker;
        const char *pdl;
    } cases[] = {
        {"FUSEGEN_PDL=0", 0, 9, 12080, 1, "0"},
        {"FUSEGEN_PDL=off", 0, 9, 12080, 1, "off"},
        {"no marker in the module", 0, 9, 12080, 0, NULL},
        {"sm_80", 0, 8, 12080, 1, NULL},
        {"CUDA 12.2 driver", 0, 9, 12020, 1, NULL},
        {"driver without cuLaunchKernelEx", 1, 9, 12080, 1, NULL},
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        fg_context *ctx = fake_ctx(cases[i].old, cases[i].cc, cases[i].version, cases[i].marker, cases[i].pdl);
        _Alignas(64) uint64_t slots[2] = {5, 6};
        assert_int_equal(launch_probe(ctx, slots, NULL), FG_OK);
        printf("%-32s -> %s\n", cases[i].why, fake->last.api == FAKE_LAUNCH_EX ? "cuLaunchKernelEx" : "cuLaunchKernel");
        assert_int_equal(fake->launches, 1);
        assert_int_equal(fake->last.api, FAKE_LAUNCH_PLAIN);
        assert_int_equal(fake->last.grid[0], 7);
        assert_int_equal(fake->last.smem, 4096);
        assert_ptr_equal(fake->last.param0, slots);
        if (cases[i].cc < 9 || cases[i].version < 12030 || cases[i].old)
            assert_int_equal(fake->global_lookups, 0);   /* no device support: the module is not asked */
        fg_context_free(ctx);
    }
    unsetenv("FUSEGEN_PDL");
}

/* A failed programmatic launch: FG_ERR_CUDA with the kernel, the call and
 * the driver's error name and text. */
static void test_pdl_launch_error(void **state)
{
    (void)state;
    fg_context *ctx = fake_ctx(0, 9, 12080, 1, NULL);
    fake->launch_result = CUDA_ERROR_INVALID_VALUE;
    _Alignas(64) uint64_t slots[1] = {0};
    assert_int_equal(launch_probe(ctx, slots, NULL), FG_ERR_CUDA);
    assert_int_equal(fake->last.api, FAKE_LAUNCH_EX);
    char buf[1024];
    printf("%s\n", fg_error_format(fg_context_error(ctx, 0), buf, sizeof buf));
    assert_true(tu_has_error(ctx, "in kernel fg_probe_kernel"));
    assert_true(tu_has_error(ctx, "cuLaunchKernelEx_programmatic_serialization("));
    assert_true(tu_has_error(ctx, "CUDA_ERROR_INVALID_VALUE: invalid argument (fake driver)"));
    fg_context_free(ctx);
}

static const char two_kernels[] =
    "graph: two\n"
    "seed: 3\n"
    "inputs:\n  - { name: x, shape: [1, 3, 8, 8] }\n"
    "weights:\n  - { name: c.w, shape: [4, 3, 3, 3] }\n"
    "nodes:\n"
    "  - { name: c, op: conv2d, inputs: [x, c.w], attrs: { padding: [1, 1] } }\n"
    "  - { name: r, op: relu, inputs: [c] }\n"
    "  - { name: mp, op: max_pool2d, inputs: [r], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
    "outputs: [mp]\n";

/* The graph planned with the shipped rules, compiled by NVRTC for arch
 * (the arch option; NULL: the device's, sm_90) on the fake device, run once
 * through fg_exec_run_host (twice with graph replay: capture, then replay).
 * Returns the plan's kernel count; the fake counts the launches. */
static int run_plan(const char *arch, int graph_replay)
{
    fake = fakes[0];
    fake->cc_major = 9;
    fake->cc_minor = 0;
    fake->driver_version = 12080;
    fake->launch_result = CUDA_SUCCESS;
    fake->has_marker = -1;   /* as the driver: the cubin holds it or not */
    fake->launches = fake->launches_ex = fake->global_lookups = fake->markers_found = 0;
    use_fake(0);
    unsetenv("FUSEGEN_PDL");
    fg_context *ctx = NULL;
    fg_options o = {.arch = arch, .rules_dir = tu_src("rules"), .size = sizeof o};
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    fg_exec *e = NULL;
    assert_int_equal(fg_graph_parse(ctx, "two.yaml", two_kernels, strlen(two_kernels), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_compile_options co = {.device = FG_DEVICE_CUDA, .graph_replay = graph_replay, .size = sizeof co};
    fg_status st = fg_plan_compile(ctx, p, &co, &e);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    int n = fg_exec_kernel_count(e);
    static float x[3 * 8 * 8], y[4 * 4 * 4];
    fg_binding b[] = {{"x", x}, {"mp", y}};
    for (int run = 0; run < 1 + graph_replay; run++) {
        st = fg_exec_run_host(e, b, 2);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
    }
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return n;
}

/* Generated kernels, end to end: the sm_90 cubins NVRTC makes of the
 * shipped templates hold the marker, so each launch is programmatic (with
 * graph replay, the captured launches are); sm_80 cubins do not. */
static void test_plan_launches(void **state)
{
    (void)state;
    for (int replay = 0; replay < 2; replay++) {
        int n = run_plan(NULL, replay);
        printf("plan of %d kernels for sm_90%s: %d launches, %d through cuLaunchKernelEx, markers %d of %d\n", n,
               replay ? " (graph replay: captured once)" : "", fake->launches, fake->launches_ex,
               fake->markers_found, fake->global_lookups);
        assert_true(n >= 2);
        assert_int_equal(fake->launches, n);   /* a replay launches the graph, not the kernels */
        assert_int_equal(fake->launches_ex, n);
        assert_int_equal(fake->markers_found, n);
    }
    int n = run_plan("sm_80", 0);
    printf("plan of %d kernels for sm_80: %d launches, %d through cuLaunchKernelEx, markers %d of %d\n", n,
           fake->launches, fake->launches_ex, fake->markers_found, fake->global_lookups);
    assert_int_equal(fake->launches, n);
    assert_int_equal(fake->launches_ex, 0);
    assert_int_equal(fake->global_lookups, n);
    assert_int_equal(fake->markers_found, 0);
}

int main(void)
{
    static const char *const vars[2] = {"FUSEGEN_FAKE_CUDA", "FUSEGEN_FAKE_CUDA_OLD"};
    for (int i = 0; i < 2; i++) {
        const char *path = getenv(vars[i]);
        void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
        fakes[i] = h ? dlsym(h, "fake_cuda") : NULL;
        if (!fakes[i]) {
            fprintf(stderr, "test_cuda_launch: %s does not name the fake driver (%s)\n", vars[i],
                    path ? dlerror() : "unset");
            return 1;
        }
    }
    setenv("FUSEGEN_CACHE", "off", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pdl_launch),
        cmocka_unit_test(test_plain_launch),
        cmocka_unit_test(test_pdl_launch_error),
        cmocka_unit_test(test_plan_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
