/*
 * test_api_hardening.c -- the public functions of the context, the executor,
 * the kernel-spec API and the host conversions given bad arguments: NULL
 * pointers, enum values out of range, negative counts, overflowing shapes,
 * text that would change the generated graph.  Each must return
 * FG_ERR_INPUT (with a message where there is a context) or a NULL / 0 / -1
 * answer, never crash.  Also: settings read once from the environment with
 * strict numbers (a bad value is one warning and the default), the option
 * struct's size field, and the log callback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "exec.h"
#include "testutil.h"

/* ---- a log callback that keeps the lines ---- */

typedef struct logbook {
    int n;
    char lines[16][512];
    fg_log_level levels[16];
} logbook;

static void keep_line(void *user, fg_log_level level, const char *message)
{
    logbook *b = user;
    if (b->n < 16) {
        snprintf(b->lines[b->n], sizeof b->lines[b->n], "%s", message);
        b->levels[b->n] = level;
    }
    b->n++;
}

static int logged(const logbook *b, const char *needle)
{
    for (int i = 0; i < b->n && i < 16; i++)
        if (strstr(b->lines[i], needle))
            return 1;
    return 0;
}

/* A context (no rules) made with the current environment and a log book. */
static fg_context *ctx_logged(logbook *b)
{
    memset(b, 0, sizeof *b);
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.log = keep_line;
    o.log_user = b;
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    return ctx;
}

/* ---- strict parsers ---- */

static void test_parsers(void **state)
{
    (void)state;
    long long v = 7;
    assert_int_equal(fg_parse_count("10", 1, 100, &v), 0);
    assert_int_equal(v, 10);
    const char *bad_counts[] = {"-1", "+5", " 5", "5 ", "0x10", "1e3", "", "101", "0", "5.0",
                                "9223372036854775808", "18446744073709551617", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++) {
        v = 7;
        assert_int_equal(fg_parse_count(bad_counts[i], 1, 100, &v), -1);
        assert_int_equal(v, 7);
    }
    assert_int_equal(fg_parse_count(NULL, 0, 1, &v), -1);
    assert_int_equal(fg_parse_count("9223372036854775807", 0, INT64_MAX, &v), 0);
    assert_true(v == INT64_MAX);

    assert_int_equal(fg_parse_bytes("64M", 1, 1LL << 40, &v), 0);
    assert_true(v == 64LL << 20);
    assert_int_equal(fg_parse_bytes("16MiB", 1, 1LL << 40, &v), 0);
    assert_true(v == 16LL << 20);
    assert_int_equal(fg_parse_bytes("1g", 1, 1LL << 40, &v), 0);
    assert_true(v == 1LL << 30);
    assert_int_equal(fg_parse_bytes("4096", 1, 1LL << 40, &v), 0);
    assert_true(v == 4096);
    const char *bad_bytes[] = {"-1", "-1M", "1024T", "17179869184G", "99999999999999999999G", "M", "12X",
                               "1.5G", "1 G", "", "18446744073709551615"};
    for (size_t i = 0; i < sizeof bad_bytes / sizeof *bad_bytes; i++)
        assert_int_equal(fg_parse_bytes(bad_bytes[i], 1, 1LL << 40, &v), -1);

    uint64_t b = 0;
    assert_int_equal(fg_parse_mebibytes("1024", &b), 0);
    assert_true(b == 1024ull << 20);
    assert_int_equal(fg_parse_mebibytes("0.02", &b), 0);
    assert_true(b == 20971);
    assert_int_equal(fg_parse_mebibytes("0.5", &b), 0);
    assert_true(b == 1u << 19);
    const char *bad_mb[] = {"1e30", "0", "0.0", "-5", "inf", "nan", "1.", ".5", "1099511627777", "0x10", "1,5", ""};
    for (size_t i = 0; i < sizeof bad_mb / sizeof *bad_mb; i++)
        assert_int_equal(fg_parse_mebibytes(bad_mb[i], &b), -1);

    int on = -1;
    assert_int_equal(fg_parse_switch("OFF", &on), 0);
    assert_int_equal(on, 0);
    assert_int_equal(fg_parse_switch("yes", &on), 0);
    assert_int_equal(on, 1);
    assert_int_equal(fg_parse_switch("maybe", &on), -1);
}

/* ---- the environment, read once ---- */

static void test_env_defaults(void **state)
{
    (void)state;
    const char *vars[] = {"FUSEGEN_HOOK_STEPS", "FUSEGEN_HOOK_MEMORY", "FUSEGEN_HOOK_TIMEOUT_MS", "FUSEGEN_CACHE_MAX_MB",
                          "FUSEGEN_CACHE", "FUSEGEN_EMU_STACK_KB"};
    char *saved[6];
    for (int i = 0; i < 6; i++) {
        saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
        unsetenv(vars[i]);
    }
    logbook lb;
    fg_context *ctx = ctx_logged(&lb);
    assert_int_equal(lb.n, 0);
    assert_true(ctx->opts.hook_steps == 10000000);
    assert_true(ctx->opts.hook_memory == 64LL << 20);
    assert_int_equal(ctx->opts.hook_timeout_ms, 2000);
    assert_true(ctx->opts.cache_max_mb == 1024);
    assert_true(ctx->env.cache_limit_bytes == 1024ull << 20);
    assert_int_equal(ctx->opts.cache_off, 0);
    assert_int_equal(ctx->opts.size, sizeof(fg_options));
    assert_true(ctx->env.emu_stack_bytes == 64 * 1024);
    assert_non_null(ctx->env.cuda_library);
    assert_non_null(ctx->env.tmpdir);
    fg_context_free(ctx);

    /* Malformed and out-of-range values: one warning each, the default. */
    setenv("FUSEGEN_HOOK_STEPS", "-1", 1);
    setenv("FUSEGEN_HOOK_MEMORY", "99999999999999999999G", 1);
    setenv("FUSEGEN_HOOK_TIMEOUT_MS", "2s", 1);
    setenv("FUSEGEN_CACHE_MAX_MB", "1e30", 1);
    setenv("FUSEGEN_CACHE", "perhaps", 1);
    setenv("FUSEGEN_EMU_STACK_KB", "4", 1);
    ctx = ctx_logged(&lb);
    assert_int_equal(lb.n, 6);
    assert_int_equal(lb.levels[0], FG_LOG_WARNING);
    assert_true(logged(&lb, "FUSEGEN_HOOK_STEPS='-1'"));
    assert_true(logged(&lb, "FUSEGEN_HOOK_MEMORY='99999999999999999999G'"));
    assert_true(logged(&lb, "FUSEGEN_HOOK_TIMEOUT_MS='2s'"));
    assert_true(logged(&lb, "FUSEGEN_CACHE_MAX_MB='1e30'"));
    assert_true(logged(&lb, "FUSEGEN_CACHE='perhaps'"));
    assert_true(logged(&lb, "FUSEGEN_EMU_STACK_KB='4'"));
    assert_true(logged(&lb, "using the default 10000000"));
    assert_true(ctx->opts.hook_steps == 10000000);
    assert_true(ctx->opts.hook_memory == 64LL << 20);
    assert_int_equal(ctx->opts.hook_timeout_ms, 2000);
    assert_true(ctx->env.cache_limit_bytes == 1024ull << 20);   /* 1e30 does not disable the cache */
    assert_int_equal(ctx->opts.cache_off, 0);
    assert_true(ctx->env.emu_stack_bytes == 64 * 1024);
    assert_int_equal(fg_context_error_count(ctx), 0);             /* warnings, not errors */
    fg_context_free(ctx);

    /* Good values. */
    setenv("FUSEGEN_HOOK_STEPS", "200000", 1);
    setenv("FUSEGEN_HOOK_MEMORY", "16M", 1);
    setenv("FUSEGEN_HOOK_TIMEOUT_MS", "500", 1);
    setenv("FUSEGEN_CACHE_MAX_MB", "0.02", 1);
    setenv("FUSEGEN_CACHE", "off", 1);
    setenv("FUSEGEN_EMU_STACK_KB", "256", 1);
    ctx = ctx_logged(&lb);
    assert_int_equal(lb.n, 0);
    assert_true(ctx->opts.hook_steps == 200000);
    assert_true(ctx->opts.hook_memory == 16LL << 20);
    assert_int_equal(ctx->opts.hook_timeout_ms, 500);
    assert_true(ctx->env.cache_limit_bytes == 20971);
    assert_true(ctx->opts.cache_max_mb == 1);
    assert_int_equal(ctx->opts.cache_off, 1);
    assert_true(ctx->env.emu_stack_bytes == 256 * 1024);
    fg_context_free(ctx);

    /* The API fields win over the environment. */
    fg_options o = {0};
    o.no_rules = 1;
    o.hook_steps = 1234;
    o.hook_memory = 1 << 20;
    o.hook_timeout_ms = 50;
    o.cache_max_mb = 3;
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    assert_true(ctx->opts.hook_steps == 1234);
    assert_true(ctx->opts.hook_memory == 1 << 20);
    assert_int_equal(ctx->opts.hook_timeout_ms, 50);
    assert_true(ctx->env.cache_limit_bytes == 3u << 20);
    fg_context_free(ctx);

    for (int i = 0; i < 6; i++) {
        if (saved[i])
            setenv(vars[i], saved[i], 1);
        else
            unsetenv(vars[i]);
        free(saved[i]);
    }
}

/* ---- fg_context_init and the error accessors ---- */

static void test_context_arguments(void **state)
{
    (void)state;
    assert_int_equal(fg_context_init(NULL, NULL), FG_ERR_INPUT);
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.device = (fg_device)77;
    o.jobs = -3;
    o.hook_steps = -1;
    o.hook_memory = (long long)1 << 62;
    o.hook_timeout_ms = -5;
    o.cache_max_mb = -1;
    assert_int_equal(fg_context_init(&ctx, &o), FG_ERR_INPUT);
    assert_non_null(ctx);
    /* Every bad field is reported, and the context still has usable settings. */
    assert_true(tu_has_error(ctx, "fg_options.device is 77"));
    assert_true(tu_has_error(ctx, "fg_options.jobs is -3"));
    assert_true(tu_has_error(ctx, "fg_options.hook_steps is -1"));
    assert_true(tu_has_error(ctx, "fg_options.hook_memory is 4611686018427387904"));
    assert_true(tu_has_error(ctx, "fg_options.hook_timeout_ms is -5"));
    assert_true(tu_has_error(ctx, "fg_options.cache_max_mb is -1"));
    assert_int_equal(ctx->opts.device, FG_DEVICE_AUTO);
    assert_true(ctx->opts.hook_steps > 0 && ctx->opts.hook_memory > 0 && ctx->opts.hook_timeout_ms > 0);
    fg_context_free(ctx);

    /* The size field: too small is an error; a bigger struct (a newer header)
     * is fine while the fields this library does not know are zero. */
    o = (fg_options){0};
    o.no_rules = 1;
    o.size = 8;
    assert_int_equal(fg_context_init(&ctx, &o), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "fg_options.size is 8"));
    fg_context_free(ctx);
    struct {
        fg_options o;
        uint64_t later;
    } big;
    memset(&big, 0, sizeof big);
    big.o.no_rules = 1;
    big.o.size = sizeof big;
    assert_int_equal(fg_context_init(&ctx, &big.o), FG_OK);
    fg_context_free(ctx);
    big.later = 1;
    assert_int_equal(fg_context_init(&ctx, &big.o), FG_ERR_UNSUPPORTED);
    assert_true(tu_has_error(ctx, "does not know"));
    fg_context_free(ctx);

    /* NULL everywhere. */
    fg_context_free(NULL);
    fg_context_set_log(NULL, keep_line, NULL);
    fg_context_clear_errors(NULL);
    assert_int_equal(fg_context_error_count(NULL), 0);
    assert_null(fg_context_error(NULL, 0));
    ctx = tu_ctx_empty();
    assert_null(fg_context_error(ctx, -1));
    assert_null(fg_context_error(ctx, 1 << 30));
    char buf[64];
    assert_string_equal(fg_error_format(NULL, buf, sizeof buf), "no error");
    assert_null(fg_error_format(NULL, NULL, 10));
    fg_error e = {FG_ERR_INPUT, "f.yaml", 3, 0, NULL};
    assert_string_equal(fg_error_format(&e, buf, sizeof buf), "f.yaml:3:1: error: ");
    assert_string_equal(fg_status_name((fg_status)77), "?");
    assert_string_equal(fg_status_name((fg_status)-1), "?");
    assert_string_equal(fg_dtype_name((fg_dtype)-1), "?");
    assert_string_equal(fg_layout_name((fg_layout)9), "?");
    assert_string_equal(fg_device_name((fg_device)77), "?");
    assert_non_null(fg_version());
    fg_context_free(ctx);
}

static void test_log_callback(void **state)
{
    (void)state;
    logbook lb;
    fg_context *ctx = ctx_logged(&lb);
    fg_diag_warn(ctx, (fg_loc){"r.yaml", 4, 2}, "something odd about '%s'", "x");
    assert_int_equal(lb.n, 1);
    assert_string_equal(lb.lines[0], "r.yaml:4:2: warning: something odd about 'x'");
    assert_int_equal(lb.levels[0], FG_LOG_WARNING);
    fg_context_set_log(ctx, NULL, NULL);   /* back to the default (quiet here) */
    ctx->quiet = 1;
    fg_diag_warn(ctx, FG_NOLOC, "not to the book");
    assert_int_equal(lb.n, 1);
    fg_context_set_log(ctx, keep_line, &lb);
    fg_diag_warn(ctx, FG_NOLOC, "again");
    assert_int_equal(lb.n, 2);
    assert_string_equal(lb.lines[1], "warning: again");
    fg_context_free(ctx);
}

/* ---- the executor ---- */

static const char *relu_graph =
    "graph: g\nseed: 3\ndtype: fp32\n"
    "inputs:\n  - { name: x, shape: [2, 8] }\n"
    "nodes:\n  - { name: r, op: relu, inputs: [x] }\n"
    "outputs: [r]\n";

/* The kernel names (hashes of the sources) of relu_graph with x of shape
 * [rows, 8], compiled with shape_params sp, into name. */
static void relu_kernel_name(fg_context *ctx, int rows, int sp, char *name, size_t size)
{
    char text[256];
    snprintf(text, sizeof text,
             "graph: g\ndtype: fp32\ninputs:\n  - { name: x, shape: [%d, 8] }\n"
             "nodes:\n  - { name: r, op: relu, inputs: [x] }\noutputs: [r]\n", rows);
    fg_graph *g;
    fg_plan *p;
    fg_exec *e;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", text, strlen(text), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_compile_options co = {.device = FG_DEVICE_EMU, .size = sizeof co, .shape_params = sp};
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_OK);
    assert_int_equal(fg_exec_kernel_count(e), 1);
    snprintf(name, size, "%s", fg_exec_kernel_name(e, 0));
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* fg_compile_options.shape_params: the same graph at two sizes is one
 * source with the sizes as parameters, two sources with them as
 * constants. */
static void test_exec_shape_params(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    char a[64], b[64];
    relu_kernel_name(ctx, 2, 1, a, sizeof a);
    relu_kernel_name(ctx, 3, 1, b, sizeof b);
    assert_string_equal(a, b);
    relu_kernel_name(ctx, 2, 0, a, sizeof a);
    relu_kernel_name(ctx, 3, 0, b, sizeof b);
    assert_string_not_equal(a, b);
    fg_context_free(ctx);
}

static void test_exec_arguments(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g;
    fg_plan *p;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", relu_graph, strlen(relu_graph), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    fg_exec *e = (fg_exec *)1;
    fg_compile_options co = {.device = FG_DEVICE_EMU};

    assert_int_equal(fg_plan_compile(NULL, p, &co, &e), FG_ERR_INPUT);
    assert_null(e);
    assert_int_equal(fg_plan_compile(ctx, p, &co, NULL), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "out is NULL"));
    e = (fg_exec *)1;
    assert_int_equal(fg_plan_compile(ctx, NULL, &co, &e), FG_ERR_INPUT);
    assert_null(e);
    assert_true(tu_has_error(ctx, "no plan"));
    co.device = (fg_device)77;   /* must not call through a missing backend */
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "device 77 is not an fg_device"));
    co.device = (fg_device)-1;
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_ERR_INPUT);
    co.device = FG_DEVICE_EMU;
    co.size = 3;
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "fg_compile_options.size is 3"));
    co.size = offsetof(fg_compile_options, shape_params);   /* the layout of 0.1 */
    fg_context_clear_errors(ctx);
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_OK);
    fg_exec_free(e);
    co.size = sizeof co;
    assert_int_equal(fg_plan_compile(ctx, p, &co, &e), FG_OK);
    assert_int_equal(fg_exec_device(e), FG_DEVICE_EMU);
    assert_non_null(fg_exec_kernel_choices(e, 0));
    assert_null(fg_exec_kernel_choices(e, 1));
    assert_null(fg_exec_kernel_choices(e, -1));
    assert_null(fg_exec_kernel_choices(NULL, 0));

    /* Queries and runs on a NULL exec. */
    fg_tensor_info info;
    fg_binding b[2] = {{"x", NULL}, {"r", NULL}};
    fg_exec_free(NULL);
    assert_int_equal(fg_exec_device(NULL), FG_DEVICE_AUTO);
    assert_int_equal(fg_exec_input_count(NULL), 0);
    assert_int_equal(fg_exec_output_count(NULL), 0);
    assert_int_equal(fg_exec_input_info(NULL, 0, &info), FG_ERR_INPUT);
    assert_int_equal(fg_exec_output_info(NULL, 0, &info), FG_ERR_INPUT);
    assert_int_equal(fg_exec_run(NULL, b, 2, NULL), FG_ERR_INPUT);
    assert_int_equal(fg_exec_run_host(NULL, b, 2), FG_ERR_INPUT);
    assert_int_equal(fg_exec_kernel_count(NULL), 0);
    assert_null(fg_exec_kernel_name(NULL, 0));
    assert_null(fg_exec_kernel_source(NULL, 0));
    assert_true(fg_exec_kernel_ms(NULL, 0) == -1);
    assert_int_equal(fg_exec_arena_bytes(NULL), 0);

    /* Bad indexes, NULL info, negative and missing bindings. */
    assert_int_equal(fg_exec_input_info(e, -1, &info), FG_ERR_INPUT);
    assert_int_equal(fg_exec_input_info(e, 1, &info), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "input 1 does not exist"));
    assert_int_equal(fg_exec_output_info(e, 0, NULL), FG_ERR_INPUT);
    assert_null(fg_exec_kernel_name(e, -1));
    assert_null(fg_exec_kernel_source(e, 99));
    assert_true(fg_exec_kernel_ms(e, 1 << 30) == -1);
    assert_int_equal(fg_exec_run(e, b, -1, NULL), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "negative binding count"));
    assert_int_equal(fg_exec_run_host(e, NULL, 2), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "no binding array"));
    assert_int_equal(fg_exec_run_host(e, NULL, 0), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "is not bound"));
    assert_int_equal(fg_exec_run(e, b, 2, NULL), FG_ERR_INPUT);   /* NULL data */
    fg_binding nameless[2] = {{NULL, b}, {"r", b}};
    assert_int_equal(fg_exec_run(e, nameless, 2, NULL), FG_ERR_INPUT);

    /* Still works. */
    float x[16], y[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i - 8;
    fg_binding ok[2] = {{"x", x}, {"r", y}};
    assert_int_equal(fg_exec_run_host(e, ok, 2), FG_OK);
    assert_true(y[0] == 0.0f && y[15] == 7.0f);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- the kernel-spec API ---- */

static void test_spec_arguments(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    fg_spec_op relu[] = {{"act", "relu", NULL}};
    fg_kernel_spec good = {.nops = 1, .ops = relu, .rank = 2, .input_shape = {3, 4},
                           .compile = {.device = FG_DEVICE_EMU}};
    fg_kernel_handle *h = (fg_kernel_handle *)1;
    assert_int_equal(fg_kernel_create(NULL, &good, &h), FG_ERR_INPUT);
    assert_null(h);
    assert_int_equal(fg_kernel_create(ctx, NULL, &h), FG_ERR_INPUT);
    assert_int_equal(fg_kernel_create(ctx, &good, NULL), FG_ERR_INPUT);

    struct {
        const char *why, *message;
        fg_kernel_spec s;
    } cases[] = {
        {"negative op count", "nops is -1", {.nops = -1, .ops = relu, .rank = 2, .input_shape = {3, 4}}},
        {"no ops", "ops is NULL", {.nops = 1, .rank = 2, .input_shape = {3, 4}}},
        {"negative weights", "nweights is -5", {.nops = 1, .ops = relu, .nweights = -5, .rank = 2, .input_shape = {3, 4}}},
        {"NULL weights", "2 weights but weights is NULL",
         {.nops = 1, .ops = relu, .nweights = 2, .rank = 2, .input_shape = {3, 4}}},
        {"dtype", "dtype 77", {.nops = 1, .ops = relu, .dtype = (fg_dtype)77, .rank = 2, .input_shape = {3, 4}}},
        {"layout", "layout -1", {.nops = 1, .ops = relu, .layout = (fg_layout)-1, .rank = 2, .input_shape = {3, 4}}},
        {"rank", "input rank 7", {.nops = 1, .ops = relu, .rank = 7, .input_shape = {3, 4}}},
        {"zero dim", "positive dimensions", {.nops = 1, .ops = relu, .rank = 2, .input_shape = {0, 4}}},
        {"negative dim", "positive dimensions", {.nops = 1, .ops = relu, .rank = 2, .input_shape = {-3, 4}}},
        {"overflow", "at most 2^31 elements",
         {.nops = 1, .ops = relu, .rank = 3, .input_shape = {1ll << 31, 1ll << 31, 1ll << 31}}},
        {"device", "compile.device 77",
         {.nops = 1, .ops = relu, .rank = 2, .input_shape = {3, 4}, .compile = {.device = (fg_device)77}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fg_context_clear_errors(ctx);
        h = (fg_kernel_handle *)1;
        if (fg_kernel_create(ctx, &cases[i].s, &h) != FG_ERR_INPUT || h || !tu_has_error(ctx, cases[i].message)) {
            tu_dump_errors(ctx);
            fail_msg("case '%s'", cases[i].why);
        }
    }

    /* Names and attributes that would change the graph text are refused. */
    fg_spec_op inject_name[] = {{"act, op: relu, inputs: [x] }\n  - { name: b", "relu", NULL}};
    fg_spec_op inject_attrs[] = {{"act", "leaky_relu", "{ alpha: 0.5 }, output: z, b: { }"}};
    fg_spec_op newline_attrs[] = {{"act", "leaky_relu", "{ alpha: 0.5 }\noutputs: [x]"}};
    fg_spec_op comment_attrs[] = {{"act", "leaky_relu", "{ alpha: 0.5 } #"}};
    fg_spec_op *bad_ops[] = {inject_name, inject_attrs, newline_attrs, comment_attrs};
    for (size_t i = 0; i < sizeof bad_ops / sizeof *bad_ops; i++) {
        fg_kernel_spec s = good;
        s.ops = bad_ops[i];
        fg_context_clear_errors(ctx);
        assert_int_equal(fg_kernel_create(ctx, &s, &h), FG_ERR_INPUT);
        assert_null(h);
    }
    float w[4] = {1, 2, 3, 4};
    fg_spec_weight bad_w[] = {{NULL, 1, {4}, w}, {"act.slope", 9, {4}, w}, {"act.slope", 1, {-4}, w},
                              {"act.slope\n- x", 1, {4}, w}};
    for (size_t i = 0; i < sizeof bad_w / sizeof *bad_w; i++) {
        fg_kernel_spec s = good;
        s.nweights = 1;
        s.weights = &bad_w[i];
        fg_context_clear_errors(ctx);
        assert_int_equal(fg_kernel_create(ctx, &s, &h), FG_ERR_INPUT);
    }

    /* A well-formed flow mapping is accepted. */
    fg_spec_op leaky[] = {{"act", "leaky_relu", "{ alpha: 0.5 }"}};
    fg_kernel_spec s = good;
    s.ops = leaky;
    fg_context_clear_errors(ctx);
    fg_status st = fg_kernel_create(ctx, &s, &h);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_non_null(fg_kernel_source(h));
    assert_non_null(fg_kernel_exec(h));
    fg_kernel_handle_free(h);

    fg_kernel_handle_free(NULL);
    assert_null(fg_kernel_source(NULL));
    assert_null(fg_kernel_exec(NULL));
    assert_int_equal(fg_kernel_launch(NULL, NULL, 0, NULL), FG_ERR_INPUT);
    fg_context_free(ctx);
}

/* ---- host conversions ---- */

static void test_convert_arguments(void **state)
{
    (void)state;
    float src[4] = {1, 2, 3, 4}, dst[4];
    assert_int_equal(fg_convert_dtype(NULL, FG_DTYPE_F32, dst, FG_DTYPE_F16, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_dtype(src, FG_DTYPE_F32, NULL, FG_DTYPE_F16, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_dtype(src, (fg_dtype)77, dst, FG_DTYPE_F16, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_dtype(src, FG_DTYPE_F32, dst, (fg_dtype)-1, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_dtype(src, FG_DTYPE_F32, dst, FG_DTYPE_F16, SIZE_MAX), FG_ERR_INPUT);
    assert_int_equal(fg_convert_dtype(NULL, FG_DTYPE_F32, NULL, FG_DTYPE_F16, 0), FG_OK);

    const int64_t shape[4] = {1, 2, 1, 2};
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, NULL, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, shape, 0), FG_ERR_INPUT);
    assert_int_equal(fg_convert_layout(src, (fg_layout)5, dst, FG_LAYOUT_NHWC, shape, 4), FG_ERR_INPUT);
    assert_int_equal(fg_convert_layout(NULL, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, shape, 4), FG_ERR_INPUT);
    const int64_t negative[4] = {1, -2, 1, 2};
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, negative, 4), FG_ERR_INPUT);
    const int64_t huge[4] = {1ll << 40, 1ll << 40, 1, 2};
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, huge, 4), FG_ERR_INPUT);
    const int64_t big_bytes[4] = {1ll << 31, 1ll << 31, 1, 1};
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, big_bytes, 1ull << 62),
                     FG_ERR_INPUT);
    assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, shape, 4), FG_OK);
    assert_true(dst[1] == 3.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parsers),          cmocka_unit_test(test_env_defaults),
        cmocka_unit_test(test_context_arguments), cmocka_unit_test(test_log_callback),
        cmocka_unit_test(test_exec_arguments),
        cmocka_unit_test(test_exec_shape_params),   cmocka_unit_test(test_spec_arguments),
        cmocka_unit_test(test_convert_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
