/* test_hook.c -- Lua hooks: marshalling, the hook kinds, the sandbox, the
 * budgets and the error reports (hook.c, hook_sandbox.c, hook_lib.c); the
 * ways around the budgets through library functions (string.rep, table.move,
 * backtracking patterns, __len), epilogue hooks that try to inject code, and
 * the bounded pattern functions against stock Lua's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "expr.h"
#include "hook.h"
#include "hook_sandbox.h"
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
    "  if group.rule == 'conv_relu' and group.template == 'conv2d' and #group.nodes == 2\n"
    "     and group.output.name == 'z' then\n"
    "    return 'v > 0 ? v : 0 * c'\n"
    "  end\n"
    "  return 'v'\n"
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

/* Sets a budget variable for the contexts created until restore_env. */
static char *set_env(const char *name, const char *value)
{
    char *saved = getenv(name) ? fg_xstrdup(getenv(name)) : NULL;
    setenv(name, value, 1);
    return saved;
}

static void restore_env(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
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

/* The message of the latest error. */
static const char *last_error(const fg_context *ctx)
{
    int n = fg_context_error_count(ctx);
    assert_true(n > 0);
    return fg_context_error(ctx, n - 1)->message;
}

static void test_epilogue(void **state)
{
    (void)state;
    fixture *fx = fx_with("epi.lua", "function num_epi(g)\n  return 1.5\nend\n", FG_OK);
    fg_expr *x = NULL;
    assert_int_equal(fg_hook_epilogue(fx->ctx, "relu_epilogue", fx->site, fx->g, &fx->grp, &x), FG_OK);
    assert_non_null(x);
    /* an expression over v (variable 0) and c (variable 1), checked by value */
    const double neg[] = {-2.0, 3.0}, pos[] = {2.5, 3.0};
    assert_true(fg_expr_eval(x, neg) == 0.0);
    assert_true(fg_expr_eval(x, pos) == 2.5);
    assert_true(fg_expr_uses(x, 0) && fg_expr_uses(x, 1));
    fg_buf b = {0};
    fg_expr_emit_c(x, (const char *[]){"v", "(float)c"}, &b);
    assert_string_equal(b.s, "((v > 0.0f) ? v : (0.0f * ((float)c)))");
    fg_buf_free(&b);
    fg_expr_free(x);
    x = NULL;
    assert_int_equal(fg_hook_epilogue(fx->ctx, "num_epi", fx->site, fx->g, &fx->grp, &x), FG_ERR_HOOK);
    assert_null(x);
    assert_true(tu_has_error(fx->ctx, "epi.lua:1:1: error: hook 'num_epi' must return an expression string over v "
                                      "and c, got number (called from rules/x.yaml:12)"));
    still_works(fx);
    fx_free(fx);
}

/* Epilogue hooks that try to put code into the kernel: closing the function
 * to define a host constructor, including a file, a newline out of a
 * comment, calls and names that are not in the expression language.  Each
 * is refused at the hook's own line, naming the rule that called it, with
 * the text quoted escaped (no raw newline reaches the message). */
static void test_epilogue_injection(void **state)
{
    (void)state;
    static const char src[] =
        "function ctor(g)\n"                                                                  /* 1 */
        "  return 'v; } __attribute__((constructor)) void x(){ system(\"id\"); } float y(){ return v'\n"
        "end\n"
        "function incl(g) return '#include \"/etc/passwd\"' end\n"                           /* 4 */
        "function nl(g) return 'v\\n#include </etc/passwd>\\n' end\n"                     /* 5 */
        "function call(g) return 'system(1)' end\n"                                           /* 6 */
        "function member(g) return 'v + p.weight[0]' end\n"                                   /* 7 */
        "function cmt(g) return 'v /* x */' end\n"                                            /* 8 */
        "function long(g) return string.rep('v + ', 2000) .. 'v' end\n"                       /* 9 */
        "function deep(g) return string.rep('(', 300) .. 'v' .. string.rep(')', 300) end\n"   /* 10 */
        "function nul(g) return 'v\\0; evil()' end\n"                                        /* 11 */
        "function name(g) return 'x * v' end\n"                                               /* 12 */
        "function ok(g) return 'max(v, 0) + 0 * c' end\n";                                    /* 13 */
    fixture *fx = fx_with("inj.lua", src, FG_OK);
    static const struct {
        const char *hook;
        int line;
        const char *needle;
    } cases[] = {
        {"ctor", 1, "unexpected character ';' in expression (at byte 2)"},
        {"incl", 4, "unexpected character '#' in expression"},
        {"nl", 5, "unexpected character '#' in expression"},
        {"call", 6, "unknown function 'system' in expression"},
        {"member", 7, "unexpected character '.' in expression"},
        {"cmt", 8, "expected a value, got '*'"},
        {"long", 9, "returned an expression of 8001 bytes (at most 4096)"},
        {"deep", 10, "nested too deeply"},
        {"nul", 11, "returned a string containing a NUL byte"},
        {"name", 12, "unknown variable 'x' in expression"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fg_expr *x = (fg_expr *)&x;   /* must come back NULL */
        fg_status st = fg_hook_epilogue(fx->ctx, cases[i].hook, fx->site, fx->g, &fx->grp, &x);
        if (st != FG_ERR_HOOK)
            tu_dump_errors(fx->ctx);
        assert_int_equal(st, FG_ERR_HOOK);
        assert_null(x);
        const fg_error *e = fg_context_error(fx->ctx, fg_context_error_count(fx->ctx) - 1);
        assert_non_null(strstr(e->file, "inj.lua"));
        assert_int_equal(e->line, cases[i].line);
        if (!strstr(e->message, cases[i].needle) || !strstr(e->message, "(called from rules/x.yaml:12)"))
            fail_msg("hook %s: %s", cases[i].hook, e->message);
        assert_null(strchr(e->message, '\n'));
    }
    assert_non_null(strstr(last_error(fx->ctx), "'x * v', which is not an expression over v and c"));
    /* the injection text is quoted escaped */
    for (int i = 0; i < fg_context_error_count(fx->ctx); i++) {
        const char *m = fg_context_error(fx->ctx, i)->message;
        if (strstr(m, "hook 'nl'"))
            assert_non_null(strstr(m, "'v\\n#include </etc/passwd>\\n'"));
    }
    fg_expr *x = NULL;
    assert_int_equal(fg_hook_epilogue(fx->ctx, "ok", fx->site, fx->g, &fx->grp, &x), FG_OK);
    const double vals[] = {-1.0, 7.0};
    assert_true(fg_expr_eval(x, vals) == 0.0);
    fg_expr_free(x);
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
    /* library work and allocation are charged to the step budget too: give
     * these enough steps to fill 16 MiB */
    char *steps = set_env("FUSEGEN_HOOK_STEPS", "100000000");
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
    restore_env("FUSEGEN_HOOK_STEPS", steps);
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Ways around the step budget through one long C call: each ends quickly
 * (a budget of 200000 steps) with a located error, and the state keeps
 * working.  Before the library functions were bounded, every one of these
 * ran for hours or forever. */
static void test_library_bypasses(void **state)
{
    (void)state;
    const char *budget = "exceeded its instruction budget (200000 steps)";
    static const struct {
        const char *body;   /* line 2 of the hook */
        const char *needle;
    } cases[] = {
        {"string.rep('x', math.maxinteger)", "resulting string too large"},
        {"string.rep('', math.maxinteger, 'x')", "resulting string too large"},
        {"while true do local s = string.rep('x', 100000) end", NULL},
        {"table.move({}, 1, math.maxinteger - 1, 1)", NULL},
        {"table.move({1, 2, 3}, 1, 1e12, 1, {})", NULL},
        {"table.move({}, 1, math.maxinteger, 2)", "destination wrap around"},
        {"string.find(string.rep('a', 300), string.rep('a.-', 5) .. 'b')", NULL},
        {"string.match(string.rep('a', 300), string.rep('a.-', 5) .. 'b')", NULL},
        {"string.gsub(string.rep('a', 300), string.rep('a.-', 5) .. 'b', '')", NULL},
        {"for w in string.gmatch(string.rep('a', 300), string.rep('a.-', 5) .. 'b') do end", NULL},
        {"string.find(string.rep('a', 100000), '.-.-b')", NULL},
        {"string.find(string.rep('a', 100000), '(a*)*b')", NULL},
        {"local s = string.rep('a', 5000) for i = 1, 1e9 do s:find(string.rep('a', 2500) .. 'b', 1, true) end", NULL},
        {"table.concat(setmetatable({}, {__len = function() return math.maxinteger end}))",
         "invalid value (nil) at index 1 in table for 'concat'"},
        {"local t = {} for i = 1, 30000 do t[i] = 'x' end while true do table.concat(t) end", NULL},
        {"table.insert(setmetatable({}, {__len = function() return math.maxinteger // 2 end}), 1, 0)", NULL},
        {"table.remove(setmetatable({}, {__len = function() return math.maxinteger // 2 end}), 1)", NULL},
        {"table.sort(setmetatable({}, {__len = function() return 1 << 30 end}))", "attempt to compare two nil values"},
        {"local t = {} for i = 1, 20000 do t[i] = -i end while true do table.sort(t) end", NULL},
        {"local t = {} for i = 1, 1e9 do table.insert(t, 1, i) end", NULL},
        {"local s = string.rep('x', 1 << 20) while true do local u = s:upper() end", NULL},
        {"local s = string.rep('x', 1 << 20) while true do local t = s .. s end", NULL},
        {"local f = string.rep('x', 1 << 20) while true do string.pack(f) end", NULL},
        {"local s = string.rep('\\x80', 1 << 20) local f = utf8.codes(s) while true do pcall(f, s, 0) end",
         NULL},
        {"pcall(string.find, string.rep('a', 300), string.rep('a.-', 5) .. 'b')", NULL},
        {"table.unpack({}, 1, 1e7)", "too many results to unpack"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[512], name[32];
        snprintf(src, sizeof src, "function bypass(n)\n  %s\n  return true\nend\n", cases[i].body);
        snprintf(name, sizeof name, "bypass%zu.lua", i);
        fixture *fx = fx_with(name, src, FG_OK);
        double t0 = now_s();
        fg_status st = fg_hook_predicate(fx->ctx, "bypass", fx->site, fx->g, 0, &(int){0});
        double dt = now_s() - t0;
        if (st != FG_ERR_HOOK)
            fail_msg("case %zu (%s): status %d", i, cases[i].body, (int)st);
        char where[64];
        snprintf(where, sizeof where, "%s:2:1: error: ", name);
        const char *needle = cases[i].needle ? cases[i].needle : budget;
        if (!tu_has_error(fx->ctx, where) || !tu_has_error(fx->ctx, needle)) {
            tu_dump_errors(fx->ctx);
            fail_msg("case %zu (%s): expected %s ... %s", i, cases[i].body, where, needle);
        }
        if (dt > 5.0)
            fail_msg("case %zu (%s) took %.1f s", i, cases[i].body, dt);
        still_works(fx);
        fx_free(fx);
    }
    /* string.rep of the empty string is empty at once, whatever the count */
    fixture *fx = fx_with("rep0.lua", "function rep0(n)\n  return #string.rep('', math.maxinteger) == 0\n"
                                      "    and string.rep('ab', 3, ',') == 'ab,ab,ab' and string.rep('x', 0) == ''\n"
                                      "end\n", FG_OK);
    assert_int_equal(predicate(fx, "rep0", 0, FG_OK), 1);
    fx_free(fx);
}

/* A hook file's main chunk is bounded like a call. */
static void test_main_chunk_bypass(void **state)
{
    (void)state;
    double t0 = now_s();
    fixture *fx = fx_with("chunk.lua", "local s = string.rep('a', 300)\nstring.find(s, string.rep('a.-', 5) .. 'b')\n",
                          FG_ERR_HOOK);
    assert_true(now_s() - t0 < 5.0);
    assert_true(tu_has_error(fx->ctx, "chunk.lua:2:1: error: hook file '"));
    assert_true(tu_has_error(fx->ctx, "chunk.lua' exceeded its instruction budget (200000 steps)"));
    still_works(fx);
    fx_free(fx);
}

/* With an (almost) unlimited step budget the wall clock still stops a call. */
static void test_time_limit(void **state)
{
    (void)state;
    char *steps = set_env("FUSEGEN_HOOK_STEPS", "1000000000000");
    char *ms = set_env("FUSEGEN_HOOK_TIMEOUT_MS", "200");
    double t0 = now_s();
    call_fails("slow.lua", "function slow(n)\n  while true do end\nend\n", "slow",
               "slow.lua:2:1: error: hook 'slow' exceeded its time limit (200 ms) (called from rules/x.yaml:12)", NULL);
    call_fails("slowpat.lua",
               "function slowpat(n)\n  local s = string.rep('a', 300)\n"
               "  return string.find(s, string.rep('a.-', 5) .. 'b') ~= nil\nend\n",
               "slowpat", "slowpat.lua:3:1: error: hook 'slowpat' exceeded its time limit (200 ms)", NULL);
    assert_true(now_s() - t0 < 10.0);
    restore_env("FUSEGEN_HOOK_TIMEOUT_MS", ms);
    restore_env("FUSEGEN_HOOK_STEPS", steps);
}

/* A weight too large for the memory cap: building the fold hook's argument
 * fails the call (it used to be unlimited, and a failed allocation there
 * aborted the process). */
static void test_argument_memory(void **state)
{
    (void)state;
    char *mem = set_env("FUSEGEN_HOOK_MEMORY", "1M");
    fixture *fx = fx_with(NULL, NULL, FG_OK);
    fg_tensor *w = &fx->g->tensors[1];
    const int64_t big[] = {1000, 100, 1, 3};   /* 300000 values: about 5 MiB as a Lua table */
    free(w->data);
    memcpy(w->shape, big, sizeof big);
    w->data = fg_xcalloc(300000, sizeof(float));
    assert_int_equal(fg_hook_fold(fx->ctx, "double_weights", fx->site, fx->g, &fx->grp), FG_ERR_HOOK);
    assert_true(tu_has_error(fx->ctx, "hooks.lua:"));
    assert_true(tu_has_error(fx->ctx, "the arguments of hook 'double_weights' exceed the hook memory limit (1 MiB)"));
    assert_true(w->data[7] == 0.0f);
    still_works(fx);
    fx_free(fx);
    restore_env("FUSEGEN_HOOK_MEMORY", mem);
}

/* ---- the pattern functions against stock Lua --------------------------- */

/* run(s, p) describes what find, match, gmatch and gsub give for subject s
 * and pattern p (errors included), as one string. */
static const char diff_chunk[] =
    "local function pack(ok, ...)\n"
    "  local t = {tostring(ok)}\n"
    "  for i = 1, select('#', ...) do\n"
    "    local v = (select(i, ...))\n"
    "    t[#t + 1] = type(v) .. ':' .. (type(v) == 'table' and '{}' or tostring(v))\n"
    "  end\n"
    "  return table.concat(t, ',')\n"
    "end\n"
    "function run(s, p, init)\n"
    "  local out = {}\n"
    "  out[1] = pack(pcall(string.find, s, p, init))\n"
    "  out[2] = pack(pcall(string.match, s, p, init))\n"
    "  out[3] = pack(pcall(string.gsub, s, p, '<%0>'))\n"
    "  out[4] = pack(pcall(string.gsub, s, p, '[%1]', 2))\n"
    "  out[5] = pack(pcall(string.gsub, s, p, function(a, b) return b and (a .. '/' .. tostring(b)) or nil end))\n"
    "  out[6] = pack(pcall(string.gsub, s, p, {a = 'A', [''] = 'E', b = false}))\n"
    "  out[7] = pack(pcall(function()\n"
    "    local t = {}\n"
    "    for a, b in string.gmatch(s, p, init) do\n"
    "      t[#t + 1] = tostring(a) .. '|' .. tostring(b)\n"
    "      if #t > 50 then break end\n"
    "    end\n"
    "    return table.concat(t, ';')\n"
    "  end))\n"
    "  out[8] = pack(pcall(string.find, s, p, init, true))\n"
    "  return table.concat(out, '\\n')\n"
    "end\n"
    /* calls of wrapped and replaced functions, right and wrong */
    "function calls()\n"
    "  local t = {}\n"
    "  local function add(...) t[#t + 1] = pack(...) end\n"
    "  add(pcall(string.rep, 'x'))\n"
    "  add(pcall(string.rep, 'ab', 3, '-'))\n"
    "  add(pcall(function() return ('x'):rep(-1) end))\n"
    "  add(pcall(function() return ('x'):rep(2.5) end))\n"
    "  add(pcall(string.rep, {}, 2))\n"
    "  add(pcall(string.sub))\n"
    "  add(pcall(string.sub, 'hello', 2, -2))\n"
    "  add(pcall(function() local s = 'abc' return s:byte(1, -1) end))\n"
    "  add(pcall(string.format, '%d', 'x'))\n"
    "  add(pcall(string.format, '%5.2f|%q|%s', 3.14159, 'a\\nb', nil))\n"
    "  add(pcall(table.insert, 1, 2))\n"
    "  add(pcall(table.insert, {}, 5, 1))\n"
    "  add(pcall(table.insert, {1, 2}, 1, 0, 9))\n"
    "  add(pcall(function() local x = {3, 1, 2} table.insert(x, 2, 7) table.remove(x, 1) table.sort(x)\n"
    "    return table.concat(x, ',') end))\n"
    "  add(pcall(table.concat, {{}}))\n"
    "  add(pcall(table.move, {1, 2, 3}, 1, 3, 2))\n"
    "  add(pcall(table.move, {}, 1, math.maxinteger, 2))\n"
    "  add(pcall(table.unpack, {1, 2, 3}, 2))\n"
    "  add(pcall(table.unpack, {}, 1, 1e7))\n"
    "  add(pcall(table.remove, {}, 3))\n"
    "  add(pcall(utf8.char, -1))\n"
    "  add(pcall(utf8.len, 'h\\xe9llo'))\n"
    "  add(pcall(function() local r = {} for p, c in utf8.codes('h\\u{e9}!') do r[#r + 1] = p .. ':' .. c end\n"
    "    return table.concat(r, ' ') end))\n"
    "  add(pcall(math.floor, 'a'))\n"
    "  add(pcall(math.max))\n"
    "  add(pcall(tostring))\n"
    "  add(pcall(tonumber, 'ff', 16))\n"
    "  add(pcall(select, 0))\n"
    "  add(pcall(select, -1, 'a', 'b'))\n"
    "  add(pcall(error, 'msg', 0))\n"
    "  add(pcall(assert, false))\n"
    "  add(pcall(string.gsub, 'abc', 'b', true))\n"
    "  add(pcall(string.gsub, 'abc', '(b)', {b = {}}))\n"
    "  add(pcall(string.gsub, 'abc', 'b', '%'))\n"
    "  add(pcall(string.find, 'abc', 'b', 1.5))\n"
    "  add(pcall(string.gmatch, 'abc'))\n"
    "  add(pcall(string.char, 256))\n"
    "  return table.concat(t, '\\n')\n"
    "end\n";

/* Runs run(s, p, init) in L (whose run is at global or, for the sandbox, in
 * the environment on the registry ref env_ref); returns a malloc'd result. */
static char *run_in(lua_State *L, fg_sandbox *sb, int env_ref, const char *s, size_t ls, const char *p, size_t lp,
                    long init)
{
    if (sb) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, env_ref);
        lua_getfield(L, -1, "run");
        lua_remove(L, -2);
    } else {
        lua_getglobal(L, "run");
    }
    lua_pushlstring(L, s, ls);
    lua_pushlstring(L, p, lp);
    lua_pushinteger(L, init);
    char *r;
    if (sb) {
        fg_sandbox_failure f;
        if (fg_sandbox_call(sb, 3, 1, 0, &f) != 0) {
            r = fg_xstrdup(f.message ? f.message : "?");
            fg_sandbox_failure_clear(&f);
            return r;
        }
    } else if (lua_pcall(L, 3, 1, 0) != LUA_OK) {
        r = fg_xstrdup(lua_tostring(L, -1));
        lua_pop(L, 1);
        return r;
    }
    r = fg_xstrdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    return r;
}

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* The reimplemented find, match, gmatch and gsub give what stock Lua 5.4
 * gives (results and error messages) on hand-picked and on random subjects
 * and patterns. */
static void test_patterns_match_stock_lua(void **state)
{
    (void)state;
    lua_State *ref = luaL_newstate();
    luaL_openlibs(ref);
    assert_int_equal(luaL_loadbuffer(ref, diff_chunk, strlen(diff_chunk), "@diff.lua"), LUA_OK);
    assert_int_equal(lua_pcall(ref, 0, 0, 0), LUA_OK);

    fg_sandbox_limits lim = {.steps = 100000000, .memory = 64 << 20, .timeout_ms = 60000};
    fg_sandbox *sb = fg_sandbox_new(&lim);
    lua_State *L = fg_sandbox_state(sb);
    fg_sandbox_failure f;
    assert_int_equal(fg_sandbox_load(sb, diff_chunk, strlen(diff_chunk), "@diff.lua", &f), 0);
    fg_sandbox_push_env(sb);
    lua_pushvalue(L, -1);
    int env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_setupvalue(L, -2, 1);
    assert_int_equal(fg_sandbox_call(sb, 0, 0, 0, &f), 0);

    static const char *const fixed[][2] = {
        {"hello world", "o w"}, {"hello", "l+"}, {"a.b", "."}, {"abc", ""}, {"key = value", "(%w+)%s*=%s*(%w+)"},
        {"  trim  ", "^%s*(.-)%s*$"}, {"hello", "()ll()"}, {"THE (quick) fox", "%((%a+)%)"},
        {"f(a(b)c)d", "%b()"}, {"THE (quick) fox", "%f[%a]%a+"}, {"hello world", "o"}, {"abc", "%w"},
        {"hello world", "(%w+)"}, {"hello", "l"}, {"x = 1, y = 2", "(%w+) = (%w+)"}, {"one two  three", "%a+"},
        {"k1=v1, k2=v2", "(%w+)=(%w+)"}, {"abc", "x*"}, {"[]", "[]]"}, {"a-b", "[a-]+"}, {"a-b", "[^a-]"},
        {"2024-01-15", "(%d+)-(%d+)-(%d+)"}, {"hello", ".-(l+)"}, {"a+b", "+"}, {"hello", "^(h)(e)"},
        {"hello", "^e"}, {"x$", "x$"}, {"x$y", "x%$"}, {"say \"hi\" now", "([\"'])(.-)%1"}, {"abc", "()b"},
        {"a", "%"}, {"a", "[a"}, {"a", "(a"}, {"a", "a)"}, {"aaa", "%1"}, {"aaa", "(a)%2"}, {"aaa", "%0"},
        {"ab", "%bx"}, {"ab", "%f"}, {"ab", "%fa"}, {"aXb", "%u"}, {"a1 b2", "%a%d"}, {"\x01\x7f a", "%c+"},
        {"a.b", "%."}, {"a%b", "%%"}, {"abc", "[%a-z]"}, {"a]b", "[]]"}, {"a^b", "[%^]"}, {"a^b", "^^"},
        {"THE END", "%f[%w]%w+%f[%W]"}, {"aaa", "a-$"}, {"aaa", "a-b"}, {"aaab", "a-b"}, {"abab", "(ab)+"},
        {"x", "(()(())x)"}, {"abc", "[b-]"}, {"((a))", "%b()"}, {"abc", "a?b?c?d?"}, {"", "^$"}, {"", ".*"}, {"x", "x*$"}, {"hello", "l*"},
    };
    int n = 0, bad = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        for (long init = -2; init <= 3; init += 5) {   /* -2 and 3 */
            const char *s = fixed[i][0], *p = fixed[i][1];
            size_t ls = strlen(s), lp = strlen(p);
            char *want = run_in(ref, NULL, 0, s, ls, p, lp, init == 3 ? 1 : init);
            char *got = run_in(L, sb, env_ref, s, ls, p, lp, init == 3 ? 1 : init);
            if (strcmp(want, got) != 0 && bad++ < 5)
                print_error("pattern '%s' on '%s':\n  stock:   %s\n  sandbox: %s\n", p, s, want, got);
            n++;
            free(want);
            free(got);
        }
    }
    /* embedded NUL bytes, in the subject and in the pattern */
    static const struct {
        const char *s, *p;
        size_t ls, lp;
    } nul[] = {{"a\0b", "%z", 3, 2}, {"a\0b", "[\0]", 3, 3}, {"a\0b", "a\0", 3, 2}, {"a\0b", "\0b", 3, 2}};
    for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
        char *want = run_in(ref, NULL, 0, nul[i].s, nul[i].ls, nul[i].p, nul[i].lp, 1);
        char *got = run_in(L, sb, env_ref, nul[i].s, nul[i].ls, nul[i].p, nul[i].lp, 1);
        if (strcmp(want, got) != 0 && bad++ < 5)
            print_error("NUL case %zu:\n  stock:   %s\n  sandbox: %s\n", i, want, got);
        n++;
        free(want);
        free(got);
    }
    /* random subjects over a small alphabet, random patterns of items */
    static const char *const items[] = {"a", "b", ".", "%a", "%d", "[ab]", "[^a]", "(", ")", "()", "*", "+", "-",
                                        "?", "^", "$", "%b()", "%f[a]", "%1", "[a-c]", "%", "]", "x"};
    static const char subj_chars[] = "aabbc1(). x";
    uint32_t seed = 12345;
    for (int k = 0; k < 4000; k++) {
        char s[16], p[64];
        int ls = (int)(lcg(&seed) % 12);
        for (int i = 0; i < ls; i++)
            s[i] = subj_chars[lcg(&seed) % (sizeof subj_chars - 1)];
        s[ls] = 0;
        p[0] = 0;
        int np = 1 + (int)(lcg(&seed) % 7);
        for (int i = 0; i < np; i++)
            strcat(p, items[lcg(&seed) % (sizeof items / sizeof items[0])]);
        long init = (long)(lcg(&seed) % 5) - 1;
        char *want = run_in(ref, NULL, 0, s, (size_t)ls, p, strlen(p), init);
        char *got = run_in(L, sb, env_ref, s, (size_t)ls, p, strlen(p), init);
        if (strcmp(want, got) != 0 && bad++ < 5)
            print_error("pattern '%s' on '%s' (init %ld):\n  stock:   %s\n  sandbox: %s\n", p, s, init, want, got);
        n++;
        free(want);
        free(got);
    }
    /* the other library functions: results and error messages as stock */
    lua_getglobal(ref, "calls");
    assert_int_equal(lua_pcall(ref, 0, 1, 0), LUA_OK);
    char *want = fg_xstrdup(lua_tostring(ref, -1));
    lua_pop(ref, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, env_ref);
    lua_getfield(L, -1, "calls");
    lua_remove(L, -2);
    assert_int_equal(fg_sandbox_call(sb, 0, 1, 0, &f), 0);
    char *got = fg_xstrdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (strcmp(want, got) != 0) {
        fprintf(stderr, "library calls:\n  stock:\n%s\n  sandbox:\n%s\n", want, got);
        bad++;
    }
    free(want);
    free(got);
    if (bad)
        fail_msg("%d of %d pattern cases differ from stock Lua", bad, n);
    fg_sandbox_free(sb);
    lua_close(ref);
}

int main(void)
{
    setenv("FUSEGEN_HOOK_STEPS", "200000", 1);
    setenv("FUSEGEN_HOOK_MEMORY", "16M", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicate),     cmocka_unit_test(test_unknown_hook),
        cmocka_unit_test(test_fold),          cmocka_unit_test(test_fold_errors),
        cmocka_unit_test(test_epilogue),      cmocka_unit_test(test_epilogue_injection),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_runtime_error), cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_budget),        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_default), cmocka_unit_test(test_sandbox),
        cmocka_unit_test(test_duplicate),     cmocka_unit_test(test_shipped_file),
        cmocka_unit_test(test_library_bypasses), cmocka_unit_test(test_main_chunk_bypass),
        cmocka_unit_test(test_time_limit),    cmocka_unit_test(test_argument_memory),
        cmocka_unit_test(test_patterns_match_stock_lua),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
