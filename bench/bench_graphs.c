/*
 * bench_graphs.c -- times many graphs in one process, for the side-by-side
 * benchmark of bench/device-check.sh: one context, every graph of a list
 * planned, all their kernels compiled at once on the thread pool (so a
 * hundred small graphs cost one parallel compile, not a hundred), then each
 * plan compiled with CUDA-graph replay and timing on, run `warmup` times and
 * then `iters` times; the time of a run is the CUDA-event time around the
 * graph launch (fg_exec_total_ms; wall clock in emulation, which has no
 * launch graphs).  Prints one line per graph:
 *
 *   ID <tab> kernels <tab> median_ms <tab> min_ms          or
 *   ID <tab> - <tab> FAIL <tab> the first error
 *
 *   bench_graphs [--rules DIR] [--device cuda|emu] [--precision exact|tf32]
 *                [--warmup N] [--iters N] LIST
 *
 * LIST holds "ID<tab>graph.yaml" lines.  Inputs are seeded uniform values in
 * [-1, 1); outputs are not checked (device-check.sh checks numerics with
 * `fusegen run --check` first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "context.h"
#include "emit.h"
#include "exec.h"
#include "kcache.h"
#include "plan.h"
#include "util.h"

#define MAX_GRAPHS 4096

typedef struct entry {
    char id[128];
    char path[1024];
    fg_graph *g;
    fg_plan *p;
    char error[512];
} entry;

static void last_error(fg_context *ctx, char *out, size_t size)
{
    int n = fg_context_error_count(ctx);
    char buf[1024];
    snprintf(out, size, "%s", n ? fg_error_format(fg_context_error(ctx, n - 1), buf, sizeof buf) : "failed");
    for (char *s = out; *s; s++)
        if (*s == '\t' || *s == '\n')
            *s = ' ';
    fg_context_clear_errors(ctx);
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_graphs [--rules DIR] [--device cuda|emu] [--precision exact|tf32] [--warmup N] "
                    "[--iters N] LIST\n");
    return 2;
}

/* Runs e once per iteration with seeded inputs; fills times[0..iters). */
static fg_status time_exec(fg_exec *e, int warmup, int iters, double *times)
{
    int nin = fg_exec_input_count(e), nout = fg_exec_output_count(e), n = nin + nout;
    fg_binding *b = fg_xcalloc((size_t)n, sizeof *b);
    void **bufs = fg_xcalloc((size_t)n, sizeof *bufs);
    fg_status st = FG_OK;
    uint64_t seed = 12345;
    for (int i = 0; i < n && !st; i++) {
        fg_tensor_info info;
        st = i < nin ? fg_exec_input_info(e, i, &info) : fg_exec_output_info(e, i - nin, &info);
        if (st)
            break;
        bufs[i] = fg_xcalloc(info.bytes ? info.bytes : 1, 1);
        b[i].name = info.name;
        b[i].data = bufs[i];
        if (i < nin) {
            size_t es = info.dtype == FG_DTYPE_F32 ? 4 : 2, cnt = info.bytes / es;
            float *f = fg_xmalloc((cnt ? cnt : 1) * sizeof *f);
            for (size_t k = 0; k < cnt; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                f[k] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1);
            }
            st = fg_convert_dtype(f, FG_DTYPE_F32, bufs[i], info.dtype, cnt);
            free(f);
        }
    }
    for (int it = 0; it < warmup + iters && !st; it++) {
        st = fg_exec_run_host(e, b, n);
        if (!st && it >= warmup)
            times[it - warmup] = fg_exec_total_ms(e);
    }
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(b);
    return st;
}

int main(int argc, char **argv)
{
    const char *rules = NULL, *list = NULL, *device = "cuda", *precision = NULL;
    int warmup = 5, iters = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rules") && i + 1 < argc)
            rules = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc)
            precision = argv[++i];
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (argv[i][0] == '-' || list)
            return usage();
        else
            list = argv[i];
    }
    fg_device dev = !strcmp(device, "cuda") ? FG_DEVICE_CUDA : !strcmp(device, "emu") ? FG_DEVICE_EMU : FG_DEVICE_COUNT;
    int prec = precision ? fg_precision_parse(precision) : FG_PRECISION_EXACT;
    if (!list || dev == FG_DEVICE_COUNT || prec < 0 || warmup < 0 || iters < 1 || iters > 100000)
        return usage();
    FILE *f = fopen(list, "r");
    if (!f) {
        perror(list);
        return 1;
    }
    entry *es = fg_xcalloc(MAX_GRAPHS, sizeof *es);
    int n = 0;
    char line[2048];
    while (fgets(line, sizeof line, f) && n < MAX_GRAPHS) {
        line[strcspn(line, "\r\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab || line[0] == '#')
            continue;
        *tab = 0;
        snprintf(es[n].id, sizeof es[n].id, "%s", line);
        snprintf(es[n].path, sizeof es[n].path, "%s", tab + 1);
        n++;
    }
    fclose(f);

    fg_options o = {0};
    o.rules_dir = rules;
    o.device = dev;
    fg_context *ctx = NULL;
    if (fg_context_init(&ctx, &o) != FG_OK) {
        char err[512];
        last_error(ctx, err, sizeof err);
        fprintf(stderr, "bench_graphs: %s\n", err);
        fg_context_free(ctx);
        free(es);
        return 1;
    }
    /* plan every graph */
    int total = 0;
    for (int i = 0; i < n; i++) {
        entry *E = &es[i];
        fg_status st = fg_graph_load(ctx, E->path, &E->g);
        if (!st && prec != FG_PRECISION_EXACT)
            st = fg_graph_set_precision(ctx, E->g, (fg_precision)prec);
        if (!st)
            st = fg_plan_build(ctx, E->g, &E->p);
        if (st)
            last_error(ctx, E->error, sizeof E->error);
        else
            total += fg_plan_group_count(E->p);
    }
    /* compile every kernel at once (the memory cache keeps the binaries for
     * fg_plan_compile below) */
    double t0 = fg_now();
    fg_kernel *ks = fg_xcalloc((size_t)(total ? total : 1), sizeof *ks);
    int nk = 0;
    fg_emit_opts eo = {.specialize = 1};   /* as fg_plan_compile emits them */
    for (int i = 0; i < n; i++)
        for (int g = 0; es[i].p && g < fg_plan_group_count(es[i].p); g++)
            if (fg_emit_group(ctx, es[i].p, g, &eo, &ks[nk]) == FG_OK)
                nk++;
    const fg_backend *be = fg_backend_choose(ctx, dev);
    if (be && nk)
        fg_kernel_obtain_all(ctx, be, ks, nk, NULL, NULL);
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    fg_context_clear_errors(ctx);
    fprintf(stderr, "bench_graphs: %d graphs, %d kernels compiled or found in %.1f s\n", n, nk, fg_now() - t0);

    double *times = fg_xcalloc((size_t)iters, sizeof *times);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        entry *E = &es[i];
        fg_exec *e = NULL;
        if (!E->error[0]) {
            fg_compile_options co = {.device = dev, .graph_replay = 1, .timing = 1, .size = sizeof co};
            fg_status st = fg_plan_compile(ctx, E->p, &co, &e);
            if (!st)
                st = time_exec(e, warmup, iters, times);
            if (st)
                last_error(ctx, E->error, sizeof E->error);
        }
        if (E->error[0]) {
            printf("%s\t-\tFAIL\t%s\n", E->id, E->error);
            failed++;
        } else {
            double med = fg_median(times, iters), lo = times[0];
            for (int k = 0; k < iters; k++)
                lo = times[k] < lo ? times[k] : lo;
            printf("%s\t%d\t%.4f\t%.4f\n", E->id, fg_exec_kernel_count(e), med, lo);
        }
        fflush(stdout);
        fg_exec_free(e);
        fg_plan_free(E->p);
        fg_graph_free(E->g);
    }
    free(times);
    free(es);
    fg_context_free(ctx);
    return failed ? 1 : 0;
}
