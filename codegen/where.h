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

#endif /* FG_WHERE_H */
