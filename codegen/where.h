/*
 * where.h -- the `where` predicate of a fusion-rule step (ir.h, fg_rule_step)
 * and of a rewrite step (rewrite.h, fg_rw_step): an expression (expr.h)
 * whose variable i is the node attribute named vars[i].  The planner's
 * matcher and the rewrite pass both ask it of a node.
 */
#ifndef FG_WHERE_H
#define FG_WHERE_H

#include "ir.h"

struct fg_expr;

/* Evaluates where on node nd, variable i being nd's attribute vars[i] as a
 * number (fg_attr_number): nonzero when true; 0 when false or when where
 * reads an attribute nd's op does not have. */
int fg_where_holds(const struct fg_expr *where, const char *const *vars, int nvars, const fg_node *nd);

/* Compiles step `step`'s `where` text src over the attributes of the ops it
 * can match (ops[0..nops)): vars / *nvars receive the union of their
 * attribute names (interned; at most FG_MAX_WHERE_VARS), *where the parsed
 * expression and *where_src src interned.  Errors are recorded at key_loc
 * (too many names) or text_loc (the expression); returns FG_OK or
 * FG_ERR_INPUT.  The rule loader and the rewrite loader share it. */
fg_status fg_where_compile(fg_context *ctx, const char *src, fg_loc key_loc, fg_loc text_loc, const char *step,
                           const fg_opdef *const *ops, int nops, const char **vars, int *nvars,
                           struct fg_expr **where, const char **where_src);

#endif /* FG_WHERE_H */
