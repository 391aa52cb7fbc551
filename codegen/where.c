/* where.c -- the `where` predicate of rule and rewrite steps (where.h). */
#include "where.h"

#include "context.h"
#include "diag.h"
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

fg_status fg_where_compile(fg_context *ctx, const char *src, fg_loc key_loc, fg_loc text_loc, const char *step,
                           const fg_opdef *const *ops, int nops, const char **vars, int *nvars,
                           struct fg_expr **where, const char **where_src)
{
    for (int i = 0; i < nops; i++)
        for (int a = 0; a < ops[i]->nattrs; a++) {
            const char *name = ops[i]->attrs[a].name;
            int seen = 0;
            for (int k = 0; k < *nvars && !seen; k++)
                seen = vars[k] == name;
            if (seen)
                continue;
            if (*nvars >= FG_MAX_WHERE_VARS)
                return fg_diag_error(ctx, FG_ERR_INPUT, key_loc, "step '%s' can see more than %d attribute names",
                                     step, FG_MAX_WHERE_VARS);
            vars[(*nvars)++] = name;
        }
    int e0 = ctx->nerrors;
    *where_src = fg_intern(ctx, src);
    *where = fg_expr_parse(ctx, src, text_loc, vars, *nvars);
    if (!*where && ctx->nerrors == e0)
        fg_diag_error(ctx, FG_ERR_INPUT, text_loc, "invalid `where` expression");
    return *where ? FG_OK : FG_ERR_INPUT;
}
