/* test_hook.c -- Lua hooks: marshalling, the four hook kinds, the sandbox,
 * the budgets and the error reports (hook.c, hook_sandbox.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"
#include "testutil.h"

/* A hand-built graph: conv2d(x, w, b) -> y (NHWC), relu(y) -> z; one group
 * holding both, made by rule "conv_relu". */
typedef struct fixture {
    fg_context *ctx;
    char *dir;
    fg_opdef conv, relu;
    fg_graph *g;
    fg_group grp;
    fg_loc site;
} fixture;

static int add_tensor(fg_graph *g, const char *name, int rank, const int64_t *shape, int weight)
{
    fg_tensor *t = &g->tensors[g->ntensors];
    t->name = name;
    t->dtype = FG_DTYPE_F32;
    t->rank = rank;
    memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
    t->producer = -1;
    t->is_weight = weight;
    if (weight) {
        int64_t n = 1;
        for (int i = 0; i < rank; i++)
            n *= shape[i];
        t->data = fg_xmalloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            t->data[i] = (float)(i + 1);
    }
    return g->ntensors++;
}

static fixture *fx_new(void)
{
    fixture *fx = fg_xcalloc(1, sizeof *fx);
    fg_context *ctx = fx->ctx = tu_ctx_empty();
    fx->dir = tu_tmpdir();

    fg_opdef *c = &fx->conv;
    c->name = fg_intern(ctx, "conv2d");
    c->kind = FG_OPK_CONV2D;
    c->ninputs = 3;
    c->inputs[0].name = fg_intern(ctx, "x");
    c->inputs[1].name = fg_intern(ctx, "w");
    c->inputs[2].name = fg_intern(ctx, "bias");
    c->inputs[2].optional = 1;
    const char *an[] = {"stride", "groups", "alpha", "relu", "pad_mode"};
    const fg_attr_type at[] = {FG_ATTR_INTS, FG_ATTR_INT, FG_ATTR_FLOAT, FG_ATTR_BOOL, FG_ATTR_STRING};
    c->nattrs = 5;
    for (int i = 0; i < 5; i++) {
        c->attrs[i].name = fg_intern(ctx, an[i]);
        c->attrs[i].type = at[i];
    }
    fg_opdef *r = &fx->relu;
    r->name = fg_intern(ctx, "relu");
    r->kind = FG_OPK_POINTWISE;
    r->ninputs = 1;
    r->inputs[0].name = fg_intern(ctx, "x");

    fg_graph *g = fx->g = fg_xcalloc(1, sizeof *g);
    g->name = "tiny";
    g->tensors = fg_xcalloc(8, sizeof *g->tensors);
    g->tensors_cap = 8;
    g->nodes = fg_xcalloc(4, sizeof *g->nodes);
    g->nodes_cap = 4;
    const int64_t xs[] = {1, 8, 16, 16}, ws[] = {4, 8, 3, 3}, bs[] = {4}, ys[] = {1, 4, 16, 16};
    int x = add_tensor(g, fg_intern(ctx, "x"), 4, xs, 0);
    int w = add_tensor(g, fg_intern(ctx, "conv.w"), 4, ws, 1);
    int b = add_tensor(g, fg_intern(ctx, "conv.b"), 1, bs, 1);
    int y = add_tensor(g, fg_intern(ctx, "y"), 4, ys, 0);
    int z = add_tensor(g, fg_intern(ctx, "z"), 4, ys, 0);
    g->tensors[x].is_input = 1;
    g->tensors[y].layout = FG_LAYOUT_NHWC;
    g->tensors[z].is_output = 1;

    fg_node *n0 = &g->nodes[g->nnodes++];
    n0->name = fg_intern(ctx, "conv");
    n0->op = c;
    n0->ninputs = 3;
    n0->inputs[0] = x;
    n0->inputs[1] = w;
    n0->inputs[2] = b;
    n0->output = y;
    n0->attrs[0] = (fg_attr_value){.type = FG_ATTR_INTS, .n = 2, .ints = {1, 1}};
    n0->attrs[1] = (fg_attr_value){.type = FG_ATTR_INT, .i = 1};
    n0->attrs[2] = (fg_attr_value){.type = FG_ATTR_FLOAT, .f = 0.5};
    n0->attrs[3] = (fg_attr_value){.type = FG_ATTR_BOOL, .i = 1};
    n0->attrs[4] = (fg_attr_value){.type = FG_ATTR_STRING, .s = fg_intern(ctx, "same")};
    fg_node *n1 = &g->nodes[g->nnodes++];
    n1->name = fg_intern(ctx, "act");
    n1->op = r;
    n1->ninputs = 1;
    n1->inputs[0] = y;
    n1->output = z;

    fg_rule *rule = fg_xcalloc(1, sizeof *rule);
    rule->name = fg_intern(ctx, "conv_relu");
    assert_int_equal(fg_ctx_add_rule(ctx, rule), FG_OK);
    fx->grp = (fg_group){.rule = 0, .nnodes = 2, .nodes = {0, 1}, .anchor = 0, .template_name = "conv2d",
                         .output = z};
    fx->site = (fg_loc){fg_intern(ctx, "rules/x.yaml"), 12, 3};
    return fx;
}

static void fx_free(fixture *fx)
{
    for (int i = 0; i < fx->g->ntensors; i++)
        free(fx->g->tensors[i].data);
    free(fx->g->tensors);
    free(fx->g->nodes);
    free(fx->g);
    fg_context_free(fx->ctx);
    tu_rmtree(fx->dir);
    free(fx->dir);
    free(fx);
}

static const char good_hooks[] =
    "-- good hooks\n"
    "function is_small(node)\n"                                          /* 2 */
    "  return node.output.shape[2] <= 4 and node.attrs.groups == 1\n"
    "end\n"
    "function is_big(node)\n"
    "  return node.inputs[1].shape[2] > 100\n"
    "end\n"
    "function check_attrs(node)\n"
    "  local a = node.attrs\n"
    "  return math.type(a.groups) == 'integer' and a.alpha == 0.5 and math.type(a.alpha) == 'float'\n"
    "     and a.relu == true and #a.stride == 2 and a.stride[1] == 1 and a.pad_mode == 'same'\n"
    "     and node.inputs[1].dtype == 'fp32' and node.output.layout == 'NHWC' and node.op == 'conv2d'\n"
    "     and node.name == 'conv' and #node.inputs == 3 and node.inputs[3].input == 'bias'\n"
    "     and node.inputs[2].weight == true and node.inputs[2].data == nil\n"
    "     and #node.inputs[2].shape == 4 and node.inputs[2].shape[4] == 3\n"
    "end\n"
    "function double_weights(group)\n"
    "  local conv = group.nodes[group.anchor]\n"
    "  local w = conv.inputs[2]\n"
    "  local out = {}\n"
    "  for i, v in ipairs(w.data) do out[i] = v * 2 end\n"
    "  return { [w.name] = out }\n"
    "end\n"
    "function relu_epilogue(group)\n"
    "  return 'v = v > 0.0f ? v : 0.0f; /* ' .. group.rule .. ' ' .. group.template .. ' '\n"
    "         .. #group.nodes .. ' ' .. group.output.name .. ' */'\n"
    "end\n"
    "function tiles(group)\n"
    "  local k = group.nodes[1].output.shape[2]\n"
    "  return { tile_m = 64, tile_n = k * 8.0, tile_k = 16 }\n"
    "end\n"
    "function catches(node)\n"
    "  local ok, e = pcall(error, 'x', 0)\n"
    "  local ok2, e2 = xpcall(function() error('y', 0) end, function(m) return 'h:' .. m end)\n"
    "  return not ok and e == 'x' and ok2 == false and e2 == 'h:y' and select('#', pcall(math.max, 1, 2)) == 2\n"
    "end\n"
    "function busy(node)\n"
    "  local x = 0\n"
    "  for i = 1, 20000 do x = x + i end\n"
    "  return x > 0\n"
    "end\n";

/* Loads the good hooks and the file name/src (if given). */
static fixture *fx_with(const char *name, const char *src, fg_status expect)
{
    fixture *fx = fx_new();
    char *p = tu_write(fx->dir, "hooks.lua", good_hooks);
    fg_status st = fg_hooks_load(fx->ctx, p);
    if (st != FG_OK)
        tu_dump_errors(fx->ctx);
    assert_int_equal(st, FG_OK);
    free(p);
    if (name) {
        p = tu_write(fx->dir, name, src);
        st = fg_hooks_load(fx->ctx, p);
        if (st != expect)
            tu_dump_errors(fx->ctx);
        assert_int_equal(st, expect);
        free(p);
    }
    return fx;
}

static int predicate(fixture *fx, const char *hook, int node, fg_status expect)
{
    int r = -1;
    fg_status st = fg_hook_predicate(fx->ctx, hook, fx->site, fx->g, node, &r);
    if (st != expect)
        tu_dump_errors(fx->ctx);
    assert_int_equal(st, expect);
    return r;
}

/* The state still works after a failure: a good hook gives its answer. */
static void still_works(fixture *fx)
{
    assert_int_equal(predicate(fx, "is_small", 0, FG_OK), 1);
    assert_int_equal(predicate(fx, "check_attrs", 0, FG_OK), 1);
}

static void test_predicate(void **state)
{
    (void)state;
    fixture *fx = fx_with(NULL, NULL, FG_OK);
    assert_true(fg_hooks_has(fx->ctx, "is_small"));
    assert_false(fg_hooks_has(fx->ctx, "nope"));
    assert_non_null(strstr(fg_hooks_file(fx->ctx, "is_small"), "hooks.lua"));
    assert_int_equal(predicate(fx, "is_small", 0, FG_OK), 1);
    assert_int_equal(predicate(fx, "is_big", 0, FG_OK), 0);
    assert_int_equal(predicate(fx, "check_attrs", 0, FG_OK), 1);
    assert_int_equal(predicate(fx, "check_attrs", 1, FG_OK), 0);
    assert_int_equal(predicate(fx, "catches", 0, FG_OK), 1);
    /* the budget is per call: five calls of ~60k instructions under a 200k budget */
    for (int i = 0; i < 5; i++)
        assert_int_equal(predicate(fx, "busy", 0, FG_OK), 1);
    /* a shape change changes the answer */
    fx->g->tensors[3].shape[1] = 64;
    assert_int_equal(predicate(fx, "is_small", 0, FG_OK), 0);
    assert_int_equal(fg_context_error_count(fx->ctx), 0);
    fx_free(fx);
}

static void test_unknown_hook(void **state)
{
    (void)state;
    fixture *fx = fx_with(NULL, NULL, FG_OK);
    predicate(fx, "is_smal", 0, FG_ERR_INPUT);
    assert_true(tu_has_error(fx->ctx, "rules/x.yaml:12:3: error: unknown hook 'is_smal' (did you mean 'is_small'?)"));
    fx_free(fx);
    /* no hook file at all */
    fx = fx_new();
    predicate(fx, "is_small", 0, FG_ERR_INPUT);
    assert_true(tu_has_error(fx->ctx, "unknown hook 'is_small' (no hook file is loaded)"));
    fx_free(fx);
}

static void test_fold(void **state)
{
    (void)state;
    fixture *fx = fx_with(NULL, NULL, FG_OK);
    float *old = fx->g->tensors[1].data;
    assert_int_equal(fg_hook_fold(fx->ctx, "double_weights", fx->site, fx->g, &fx->grp), FG_OK);
    float *w = fx->g->tensors[1].data;
    assert_ptr_not_equal(w, old);
    for (int i = 0; i < 4 * 8 * 3 * 3; i++)
        assert_true(w[i] == 2.0f * (float)(i + 1));
    assert_true(fx->g->tensors[2].data[3] == 4.0f); /* the bias is untouched */
    fx_free(fx);
}

static void fold_fails(const char *body, const char *needle)
{
    char src[1024];
    snprintf(src, sizeof src, "function bad_fold(group)\n  %s\nend\n", body);
    fixture *fx = fx_with("fold.lua", src, FG_OK);
    float before = fx->g->tensors[1].data[5];
    assert_int_equal(fg_hook_fold(fx->ctx, "bad_fold", fx->site, fx->g, &fx->grp), FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, needle));
    assert_true(tu_has_error(fx->ctx, "fold.lua:1:"));
    assert_true(tu_has_error(fx->ctx, "(called from rules/x.yaml:12)"));
    assert_true(fx->g->tensors[1].data[5] == before); /* nothing replaced */
    still_works(fx);
    fx_free(fx);
}

static void test_fold_errors(void **state)
{
    (void)state;
    fold_fails("return { ['conv.w'] = {1, 2, 3} }", "hook 'bad_fold' returned 3 values for weight 'conv.w', which has 288");
    fold_fails("return { x = {1} }", "returned values for 'x', which is not a weight of the group (weights: conv.w, conv.b)");
    fold_fails("return { nope = {1} }", "'nope', which is not a weight");
    fold_fails("return { ['conv.b'] = {1, 2, 'x', 4} }", "value 3 of weight 'conv.b' is a string, not a number");
    fold_fails("return { ['conv.b'] = {1, 2, 3, 4}, ['conv.w'] = 5 }", "returned a number for weight 'conv.w'");
    fold_fails("return 7", "hook 'bad_fold' must return a table of weight arrays, got number");
    fold_fails("return { [1] = {} }", "returned a number key");
}

static void test_epilogue(void **state)
{
    (void)state;
    fixture *fx = fx_with("epi.lua", "function num_epi(g)\n  return 1.5\nend\n", FG_OK);
    char *text = NULL;
    assert_int_equal(fg_hook_epilogue(fx->ctx, "relu_epilogue", fx->site, fx->g, &fx->grp, &text), FG_OK);
    assert_string_equal(text, "v = v > 0.0f ? v : 0.0f; /* conv_relu conv2d 2 z */");
    free(text);
    text = NULL;
    assert_int_equal(fg_hook_epilogue(fx->ctx, "num_epi", fx->site, fx->g, &fx->grp, &text), FG_ERR_HOOK);
    assert_null(text);
    assert_true(tu_has_error(fx->ctx, "epi.lua:1:1: error: hook 'num_epi' must return a string, got number"));
    still_works(fx);
    fx_free(fx);
}

static void test_params(void **state)
{
    (void)state;
    const char *bad = "function neg(g)\n  return { tile_m = -4 }\nend\n"
                      "function frac(g)\n  return { tile_n = 1.5 }\nend\n"
                      "function str(g)\n  return { tile_m = '8' }\nend\n";
    fixture *fx = fx_with("params.lua", bad, FG_OK);
    const char *keys[] = {"tile_m", "tile_n", "stages"};
    int64_t vals[] = {1, 1, 3};
    assert_int_equal(fg_hook_params(fx->ctx, "tiles", fx->site, fx->g, &fx->grp, keys, 3, vals), FG_OK);
    assert_int_equal(vals[0], 64);
    assert_int_equal(vals[1], 32); /* 32.0 is an integer value */
    assert_int_equal(vals[2], 3);  /* not returned: left alone */
    assert_int_equal(fx->ctx->nwarnings, 1);
    assert_non_null(strstr(fx->ctx->warnings[0], "unknown parameter 'tile_k'"));

    int64_t v2[] = {7, 7, 7};
    assert_int_equal(fg_hook_params(fx->ctx, "neg", fx->site, fx->g, &fx->grp, keys, 3, v2), FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "params.lua:1:1: error: hook 'neg' returned -4 for 'tile_m'; expected a positive integer"));
    assert_int_equal(fg_hook_params(fx->ctx, "frac", fx->site, fx->g, &fx->grp, keys, 3, v2), FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "params.lua:4:1: error: hook 'frac' returned 1.5 for 'tile_n'"));
    assert_int_equal(fg_hook_params(fx->ctx, "str", fx->site, fx->g, &fx->grp, keys, 3, v2), FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "hook 'str' returned a string for 'tile_m'"));
    assert_true(v2[0] == 7 && v2[1] == 7 && v2[2] == 7);
    still_works(fx);
    fx_free(fx);
}

/* Loads file name (src) with the good hooks, calls hook as a predicate and
 * expects FG_ERR_HOOK with each needle (NULL-terminated) in some error. */
static void call_fails(const char *name, const char *src, const char *hook, ...)
{
    fixture *fx = fx_with(name, src, FG_OK);
    predicate(fx, hook, 0, FG_ERR_HOOK);
    va_list ap;
    va_start(ap, hook);
    for (const char *n; (n = va_arg(ap, const char *));)
        assert_true(tu_has_error(fx->ctx, n));
    va_end(ap);
    still_works(fx);
    fx_free(fx);
}

static void test_runtime_error(void **state)
{
    (void)state;
    call_fails("boom.lua", "function boom(n)\n  local x = 1\n  error('boom')\nend\n", "boom",
               "boom.lua:3:1: error: boom (hook 'boom' called from rules/x.yaml:12)\nstack traceback:",
               "boom.lua:3: in function <", NULL);
    /* error() without a position: located at the raising line anyway */
    call_fails("boom0.lua", "function boom0(n)\n  error('plain', 0)\nend\n", "boom0",
               "boom0.lua:2:1: error: plain (hook 'boom0'", NULL);
    call_fails("num.lua", "function num(n)\n  return 42\nend\n", "num",
               "num.lua:1:1: error: hook 'num' must return a boolean, got number (called from rules/x.yaml:12)", NULL);
    call_fails("nil.lua", "function noret(n)\nend\n", "noret", "must return a boolean, got nil", NULL);
    call_fails("tbl.lua", "function tblerr(n)\n  error({})\nend\n", "tblerr",
               "tbl.lua:2:1: error: (error object is a table value)", NULL);
}

static void test_syntax_error(void **state)
{
    (void)state;
    fixture *fx = fx_with("syntax.lua", "function f(n)\n  return n +\nend\n", FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "syntax.lua:3:1: error: unexpected symbol near 'end'"));
    assert_false(fg_hooks_has(fx->ctx, "f"));
    still_works(fx);
    fx_free(fx);

    /* an error while the file's main chunk runs: nothing registered */
    fx = fx_with("top.lua", "function g(n) return true end\nlocal t = nil\nt.x = 1\n", FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "top.lua:3:1: error: attempt to index a nil value (local 't')"));
    assert_false(fg_hooks_has(fx->ctx, "g"));
    still_works(fx);
    fx_free(fx);

    /* bytecode is refused */
    fx = fx_with("bin.lua", "\x1bLua\x54\x00 rest", FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "attempt to load a binary chunk"));
    still_works(fx);
    fx_free(fx);

    /* an endless main chunk */
    fx = fx_with("spin_top.lua", "local x = 0\nwhile true do x = x + 1 end\n", FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "spin_top.lua:2:1: error: hook file '"));
    assert_true(tu_has_error(fx->ctx, "spin_top.lua' exceeded its instruction budget (200000 steps): infinite loop?"));
    still_works(fx);
    fx_free(fx);

    fx = fx_new();
    assert_int_equal(fg_hooks_load(fx->ctx, "/nonexistent/hooks.lua"), FG_ERR_IO);
    assert_true(tu_has_error(fx->ctx, "/nonexistent/hooks.lua: error: cannot read hook file"));
    fx_free(fx);
}

static void test_budget(void **state)
{
    (void)state;
    const char *budget = "exceeded its instruction budget (200000 steps): infinite loop? (called from rules/x.yaml:12)";
    call_fails("spin.lua", "function spin(n)\n  while true do end\nend\n", "spin",
               "spin.lua:2:1: error: hook 'spin'", budget, NULL);
    call_fails("pspin.lua",
               "function pspin(n)\n  for i = 1, 10 do\n    pcall(function() while true do end end)\n  end\n"
               "  return true\nend\n",
               "pspin", "hook 'pspin' exceeded its instruction budget", "pspin.lua:3:1:", NULL);
    call_fails("pspin2.lua",
               "function pspin2(n)\n  while true do\n    pcall(function() while true do end end)\n  end\nend\n",
               "pspin2", "hook 'pspin2' exceeded its instruction budget", NULL);
    call_fails("xspin.lua",
               "function xspin(n)\n  local ok = xpcall(function() while true do end end,\n"
               "                   function(m) while true do end end)\n  return true\nend\n",
               "xspin", "hook 'xspin' exceeded its instruction budget", NULL);
    call_fails("close.lua",
               "function closer(n)\n  local x <close> = setmetatable({}, {__close = function() while true do end end})\n"
               "  error('x')\nend\n",
               "closer", "hook 'closer' exceeded its instruction budget", NULL);
    /* ends in a tail call of pcall: the stop is still reported */
    call_fails("tail.lua", "function tailspin(n)\n  return pcall(function() while true do end end)\nend\n",
               "tailspin", "hook 'tailspin' exceeded its instruction budget", NULL);
}

static void test_memory(void **state)
{
    (void)state;
    call_fails("hog.lua",
               "function hog(n)\n  local t = {}\n  while true do t[#t+1] = string.rep('x', 1e6) end\nend\n", "hog",
               "hog.lua:3:1: error: hook 'hog' exceeded its memory limit (16 MiB) (called from rules/x.yaml:12)", NULL);
    call_fails("rep.lua", "function rep(n)\n  local s = string.rep('x', 1e9)\n  return true\nend\n", "rep",
               "rep.lua:2:1: error: hook 'rep' exceeded its memory limit (16 MiB)", NULL);
    /* past Lua's own string size limit: an ordinary located error */
    call_fails("rep12.lua", "function rep12(n)\n  local s = string.rep('x', 1e12)\n  return true\nend\n", "rep12",
               "rep12.lua:2:1: error: resulting string too large (hook 'rep12'", NULL);
    call_fails("prep.lua",
               "function prep(n)\n  local ok = pcall(string.rep, 'x', 1e9)\n"
               "  local t = {}\n  for i = 1, 100 do\n    pcall(function() while true do t[#t+1] = ('y'):rep(1e5) end end)\n"
               "    t = {}\n  end\n  return true\nend\n",
               "prep", "hook 'prep' exceeded its memory limit (16 MiB)", "prep.lua:", NULL);
    call_fails("grow.lua", "function grow(n)\n  local s = 'x'\n  while true do s = s .. s end\nend\n", "grow",
               "grow.lua:3:1: error: hook 'grow' exceeded its memory limit", NULL);
}

static void test_memory_default(void **state)
{
    (void)state;
    char *saved = getenv("FUSEGEN_HOOK_MEMORY") ? fg_xstrdup(getenv("FUSEGEN_HOOK_MEMORY")) : NULL;
    unsetenv("FUSEGEN_HOOK_MEMORY");
    call_fails("rep.lua", "function rep(n)\n  return #string.rep('x', 1e9) > 0\nend\n", "rep",
               "rep.lua:2:1: error: hook 'rep' exceeded its memory limit (64 MiB)", NULL);
    if (saved)
        setenv("FUSEGEN_HOOK_MEMORY", saved, 1);
    free(saved);
}

static void test_sandbox(void **state)
{
    (void)state;
    call_fails("os.lua", "function sh(n)\n  os.execute('touch /tmp/fusegen-hook-escaped')\n  return true\nend\n",
               "sh", "os.lua:2:1: error: attempt to index a nil value (global 'os') (hook 'sh' called from rules/x.yaml:12)",
               NULL);
    call_fails("io.lua", "function rd(n)\n\n  local f = io.open('/etc/passwd')\n  return true\nend\n", "rd",
               "io.lua:3:1: error: attempt to index a nil value (global 'io')", NULL);
    call_fails("req.lua", "function req(n)\n  local m = require('os')\n  return true\nend\n", "req",
               "req.lua:2:1: error: attempt to call a nil value (global 'require')", NULL);
    call_fails("load.lua", "function ld(n)\n  return load('return true')()\nend\n", "ld",
               "load.lua:2:1: error: attempt to call a nil value (global 'load')", NULL);
    call_fails("dofile.lua", "function df(n)\n  dofile('/etc/hosts')\nend\n", "df",
               "dofile.lua:2:1: error: attempt to call a nil value (global 'dofile')", NULL);
    call_fails("dbg.lua", "function dbg(n)\n  debug.sethook()\nend\n", "dbg", "dbg.lua:2:1:", "(global 'debug')", NULL);
    call_fails("gc.lua", "function gc(n)\n  collectgarbage('stop')\nend\n", "gc", "(global 'collectgarbage')", NULL);
    call_fails("pkg.lua", "function pkg(n)\n  return package.loadlib('x', 'y')\nend\n", "pkg", "(global 'package')", NULL);
    call_fails("smt.lua", "function smt(n)\n  getmetatable('').__index.rep = nil\nend\n", "smt", "smt.lua:2:1:", NULL);
    call_fails("gcmt.lua", "function fin(n)\n  setmetatable({}, {__gc = function() while true do end end})\nend\n",
               "fin", "gcmt.lua:2:1: error: __gc metamethods are not allowed in hooks", NULL);
    FILE *f = fopen("/tmp/fusegen-hook-escaped", "r");
    assert_null(f);

    /* each file has its own globals and library copies */
    const char *two = "string.upper = nil\nshared = 1\nfunction peek(n)\n  return shared == 1\nend\n";
    fixture *fx = fx_with("iso.lua", two, FG_OK);
    assert_int_equal(predicate(fx, "peek", 0, FG_OK), 1);
    char *p = tu_write(fx->dir, "iso2.lua", "function peek2(n)\n  return shared == nil and string.upper('a') == 'A'\nend\n");
    assert_int_equal(fg_hooks_load(fx->ctx, p), FG_OK);
    free(p);
    assert_int_equal(predicate(fx, "peek2", 0, FG_OK), 1);
    fx_free(fx);
}

/* The shipped hook file loads and answers on a hand-built node. */
static void test_shipped_file(void **state)
{
    (void)state;
    fixture *fx = fx_new();
    assert_int_equal(fg_hooks_load(fx->ctx, tu_src("rules/conv_hooks.lua")), FG_OK);
    assert_true(fg_hooks_has(fx->ctx, "is_depthwise"));
    assert_int_equal(predicate(fx, "is_depthwise", 0, FG_OK), 0);
    fx->g->nodes[0].attrs[1].i = 8; /* groups == input channels */
    assert_int_equal(predicate(fx, "is_depthwise", 0, FG_OK), 1);
    fx_free(fx);
}

static void test_duplicate(void **state)
{
    (void)state;
    fixture *fx = fx_with("dup.lua", "function other(n) return true end\n\nfunction is_small(n)\n  return false\nend\n",
                          FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "dup.lua:3:1: error: hook 'is_small' is defined twice: in "));
    assert_true(tu_has_error(fx->ctx, "hooks.lua:2 and in "));
    /* the first definition stays; the file's other hooks are loaded */
    assert_non_null(strstr(fg_hooks_file(fx->ctx, "is_small"), "hooks.lua"));
    assert_int_equal(predicate(fx, "other", 0, FG_OK), 1);
    still_works(fx);
    fx_free(fx);
}

int main(void)
{
    setenv("FUSEGEN_HOOK_STEPS", "200000", 1);
    setenv("FUSEGEN_HOOK_MEMORY", "16M", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicate),     cmocka_unit_test(test_unknown_hook),
        cmocka_unit_test(test_fold),          cmocka_unit_test(test_fold_errors),
        cmocka_unit_test(test_epilogue),      cmocka_unit_test(test_params),
        cmocka_unit_test(test_runtime_error), cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_budget),        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_default), cmocka_unit_test(test_sandbox),
        cmocka_unit_test(test_duplicate),     cmocka_unit_test(test_shipped_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
