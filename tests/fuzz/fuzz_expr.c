/*
 * fuzz_expr.c -- fuzz target for the expression language (codegen/expr.h):
 * parse, emit C, evaluate.
 *
 * Input: one mode byte, then the expression text (not NUL-terminated; a NUL
 * inside ends the text the parser sees, as it would in a YAML string).
 * The text is parsed against four variables (x, y, alpha, slope).  Checks:
 * no crash, no sanitizer report, no leak, no stack overflow, and
 *   - parse returns an expression exactly when it recorded no error; each
 *     error has FG_ERR_INPUT, a message, and a location in the input
 *     (file "fuzz.expr", line 1 or the continuation lines of the text,
 *     column >= 1);
 *   - the emitted C is non-empty, has balanced parentheses, uses only the
 *     characters of C expressions, and every identifier in it is one of the
 *     math functions expr.h promises or a variable's substituted name (so
 *     nothing from the input reaches the compiler as raw text); a variable's
 *     name occurs exactly when fg_expr_uses says the variable is used;
 *   - emitting twice gives the same text; evaluating twice gives the same
 *     value (NaN included) for ordinary, signed-zero, NaN, infinite and huge
 *     inputs;
 *   - mode bit 0: the next 8 bytes are also a double for
 *     fg_expr_float_literal, whose text must end in 'f' and read back as
 *     the same float (or be one of the NaN / infinity forms).
 */
#include "fuzz_common.h"

#include <math.h>

#include "context.h"
#include "expr.h"

#define NVARS 4

static fg_context *g_ctx;
static int g_runs;

static const char *const g_vars[NVARS] = {"x", "y", "alpha", "slope"};
/* Substituted names: distinct identifiers that occur nowhere else. */
static const char *const g_names[NVARS] = {"v_in0", "v_in1", "p_alpha", "s_slope"};
/* The functions the emitted text may call (expr.h); min and max under either
 * spelling: the C library's, or the prelude's NaN-propagating fg_minf/fg_maxf. */
static const char *const g_funcs[] = {"expf",   "logf",   "log1pf", "expm1f",    "tanhf",  "erff",
                                      "sqrtf",  "fabsf",  "fminf",  "fmaxf",     "fg_minf", "fg_maxf",
                                      "powf",   "fg_rsqrtf", "floorf", "ceilf"};

static void at_exit_free(void)
{
    fg_context_free(g_ctx);
    g_ctx = NULL;
}

static void new_context(void)
{
    fg_context_free(g_ctx);
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&g_ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    g_ctx->quiet = 1;
}

static int is_ident_char(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9'); }

/* Checks the emitted text (see the file comment); uses[i]: fg_expr_uses. */
static void check_c(const char *c, const int *uses, const char *src)
{
    size_t n = strlen(c);
    if (n == 0)
        FZ_FAIL("empty C for '%s'", src);
    int depth = 0, seen[NVARS] = {0};
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)c[i];
        if (ch == '(' || ch == ')') {
            depth += ch == '(' ? 1 : -1;
            if (depth < 0)
                FZ_FAIL("unbalanced ')' at %zu in C text: %s", i, c);
            i++;
        } else if (strchr(" +-*/?:,=!<>&|", ch)) {
            i++;
        } else if ((ch >= '0' && ch <= '9') || ch == '.') {
            /* a number: digits, '.', an exponent with its sign, a final 'f' */
            i++;
            while (i < n && (strchr("0123456789.", c[i]) ||
                             ((c[i] == 'e' || c[i] == 'E')) ||
                             ((c[i] == '+' || c[i] == '-') && (c[i - 1] == 'e' || c[i - 1] == 'E'))))
                i++;
            if (i < n && c[i] == 'f')
                i++;
            if (i < n && is_ident_char((unsigned char)c[i]))
                FZ_FAIL("malformed number near %zu in C text: %s", i, c);
        } else if (is_ident_char(ch)) {
            size_t j = i;
            while (j < n && is_ident_char((unsigned char)c[j]))
                j++;
            size_t len = j - i;
            int ok = 0;
            for (size_t k = 0; k < FG_COUNTOF(g_funcs) && !ok; k++)
                ok = strlen(g_funcs[k]) == len && memcmp(g_funcs[k], c + i, len) == 0;
            for (int k = 0; k < NVARS && !ok; k++)
                if (strlen(g_names[k]) == len && memcmp(g_names[k], c + i, len) == 0)
                    ok = seen[k] = 1;
            if (!ok)
                FZ_FAIL("identifier '%.*s' in the C text of '%s': %s", (int)len, c + i, src, c);
            i = j;
        } else {
            FZ_FAIL("character 0x%02x at %zu in the C text of '%s': %s", ch, i, src, c);
        }
    }
    if (depth != 0)
        FZ_FAIL("unbalanced parentheses (%d open) in C text: %s", depth, c);
    for (int k = 0; k < NVARS; k++)
        if (seen[k] != (uses[k] != 0))
            FZ_FAIL("variable %s: fg_expr_uses says %d, the C text %s it: %s", g_vars[k], uses[k],
                    seen[k] ? "names" : "does not name", c);
}

static int same_value(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_literal(double v)
{
    char out[32];
    memset(out, 0x55, sizeof out);
    fg_expr_float_literal(v, out);
    if (!memchr(out, 0, sizeof out))
        FZ_FAIL("float literal of %a is not terminated", v);
    float f = (float)v;
    if (isnan(f)) {
        if (strcmp(out, "(0.0f/0.0f)") != 0)
            FZ_FAIL("NaN literal is %s", out);
        return;
    }
    if (isinf(f)) {
        if (strcmp(out, f > 0 ? "(1.0f/0.0f)" : "(-1.0f/0.0f)") != 0)
            FZ_FAIL("infinite literal is %s", out);
        return;
    }
    size_t n = strlen(out);
    if (n < 2 || out[n - 1] != 'f' || !strpbrk(out, ".eE"))
        FZ_FAIL("literal of %a is '%s' (not a float constant)", v, out);
    char *end;
    float back = strtof(out, &end);
    if (end != out + n - 1 || memcmp(&back, &f, sizeof f) != 0)
        FZ_FAIL("literal '%s' reads back as %a, not %a", out, (double)back, (double)f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ctx) {
        new_context();
        atexit(at_exit_free);
    }
    if (++g_runs % 4096 == 0)
        new_context();
    fg_context_clear_errors(g_ctx);
    unsigned mode = size ? data[0] : 0;
    const uint8_t *p = size ? data + 1 : data;
    size_t n = size ? size - 1 : 0;
    if ((mode & 1) && n >= 8) {
        double v;
        memcpy(&v, p, 8);
        check_literal(v);
        p += 8;
        n -= 8;
    }
    char *src = malloc(n + 1);
    if (n)
        memcpy(src, p, n);
    src[n] = 0;
    size_t slen = strlen(src);

    fg_loc loc = {"fuzz.expr", 1, 1};
    int e0 = fg_context_error_count(g_ctx);
    fg_expr *e = fg_expr_parse(g_ctx, src, loc, g_vars, NVARS);
    int ne = fg_context_error_count(g_ctx) - e0;
    if (e && ne)
        FZ_FAIL("parse returned an expression and recorded %d error(s)", ne);
    if (!e && !ne)
        FZ_FAIL("parse failed and recorded no error for '%s'", src);
    /* Lines the text spans (a location may point one past its end). */
    long lines = fz_max_lines((const uint8_t *)src, slen);
    for (int i = e0; i < e0 + ne; i++) {
        const fg_error *er = fg_context_error(g_ctx, i);
        if (!er || er->status != FG_ERR_INPUT || !er->message || !er->message[0])
            FZ_FAIL("parse error %d is not an FG_ERR_INPUT with a message", i - e0);
        if (!er->file || strcmp(er->file, "fuzz.expr") != 0 || er->line < 1 || er->line > lines + 1 || er->col < 1) {
            fz_dump_errors(g_ctx, e0);
            FZ_FAIL("parse error %d is not located in the input (%s:%d:%d)", i - e0, er->file ? er->file : "(none)",
                    er->line, er->col);
        }
    }
    if (e) {
        int uses[NVARS];
        for (int k = 0; k < NVARS; k++)
            uses[k] = fg_expr_uses(e, k);
        fg_buf c1 = {0}, c2 = {0};
        fg_expr_emit_c(e, g_names, &c1);
        fg_expr_emit_c(e, g_names, &c2);
        if (!c1.s || !c2.s || strcmp(c1.s, c2.s) != 0)
            FZ_FAIL("two emissions of '%s' differ", src);
        check_c(c1.s, uses, src);
        fg_buf_free(&c1);
        fg_buf_free(&c2);

        static const double probes[][NVARS] = {
            {0.5, -1.25, 0.01, 0.25},
            {-0.0, 0.0, -0.0, 0.0},
            {NAN, 1.0, NAN, -2.0},
            {INFINITY, -INFINITY, 1.0, 0.0},
            {1e308, -1e308, 1e-308, 3.0},
            {-3.0, 7.0, 1e30, -1e-30},
        };
        for (size_t i = 0; i < FG_COUNTOF(probes); i++) {
            double a = fg_expr_eval(e, probes[i]), b = fg_expr_eval(e, probes[i]);
            if (!same_value(a, b))
                FZ_FAIL("evaluating '%s' twice gave %a and %a", src, a, b);
        }
        fg_expr_free(e);
    }
    free(src);
    return 0;
}
