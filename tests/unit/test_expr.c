/* test_expr.c -- the expression language: parsing, evaluation, error
 * reporting and the C emitter (the emitted text is compiled and run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "testutil.h"

static const char *const V[] = {"x", "y", "z", "alpha", "lo", "hi"};
enum { NV = 6 };

static fg_expr *parse_ok(fg_context *ctx, const char *src)
{
    fg_expr *e = fg_expr_parse(ctx, src, (fg_loc){"t.yaml", 3, 10}, V, NV);
    if (!e) {
        fprintf(stderr, "failed to parse: %s\n", src);
        tu_dump_errors(ctx);
    }
    assert_non_null(e);
    return e;
}

static double eval_src(fg_context *ctx, const char *src, const double *vals)
{
    fg_expr *e = parse_ok(ctx, src);
    double r = fg_expr_eval(e, vals);
    fg_expr_free(e);
    return r;
}

static void assert_close(double got, double want, double rel, const char *what)
{
    int ok = (isnan(want) && isnan(got)) || got == want || fabs(got - want) <= rel * fabs(want);
    if (!ok)
        fprintf(stderr, "%s: got %.17g want %.17g\n", what, got, want);
    assert_true(ok);
}

static void test_precedence(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    const double v[NV] = {2, 3, -4, 0.5, -1, 1};
    static const struct { const char *src; double want; } cases[] = {
        {"1 + 2 * 3", 7},            {"(1 + 2) * 3", 9},          {"10 - 4 - 3", 3},
        {"24 / 4 / 3", 2},           {"-x * y", -6},              {"- -x", 2},
        {"2 * -3", -6},              {"+x", 2},                   {"x - -y", 5},
        {"1 + 2 < 4", 1},            {"x == 2 && y == 3", 1},     {"x == 2 && y == 4 || z < 0", 1},
        {"1 || 0 && 0", 1},          {"!0 + 1", 2},               {"!x", 0},
        {"!!x", 1},                  {"x > y ? x : y", 3},        {"0 ? 1 : 0 ? 2 : 3", 3},
        {"1 ? 0 ? 5 : 6 : 7", 6},    {"x < y ? 10 : 20", 10},     {"x >= 2", 1},
        {"x <= 1.5", 0},             {"x != 2", 0},               {"true", 1},
        {"false || true", 1},        {"1e-5 * 1e5", 1},           {".5 + 3.", 3.5},
        {"2.5E+2", 250},             {"x * y + z * alpha", 4},    {"(x + y) * (z - alpha) / 2", -11.25},
        {"x > 0 ? x : alpha * x", 2}, {"z > 0 ? z : alpha * z", -2},
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++)
        assert_close(eval_src(ctx, cases[i].src, v), cases[i].want, 0, cases[i].src);
    /* batch_norm's inference form, variables bound as the op loader binds them */
    static const char *const bn[] = {"x", "gamma", "beta", "mean", "var", "eps", "training"};
    fg_expr *e = fg_expr_parse(ctx, "(x - mean) * rsqrt(var + eps) * gamma + beta", FG_NOLOC, bn, 7);
    assert_non_null(e);
    const double bv[7] = {1.5, 2, 0.25, 0.5, 4, 1e-5, 0};
    assert_close(fg_expr_eval(e, bv), (1.5 - 0.5) / sqrt(4 + 1e-5) * 2 + 0.25, 1e-15, "batch_norm");
    assert_false(fg_expr_uses(e, 6));
    fg_expr_free(e);
    e = fg_expr_parse(ctx, "training == false", FG_NOLOC, bn, 7);
    assert_non_null(e);
    assert_true(fg_expr_eval(e, bv) == 1.0);
    fg_expr_free(e);
    assert_int_equal(fg_context_error_count(ctx), 0);
    fg_context_free(ctx);
}

static void test_functions(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    static const double pts[] = {-30, -2.5, -1, -0.25, 0, 1e-8, 0.3, 1, 2, 7.5, 50};
    static const struct { const char *src; double (*f)(double); } un[] = {
        {"exp(x)", exp}, {"log(x)", log}, {"log1p(x)", log1p}, {"expm1(x)", expm1}, {"tanh(x)", tanh},
        {"erf(x)", erf}, {"sqrt(x)", sqrt}, {"abs(x)", fabs}, {"floor(x)", floor}, {"ceil(x)", ceil},
    };
    for (size_t k = 0; k < FG_COUNTOF(pts); k++) {
        double v[NV] = {pts[k], 0.75, 3};
        double x = pts[k];
        for (size_t i = 0; i < FG_COUNTOF(un); i++)
            assert_close(eval_src(ctx, un[i].src, v), un[i].f(x), 1e-12, un[i].src);
        assert_close(eval_src(ctx, "rsqrt(x)", v), 1.0 / sqrt(x), 1e-12, "rsqrt");
        assert_close(eval_src(ctx, "sigmoid(x)", v), 1.0 / (1.0 + exp(-x)), 1e-12, "sigmoid");
        assert_close(eval_src(ctx, "min(x, y)", v), fmin(x, 0.75), 1e-12, "min");
        assert_close(eval_src(ctx, "max(x, y)", v), fmax(x, 0.75), 1e-12, "max");
        assert_close(eval_src(ctx, "pow(x, z)", v), pow(x, 3), 1e-12, "pow");
        assert_close(eval_src(ctx, "pow(y, x)", v), pow(0.75, x), 1e-12, "pow2");
    }
    fg_context_free(ctx);
}

/* The shipped activation formulas, against direct C at sample points. */
static const struct act {
    const char *name, *src;
} acts[] = {
    {"relu", "max(x, 0)"},
    {"leaky_relu", "x > 0 ? x : alpha * x"},
    {"relu6", "min(max(x, 0), 6)"},
    {"clip", "min(max(x, lo), hi)"},
    {"sigmoid", "sigmoid(x)"},
    {"tanh", "tanh(x)"},
    {"silu", "x * sigmoid(x)"},
    {"gelu", "0.5 * x * (1 + erf(x * 0.7071067811865476))"},
    {"gelu_tanh", "0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"},
    {"hardswish", "x <= -3 ? 0 : (x >= 3 ? x : x * (x + 3) / 6)"},
    {"hardsigmoid", "min(max(x / 6 + 0.5, 0), 1)"},
    {"elu", "x > 0 ? x : alpha * (exp(x) - 1)"},
    {"softplus", "x > 20 ? x : log1p(exp(x))"},
};

static double act_ref(int i, double x, double alpha, double lo, double hi)
{
    switch (i) {
    case 0: return x > 0 ? x : 0;
    case 1: return x > 0 ? x : alpha * x;
    case 2: return x < 0 ? 0 : x > 6 ? 6 : x;
    case 3: return x < lo ? lo : x > hi ? hi : x;
    case 4: return 1 / (1 + exp(-x));
    case 5: return tanh(x);
    case 6: return x / (1 + exp(-x));
    case 7: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 8: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * pow(x, 3))));
    case 9: return x <= -3 ? 0 : x >= 3 ? x : x * (x + 3) / 6;
    case 10: return x <= -3 ? 0 : x >= 3 ? 1 : x / 6 + 0.5;
    case 11: return x > 0 ? x : alpha * expm1(x);
    default: return x > 20 ? x : log(1 + exp(x));
    }
}

static void test_activations(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    static const double xs[] = {-8, -3, -1.5, -0.1, 0, 0.2, 1, 2.5, 3, 5, 7, 30};
    assert_int_equal(FG_COUNTOF(acts), 13);
    for (int i = 0; i < (int)FG_COUNTOF(acts); i++) {
        fg_expr *e = parse_ok(ctx, acts[i].src);
        for (size_t k = 0; k < FG_COUNTOF(xs); k++) {
            double v[NV] = {xs[k], 0, 0, 0.1, -0.5, 2};
            assert_close(fg_expr_eval(e, v), act_ref(i, xs[k], 0.1, -0.5, 2), 1e-12, acts[i].name);
        }
        fg_expr_free(e);
    }
    fg_context_free(ctx);
}

/* NaN, infinities, signed zeros and huge finite values: min and max
 * propagate NaN, every shipped activation gives NaN for NaN, and none
 * overflows for a large finite input whose result is finite. */
static void test_special_values(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    double v[NV] = {0};
    static const struct { const char *src; double x, y, want; } mm[] = {
        {"max(x, y)", NAN, 1, NAN},   {"max(x, y)", 1, NAN, NAN},   {"min(x, y)", NAN, 1, NAN},
        {"min(x, y)", 1, NAN, NAN},   {"max(x, y)", -INFINITY, NAN, NAN}, {"max(x, y)", 2, 1, 2},
        {"min(x, y)", 2, 1, 1},       {"max(x, y)", -INFINITY, -1e300, -1e300},
        {"min(x, y)", INFINITY, 3, 3},
    };
    for (size_t i = 0; i < FG_COUNTOF(mm); i++) {
        v[0] = mm[i].x, v[1] = mm[i].y;
        assert_close(eval_src(ctx, mm[i].src, v), mm[i].want, 0, mm[i].src);
    }
    /* equal arguments: the first one, so max(-0, 0) is -0 and max(0, -0) is 0 */
    v[0] = -0.0, v[1] = 0.0;
    assert_true(signbit(eval_src(ctx, "max(x, y)", v)) && signbit(eval_src(ctx, "min(x, y)", v)));
    assert_false(signbit(eval_src(ctx, "max(y, x)", v)));
    for (int i = 0; i < (int)FG_COUNTOF(acts); i++) {
        fg_expr *e = parse_ok(ctx, acts[i].src);
        double w[NV] = {NAN, 0, 0, 0.1, -0.5, 2};
        if (!isnan(fg_expr_eval(e, w)))
            fail_msg("%s(NaN) is %g, not NaN", acts[i].name, fg_expr_eval(e, w));
        for (int sg = -1; sg <= 1; sg += 2) {
            w[0] = sg * 1e38;
            double r = fg_expr_eval(e, w);
            if (!isfinite(r))
                fail_msg("%s(%g) overflows to %g", acts[i].name, w[0], r);
        }
        fg_expr_free(e);
    }
    /* hardswish as PyTorch defines it: x for x >= 3, 0 for x <= -3 */
    fg_expr *hs = parse_ok(ctx, acts[9].src);
    static const double hx[][2] = {{1e38, 1e38}, {-1e38, 0}, {INFINITY, INFINITY}, {-INFINITY, 0}, {3, 3}, {-3, 0},
                                   {1, 4.0 / 6}};
    for (size_t k = 0; k < FG_COUNTOF(hx); k++) {
        double w[NV] = {hx[k][0]};
        assert_close(fg_expr_eval(hs, w), hx[k][1], 1e-15, "hardswish");
    }
    fg_expr_free(hs);
    fg_context_free(ctx);
}

/* Parses src expecting failure; checks that error 'which' has message msg
 * (exactly) at column col (the expression starts at line 3, column 10). */
static void expect_error(const char *src, int nerr, int which, const char *msg, int col)
{
    fg_context *ctx = tu_ctx_empty();
    fg_expr *e = fg_expr_parse(ctx, src, (fg_loc){"t.yaml", 3, 10}, V, NV);
    assert_null(e);
    if (fg_context_error_count(ctx) != nerr || strcmp(fg_context_error(ctx, which)->message, msg) != 0 ||
        fg_context_error(ctx, which)->col != col) {
        fprintf(stderr, "for \"%s\" (want col %d: %s):\n", src, col, msg);
        for (int i = 0; i < fg_context_error_count(ctx); i++)
            fprintf(stderr, "  col %d: %s\n", fg_context_error(ctx, i)->col, fg_context_error(ctx, i)->message);
    }
    assert_int_equal(fg_context_error_count(ctx), nerr);
    const fg_error *er = fg_context_error(ctx, which);
    assert_string_equal(er->message, msg);
    assert_int_equal(er->col, col);
    assert_int_equal(er->line, 3);
    assert_int_equal(er->status, FG_ERR_INPUT);
    fg_context_free(ctx);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("x > 0 ? x : alpah * x", 1, 0, "unknown variable 'alpah' in expression (did you mean 'alpha'?)", 22);
    expect_error("qqqq + 1", 1, 0, "unknown variable 'qqqq' in expression", 10);
    expect_error("sigmod(x)", 1, 0, "unknown function 'sigmod' in expression (did you mean 'sigmoid'?)", 10);
    expect_error("x + frobnicate(x)", 1, 0, "unknown function 'frobnicate' in expression", 14);
    expect_error("max(x)", 1, 0, "max takes 2 arguments, got 1", 10);
    expect_error("1 + exp(x, y)", 1, 0, "exp takes 1 argument, got 2", 14);
    expect_error("exp * 2", 1, 0, "'exp' is a function; call it as exp(...)", 10);
    /* several independent errors are all reported */
    expect_error("alpah + max(x) + yy", 3, 2, "unknown variable 'yy' in expression (did you mean 'y'?)", 27);
    expect_error("", 1, 0, "empty expression", 10);
    expect_error("   ", 1, 0, "empty expression", 13);
    expect_error("x +", 1, 0, "expected a value, got end of expression", 13);
    expect_error("x * * y", 1, 0, "expected a value, got '*'", 14);
    expect_error("(x + 1", 1, 0, "unbalanced parentheses: '(' is never closed", 10);
    expect_error("x + 1)", 1, 0, "unbalanced parentheses: ')' without a matching '('", 15);
    expect_error("(x y)", 1, 0, "expected ')', got 'y'", 13);
    expect_error("x y", 1, 0, "unexpected 'y' after the end of the expression", 12);
    expect_error("x ? y", 1, 0, "expected ':' in conditional expression, got end of expression", 15);
    expect_error("x < y < z", 1, 0, "comparisons do not chain; combine them with '&&'", 16);
    expect_error("max(x y)", 1, 0, "expected ',' or ')' in call to max, got 'y'", 16);
    expect_error("x = 1", 1, 0, "unexpected character '=' in expression (use '==' to compare)", 12);
    expect_error("x & y", 1, 0, "unexpected character '&' in expression (use '&&')", 12);
    expect_error("1e + x", 1, 0, "malformed number '1e' in expression", 10);
    expect_error("x # 2", 1, 0, "unexpected character '#' in expression", 12);
    /* a lexer error does not hide a later error */
    expect_error("$x + alpah", 2, 1, "unknown variable 'alpah' in expression (did you mean 'alpha'?)", 15);
    expect_error("x \x01", 1, 0, "unexpected byte 0x01 in expression", 12);
    expect_error("x + \xc3\xa9", 1, 0, "unexpected byte 0xc3 in expression", 14);
}

/* Nothing crashes and nothing bad parses. */
static void test_robust(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    size_t n = 100000;
    char *s = fg_xmalloc(2 * n + 8);
    /* deep parentheses */
    memset(s, '(', n);
    strcpy(s + n, "x");
    memset(s + n + 1, ')', n);
    s[2 * n + 1] = 0;
    assert_null(fg_expr_parse(ctx, s, FG_NOLOC, V, NV));
    assert_true(tu_has_error(ctx, "nested too deeply (more than 200 levels)"));
    assert_int_equal(fg_context_error_count(ctx), 1);
    /* deep prefix operators, deep ?: */
    memset(s, '-', n);
    strcpy(s + n, "x");
    assert_null(fg_expr_parse(ctx, s, FG_NOLOC, V, NV));
    for (size_t i = 0; i + 4 < n; i += 4) memcpy(s + i, "x?x:", 4);
    strcpy(s + n - n % 4, "x");
    assert_null(fg_expr_parse(ctx, s, FG_NOLOC, V, NV));
    /* long flat chain: bounded, no deep recursion */
    for (size_t i = 0; i + 2 < n; i += 2) memcpy(s + i, "x+", 2);
    strcpy(s + n - n % 2, "x");
    assert_null(fg_expr_parse(ctx, s, FG_NOLOC, V, NV));
    assert_true(tu_has_error(ctx, "expression too long"));
    /* 150 levels is fine */
    memset(s, '(', 150);
    strcpy(s + 150, "x");
    memset(s + 151, ')', 150);
    s[301] = 0;
    fg_expr *e = parse_ok(ctx, s);
    double v[NV] = {4};
    assert_true(fg_expr_eval(e, v) == 4);
    fg_expr_free(e);
    /* garbage: random bytes and random token soup never crash */
    static const char soup[] = "x y ( ) + - * / ? : ! < > = & | , 1 .5 e exp max 0x \xff\x80 true";
    unsigned r = 12345;
    for (int it = 0; it < 3000; it++) {
        int len = 0, nt = 1 + it % 17;
        for (int k = 0; k < nt; k++) {
            r = r * 1103515245u + 12345u;
            if (it & 1) {
                s[len++] = (char)(1 + (r >> 16) % 255);
            } else {
                size_t off = (r >> 16) % (sizeof soup - 1);
                s[len++] = soup[off];
                if (soup[off] != ' ') s[len++] = ' ';
            }
        }
        s[len] = 0;
        fg_context_clear_errors(ctx);
        fg_expr *g = fg_expr_parse(ctx, s, FG_NOLOC, V, NV);
        if (g) {
            (void)fg_expr_eval(g, v);
            fg_buf b = {0};
            fg_expr_emit_c(g, V, &b);
            fg_buf_free(&b);
            fg_expr_free(g);
        } else {
            assert_true(fg_context_error_count(ctx) > 0);   /* a failure always says why */
        }
    }
    assert_null(fg_expr_parse(ctx, NULL, FG_NOLOC, V, NV));
    free(s);
    fg_context_free(ctx);
}

static void test_uses(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_expr *e = parse_ok(ctx, "x > 0 ? x : alpha * max(y, 1)");
    assert_true(fg_expr_uses(e, 0));
    assert_true(fg_expr_uses(e, 1));
    assert_false(fg_expr_uses(e, 2));
    assert_true(fg_expr_uses(e, 3));
    assert_false(fg_expr_uses(e, 5));
    fg_expr_free(e);
    fg_context_free(ctx);
}

static void test_float_literal(void **state)
{
    (void)state;
    char b[32];
    static const struct { double v; const char *want; } cases[] = {
        {0.01, "0.01f"}, {1, "1.0f"}, {-3.5e-7, "-3.5e-07f"}, {0, "0.0f"}, {-0.0, "-0.0f"},
        {0.7071067811865476, "0.70710677f"}, {1e30, "1e+30f"}, {123456789, "123456792.0f"}, {20, "20.0f"}, {-1e8, "-100000000.0f"},
        {INFINITY, "(1.0f/0.0f)"}, {-INFINITY, "(-1.0f/0.0f)"}, {NAN, "(0.0f/0.0f)"}, {1e300, "(1.0f/0.0f)"},
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        fg_expr_float_literal(cases[i].v, b);
        assert_string_equal(b, cases[i].want);
    }
    /* round trip for awkward values */
    static const double rt[] = {0.1, 1.0 / 3, 3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38,
                                0.044715, 16777217, -2.5e-10};
    for (size_t i = 0; i < FG_COUNTOF(rt); i++) {
        fg_expr_float_literal(rt[i], b);
        size_t n = strlen(b);
        assert_true(n > 1 && b[n - 1] == 'f' && strpbrk(b, ".e"));
        b[n - 1] = 0;
        assert_true((float)strtod(b, NULL) == (float)rt[i]);
    }
}

static void emit_to(fg_context *ctx, const char *src, const char *const *names, fg_buf *b)
{
    fg_expr *e = parse_ok(ctx, src);
    fg_expr_emit_c(e, names, b);
    fg_expr_free(e);
}

static void golden(fg_context *ctx, const char *src, const char *want)
{
    fg_buf b = {0};
    emit_to(ctx, src, V, &b);
    if (strcmp(b.s, want) != 0)
        fprintf(stderr, "emit %s\n  got:  %s\n  want: %s\n", src, b.s, want);
    assert_string_equal(b.s, want);
    fg_buf_free(&b);
}

static void test_emit_golden(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    golden(ctx, "x > 0 ? x : alpha * x", "((x > 0.0f) ? x : (alpha * x))");
    golden(ctx, "x * sigmoid(x)", "(x * (1.0f / (1.0f + expf(-x))))");
    golden(ctx, "min(max(x, 0), 6) - -1.5", "(fg_minf(fg_maxf(x, 0.0f), 6.0f) - (-1.5f))");
    golden(ctx, "(x > 0 && !(y < 1)) + rsqrt(z)", "((((x > 0.0f) && (!(y < 1.0f))) ? 1.0f : 0.0f) + fg_rsqrtf(z))");
    golden(ctx, "x ? 1 : 0.01", "((x != 0.0f) ? 1.0f : 0.01f)");
    /* names that are not plain identifiers are parenthesised */
    const char *const names[] = {"-2.0f", "in[i]", "z", "alpha", "lo", "hi"};
    fg_buf b = {0};
    emit_to(ctx, "x * y - -x", names, &b);
    assert_string_equal(b.s, "(((-2.0f) * (in[i])) - (-(-2.0f)))");
    fg_buf_free(&b);
    fg_context_free(ctx);
}

/* Writes a C program evaluating each expression (float math) at sample
 * points, compiles it with compiler, and compares against fg_expr_eval. */
static void compile_and_compare(const char *compiler, const char *ext)
{
    static const char *const extra[] = {
        "x > 0 && !(x > 2) || x == -1",
        "-x * -(alpha - 1) / (abs(x) + 1)",
        "abs(x) + rsqrt(abs(x) + 1) + pow(abs(x), 1.5) + floor(x) + ceil(x) + expm1(x * 0.1) + log(abs(x) + 1)",
        "x > 1 ? (x < 2.5 ? 1 : 2) : !x + (x <= -1) * 3 + (x != 0.5)",
        "sqrt(abs(x)) * exp(-x * x) + (true ? lo : hi) - (false || x >= 3)",
    };
    static const float xs[] = {-8, -3, -1.5f, -1, -0.1f, 0, 0.2f, 1, 2.5f, 3, 5, 7, NAN, INFINITY, -INFINITY, -0.0f};
    enum { NE = FG_COUNTOF(acts) + FG_COUNTOF(extra) };
    const char *srcs[NE];
    for (int i = 0; i < NE; i++) srcs[i] = i < (int)FG_COUNTOF(acts) ? acts[i].src : extra[i - FG_COUNTOF(acts)];

    fg_context *ctx = tu_ctx_empty();
    fg_buf prog = {0};
    /* the preludes' definitions (templates/prelude.cuh, prelude_emu.h) */
    fg_buf_put(&prog, "#include <math.h>\n#include <stdio.h>\n"
                      "static float fg_rsqrtf(float v) { return 1.0f / sqrtf(v); }\n"
                      "static int fg_isnanf(float x) { return x != x; }\n"
                      "static float fg_minf(float a, float b) { return (b < a || fg_isnanf(b)) ? b : a; }\n"
                      "static float fg_maxf(float a, float b) { return (b > a || fg_isnanf(b)) ? b : a; }\n");
    for (int i = 0; i < NE; i++) {
        fg_buf_printf(&prog, "static float f%d(float x, float y, float z, float alpha, float lo, float hi)\n{\n"
                             "    (void)y; (void)z; (void)alpha; (void)lo; (void)hi;\n    return ", i);
        emit_to(ctx, srcs[i], V, &prog);
        fg_buf_put(&prog, ";\n}\n");
    }
    fg_buf_put(&prog, "int main(void)\n{\n    static const float xs[] = {");
    for (size_t k = 0; k < FG_COUNTOF(xs); k++) {
        char lit[32];
        fg_expr_float_literal(xs[k], lit);
        fg_buf_printf(&prog, "%s%s", k ? ", " : "", lit);
    }
    fg_buf_put(&prog, "};\n    for (int k = 0; k < (int)(sizeof xs / sizeof xs[0]); k++) {\n");
    for (int i = 0; i < NE; i++)
        fg_buf_printf(&prog, "        printf(\"%%.9g\\n\", (double)f%d(xs[k], 0.0f, 0.0f, 0.1f, -0.5f, 2.0f));\n", i);
    fg_buf_put(&prog, "    }\n    return 0;\n}\n");

    char *dir = tu_tmpdir();
    char name[32];
    snprintf(name, sizeof name, "prog.%s", ext);
    char *path = tu_write(dir, name, prog.s);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s -Wall -Werror -O1 -o '%s/prog' '%s' -lm && '%s/prog'", compiler, dir, path, dir);
    int rc = tu_run(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "%s\n---\n%s\n", prog.s, out);
    assert_int_equal(rc, 0);

    const char *p = out;
    for (size_t k = 0; k < FG_COUNTOF(xs); k++) {
        double v[NV] = {xs[k], 0, 0, (float)0.1, -0.5, 2};
        for (int i = 0; i < NE; i++) {
            char *end;
            double got = strtod(p, &end);
            assert_true(end != p);
            p = end;
            fg_expr *e = parse_ok(ctx, srcs[i]);
            double want = fg_expr_eval(e, v);
            fg_expr_free(e);
            /* 1e-6 relative; an absolute floor of 1e-6 where the value comes from cancellation;
             * NaN where the evaluator gives NaN, the same infinity */
            int ok = isnan(want) ? isnan(got) : isinf(want) ? got == want
                                                              : fabs(got - want) <= 1e-6 * fmax(fabs(want), 1.0);
            if (!ok)
                fprintf(stderr, "%s at x=%g: emitted %.9g, evaluator %.17g\n", srcs[i], xs[k], got, want);
            assert_true(ok);
        }
    }
    free(out);
    free(path);
    tu_rmtree(dir);
    free(dir);
    fg_buf_free(&prog);
    fg_context_free(ctx);
}

static void test_emit_compile_c(void **state)
{
    (void)state;
    compile_and_compare("cc -std=c11", "c");
}

static void test_emit_compile_cxx(void **state)
{
    (void)state;
    char *out = NULL;
    if (tu_run("command -v c++", &out) != 0) {
        free(out);
        skip();
    }
    free(out);
    compile_and_compare("c++ -x c++", "cpp");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),     cmocka_unit_test(test_functions),
        cmocka_unit_test(test_activations),    cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_robust),         cmocka_unit_test(test_uses),
        cmocka_unit_test(test_float_literal),  cmocka_unit_test(test_emit_golden),
        cmocka_unit_test(test_emit_compile_c), cmocka_unit_test(test_emit_compile_cxx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
