/*
 * plan_text.c -- fg_plan_text and fg_plan_dot_text: the text of
 * `fusegen plan [--explain]` and of `--dot` as malloc'd strings, for
 * bindings that cannot hand the library a FILE * (contract in fusegen.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "context.h"
#include "plan.h"

/* Checks the arguments shared by both functions; *out is NULL on failure. */
static fg_status check(fg_context *ctx, const fg_plan *p, char **out, const char *fn)
{
    if (!ctx)
        return FG_ERR_INPUT;
    if (!out)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "%s: out is NULL", fn);
    *out = NULL;
    if (!p)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "%s: plan is NULL", fn);
    for (int i = 0; i < p->ngroups; i++)
        if (p->groups[i].rule >= ctx->nrules)
            return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                                 "%s: group %d names rule %d, which this context does not have (the plan was "
                                 "built with another context)", fn, i, p->groups[i].rule);
    return FG_OK;
}

/* Runs print(ctx, p, arg) into a memory stream and hands back its text. */
static fg_status to_string(fg_context *ctx, const fg_plan *p, const fg_plan_print_opts *po, int dot, char **out,
                           const char *fn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return fg_diag_error(ctx, FG_ERR_NOMEM, FG_NOLOC, "%s: cannot open a memory stream", fn);
    if (dot)
        fg_plan_dot(ctx, p, f);
    else
        fg_plan_print(ctx, p, po, f);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        return fg_diag_error(ctx, FG_ERR_NOMEM, FG_NOLOC, "%s: out of memory writing the text", fn);
    }
    *out = buf;
    return FG_OK;
}

FG_API fg_status fg_plan_text(fg_context *ctx, const fg_plan *p, int explain, char **out)
{
    fg_status st = check(ctx, p, out, "fg_plan_text");
    if (st)
        return st;
    fg_plan_print_opts po = {explain != 0};
    return to_string(ctx, p, &po, 0, out, "fg_plan_text");
}

FG_API fg_status fg_plan_dot_text(fg_context *ctx, const fg_plan *p, char **out)
{
    fg_status st = check(ctx, p, out, "fg_plan_dot_text");
    if (st)
        return st;
    return to_string(ctx, p, NULL, 1, out, "fg_plan_dot_text");
}

FG_API void fg_string_free(char *s) { free(s); }
