/* cmd_compile.c -- `fusegen compile GRAPH [--rules DIR] [--arch sm_XX] [--jobs N]
 * [--report [--device-model NAME]]`: plan a graph, emit every kernel, compile
 * them all through the kernel cache and print where each binary came from and
 * what it cost; --report then prints the performance report of the compiled
 * kernels (runtime/report.c: resources, SASS mix, occupancy, roofline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cli.h"
#include "emit.h"
#include "device_model.h"
#include "jit.h"
#include "report.h"

#define USAGE "fusegen compile GRAPH [--rules DIR] [--arch sm_XX] [--jobs N] [--report [--device-model NAME]]"

static const char *const from_names[] = {"memory", "disk", "nvrtc", "remote", "shared"};
FG_STATIC_ASSERT(FG_COUNTOF(from_names) == FG_JIT_SOURCE_COUNT, "from_names out of sync");

/* Whether an NVRTC log holds only ptxas's own lines (--ptxas-options=-v),
 * which the report shows in its own way. */
static int ptxas_info_only(const char *log)
{
    for (const char *l = log; *l; l += strcspn(l, "\n"), l += *l == '\n')
        if (*l != '\n' && strncmp(l, "ptxas", 5) != 0)
            return 0;
    return 1;
}

int cmd_compile(int argc, char **argv)
{
    const char *graph = NULL, *rules = NULL, *arch = NULL, *jobs = NULL, *model_name = NULL;
    int report = 0;
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "--rules", &rules)) || (m = cli_opt(argc, argv, &i, "--arch", &arch)) ||
            (m = cli_opt(argc, argv, &i, "--jobs", &jobs)) ||
            (m = cli_opt(argc, argv, &i, "--device-model", &model_name))) {
            if (m < 0)
                return 2;
        } else if (!strcmp(argv[i], "--report")) {
            report = 1;
        } else if (argv[i][0] == '-' || graph) {
            return cli_usage(USAGE);
        } else {
            graph = argv[i];
        }
    }
    if (!graph)
        return cli_usage(USAGE);
    const fg_device_model *model = fg_device_model_default();
    if (model_name && !report)
        return cli_usage("--device-model is an option of --report");
    if (model_name && !(model = fg_device_model_find(model_name)))
        return cli_usage("unknown device model '%s' (known: %s)", model_name, fg_device_model_names());
    if (report && arch && strncmp(arch, "sm_", 3) != 0)
        return cli_usage("--report reads machine code: give --arch sm_XX, not '%s'", arch);
    fg_options o = {0};
    o.arch = arch ? arch : model_name ? model->arch : NULL;
    if (jobs) {
        char *end;
        long j = strtol(jobs, &end, 10);
        if (*end || j < 0 || j > 1024)
            return cli_usage("--jobs takes a number of threads (0: all cores), not '%s'", jobs);
        o.jobs = (int)j;
    }
    int rc;
    fg_context *ctx = cli_context(rules, &o, &rc);
    if (!ctx)
        return rc;
    fg_graph *g;
    fg_plan *p;
    rc = cli_load_plan(ctx, graph, &g, &p);
    if (rc) {
        fg_context_free(ctx);
        return rc;
    }
    const char *a = fg_jit_arch(ctx);
    fg_status st = fg_jit_check_arch(ctx, a);
    int n = fg_plan_group_count(p);
    fg_kernel *ks = fg_xcalloc((size_t)(n ? n : 1), sizeof *ks);
    fg_jit_info *infos = fg_xcalloc((size_t)(n ? n : 1), sizeof *infos);
    fg_emit_opts eo = {.specialize = !cli_shape_params};
    double emit_total = 0;
    for (int i = 0; i < n && st == FG_OK; i++) {
        double t0 = fg_now();
        st = fg_emit_group_guarded(ctx, p, i, &eo, &ks[i]);
        ks[i].emit_seconds = fg_now() - t0;
        emit_total += ks[i].emit_seconds;
    }
    double wall = 0;
    if (st == FG_OK) {
        fg_cache *c = fg_ctx_cache(ctx);
        const char *dir = fg_cache_dir(c);
        printf("compiling %d kernel%s for %s with %s (cache: %s; sizes %s)\n", n, n == 1 ? "" : "s", a,
               fg_nvrtc_version(), dir ? dir : "memory only",
               cli_shape_params ? "as parameters" : "as constants");
        double t0 = fg_now();
        st = fg_jit_compile_all(ctx, ks, n, a, infos);
        wall = fg_now() - t0;
        printf("%-4s %-40s %9s %11s %-7s %10s  %s\n", "#", "kernel", "emit ms", "compile ms", "from", "bytes", "key");
        int count[FG_JIT_SOURCE_COUNT] = {0}, failed = 0;
        size_t bytes = 0;
        for (int i = 0; i < n; i++) {
            if (!ks[i].binary) {
                printf("%-4d %-40s %9.2f %11s %-7s %10s\n", i, ks[i].name, ks[i].emit_seconds * 1e3, "-", "FAILED", "-");
                failed++;
                continue;
            }
            count[infos[i].from]++;
            bytes += ks[i].binary_size;
            printf("%-4d %-40s %9.2f %11.2f %-7s %10zu  %s\n", i, ks[i].name, ks[i].emit_seconds * 1e3,
                   infos[i].seconds * 1e3, from_names[infos[i].from], ks[i].binary_size, ks[i].key);
            if (infos[i].log[0] && !(report && ptxas_info_only(infos[i].log)))
                fprintf(stderr, "fusegen: warning: NVRTC log for kernel %s:\n%s\n", ks[i].name, infos[i].log);
        }
        printf("total: %d kernels, %d distinct (%d compiled, %d from disk, %d from memory, %d from the remote cache%s%.0d%s), "
               "emit %.1f ms, compile %.1f ms wall, %zu bytes\n",
               n, n - count[FG_JIT_SHARED], count[FG_JIT_COMPILED], count[FG_JIT_DISK], count[FG_JIT_MEMORY],
               count[FG_JIT_REMOTE],
               failed ? ", " : "", failed,
               failed ? " failed" : "", emit_total * 1e3, wall * 1e3, bytes);
        if (report && st == FG_OK && strncmp(a, "sm_", 3) == 0) {
            fg_report *R = NULL;
            st = fg_report_build(ctx, p, ks, infos, n, a, model, &R);
            if (st == FG_OK)
                printf("\n%s", fg_report_text(R));
            fg_report_free(R);
        } else if (report && st == FG_OK) {
            fprintf(stderr, "fusegen: --report reads machine code; the target %s gives PTX (set --arch sm_XX)\n", a);
        }
    }
    rc = cli_report(ctx, st);
    for (int i = 0; i < n; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    free(infos);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return rc;
}
