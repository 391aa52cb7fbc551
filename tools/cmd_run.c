/*
 * cmd_run.c -- `fusegen run GRAPH [--rules DIR] [--device auto|cuda|emu]
 * [--check] [--seed N] [--graph-replay] [--iters N] [--input NAME=FILE.npy]...
 * [--save-outputs DIR] [--save-reference DIR]`: plans and compiles a graph,
 * runs it on fresh random inputs (the seed is printed so a run can be
 * repeated) or on inputs read from .npy files, prints per-kernel times, and
 * with --check compares every graph output against the host reference of the
 * unfused source graph.  --save-outputs writes each output as
 * DIR/<name>.npy; --save-reference writes the reference's (float64).
 *
 * Outputs are poisoned (every bit set: a NaN in every dtype) before the run,
 * so an element no kernel wrote fails the check.  Where the reference itself
 * is NaN or infinite the kernel must give the same (NaN for NaN, the same
 * infinity); the relative L2 error is taken over the other elements.
 * Tolerance is by output dtype and grows with the number of kernels the data
 * passes through:
 *   tol = base(dtype) * sqrt(kernels),  base fp32 1e-5, fp16 3e-3, bf16 2e-2
 * (fp32 under precision tf32: 3e-3, as fp16, since tf32 keeps fp16's
 * 10-bit mantissa in the products)
 * and is printed beside each result.  Exit 0 when every output is within it,
 * 1 when not (or on a compile/device failure, or a file that cannot be
 * written), 2 on bad input (an --input file of the wrong shape or dtype
 * included).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cuda_driver.h"
#include "exec.h"
#include "reference.h"
#include "shape.h"
#include "tensor_convert.h"
#include "weights_file.h"

#define RUN_USAGE                                                                                                      \
    "fusegen run GRAPH [--rules DIR] [--device auto|cuda|emu] [--check] [--seed N] [--graph-replay] [--iters N]\n"     \
    "                      [--input NAME=FILE.npy]... [--save-outputs DIR] [--save-reference DIR]"
#define MAX_FILE_INPUTS 256

/* Host memory sized by tensor t of g (-1: the graph as a whole), checked:
 * NULL after recording "out of host memory" located at the tensor's
 * declaration (the graph's file when it has none), naming what it was for.
 * Everything here that is sized by the graph's tensors allocates through it,
 * so that a graph too large for this machine is an error, not an abort. */
static void *run_alloc(fg_context *ctx, const fg_graph *g, int t, size_t bytes, const char *what)
{
    void *p = bytes == SIZE_MAX ? NULL : malloc(bytes ? bytes : 1);
    if (p)
        return p;
    fg_loc loc = {g->path, 0, 0};
    if (t >= 0 && g->tensors[t].loc.file)
        loc = g->tensors[t].loc;
    fg_diag_error(ctx, FG_ERR_NOMEM, loc, "out of host memory: %zu bytes for %s of tensor '%s'", bytes, what,
                  t >= 0 ? fg_tensor_user_name(&g->tensors[t]) : g->name);
    return NULL;
}

/* n elements of size es, or SIZE_MAX when the product does not fit (for
 * messages). */
static size_t nbytes(int64_t n, size_t es)
{
    return n < 0 || (uint64_t)n > SIZE_MAX / es ? SIZE_MAX : (size_t)n * es;
}

/* malloc of n (at least one) elements of size es; NULL when it fails or the
 * size does not fit. */
static void *alloc_n(int64_t n, size_t es)
{
    size_t b = nbytes(n > 0 ? n : 1, es);
    return b == SIZE_MAX ? NULL : malloc(b);
}

static double tolerance(fg_dtype t, fg_precision p, int kernels)
{
    double base = t == FG_DTYPE_F16 ? 3e-3 : t == FG_DTYPE_BF16 ? 2e-2 : p == FG_PRECISION_TF32 ? 3e-3 : 1e-5;
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

/* Nonzero when element k (logical order) of the output buffer still holds
 * the poison written before the run: every bit set. */
static int unwritten(const fg_tensor_info *info, const void *data, int64_t k)
{
    size_t es = fg_dtype_size(info->dtype);
    const unsigned char *p = (const unsigned char *)data + fg_layout_offset(info->rank, info->shape, info->layout, k) * es;
    for (size_t b = 0; b < es; b++)
        if (p[b] != 0xFF)
            return 0;
    return 1;
}

/* Compares output i of e (host data) with the reference; prints one row.
 * NaN in the reference must be NaN in the kernel's output and an infinity
 * the same infinity; those elements are matched exactly and the relative L2
 * error is taken over the elements where both are finite.  Each kind of
 * mismatch is named: elements not written (still the poison), NaN or
 * infinities the reference does not have, and numbers where the reference
 * is NaN or infinite. */
static int check_output(fg_context *ctx, const fg_exec *e, const fg_graph *src, double **ref, int i, const void *data,
                        FILE *out)
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
    size_t nb = nbytes(n, sizeof(double));
    double *got = run_alloc(ctx, src, st, nb, "checking the output");
    double *fa = got ? run_alloc(ctx, src, st, nb, "checking the output") : NULL;
    double *fb = fa ? run_alloc(ctx, src, st, nb, "checking the output") : NULL;
    if (!fb) {
        fprintf(out, "  %-28s FAIL (out of host memory)\n", info.name);
        free(got);
        free(fa);
        return -1;
    }
    fg_tensor_unpack(&t, info.layout, data, got);
    int64_t nf = 0, not_written = 0, extra_nan = 0, missing_nan = 0, bad_inf = 0, ref_nan = 0, ref_inf = 0;
    for (int64_t k = 0; k < n; k++) {
        double g = got[k], r = ref[st][k];
        if (isnan(r)) {
            ref_nan++;
            missing_nan += !isnan(g);
        } else if (isnan(g)) {
            if (unwritten(&info, data, k))
                not_written++;
            else
                extra_nan++;
        } else if (isinf(r) || isinf(g)) {
            ref_inf += isinf(r) != 0;
            bad_inf += g != r;
        } else {
            fa[nf] = g;
            fb[nf++] = r;
        }
    }
    double max_abs = 0;
    double rel = fg_rel_l2(fa, fb, nf, &max_abs);
    double tol = tolerance(info.dtype, fg_graph_precision(src), fg_exec_kernel_count(e));
    int ok = not_written + extra_nan + missing_nan + bad_inf == 0 && rel <= tol;
    fprintf(out, "  %-28s %-5s %10.3e %10.3e %10.1e  %s", info.name, fg_dtype_name(info.dtype), max_abs, rel, tol,
            ok ? "ok" : "FAIL");
    if (not_written)
        fprintf(out, " (%lld of %lld elements not written)", (long long)not_written, (long long)n);
    if (extra_nan)
        fprintf(out, " (%lld elements NaN where the reference is a number)", (long long)extra_nan);
    if (missing_nan)
        fprintf(out, " (%lld elements not NaN where the reference is NaN)", (long long)missing_nan);
    if (bad_inf)
        fprintf(out, " (%lld elements differ where one side is infinite)", (long long)bad_inf);
    if (ref_nan + ref_inf)
        fprintf(out, " (the reference has %lld NaN and %lld infinite elements%s)", (long long)ref_nan,
                (long long)ref_inf, missing_nan + bad_inf ? "" : ", matched");
    fprintf(out, "\n");
    free(got);
    free(fa);
    free(fb);
    return ok;
}

/* The file name an output is saved under: its name with every byte other
 * than letters, digits, '_', '.' and '-' replaced by '_' (and a leading '.'
 * too), then ".npy". */
static void npy_file_name(const char *name, char *out, size_t size)
{
    size_t o = 0;
    for (size_t k = 0; name[k] && o + 5 < size; k++) {
        char c = name[k];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                   c == '-' || (c == '.' && k > 0);
        out[o++] = keep ? c : '_';
    }
    snprintf(out + o, size - o, ".npy");
}

/* Writes values[0..numel) of a tensor with this logical shape to
 * dir/<name>.npy as type; names[] remembers the file names written so that
 * two outputs never share one.  Returns 0, or 1 after a message. */
static int save_npy(const char *dir, const char *name, int rank, const int64_t *shape, const double *values,
                    fg_npy_type type, char (*names)[300], int *nnames)
{
    char file[300], why[300];
    npy_file_name(name, file, sizeof file);
    for (int k = 0; k < *nnames; k++)
        if (strcmp(names[k], file) == 0) {
            fprintf(stderr, "fusegen: outputs '%s' and another one would both be saved as %s/%s\n", name, dir, file);
            return 1;
        }
    snprintf(names[(*nnames)++], 300, "%s", file);
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    static const size_t esz[] = {[FG_NPY_F32] = 4, [FG_NPY_F16] = 2, [FG_NPY_F64] = 8,
                                 [FG_NPY_I64] = 8, [FG_NPY_I32] = 4, [FG_NPY_BOOL] = 1};
    void *buf = alloc_n(n, esz[type]);
    if (!buf) {
        fprintf(stderr, "fusegen: error: out of host memory: %zu bytes saving output '%s'\n", nbytes(n, esz[type]),
                name);
        return 2;
    }
    for (int64_t k = 0; k < n; k++) {
        switch (type) {   /* integer results are whole numbers already (stored truncated) */
        case FG_NPY_F64: ((double *)buf)[k] = values[k]; break;
        case FG_NPY_F32: ((float *)buf)[k] = (float)values[k]; break;
        case FG_NPY_F16: ((uint16_t *)buf)[k] = fg_f32_to_f16((float)values[k]); break;
        case FG_NPY_I64: ((int64_t *)buf)[k] = (int64_t)values[k]; break;
        case FG_NPY_I32: ((int32_t *)buf)[k] = (int32_t)values[k]; break;
        case FG_NPY_BOOL: ((uint8_t *)buf)[k] = values[k] != 0; break;
        }
    }
    char *path = fg_path_join(dir, file);
    int rc = fg_npy_write(path, type, rank, shape, buf, why, sizeof why);
    if (rc)
        fprintf(stderr, "fusegen: cannot write %s: %s\n", path, why);
    free(path);
    free(buf);
    return rc ? 1 : 0;
}

/* Creates dir (and its parents) for --save-outputs / --save-reference. */
static int make_dir(const char *dir)
{
    if (fg_mkdir_p(dir, 0755) != 0) {
        fprintf(stderr, "fusegen: cannot create directory %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* Reads --input NAME=FILE into ref[t] (logical order) for graph input t of
 * the compiled plan (info): the file's shape must be the input's logical
 * shape (a scalar or [1] for a rank-0 input) and its dtype the input's
 * (float32 for fp32 and bf16 inputs, whose values are rounded to bf16 like
 * random ones; float16 for fp16; float64 or float32 for an input the model
 * declares float64).  Returns 0, or 2 after a message. */
static int read_input(const char *spec, const char *file, const fg_tensor_info *info, double *dst)
{
    char why[400];
    fg_file_tensor ft;
    if (fg_npy_read_input(file, (int64_t)1 << 31, &ft, why, sizeof why) != 0) {
        fprintf(stderr, "fusegen: --input %s: %s\n", spec, why);
        return 2;
    }
    int same = ft.rank == info->rank || (info->rank == 0 && ft.rank == 1 && ft.shape[0] == 1);
    for (int d = 0; same && d < ft.rank && info->rank; d++)
        same = ft.shape[d] == info->shape[d];
    fg_dtype want = info->dtype == FG_DTYPE_BF16 ? FG_DTYPE_F32 : info->dtype;
    int rc = 0;
    if (!same) {
        char a[160], b[160];
        fprintf(stderr, "fusegen: --input %s: the file holds shape %s but input '%s' has shape %s\n", spec,
                fg_shape_str(ft.shape, ft.rank, a, sizeof a), info->name, fg_shape_str(info->shape, info->rank, b, sizeof b));
        rc = 2;
    } else if (ft.dtype != want || (ft.from_f64 && !info->float64)) {
        fprintf(stderr, "fusegen: --input %s: the file holds %s data but input '%s' is %s (give it %s data)\n", spec,
                ft.from_f64 ? "float64" : fg_dtype_name(ft.dtype), info->name, fg_dtype_name(info->dtype),
                fg_dtype_name(want));
        rc = 2;
    } else {
        int64_t n = 1;
        for (int d = 0; d < ft.rank; d++)
            n *= ft.shape[d];
        for (int64_t k = 0; k < n; k++)
            dst[k] = ft.data[k];
    }
    free(ft.data);
    return rc;
}

/* The command line of `fusegen run`. */
typedef struct run_args {
    const char *graph, *rules, *save_out, *save_ref;
    const char *inputs[MAX_FILE_INPUTS];   /* NAME=FILE.npy */
    int ninputs;
    int check, replay;
    fg_device dev;
    uint64_t seed;
    long iters;
} run_args;

/* Parses argv into *a.  Returns 0, or the exit status after a usage
 * message. */
static int parse_args(int argc, char **argv, run_args *a)
{
    const char *device = "auto", *seed_s = NULL, *iters_s = NULL, *input_s = NULL;
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "--rules", &a->rules)) || (m = cli_opt(argc, argv, &i, "--device", &device)) ||
            (m = cli_opt(argc, argv, &i, "--seed", &seed_s)) || (m = cli_opt(argc, argv, &i, "--iters", &iters_s)) ||
            (m = cli_opt(argc, argv, &i, "--save-outputs", &a->save_out)) ||
            (m = cli_opt(argc, argv, &i, "--save-reference", &a->save_ref))) {
            if (m < 0)
                return 2;
        } else if ((m = cli_opt(argc, argv, &i, "--input", &input_s))) {
            if (m < 0)
                return 2;
            const char *eq = strchr(input_s, '=');
            if (!eq || eq == input_s || !eq[1])
                return cli_usage("--input takes NAME=FILE.npy, not '%s'", input_s);
            if (a->ninputs == MAX_FILE_INPUTS)
                return cli_usage("at most %d --input options", MAX_FILE_INPUTS);
            for (int k = 0; k < a->ninputs; k++)
                if (strcspn(a->inputs[k], "=") == (size_t)(eq - input_s) &&
                    !strncmp(a->inputs[k], input_s, (size_t)(eq - input_s)))
                    return cli_usage("--input %.*s is given twice", (int)(eq - input_s), input_s);
            a->inputs[a->ninputs++] = input_s;
        } else if (!strcmp(argv[i], "--check")) {
            a->check = 1;
        } else if (!strcmp(argv[i], "--graph-replay")) {
            a->replay = 1;
        } else if (argv[i][0] == '-' || a->graph) {
            return cli_usage(RUN_USAGE);
        } else {
            a->graph = argv[i];
        }
    }
    if (!a->graph)
        return cli_usage(RUN_USAGE);
    if (parse_device(device, &a->dev))
        return cli_usage("--device must be auto, cuda or emu, not '%s'", device);
    if (seed_s) {
        char *end;
        a->seed = strtoull(seed_s, &end, 0);
        if (*end || !*seed_s)
            return cli_usage("--seed takes an integer, not '%s'", seed_s);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        a->seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20);
        a->seed &= 0xffffffffffull;
    }
    a->iters = 1;
    if (iters_s) {
        char *end;
        a->iters = strtol(iters_s, &end, 10);
        if (*end || a->iters < 1 || a->iters > 1000000)
            return cli_usage("--iters takes a count from 1 to 1000000, not '%s'", iters_s);
    }
    return 0;
}

/* --input NAME=FILE: replaces the random values of input NAME in ref.
 * Returns 0, or 2 after a message. */
static int apply_inputs(const run_args *a, const fg_exec *e, const fg_graph *g, double **ref)
{
    int nin = fg_exec_input_count(e);
    for (int k = 0; k < a->ninputs; k++) {
        const char *spec = a->inputs[k], *eq = strchr(spec, '=');
        int found = -1;
        fg_tensor_info info;
        for (int j = 0; j < nin && found < 0; j++) {
            fg_exec_input_info(e, j, &info);
            if (strlen(info.name) == (size_t)(eq - spec) && !strncmp(info.name, spec, (size_t)(eq - spec)))
                found = j;
        }
        if (found < 0) {
            fg_buf names = {0};
            for (int j = 0; j < nin; j++) {
                fg_exec_input_info(e, j, &info);
                fg_buf_printf(&names, "%s%s", j ? ", " : "", info.name);
            }
            fprintf(stderr, "fusegen: --input %s: the graph has no input '%.*s' (its inputs: %s)\n", spec,
                    (int)(eq - spec), spec, names.s ? names.s : "none");
            fg_buf_free(&names);
            return 2;
        }
        int rc = read_input(spec, eq + 1, &info, ref[fg_graph_find_tensor(g, info.name)]);
        if (rc)
            return rc;
        printf("  input %s from %s\n", info.name, eq + 1);
    }
    return 0;
}

/* Host buffers for the nin inputs and nout outputs of e, in that order
 * (malloc'd, each its own allocation), bound in b[]: inputs are ref's
 * values rounded to the input's dtype (ref is rounded too, so that the
 * reference sees exactly what the kernels read) and packed in its layout;
 * outputs are poisoned (every bit set: NaN in every dtype). */
static void **bind_buffers(fg_context *ctx, const fg_exec *e, const fg_graph *g, double **ref, fg_binding *b)
{
    int nin = fg_exec_input_count(e), nio = nin + fg_exec_output_count(e);
    void **bufs = fg_xcalloc((size_t)nio + 1, sizeof *bufs);
    for (int i = 0; i < nio; i++) {
        fg_tensor_info info;
        if (i < nin)
            fg_exec_input_info(e, i, &info);
        else
            fg_exec_output_info(e, i - nin, &info);
        int t = fg_graph_find_tensor(g, info.name);
        bufs[i] = run_alloc(ctx, g, t, info.bytes, i < nin ? "the host buffer of input" : "the host buffer of output");
        if (!bufs[i]) {
            for (int j = 0; j < i; j++)
                free(bufs[j]);
            free(bufs);
            return NULL;
        }
        b[i].name = info.name;
        b[i].data = bufs[i];
        if (i >= nin) {
            memset(bufs[i], 0xFF, info.bytes);   /* NaN in every dtype */
            continue;
        }
        fg_tensor pt = g->tensors[t];
        pt.dtype = info.dtype;
        pt.layout = info.layout;
        int64_t n = fg_tensor_numel(&pt);
        for (int64_t k = 0; k < n; k++)
            ref[t][k] = fg_round_to_dtype(ref[t][k], info.dtype);
        fg_tensor_pack(&pt, info.layout, ref[t], bufs[i]);
    }
    return bufs;
}

/* Runs e iters times on the bindings b[0..nio) and prints the mean time of
 * each kernel and the median total (the first run, which includes one-time
 * work such as graph capture, is left out when there are more).  Returns
 * the first failure's status. */
static fg_status time_runs(fg_exec *e, const fg_binding *b, int nio, long iters)
{
    int nk = fg_exec_kernel_count(e);
    double *ksum = fg_xcalloc((size_t)nk + 1, sizeof *ksum);
    double *totals = fg_xcalloc((size_t)iters, sizeof *totals);
    long ntot = 0;
    fg_status st = FG_OK;
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
    if (!st) {
        long counted = iters > 1 ? iters - 1 : 1;
        fg_device used = fg_exec_device(e);
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
    }
    free(ksum);
    return st;
}

/* The .npy type an output of this info is saved as: its own (fp16 as
 * float16, fp32 and bf16 as float32, exact; int64, int32, bool), float64
 * where the model declares it. */
static fg_npy_type npy_type_of(const fg_tensor_info *info)
{
    switch (info->dtype) {
    case FG_DTYPE_F16: return FG_NPY_F16;
    case FG_DTYPE_I64: return FG_NPY_I64;
    case FG_DTYPE_I32: return FG_NPY_I32;
    case FG_DTYPE_BOOL: return FG_NPY_BOOL;
    default: return info->float64 ? FG_NPY_F64 : FG_NPY_F32;
    }
}

/* Saves every graph output of e into dir as <name>.npy, in the shape the
 * model declares (rank 0 included): the kernels' results out[0..nout) when
 * ref is NULL (logical order, as npy_type_of), else the reference's
 * (float64).  Returns 0, or 1 after a message. */
static int save_outputs(const fg_exec *e, const fg_graph *g, const char *dir, void *const *out, double *const *ref)
{
    int nout = fg_exec_output_count(e);
    char(*names)[300] = fg_xcalloc((size_t)nout + 1, sizeof *names);
    int nnames = 0;
    int rc = make_dir(dir);
    for (int i = 0; i < nout && !rc; i++) {
        fg_tensor_info info;
        fg_exec_output_info(e, i, &info);
        int t = fg_graph_find_tensor(g, info.name);
        if (ref) {
            rc = save_npy(dir, info.name, info.rank, g->tensors[t].shape, ref[t], FG_NPY_F64, names, &nnames);
            continue;
        }
        fg_tensor pt = g->tensors[t];
        pt.dtype = info.dtype;
        int64_t n = fg_tensor_numel(&pt);
        double *v = alloc_n(n, sizeof *v);
        if (!v) {
            fprintf(stderr, "fusegen: error: out of host memory: %zu bytes saving output '%s'\n",
                    nbytes(n, sizeof *v), info.name);
            rc = 2;
            break;
        }
        fg_tensor_unpack(&pt, info.layout, out[i], v);
        rc = save_npy(dir, info.name, info.rank, pt.shape, v, npy_type_of(&info), names, &nnames);
        free(v);
    }
    free(names);
    return rc;
}

/* --check: compares every output out[i] with the reference ref and prints
 * a table.  Returns 0 when all are within tolerance, else 1 after a
 * message naming the seed. */
static int check_outputs(fg_context *ctx, const fg_exec *e, const fg_graph *g, double **ref, void *const *out,
                         uint64_t seed)
{
    int nout = fg_exec_output_count(e);
    printf("\n  check against the unfused reference (tolerance: relative L2 <= base(dtype) * sqrt(kernels))\n");
    printf("  %-28s %-5s %10s %10s %10s  %s\n", "output", "dtype", "max_abs", "rel_l2", "tolerance", "result");
    int ok = 1, nomem = 0;
    for (int i = 0; i < nout; i++) {
        int r = check_output(ctx, e, g, ref, i, out[i], stdout);
        ok &= r > 0;
        nomem |= r < 0;
    }
    if (nomem)
        return cli_report(ctx, FG_ERR_NOMEM);
    if (!ok) {
        fprintf(stderr, "fusegen: check failed (seed %llu): outputs differ from the reference beyond tolerance\n",
                (unsigned long long)seed);
        return 1;
    }
    printf("  all %d output%s within tolerance\n", nout, nout == 1 ? "" : "s");
    return 0;
}

/* Compiles plan p for a->dev and prints the run's header line (why: how
 * an automatic device was chosen).  Returns 0, or the exit status after a
 * report. */
static int compile_plan(fg_context *ctx, const run_args *a, fg_plan *p, const char *why, fg_exec **e)
{
    fg_compile_options co = {.device = a->dev, .graph_replay = a->replay, .timing = 1, .size = sizeof co,
                             .shape_params = cli_shape_params};
    double t0 = fg_now();
    fg_status st = fg_plan_compile(ctx, p, &co, e);
    if (st)
        return cli_report(ctx, st);
    double compile_s = fg_now() - t0;
    fg_device used = fg_exec_device(*e);
    printf("run %s: device %s%s%s%s, seed %llu, %d kernels (compiled in %.2f s)\n", a->graph, fg_device_name(used),
           why, used == FG_DEVICE_CUDA ? " on " : "", used == FG_DEVICE_CUDA ? fg_cuda_device_name() : "",
           (unsigned long long)a->seed, fg_exec_kernel_count(*e), compile_s);
    return 0;
}

/* After the runs: --save-outputs, then the reference (for --check and
 * --save-reference), its files, and the check of the outputs out[].
 * Returns the exit status. */
static int results(fg_context *ctx, const run_args *a, const fg_exec *e, const fg_graph *g, double **ref,
                   void *const *out)
{
    int rc;
    if (a->save_out) {
        if ((rc = save_outputs(e, g, a->save_out, out, NULL)) != 0)
            return rc;
        printf("  outputs saved in %s\n", a->save_out);
    }
    if (!a->check && !a->save_ref)
        return 0;
    fg_status st = fg_reference_run_guarded(ctx, g, ref);
    if (st)
        return cli_report(ctx, st);
    if (a->save_ref) {
        if ((rc = save_outputs(e, g, a->save_ref, NULL, ref)) != 0)
            return rc;
        printf("  reference outputs saved in %s\n", a->save_ref);
    }
    return a->check ? check_outputs(ctx, e, g, ref, out, a->seed) : 0;
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    fg_options opts = {.device = a.dev};
    fg_context *ctx = cli_context(a.rules, &opts, &rc);
    if (!ctx)
        return rc;
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    fg_exec *e = NULL;
    double **ref = NULL;
    void **bufs = NULL;
    int nio = 0, nin = 0;
    const char *why = "";
    fg_status st;
    if (a.dev == FG_DEVICE_AUTO) {
        char arch[16];
        why = fg_cuda_device_arch(ctx, arch) == 0 ? " (auto: GPU found)" : " (auto: no CUDA driver or GPU)";
    }
    if ((rc = cli_load_plan(ctx, a.graph, &g, &p)) != 0 || (rc = compile_plan(ctx, &a, p, why, &e)) != 0)
        goto done;

    /* inputs from the seeded values, or from --input files */
    ref = fg_xcalloc((size_t)g->ntensors + 1, sizeof *ref);
    st = fg_reference_random_inputs_guarded(ctx, g, a.seed, ref);
    if (st) {
        rc = cli_report(ctx, st);
        goto done;
    }
    if ((rc = apply_inputs(&a, e, g, ref)) != 0)
        goto done;
    nin = fg_exec_input_count(e);
    nio = nin + fg_exec_output_count(e);
    fg_binding *b = fg_xcalloc((size_t)nio + 1, sizeof *b);
    bufs = bind_buffers(ctx, e, g, ref, b);
    if (!bufs) {
        free(b);
        rc = cli_report(ctx, FG_ERR_NOMEM);
        goto done;
    }
    st = time_runs(e, b, nio, a.iters);
    free(b);
    rc = st ? cli_report(ctx, st) : results(ctx, &a, e, g, ref, bufs + nin);
done:
    if (ref) {
        fg_reference_free(g, ref);
        free(ref);
    }
    for (int i = 0; bufs && i < nio; i++)
        free(bufs[i]);
    free(bufs);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    return rc;
}
