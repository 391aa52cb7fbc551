/*
 * expr.h -- the expression language of pointwise ops and `where` predicates.
 *
 * One parser, two back ends: C/CUDA text (math in fp32) and a host evaluator
 * in double precision (the reference).  Grammar, loosest first:
 *   cond  := or ('?' cond ':' cond)?
 *   or    := and ('||' and)*          and := cmp ('&&' cmp)*
 *   cmp   := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
 *   sum   := prod (('+'|'-') prod)*   prod := unary (('*'|'/') unary)*
 *   unary := ('-'|'!'|'+') unary | atom
 *   atom  := number | true | false | ident | ident '(' args ')' | '(' cond ')'
 * Functions: exp log log1p expm1 tanh erf sqrt rsqrt abs min max pow
 * sigmoid floor ceil.  Booleans are 1.0 / 0.0.  min and max propagate NaN
 * (NaN when either argument is NaN), in the evaluator and in the emitted C.
 */
#ifndef FG_EXPR_H
#define FG_EXPR_H

#include "diag.h"
#include "util.h"

typedef struct fg_expr fg_expr;

/* Parses src.  Identifiers must be one of vars[0..nvars) (variable i), else
 * the error names the identifier and suggests a close one.  loc is where src
 * starts in its file; error columns are offset from loc.col.  Returns NULL
 * after recording every error it found. */
fg_expr *fg_expr_parse(fg_context *ctx, const char *src, fg_loc loc, const char *const *vars, int nvars);
void fg_expr_free(fg_expr *e);

/* Like fg_expr_parse, but records nothing in any context (for text that is
 * not in a file, such as what a hook returns): on failure returns NULL with
 * the first problem described in msg[0..size) and its byte offset in src in
 * *off. */
fg_expr *fg_expr_parse_quiet(const char *src, const char *const *vars, int nvars, char *msg, size_t size, int *off);

/* Evaluates in double precision; vals[i] is variable i. */
double fg_expr_eval(const fg_expr *e, const double *vals);

/* Appends C (CUDA device and host C++) text computing e in float precision;
 * names[i] is the text substituted for variable i (an identifier or a
 * literal).  Uses only expf, logf, log1pf, expm1f, tanhf, erff, sqrtf, fabsf,
 * powf, floorf, ceilf and the prelude's fg_rsqrtf, fg_minf and fg_maxf. */
void fg_expr_emit_c(const fg_expr *e, const char *const *names, fg_buf *out);

/* Nonzero when variable var occurs in e. */
int fg_expr_uses(const fg_expr *e, int var);

/* Formats a float literal for C source: always a valid float constant
 * ("0.01f", "1.0f", "-3.5e-07f"), round-trip exact for the float value. */
void fg_expr_float_literal(double v, char out[32]);

#endif /* FG_EXPR_H */
