/* testutil.c -- see testutil.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cuda_tools.h"
#include "emu.h"
#include "emu_tmap.h"
#include "exec.h"
#include "jit.h"
#include "reference.h"
#include "tensor_convert.h"
#include "testutil.h"

const char *tu_src(const char *rel)
{
    static char bufs[8][4096];
    static int slot;
    const char *root = getenv("FUSEGEN_SOURCE_DIR");
    char *b = bufs[slot++ & 7];
    snprintf(b, 4096, "%s/%s", root ? root : FG_SOURCE_DIR, rel);
    return b;
}

char *tu_tmpdir(void)
{
    char tmpl[] = "/tmp/fusegen-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return fg_xstrdup(d);
}

char *tu_write(const char *dir, const char *name, const char *text)
{
    fg_mkdir_p(dir, 0755);
    char *p = fg_path_join(dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

void tu_rmtree(const char *dir)
{
    if (!dir || strncmp(dir, "/tmp/", 5) != 0)
        return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
}

char *tu_vocab_dir(void)
{
    char *dir = tu_tmpdir();
    const char *ops[] = {"ops.yaml", "pointwise.yaml"};
    for (int i = 0; i < 2; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "rules/%s", ops[i]);
        char *text = fg_read_file(tu_src(rel), NULL);
        assert_non_null(text);
        free(tu_write(dir, ops[i], text));
        free(text);
    }
    return dir;
}

const char *tu_group_desc(const fg_context *ctx, const fg_plan *p, const char *name)
{
    static char buf[512];
    int n = fg_graph_find_node(p->graph, name);
    assert_true(n >= 0);
    for (int gi = 0; gi < p->ngroups; gi++)
        for (int i = 0; i < p->groups[gi].nnodes; i++)
            if (p->groups[gi].nodes[i] == n) {
                const fg_group *grp = &p->groups[gi];
                size_t at = (size_t)snprintf(buf, sizeof buf, "%s:", grp->rule >= 0 ? ctx->rules[grp->rule]->name : "-");
                for (int k = 0; k < grp->nnodes; k++)
                    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", k ? "," : "",
                                           p->graph->nodes[grp->nodes[k]].name);
                return buf;
            }
    fail_msg("node %s is in no group", name);
    return NULL;
}

struct fg_exec *tu_compile_emu(fg_context *ctx, const fg_plan *p)
{
    fg_compile_options co = {.device = FG_DEVICE_EMU};
    fg_exec *e = NULL;
    fg_status st = fg_plan_compile(ctx, p, &co, &e);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return e;
}

/* Binds e's inputs to the values in ref rounded to their dtypes (ref keeps
 * the rounded values) and its outputs to poisoned buffers, runs e on the
 * host, then the reference of g over ref.  Returns the bindings (inputs
 * first; free with free_bindings) and sets *nin, *nio. */
static fg_binding *run_bound(fg_context *ctx, const fg_graph *g, struct fg_exec *e, double **ref, int *nin_out,
                             int *nio_out)
{
    int nin = fg_exec_input_count(e), nout = fg_exec_output_count(e), nio = nin + nout;
    fg_binding *b = fg_xcalloc((size_t)nio + 1, sizeof *b);
    for (int i = 0; i < nio; i++) {
        fg_tensor_info info;
        assert_int_equal(i < nin ? fg_exec_input_info(e, i, &info) : fg_exec_output_info(e, i - nin, &info), FG_OK);
        b[i] = (fg_binding){info.name, fg_xmalloc(info.bytes ? info.bytes : 1)};
        int t = fg_graph_find_tensor(g, info.name);
        assert_true(t >= 0);
        if (i < nin) {
            for (int64_t k = 0; k < fg_tensor_numel(&g->tensors[t]); k++)
                ref[t][k] = fg_round_to_dtype(ref[t][k], info.dtype);
            fg_tensor_pack(&g->tensors[t], info.layout, ref[t], b[i].data);
        } else {
            memset(b[i].data, 0xFF, info.bytes);   /* NaN in every dtype */
        }
    }
    fg_status st = fg_exec_run_host(e, b, nio);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(fg_reference_run(ctx, g, ref), FG_OK);
    *nin_out = nin;
    *nio_out = nio;
    return b;
}

static void free_bindings(fg_binding *b, int nio)
{
    for (int i = 0; i < nio; i++)
        free(b[i].data);
    free(b);
}

void tu_exec_vs_reference(fg_context *ctx, const fg_graph *g, struct fg_exec *e, uint64_t seed, double tol)
{
    double **ref = fg_xcalloc((size_t)g->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(g, seed, ref);
    int nin, nio;
    fg_binding *b = run_bound(ctx, g, e, ref, &nin, &nio);
    for (int i = nin; i < nio; i++) {
        int t = fg_graph_find_tensor(g, b[i].name);
        int64_t n = fg_tensor_numel(&g->tensors[t]);
        double *got = fg_xmalloc((size_t)n * sizeof *got), max_abs;
        fg_tensor_unpack(&g->tensors[t], g->tensors[t].layout, b[i].data, got);
        double rel = fg_rel_l2(got, ref[t], n, &max_abs);
        print_message("  output %s: rel_l2 %.3e max_abs %.3e (tolerance %.1e)\n", b[i].name, rel, max_abs, tol);
        assert_true(rel <= tol);   /* false for NaN too */
        free(got);
    }
    free_bindings(b, nio);
    fg_reference_free(g, ref);
    free(ref);
}

fg_context *tu_ctx_empty(void)
{
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    ctx->quiet = 1;
    return ctx;
}

fg_context *tu_ctx_shipped(void)
{
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, tu_src("rules"));
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

int tu_has_error(const fg_context *ctx, const char *needle)
{
    char buf[2048];
    for (int i = 0; i < fg_context_error_count(ctx); i++)
        if (strstr(fg_error_format(fg_context_error(ctx, i), buf, sizeof buf), needle))
            return 1;
    tu_dump_errors(ctx);
    fprintf(stderr, "(expected an error containing: %s)\n", needle);
    return 0;
}

void tu_dump_errors(const fg_context *ctx)
{
    char buf[2048];
    for (int i = 0; i < fg_context_error_count(ctx); i++)
        fprintf(stderr, "  %s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
}

int tu_run(const char *cmd, char **out)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    fg_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        fg_buf_putn(&b, chunk, n);
    int st = pclose(p);
    if (out)
        *out = fg_buf_take(&b);
    else
        fg_buf_free(&b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- kernels run by the emulator outside the executor ---- */

void tu_kargs_init(tu_kargs *a, const fg_kernel *k, const fg_graph *pg, const fg_graph *src, double *const *ref)
{
    memset(a, 0, sizeof *a);
    a->out_slot = -1;
    for (int j = 0; j < k->nparams; j++) {
        const fg_kparam *kp = &k->params[j];
        if (kp->kind == FG_KPARAM_WORKSPACE || kp->kind == FG_KPARAM_COUNTERS) {   /* counters zeroed once */
            assert_true(kp->value > 0);
            a->bufs[j] = fg_xcalloc(1, (size_t)kp->value + 16);
            a->args[j] = (uint64_t)(uintptr_t)a->bufs[j];
            a->has_workspace = 1;
            continue;
        }
        if (kp->kind != FG_KPARAM_TENSOR) {
            a->args[j] = (uint64_t)kp->value;
            continue;
        }
        const fg_tensor *tt = &pg->tensors[kp->tensor];
        int64_t n = fg_tensor_numel(tt);
        size_t bytes = (size_t)n * fg_dtype_size(tt->dtype);
        a->bufs[j] = fg_xmalloc(bytes + 16);   /* malloc: 16-byte aligned, as the executor's buffers */
        if (kp->writes) {
            memset(a->bufs[j], 0xff, bytes);
            a->out_slot = j;
        } else if (tt->is_input) {
            int si = fg_graph_find_tensor(src, tt->name);
            assert_true(si >= 0);
            fg_tensor_pack(tt, tt->layout, ref[si], a->bufs[j]);
        } else {
            assert_true(tt->is_weight);
            double *v = fg_xmalloc((size_t)n * sizeof *v);
            fg_tensor_values_f64(tt, v);
            fg_tensor_pack(tt, tt->layout, v, a->bufs[j]);
            free(v);
        }
        a->args[j] = (uint64_t)(uintptr_t)a->bufs[j];
    }
    assert_true(a->out_slot >= 0);
}

void tu_kargs_poison(tu_kargs *a, const fg_kernel *k, const fg_graph *pg)
{
    const fg_tensor *t = &pg->tensors[k->params[a->out_slot].tensor];
    memset(a->bufs[a->out_slot], 0xff, (size_t)fg_tensor_numel(t) * fg_dtype_size(t->dtype));
}

void tu_kargs_free(tu_kargs *a)
{
    for (int j = 0; j < FG_MAX_KPARAMS; j++)
        free(a->bufs[j]);
    memset(a, 0, sizeof *a);
}

/* Emits group 0 of plan p (planned from source graph src), replaces the
 * first `from` in its source by `to` (from NULL: unmutated; a `from` not in
 * the source fails the test), builds it for the emulator and launches it
 * directly on buffers of its own: inputs from fg_reference_random_inputs
 * (seed) rounded to the output's dtype, weights from the plan graph, the
 * output poisoned, tensor maps encoded by fg_emu_tmap_encode, the argument
 * bytes laid out by fg_kparam_layout.  Returns the relative L2 error of the
 * output against the reference of src (INFINITY for NaN), or -1 when the
 * launch failed (its error printed). */
double tu_mutated_rel_l2(fg_context *ctx, const fg_plan *p, const fg_graph *src, const char *from, const char *to,
                         uint64_t seed)
{
    const fg_graph *pg = p->graph;
    fg_dtype dt = src->tensors[src->outputs[0]].dtype;
    double **ref = fg_xcalloc((size_t)src->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(src, seed, ref);
    for (int t = 0; t < src->ntensors; t++)
        if (src->tensors[t].is_input)
            for (int64_t i = 0; i < fg_tensor_numel(&src->tensors[t]); i++)
                ref[t][i] = fg_round_to_dtype(ref[t][i], dt);

    fg_kernel k;
    fg_status st = fg_emit_group(ctx, p, 0, NULL, &k);
    assert_int_equal(st, FG_OK);
    if (from) {
        char *at = strstr(k.source, from);
        if (!at)
            fail_msg("mutation: \"%s\" not in the kernel", from);
        fg_buf b = {0};
        fg_buf_putn(&b, k.source, (size_t)(at - k.source));
        fg_buf_put(&b, to);
        fg_buf_put(&b, at + strlen(from));
        free(k.source);
        k.source = fg_buf_take(&b);
    }
    st = fg_emu_build(ctx, &k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);

    void *bufs[FG_MAX_KPARAMS] = {0};
    size_t off[FG_MAX_KPARAMS];
    size_t total = fg_kparam_layout(&k, off);
    _Alignas(64) uint64_t args[FG_MAX_KPARAMS + FG_MAX_TMAPS * 24 + 8];
    assert_true(total <= sizeof args);
    memset(args, 0, sizeof args);
    int out_slot = -1;
    for (int j = 0; j < k.nparams; j++) {
        const fg_kparam *kp = &k.params[j];
        if (kp->kind != FG_KPARAM_TENSOR)
            continue;
        const fg_tensor *tt = &pg->tensors[kp->tensor];
        int64_t n = fg_tensor_numel(tt);
        size_t bytes = (size_t)n * fg_dtype_size(tt->dtype);
        bufs[j] = fg_xmalloc(bytes + 16);   /* malloc: 16-byte aligned, as the executor's buffers */
        if (kp->writes) {
            memset(bufs[j], 0xff, bytes);   /* NaN in every dtype */
            out_slot = j;
        } else if (tt->is_input) {
            int si = fg_graph_find_tensor(src, tt->name);
            assert_true(si >= 0);
            fg_tensor_pack(tt, tt->layout, ref[si], bufs[j]);
        } else {
            double *v = fg_xmalloc((size_t)n * sizeof *v);
            fg_tensor_values_f64(tt, v);
            fg_tensor_pack(tt, tt->layout, v, bufs[j]);
            free(v);
        }
        uint64_t a = (uint64_t)(uintptr_t)bufs[j];
        memcpy((char *)args + off[j], &a, sizeof a);
    }
    for (int j = 0; j < k.nparams; j++) {   /* split-K's slots (poisoned) and counters (zero) */
        const fg_kparam *kp = &k.params[j];
        if (kp->kind != FG_KPARAM_WORKSPACE && kp->kind != FG_KPARAM_COUNTERS)
            continue;
        bufs[j] = fg_xcalloc((size_t)kp->value + 16, 1);
        if (kp->kind == FG_KPARAM_WORKSPACE)
            memset(bufs[j], 0xff, (size_t)kp->value);
        uint64_t a = (uint64_t)(uintptr_t)bufs[j];
        memcpy((char *)args + off[j], &a, sizeof a);
    }
    for (int j = 0; j < k.nparams; j++) {   /* the tensor maps over those buffers */
        const fg_kparam *kp = &k.params[j];
        if (kp->kind != FG_KPARAM_TMAP)
            continue;
        uint64_t base = 0;
        for (int i = 0; i < k.nparams; i++)
            if (k.params[i].kind == FG_KPARAM_TENSOR && k.params[i].tensor == kp->tensor)
                base = (uint64_t)(uintptr_t)bufs[i];
        const fg_kparam_tmap *t = &k.tmaps[kp->value];
        fg_tmap_desc d = fg_exec_tmap_desc(t, base);
        assert_int_equal(fg_emu_tmap_encode(&d, (char *)args + off[j]), 0);
    }
    assert_true(out_slot >= 0);
    double rel = -1;
    st = fg_emu_launch(ctx, &k, args);
    if (st == FG_OK) {
        assert_int_equal(fg_reference_run(ctx, src, ref), FG_OK);
        const fg_tensor *ot = &pg->tensors[k.params[out_slot].tensor];
        int so = fg_graph_find_tensor(src, ot->name);
        int64_t n = fg_tensor_numel(ot);
        double *got = fg_xmalloc((size_t)n * sizeof *got), max_abs;
        fg_tensor_unpack(ot, ot->layout, bufs[out_slot], got);
        rel = fg_rel_l2(got, ref[so], n, &max_abs);
        if (isnan(rel))
            rel = INFINITY;
        free(got);
    } else {
        char buf[512];
        print_message("    launch failed: %.200s\n", fg_error_format(fg_context_error(ctx, 0), buf, sizeof buf));
    }
    for (int j = 0; j < k.nparams; j++)
        free(bufs[j]);
    fg_kernel_free(&k);
    fg_reference_free(src, ref);
    free(ref);
    return rel;
}


/* ---- NVRTC and NVIDIA's binary tools ---- */

int tu_nvrtc_clean(fg_context *ctx, fg_kernel *ks, int nk)
{
    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info *infos = fg_xcalloc((size_t)nk + 1, sizeof *infos);
    int clean = 0;
    for (int a = 0; a < 2; a++) {
        fg_status st = fg_jit_compile_all(ctx, ks, nk, archs[a], infos);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        for (int i = 0; i < nk; i++) {
            if (infos[i].log[0] || !ks[i].binary_size)
                fprintf(stderr, "---- %s (%s): log:\n%s\n---- source:\n%s\n", ks[i].name, archs[a], infos[i].log,
                        ks[i].source);
            else
                clean++;
        }
    }
    free(infos);
    return clean;
}

int tu_cuda_tools_found(const char *what)
{
    const char *objdump = fg_cuda_tool_path(FG_TOOL_CUOBJDUMP), *disasm = fg_cuda_tool_path(FG_TOOL_NVDISASM);
    if (objdump && disasm)
        return 1;
    printf("%s NOT RUN: %s%s%s not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or set "
           "FUSEGEN_CUDA_TOOLS)\n", what, objdump ? "" : "cuobjdump", !objdump && !disasm ? " and " : "",
           disasm ? "" : "nvdisasm");
    fflush(stdout);
    return 0;
}

void tu_cubin_read(const fg_kernel *k, fg_res_usage *res, fg_sass_mix *mix, char **sass)
{
    static const char *const res_args[] = {"-res-usage"}, *const sass_args[] = {"-c"};
    char *out = NULL;
    int rc = fg_cuda_tool_run(FG_TOOL_CUOBJDUMP, res_args, 1, k->binary, k->binary_size, &out);
    if (rc != 0 || fg_res_usage_parse(out, k->name, res) != 0)
        fail_msg("%s: cuobjdump -res-usage failed (status %d):\n%s", k->name, rc, out ? out : "");
    free(out);
    out = NULL;
    rc = fg_cuda_tool_run(FG_TOOL_NVDISASM, sass_args, 1, k->binary, k->binary_size, &out);
    if (rc != 0)
        fail_msg("%s: nvdisasm failed (status %d):\n%s", k->name, rc, out ? out : "");
    fg_sass_mix_count(out, mix);
    if (sass)
        *sass = out;
    else
        free(out);
}

/* ---- a run against the reference, NaN and infinities compared ---- */

void tu_exec_compare(fg_context *ctx, const fg_graph *g, struct fg_exec *e, tu_poke_fn poke, uint64_t s,
                     tu_cmp *res)
{
    memset(res, 0, sizeof *res);
    double **ref = fg_xcalloc((size_t)g->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(g, s, ref);
    if (poke)
        poke(g, ref);
    int nin, nio;
    fg_binding *b = run_bound(ctx, g, e, ref, &nin, &nio);
    assert_int_equal(nio - nin, 1);
    int t = fg_graph_find_tensor(g, b[nin].name);
    int64_t n = fg_tensor_numel(&g->tensors[t]);
    double *got = fg_xmalloc((size_t)n * sizeof *got), num = 0, den = 0;
    fg_tensor_unpack(&g->tensors[t], g->tensors[t].layout, b[nin].data, got);
    for (int64_t k = 0; k < n; k++) {
        double r = ref[t][k], v = got[k];
        if (isnan(r)) {
            res->nan_ref++;
            res->nan_mismatch += !isnan(v);
            continue;
        }
        if (isnan(v) || isinf(v) || isinf(r)) {
            res->nan_mismatch += isnan(v);
            res->inf_mismatch += !isnan(v) && v != r;
            continue;
        }
        num += (v - r) * (v - r);
        den += r * r;
    }
    res->rel = den > 0 ? sqrt(num / den) : sqrt(num);
    free(got);
    free_bindings(b, nio);
    fg_reference_free(g, ref);
    free(ref);
}
