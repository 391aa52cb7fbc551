/*
 * emu.c -- the CPU emulation backend's toolchain and kernels (see emu.h):
 * builds a generated kernel source with the host C++ compiler against the
 * emulation prelude into a shared object (kcache.c drives the cache
 * sequence), loads it, and launches it on the scheduler of emu_sched.c.
 * backend_emu.c puts these entries in the backend table.
 *
 * Build: the source, the prelude (as "fusegen_prelude.cuh") and the
 * interface header it includes (as "fusegen_emu_api.h") go into a
 * private directory under $TMPDIR; the compiler runs there and the .so is
 * read back; every temporary file is removed at once.  Load: the bytes (as
 * verified by the cache, or just compiled) are written with
 * fg_cache_write_private into a fresh private directory, dlopen'd with
 * RTLD_LOCAL and removed.
 * The cache key covers the generator version, the compiler (path and
 * --version), the flags, the prelude and interface texts and the source; the
 * payload is the .so itself.
 *
 * Settings (read at context init, ctx->env): FUSEGEN_HOST_CXX (compiler,
 * default CMake's C++ compiler), FUSEGEN_EMU_CXXFLAGS (extra flags),
 * FUSEGEN_EMU_ASAN=1 (AddressSanitizer; the host program must be ASan-built),
 * FUSEGEN_EMU_DEBUG=1 (report compiler warnings), FUSEGEN_EMU_KEEP=1 (keep the
 * build directory), FUSEGEN_EMU_STRICT=1 (barrier divergence is an error),
 * FUSEGEN_EMU_STACK_KB (thread stack size).
 */
#define _GNU_SOURCE
#include "emu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_fsz.h"
#include "context.h"
#include "diag.h"
#include "embedded.h"
#include "emu_sched.h"
#include "kcache.h"
#include "num.h"

#ifndef FG_HOST_CXX
#define FG_HOST_CXX "c++"
#endif
#ifndef FG_VERSION_STRING
#define FG_VERSION_STRING "0"
#endif

#define PRELUDE_NAME "fusegen_prelude.cuh"
#define API_NAME "fusegen_emu_api.h"   /* templates/emu_api.h, which the prelude includes */

/* Splits s at white space into a malloc'd NULL-terminated word list (the
 * words point into *copy, also malloc'd); returns the count. */
static int split_words(const char *s, const char ***words, char **copy)
{
    *copy = fg_xstrdup(s ? s : "");
    int cap = 1;
    for (const char *p = *copy; *p; p++)
        cap += isspace((unsigned char)*p) != 0;
    *words = fg_xcalloc((size_t)cap + 1, sizeof **words);
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(*copy, " \t\n", &save); w && n < cap; w = strtok_r(NULL, " \t\n", &save))
        (*words)[n++] = w;
    return n;
}

/* The first line of `cxx --version`, remembered per compiler command. */
typedef struct cxx_version {
    char *cmd, *version;
    struct cxx_version *next;
} cxx_version;

static pthread_mutex_t version_lock = PTHREAD_MUTEX_INITIALIZER;
static cxx_version *versions;

static const char *compiler_version(const char *const *cxx, int ncxx, const char *cmd, char **log)
{
    pthread_mutex_lock(&version_lock);
    for (cxx_version *v = versions; v; v = v->next)
        if (strcmp(v->cmd, cmd) == 0) {
            pthread_mutex_unlock(&version_lock);
            return v->version;
        }
    pthread_mutex_unlock(&version_lock);
    const char **argv = fg_xcalloc((size_t)ncxx + 2, sizeof *argv);
    int n = 0;
    for (int i = 0; i < ncxx; i++)
        argv[n++] = cxx[i];
    argv[n++] = "--version";
    argv[n] = NULL;
    char *out = NULL;
    int rc = fg_run_capture(argv, NULL, &out);
    int err = errno;
    free(argv);
    errno = err;
    if (rc != 0) {
        if (rc < 0) {
            free(out);
            out = fg_xstrdup(strerror(errno));
        }
        *log = out;
        return NULL;
    }
    size_t len = strcspn(out, "\n");
    cxx_version *v = fg_xcalloc(1, sizeof *v);
    v->cmd = fg_xstrdup(cmd);
    v->version = fg_xstrndup(out, len);
    free(out);
    pthread_mutex_lock(&version_lock);
    v->next = versions;
    versions = v;
    pthread_mutex_unlock(&version_lock);
    return v->version;
}

static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fg_cache_fsz_begin();   /* past a file-size limit: EFBIG, an error, not SIGXFSZ */
    size_t w = fwrite(data, 1, len, f);
    int rc = fclose(f);
    fg_cache_fsz_end();
    return w == len && rc == 0 ? 0 : -1;
}

static char *make_tmpdir(const fg_context *ctx)
{
    char *tmpl = fg_path_join(ctx->env.tmpdir, "fusegen-emu-XXXXXX");
    if (!mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

/* Removes the files this module writes into dir, then dir. */
static void remove_tmpdir(const char *dir, const char *name)
{
    const char *suffix[] = {".cu", ".so", "", ""};
    for (size_t i = 0; i < FG_COUNTOF(suffix); i++) {
        fg_buf b = {0};
        fg_buf_printf(&b, "%s/%s%s", dir, i < 2 ? name : i == 2 ? PRELUDE_NAME : API_NAME, suffix[i]);
        unlink(b.s);
        fg_buf_free(&b);
    }
    rmdir(dir);
}

/* Location of the first "NAME.cu:LINE:COL: error" in the compiler output. */
static fg_loc error_loc(fg_context *ctx, const char *out, const char *file)
{
    size_t fl = strlen(file);
    for (const char *p = strstr(out, file); p; p = strstr(p + 1, file)) {
        if (p[fl] != ':')
            continue;
        char *end;
        long line = strtol(p + fl + 1, &end, 10);
        if (*end != ':')
            continue;
        long col = strtol(end + 1, &end, 10);
        const char *eol = end + strcspn(end, "\n"), *err = strstr(end, " error");
        if (*end != ':' || !err || err > eol)
            continue;
        return (fg_loc){fg_intern(ctx, file), (int)line, (int)col};
    }
    return (fg_loc){fg_intern(ctx, file), 0, 0};
}

/* ---- the toolchain ------------------------------------------------------- */

/* The compiler command line of a batch: compiler words, fixed flags, the
 * sanitizer, extra flags; and what the key needs. */
typedef struct emu_tc {
    const char *cxx_cmd;          /* the compiler setting, for the key */
    const char **cxx;             /* its words */
    char *cxx_copy;
    int ncxx;
    const char **flags;           /* everything after the compiler words */
    int nflags;
    char *extra_copy;
    const char *version;          /* first line of --version (process lifetime) */
    const fg_embedded_file *prelude;
    const fg_embedded_file *api;  /* templates/emu_api.h */
} emu_tc;

static const char *const fixed_flags[] = {"-std=c++17", "-O1", "-g1", "-fPIC", "-shared", "-Wall", "-Wextra",
                                          "-Wno-unused-parameter", "-Wno-unused-function"};

void fg_emu_toolchain_free(void *tc)
{
    emu_tc *t = tc;
    if (!t)
        return;
    free(t->cxx);
    free(t->cxx_copy);
    free(t->flags);
    free(t->extra_copy);
    free(t);
}

fg_status fg_emu_toolchain_new(fg_context *ctx, const char *target, void **tc)
{
    (void)target;
    *tc = NULL;
    const fg_embedded_file *pre = fg_embedded_find("prelude_emu.h"), *api = fg_embedded_find("emu_api.h");
    if (!pre || !api)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                             "the emulation prelude (templates/prelude_emu.h, emu_api.h) is not embedded");
    emu_tc *t = fg_xcalloc(1, sizeof *t);
    t->prelude = pre;
    t->api = api;
    t->cxx_cmd = ctx->env.host_cxx ? ctx->env.host_cxx : FG_HOST_CXX;
    t->ncxx = split_words(t->cxx_cmd, &t->cxx, &t->cxx_copy);
    if (t->ncxx == 0) {
        fg_emu_toolchain_free(t);
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "FUSEGEN_HOST_CXX names no compiler");
    }
    const char **extra;
    int nextra = split_words(ctx->env.emu_cxxflags, &extra, &t->extra_copy);
    t->flags = fg_xcalloc(FG_COUNTOF(fixed_flags) + 2 + (size_t)nextra + 1, sizeof *t->flags);
    for (size_t i = 0; i < FG_COUNTOF(fixed_flags); i++)
        t->flags[t->nflags++] = fixed_flags[i];
    if (ctx->env.emu_asan) {
        t->flags[t->nflags++] = "-fsanitize=address";
        t->flags[t->nflags++] = "-fno-omit-frame-pointer";
    }
    for (int i = 0; i < nextra; i++)
        t->flags[t->nflags++] = extra[i];
    free(extra);
    char *vlog = NULL;
    t->version = compiler_version(t->cxx, t->ncxx, t->cxx_cmd, &vlog);
    if (!t->version) {
        fg_status st = fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "the host C++ compiler '%s' does not run: %.2000s",
                                     t->cxx_cmd, vlog ? vlog : "");
        free(vlog);
        fg_emu_toolchain_free(t);
        return st;
    }
    *tc = t;
    return FG_OK;
}

void fg_emu_key(const void *tc, const fg_kernel *k, char key[33])
{
    const emu_tc *t = tc;
    fg_key kh;
    fg_key_begin(&kh, NULL);
    fg_key_part(&kh, "kind", "emu", 3);
    fg_key_part(&kh, "generator", FG_VERSION_STRING, strlen(FG_VERSION_STRING));
    fg_key_part(&kh, "compiler", t->cxx_cmd, strlen(t->cxx_cmd));
    fg_key_part(&kh, "compiler-version", t->version, strlen(t->version));
    for (int i = 0; i < t->nflags; i++)
        fg_key_part(&kh, "option", t->flags[i], strlen(t->flags[i]));
    fg_key_part(&kh, "prelude", t->prelude->text, t->prelude->len);
    fg_key_part(&kh, "prelude-api", t->api->text, t->api->len);
    char canon[33];   /* the source up to comments and parameter names (emit_name.c) */
    fg_kernel_source_hash(k, canon);
    fg_key_part(&kh, "canonical source", canon, 32);
    fg_key_part(&kh, "entry point", k->name, strlen(k->name));   /* the binary's own name for it */
    fg_key_end(&kh, key);
}

/* ---- compile ------------------------------------------------------------ */

/* Compiles k's source in dir into NAME.so; on success *so and *size hold its
 * bytes and *log the compiler's output (warnings). */
static fg_status compile_so(fg_context *ctx, const emu_tc *t, const fg_kernel *k, const char *dir, void **so,
                            size_t *size, char **log)
{
    char file[80], out_name[80];
    snprintf(file, sizeof file, "%s.cu", k->name);
    snprintf(out_name, sizeof out_name, "%s.so", k->name);
    char *psrc = fg_path_join(dir, file), *ppre = fg_path_join(dir, PRELUDE_NAME), *papi = fg_path_join(dir, API_NAME);
    int werr = write_all(psrc, k->source, strlen(k->source)) || write_all(ppre, t->prelude->text, t->prelude->len) ||
               write_all(papi, t->api->text, t->api->len);
    free(psrc);
    free(ppre);
    free(papi);
    if (werr)
        return fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot write the emulation build files in %s: %s",
                             k->name, dir, strerror(errno));
    const char **argv = fg_xcalloc((size_t)(t->ncxx + t->nflags) + 8, sizeof *argv);
    int n = 0;
    for (int i = 0; i < t->ncxx; i++)
        argv[n++] = t->cxx[i];
    for (int i = 0; i < t->nflags; i++)
        argv[n++] = t->flags[i];
    argv[n++] = "-x";
    argv[n++] = "c++";
    argv[n++] = file;
    argv[n++] = "-o";
    argv[n++] = out_name;
    argv[n] = NULL;
    char *out = NULL;
    int rc = fg_run_capture(argv, dir, &out);
    int err = errno;
    free(argv);
    if (rc != 0) {
        fg_status st;
        if (rc < 0)
            st = fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': cannot run the host C++ compiler '%s': %s",
                               k->name, t->cxx[0], strerror(err));
        else
            st = fg_diag_error(ctx, FG_ERR_COMPILE, error_loc(ctx, out, file),
                               "host C++ compiler '%s' rejected kernel '%s' (exit %d):\n%.8000s", t->cxx[0], k->name,
                               rc, out ? out : "");
        free(out);
        return st;
    }
    if (out && *out && ctx->env.emu_debug)
        fg_diag_warn(ctx, FG_NOLOC, "host C++ compiler on kernel '%s':\n%.8000s", k->name, out);
    *log = out ? out : fg_xstrdup("");
    char *pso = fg_path_join(dir, out_name);
    *so = fg_read_file(pso, size);
    free(pso);
    if (!*so)
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': the host C++ compiler wrote no %s", k->name,
                             out_name);
    return FG_OK;
}

fg_status fg_emu_compile(fg_context *ctx, const void *tc, const fg_kernel *k, void **bin, size_t *size, char **meta,
                         char **log)
{
    const emu_tc *t = tc;
    *bin = NULL;
    *size = 0;
    *meta = NULL;
    *log = NULL;
    if (!k->name[0])
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "a kernel without a name cannot be emulated");
    char *dir = make_tmpdir(ctx);
    if (!dir)
        return fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot create a build directory under %s: %s",
                             k->name, ctx->env.tmpdir, strerror(errno));
    fg_status st = compile_so(ctx, t, k, dir, bin, size, log);
    if (ctx->env.emu_keep)
        fg_diag_warn(ctx, FG_NOLOC, "kernel '%s': emulation build files kept in %s", k->name, dir);
    else
        remove_tmpdir(dir, k->name);
    free(dir);
    if (st) {
        free(*bin);
        free(*log);
        *bin = NULL;
        *log = NULL;
        *size = 0;
        return st;
    }
    fg_buf m = {0};
    fg_meta_put(&m, "name", k->name);
    fg_meta_put(&m, "kind", "emu");
    fg_meta_put(&m, "generator", FG_VERSION_STRING);
    fg_meta_put(&m, "compiler", t->version);
    fg_meta_put(&m, "log", *log);
    *meta = fg_buf_take(&m);
    return FG_OK;
}

/* ---- load, launch, release ---------------------------------------------- */

typedef struct emu_handle {
    void *dl;
    fg_emu_entry entry;
    unsigned max_threads;        /* from FG_KERNEL; 0 when unknown */
    pthread_mutex_t lock;        /* one launch at a time: shared arrays are static */
    fg_emu_sched *sched;
} emu_handle;

void fg_emu_release(fg_kernel *k)
{
    emu_handle *h = k->handle;
    if (!h || k->release != fg_emu_release)
        return;
    pthread_mutex_lock(&h->lock);   /* no launch in flight */
    pthread_mutex_unlock(&h->lock);
    pthread_mutex_destroy(&h->lock);
    dlclose(h->dl);
    fg_emu_sched_free(h->sched);
    free(h);
    k->handle = NULL;
    k->release = NULL;
}

/* dlopens the shared object at path and resolves the kernel's symbols into a
 * new handle. */
static fg_status open_so(fg_context *ctx, const fg_kernel *k, const char *path, emu_handle **out)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': cannot load the emulation library: %s%s",
                             k->name, e ? e : "?",
                             ctx->env.emu_asan ? " (FUSEGEN_EMU_ASAN=1 needs an AddressSanitizer build of the "
                                                 "host program: configure with -DFUSEGEN_SANITIZE=ON)"
                                               : "");
    }
    fg_emu_entry entry = (fg_emu_entry)dlsym(dl, k->name);
    int (*bind)(fg_emu_api *, unsigned, unsigned) = (int (*)(fg_emu_api *, unsigned, unsigned))dlsym(dl, "fg_emu_bind");
    void (*shared_range)(char **, char **) = (void (*)(char **, char **))dlsym(dl, "fg_emu_shared_range");
    if (!entry || !bind) {
        dlclose(dl);
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC,
                             "kernel '%s': the emulation library has no %s (does the source define "
                             "FG_KERNEL(%s, ...) and include \"fusegen_prelude.cuh\"?)",
                             k->name, entry ? "fg_emu_bind" : "entry point of that name", k->name);
    }
    emu_handle *h = fg_xcalloc(1, sizeof *h);
    h->dl = dl;
    h->entry = entry;
    h->sched = fg_emu_sched_new(ctx->env.emu_stack_bytes);
    pthread_mutex_init(&h->lock, NULL);
    if (bind(fg_emu_sched_api(h->sched), FG_EMU_API_VERSION, (unsigned)sizeof(fg_emu_api)) != 0) {
        fg_emu_sched_free(h->sched);
        pthread_mutex_destroy(&h->lock);
        free(h);
        dlclose(dl);
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                             "kernel '%s': the emulation prelude and the runtime disagree on the interface version",
                             k->name);
    }
    if (shared_range) {
        char *b = NULL, *e = NULL;
        shared_range(&b, &e);
        if (b && e > b)
            fg_emu_sched_set_shared(h->sched, b, e);
    }
    char sym[96];
    snprintf(sym, sizeof sym, "%s__fg_max_threads", k->name);
    const unsigned *mt = dlsym(dl, sym);
    h->max_threads = mt ? *mt : 0;
    fg_emu_sched_set_strict(h->sched, ctx->env.emu_strict);
    fg_emu_sched_set_shuffle(h->sched, (uint64_t)ctx->env.emu_shuffle);
    *out = h;
    return FG_OK;
}

fg_status fg_emu_load(fg_context *ctx, fg_kernel *k)
{
    if (!k->binary || !k->name[0])
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' has no emulation library to load", k->name);
    if (k->release)
        k->release(k);
    char *dir = make_tmpdir(ctx);
    if (!dir)
        return fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot create a load directory under %s: %s",
                             k->name, ctx->env.tmpdir, strerror(errno));
    /* The verified bytes go to a new private file (0600 in a 0700 directory
     * of our own), never a path inside the cache that could be swapped. */
    char file[80];
    snprintf(file, sizeof file, "%s.so", k->name);
    char *path = NULL;
    emu_handle *h = NULL;
    fg_status st;
    if (fg_cache_write_private(dir, file, k->binary, k->binary_size, &path) != 0)
        st = fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot write %s/%s: %s", k->name, dir, file,
                           strerror(errno));
    else
        st = open_so(ctx, k, path, &h);
    free(path);
    remove_tmpdir(dir, k->name);   /* a loaded library stays mapped */
    free(dir);
    if (st)
        return st;
    k->handle = h;
    k->release = fg_emu_release;
    return FG_OK;
}

fg_status fg_emu_build(fg_context *ctx, fg_kernel *k)
{
    if (k->handle && k->release == fg_emu_release)
        return FG_OK;
    if (!k->source || !k->name[0])
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' has no source to emulate", k->name);
    fg_status st = fg_kernel_obtain(ctx, &fg_backend_emu, k, NULL, NULL);
    if (!st)
        st = fg_emu_load(ctx, k);
    /* The library stays mapped; its bytes are not needed any more. */
    free(k->binary);
    k->binary = NULL;
    k->binary_size = 0;
    return st;
}

fg_status fg_emu_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *args)
{
    emu_handle *h = k->release == fg_emu_release ? k->handle : NULL;
    if (!h)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' was not built for emulation (fg_emu_build)",
                             k->name);
    const unsigned *b = k->block;
    unsigned g[3] = {k->grid[0], k->grid[1], k->grid[2]};
    if (k->persistent && g[0] > FG_EMU_PERSISTENT_BLOCKS)
        g[0] = FG_EMU_PERSISTENT_BLOCKS;   /* each block loops over several tiles (emu.h) */
    unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    if (!b[0] || !b[1] || !b[2] || b[0] > 1024 || b[1] > 1024 || b[2] > 64 || threads > 1024)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                             "kernel '%s': invalid block size %ux%ux%u (each dimension at least 1, z at most 64, "
                             "1024 threads at most)",
                             k->name, b[0], b[1], b[2]);
    if (!g[0] || !g[1] || !g[2] || g[0] > 0x7fffffffu || g[1] > 65535 || g[2] > 65535)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                             "kernel '%s': invalid grid size %ux%ux%u (x at most 2^31-1, y and z at most 65535, none 0)",
                             k->name, g[0], g[1], g[2]);
    if (h->max_threads && threads > h->max_threads)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                             "kernel '%s': block of %llu threads exceeds the kernel's bound of %u (FG_KERNEL max_threads)",
                             k->name, threads, h->max_threads);
    if (k->nparams < 0 || k->nparams > FG_MAX_KPARAMS || (k->nparams > 0 && !args))
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s': bad parameter list (%d slots)", k->name,
                             k->nparams);
    /* the params struct's bytes (fg_kparam_layout: 8-byte slots, 128-byte tensor maps aligned to 64) */
    _Alignas(64) uint64_t slots[FG_MAX_KPARAMS + FG_MAX_TMAPS * (FG_TMAP_PARAM_BYTES / 8 + 8) + 8] = {0};
    size_t arg_bytes = fg_kparam_layout(k, NULL);
    if (arg_bytes > sizeof slots)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s': %zu bytes of parameters", k->name,
                             arg_bytes);
    if (k->nparams > 0)
        memcpy(slots, args, arg_bytes);
    char err[1024];
    pthread_mutex_lock(&h->lock);
    int rc = fg_emu_sched_run(h->sched, h->entry, slots, g, b, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (rc != 0)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "emulated kernel '%s' failed: %s", k->name, err);
    return FG_OK;
}
