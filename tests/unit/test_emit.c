/*
 * test_emit.c -- source emission: golden sources (tests/golden/*.cu; run with
 * FUSEGEN_UPDATE_GOLDEN=1 to rewrite them), template placeholder lists,
 * the renderer, parameters and the located errors.  Rules and ops come from
 * a private directory written by the test, so shipped-rule edits do not move
 * the goldens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_impl.h"
#include "testutil.h"

static const char ops_yaml[] =
    "---\n"
    "op: conv2d\nkind: conv2d\ninputs: [x, weight, bias?]\nattrs:\n"
    "  stride:   { type: ints, len: 2, default: [1, 1] }\n"
    "  padding:  { type: ints, len: 2, default: [0, 0] }\n"
    "  dilation: { type: ints, len: 2, default: [1, 1] }\n"
    "  groups:   { type: int, default: 1 }\n"
    "---\n"
    "op: matmul\nkind: matmul\ninputs: [a, b]\nattrs:\n"
    "  trans_a: { type: bool, default: false }\n"
    "  trans_b: { type: bool, default: false }\n"
    "---\n"
    "op: max_pool2d\nkind: pool2d\nreduce: max\ninputs: [x]\nattrs:\n"
    "  kernel:  { type: ints, len: 2 }\n"
    "  stride:  { type: ints, len: 2, default: [1, 1] }\n"
    "  padding: { type: ints, len: 2, default: [0, 0] }\n"
    "---\n"
    "- { op: add, kind: pointwise, inputs: [a, b], expr: \"a + b\" }\n"
    "- { op: relu, kind: pointwise, inputs: [x], expr: \"x > 0 ? x : 0\" }\n"
    "- op: leaky_relu\n  kind: pointwise\n  inputs: [x]\n"
    "  attrs: { alpha: { type: float, default: 0.01 } }\n  expr: \"x > 0 ? x : alpha * x\"\n";

static const char rules_yaml[] =
    "---\n"
    "rule: conv_act\npriority: 10\nmatch:\n"
    "  - conv: { op: conv2d }\n"
    "  - act:  { op: [relu, leaky_relu] }\n"
    "kernel:\n  template: conv2d\n  epilogue:\n    - bias: conv.bias\n    - apply: act\n"
    "---\n"
    "rule: add_act\npriority: 10\nmatch:\n"
    "  - add: { op: add }\n"
    "  - act: { op: [relu, leaky_relu] }\n"
    "kernel:\n  template: pointwise\n  epilogue:\n    - apply: act\n"
    "---\n"
    "rule: matmul_add\npriority: 10\nmatch:\n"
    "  - mm:  { op: matmul }\n"
    "  - add: { op: add }\n"
    "kernel:\n  template: gemm\n  epilogue:\n    - apply: add\n";

typedef struct fixture {
    char *tmp;
    fg_context *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->tmp = tu_tmpdir();
    char *dir = fg_path_join(f->tmp, "goldrules");
    free(tu_write(dir, "ops.yaml", ops_yaml));
    free(tu_write(dir, "rules.yaml", rules_yaml));
    f->ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(f->ctx, dir);
    if (st != FG_OK)
        tu_dump_errors(f->ctx);
    free(dir);
    *state = f;
    return st == FG_OK ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    fg_context_free(f->ctx);
    tu_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

/* Parses graph text and plans it. */
static fg_plan *plan_of(fg_context *ctx, const char *text, fg_graph **g)
{
    fg_status st = fg_graph_parse(ctx, "golden.yaml", text, strlen(text), g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_plan *p = NULL;
    st = fg_plan_build(ctx, *g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return p;
}

/* Compares src with tests/golden/name (rewrites it under FUSEGEN_UPDATE_GOLDEN=1). */
static void check_golden(const char *name, const char *src)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/golden/%s", name);
    const char *path = tu_src(rel);
    const char *upd = getenv("FUSEGEN_UPDATE_GOLDEN");
    if (upd && strcmp(upd, "1") == 0) {
        assert_int_equal(fg_write_file_atomic(path, src, strlen(src)), 0);
        return;
    }
    char *want = fg_read_file(path, NULL);
    if (!want)
        fail_msg("missing golden %s (run with FUSEGEN_UPDATE_GOLDEN=1 to create it)", path);
    if (strcmp(want, src) != 0) {
        fprintf(stderr, "generated source differs from %s; got:\n%s\n", path, src);
        free(want);
        fail_msg("golden mismatch: %s", name);
    }
    free(want);
}

static void emit_golden(fg_context *ctx, const char *graph, int group, const char *golden, fg_kernel *k)
{
    fg_graph *g = NULL;
    fg_plan *p = plan_of(ctx, graph, &g);
    assert_true(group < p->ngroups);
    fg_emit_opts o = {.specialize = 1};
    fg_status st = fg_emit_group(ctx, p, group, &o, k);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    check_golden(golden, k->source);
    fg_plan_free(p);
    fg_graph_free(g);
}

static const char conv_graph[] =
    "graph: conv\nseed: 1\ninputs:\n  - { name: x, shape: [1, 3, 5, 5] }\n"
    "weights:\n  - { name: c1.w, shape: [4, 3, 3, 3] }\n  - { name: c1.b, shape: [4] }\n"
    "nodes:\n"
    "  - { name: c1, op: conv2d, inputs: [x, c1.w, c1.b], attrs: { padding: [1, 1] } }\n"
    "  - { name: r1, op: relu, inputs: [c1] }\n"
    "outputs: [r1]\n";

/* Two conv + relu blocks on the same shapes with different tensor names, and
 * a third on another shape: the first two render one kernel name (the rule
 * and the hash of the canonical source, emit_name.c) and one canonical
 * text; the third another.  The group index is in no name. */
static void test_name_by_content(void **state)
{
    fixture *f = *state;
    static const char graph[] =
        "graph: twins\nseed: 1\ninputs:\n  - { name: x, shape: [1, 4, 5, 5] }\n"
        "weights:\n  - { name: a.w, shape: [4, 4, 3, 3] }\n  - { name: a.b, shape: [4] }\n"
        "  - { name: other_w, shape: [4, 4, 3, 3] }\n  - { name: other_b, shape: [4] }\n"
        "  - { name: c.w, shape: [4, 4, 3, 3] }\n  - { name: c.b, shape: [4] }\n"
        "nodes:\n"
        "  - { name: a, op: conv2d, inputs: [x, a.w, a.b], attrs: { padding: [1, 1] } }\n"
        "  - { name: ar, op: relu, inputs: [a] }\n"
        "  - { name: second_conv, op: conv2d, inputs: [ar, other_w, other_b], attrs: { padding: [1, 1] } }\n"
        "  - { name: second_relu, op: relu, inputs: [second_conv] }\n"
        "  - { name: c, op: conv2d, inputs: [second_relu, c.w, c.b] }\n"
        "  - { name: cr, op: relu, inputs: [c] }\n"
        "outputs: [cr]\n";
    fg_graph *g = NULL;
    fg_plan *p = plan_of(f->ctx, graph, &g);
    assert_int_equal(p->ngroups, 3);
    fg_kernel k[3];
    fg_buf canon[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fg_emit_group(f->ctx, p, i, NULL, &k[i]), FG_OK);
        fg_kernel_canonical(&k[i], &canon[i]);
        assert_true(strncmp(k[i].name, "fg_conv_act_", 12) == 0);
        assert_int_equal(strlen(k[i].name), 12 + 12);
        assert_null(strstr(canon[i].s, "//"));
    }
    assert_string_equal(k[0].name, k[1].name);
    assert_string_equal(canon[0].s, canon[1].s);
    assert_string_not_equal(k[0].source, k[1].source);   /* the names and comments differ */
    assert_non_null(strstr(k[1].source, "second_relu"));
    assert_string_not_equal(k[2].name, k[0].name);       /* no padding: another program */
    assert_string_not_equal(canon[2].s, canon[0].s);
    for (int i = 0; i < 3; i++) {
        fg_buf_free(&canon[i]);
        fg_kernel_free(&k[i]);
    }
    fg_plan_free(p);
    fg_graph_free(g);
}

static void test_golden_conv(void **state)
{
    fixture *f = *state;
    fg_kernel k;
    emit_golden(f->ctx, conv_graph, 0, "conv_act_f32_nchw.cu", &k);
    /* the shape the source promises */
    assert_non_null(strstr(k.source, "rule:      conv_act (goldrules/rules.yaml:2)"));
    assert_non_null(strstr(k.source, "// epilogue: bias (c1.b)"));
    assert_non_null(strstr(k.source, "// epilogue: apply r1: x > 0 ? x : 0"));
    assert_non_null(strstr(k.source, "#include \"fusegen_prelude.cuh\""));
    assert_int_equal(k.dtype, FG_DTYPE_F32);
    /* params: x, weight, bias read; the output written */
    int writes = 0, reads = 0;
    for (int i = 0; i < k.nparams; i++) {
        assert_int_equal(k.params[i].kind, FG_KPARAM_TENSOR);
        writes += k.params[i].writes;
        reads += !k.params[i].writes;
    }
    assert_int_equal(writes, 1);
    assert_int_equal(reads, 3);
    assert_int_equal(k.block[0], 128);
    assert_int_equal(k.grid[0], 1);   /* 25 pixels */
    assert_int_equal(k.grid[1], 1);   /* 4 channels in one tile */
    fg_kernel_free(&k);
}

static const char add_graph[] =
    "graph: addrelu\nseed: 1\ndtype: fp16\nlayout: NHWC\ninputs:\n"
    "  - { name: a, shape: [2, 3, 4, 5] }\n  - { name: b, shape: [3, 1, 1] }\n"
    "nodes:\n"
    "  - { name: s, op: add, inputs: [a, b] }\n"
    "  - { name: r, op: leaky_relu, inputs: [s], attrs: { alpha: 0.25 } }\n"
    "outputs: [r]\n";

static void test_golden_pointwise(void **state)
{
    fixture *f = *state;
    fg_kernel k;
    emit_golden(f->ctx, add_graph, 0, "add_act_f16_nhwc.cu", &k);
    assert_non_null(strstr(k.source, "const fg_half *a;"));
    assert_non_null(strstr(k.source, "0.25f"));
    assert_null(strstr(k.source, "fg_load4"));   /* b broadcasts: no vector path */
    fg_kernel_free(&k);
}

static const char mm_graph[] =
    "graph: mm\nseed: 1\ndtype: bf16\ninputs:\n  - { name: a, shape: [5, 24] }\n  - { name: r, shape: [5, 1] }\n"
    "weights:\n  - { name: w, shape: [24, 9] }\n"
    "nodes:\n"
    "  - { name: mm, op: matmul, inputs: [a, w] }\n"
    "  - { name: y, op: add, inputs: [mm, r] }\n"
    "outputs: [y]\n";

static void test_golden_gemm_tc(void **state)
{
    fixture *f = *state;
    fg_kernel k;
    emit_golden(f->ctx, mm_graph, 0, "matmul_add_bf16.cu", &k);
    assert_non_null(strstr(k.source, "fg_mma_16816_bf16"));
    assert_non_null(strstr(k.source, "fg_load(p.r + row)"));   /* (M, 1) broadcast */
    fg_kernel_free(&k);
}

static const char pool_graph[] =
    "graph: pool\nseed: 1\nlayout: NHWC\ninputs:\n  - { name: x, shape: [1, 2, 7, 7] }\n"
    "nodes:\n"
    "  - { name: mp, op: max_pool2d, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
    "outputs: [mp]\n";

static void test_golden_pool_unspecialized(void **state)
{
    fixture *f = *state;
    fg_graph *g = NULL;
    fg_plan *p = plan_of(f->ctx, pool_graph, &g);
    fg_kernel k;
    fg_emit_opts o = {.specialize = 0};
    assert_int_equal(fg_emit_group(f->ctx, p, 0, &o, &k), FG_OK);
    check_golden("max_pool_nhwc_unspecialized.cu", k.source);
    assert_non_null(strstr(k.source, "rule:      single op"));
    int i64 = 0;
    for (int i = 0; i < k.nparams; i++)
        if (k.params[i].kind == FG_KPARAM_I64) {
            i64++;
            if (strcmp(k.params[i].name, "dim_OH") == 0)
                assert_int_equal(k.params[i].value, 4);
        }
    assert_true(i64 >= 8);
    fg_kernel_free(&k);
    /* specialized: no scalar parameters, shapes as constants */
    o.specialize = 1;
    assert_int_equal(fg_emit_group(f->ctx, p, 0, &o, &k), FG_OK);
    for (int i = 0; i < k.nparams; i++)
        assert_int_equal(k.params[i].kind, FG_KPARAM_TENSOR);
    assert_non_null(strstr(k.source, "const fg_i64 OH = 4;"));
    fg_kernel_free(&k);
    fg_plan_free(p);
    fg_graph_free(g);
}

/* Every {{NAME}} / section name of each kernel template is declared, and
 * every declared placeholder is used. */
static void test_template_placeholders(void **state)
{
    (void)state;
    const char *const *files = fg_template_files();
    int nfiles = 0;
    for (; *files; files++, nfiles++) {
        const char *text = fg_template_text(*files);
        assert_non_null(text);
        const char *const *decl = fg_template_placeholders(*files);
        assert_non_null(decl);
        for (const char *s = strstr(text, "{{"); s; s = strstr(s + 2, "{{")) {
            const char *q = s + 2;
            if (*q == '#' || *q == '^' || *q == '/')
                q++;
            const char *e = strstr(q, "}}");
            assert_non_null(e);
            int found = 0;
            for (int i = 0; decl[i]; i++)
                found |= strlen(decl[i]) == (size_t)(e - q) && memcmp(decl[i], q, (size_t)(e - q)) == 0;
            if (!found)
                fail_msg("%s: unknown placeholder {{%.*s}}", *files, (int)(e - q), q);
        }
        for (int i = 0; decl[i]; i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "{{%s}}", decl[i]);
            char sec[64];
            snprintf(sec, sizeof sec, "{{#%s}}", decl[i]);
            if (!strstr(text, tag) && !strstr(text, sec))
                fail_msg("%s: declared placeholder %s is unused", *files, decl[i]);
        }
    }
    assert_true(nfiles >= 6);
    assert_non_null(fg_template_text("prelude.cuh"));
    assert_null(fg_template_text("no_such.cuh"));
}

static void test_render(void **state)
{
    fixture *f = *state;
    fg_emitter em = {0};
    em.ctx = f->ctx;
    fg_em_set(&em, "A", "alpha");
    fg_em_set(&em, "ON", "1");
    fg_em_set(&em, "OFF", "0");
    fg_em_set(&em, "EMPTY", "%s", "");
    fg_buf out = {0};
    assert_int_equal(fg_em_render(&em, "t", "x={{A}};\n{{#ON}}\non\n{{/ON}}\n{{#OFF}}\noff\n{{/OFF}}\n"
                                            "{{^OFF}}\nnot off\n{{/OFF}}\n  {{EMPTY}}\nend\n", &out),
                     FG_OK);
    assert_string_equal(out.s, "x=alpha;\non\nnot off\nend\n");
    fg_buf_free(&out);
    /* a placeholder without a value is an error, not an empty string */
    assert_int_equal(fg_em_render(&em, "t", "{{MISSING}}\n", &out), FG_ERR_INTERNAL);
    assert_true(tu_has_error(f->ctx, "no value for placeholder {{MISSING}}"));
    fg_buf_free(&out);
    assert_int_equal(fg_em_render(&em, "t", "{{#ON}}\nx\n", &out), FG_ERR_INTERNAL);
    fg_buf_free(&out);
    for (int i = 0; i < em.nvars; i++)
        free(em.vars[i].value);
    fg_context_clear_errors(f->ctx);
}

static void test_unknown_template(void **state)
{
    fixture *f = *state;
    fg_graph *g = NULL;
    fg_plan *p = plan_of(f->ctx, conv_graph, &g);
    /* the planner only assigns registered templates: anything else is a bug */
    p->groups[0].template_name = "conv2";
    fg_kernel k;
    assert_int_equal(fg_emit_group(f->ctx, p, 0, NULL, &k), FG_ERR_INTERNAL);
    assert_null(k.source);
    assert_true(tu_has_error(f->ctx, "goldrules/rules.yaml:2:"));
    assert_true(tu_has_error(f->ctx, "group 0 has no known template ('conv2')"));
    fg_context_clear_errors(f->ctx);
    /* a template that cannot compute the group is an error too */
    p->groups[0].template_name = "gemm";
    assert_int_equal(fg_emit_group(f->ctx, p, 0, NULL, &k), FG_ERR_INPUT);
    assert_true(tu_has_error(f->ctx, "template gemm does not compute conv2d nodes"));
    fg_context_clear_errors(f->ctx);
    assert_int_equal(fg_emit_group(f->ctx, p, 7, NULL, &k), FG_ERR_INPUT);
    fg_context_clear_errors(f->ctx);
    fg_plan_free(p);
    fg_graph_free(g);
}

static void test_deps_hash(void **state)
{
    fixture *f = *state;
    fg_graph *g = NULL;
    fg_plan *p = plan_of(f->ctx, conv_graph, &g);
    fg_kernel k1, k2;
    assert_int_equal(fg_emit_group(f->ctx, p, 0, NULL, &k1), FG_OK);
    int r = p->groups[0].rule;
    assert_true(r >= 0);
    uint64_t saved = f->ctx->rules[r]->file_hash;
    f->ctx->rules[r]->file_hash ^= 1;
    assert_int_equal(fg_emit_group(f->ctx, p, 0, NULL, &k2), FG_OK);
    f->ctx->rules[r]->file_hash = saved;
    assert_false(k1.deps_hash.lo == k2.deps_hash.lo && k1.deps_hash.hi == k2.deps_hash.hi);
    assert_string_not_equal(k1.source, k2.source);   /* the header names the deps hash */
    fg_kernel_free(&k1);
    fg_kernel_free(&k2);
    fg_plan_free(p);
    fg_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_conv),
        cmocka_unit_test(test_name_by_content),
        cmocka_unit_test(test_golden_pointwise),
        cmocka_unit_test(test_golden_gemm_tc),
        cmocka_unit_test(test_golden_pool_unspecialized),
        cmocka_unit_test(test_template_placeholders),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_unknown_template),
        cmocka_unit_test(test_deps_hash),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
