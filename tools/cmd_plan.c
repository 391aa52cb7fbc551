/* cmd_plan.c -- `fusegen plan GRAPH [--rules DIR] [--explain] [--dot FILE]`:
 * match the rules on a graph and print the fused groups. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "plan.h"

int cmd_plan(int argc, char **argv)
{
    const char *graph = NULL, *rules = NULL, *dot = NULL;
    int explain = 0;
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "--rules", &rules)) || (m = cli_opt(argc, argv, &i, "--dot", &dot))) {
            if (m < 0)
                return 2;
        } else if (!strcmp(argv[i], "--explain")) {
            explain = 1;
        } else if (argv[i][0] == '-' || graph) {
            return cli_usage("fusegen plan GRAPH [--rules DIR] [--explain] [--dot FILE]");
        } else {
            graph = argv[i];
        }
    }
    if (!graph)
        return cli_usage("fusegen plan GRAPH [--rules DIR] [--explain] [--dot FILE]");
    int rc;
    fg_context *ctx = cli_context(rules, NULL, &rc);
    if (!ctx)
        return rc;
    fg_graph *g;
    fg_plan *p;
    rc = cli_load_plan(ctx, graph, &g, &p);
    if (rc == 0) {
        fg_plan_print_opts po = {explain};
        fg_plan_print(ctx, p, &po, stdout);
        if (dot) {
            FILE *f = strcmp(dot, "-") ? fopen(dot, "w") : stdout;
            if (!f) {
                perror(dot);
                rc = 1;
            } else {
                fg_plan_dot(ctx, p, f);
                if (f != stdout)
                    fclose(f);
            }
        }
    }
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return rc;
}
