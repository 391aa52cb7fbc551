/*
 * test_emit_nvrtc.c -- every kernel the shipped rules produce on the example
 * graphs, whole networks included (and a coverage graph of pooling, flatten,
 * depthwise, batched / transposed gemm, pointwise chains, an RMS layer_norm
 * and convolutions that the tensor-core template takes in fp16 / bf16 NHWC)
 * compiles under NVRTC for sm_80 and sm_90, for fp32 / fp16 / bf16 and
 * NCHW / NHWC, specialized and not, with an empty log: no errors and no
 * warnings.  A graph of layer_norms whose output dtype is not their input's
 * (`to`) is compiled with the dtypes it declares, specialized and not.
 * Sources identical up to the names taken from the graph (comments, the entry
 * point, the parameter struct's fields; see normalized_source) are compiled
 * once, through the JIT's own compile path (fg_jit_compile_all on all cores,
 * disk cache off).  No GPU needed.
 *
 * The same cubins hold the no-local-memory structure check: every kernel
 * must have no stack frame and no local memory in
 * `cuobjdump -res-usage` (a spill or a stack array needs one or the other,
 * so no LDL / STL can exist without them; when either is non-zero the SASS
 * is read too and its LDL / STL counted for the message).  A failure names
 * the kernel, its template, rule and the example / dtype / layout it came
 * from and the arch.  Asserted for every kernel on both archs, specialized
 * and with shapes as parameters.
 * cuobjdump comes from the toolkit or pip (nvidia-cuda-cuobjdump); without
 * it the check is skipped and says so.  test_local_memory_detected shows the
 * check fails on a kernel with a dynamically indexed local array.
 *
 * The same cubins hold the programmatic-dependent-launch structure: every
 * sm_90 kernel waits for the grids before it (griddepcontrol.wait, SASS
 * ACQBULK) ahead of its first instruction that may touch global memory or
 * branch, and lets the next grid launch (launch_dependents, PREEXIT); no
 * sm_80 kernel has either (they are sm_90 instructions: prelude.cuh emits
 * them only for __CUDA_ARCH__ >= 900).  test_grid_dep_detected shows the
 * scan fails a kernel that stores before its wait and one without a wait,
 * and that the PTX of compute_90 holds the instructions and the module's
 * marker (name__fg_grid_dep = 1) and compute_80's none of them.
 * FUSEGEN_NVRTC_TEMPLATES=conv2d,gemm (template names, comma-separated)
 * compiles only those templates' kernels: a quick run while working on them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_tools.h"
#include "emit.h"
#include "jit.h"
#include "report_sass.h"
#include "testutil.h"

static const char coverage_graph[] =
    "graph: coverage\n"
    "seed: 7\n"
    "inputs:\n"
    "  - { name: x, shape: [2, 6, 9, 9] }\n"
    "  - { name: m, shape: [3, 7, 13] }\n"
    "  - { name: q, shape: [3, 13] }\n"
    "  - { name: r, shape: [3, 1] }\n"
    "  - { name: x16, shape: [2, 16, 9, 9] }\n"
    "weights:\n"
    "  - { name: dw.w, shape: [12, 1, 3, 3] }\n"
    "  - { name: gc.w, shape: [6, 3, 1, 3] }\n"
    "  - { name: slope, shape: [6] }\n"
    "  - { name: fcw, shape: [13, 5] }\n"
    "  - { name: fct, shape: [5, 13] }\n"
    "  - { name: bn.gamma, shape: [6], init: positive }\n"
    "  - { name: bn.beta, shape: [6] }\n"
    "  - { name: bn.mean, shape: [6] }\n"
    "  - { name: bn.var, shape: [6], init: positive }\n"
    "  - { name: tc.w, shape: [13, 16, 3, 3] }\n"
    "  - { name: tc2.w, shape: [24, 16, 1, 1] }\n"
    "  - { name: tc2.b, shape: [24] }\n"
    "  - { name: shd.w, shape: [6, 1, 3, 3] }\n"
    "  - { name: shc.w, shape: [4, 6, 1, 1] }\n"
    "  - { name: ln.g, shape: [13], init: positive }\n"
    "nodes:\n"
    "  - { name: mp, op: max_pool2d, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
    "  - { name: lr, op: leaky_relu, inputs: [mp], attrs: { alpha: 0.2 } }\n"
    "  - { name: ap, op: avg_pool2d, inputs: [lr], attrs: { kernel: [2, 2], stride: [1, 1], padding: [1, 1] } }\n"
    "  - { name: pr, op: prelu, inputs: [ap, slope] }\n"
    "  - { name: gp, op: global_avg_pool, inputs: [pr] }\n"
    "  - { name: fl, op: flatten, inputs: [gp] }\n"
    "  - { name: dw, op: conv2d, inputs: [x, dw.w], attrs: { groups: 6, stride: [2, 2], padding: [1, 1], dilation: [2, 2] } }\n"
    "  - { name: gc, op: conv2d, inputs: [x, gc.w], attrs: { groups: 2, padding: [0, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [gc, bn.gamma, bn.beta, bn.mean, bn.var] }\n"
    "  - { name: sq, op: mul, inputs: [bn, x] }\n"
    "  - { name: mm, op: matmul, inputs: [m, fcw] }\n"
    "  - { name: sg, op: sigmoid, inputs: [mm] }\n"
    "  - { name: mt, op: matmul, inputs: [q, fct], attrs: { trans_b: true } }\n"
    "  - { name: ad, op: add, inputs: [mt, r] }\n"
    "  - { name: th, op: tanh, inputs: [ad] }\n"
    "  - { name: tc, op: conv2d, inputs: [x16, tc.w], attrs: { stride: [2, 2], padding: [1, 1], dilation: [2, 2] } }\n"
    "  - { name: tc2, op: conv2d, inputs: [x16, tc2.w, tc2.b] }\n"
    "  - { name: tc2r, op: relu, inputs: [tc2] }\n"
    "  - { name: sh1a, op: reshape, inputs: [x], attrs: { shape: [2, 2, 3, 9, 9] } }\n"
    "  - { name: sh1b, op: transpose, inputs: [sh1a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
    "  - { name: sh1c, op: reshape, inputs: [sh1b], attrs: { shape: [2, 6, 9, 9] } }\n"
    "  - { name: shd, op: conv2d, inputs: [sh1c, shd.w], attrs: { groups: 6, padding: [1, 1] } }\n"
    "  - { name: sh2a, op: reshape, inputs: [x], attrs: { shape: [2, 3, 2, 9, 9] } }\n"
    "  - { name: sh2b, op: transpose, inputs: [sh2a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
    "  - { name: sh2c, op: reshape, inputs: [sh2b], attrs: { shape: [2, 6, 9, 9] } }\n"
    "  - { name: shc, op: conv2d, inputs: [sh2c, shc.w] }\n"
    "  - { name: ln, op: layer_norm, inputs: [m, ln.g], attrs: { rms: true } }\n"
    "outputs: [fl, dw, sq, sg, th, tc, tc2r, shd, shc, ln]\n";

/* layer_norm with an output dtype other than its input's (`to`), compiled
 * with the dtypes it declares (not the sweep's): fp32 rows into fp16 and
 * bf16 (scalar, 4-element loads with 8-byte stores, a block per row,
 * the residual skip with an epilogue, the decomposed RMSNorm an fp16
 * export writes), fp16 into fp32 (8-element loads, two 16-byte stores). */
static const char mixed_graph[] =
    "graph: layer_norm_mixed\n"
    "seed: 7\n"
    "dtype: fp16\n"
    "inputs:\n"
    "  - { name: a, shape: [1, 13], dtype: fp32 }\n"
    "  - { name: b, shape: [7, 36], dtype: fp32 }\n"
    "  - { name: kb, shape: [7, 36], dtype: fp32 }\n"
    "  - { name: c, shape: [129, 45], dtype: fp32 }\n"
    "  - { name: d, shape: [3, 1036], dtype: fp32 }\n"
    "  - { name: e, shape: [7, 40] }\n"
    "weights:\n"
    "  - { name: two, shape: [1], values: [2.0] }\n"
    "  - { name: eps, shape: [1], values: [1e-5] }\n"
    "  - { name: one, shape: [1], values: [1.0] }\n"
    "  - { name: ga, shape: [13], init: positive }\n"
    "  - { name: gb, shape: [36], init: positive }\n"
    "  - { name: bb, shape: [36] }\n"
    "  - { name: gc, shape: [45], init: positive }\n"
    "  - { name: gd, shape: [1036], dtype: bf16, init: positive }\n"
    "  - { name: ge, shape: [40], init: positive }\n"
    "nodes:\n"
    "  - { name: ya, op: layer_norm, inputs: [a, ga], attrs: { rms: true, to: fp16 } }\n"
    "  - { name: ub, op: add, inputs: [b, kb] }\n"
    "  - { name: nb, op: layer_norm, inputs: [ub, gb, bb], attrs: { to: bf16 } }\n"
    "  - { name: yb, op: gelu, inputs: [nb] }\n"
    "  - { name: pc, op: pow, inputs: [c, two] }\n"
    "  - { name: vc, op: reduce_mean, inputs: [pc], attrs: { axes: [1] } }\n"
    "  - { name: ec, op: add, inputs: [vc, eps] }\n"
    "  - { name: sc, op: sqrt, inputs: [ec] }\n"
    "  - { name: rc, op: div, inputs: [one, sc] }\n"
    "  - { name: hc, op: mul, inputs: [c, rc] }\n"
    "  - { name: bc, op: cast, inputs: [hc], attrs: { to: fp16 } }\n"
    "  - { name: yc, op: mul, inputs: [gc, bc] }\n"
    "  - { name: yd, op: layer_norm, inputs: [d, gd], attrs: { rms: true, to: bf16 } }\n"
    "  - { name: ye, op: layer_norm, inputs: [e, ge], attrs: { to: fp32 } }\n"
    "outputs: [ya, yb, yc, yd, ye]\n";

typedef struct seen {
    fg_hash128 *h;
    int n, cap;
} seen;

static int seen_add(seen *s, fg_hash128 h)
{
    for (int i = 0; i < s->n; i++)
        if (s->h[i].lo == h.lo && s->h[i].hi == h.hi)
            return 0;
    *FG_PUSH(s->h, s->n, s->cap) = h;
    return 1;
}

/* Kernel k's source with its comments, blank lines and the widths of blank
 * runs dropped, and the names that come from the graph replaced by their
 * position: the entry point and its parameter struct by @K and @P, the
 * struct's fields (named after tensors) by @f0, @f1, ... ('@' is in no
 * identifier, so no replacement equals a name that is kept).  Two kernels
 * with the same normalized source differ in nothing NVRTC compiles but
 * symbol names (ResNet-50's repeated bottlenecks), so the tier compiles one
 * of them.  Returns a malloc'd string. */
static char *normalized_source(const fg_kernel *k)
{
    char pname[96];
    snprintf(pname, sizeof pname, "fg_params_%s", k->name);
    /* The fields: "    <type> *<name>;" lines of "struct <pname> {". */
    const char *fields[FG_MAX_KPARAMS + 8];
    size_t flen[FG_MAX_KPARAMS + 8];
    int nf = 0;
    char open[128];
    snprintf(open, sizeof open, "struct %s {\n", pname);
    const char *q = strstr(k->source, open);
    if (q) {
        q += strlen(open);
        while (*q && strncmp(q, "};", 2) != 0 && nf < (int)FG_COUNTOF(fields)) {
            const char *semi = strchr(q, ';'), *eol = strchr(q, '\n');
            if (!semi || !eol || semi > eol)
                break;
            const char *b = semi;
            while (b > q && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
                b--;
            fields[nf] = b;
            flen[nf++] = (size_t)(semi - b);
            q = eol + 1;
        }
    }
    size_t n = strlen(k->source), cap = n + 1, len = 0;
    char *out = fg_xmalloc(cap);
    for (const char *c = k->source; *c;) {
        if (c[0] == '/' && c[1] == '/') {
            c += strcspn(c, "\n");
        } else if (c[0] == '/' && c[1] == '*') {
            const char *e = strstr(c + 2, "*/");
            c = e ? e + 2 : c + strlen(c);
        } else if (*c == '"') {
            const char *e = c + 1;
            while (*e && *e != '"')
                e += e[0] == '\\' && e[1] ? 2 : 1;
            e += *e == '"';
            if (len + (size_t)(e - c) + 1 > cap)
                out = fg_xrealloc(out, cap = 2 * (len + (size_t)(e - c) + 1));
            memcpy(out + len, c, (size_t)(e - c));
            len += (size_t)(e - c);
            c = e;
        } else if (isalpha((unsigned char)*c) || *c == '_') {
            const char *e = c;
            while (isalnum((unsigned char)*e) || *e == '_')
                e++;
            size_t w = (size_t)(e - c);
            char rep[16] = "";
            if (w == strlen(k->name) && memcmp(c, k->name, w) == 0)
                strcpy(rep, "@K");
            else if (w == strlen(pname) && memcmp(c, pname, w) == 0)
                strcpy(rep, "@P");
            for (int i = 0; !rep[0] && i < nf; i++)
                if (w == flen[i] && memcmp(c, fields[i], w) == 0)
                    snprintf(rep, sizeof rep, "@f%d", i);
            const char *src = rep[0] ? rep : c;
            size_t m = rep[0] ? strlen(rep) : w;
            if (len + m + 1 > cap)
                out = fg_xrealloc(out, cap = 2 * (len + m + 1));
            memcpy(out + len, src, m);
            len += m;
            c = e;
        } else if (*c == ' ' || *c == '\t') {   /* a run of blanks: one, none at a line's ends */
            c += strspn(c, " \t");
            if (len && out[len - 1] != '\n' && *c != '\n' && *c)
                out[len++] = ' ';
        } else if (*c == '\n' && len && out[len - 1] == '\n') {   /* blank lines (a dropped comment's) */
            c++;
        } else {
            out[len++] = *c++;
        }
        if (len + 1 > cap)
            out = fg_xrealloc(out, cap *= 2);
    }
    out[len] = 0;
    return out;
}

/* Whether kernel k is left out by $FUSEGEN_NVRTC_TEMPLATES (a comma-separated
 * list of template names; unset: nothing is left out). */
static int filtered_out(const fg_kernel *k)
{
    const char *list = getenv("FUSEGEN_NVRTC_TEMPLATES");
    if (!list || !*list)
        return 0;
    const char *name = k->template_name ? k->template_name : "";
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 0;
        p += len + (p[len] == ',');
    }
    return 1;
}

/* The distinct kernels to compile, and what each came from. */
static fg_kernel *kernels;
static char **origin;
static int nkernels, kernels_cap, norigin, origin_cap, nfailed, nemitted;

/* Plans g with every tensor set to dtype d and layout l (d < 0: as g
 * declares them, l then only names them) and compiles each new kernel. */
static void compile_graph(fg_context *ctx, fg_graph *g, int d, fg_layout l, int specialize, seen *s)
{
    for (int t = 0; t < g->ntensors && d >= 0; t++) {
        g->tensors[t].dtype = (fg_dtype)d;
        g->tensors[t].layout = l;
    }
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_emit_opts o = {.specialize = specialize};
    for (int i = 0; i < p->ngroups; i++) {
        fg_kernel k;
        st = fg_emit_group(ctx, p, i, &o, &k);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        char *norm = filtered_out(&k) ? NULL : normalized_source(&k);
        int fresh = norm && seen_add(s, fg_hash128_of(norm, strlen(norm)));
        free(norm);
        nemitted += norm != NULL;
        if (fresh) {
            fg_group_info gi;
            assert_int_equal(fg_plan_group_info(ctx, p, i, &gi), FG_OK);
            char what[256];
            snprintf(what, sizeof what, "rule %s, %s %s %s%s", gi.rule ? gi.rule : "- (single op)", g->name,
                     d >= 0 ? fg_dtype_name((fg_dtype)d) : "mixed dtypes", fg_layout_name(l),
                     specialize ? "" : " unspecialized");
            *FG_PUSH(origin, norigin, origin_cap) = fg_xstrdup(what);
            *FG_PUSH(kernels, nkernels, kernels_cap) = k;
        } else {
            fg_kernel_free(&k);
        }
    }
    fg_plan_free(p);
}

static void run_graph(fg_context *ctx, fg_graph *g, seen *s)
{
    for (int d = 0; d < TU_FLOAT_DTYPES; d++)
        for (int l = 0; l < FG_LAYOUT_COUNT; l++)
            for (int spec = 1; spec >= 0; spec--) {
                if (!spec && (d != FG_DTYPE_F32 || l != FG_LAYOUT_NCHW) && d != FG_DTYPE_F16)
                    continue;   /* unspecialized: fp32 NCHW, and fp16 (tensor cores) */
                compile_graph(ctx, g, (fg_dtype)d, (fg_layout)l, spec, s);
            }
}

/* Monotonic seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether cuobjdump is there; prints why the check is skipped when not. */
static int cuobjdump_present(void)
{
    if (fg_cuda_tool_path(FG_TOOL_CUOBJDUMP))
        return 1;
    printf("no-local-memory check NOT RUN: cuobjdump not found (pip install nvidia-cuda-cuobjdump, or set "
           "FUSEGEN_CUDA_TOOLS)\n");
    fflush(stdout);
    return 0;
}

/* Reads k's cubin with cuobjdump: 0 when it uses no local memory (no stack
 * frame, no local bytes), 1 when it does (printed with what, and the LDL /
 * STL counts of its SASS), -1 when cuobjdump failed or printed no function
 * line for k (also printed). */
static int uses_local_memory(const fg_kernel *k, const char *what, const char *arch)
{
    static const char *const res_args[] = {"-res-usage"};
    char *out = NULL;
    fg_res_usage u;
    if (fg_cuda_tool_run(FG_TOOL_CUOBJDUMP, res_args, 1, k->binary, k->binary_size, &out) != 0 ||
        fg_res_usage_parse(out, k->name, &u) != 0 || u.stack < 0 || u.local < 0) {
        fprintf(stderr, "%s (%s, %s): cuobjdump -res-usage unreadable:\n%s\n", k->name, what, arch,
                out ? out : "(no output)");
        free(out);
        return -1;
    }
    free(out);
    if (u.stack == 0 && u.local == 0)
        return 0;
    static const char *const sass_args[] = {"-sass"};
    fg_sass_mix m = {0};
    out = NULL;
    if (fg_cuda_tool_run(FG_TOOL_CUOBJDUMP, sass_args, 1, k->binary, k->binary_size, &out) == 0)
        fg_sass_mix_count(out, &m);
    free(out);
    fprintf(stderr, "LOCAL MEMORY: %s (template %s; %s; %s): stack %d bytes, local %d bytes, LDL %d, STL %d\n",
            k->name, k->template_name ? k->template_name : "-", what, arch, u.stack, u.local, m.ldl, m.stl);
    return 1;
}

/* Reads k's SASS with cuobjdump into *g: 0, or -1 (printed) when cuobjdump
 * failed. */
static int grid_dep_of(const fg_kernel *k, const char *what, const char *arch, fg_sass_grid_dep *g)
{
    static const char *const sass_args[] = {"-sass"};
    char *out = NULL;
    memset(g, 0, sizeof *g);
    if (fg_cuda_tool_run(FG_TOOL_CUOBJDUMP, sass_args, 1, k->binary, k->binary_size, &out) != 0 || !out ||
        !strstr(out, k->name)) {
        fprintf(stderr, "%s (%s, %s): cuobjdump -sass unreadable:\n%s\n", k->name, what, arch, out ? out : "(no output)");
        free(out);
        return -1;
    }
    fg_sass_grid_dep_scan(out, g);
    free(out);
    return 0;
}

/* Whether k's cubin for arch has the grid dependency control it should:
 * on sm_90 at least one wait and one launch, nothing that may touch global
 * memory or branch before the first wait; below sm_90 neither instruction.
 * Returns 0, or 1 (printed with what) when it does not, -1 when unreadable. */
static int grid_dep_wrong(const fg_kernel *k, const char *what, const char *arch)
{
    fg_sass_grid_dep g;
    if (grid_dep_of(k, what, arch, &g) != 0)
        return -1;
    int sm90 = strcmp(arch, "sm_90") == 0;
    int ok = sm90 ? g.waits > 0 && g.launches > 0 && !g.before_wait[0] : g.waits == 0 && g.launches == 0;
    if (!ok)
        fprintf(stderr, "GRID DEPENDENCY: %s (template %s; %s; %s): ACQBULK %d, PREEXIT %d%s%s\n", k->name,
                k->template_name ? k->template_name : "-", what, arch, g.waits, g.launches,
                g.before_wait[0] ? ", before the first wait: " : "", g.before_wait);
    return !ok;
}

static void test_examples_compile(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile every kernel for real */
    fg_context *ctx = tu_ctx_shipped();
    seen s = {0};
    int graphs = 0;
    DIR *dir = opendir(tu_src("examples"));
    assert_non_null(dir);
    struct dirent *e;
    char *names[64];
    int nnames = 0;
    while ((e = readdir(dir)) && nnames < 64) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".yaml") == 0)
            names[nnames++] = fg_xstrdup(e->d_name);
    }
    closedir(dir);
    for (int i = 0; i < nnames; i++) {
        char rel[300];
        snprintf(rel, sizeof rel, "examples/%s", names[i]);
        fg_graph *g = NULL;
        fg_status st = fg_graph_load(ctx, tu_src(rel), &g);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        run_graph(ctx, g, &s);
        graphs++;
        fg_graph_free(g);
        free(names[i]);
    }
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "coverage.yaml", coverage_graph, strlen(coverage_graph), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    run_graph(ctx, g, &s);
    fg_graph_free(g);
    g = NULL;
    st = fg_graph_parse(ctx, "layer_norm_mixed.yaml", mixed_graph, strlen(mixed_graph), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    int before = nkernels;
    for (int spec = 1; spec >= 0; spec--)
        compile_graph(ctx, g, -1, FG_LAYOUT_NCHW, spec, &s);
    fg_graph_free(g);
    int nmixed = 0;   /* the mixed graph's layer_norm kernels: 5 groups, each new, both emissions */
    for (int i = before; i < nkernels; i++)
        nmixed += kernels[i].template_name && strcmp(kernels[i].template_name, "layernorm") == 0;

    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info *infos = fg_xcalloc((size_t)nkernels, sizeof *infos);
    /* local[a]: specialized kernels (the form a plan launches by default)
     * using local memory on archs[a]; local_unspec[a]: kernels with shapes as
     * parameters.  All four must be 0. */
    int clean = 0, checked = 0, local[2] = {0, 0}, local_unspec[2] = {0, 0}, unread = 0;
    /* grid_dep[a]: kernels whose wait / launch_dependents are not as they
     * should be on archs[a] (grid_dep_wrong); both must be 0. */
    int grid_dep[2] = {0, 0}, grid_checked = 0;
    const int tools = cuobjdump_present();
    double check_s = 0;
    for (int a = 0; a < 2; a++) {
        fg_status st = fg_jit_compile_all(ctx, kernels, nkernels, archs[a], infos);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        double t0 = now_s();
        for (int i = 0; i < nkernels; i++) {
            if (infos[i].log[0] || !kernels[i].binary_size) {
                nfailed++;
                fprintf(stderr, "---- %s (%s, %s): log:\n%s\n---- source:\n%s\n", kernels[i].name, origin[i], archs[a],
                        infos[i].log, kernels[i].source);
                continue;
            }
            clean++;
            if (!tools)
                continue;
            int r = uses_local_memory(&kernels[i], origin[i], archs[a]);
            checked++;
            int gd = grid_dep_wrong(&kernels[i], origin[i], archs[a]);
            grid_dep[a] += gd > 0;
            unread += gd < 0;
            grid_checked++;
            if (strstr(origin[i], " unspecialized"))
                local_unspec[a] += r > 0;
            else
                local[a] += r > 0;
            unread += r < 0;
        }
        check_s += now_s() - t0;
    }
    if (tools)
        printf("no local memory: %d cubins read with cuobjdump in %.2f s, using local memory: specialized %d for "
               "sm_80, %d for sm_90; shapes as parameters %d for sm_80, %d for sm_90; %d unreadable\n",
               checked, check_s, local[0], local[1], local_unspec[0], local_unspec[1], unread);
    if (tools)
        printf("grid dependency control: %d cubins read; sm_90 kernels without a wait ahead of every global access "
               "(or without launch_dependents): %d; sm_80 kernels with either: %d\n",
               grid_checked, grid_dep[1], grid_dep[0]);
    int ntc = 0;
    for (int i = 0; i < nkernels; i++)
        ntc += kernels[i].template_name && strcmp(kernels[i].template_name, "conv2d_tc") == 0;
    printf("nvrtc: %d graphs + coverage, %d kernels emitted, %d distinct up to names (%d conv2d_tc), %d compiles "
           "clean, %d with a warning or no binary\n", graphs, nemitted, nkernels, ntc, clean, nfailed);
    const char *only = getenv("FUSEGEN_NVRTC_TEMPLATES");
    if (only && *only)
        printf("only the kernels of templates %s (FUSEGEN_NVRTC_TEMPLATES)\n", only);
    else
        assert_true(ntc > 0);
    assert_true(graphs >= 6);
    printf("nvrtc: the mixed-dtype layer_norm graph gave %d new layernorm kernels\n", nmixed);
    if (!(only && *only) || strstr(only, "layernorm"))
        assert_int_equal(nmixed, 10);
    assert_int_equal(clean, 2 * nkernels);
    assert_int_equal(nfailed, 0);
    assert_int_equal(local[0], 0);
    assert_int_equal(local[1], 0);
    assert_int_equal(local_unspec[0], 0);
    assert_int_equal(local_unspec[1], 0);
    assert_int_equal(grid_dep[0], 0);
    assert_int_equal(grid_dep[1], 0);
    assert_int_equal(unread, 0);
    assert_true(!tools || checked == 2 * nkernels);
    assert_true(!tools || grid_checked == 2 * nkernels);
    for (int i = 0; i < nkernels; i++) {
        fg_kernel_free(&kernels[i]);
        free(origin[i]);
    }
    free(kernels);
    free(origin);
    free(infos);
    free(s.h);
    fg_context_free(ctx);
}

/* The check can fail: a kernel whose local array is indexed by a value
 * known only at run time lives in local memory (a stack frame, STL / LDL);
 * the same kernel indexing it with constants does not. */
static void test_local_memory_detected(void **state)
{
    (void)state;
    if (!cuobjdump_present())
        skip();
    setenv("FUSEGEN_CACHE", "off", 1);
    static const char *const body[2] = {"for (int j = 0; j < p.i; j++)\n        a[(j * 7 + t) & 31] += a[(j + t) & 31];\n    p.y[t] = a[t & 31];",
                                          "p.y[t] = a[7] + a[t == 3 ? 5 : 9];"};
    fg_context *ctx = tu_ctx_shipped();
    fg_kernel ks[2];
    memset(ks, 0, sizeof ks);
    for (int i = 0; i < 2; i++) {
        char src[1024];
        snprintf(src, sizeof src,
                 "#include \"fusegen_prelude.cuh\"\n"
                 "struct fg_params_probe { float *y; int i; };\n"
                 "FG_KERNEL(fg_local_probe%d, fg_params_probe, 32)\n"
                 "{\n"
                 "    const int t = (int)fg_tid_x();\n"
                 "    float a[32];\n"
                 "    for (int j = 0; j < 32; j++)\n"
                 "        a[j] = p.y[j * 32 + t] * (float)j;\n"
                 "    %s\n"
                 "}\n",
                 i, body[i]);
        snprintf(ks[i].name, sizeof ks[i].name, "fg_local_probe%d", i);
        ks[i].source = fg_xstrdup(src);
        ks[i].template_name = "probe";
    }
    fg_jit_info infos[2];
    memset(infos, 0, sizeof infos);
    fg_status st = fg_jit_compile_all(ctx, ks, 2, "sm_90", infos);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    printf("expected: the dynamically indexed array reported as local memory\n");
    assert_int_equal(uses_local_memory(&ks[0], "dynamically indexed local array", "sm_90"), 1);
    assert_int_equal(uses_local_memory(&ks[1], "constant indices", "sm_90"), 0);
    for (int i = 0; i < 2; i++)
        fg_kernel_free(&ks[i]);
    fg_context_free(ctx);
}

/* The grid dependency scan can fail: a kernel that stores before its wait,
 * and one that never waits, are reported on sm_90; a kernel entered through
 * FG_KERNEL passes.  The PTX says the same without cuobjdump: compute_90
 * holds griddepcontrol.wait / launch_dependents and the marker
 * (name__fg_grid_dep = 1), compute_80 none of them. */
static void test_grid_dep_detected(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    static const char *const src[3] = {
        "#include \"fusegen_prelude.cuh\"\n"
        "extern \"C\" __global__ void fg_dep_probe0(float *y)\n"
        "{\n"
        "    y[fg_tid_x()] = 1.0f;\n"
        "    fg_grid_dep_wait();\n"
        "    y[fg_tid_x() + 32] += 2.0f;\n"
        "}\n",
        "#include \"fusegen_prelude.cuh\"\n"
        "extern \"C\" __global__ void fg_dep_probe1(float *y)\n"
        "{\n"
        "    y[fg_tid_x()] += 1.0f;\n"
        "}\n",
        "#include \"fusegen_prelude.cuh\"\n"
        "struct fg_params_dep { float *y; int n; };\n"
        "FG_KERNEL(fg_dep_probe2, fg_params_dep, 32)\n"
        "{\n"
        "    const int t = (int)fg_tid_x();\n"
        "    if (t >= p.n)\n"
        "        return;\n"
        "    p.y[t] += 1.0f;\n"
        "}\n",
    };
    fg_context *ctx = tu_ctx_shipped();
    fg_kernel ks[3];
    memset(ks, 0, sizeof ks);
    for (int i = 0; i < 3; i++) {
        snprintf(ks[i].name, sizeof ks[i].name, "fg_dep_probe%d", i);
        ks[i].source = fg_xstrdup(src[i]);
        ks[i].template_name = "probe";
    }
    fg_jit_info infos[3];
    static const char *const ptx_archs[2] = {"compute_80", "compute_90"};
    for (int a = 0; a < 2; a++) {
        memset(infos, 0, sizeof infos);
        fg_status st = fg_jit_compile_all(ctx, &ks[2], 1, ptx_archs[a], infos);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        assert_string_equal(infos[0].log, "");
        char *ptx = fg_xmalloc(ks[2].binary_size + 1);
        memcpy(ptx, ks[2].binary, ks[2].binary_size);
        ptx[ks[2].binary_size] = 0;
        const char *marker = strstr(ptx, "fg_dep_probe2__fg_grid_dep");
        printf("%s: griddepcontrol.wait %s, launch_dependents %s, marker %.*s\n", ptx_archs[a],
               strstr(ptx, "griddepcontrol.wait") ? "present" : "absent",
               strstr(ptx, "griddepcontrol.launch_dependents") ? "present" : "absent",
               marker ? (int)strcspn(marker, ";\n") : 6, marker ? marker : "absent");
        assert_true(!strstr(ptx, "griddepcontrol.wait") == (a == 0));
        assert_true(!strstr(ptx, "griddepcontrol.launch_dependents") == (a == 0));
        assert_true(!marker == (a == 0));   /* ".const .align 4 .u32 NAME = 1;" on compute_90 only */
        free(ptx);
    }
    if (!cuobjdump_present())
        skip();
    memset(infos, 0, sizeof infos);
    fg_status st = fg_jit_compile_all(ctx, ks, 3, "sm_90", infos);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    printf("expected: the store ahead of the wait and the kernel without one reported\n");
    fg_sass_grid_dep g;
    assert_int_equal(grid_dep_of(&ks[0], "store before the wait", "sm_90", &g), 0);
    assert_int_equal(g.waits, 1);
    assert_true(strncmp(g.before_wait, "STG", 3) == 0);
    assert_int_equal(grid_dep_wrong(&ks[0], "store before the wait", "sm_90"), 1);
    assert_int_equal(grid_dep_wrong(&ks[1], "no wait", "sm_90"), 1);
    assert_int_equal(grid_dep_wrong(&ks[2], "FG_KERNEL with an early return", "sm_90"), 0);
    for (int i = 0; i < 3; i++)
        fg_kernel_free(&ks[i]);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_memory_detected),
        cmocka_unit_test(test_grid_dep_detected),
        cmocka_unit_test(test_examples_compile),
    };
    /* FUSEGEN_TEST_FILTER=test_local* runs the tests whose names match */
    if (getenv("FUSEGEN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("FUSEGEN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
