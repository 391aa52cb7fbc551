/*
 * bench_plan.c -- how long planning takes: loads the shipped rules, loads a
 * graph (examples/resnet50.yaml unless argv[1] names another) and plans it,
 * N times (argv[2], default 50), then prints the median and minimum of each
 * phase in milliseconds.  Target: rules load + plan under 20 ms.  The graph
 * load is reported apart: for a generated graph it is mostly the generation
 * of its random weights (25.5 M values for ResNet-50).
 *
 *   bench_plan [graph.yaml [runs]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "plan.h"
#include "util.h"

static void report(const char *what, double *v, int n)
{
    double med = fg_median(v, n);
    printf("%-12s median %8.3f ms   min %8.3f ms\n", what, med * 1e3, v[0] * 1e3);
}

static int fail(fg_context *ctx, const char *what)
{
    char buf[2048];
    fprintf(stderr, "bench_plan: %s failed\n", what);
    for (int i = 0; i < fg_context_error_count(ctx); i++)
        fprintf(stderr, "  %s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
    fg_context_free(ctx);
    return 1;
}

int main(int argc, char **argv)
{
    const char *graph = argc > 1 ? argv[1] : FG_SOURCE_DIR "/examples/resnet50.yaml";
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    const char *rules = getenv("FUSEGEN_RULES");
    if (!rules || !*rules)
        rules = FG_SOURCE_DIR "/rules";
    if (runs < 1)
        runs = 1;
    double *t_rules = fg_xcalloc((size_t)runs, sizeof(double)), *t_graph = fg_xcalloc((size_t)runs, sizeof(double));
    double *t_plan = fg_xcalloc((size_t)runs, sizeof(double)), *t_total = fg_xcalloc((size_t)runs, sizeof(double));
    double *t_match = fg_xcalloc((size_t)runs, sizeof(double)), *t_fold = fg_xcalloc((size_t)runs, sizeof(double));
    double *t_target = fg_xcalloc((size_t)runs, sizeof(double));
    int ops = 0, kernels = 0;
    for (int i = 0; i < runs; i++) {
        fg_context *ctx = NULL;
        fg_options o;
        memset(&o, 0, sizeof o);
        o.no_rules = 1;
        fg_context_init(&ctx, &o);
        ctx->quiet = 1;
        double t0 = fg_now();
        if (fg_rules_load(ctx, rules) != FG_OK)
            return fail(ctx, "loading the rules");
        double t1 = fg_now();
        fg_graph *g = NULL;
        if (fg_graph_load(ctx, graph, &g) != FG_OK)
            return fail(ctx, "loading the graph");
        double t2 = fg_now();
        fg_plan *p = NULL;
        if (fg_plan_build(ctx, g, &p) != FG_OK)
            return fail(ctx, "planning");
        double t3 = fg_now();
        fg_plan_stats s;
        fg_plan_get_stats(p, &s);
        ops = s.ops;
        kernels = s.kernels;
        t_rules[i] = t1 - t0;
        t_graph[i] = t2 - t1;
        t_plan[i] = t3 - t2;
        t_total[i] = t3 - t0;
        t_match[i] = p->match_ms * 1e-3;
        t_fold[i] = p->fold_ms * 1e-3;
        t_target[i] = (t1 - t0) + (t3 - t2);
        fg_plan_free(p);
        fg_graph_free(g);
        fg_context_free(ctx);
    }
    printf("bench_plan: %s, %d runs, %d ops -> %d kernels\n", graph, runs, ops, kernels);
    report("rules load", t_rules, runs);
    report("graph load", t_graph, runs);
    report("plan", t_plan, runs);
    report("  match", t_match, runs);
    report("  fold", t_fold, runs);
    report("total", t_total, runs);
    report("rules+plan", t_target, runs);
    free(t_rules);
    free(t_graph);
    free(t_plan);
    free(t_total);
    free(t_match);
    free(t_fold);
    free(t_target);
    return 0;
}
