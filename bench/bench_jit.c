/*
 * bench_jit.c -- what a kernel costs to obtain: emission, cold NVRTC
 * compilation (no cache), a memory-cache hit, a disk-cache hit (read +
 * verify), and beside it nvcc on the same source; then a whole plan compiled
 * cold on all cores.
 *
 *   bench_jit [GRAPH [WHOLE_GRAPH]] [--reps N] [--arch sm_XX] [--no-nvcc]
 *
 * GRAPH defaults to bench/jit_mix.yaml (one kernel of each kind), WHOLE_GRAPH to
 * examples/resnet50.yaml (paths relative to the source tree when not found).
 * Targets (reported, not asserted): cold NVRTC median < 100 ms for pointwise
 * and epilogue kernels, memory hit < 1 us, disk hit < 1 ms, ResNet-50 cold
 * < 10 s on all cores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "context.h"
#include "emit.h"
#include "jit.h"
#include "threadpool.h"

typedef struct row {
    double emit, cold, mem_fetch, mem_jit, disk, nvcc;
} row;

static double median(double *v, int n)
{
    return n > 0 ? fg_median(v, n) : -1;
}

static const char *find_path(const char *p, char *buf, size_t n)
{
    if (access(p, R_OK) == 0)
        return p;
    snprintf(buf, n, "%s/%s", FG_SOURCE_DIR, p);
    return buf;
}

static void fail(fg_context *ctx, const char *what)
{
    char buf[4096];
    fprintf(stderr, "bench_jit: %s failed\n", what);
    for (int i = 0; i < fg_context_error_count(ctx); i++)
        fprintf(stderr, "%s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
    exit(1);
}

/* Loads, plans and emits every kernel of a graph.  Returns the count. */
static int load_kernels(fg_context *ctx, const char *path, fg_graph **g, fg_plan **p, fg_kernel **ks)
{
    if (fg_graph_load(ctx, path, g) != FG_OK)
        fail(ctx, "loading the graph");
    if (fg_plan_build(ctx, *g, p) != FG_OK)
        fail(ctx, "planning");
    int n = fg_plan_group_count(*p);
    *ks = fg_xcalloc((size_t)(n ? n : 1), sizeof **ks);
    fg_emit_opts eo = {1};
    for (int i = 0; i < n; i++) {
        double t0 = fg_now();
        if (fg_emit_group(ctx, *p, i, &eo, &(*ks)[i]) != FG_OK)
            fail(ctx, "emission");
        (*ks)[i].emit_seconds = fg_now() - t0;
    }
    return n;
}

/* Times `nvcc -cubin` on k's source (with the prelude beside it); -1 when
 * nvcc is missing or fails. */
static double time_nvcc(const fg_kernel *k, const char *arch, const char *tmp)
{
    char *src = fg_path_join(tmp, "kernel.cu");
    fg_write_file_atomic(src, k->source, strlen(k->source));
    const char *pre = fg_template_text("prelude.cuh");
    char *pp = fg_path_join(tmp, "fusegen_prelude.cuh");
    if (pre)
        fg_write_file_atomic(pp, pre, strlen(pre));
    fg_buf cmd = {0};
    const char *nvcc = getenv("NVCC");
    if (!nvcc)
        nvcc = access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : "nvcc";
    fg_buf_printf(&cmd, "'%s' -cubin -arch=%s -std=c++17 -I'%s' -o '%s/kernel.cubin' '%s' >/dev/null 2>&1", nvcc,
                  arch, tmp, tmp, src);
    double t0 = fg_now();
    int rc = system(cmd.s);
    double t = fg_now() - t0;
    fg_buf_free(&cmd);
    free(src);
    free(pp);
    return rc == 0 ? t : -1;
}

int main(int argc, char **argv)
{
    const char *graph = NULL, *whole = NULL, *arch = "sm_90";
    int reps = 3, nvcc = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--no-nvcc"))
            nvcc = 0;
        else if (!graph)
            graph = argv[i];
        else
            whole = argv[i];
    }
    if (reps < 1)
        reps = 1;
    char b1[4096], b2[4096];
    graph = find_path(graph ? graph : "bench/jit_mix.yaml", b1, sizeof b1);
    whole = find_path(whole ? whole : "examples/resnet50.yaml", b2, sizeof b2);

    /* A context whose own cache is memory-only: every cold compile is real. */
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.arch = arch;
    if (fg_context_init(&ctx, &o) != FG_OK)
        fail(ctx, "loading the rules");
    ctx->quiet = 1;
    fg_graph *g;
    fg_plan *p;
    fg_kernel *ks;
    int n = load_kernels(ctx, graph, &g, &p, &ks);
    row *rows = fg_xcalloc((size_t)(n ? n : 1), sizeof *rows);
    fg_cache *mc = fg_ctx_cache(ctx);
    unsetenv("FUSEGEN_CACHE");

    char tmpl[] = "/tmp/fusegen-bench-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    if (!tmp) {
        perror("mkdtemp");
        return 1;
    }
    char *diskdir = fg_path_join(tmp, "cache");
    char *nvccdir = fg_path_join(tmp, "nvcc");
    fg_mkdir_p(nvccdir, 0755);

    printf("bench_jit: %s, %d kernels, %s, %s, %d reps\n", graph, n, arch, fg_nvrtc_version(), reps);
    fg_emit_opts eo = {1};
    for (int i = 0; i < n; i++) {
        fg_kernel *k = &ks[i];
        double v[64];
        int r = reps < 64 ? reps : 64;
        /* emission */
        for (int j = 0; j < r; j++) {
            fg_kernel t;
            memset(&t, 0, sizeof t);
            double t0 = fg_now();
            fg_emit_group(ctx, p, i, &eo, &t);
            v[j] = fg_now() - t0;
            fg_kernel_free(&t);
        }
        rows[i].emit = median(v, r);
        /* cold NVRTC: the memory-only cache emptied before each compile */
        for (int j = 0; j < r; j++) {
            fg_cache_clear(mc);
            fg_jit_info info;
            if (fg_jit_compile(ctx, k, arch, &info) != FG_OK)
                fail(ctx, "compilation");
            v[j] = info.seconds;
        }
        rows[i].cold = median(v, r);
        /* memory hit: the cache lookup alone, then the whole fg_jit_compile path */
        {
            const int N = 2000;
            void *d;
            size_t sz;
            double t0 = fg_now();
            for (int j = 0; j < N; j++) {
                fg_cache_fetch(mc, k->key, &d, &sz, NULL);
                free(d);
            }
            rows[i].mem_fetch = (fg_now() - t0) / N;
            t0 = fg_now();
            for (int j = 0; j < N; j++)
                fg_jit_compile(ctx, k, arch, NULL);
            rows[i].mem_jit = (fg_now() - t0) / N;
        }
        /* disk hit: a fresh cache object each time (read + verify + copy) */
        {
            fg_cache *dc = fg_cache_open(ctx, diskdir, 0);
            fg_cache_put(dc, k->key, k->binary, k->binary_size);
            fg_cache_close(dc);
            double dv[64];
            for (int j = 0; j < 64; j++) {
                dc = fg_cache_open(ctx, diskdir, 0);
                void *d;
                size_t sz;
                double t0 = fg_now();
                fg_cache_where w = fg_cache_fetch(dc, k->key, &d, &sz, NULL);
                dv[j] = fg_now() - t0;
                if (w != FG_CACHE_DISK)
                    dv[j] = -1;
                free(d);
                fg_cache_close(dc);
            }
            rows[i].disk = median(dv, 64);
        }
        rows[i].nvcc = nvcc ? time_nvcc(k, arch, nvccdir) : -1;
    }

    printf("\n%-4s %-34s %-10s %8s %9s %10s %11s %11s %10s %9s %8s\n", "#", "kernel", "template", "src B",
           "emit ms", "nvrtc ms", "mem hit us", "jit hit us", "disk us", "nvcc ms", "cubin B");
    double *col[6];
    for (int c = 0; c < 6; c++)
        col[c] = fg_xcalloc((size_t)(n ? n : 1), sizeof(double));
    double *pw = fg_xcalloc((size_t)(n ? n : 1), sizeof(double));
    int npw = 0, nn = 0;
    for (int i = 0; i < n; i++) {
        const fg_kernel *k = &ks[i];
        row *r = &rows[i];
        char nv[32];
        if (r->nvcc >= 0)
            snprintf(nv, sizeof nv, "%.1f", r->nvcc * 1e3);
        else
            snprintf(nv, sizeof nv, "%s", nvcc ? "fail" : "-");
        printf("%-4d %-34.34s %-10.10s %8zu %9.3f %10.1f %11.3f %11.3f %10.1f %9s %8zu\n", i, k->name,
               k->template_name ? k->template_name : "?", strlen(k->source), r->emit * 1e3, r->cold * 1e3,
               r->mem_fetch * 1e6, r->mem_jit * 1e6, r->disk * 1e6, nv, k->binary_size);
        col[0][i] = r->emit;
        col[1][i] = r->cold;
        col[2][i] = r->mem_fetch;
        col[3][i] = r->mem_jit;
        col[4][i] = r->disk;
        if (r->nvcc >= 0)
            col[5][nn++] = r->nvcc;
        if (k->template_name && strcmp(k->template_name, "pointwise") == 0)
            pw[npw++] = r->cold;
    }
    printf("\nmedians over %d kernels:\n", n);
    printf("  emission               %9.3f ms\n", median(col[0], n) * 1e3);
    printf("  cold NVRTC             %9.1f ms   (pointwise kernels: %.1f ms over %d; target < 100 ms)\n",
           median(col[1], n) * 1e3, npw ? median(pw, npw) * 1e3 : -1.0, npw);
    printf("  memory hit (lookup)    %9.3f us   (target < 1 us)\n", median(col[2], n) * 1e6);
    printf("  memory hit (jit path)  %9.3f us   (key hash + lookup + copy)\n", median(col[3], n) * 1e6);
    printf("  disk hit               %9.1f us   (target < 1000 us)\n", median(col[4], n) * 1e6);
    if (nn)
        printf("  nvcc -cubin            %9.1f ms   (%d kernels)\n", median(col[5], nn) * 1e3, nn);

    /* The whole plan, cold, on all cores. */
    if (access(whole, R_OK) == 0) {
        setenv("FUSEGEN_CACHE", "off", 1);
        fg_context *wc = NULL;
        fg_options wo = {0};
        wo.arch = arch;
        if (fg_context_init(&wc, &wo) != FG_OK)
            fail(wc, "loading the rules");
        wc->quiet = 1;
        fg_graph *wg;
        fg_plan *wp;
        fg_kernel *wks;
        double t0 = fg_now();
        int wn = load_kernels(wc, whole, &wg, &wp, &wks);
        double te = fg_now() - t0;
        t0 = fg_now();
        fg_status st = fg_jit_compile_all(wc, wks, wn, arch, NULL);
        double tc = fg_now() - t0;
        unsetenv("FUSEGEN_CACHE");
        printf("\nwhole plan %s: %d kernels, load+plan+emit %.1f ms, cold compile %.2f s wall on %d threads%s "
               "(target < 10 s)\n",
               whole, wn, te * 1e3, tc, fg_cpu_count(), st ? " FAILED" : "");
        for (int i = 0; i < wn; i++)
            fg_kernel_free(&wks[i]);
        free(wks);
        fg_plan_free(wp);
        fg_graph_free(wg);
        fg_context_free(wc);
    }

    for (int i = 0; i < n; i++)
        fg_kernel_free(&ks[i]);
    for (int c = 0; c < 6; c++)
        free(col[c]);
    free(pw);
    free(ks);
    free(rows);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_jit: could not remove %s\n", tmp);
    free(diskdir);
    free(nvccdir);
    return 0;
}
