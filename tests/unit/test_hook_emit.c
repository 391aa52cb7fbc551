/*
 * test_hook_emit.c -- Lua hooks that shape generated code: an epilogue hook
 * returning an expression and a params hook choosing tile sizes, end to end
 * (rules -> plan -> emitted source -> emulation -> compared with the host
 * reference of the unfused graph), a params hook returning a value the
 * template cannot take, and epilogue hooks that try to smuggle code into the
 * kernel (refused before any source is compiled).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "exec.h"
#include "jit.h"
#include "testutil.h"

static const char *RULES =
    "rule: conv_hooked\npriority: 50\nhooks: h.lua\n"
    "match:\n  - conv: { op: conv2d }\n  - act: { op: relu }\n"
    "kernel:\n  template: conv2d\n  params: conv_tiles\n"
    "  epilogue:\n    - bias: conv.bias\n    - hook: relu_text\n"
    "---\n"
    "rule: mm_hooked\npriority: 50\nhooks: h.lua\n"
    "match:\n  - mm: { op: matmul }\n  - act: { op: relu }\n"
    "kernel:\n  template: gemm\n  params: mm_tiles\n"
    "  epilogue:\n    - hook: relu_text\n";

static const char *HOOKS =
    "function relu_text(group)\n"
    "  return 'v > 0 ? v : 0 * c'\n"
    "end\n"
    "function conv_tiles(group) return { threads = THREADS } end\n"
    "function mm_tiles(group) return { tile_m = 32, tile_n = 32, tile_k = 16 } end\n";

static const char *GRAPH =
    "graph: hooked\nseed: 3\n"
    "inputs:\n  - { name: x, shape: [1, 5, 7, 6] }\n  - { name: a, shape: [33, 37] }\n"   /* M 33: past gemv, on gemm */
    "weights:\n  - { name: w, shape: [6, 5, 3, 3] }\n  - { name: b, shape: [6] }\n  - { name: m, shape: [37, 17] }\n"
    "nodes:\n"
    "  - { name: conv, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
    "  - { name: r1, op: relu, inputs: [conv] }\n"
    "  - { name: mm, op: matmul, inputs: [a, m] }\n"
    "  - { name: r2, op: relu, inputs: [mm] }\n"
    "outputs: [r1, r2]\n";

/* A context whose rules are the vocabulary plus RULES, with hooks whose conv
 * thread count is `threads`. */
static fg_context *ctx_with_hooks(const char *threads, char **dir)
{
    *dir = tu_vocab_dir();
    free(tu_write(*dir, "hooked.yaml", RULES));
    fg_buf h = {0};
    const char *at = strstr(HOOKS, "THREADS");
    fg_buf_putn(&h, HOOKS, (size_t)(at - HOOKS));
    fg_buf_put(&h, threads);
    fg_buf_put(&h, at + strlen("THREADS"));
    free(tu_write(*dir, "h.lua", h.s));
    fg_buf_free(&h);
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, *dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

static void test_hooks_shape_kernels(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_with_hooks("64", &dir);
    fg_graph *g;
    fg_plan *p;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", GRAPH, strlen(GRAPH), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_string_equal(tu_group_desc(ctx, p, "conv"), "conv_hooked:conv,r1");
    assert_string_equal(tu_group_desc(ctx, p, "mm"), "mm_hooked:mm,r2");

    fg_exec *e = tu_compile_emu(ctx, p);
    assert_int_equal(fg_exec_kernel_count(e), 2);
    for (int k = 0; k < 2; k++) {
        const fg_kernel *K = fg_exec_kernel(e, k);
        /* the hook's text is in the epilogue, the params hook's sizes in the launch / source */
        assert_non_null(strstr(K->source, "// epilogue: hook relu_text"));
        assert_non_null(strstr(K->source, "v = ((v > 0.0f) ? v : (0.0f * ((float)c)));"));
        if (!strcmp(K->template_name, "conv2d"))
            assert_int_equal(K->block[0] * K->block[1] * K->block[2], 64);
        else
            assert_non_null(strstr(K->source, "TILE_M = 32"));
    }

    /* the same sources compile under NVRTC without warnings */
    for (int k = 0; k < p->ngroups; k++) {
        fg_kernel K;
        memset(&K, 0, sizeof K);
        fg_emit_opts eo = {.specialize = 1};
        assert_int_equal(fg_emit_group(ctx, p, k, &eo, &K), FG_OK);
        fg_jit_info info;
        fg_status st = fg_jit_compile(ctx, &K, "sm_90", &info);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        assert_string_equal(info.log, "");
        assert_true(K.binary_size > 0);
        fg_kernel_free(&K);
    }

    /* numerics against the unfused reference */
    tu_exec_vs_reference(ctx, g, e, 77, 1e-5);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* A params hook asking for 33 threads: a hook error of the planner (hooks
 * run at plan time), naming the hook's rule, not a kernel that silently
 * misbehaves. */
static void test_bad_params_hook(void **state)
{
    (void)state;
    char *dir;
    fg_context *ctx = ctx_with_hooks("33", &dir);
    fg_graph *g;
    fg_plan *p;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", GRAPH, strlen(GRAPH), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_HOOK);
    assert_null(p);
    assert_true(tu_has_error(ctx, "hooked.yaml:1:"));
    assert_true(tu_has_error(ctx, "threads = 33"));
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* An epilogue hook returning C text that would close the kernel and define
 * a host constructor (run at dlopen by the emulator), or include a file:
 * planning fails with the hook's located error (hooks run at plan time), so
 * no plan, and no source holding the text, exists. */
static void test_injection_refused(void **state)
{
    (void)state;
    static const char *const evil[] = {
        "'v; } __attribute__((constructor)) static void fg_pwn(void) { __builtin_trap(); } "
        "static float fg_y(float v) { return v'",
        "'v\\n#include \"/etc/passwd\"\\n'",
        "'v // comment'",
    };
    for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
        char *dir = tu_vocab_dir();
        free(tu_write(dir, "hooked.yaml", RULES));
        fg_buf h = {0};
        fg_buf_printf(&h, "function relu_text(group)\n  return %s\nend\n"
                          "function conv_tiles(group) return {} end\nfunction mm_tiles(group) return {} end\n",
                      evil[i]);
        free(tu_write(dir, "h.lua", h.s));
        fg_buf_free(&h);
        fg_context *ctx = tu_ctx_empty();
        assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
        fg_graph *g;
        fg_plan *p;
        assert_int_equal(fg_graph_parse(ctx, "g.yaml", GRAPH, strlen(GRAPH), &g), FG_OK);
        assert_int_equal(fg_plan_build(ctx, g, &p), FG_ERR_HOOK);
        assert_null(p);
        assert_true(tu_has_error(ctx, "h.lua:1:1: error: hook 'relu_text' returned '"));
        assert_true(tu_has_error(ctx, "which is not an expression over v and c"));
        assert_true(tu_has_error(ctx, "(called from "));
        fg_graph_free(g);
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hooks_shape_kernels),
        cmocka_unit_test(test_bad_params_hook),
        cmocka_unit_test(test_injection_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
