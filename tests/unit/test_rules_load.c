/* test_rules_load.c -- loading op definitions and fusion rules from a rules
 * directory (fg_rules_load): the parsed structures of good files, and one
 * case per kind of bad input, each checking the located message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "testutil.h"

/* A small vocabulary, written into each test's directory as ops.yaml. */
static const char *const OPS =
    "# ops used by the tests\n"
    "op: conv2d\n"
    "kind: conv2d\n"
    "inputs: [x, weight, bias?]\n"
    "attrs:\n"
    "  stride:   { type: ints, len: 2, default: [1, 1] }\n"
    "  padding:  { type: ints, len: 2, default: [0, 0] }\n"
    "  dilation: { type: ints, len: 2, default: [1, 1] }\n"
    "  groups:   { type: int, default: 1 }\n"
    "---\n"
    "- op: relu\n"
    "  kind: pointwise\n"
    "  expr: \"x > 0 ? x : 0\"\n"
    "- op: leaky_relu\n"
    "  kind: pointwise\n"
    "  attrs: { alpha: { type: float, default: 0.01 } }\n"
    "  expr: \"x > 0 ? x : alpha * x\"\n"
    "- op: prelu\n"
    "  kind: pointwise\n"
    "  inputs: [x, { name: slope, per_channel: true }]\n"
    "  expr: \"x > 0 ? x : slope * x\"\n"
    "- op: add\n"
    "  kind: pointwise\n"
    "  inputs: [a, b]\n"
    "  expr: a + b\n"
    "---\n"
    "op: batch_norm\n"
    "kind: batch_norm\n"
    "inputs: [x, gamma, beta, mean, var]\n"
    "attrs:\n"
    "  eps: { type: float, default: 1e-5 }\n"
    "  training: { type: bool, default: false }\n"
    "expr: \"(x - mean) * rsqrt(var + eps) * gamma + beta\"\n"
    "---\n"
    "op: maxpool\n"
    "kind: pool2d\n"
    "reduce: max\n"
    "attrs:\n"
    "  kernel: { type: ints, len: 2 }\n"
    "  stride: { type: ints, len: 2, default: [1, 1] }\n"
    "  padding: { type: ints, len: 2, default: [0, 0] }\n";

static const char *const RULE_OK =
    "rule: conv_bn_act\n"
    "priority: 30\n"
    "dtypes: [fp32, fp16]\n"
    "layouts: NHWC\n"
    "match:\n"
    "  - conv: { op: conv2d }\n"
    "  - bn:   { op: batch_norm, where: \"training == false\" }\n"
    "  - act:  { op: [relu, leaky_relu, prelu], optional: true }\n"
    "fold: [ bn_into_conv ]\n"
    "kernel:\n"
    "  template: conv2d\n"
    "  epilogue:\n"
    "    - bias: conv.bias\n"
    "    - apply: act\n"
    "---\n"
    "rule: pw_chain\n"
    "match:\n"
    "  - first: { kind: pointwise }\n"
    "  - rest:  { kind: [pointwise], repeat: true, where: \"alpha > 0\" }\n"
    "kernel: { template: pointwise, epilogue: [ { apply: rest } ] }\n";

/* Writes ops.yaml and name=text into a fresh directory; returns it. */
static char *rules_dir(const char *name, const char *text)
{
    char *dir = tu_tmpdir();
    free(tu_write(dir, "ops.yaml", OPS));
    if (name)
        free(tu_write(dir, name, text));
    return dir;
}

/* Loads a directory holding OPS plus one file and expects failure with the
 * given message (prefixed by the file name). */
static fg_context *load_bad(const char *name, const char *text, const char *needle)
{
    char *dir = rules_dir(name, text);
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    char want[1024];
    snprintf(want, sizeof want, "%s/%s", dir, needle);
    if (st != FG_ERR_INPUT || !tu_has_error(ctx, want)) {
        fprintf(stderr, "expected: %s\n", want);
        tu_dump_errors(ctx);
    }
    assert_int_equal(st, FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, want));
    tu_rmtree(dir);
    free(dir);
    return ctx;
}

static void expect_bad(const char *name, const char *text, const char *needle)
{
    fg_context_free(load_bad(name, text, needle));
}

static const fg_rule *rule_named(const fg_context *ctx, const char *name)
{
    int i = fg_ctx_find_rule(ctx, name);
    assert_true(i >= 0);
    return ctx->rules[i];
}

static void test_good_ops(void **state)
{
    (void)state;
    char *dir = rules_dir(NULL, NULL);
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(ctx->nops, 7);

    const fg_opdef *conv = fg_ctx_find_op(ctx, "conv2d");
    assert_non_null(conv);
    assert_int_equal(conv->kind, FG_OPK_CONV2D);
    assert_int_equal(conv->ninputs, 3);
    assert_string_equal(conv->inputs[2].name, "bias");
    assert_true(conv->inputs[2].optional);
    assert_false(conv->inputs[1].optional);
    assert_int_equal(conv->nattrs, 4);
    assert_string_equal(conv->attrs[0].name, "stride");
    assert_int_equal(conv->attrs[0].type, FG_ATTR_INTS);
    assert_int_equal(conv->attrs[0].lens, 1u << 2);
    assert_int_equal(conv->attrs[0].def.n, 2);
    assert_int_equal(conv->attrs[0].def.ints[1], 1);
    assert_false(conv->attrs[0].required);
    assert_int_equal(conv->attrs[3].def.i, 1);
    assert_int_equal(conv->loc.line, 2);
    assert_null(conv->expr);

    /* file_hash is the hash of the defining file's bytes */
    size_t len;
    char *path = fg_path_join(dir, "ops.yaml");
    char *text = fg_read_file(path, &len);
    assert_true(conv->file_hash == fg_hash64(text, len));
    free(text);
    free(path);

    const fg_opdef *lr = fg_ctx_find_op(ctx, "leaky_relu");
    assert_non_null(lr);
    assert_int_equal(lr->ninputs, 1); /* default inputs: [x] */
    assert_string_equal(lr->inputs[0].name, "x");
    assert_int_equal(lr->attrs[0].type, FG_ATTR_FLOAT);
    assert_true(lr->attrs[0].def.f == 0.01);
    assert_non_null(lr->expr);
    assert_string_equal(lr->expr_src, "x > 0 ? x : alpha * x");
    double vals[2] = {-2.0, 0.5};
    assert_true(fg_expr_eval(lr->expr, vals) == -1.0);

    const fg_opdef *pr = fg_ctx_find_op(ctx, "prelu");
    assert_true(pr->inputs[1].per_channel);
    assert_false(pr->inputs[0].per_channel);

    const fg_opdef *bn = fg_ctx_find_op(ctx, "batch_norm");
    assert_int_equal(bn->ninputs, 5);
    assert_true(bn->attrs[0].def.f == 1e-5);
    assert_int_equal(bn->attrs[1].type, FG_ATTR_BOOL);
    assert_int_equal(bn->attrs[1].def.i, 0);
    assert_non_null(bn->expr);

    const fg_opdef *mp = fg_ctx_find_op(ctx, "maxpool");
    assert_string_equal(mp->reduce, "max");
    assert_true(mp->attrs[0].required);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_good_rules(void **state)
{
    (void)state;
    /* the rule file sorts before ops.yaml: op definitions load first anyway */
    char *dir = rules_dir("a_rules.yaml", RULE_OK);
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(ctx->nrules, 2);
    const fg_rule *r = rule_named(ctx, "conv_bn_act");
    assert_int_equal(r->priority, 30);
    assert_int_equal(r->dtypes, (1u << FG_DTYPE_F32) | (1u << FG_DTYPE_F16));
    assert_int_equal(r->layouts, 1u << FG_LAYOUT_NHWC);
    assert_int_equal(r->nsteps, 3);
    assert_string_equal(r->steps[0].name, "conv");
    assert_int_equal(r->steps[0].nops, 1);
    assert_ptr_equal(r->steps[0].ops[0], fg_ctx_find_op(ctx, "conv2d"));
    assert_false(r->steps[0].optional);
    assert_non_null(r->steps[1].where);
    assert_string_equal(r->steps[1].where_src, "training == false");
    assert_int_equal(r->steps[1].nwhere_vars, 2);
    assert_string_equal(r->steps[1].where_vars[0], "eps");
    assert_string_equal(r->steps[1].where_vars[1], "training");
    double vals[2] = {1e-5, 0};
    assert_true(fg_expr_eval(r->steps[1].where, vals) != 0);
    vals[1] = 1;
    assert_true(fg_expr_eval(r->steps[1].where, vals) == 0);
    assert_int_equal(r->steps[2].nops, 3);
    assert_true(r->steps[2].optional);
    assert_int_equal(r->steps[2].loc.line, 8);
    assert_int_equal(r->steps[2].loc.col, 5);
    assert_int_equal(r->nfolds, 1);
    assert_string_equal(r->folds[0].name, "bn_into_conv");
    assert_false(r->folds[0].is_hook);
    assert_string_equal(r->template_name, "conv2d");
    assert_int_equal(r->nepilogue, 2);
    assert_int_equal(r->epilogue[0].kind, FG_EPI_BIAS);
    assert_int_equal(r->epilogue[0].step, 0);
    assert_int_equal(r->epilogue[0].input, 2);
    assert_int_equal(r->epilogue[1].kind, FG_EPI_APPLY);
    assert_int_equal(r->epilogue[1].step, 2);
    assert_null(r->hook_file);
    assert_int_equal(r->loc.line, 1);
    assert_true(strstr(r->loc.file, "a_rules.yaml") != NULL);

    const fg_rule *p = rule_named(ctx, "pw_chain");
    assert_int_equal(p->priority, 0);
    assert_int_equal(p->dtypes, (1u << FG_DTYPE_COUNT) - 1);
    assert_int_equal(p->steps[0].kinds, 1u << FG_OPK_POINTWISE);
    assert_int_equal(p->steps[0].nops, 0);
    assert_true(p->steps[1].repeat);
    /* where over a kind: the attribute names of every pointwise op */
    assert_int_equal(p->steps[1].nwhere_vars, 1);
    assert_string_equal(p->steps[1].where_vars[0], "alpha");
    assert_int_equal(p->loc.line, 16);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_hooks_file(void **state)
{
    (void)state;
    char *dir = rules_dir("r.yaml",
                          "rule: small_conv\n"
                          "hooks: h.lua\n"
                          "match:\n"
                          "  - conv: { op: conv2d, where_hook: is_small }\n"
                          "fold: [ my_fold ]\n"
                          "kernel:\n"
                          "  template: conv2d\n"
                          "  params: tiles\n"
                          "  epilogue: [ { hook: epi } ]\n");
    free(tu_write(dir, "h.lua",
                  "function is_small(node) return true end\n"
                  "function my_fold(group) return {} end\n"
                  "function tiles(group) return { bm = 64 } end\n"
                  "function epi(group) return 'v = v;' end\n"));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const fg_rule *r = rule_named(ctx, "small_conv");
    assert_string_equal(r->steps[0].where_hook, "is_small");
    assert_int_equal(r->nfolds, 1);
    assert_true(r->folds[0].is_hook);
    assert_string_equal(r->tile_hook, "tiles");
    assert_int_equal(r->epilogue[0].kind, FG_EPI_HOOK);
    assert_string_equal(r->epilogue[0].hook, "epi");
    assert_non_null(r->hook_file);
    assert_true(strstr(r->hook_file, "h.lua") != NULL);
    size_t len;
    char *path = fg_path_join(dir, "r.yaml");
    char *text = fg_read_file(path, &len);
    assert_true(r->file_hash != fg_hash64(text, len)); /* the hook file joins the hash */
    free(text);
    free(path);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_malformed_yaml(void **state)
{
    (void)state;
    expect_bad("bad.yaml", "op: relu\nkind: [pointwise\nexpr: x\n",
               "bad.yaml:3:5: error: did not find expected ',' or ']' (while parsing a flow sequence at line 2)");
}

static void test_tab_indentation(void **state)
{
    (void)state;
    expect_bad("tabs.yaml", "op: leaky\nattrs:\n\talpha: { type: float }\n",
               "tabs.yaml:3:1: error: found character that cannot start any token (tab indentation is not allowed "
               "in YAML)");
}

static void test_unknown_op_in_rule(void **state)
{
    (void)state;
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: con2d }\nkernel: { template: conv2d }\n",
               "r.yaml:3:14: error: unknown op 'con2d' (did you mean 'conv2d'?)");
}

static void test_unknown_kind(void **state)
{
    (void)state;
    expect_bad("o.yaml", "op: foo\nkind: pointwize\nexpr: x\n",
               "o.yaml:2:7: error: unknown op kind 'pointwize' (did you mean 'pointwise'?)");
    expect_bad("o.yaml", "op: foo\nkind: xyzzy\nexpr: x\n",
               "o.yaml:2:7: error: unknown op kind 'xyzzy' (expected pointwise, conv2d, matmul, batch_norm, pool2d, "
               "global_pool, flatten, reshape, transpose, concat, softmax, lrn, reduce, layer_norm, resize, "
               "conv_transpose2d, slice, expand, pad or gather)");
}

static void test_unknown_key(void **state)
{
    (void)state;
    expect_bad("o.yaml", "op: foo\nkidn: pointwise\nexpr: x\n",
               "o.yaml:2:1: error: unknown key 'kidn' in an op definition (did you mean 'kind'?)");
}

static void test_wrong_default_type(void **state)
{
    (void)state;
    expect_bad("o.yaml", "op: foo\nkind: pointwise\nattrs:\n  n: { type: int, default: 1.5 }\nexpr: x * n\n",
               "o.yaml:4:28: error: default of attribute 'n' must be int, got float 1.5");
}

static void test_bad_attr_type(void **state)
{
    (void)state;
    expect_bad("o.yaml", "op: foo\nkind: pointwise\nattrs:\n  n: { type: integer }\nexpr: x * n\n",
               "o.yaml:4:14: error: unknown attribute type 'integer'");
}

static void test_pointwise_needs_expr(void **state)
{
    (void)state;
    expect_bad("o.yaml", "op: foo\nkind: pointwise\n", "o.yaml:1:1: error: pointwise op 'foo' has no `expr`");
}

static void test_bad_expression(void **state)
{
    (void)state;
    /* the error points inside the quoted string: col of the quote + 1 + offset */
    fg_context *ctx = load_bad("o.yaml", "op: foo\nkind: pointwise\nexpr: \"x * bogus\"\n", "o.yaml:3:");
    assert_true(tu_has_error(ctx, "o.yaml:3:12: error:"));
    assert_true(tu_has_error(ctx, "bogus"));
    fg_context_free(ctx);
}

static void test_priority_type(void **state)
{
    (void)state;
    expect_bad("r.yaml", "rule: r\npriority: high\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n",
               "r.yaml:2:11: error: priority must be an integer, got string 'high'");
}

static void test_missing_match(void **state)
{
    (void)state;
    expect_bad("r.yaml", "rule: lonely\nkernel: { template: conv2d }\n",
               "r.yaml:1:1: error: rule 'lonely' has no `match`");
}

static void test_duplicate_rule(void **state)
{
    (void)state;
    char *dir = rules_dir("a.yaml", "rule: twice\nmatch: [ { c: { op: conv2d } } ]\nkernel: { template: conv2d }\n");
    free(tu_write(dir, "b.yaml", "\n\nrule: twice\nmatch: [ { c: { op: relu } } ]\nkernel: { template: pointwise }\n"));
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, dir), FG_ERR_INPUT);
    char want[1024];
    snprintf(want, sizeof want, "%s/b.yaml:3:1: error: duplicate rule 'twice' (first defined at %s/a.yaml:1)", dir,
             dir);
    if (!tu_has_error(ctx, want))
        tu_dump_errors(ctx);
    assert_true(tu_has_error(ctx, want));
    assert_int_equal(ctx->nrules, 1);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_duplicate_op(void **state)
{
    (void)state;
    expect_bad("p.yaml", "op: relu\nkind: pointwise\nexpr: x\n", "p.yaml:1:1: error: duplicate op 'relu' (first defined at");
}

/* `onnx:` keys: an element-wise op only, an operator name, one op per operator. */
static void test_onnx_key(void **state)
{
    (void)state;
    expect_bad("o.yaml",
               "op: r1\nkind: pointwise\nonnx: Relu\nexpr: \"max(x, 0)\"\n---\n"
               "op: r2\nkind: pointwise\nonnx: Relu\nexpr: \"max(x, 0)\"\n",
               "o.yaml:6:1: error: op 'r2': ONNX operator 'Relu' is already imported onto op 'r1' (defined at");
    expect_bad("o.yaml", "op: my_norm\nkind: softmax\nonnx: MyNorm\n",
               "o.yaml:3:1: error: `onnx` is only for pointwise and batch_norm ops");
    expect_bad("o.yaml", "op: bad_name\nkind: pointwise\nonnx: \"Re lu\"\nexpr: x\n",
               "o.yaml:3:7: error: `onnx` must name an ONNX operator");
    expect_bad("o.yaml", "op: bad_type\nkind: pointwise\nonnx: [Relu]\nexpr: x\n", "o.yaml:3:7: error:");
}

static void test_bad_where(void **state)
{
    (void)state;
    fg_context *ctx = load_bad("r.yaml",
                               "rule: r\nmatch:\n  - c: { op: conv2d, where: \"grups == 1\" }\n"
                               "kernel: { template: conv2d }\n",
                               "r.yaml:3:");
    assert_true(tu_has_error(ctx, "r.yaml:3:30: error:"));
    assert_true(tu_has_error(ctx, "grups"));
    assert_true(tu_has_error(ctx, "groups")); /* suggestion */
    fg_context_free(ctx);
}

static void test_unknown_epilogue_step(void **state)
{
    (void)state;
    expect_bad("r.yaml",
               "rule: r\nmatch:\n  - c: { op: conv2d }\n  - act: { op: relu }\n"
               "kernel:\n  template: conv2d\n  epilogue:\n    - apply: actt\n",
               "r.yaml:8:14: error: unknown step 'actt' in rule 'r' (did you mean 'act'?)");
}

static void test_epilogue_checks(void **state)
{
    (void)state;
    expect_bad("r.yaml",
               "rule: r\nmatch:\n  - c: { op: conv2d }\nkernel:\n  template: conv2d\n  epilogue:\n    - bias: c.bais\n",
               "r.yaml:7:13: error: op 'conv2d' of step 'c' has no input 'bais' (did you mean 'bias'?)");
    expect_bad("r.yaml",
               "rule: r\nmatch:\n  - c: { op: conv2d }\n  - d: { op: conv2d }\n"
               "kernel:\n  template: conv2d\n  epilogue:\n    - apply: d\n",
               "r.yaml:8:14: error: `apply: d`: step 'd' must match only pointwise or batch_norm ops");
    expect_bad("r.yaml",
               "rule: r\nmatch:\n  - c: { op: conv2d }\nkernel:\n  template: conv2d\n  epilogue:\n    - hook: nope\n",
               "r.yaml:7:13: error: unknown hook 'nope'");
}

static void test_step_checks(void **state)
{
    (void)state;
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d, kind: conv2d }\nkernel: { template: conv2d }\n",
               "r.yaml:3:22: error: step 'c' gives both `op` and `kind`; use one");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { optional: true }\nkernel: { template: conv2d }\n",
               "r.yaml:3:5: error: step 'c' needs `op` or `kind`");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: relu, optional: true }\nkernel: { template: pointwise }\n",
               "r.yaml:3:30: error: the first step of a rule ('c') cannot be optional");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d, repeat: true }\nkernel: { template: conv2d }\n",
               "r.yaml:3:30: error: `repeat` is only for pointwise steps");
    expect_bad("r.yaml",
               "rule: r\nmatch:\n  - c: { op: conv2d }\n  - c: { op: relu }\nkernel: { template: conv2d }\n",
               "r.yaml:4:5: error: duplicate step 'c' in rule 'r'");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv3d }\n",
               "r.yaml:4:21: error: unknown template 'conv3d' (did you mean 'conv2d'?)");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d }\nfold: [bn_into_conb]\nkernel: { template: conv2d }\n",
               "r.yaml:4:8: error: unknown fold 'bn_into_conb' (did you mean 'bn_into_conv'?)");
    expect_bad("r.yaml", "rule: r\nhooks: missing.lua\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n",
               "r.yaml:2:8: error: hooks file 'missing.lua' not found");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d }\n", "r.yaml:1:1: error: rule 'r' has no `kernel`");
    expect_bad("r.yaml", "rule: r\ndtypes: [fp16, fp33]\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n",
               "r.yaml:2:16: error: unknown dtype 'fp33' (did you mean 'fp32'?)");
}

static void test_wrong_value_types(void **state)
{
    (void)state;
    /* a value of the wrong shape anywhere gives a located error, never a crash */
    expect_bad("r.yaml", "rule: r\nmatch: conv2d\nkernel: { template: conv2d }\n",
               "r.yaml:2:8: error: match must be a sequence, got string 'conv2d'");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: [conv2d]\nkernel: { template: conv2d }\n",
               "r.yaml:3:8: error: a match step must be a mapping, got a sequence");
    expect_bad("r.yaml", "rule: r\nmatch:\n  - c: { op: conv2d }\nkernel: [conv2d]\n",
               "r.yaml:4:9: error: kernel must be a mapping, got a sequence");
    expect_bad("r.yaml", "rule: [r]\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n",
               "r.yaml:1:7: error: rule name must be a name, got a sequence");
    expect_bad("o.yaml", "op: foo\nkind: pointwise\ninputs: { x: 1 }\nexpr: x\n",
               "o.yaml:3:9: error: inputs must be a sequence, got a mapping");
    expect_bad("o.yaml", "op: foo\nkind: pointwise\nattrs: [a, b]\nexpr: x\n",
               "o.yaml:3:8: error: attrs must be a mapping, got a sequence");
    expect_bad("x.yaml", "- just a string\n",
               "x.yaml:1:3: error: expected an op definition (`op:`) or a rule (`rule:`) mapping, got string");
    expect_bad("x.yaml", "name: foo\n",
               "x.yaml:1:1: error: expected an op definition (`op:`) or a rule (`rule:`), found neither key");
}

static void test_many_errors_in_one_file(void **state)
{
    (void)state;
    fg_context *ctx = load_bad("r.yaml",
                               "rule: r1\n"
                               "priority: high\n"                         /* 1 */
                               "match:\n"
                               "  - c: { op: con2d }\n"                   /* 2 */
                               "kernel: { template: conv2d }\n"
                               "---\n"
                               "rule: r2\n"
                               "match:\n"
                               "  - a: { op: relu, wehre: \"x\" }\n"      /* 3 */
                               "kernel: { template: pointwse }\n"         /* 4 */
                               "---\n"
                               "op: bad\n"
                               "kind: pointwise\n"
                               "attrs: { k: { type: int, default: yes } }\n" /* 5 */
                               "expr: x\n",
                               "r.yaml:2:11: error: priority must be an integer");
    assert_true(tu_has_error(ctx, "r.yaml:4:14: error: unknown op 'con2d'"));
    assert_true(tu_has_error(ctx, "r.yaml:9:20: error: unknown key 'wehre' in a match step (did you mean 'where'?)"));
    assert_true(tu_has_error(ctx, "r.yaml:10:21: error: unknown template 'pointwse' (did you mean 'pointwise'?)"));
    assert_true(tu_has_error(ctx, "r.yaml:14:35: error: default of attribute 'k' must be int, got string 'yes'"));
    assert_true(fg_context_error_count(ctx) >= 5);
    assert_int_equal(ctx->nrules, 0);
    fg_context_free(ctx);
}

static void test_missing_dir(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, "/nonexistent/fusegen/rules"), FG_ERR_IO);
    assert_true(tu_has_error(ctx, "cannot open rules directory /nonexistent/fusegen/rules"));
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_ops),
        cmocka_unit_test(test_good_rules),
        cmocka_unit_test(test_hooks_file),
        cmocka_unit_test(test_malformed_yaml),
        cmocka_unit_test(test_tab_indentation),
        cmocka_unit_test(test_unknown_op_in_rule),
        cmocka_unit_test(test_unknown_kind),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_wrong_default_type),
        cmocka_unit_test(test_bad_attr_type),
        cmocka_unit_test(test_pointwise_needs_expr),
        cmocka_unit_test(test_bad_expression),
        cmocka_unit_test(test_priority_type),
        cmocka_unit_test(test_missing_match),
        cmocka_unit_test(test_duplicate_rule),
        cmocka_unit_test(test_duplicate_op),
        cmocka_unit_test(test_onnx_key),
        cmocka_unit_test(test_bad_where),
        cmocka_unit_test(test_unknown_epilogue_step),
        cmocka_unit_test(test_epilogue_checks),
        cmocka_unit_test(test_step_checks),
        cmocka_unit_test(test_wrong_value_types),
        cmocka_unit_test(test_many_errors_in_one_file),
        cmocka_unit_test(test_missing_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
