/*
 * cmd_emit.c -- `fusegen emit GRAPH [--rules DIR] [--shape-params] (-o DIR | --group N)`:
 * writes the CUDA source of every kernel of the graph's plan into DIR (one
 * .cu per kernel plus index.txt), or prints one kernel to stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"

#define EMIT_USAGE "emit GRAPH [--rules DIR] [--shape-params] (-o DIR | --group N)"

/* Writes index.txt: one line per kernel (group, name, rule, nodes, file). */
static int write_index(fg_context *ctx, const fg_plan *p, const fg_kernel *ks, const char *dir)
{
    fg_buf b = {0};
    fg_buf_put(&b, "# group\tkernel\trule\tnodes\tfile\n");
    for (int i = 0; i < p->ngroups; i++) {
        const fg_group *grp = &p->groups[i];
        fg_buf_printf(&b, "%d\t%s\t%s\t", i, ks[i].name, grp->rule >= 0 ? ctx->rules[grp->rule]->name : "-");
        for (int j = 0; j < grp->nnodes; j++)
            fg_buf_printf(&b, "%s%s", j ? "," : "", p->graph->nodes[grp->nodes[j]].name);
        fg_buf_printf(&b, "\tg%d_%s.cu\n", i, ks[i].name);
    }
    char *path = fg_path_join(dir, "index.txt");
    int rc = fg_write_file_atomic(path, b.s, b.len);
    if (rc != 0)
        fprintf(stderr, "fusegen: error: cannot write %s: %s\n", path, strerror(errno));
    free(path);
    fg_buf_free(&b);
    return rc == 0 ? 0 : 1;
}

int cmd_emit(int argc, char **argv)
{
    const char *graph = NULL, *rules = NULL, *outdir = NULL, *group_s = NULL;
    fg_emit_opts opts = {.specialize = !cli_shape_params};
    for (int i = 1; i < argc; i++) {  /* argv[0] is "emit" */
        int m;
        if ((m = cli_opt(argc, argv, &i, "--rules", &rules)) || (m = cli_opt(argc, argv, &i, "-o", &outdir)) ||
            (m = cli_opt(argc, argv, &i, "--group", &group_s))) {
            if (m < 0)
                return 2;
        } else if (strcmp(argv[i], "--no-specialize") == 0) {   /* the older spelling of --shape-params */
            opts.specialize = 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("unknown option '%s'; " EMIT_USAGE, argv[i]);
        } else if (!graph) {
            graph = argv[i];
        } else {
            return cli_usage("unexpected argument '%s'; " EMIT_USAGE, argv[i]);
        }
    }
    if (!graph || (!outdir && !group_s) || (outdir && group_s))
        return cli_usage(EMIT_USAGE);
    long group = -1;
    if (group_s) {
        char *end;
        group = strtol(group_s, &end, 10);
        if (*end || group < 0)
            return cli_usage("--group wants a group number, got '%s'", group_s);
    }

    int rc = 0;
    fg_context *ctx = cli_context(rules, NULL, &rc);
    if (!ctx)
        return rc;
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    if ((rc = cli_load_plan(ctx, graph, &g, &p)) != 0) {
        fg_context_free(ctx);
        return rc;
    }

    if (group_s) {
        fg_kernel k;
        if (group >= p->ngroups) {
            fprintf(stderr, "fusegen: error: %s has %d groups (0..%d), not %ld\n", graph, p->ngroups, p->ngroups - 1,
                    group);
            rc = 2;
        } else {
            fg_status st = fg_emit_group_guarded(ctx, p, (int)group, &opts, &k);
            if (st != FG_OK)
                rc = cli_report(ctx, st);
            else
                fputs(k.source, stdout);
            fg_kernel_free(&k);
        }
    } else {
        fg_kernel *ks = fg_xcalloc((size_t)(p->ngroups ? p->ngroups : 1), sizeof *ks);
        fg_status st = FG_OK;
        if (fg_mkdir_p(outdir, 0755) != 0) {
            fprintf(stderr, "fusegen: error: cannot create %s: %s\n", outdir, strerror(errno));
            rc = 1;
        }
        for (int i = 0; i < p->ngroups && rc == 0; i++) {
            st = fg_emit_group_guarded(ctx, p, i, &opts, &ks[i]);
            if (st != FG_OK) {
                rc = cli_report(ctx, st);
                break;
            }
            char name[96];   /* by group: twins share a kernel name, each keeps its source */
            snprintf(name, sizeof name, "g%d_%s.cu", i, ks[i].name);
            char *path = fg_path_join(outdir, name);
            if (fg_write_file_atomic(path, ks[i].source, strlen(ks[i].source)) != 0) {
                fprintf(stderr, "fusegen: error: cannot write %s: %s\n", path, strerror(errno));
                rc = 1;
            }
            free(path);
        }
        if (rc == 0)
            rc = write_index(ctx, p, ks, outdir);
        if (rc == 0)
            printf("%d kernels written to %s\n", p->ngroups, outdir);
        for (int i = 0; i < p->ngroups; i++)
            fg_kernel_free(&ks[i]);
        free(ks);
    }
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return rc;
}
