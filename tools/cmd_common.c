/* cmd_common.c -- helpers shared by the subcommands (see cli.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_exit_code(fg_status st)
{
    switch (st) {
    case FG_OK:
        return 0;
    case FG_ERR_INPUT:
    case FG_ERR_HOOK:
        return 2;
    default:
        return 1;
    }
}

int cli_report(fg_context *ctx, fg_status st)
{
    char buf[4096];
    int n = fg_context_error_count(ctx);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
    if (st != FG_OK && n == 0)
        fprintf(stderr, "fusegen: error: %s\n", fg_status_name(st));
    if (n > 1)
        fprintf(stderr, "%d errors\n", n);
    return cli_exit_code(st);
}

fg_context *cli_context(const char *rules_dir, const fg_options *base, int *exit_code)
{
    fg_options o = {0};
    if (base)
        o = *base;
    o.rules_dir = rules_dir;
    fg_context *ctx = NULL;
    fg_status st = fg_context_init(&ctx, &o);
    if (st != FG_OK) {
        *exit_code = cli_report(ctx, st);
        fg_context_free(ctx);
        return NULL;
    }
    *exit_code = 0;
    return ctx;
}

int cli_load_plan(fg_context *ctx, const char *path, fg_graph **g, fg_plan **p)
{
    *g = NULL;
    *p = NULL;
    fg_status st = fg_graph_load(ctx, path, g);
    if (st == FG_OK)
        st = fg_plan_build(ctx, *g, p);
    if (st != FG_OK) {
        fg_plan_free(*p);
        fg_graph_free(*g);
        *p = NULL;
        *g = NULL;
        return cli_report(ctx, st);
    }
    return 0;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    if (strcmp(argv[*i], name) != 0)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "fusegen: usage: option %s needs a value\n", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

int cli_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fusegen: usage: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 2;
}
