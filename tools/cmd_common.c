/* cmd_common.c -- helpers shared by the subcommands (see cli.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_exit_code(fg_status st)
{
    switch (st) {
    case FG_OK:
        return 0;
    case FG_ERR_INPUT:
    case FG_ERR_HOOK:
    case FG_ERR_NOMEM:   /* what the input asked for does not fit in this machine's memory */
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

/* --dim values (cli_take_dims); names point into argv. */
static fg_onnx_dim cli_dims[64];
static fg_onnx_options cli_onnx = {.dims = cli_dims, .size = sizeof(fg_onnx_options)};
/* --precision (cli_take_dims): -1 when not given, the graph's own then */
static int cli_precision = -1;
int cli_shape_params;

/* Takes `--precision P` / `--precision=P` at argv[*i] into cli_precision:
 * 1 taken, 0 not this option, 2 usage error (printed). */
static int take_precision(int argc, char **argv, int *i)
{
    const char *v;
    if (strcmp(argv[*i], "--precision") == 0) {
        if (*i + 1 >= argc)
            return cli_usage("--precision needs exact or tf32");
        v = argv[++*i];
    } else if (strncmp(argv[*i], "--precision=", 12) == 0) {
        v = argv[*i] + 12;
    } else {
        return 0;
    }
    /* argv[0] is the command: only the ones that plan a graph take it */
    if (strcmp(argv[0], "rules") == 0 || strcmp(argv[0], "import") == 0)
        return cli_usage("--precision applies to the commands that plan a graph (plan, emit, compile, run, cache "
                         "warm), not '%s'", argv[0]);
    int p = fg_precision_parse(v);
    if (p < 0)
        return cli_usage("--precision takes exact or tf32, not '%s'", v);
    cli_precision = p;
    return 1;
}

int cli_take_dims(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        int tp = take_precision(*argc, argv, &i);
        if (tp == 2)
            return 2;
        if (tp == 1)
            continue;
        if (strcmp(argv[i], "--shape-params") == 0) {
            if (strcmp(argv[0], "compile") && strcmp(argv[0], "run") && strcmp(argv[0], "emit") &&
                strcmp(argv[0], "cache"))
                return cli_usage("--shape-params applies to the commands that emit kernels (emit, compile, run, "
                                 "cache warm), not '%s'", argv[0]);
            cli_shape_params = 1;
            continue;
        }
        if (strcmp(argv[i], "--dim") == 0) {
            if (i + 1 >= *argc)
                return cli_usage("--dim needs NAME=N");
            v = argv[++i];
        } else if (strncmp(argv[i], "--dim=", 6) == 0) {
            v = argv[i] + 6;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        char *eq = strchr(v, '='), *end;
        if (!eq || eq == v)
            return cli_usage("--dim takes NAME=N, not '%s'", v);
        long long n = strtoll(eq + 1, &end, 10);
        if (*end || !eq[1] || n < 1 || n > (1ll << 31))
            return cli_usage("--dim %s: the value must be an integer from 1 to 2^31", v);
        if (cli_onnx.ndims >= (int)(sizeof cli_dims / sizeof cli_dims[0]))
            return cli_usage("too many --dim options");
        *eq = 0;   /* argv strings are writable */
        cli_dims[cli_onnx.ndims++] = (fg_onnx_dim){v, n};
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

const fg_onnx_options *cli_onnx_options(void) { return cli_onnx.ndims ? &cli_onnx : NULL; }

fg_status cli_load_graph(fg_context *ctx, const char *path, fg_graph **g)
{
    fg_status st;
    if (cli_onnx.ndims)   /* --dim: the file must be an ONNX model */
        st = fg_graph_load_onnx(ctx, path, &cli_onnx, g);
    else
        st = fg_graph_load(ctx, path, g);
    if (st == FG_OK && cli_precision >= 0)   /* --precision overrides the graph's `precision:` */
        st = fg_graph_set_precision(ctx, *g, (fg_precision)cli_precision);
    return st;
}

int cli_load_plan(fg_context *ctx, const char *path, fg_graph **g, fg_plan **p)
{
    *g = NULL;
    *p = NULL;
    fg_status st = cli_load_graph(ctx, path, g);
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
