/* cmd_rules.c -- `fusegen rules check DIR`: load a rules directory and report
 * every error in it; on success print what it defines. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_rules(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "check") != 0)
        return cli_usage("fusegen rules check DIR");
    fg_options o = {0};
    o.no_rules = 1;
    int rc;
    fg_context *ctx = cli_context(NULL, &o, &rc);
    if (!ctx)
        return rc;
    fg_status st = fg_rules_load(ctx, argv[2]);
    if (st != FG_OK) {
        rc = cli_report(ctx, st);
        fg_context_free(ctx);
        return rc;
    }
    int pointwise = 0;
    for (int i = 0; i < ctx->nops; i++)
        pointwise += ctx->ops[i]->kind == FG_OPK_POINTWISE;
    printf("%s: ok: %d ops (%d pointwise), %d rules\n", argv[2], ctx->nops, pointwise, ctx->nrules);
    for (int i = 0; i < ctx->nrules; i++) {
        const fg_rule *r = ctx->rules[i];
        printf("  rule %-18s priority %3d  %d steps  template %-9s %s:%d\n", r->name, r->priority, r->nsteps,
               r->template_name ? r->template_name : "-", r->loc.file ? r->loc.file : "?", r->loc.line);
    }
    fg_context_free(ctx);
    return 0;
}
