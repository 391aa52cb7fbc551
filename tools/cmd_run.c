/*
 * cmd_run.c -- `fusegen run GRAPH [--rules DIR] [--device auto|cuda|emu]
 * [--check] [--seed N] [--graph-replay] [--iters N]`: plans and compiles a
 * graph, runs it on fresh random inputs (the seed is printed so a run can be
 * repeated), prints per-kernel times, and with --check compares every graph
 * output against the host reference of the unfused source graph.
 *
 * Outputs are poisoned with NaN before the run, so an element no kernel wrote
 * fails the check.  Tolerance (relative L2 over the whole output) is by output
 * dtype and grows with the number of kernels the data passes through:
 *   tol = base(dtype) * sqrt(kernels),  base fp32 1e-5, fp16 3e-3, bf16 2e-2
 * and is printed beside each result.  Exit 0 when every output is within it,
 * 1 when not (or on a compile/device failure), 2 on bad input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cuda_driver.h"
#include "exec.h"
#include "reference.h"
#include "tensor_convert.h"

#define RUN_USAGE "fusegen run GRAPH [--rules DIR] [--device auto|cuda|emu] [--check] [--seed N] [--graph-replay] [--iters N]"

static double tolerance(fg_dtype t, int kernels)
{
    double base = t == FG_DTYPE_F16 ? 3e-3 : t == FG_DTYPE_BF16 ? 2e-2 : 1e-5;
    return base * sqrt(kernels > 1 ? kernels : 1);
}

static int parse_device(const char *s, fg_device *d)
{
    for (int i = 0; i < FG_DEVICE_COUNT; i++)
        if (!strcmp(s, fg_device_name((fg_device)i))) {
            *d = (fg_device)i;
            return 0;
        }
    return -1;
}

/* Compares output i of e (host data) with the reference; prints one row. */
static int check_output(const fg_exec *e, const fg_graph *src, double **ref, int i, const void *data, FILE *out)
{
    fg_tensor_info info;
    fg_exec_output_info(e, i, &info);
    int st = fg_graph_find_tensor(src, info.name);
    if (st < 0 || !ref[st]) {
        fprintf(out, "  %-28s FAIL (no such tensor in the source graph)\n", info.name);
        return 0;
    }
    const fg_tensor *pt = &src->tensors[st];
    int64_t n = fg_tensor_numel(pt);
    fg_tensor t = *pt;           /* the source's shape with the compiled dtype/layout */
    t.dtype = info.dtype;
    t.layout = info.layout;
    double *got = fg_xmalloc((size_t)(n ? n : 1) * sizeof *got);
    fg_tensor_unpack(&t, info.layout, data, got);
    double max_abs = 0;
    double rel = fg_rel_l2(got, ref[st], n, &max_abs);
    int64_t nans = 0;
    for (int64_t k = 0; k < n; k++)
        nans += got[k] != got[k];
    double tol = tolerance(info.dtype, fg_exec_kernel_count(e));
    int ok = nans == 0 && rel <= tol;
    fprintf(out, "  %-28s %-5s %10.3e %10.3e %10.1e  %s", info.name, fg_dtype_name(info.dtype), max_abs, rel, tol,
            ok ? "ok" : "FAIL");
    if (nans)
        fprintf(out, " (%lld of %lld elements NaN: not written)", (long long)nans, (long long)n);
    fprintf(out, "\n");
    free(got);
    return ok;
}

int cmd_run(int argc, char **argv)
{
    const char *graph = NULL, *rules = NULL, *device = "auto", *seed_s = NULL, *iters_s = NULL;
    int check = 0, replay = 0;
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "--rules", &rules)) || (m = cli_opt(argc, argv, &i, "--device", &device)) ||
            (m = cli_opt(argc, argv, &i, "--seed", &seed_s)) || (m = cli_opt(argc, argv, &i, "--iters", &iters_s))) {
            if (m < 0)
                return 2;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else if (!strcmp(argv[i], "--graph-replay")) {
            replay = 1;
        } else if (argv[i][0] == '-' || graph) {
            return cli_usage(RUN_USAGE);
        } else {
            graph = argv[i];
        }
    }
    fg_device dev;
    if (!graph)
        return cli_usage(RUN_USAGE);
    if (parse_device(device, &dev))
        return cli_usage("--device must be auto, cuda or emu, not '%s'", device);
    uint64_t seed;
    if (seed_s) {
        char *end;
        seed = strtoull(seed_s, &end, 0);
        if (*end || !*seed_s)
            return cli_usage("--seed takes an integer, not '%s'", seed_s);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
        seed &= 0xffffffffffull;
    }
    long iters = 1;
    if (iters_s) {
        char *end;
        iters = strtol(iters_s, &end, 10);
        if (*end || iters < 1 || iters > 1000000)
            return cli_usage("--iters takes a count from 1 to 1000000, not '%s'", iters_s);
    }

    int rc;
    fg_options opts = {.device = dev};
    fg_context *ctx = cli_context(rules, &opts, &rc);
    if (!ctx)
        return rc;
    const char *why = "";
    if (dev == FG_DEVICE_AUTO) {
        char arch[16];
        why = fg_cuda_device_arch(ctx, arch) == 0 ? " (auto: GPU found)" : " (auto: no CUDA driver or GPU)";
    }
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    fg_exec *e = NULL;
    double **ref = NULL;
    void **bufs = NULL;
    int nio = 0;
    double *ksum = NULL;
    if ((rc = cli_load_plan(ctx, graph, &g, &p)) != 0)
        goto done;
    fg_compile_options co = {.device = dev, .graph_replay = replay, .timing = 1};
    double t0 = fg_now();
    fg_status st = fg_plan_compile(ctx, p, &co, &e);
    if (st) {
        rc = cli_report(ctx, st);
        goto done;
    }
    double compile_s = fg_now() - t0;
    fg_device used = fg_exec_device(e);
    printf("run %s: device %s%s%s%s, seed %llu, %d kernels (compiled in %.2f s)\n", graph, fg_device_name(used), why,
           used == FG_DEVICE_CUDA ? " on " : "", used == FG_DEVICE_CUDA ? fg_cuda_device_name() : "",
           (unsigned long long)seed, fg_exec_kernel_count(e), compile_s);

    /* Inputs from the seeded values (rounded to the input dtype, so the
     * reference sees exactly what the kernels read); outputs poisoned. */
    ref = fg_xcalloc((size_t)g->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(g, seed, ref);
    int nin = fg_exec_input_count(e), nout = fg_exec_output_count(e);
    nio = nin + nout;
    bufs = fg_xcalloc((size_t)nio + 1, sizeof *bufs);
    fg_binding *b = fg_xcalloc((size_t)nio + 1, sizeof *b);
    for (int i = 0; i < nio; i++) {
        fg_tensor_info info;
        if (i < nin)
            fg_exec_input_info(e, i, &info);
        else
            fg_exec_output_info(e, i - nin, &info);
        bufs[i] = fg_xmalloc(info.bytes ? info.bytes : 1);
        b[i].name = info.name;
        b[i].data = bufs[i];
        if (i >= nin) {
            memset(bufs[i], 0xFF, info.bytes);   /* NaN in every dtype */
            continue;
        }
        int t = fg_graph_find_tensor(g, info.name);
        fg_tensor pt = g->tensors[t];
        pt.dtype = info.dtype;
        pt.layout = info.layout;
        int64_t n = fg_tensor_numel(&pt);
        for (int64_t k = 0; k < n; k++)
            ref[t][k] = fg_round_to_dtype(ref[t][k], info.dtype);
        fg_tensor_pack(&pt, info.layout, ref[t], bufs[i]);
    }
    int nk = fg_exec_kernel_count(e);
    ksum = fg_xcalloc((size_t)nk + 1, sizeof *ksum);
    /* Per-run totals: the first run includes one-time work (graph capture)
     * and is left out when there are more. */
    double *totals = fg_xcalloc((size_t)iters, sizeof *totals);
    long ntot = 0;
    for (long it = 0; it < iters && !st; it++) {
        if (it == 1) {
            memset(ksum, 0, (size_t)nk * sizeof *ksum);
            ntot = 0;
        }
        st = fg_exec_run_host(e, b, nio);
        for (int k = 0; k < nk && !st; k++)
            ksum[k] += fg_exec_kernel_ms(e, k);
        totals[ntot++] = fg_exec_total_ms(e);
    }
    double median = fg_median(totals, (int)ntot);
    free(totals);
    free(b);
    if (st) {
        rc = cli_report(ctx, st);
        goto done;
    }
    long counted = iters > 1 ? iters - 1 : 1;
    printf("\n  %-4s %-40s %-12s %12s\n", "#", "kernel", "template", "mean (ms)");
    for (int k = 0; k < nk; k++) {
        const fg_kernel *K = fg_exec_kernel(e, k);
        if (fg_exec_kernel_ms(e, k) < 0)
            printf("  %-4d %-40s %-12s %12s\n", k, K->name, K->template_name ? K->template_name : "?", "-");
        else
            printf("  %-4d %-40s %-12s %12.4f\n", k, K->name, K->template_name ? K->template_name : "?",
                   ksum[k] / counted);
    }
    printf("  total %.4f ms per run (%s, median of %ld run%s%s); arena %zu bytes (%zu without reuse)\n",
           median, used == FG_DEVICE_CUDA ? "CUDA events" : "wall clock", counted, counted > 1 ? "s" : "",
           iters > 1 ? " after the first" : "", fg_exec_arena_bytes(e), fg_exec_intermediate_bytes(e));

    if (check) {
        st = fg_reference_run(ctx, g, ref);
        if (st) {
            rc = cli_report(ctx, st);
            goto done;
        }
        printf("\n  check against the unfused reference (tolerance: relative L2 <= base(dtype) * sqrt(kernels))\n");
        printf("  %-28s %-5s %10s %10s %10s  %s\n", "output", "dtype", "max_abs", "rel_l2", "tolerance", "result");
        int ok = 1;
        for (int i = 0; i < nout; i++)
            ok &= check_output(e, g, ref, i, bufs[nin + i], stdout);
        if (!ok) {
            fprintf(stderr, "fusegen: check failed (seed %llu): outputs differ from the reference beyond tolerance\n",
                    (unsigned long long)seed);
            rc = 1;
        } else {
            printf("  all %d output%s within tolerance\n", nout, nout == 1 ? "" : "s");
        }
    }
done:
    if (ref) {
        fg_reference_free(g, ref);
        free(ref);
    }
    for (int i = 0; bufs && i < nio; i++)
        free(bufs[i]);
    free(bufs);
    free(ksum);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return rc;
}
