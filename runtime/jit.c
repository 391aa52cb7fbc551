/*
 * jit.c -- the NVRTC toolchain of the CUDA backend (jit.h): the target arch,
 * the cache key, the compile and its diagnostics.  The cache sequence itself
 * is kcache.c's, shared with emulation.
 *
 * The cache key is XXH3-128 over a canonical, length-prefixed serialization
 * of: the key format, the generator version, the kernel's deps_hash, the
 * NVRTC version, the target arch, the compile options (and, for a kernel
 * that needs the architecture-specific target, that target: sm_90a), a hash
 * of the prelude header given to NVRTC, and the full source.  A change to any of them is a
 * different key, so a stale binary is never served.
 *
 * The source is compiled as "kernel.cu" with the prelude available as the
 * header "fusegen_prelude.cuh"; an sm_XX arch yields a cubin, compute_XX PTX.
 */
#include "jit.h"

#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "context.h"
#include "diag.h"
#include "nvrtc_check.h"
#include "runtime.h"

#define KEY_FORMAT "fusegen-kernel-key 2"
#define PRELUDE_NAME "fusegen_prelude.cuh"
#define MAX_QUOTED_ERRORS 8

/* ---- process-wide facts, computed once -------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char nvrtc_version[32];
static const char *prelude_text;          /* NULL when there is no prelude */
static char prelude_hash[33];
static int *supported_archs;              /* numeric, e.g. 75, 80, 90 */
static int nsupported;

static void init_once(void)
{
    int maj = 0, min = 0;
    if (nvrtcVersion(&maj, &min) == NVRTC_SUCCESS)
        snprintf(nvrtc_version, sizeof nvrtc_version, "NVRTC %d.%d", maj, min);
    else
        snprintf(nvrtc_version, sizeof nvrtc_version, "NVRTC ?");
    prelude_text = fg_template_text("prelude.cuh");
    fg_hash128 h = {0, 0};
    if (prelude_text)
        h = fg_hash128_of(prelude_text, strlen(prelude_text));
    fg_hash128_hex(h, prelude_hash);
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
        supported_archs = fg_xcalloc((size_t)n, sizeof *supported_archs);
        if (nvrtcGetSupportedArchs(supported_archs) == NVRTC_SUCCESS)
            nsupported = n;
    }
}

const char *fg_nvrtc_version(void)
{
    pthread_once(&once, init_once);
    return nvrtc_version;
}

/* ---- arch ------------------------------------------------------------- */

/* Parses "sm_NN[a|f]" / "compute_NN[a|f]"; returns the number or -1. */
static int arch_number(const char *arch, int *is_ptx)
{
    const char *p;
    if (strncmp(arch, "sm_", 3) == 0) {
        p = arch + 3;
        *is_ptx = 0;
    } else if (strncmp(arch, "compute_", 8) == 0) {
        p = arch + 8;
        *is_ptx = 1;
    } else {
        return -1;
    }
    int v = 0, nd = 0;
    while (*p >= '0' && *p <= '9' && nd < 4) {
        v = v * 10 + (*p++ - '0');
        nd++;
    }
    if (nd < 2 || nd > 3)
        return -1;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p ? -1 : v;
}

/* The target kernel k compiles for under the batch's arch: the arch itself,
 * or for a kernel that needs the architecture-specific features
 * (k->arch_specific: wgmma, setmaxnreg) the arch with the suffix "a"
 * (sm_90 -> sm_90a, compute_90 -> compute_90a).  Returns 0, or -1 when the
 * arch has no such target (only sm_90 here): the kernel cannot run there. */
static int kernel_arch(const char *arch, const fg_kernel *k, char out[32])
{
    int ptx = 0;
    int v = arch_number(arch, &ptx);
    snprintf(out, 32, "%s", arch);
    if (!k->arch_specific)
        return 0;
    if (v != 90)
        return -1;
    size_t n = strlen(out);
    if (n && (out[n - 1] == 'a' || out[n - 1] == 'f'))
        out[n - 1] = 'a';
    else
        snprintf(out, 32, "%s_90a", ptx ? "compute" : "sm");
    return 0;
}

fg_status fg_jit_check_arch(fg_context *ctx, const char *arch)
{
    pthread_once(&once, init_once);
    int ptx = 0;
    int v = arch ? arch_number(arch, &ptx) : -1;
    int ok = v >= 0;
    if (ok && nsupported) {
        ok = 0;
        for (int i = 0; i < nsupported; i++)
            ok |= supported_archs[i] == v;
    }
    if (ok)
        return FG_OK;
    /* Suggest the closest supported arch of the same family. */
    char cands[64][16];
    const char *cp[64] = {0};
    int nc = 0;
    for (int i = 0; i < nsupported && nc < 64; i++) {
        snprintf(cands[nc], sizeof cands[nc], "%s_%d", arch && strncmp(arch, "compute_", 8) == 0 ? "compute" : "sm",
                 supported_archs[i]);
        cp[nc] = cands[nc];
        nc++;
    }
    /* A truncated number ("sm_9") most likely meant the first arch it begins; else the nearest. */
    const char *s = NULL;
    for (int i = 0; arch && *arch && i < nc && !s; i++)
        if (strncmp(cp[i], arch, strlen(arch)) == 0)
            s = cp[i];
    if (!s && arch)
        s = fg_suggest(arch, cp, nc);
    if (s)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "unknown arch '%s' (did you mean '%s'?)", arch ? arch : "", s);
    if (nc)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "unknown arch '%s' (%s supports %s .. %s)", arch ? arch : "",
                             nvrtc_version, cands[0], cands[nc - 1]);
    return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "unknown arch '%s' (expected sm_NN or compute_NN)",
                         arch ? arch : "");
}

/* The planner's target (fg_target_arch: the arch option, the attached GPU's,
 * $FUSEGEN_ARCH), resolved the same way, else sm_90. */
static void resolve_arch(fg_context *ctx, char out[32])
{
    fg_rt_resolve_target(ctx);
    const char *a = fg_target_arch(ctx);
    snprintf(out, 32, "%s", a ? a : "sm_90");
}

const char *fg_jit_arch(fg_context *ctx)
{
    struct fg_runtime *rt = fg_rt(ctx);
    pthread_mutex_lock(&rt->lock);
    int have = rt->arch[0] != 0;
    pthread_mutex_unlock(&rt->lock);
    if (!have) {
        char a[32];
        resolve_arch(ctx, a);   /* outside rt->lock: the device layer may take it */
        pthread_mutex_lock(&rt->lock);
        if (!rt->arch[0])
            memcpy(rt->arch, a, sizeof rt->arch);
        pthread_mutex_unlock(&rt->lock);
    }
    return rt->arch;
}

/* ---- key -------------------------------------------------------------- */

/* The resolved compiler of a batch: the arch and the NVRTC options. */
typedef struct nvrtc_tc {
    char arch[32];
    char arch_opt[48];
    char *extra;                /* $FUSEGEN_NVRTC_OPTIONS, split in place */
    const char **v;             /* the options */
    int n;
} nvrtc_tc;

/* The NVRTC options: the arch, C++17, functions default to device code, then
 * whatever $FUSEGEN_NVRTC_OPTIONS adds (whitespace-separated, e.g. -lineinfo).
 * All of them are part of the cache key. */
static nvrtc_tc *tc_new(fg_context *ctx, const char *arch)
{
    nvrtc_tc *t = fg_xcalloc(1, sizeof *t);
    snprintf(t->arch, sizeof t->arch, "%s", arch);
    snprintf(t->arch_opt, sizeof t->arch_opt, "--gpu-architecture=%s", arch);
    t->extra = fg_xstrdup(ctx->env.nvrtc_options ? ctx->env.nvrtc_options : "");
    int cap = 4;
    for (const char *p = t->extra; *p; p++)
        cap += *p == ' ' || *p == '\t';
    t->v = fg_xcalloc((size_t)cap + 1, sizeof *t->v);
    t->v[t->n++] = t->arch_opt;
    t->v[t->n++] = "--std=c++17";
    t->v[t->n++] = "-default-device";
    char *save = NULL;
    for (char *w = strtok_r(t->extra, " \t", &save); w && t->n < cap; w = strtok_r(NULL, " \t", &save))
        t->v[t->n++] = w;
    return t;
}

void fg_nvrtc_toolchain_free(void *tc)
{
    nvrtc_tc *t = tc;
    if (!t)
        return;
    free(t->extra);
    free(t->v);
    free(t);
}

fg_status fg_nvrtc_toolchain_new(fg_context *ctx, const char *arch, void **tc)
{
    pthread_once(&once, init_once);
    *tc = NULL;
    if (!arch)
        arch = fg_jit_arch(ctx);
    fg_status st = fg_jit_check_arch(ctx, arch);
    if (st)
        return st;
    *tc = tc_new(ctx, arch);
    return FG_OK;
}

void fg_nvrtc_key(const void *tc, const fg_kernel *k, char key[33])
{
    const nvrtc_tc *t = tc;
    char deps[33];
    fg_hash128_hex(k->deps_hash, deps);
    fg_key h;
    fg_key_begin(&h, KEY_FORMAT);
    fg_key_part(&h, "generator", fg_version(), strlen(fg_version()));
    fg_key_part(&h, "deps", deps, 32);
    fg_key_part(&h, "nvrtc", nvrtc_version, strlen(nvrtc_version));
    fg_key_part(&h, "arch", t->arch, strlen(t->arch));
    for (int i = 0; i < t->n; i++)
        fg_key_part(&h, "option", t->v[i], strlen(t->v[i]));
    if (k->arch_specific) {   /* the target it really compiles for (sm_90a) */
        char karch[32];
        if (kernel_arch(t->arch, k, karch) != 0)
            snprintf(karch, sizeof karch, "none");
        fg_key_part(&h, "arch-specific target", karch, strlen(karch));
    }
    fg_key_part(&h, "prelude", prelude_hash, 32);
    char canon[33];   /* the source up to comments and parameter names (emit_name.c) */
    fg_kernel_source_hash(k, canon);
    fg_key_part(&h, "canonical source", canon, 32);
    fg_key_part(&h, "entry point", k->name, strlen(k->name));   /* the binary's own name for it */
    fg_key_end(&h, key);
}

/* ---- diagnostics ------------------------------------------------------ */

/* Line n (1-based) of text, or NULL; *len gets its length. */
static const char *line_at(const char *text, int n, size_t *len)
{
    const char *p = text;
    for (int i = 1; i < n && p; i++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p || !*p)
        return NULL;
    const char *e = strchr(p, '\n');
    *len = e ? (size_t)(e - p) : strlen(p);
    return p;
}

/* The rule location named in the source's header comment: the first token of
 * the form <path>.yaml:<line> within the leading comment lines. */
static fg_loc source_origin(fg_context *ctx, const char *src)
{
    fg_loc loc = FG_NOLOC;
    for (int ln = 1; ln <= 40; ln++) {
        size_t len;
        const char *l = line_at(src, ln, &len);
        if (!l)
            break;
        const char *t = l;
        while (t < l + len && (*t == ' ' || *t == '\t'))
            t++;
        int comment = (t + 1 < l + len && t[0] == '/' && (t[1] == '/' || t[1] == '*')) || (t < l + len && *t == '*');
        if (!comment)
            break;
        for (const char *p = l; p + 6 <= l + len; p++) {
            if (strncmp(p, ".yaml:", 6) != 0 || !(p[6] >= '0' && p[6] <= '9'))
                continue;
            const char *s = p;
            while (s > l && s[-1] != ' ' && s[-1] != '(' && s[-1] != '\t' && s[-1] != '"')
                s--;
            char file[512];
            snprintf(file, sizeof file, "%.*s", (int)(p + 5 - s), s);
            loc.file = fg_intern(ctx, file);
            loc.line = atoi(p + 6);
            return loc;
        }
    }
    return loc;
}

/* Appends the source's leading comment block (at most 8 lines). */
static void quote_header(fg_buf *b, const char *src)
{
    int shown = 0;
    for (int ln = 1; ln <= 40 && shown < 8; ln++) {
        size_t len;
        const char *l = line_at(src, ln, &len);
        if (!l)
            break;
        const char *t = l;
        while (t < l + len && (*t == ' ' || *t == '\t'))
            t++;
        if (!(t < l + len && (*t == '/' || *t == '*')))
            break;
        if (!shown)
            fg_buf_put(b, "\nkernel source header:");
        fg_buf_printf(b, "\n    %.*s", (int)len, l);
        shown++;
    }
}

/* Records a compile failure: the NVRTC log, each line the log reports an error
 * on (with one line of context either side), and the producing rule. */
static fg_status compile_error(fg_context *ctx, const fg_kernel *k, const char *arch, const char *log)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "NVRTC (%s) could not compile kernel '%s' for %s:\n%s", nvrtc_version, k->name, arch,
                  log && *log ? log : "(empty log)\n");
    int lines[MAX_QUOTED_ERRORS], nl = 0;
    for (const char *p = log; p && (p = strstr(p, "kernel.cu(")) != NULL; p++) {
        char *end;
        long n = strtol(p + 10, &end, 10);
        if (end == p + 10 || strncmp(end, "): error", 8) != 0)
            continue;
        int dup = 0;
        for (int i = 0; i < nl; i++)
            dup |= lines[i] == (int)n;
        if (!dup && nl < MAX_QUOTED_ERRORS)
            lines[nl++] = (int)n;
    }
    if (nl)
        fg_buf_put(&b, "offending source lines:");
    for (int i = 0; i < nl; i++) {
        for (int ln = lines[i] - 1; ln <= lines[i] + 1; ln++) {
            size_t len;
            const char *l = ln >= 1 ? line_at(k->source, ln, &len) : NULL;
            if (l)
                fg_buf_printf(&b, "\n  %c kernel.cu:%d | %.*s", ln == lines[i] ? '>' : ' ', ln, (int)len, l);
        }
    }
    quote_header(&b, k->source);
    fg_loc origin = source_origin(ctx, k->source);
    fg_status st = fg_diag_error(ctx, FG_ERR_COMPILE, origin, "%s", b.s);
    fg_buf_free(&b);
    return st;
}

/* ---- compile ---------------------------------------------------------- */

/* FUSEGEN_DUMP_SOURCE=DIR: writes DIR/<name>-<key>.cu and the prelude beside
 * it (so the file also compiles with nvcc -I DIR).  Failures are ignored. */
void fg_nvrtc_dump(fg_context *ctx, const void *tc, const fg_kernel *k)
{
    (void)tc;
    const char *dir = ctx->env.dump_source;
    if (!dir || !*dir || fg_mkdir_p(dir, 0755) != 0)
        return;
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%s-%s.cu", dir, k->name[0] ? k->name : "kernel", k->key);
    fg_write_file_atomic(b.s, k->source, strlen(k->source));
    fg_buf_free(&b);
    if (prelude_text) {
        char *p = fg_path_join(dir, PRELUDE_NAME);
        fg_write_file_atomic(p, prelude_text, strlen(prelude_text));
        free(p);
    }
}

/* Runs NVRTC.  On success sets *bin / *size (malloc'd) and *log (malloc'd,
 * possibly empty). */
static fg_status nvrtc_compile(fg_context *ctx, const fg_kernel *k, const nvrtc_tc *t, void **bin, size_t *size,
                               char **log)
{
    nvrtcProgram prog = NULL;
    const char *hdrs[1] = {prelude_text};
    const char *names[1] = {PRELUDE_NAME};
    int ptx = 0;
    arch_number(t->arch, &ptx);
    *bin = NULL;
    *size = 0;
    *log = NULL;
    fg_status st = FG_NVRTC_CHECK(ctx, nvrtcCreateProgram(&prog, k->source, "kernel.cu", prelude_text ? 1 : 0,
                                                          prelude_text ? hdrs : NULL, prelude_text ? names : NULL));
    if (st)
        return st;
    char karch[32], kopt[64];
    const char **opts = fg_xcalloc((size_t)t->n + 1, sizeof *opts);
    kernel_arch(t->arch, k, karch);   /* fg_nvrtc_compile checked that it has one */
    snprintf(kopt, sizeof kopt, "--gpu-architecture=%s", karch);
    for (int i = 0; i < t->n; i++)
        opts[i] = i == 0 ? kopt : t->v[i];
    nvrtcResult r = nvrtcCompileProgram(prog, t->n, opts);
    free(opts);
    *log = fg_nvrtc_program_log(prog);
    if (r == NVRTC_ERROR_COMPILATION) {
        st = compile_error(ctx, k, karch, *log);
        goto out;
    }
    if ((st = FG_NVRTC_CHECK_PROG(ctx, prog, r)) != FG_OK)
        goto out;
    if (ptx) {
        if ((st = FG_NVRTC_CHECK(ctx, nvrtcGetPTXSize(prog, size))) != FG_OK)
            goto out;
        *bin = fg_xmalloc(*size);
        st = FG_NVRTC_CHECK(ctx, nvrtcGetPTX(prog, *bin));
    } else {
        if ((st = FG_NVRTC_CHECK(ctx, nvrtcGetCUBINSize(prog, size))) != FG_OK)
            goto out;
        *bin = fg_xmalloc(*size);
        st = FG_NVRTC_CHECK(ctx, nvrtcGetCUBIN(prog, *bin));
    }
out:
    if (st) {
        free(*bin);
        *bin = NULL;
        *size = 0;
    }
    nvrtcDestroyProgram(&prog);
    return st;
}

fg_status fg_nvrtc_compile(fg_context *ctx, const void *tc, const fg_kernel *k, void **bin, size_t *size, char **meta,
                           char **log)
{
    const nvrtc_tc *t = tc;
    double t0 = fg_now();
    char karch[32];
    *meta = NULL;
    *bin = NULL;
    *size = 0;
    *log = NULL;
    if (kernel_arch(t->arch, k, karch) != 0)
        return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, source_origin(ctx, k->source),
                             "kernel '%s' (template %s) needs the sm_90a target (wgmma, TMA): it cannot be compiled "
                             "for %s; plan for sm_90 or leave the arch to the planner", k->name,
                             k->template_name ? k->template_name : "?", t->arch);
    fg_status st = nvrtc_compile(ctx, k, t, bin, size, log);
    if (st)
        return st;
    fg_buf m = {0};
    char num[32];
    int ptx = 0;
    arch_number(t->arch, &ptx);
    fg_meta_put(&m, "name", k->name);
    fg_meta_put(&m, "arch", karch);
    fg_meta_put(&m, "format", ptx ? "ptx" : "cubin");
    fg_meta_put(&m, "generator", "fusegen " FG_VERSION_STRING);
    fg_meta_put(&m, "nvrtc", nvrtc_version);
    snprintf(num, sizeof num, "%.1f", (fg_now() - t0) * 1e3);
    fg_meta_put(&m, "compile_ms", num);
    snprintf(num, sizeof num, "%zu", strlen(k->source));
    fg_meta_put(&m, "source_bytes", num);
    fg_meta_put(&m, "log", *log ? *log : "");
    *meta = fg_buf_take(&m);
    return FG_OK;
}

/* ---- the compile entry points of the CUDA backend ------------------------- */

fg_status fg_jit_compile(fg_context *ctx, fg_kernel *k, const char *arch, fg_jit_info *info)
{
    return fg_kernel_obtain(ctx, &fg_backend_cuda, k, arch, info);
}

fg_status fg_jit_compile_all(fg_context *ctx, fg_kernel *ks, int n, const char *arch, fg_jit_info *infos)
{
    return fg_kernel_obtain_all(ctx, &fg_backend_cuda, ks, n, arch, infos);
}
