/*
 * expr.c -- the expression language of pointwise ops and `where` predicates:
 * a small lexer, a recursive-descent parser building a flat node array, a
 * double-precision evaluator (the reference) and a float-precision C emitter
 * (text accepted by NVRTC and by a host C/C++ compiler).  See expr.h for the
 * grammar and docs/expressions.md for the language reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "expr.h"

#define EXPR_MAX_DEPTH 200     /* nesting levels: parentheses, prefix ops, ?: */
#define EXPR_MAX_NODES 10000   /* bounds the tree (and the evaluator's recursion) */
#define EXPR_MAX_LEXERR 10     /* lexer errors reported per expression */

/* ---- tables ------------------------------------------------------------ */

enum { N_NUM, N_VAR, N_NEG, N_NOT, N_BIN, N_COND, N_CALL };

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_AND, B_OR, B_COUNT };
static const char *const bin_text[] = {"+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=", "&&", "||"};
FG_STATIC_ASSERT(FG_COUNTOF(bin_text) == B_COUNT, "bin_text out of sync");

enum { F_EXP, F_LOG, F_LOG1P, F_EXPM1, F_TANH, F_ERF, F_SQRT, F_RSQRT, F_ABS, F_MIN, F_MAX,
       F_POW, F_SIGMOID, F_FLOOR, F_CEIL, F_TRUNC, F_ROUND, F_SIN, F_COS, F_TAN, F_ASIN, F_ACOS, F_ATAN,
       F_SINH, F_COSH, F_ASINH, F_ACOSH, F_ATANH, F_COUNT };

static double rsqrt_d(double a) { return 1.0 / sqrt(a); }
static double sigmoid_d(double a) { return 1.0 / (1.0 + exp(-a)); }

/* The functions of the language.  cname is the float function the CUDA
 * and emulation sources call (both preludes' math: CUDA's device library,
 * the host's libm); host, the double function of the evaluator (NULL for
 * the two-argument ones, evaluated in ev).  round: to the nearest integer,
 * ties to even (rintf; ONNX Round). */
static const struct {
    const char *name;
    int nargs;
    const char *cname;   /* float C function; NULL: emitted specially */
    double (*host)(double);
} fn_table[] = {
    {"exp", 1, "expf", exp},       {"log", 1, "logf", log},        {"log1p", 1, "log1pf", log1p},
    {"expm1", 1, "expm1f", expm1}, {"tanh", 1, "tanhf", tanh},     {"erf", 1, "erff", erf},
    {"sqrt", 1, "sqrtf", sqrt},    {"rsqrt", 1, "fg_rsqrtf", rsqrt_d}, {"abs", 1, "fabsf", fabs},
    {"min", 2, "fg_minf", NULL},   {"max", 2, "fg_maxf", NULL},    {"pow", 2, "powf", NULL},
    {"sigmoid", 1, NULL, sigmoid_d}, {"floor", 1, "floorf", floor}, {"ceil", 1, "ceilf", ceil},
    {"trunc", 1, "truncf", trunc},
    {"round", 1, "rintf", nearbyint}, {"sin", 1, "sinf", sin},     {"cos", 1, "cosf", cos},
    {"tan", 1, "tanf", tan},       {"asin", 1, "asinf", asin},     {"acos", 1, "acosf", acos},
    {"atan", 1, "atanf", atan},    {"sinh", 1, "sinhf", sinh},     {"cosh", 1, "coshf", cosh},
    {"asinh", 1, "asinhf", asinh}, {"acosh", 1, "acoshf", acosh},  {"atanh", 1, "atanhf", atanh},
};
FG_STATIC_ASSERT(FG_COUNTOF(fn_table) == F_COUNT, "fn_table out of sync");

typedef struct node {
    unsigned char kind, op;  /* op: B_* for N_BIN, F_* for N_CALL */
    int a, b, c;             /* children; a is the variable index for N_VAR */
    double num;
} node;

struct fg_expr {
    node *n;
    int nn;
    int root;
};

/* ---- lexer ------------------------------------------------------------- */

/* Token kinds: punctuation is its own character; these follow. */
enum { T_EQ = 256, T_NE, T_LE, T_GE, T_AND, T_OR, T_NUM, T_IDENT, T_ERR, T_EOF };

typedef struct tok {
    int kind;
    int off, len;    /* byte span in src */
    double num;
} tok;

typedef struct parser {
    fg_context *ctx;
    const char *src;
    fg_loc loc;
    const char *const *vars;
    int nvars;
    tok *t;
    int nt, tcap, pos;
    node *n;
    int nn, ncap;
    int depth;
    int nerr;
    int stop;        /* a syntax error ended parsing */
    char *msg;       /* fg_expr_parse_quiet: the first problem goes here */
    size_t msg_size;
    int msg_off;
} parser;

/* Records an input error at byte offset off of src. */
static void err_at(parser *p, int off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void err_at(parser *p, int off, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fg_loc l = p->loc;
    l.col = (l.col > 0 ? l.col : 1) + off;
    if (p->msg && !p->nerr) {
        snprintf(p->msg, p->msg_size, "%s", msg);
        p->msg_off = off;
    }
    fg_diag_error(p->ctx, FG_ERR_INPUT, l, "%s", msg);
    p->nerr++;
}

static int is_ident_start(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* Scans a decimal number at s (digits [. digits] [e [+-] digits], or
 * . digits ...); returns its length, 0 when malformed. */
static int scan_number(const char *s)
{
    int i = 0, digits = 0;
    while (is_digit(s[i])) i++, digits++;
    if (s[i] == '.') {
        i++;
        while (is_digit(s[i])) i++, digits++;
    }
    if (!digits)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        int j = i + 1;
        if (s[j] == '+' || s[j] == '-') j++;
        if (!is_digit(s[j]))
            return 0;
        while (is_digit(s[j])) j++;
        i = j;
    }
    return i;
}

/* Splits src into tokens, reporting (at most EXPR_MAX_LEXERR) bad characters
 * and malformed numbers as T_ERR tokens.  Always ends with T_EOF. */
static void lex(parser *p)
{
    const char *s = p->src;
    int i = 0, nlexerr = 0;
    for (;;) {
        while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') i++;
        tok *t = FG_PUSH(p->t, p->nt, p->tcap);
        t->off = i;
        t->len = 1;
        t->num = 0;
        unsigned char c = (unsigned char)s[i];
        if (!c) {
            t->kind = T_EOF;
            t->len = 0;
            return;
        }
        if (is_digit(c) || (c == '.' && is_digit(s[i + 1]))) {
            int n = scan_number(s + i);
            if (n) {
                char *text = fg_xstrndup(s + i, n);
                t->kind = T_NUM;
                t->len = n;
                t->num = strtod(text, NULL);
                free(text);
                i += n;
                continue;
            }
            int n2 = 0;   /* swallow the rest of the malformed number */
            while (is_digit(s[i + n2]) || is_ident_start(s[i + n2]) || s[i + n2] == '.' ||
                   ((s[i + n2] == '+' || s[i + n2] == '-') && (s[i + n2 - 1] == 'e' || s[i + n2 - 1] == 'E')))
                n2++;
            t->kind = T_ERR;
            t->len = n2;
            if (nlexerr++ < EXPR_MAX_LEXERR)
                err_at(p, i, "malformed number '%.*s' in expression", n2 < 40 ? n2 : 40, s + i);
            i += n2;
            continue;
        }
        if (is_ident_start(c)) {
            int n = 1;
            while (is_ident_start(s[i + n]) || is_digit(s[i + n])) n++;
            t->kind = T_IDENT;
            t->len = n;
            i += n;
            continue;
        }
        static const struct { char a, b; int kind; } two[] = {
            {'=', '=', T_EQ}, {'!', '=', T_NE}, {'<', '=', T_LE}, {'>', '=', T_GE}, {'&', '&', T_AND}, {'|', '|', T_OR},
        };
        int k;
        for (k = 0; k < (int)FG_COUNTOF(two); k++)
            if (c == two[k].a && s[i + 1] == two[k].b)
                break;
        if (k < (int)FG_COUNTOF(two)) {
            t->kind = two[k].kind;
            t->len = 2;
            i += 2;
            continue;
        }
        if (strchr("+-*/()?:,!<>", c)) {
            t->kind = c;
            i++;
            continue;
        }
        t->kind = T_ERR;
        if (c >= 0x80)   /* one error per multi-byte UTF-8 sequence */
            while ((unsigned char)s[i + t->len] >= 0x80 && (unsigned char)s[i + t->len] < 0xC0) t->len++;
        if (nlexerr++ < EXPR_MAX_LEXERR) {
            const char *hint = c == '=' ? " (use '==' to compare)" : c == '&' ? " (use '&&')" : c == '|' ? " (use '||')" : "";
            if (c > ' ' && c < 0x7f)
                err_at(p, i, "unexpected character '%c' in expression%s", c, hint);
            else
                err_at(p, i, "unexpected byte 0x%02x in expression", c);
        }
        i += t->len;
    }
}

/* ---- parser ------------------------------------------------------------ */

static const tok *peek(const parser *p) { return &p->t[p->pos]; }
static const tok *next(parser *p)
{
    const tok *t = &p->t[p->pos];
    if (t->kind != T_EOF)
        p->pos++;
    return t;
}

/* Describes a token for messages: "'foo'" or "end of expression". */
static const char *describe(const parser *p, const tok *t, char buf[64])
{
    if (t->kind == T_EOF)
        return "end of expression";
    snprintf(buf, 64, "'%.*s'", t->len < 40 ? t->len : 40, p->src + t->off);
    return buf;
}

/* Reports a syntax error at token t and stops parsing.  An error at a T_ERR
 * token was already reported by the lexer and is not repeated. */
static int syntax_error(parser *p, const tok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int syntax_error(parser *p, const tok *t, const char *fmt, ...)
{
    if (!p->stop && t->kind != T_ERR) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        err_at(p, t->off, "%s", msg);
    }
    p->stop = 1;
    return -1;
}

static int mk(parser *p, int kind, int op, int a, int b, int c, double num)
{
    if (p->nn >= EXPR_MAX_NODES) {
        if (!p->stop)
            err_at(p, peek(p)->off, "expression too long (more than %d operations)", EXPR_MAX_NODES);
        p->stop = 1;
        return -1;
    }
    node *n = FG_PUSH(p->n, p->nn, p->ncap);
    n->kind = (unsigned char)kind;
    n->op = (unsigned char)op;
    n->a = a, n->b = b, n->c = c;
    n->num = num;
    return p->nn - 1;
}

static int enter(parser *p)
{
    if (++p->depth > EXPR_MAX_DEPTH) {
        if (!p->stop)
            err_at(p, peek(p)->off, "expression nested too deeply (more than %d levels)", EXPR_MAX_DEPTH);
        p->stop = 1;
    }
    return !p->stop;
}

static int parse_cond(parser *p);

/* ident '(' args ')': the name token is already consumed. */
static int parse_call(parser *p, const tok *name)
{
    int args[8], nargs = 0;
    char what[64];
    const char *s = p->src + name->off;
    next(p);   /* '(' */
    if (peek(p)->kind != ')') {
        for (;;) {
            int a = parse_cond(p);
            if (p->stop)
                return -1;
            if (nargs < (int)FG_COUNTOF(args))
                args[nargs] = a;
            nargs++;
            if (peek(p)->kind == ',') {
                next(p);
                continue;
            }
            if (peek(p)->kind != ')')
                return syntax_error(p, peek(p), "expected ',' or ')' in call to %.*s, got %s", name->len, s,
                                    describe(p, peek(p), what));
            break;
        }
    }
    next(p);   /* ')' */
    int f;
    for (f = 0; f < F_COUNT; f++)
        if ((int)strlen(fn_table[f].name) == name->len && memcmp(fn_table[f].name, s, name->len) == 0)
            break;
    if (f == F_COUNT) {
        const char *names[F_COUNT];
        for (int i = 0; i < F_COUNT; i++) names[i] = fn_table[i].name;
        char *id = fg_xstrndup(s, name->len);
        const char *sug = fg_suggest(id, names, F_COUNT);
        if (sug)
            err_at(p, name->off, "unknown function '%s' in expression (did you mean '%s'?)", id, sug);
        else
            err_at(p, name->off, "unknown function '%s' in expression", id);
        free(id);
        return mk(p, N_NUM, 0, -1, -1, -1, 0);
    }
    if (nargs != fn_table[f].nargs) {
        err_at(p, name->off, "%s takes %d argument%s, got %d", fn_table[f].name, fn_table[f].nargs,
               fn_table[f].nargs == 1 ? "" : "s", nargs);
        return mk(p, N_NUM, 0, -1, -1, -1, 0);
    }
    return mk(p, N_CALL, f, args[0], nargs > 1 ? args[1] : -1, -1, 0);
}

/* A variable, true/false, or a function name used without arguments. */
static int parse_ident(parser *p, const tok *t)
{
    const char *s = p->src + t->off;
    char *id = fg_xstrndup(s, t->len);
    int r = -1;
    for (int i = 0; i < p->nvars && r < 0; i++)
        if (p->vars[i] && strcmp(p->vars[i], id) == 0)
            r = mk(p, N_VAR, 0, i, -1, -1, 0);
    if (r < 0 && (!strcmp(id, "true") || !strcmp(id, "false")))
        r = mk(p, N_NUM, 0, -1, -1, -1, id[0] == 't' ? 1.0 : 0.0);
    if (r < 0 && !p->stop) {
        int f;
        for (f = 0; f < F_COUNT && strcmp(fn_table[f].name, id) != 0; f++) {}
        const char *sug = fg_suggest(id, p->vars, p->nvars);
        if (f < F_COUNT)
            err_at(p, t->off, "'%s' is a function; call it as %s(...)", id, id);
        else if (sug)
            err_at(p, t->off, "unknown variable '%s' in expression (did you mean '%s'?)", id, sug);
        else
            err_at(p, t->off, "unknown variable '%s' in expression", id);
        r = mk(p, N_NUM, 0, -1, -1, -1, 0);
    }
    free(id);
    return r;
}

static int parse_atom(parser *p)
{
    char what[64];
    int skipped = 0;
    while (peek(p)->kind == T_ERR) {   /* already reported: parse what follows */
        p->nerr++;
        skipped = 1;
        next(p);
    }
    const tok *t = next(p);
    if (skipped && t->kind != T_NUM && t->kind != T_IDENT && t->kind != '(') {
        p->stop = 1;   /* no second message for the same bad spot */
        return -1;
    }
    switch (t->kind) {
    case T_NUM:
        return mk(p, N_NUM, 0, -1, -1, -1, t->num);
    case T_IDENT:
        return peek(p)->kind == '(' ? parse_call(p, t) : parse_ident(p, t);
    case '(': {
        int e = parse_cond(p);
        if (p->stop)
            return -1;
        if (peek(p)->kind == T_EOF)
            return syntax_error(p, t, "unbalanced parentheses: '(' is never closed");
        if (peek(p)->kind != ')')
            return syntax_error(p, peek(p), "expected ')', got %s", describe(p, peek(p), what));
        next(p);
        return e;
    }
    case T_EOF:
        if (p->pos == 0)
            return syntax_error(p, t, "empty expression");
        return syntax_error(p, t, "expected a value, got end of expression");
    default:
        return syntax_error(p, t, "expected a value, got %s", describe(p, t, what));
    }
}

static int parse_unary(parser *p)
{
    int k = peek(p)->kind;
    if (k != '-' && k != '!' && k != '+')
        return parse_atom(p);
    next(p);
    int r = -1;
    if (enter(p)) {
        int a = parse_unary(p);
        r = p->stop ? -1 : k == '+' ? a : mk(p, k == '-' ? N_NEG : N_NOT, 0, a, -1, -1, 0);
    }
    p->depth--;
    return r;
}

/* One left-associative binary level: sub (op sub)*, ops[] mapping token kinds to B_*. */
static int parse_left(parser *p, int (*sub)(parser *), const int *tk, const int *op, int nops)
{
    int l = sub(p);
    for (;;) {
        if (p->stop)
            return -1;
        int i;
        for (i = 0; i < nops && peek(p)->kind != tk[i]; i++) {}
        if (i == nops)
            return l;
        next(p);
        int r = sub(p);
        if (p->stop)
            return -1;
        l = mk(p, N_BIN, op[i], l, r, -1, 0);
    }
}

static int parse_prod(parser *p) { return parse_left(p, parse_unary, (const int[]){'*', '/'}, (const int[]){B_MUL, B_DIV}, 2); }
static int parse_sum(parser *p) { return parse_left(p, parse_prod, (const int[]){'+', '-'}, (const int[]){B_ADD, B_SUB}, 2); }

static int cmp_op(int kind)
{
    switch (kind) {
    case T_EQ: return B_EQ;
    case T_NE: return B_NE;
    case '<': return B_LT;
    case T_LE: return B_LE;
    case '>': return B_GT;
    case T_GE: return B_GE;
    default: return -1;
    }
}

static int parse_cmp(parser *p)
{
    int l = parse_sum(p);
    if (p->stop)
        return -1;
    int op = cmp_op(peek(p)->kind);
    if (op < 0)
        return l;
    next(p);
    int r = parse_sum(p);
    if (p->stop)
        return -1;
    if (cmp_op(peek(p)->kind) >= 0)
        return syntax_error(p, peek(p), "comparisons do not chain; combine them with '&&'");
    return mk(p, N_BIN, op, l, r, -1, 0);
}

static int parse_and(parser *p) { return parse_left(p, parse_cmp, (const int[]){T_AND}, (const int[]){B_AND}, 1); }
static int parse_or(parser *p) { return parse_left(p, parse_and, (const int[]){T_OR}, (const int[]){B_OR}, 1); }

static int parse_cond(parser *p)
{
    int r = -1;
    char what[64];
    if (enter(p)) {
        r = parse_or(p);
        if (!p->stop && peek(p)->kind == '?') {
            next(p);
            int a = parse_cond(p);
            if (!p->stop && peek(p)->kind != ':')
                syntax_error(p, peek(p), "expected ':' in conditional expression, got %s", describe(p, peek(p), what));
            if (!p->stop) {
                next(p);
                int b = parse_cond(p);
                if (!p->stop)
                    r = mk(p, N_COND, 0, r, a, b, 0);
            }
        }
    }
    p->depth--;
    return p->stop ? -1 : r;
}

/* Parses with p set up by the caller. */
static fg_expr *parse(parser *pp)
{
    parser p = *pp;
    char what[64];
    lex(&p);
    int root = parse_cond(&p);
    if (!p.stop && peek(&p)->kind != T_EOF) {
        if (peek(&p)->kind == ')')
            syntax_error(&p, peek(&p), "unbalanced parentheses: ')' without a matching '('");
        else
            syntax_error(&p, peek(&p), "unexpected %s after the end of the expression", describe(&p, peek(&p), what));
    }
    free(p.t);
    pp->msg_off = p.msg_off;
    if (p.nerr || p.stop || root < 0) {
        if (p.msg && !p.nerr)
            snprintf(p.msg, p.msg_size, "invalid expression");
        free(p.n);
        return NULL;
    }
    fg_expr *e = fg_xmalloc(sizeof *e);
    e->n = p.n;
    e->nn = p.nn;
    e->root = root;
    return e;
}

fg_expr *fg_expr_parse(fg_context *ctx, const char *src, fg_loc loc, const char *const *vars, int nvars)
{
    parser p = {.ctx = ctx, .src = src ? src : "", .loc = loc, .vars = vars, .nvars = vars ? nvars : 0};
    return parse(&p);
}

fg_expr *fg_expr_parse_quiet(const char *src, const char *const *vars, int nvars, char *msg, size_t size, int *off)
{
    char dummy[1];
    parser p = {.src = src ? src : "", .vars = vars, .nvars = vars ? nvars : 0,
                .msg = size ? msg : dummy, .msg_size = size ? size : sizeof dummy};
    p.msg[0] = 0;
    fg_expr *e = parse(&p);
    if (off)
        *off = p.msg_off;
    return e;
}

void fg_expr_free(fg_expr *e)
{
    if (!e)
        return;
    free(e->n);
    free(e);
}

int fg_expr_uses(const fg_expr *e, int var)
{
    for (int i = 0; e && i < e->nn; i++)
        if (e->n[i].kind == N_VAR && e->n[i].a == var)
            return 1;
    return 0;
}

/* ---- evaluator --------------------------------------------------------- */

/* min and max propagate NaN (as ONNX and PyTorch do): NaN when either
 * argument is NaN, else the smaller / larger, the first argument when the
 * two compare equal (so max(-0, 0) is -0).  The preludes' fg_minf / fg_maxf
 * are the same in float. */
static double nan_min(double a, double b) { return b < a || b != b ? b : a; }
static double nan_max(double a, double b) { return b > a || b != b ? b : a; }

static double ev(const fg_expr *e, int i, const double *v)
{
    const node *n = &e->n[i];
    switch (n->kind) {
    case N_NUM: return n->num;
    case N_VAR: return v[n->a];
    case N_NEG: return -ev(e, n->a, v);
    case N_NOT: return ev(e, n->a, v) != 0.0 ? 0.0 : 1.0;
    case N_COND: return ev(e, n->a, v) != 0.0 ? ev(e, n->b, v) : ev(e, n->c, v);
    case N_BIN: {
        double a = ev(e, n->a, v);
        if (n->op == B_AND) return a != 0.0 && ev(e, n->b, v) != 0.0;
        if (n->op == B_OR) return a != 0.0 || ev(e, n->b, v) != 0.0;
        double b = ev(e, n->b, v);
        switch (n->op) {
        case B_ADD: return a + b;
        case B_SUB: return a - b;
        case B_MUL: return a * b;
        case B_DIV: return a / b;
        case B_EQ: return a == b;
        case B_NE: return a != b;
        case B_LT: return a < b;
        case B_LE: return a <= b;
        case B_GT: return a > b;
        default: return a >= b;
        }
    }
    default: {   /* N_CALL */
        double a = ev(e, n->a, v);
        switch (n->op) {
        case F_MIN: return nan_min(a, ev(e, n->b, v));
        case F_MAX: return nan_max(a, ev(e, n->b, v));
        case F_POW: return pow(a, ev(e, n->b, v));
        default: return fn_table[n->op].host(a);
        }
    }
    }
}

double fg_expr_eval(const fg_expr *e, const double *vals) { return ev(e, e->root, vals); }

/* ---- C emitter ----------------------------------------------------------- */

void fg_expr_float_literal(double v, char out[32])
{
    float f = (float)v;
    if (isnan(f)) {
        strcpy(out, "(0.0f/0.0f)");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f > 0 ? "(1.0f/0.0f)" : "(-1.0f/0.0f)");
        return;
    }
    if (f == floorf(f) && fabsf(f) < 1e9f) {   /* whole numbers in full: "20.0f", not "2e+01f" */
        snprintf(out, 24, "%.0f", (double)f);
    } else {
        for (int prec = 1; prec <= 9; prec++) {   /* shortest text that reads back as f */
            snprintf(out, 24, "%.*g", prec, (double)f);
            if ((float)strtod(out, NULL) == f)
                break;
        }
    }
    if (!strpbrk(out, ".eE"))
        strcat(out, ".0");
    strcat(out, "f");
}

static int is_simple_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!is_ident_start((unsigned char)*s) && !is_digit(*s) && *s != '.')
            return 0;
    return 1;
}

static void em_num(const fg_expr *e, int i, const char *const *names, fg_buf *o);

/* Emits node i as a C condition (an int-valued test). */
static void em_cond(const fg_expr *e, int i, const char *const *names, fg_buf *o)
{
    const node *n = &e->n[i];
    if (n->kind == N_NUM) {
        fg_buf_put(o, n->num != 0.0 ? "1" : "0");
    } else if (n->kind == N_NOT) {
        fg_buf_put(o, "(!");
        em_cond(e, n->a, names, o);
        fg_buf_put(o, ")");
    } else if (n->kind == N_BIN && n->op >= B_EQ) {
        int logical = n->op >= B_AND;
        void (*sub)(const fg_expr *, int, const char *const *, fg_buf *) = logical ? em_cond : em_num;
        fg_buf_put(o, "(");
        sub(e, n->a, names, o);
        fg_buf_printf(o, " %s ", bin_text[n->op]);
        sub(e, n->b, names, o);
        fg_buf_put(o, ")");
    } else {
        fg_buf_put(o, "(");
        em_num(e, i, names, o);
        fg_buf_put(o, " != 0.0f)");
    }
}

/* Emits node i as a fully parenthesised float expression. */
static void em_num(const fg_expr *e, int i, const char *const *names, fg_buf *o)
{
    const node *n = &e->n[i];
    char lit[32];
    switch (n->kind) {
    case N_NUM:
        fg_expr_float_literal(n->num, lit);
        fg_buf_printf(o, lit[0] == '-' ? "(%s)" : "%s", lit);
        return;
    case N_VAR:
        fg_buf_printf(o, is_simple_name(names[n->a]) ? "%s" : "(%s)", names[n->a]);
        return;
    case N_NEG:
        fg_buf_put(o, "(-");
        em_num(e, n->a, names, o);
        fg_buf_put(o, ")");
        return;
    case N_COND:
        fg_buf_put(o, "(");
        em_cond(e, n->a, names, o);
        fg_buf_put(o, " ? ");
        em_num(e, n->b, names, o);
        fg_buf_put(o, " : ");
        em_num(e, n->c, names, o);
        fg_buf_put(o, ")");
        return;
    case N_BIN:
        if (n->op <= B_DIV) {
            fg_buf_put(o, "(");
            em_num(e, n->a, names, o);
            fg_buf_printf(o, " %s ", bin_text[n->op]);
            em_num(e, n->b, names, o);
            fg_buf_put(o, ")");
            return;
        }
        __attribute__((fallthrough));   /* comparisons and logic used as numbers */
    case N_NOT:
        fg_buf_put(o, "(");
        em_cond(e, i, names, o);
        fg_buf_put(o, " ? 1.0f : 0.0f)");
        return;
    default:   /* N_CALL */
        if (n->op == F_SIGMOID) {
            fg_buf_put(o, "(1.0f / (1.0f + expf(-");
            em_num(e, n->a, names, o);
            fg_buf_put(o, ")))");
            return;
        }
        fg_buf_printf(o, "%s(", fn_table[n->op].cname);
        em_num(e, n->a, names, o);
        if (n->b >= 0) {
            fg_buf_put(o, ", ");
            em_num(e, n->b, names, o);
        }
        fg_buf_put(o, ")");
    }
}

void fg_expr_emit_c(const fg_expr *e, const char *const *names, fg_buf *out)
{
    em_num(e, e->root, names, out);
}
