/* where.c -- the `where` predicate of rule and rewrite steps (where.h). */
#include "where.h"

#include "expr.h"

int fg_where_holds(const struct fg_expr *where, const char *const *vars, int nvars, const fg_node *nd)
{
    double vals[FG_MAX_WHERE_VARS + 1];
    for (int i = 0; i < nvars && i < FG_MAX_WHERE_VARS; i++) {
        vals[i] = 0.0;
        if (!fg_expr_uses(where, i))
            continue;
        const fg_attr_value *v = fg_node_attr(nd, vars[i]);
        if (!v)
            return 0;
        vals[i] = fg_attr_number(v);
    }
    return fg_expr_eval(where, vals) != 0.0;
}
