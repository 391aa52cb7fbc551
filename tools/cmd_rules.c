/* cmd_rules.c -- `fusegen rules check DIR`: load a rules directory and report
 * every error in it; on success print what it defines (rules and the
 * templates it registers).  `fusegen rules templates [DIR]`: the template
 * registry (built-ins, plus the variants of DIR or the default rules). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kind.h"
#include "template.h"

static const char *mask_text(unsigned mask, int count, const char *(*name)(int), char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < size; i++)
        if (mask & (1u << i))
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? "," : "", name(i));
    return buf;
}
static const char *dtype_i(int i) { return fg_dtype_name((fg_dtype)i); }
static const char *kind_i(int i) { return fg_op_kind_name((fg_op_kind)i); }

/* One line per template of the context's registry. */
static void print_templates(const fg_context *ctx)
{
    char kinds[128], dtypes[64];
    for (int i = 0, n = fg_template_count(ctx); i < n; i++) {
        const fg_template *t = fg_template_at(ctx, i);
        printf("  template %-18s family %-9s prio %3d  computes %-28s dtypes %-14s", t->name, t->family,
               t->priority, mask_text(t->kinds, FG_OPK_COUNT, kind_i, kinds, sizeof kinds),
               mask_text(t->dtypes, FG_DTYPE_COUNT, dtype_i, dtypes, sizeof dtypes));
        if (t->base)
            printf(" base %s, where \"%s\" (%s:%d)\n", t->base->name, t->where_src ? t->where_src : "",
                   t->loc.file ? t->loc.file : "?", t->loc.line);
        else
            printf(" %s\n", t->summary);
    }
}

int cmd_rules(int argc, char **argv)
{
    int check = argc == 3 && strcmp(argv[1], "check") == 0;
    int list = (argc == 2 || argc == 3) && strcmp(argv[1], "templates") == 0;
    if (!check && !list)
        return cli_usage("fusegen rules check DIR | fusegen rules templates [DIR]");
    fg_options o = {0};
    o.no_rules = argc == 3;
    int rc;
    fg_context *ctx = cli_context(NULL, &o, &rc);
    if (!ctx)
        return rc;
    fg_status st = argc == 3 ? fg_rules_load(ctx, argv[2]) : FG_OK;
    if (st != FG_OK) {
        rc = cli_report(ctx, st);
        fg_context_free(ctx);
        return rc;
    }
    if (list) {
        print_templates(ctx);
        fg_context_free(ctx);
        return 0;
    }
    int exprs = 0;   /* ops given by an expression: the vocabulary a rules directory adds without C */
    for (int i = 0; i < ctx->nops; i++)
        exprs += (fg_kind(ctx->ops[i]->kind)->traits & FG_KIND_EXPR) != 0;
    printf("%s: ok: %d ops (%d by expression), %d rules, %d registered templates\n", argv[2], ctx->nops, exprs,
           ctx->nrules, ctx->ntemplates);
    for (int i = 0; i < ctx->nrules; i++) {
        const fg_rule *r = ctx->rules[i];
        printf("  rule %-18s priority %3d  %d steps  template %-9s %s:%d\n", r->name, r->priority, r->nsteps,
               r->template_name ? r->template_name : "-", r->loc.file ? r->loc.file : "?", r->loc.line);
    }
    fg_context_free(ctx);
    return 0;
}
