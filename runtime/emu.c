/*
 * emu.c -- the CPU emulation backend (see emu.h): builds a generated kernel
 * source with the host C++ compiler against the emulation prelude into a
 * shared object (through the kernel cache), loads it, and launches it on the
 * scheduler of emu_sched.c.
 *
 * Build: the source and the prelude (as "fusegen_prelude.cuh") go into a
 * private directory under $TMPDIR; the compiler runs there; the .so is
 * dlopen'd with RTLD_LOCAL and every temporary file is removed at once.  The
 * cache key covers the generator version, the compiler (path and --version),
 * the flags, the prelude text and the source; the payload is the .so itself.
 *
 * Environment: FUSEGEN_HOST_CXX (compiler, default CMake's C++ compiler),
 * FUSEGEN_EMU_CXXFLAGS (extra flags), FUSEGEN_EMU_ASAN=1 (AddressSanitizer;
 * the host program must be ASan-built), FUSEGEN_EMU_DEBUG=1 (report compiler
 * warnings), FUSEGEN_EMU_KEEP=1 (keep the build directory), FUSEGEN_EMU_STRICT=1
 * (barrier divergence is an error), FUSEGEN_EMU_STACK_KB (thread stack size).
 */
#define _GNU_SOURCE
#include "emu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "diag.h"
#include "embedded.h"
#include "emu_sched.h"
#include "jit.h"

#ifndef FG_HOST_CXX
#define FG_HOST_CXX "c++"
#endif
#ifndef FG_VERSION_STRING
#define FG_VERSION_STRING "0"
#endif

#define MAX_ARGS 64

extern char **environ;

typedef struct emu_handle {
    void *dl;
    fg_emu_entry entry;
    unsigned max_threads;        /* from FG_KERNEL; 0 when unknown */
    pthread_mutex_t lock;        /* one launch at a time: shared arrays are static */
    fg_emu_sched *sched;
    char key[33];
} emu_handle;

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* Splits s at white space into argv (strings point into the returned copy). */
static char *split_words(const char *s, const char **argv, int *argc, int max)
{
    char *copy = fg_xstrdup(s ? s : "");
    char *save = NULL;
    for (char *w = strtok_r(copy, " \t\n", &save); w && *argc < max; w = strtok_r(NULL, " \t\n", &save))
        argv[(*argc)++] = w;
    return copy;
}

/* Runs argv[0] (searched in PATH) in directory cwd with stdout and stderr
 * captured into *out.  Returns the exit status, or -1 (errno) when it could
 * not be started, or 128+signal. */
static int run_capture(const char *const *argv, const char *cwd, char **out)
{
    fg_buf b = {0};
    int fds[2];
    *out = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (cwd)
        posix_spawn_file_actions_addchdir_np(&fa, cwd);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err != 0) {
        close(fds[0]);
        errno = err;
        return -1;
    }
    char chunk[4096];
    ssize_t n;
    while ((n = read(fds[0], chunk, sizeof chunk)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        fg_buf_putn(&b, chunk, (size_t)n);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out = fg_buf_take(&b);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
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
    const char *argv[MAX_ARGS + 2];
    int n = 0;
    for (int i = 0; i < ncxx; i++)
        argv[n++] = cxx[i];
    argv[n++] = "--version";
    argv[n] = NULL;
    char *out = NULL;
    int rc = run_capture(argv, NULL, &out);
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
    size_t w = fwrite(data, 1, len, f);
    int rc = fclose(f);
    return w == len && rc == 0 ? 0 : -1;
}

static char *make_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    char *tmpl = fg_path_join(t && *t ? t : "/tmp", "fusegen-emu-XXXXXX");
    if (!mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

/* Removes the files this module writes into dir, then dir. */
static void remove_tmpdir(const char *dir, const char *name)
{
    const char *suffix[] = {".cu", ".so", ""};
    for (size_t i = 0; i < FG_COUNTOF(suffix); i++) {
        fg_buf b = {0};
        fg_buf_printf(&b, "%s/%s%s", dir, i < 2 ? name : "fusegen_prelude.cuh", suffix[i]);
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

/* Compiles source into dir/NAME.so; on success *so and *size hold its bytes. */
static fg_status compile_so(fg_context *ctx, const fg_kernel *k, const char *dir, const char *const *argv0, int nargv0,
                            const char *prelude, void **so, size_t *size)
{
    char file[80], out_name[80];
    snprintf(file, sizeof file, "%s.cu", k->name);
    snprintf(out_name, sizeof out_name, "%s.so", k->name);
    char *psrc = fg_path_join(dir, file), *ppre = fg_path_join(dir, "fusegen_prelude.cuh");
    int werr = write_all(psrc, k->source, strlen(k->source)) || write_all(ppre, prelude, strlen(prelude));
    free(psrc);
    free(ppre);
    if (werr)
        return fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot write the emulation build files in %s: %s",
                             k->name, dir, strerror(errno));
    const char *argv[MAX_ARGS + 8];
    int n = 0;
    for (int i = 0; i < nargv0; i++)
        argv[n++] = argv0[i];
    argv[n++] = "-x";
    argv[n++] = "c++";
    argv[n++] = file;
    argv[n++] = "-o";
    argv[n++] = out_name;
    argv[n] = NULL;
    char *out = NULL;
    int rc = run_capture(argv, dir, &out);
    if (rc != 0) {
        fg_status st;
        if (rc < 0)
            st = fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': cannot run the host C++ compiler '%s': %s",
                               k->name, argv[0], strerror(errno));
        else
            st = fg_diag_error(ctx, FG_ERR_COMPILE, error_loc(ctx, out, file),
                               "host C++ compiler '%s' rejected kernel '%s' (exit %d):\n%.8000s", argv[0], k->name, rc,
                               out ? out : "");
        free(out);
        return st;
    }
    if (out && *out && env_on("FUSEGEN_EMU_DEBUG"))
        fg_diag_warn(ctx, FG_NOLOC, "host C++ compiler on kernel '%s':\n%.8000s", k->name, out);
    free(out);
    char *pso = fg_path_join(dir, out_name);
    *so = fg_read_file(pso, size);
    free(pso);
    if (!*so)
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': the host C++ compiler wrote no %s", k->name,
                             out_name);
    return FG_OK;
}

/* Loads the shared object bytes (written to dir/NAME.so) and resolves the
 * kernel's symbols into a new handle. */
static fg_status load_so(fg_context *ctx, const fg_kernel *k, const char *dir, const void *so, size_t size, int already_there,
                         emu_handle **out)
{
    char sym[96];
    snprintf(sym, sizeof sym, "%s.so", k->name);
    char *path = fg_path_join(dir, sym);
    if (!already_there && write_all(path, so, size) != 0) {
        fg_status st = fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot write %s: %s", k->name, path,
                                     strerror(errno));
        free(path);
        return st;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    free(path);
    if (!dl) {
        const char *e = dlerror();
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': cannot load the emulation library: %s%s",
                             k->name, e ? e : "?",
                             env_on("FUSEGEN_EMU_ASAN") ? " (FUSEGEN_EMU_ASAN=1 needs an AddressSanitizer build of the "
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
    h->sched = fg_emu_sched_new(0);
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
    snprintf(sym, sizeof sym, "%s__fg_max_threads", k->name);
    const unsigned *mt = dlsym(dl, sym);
    h->max_threads = mt ? *mt : 0;
    fg_emu_sched_set_strict(h->sched, env_on("FUSEGEN_EMU_STRICT"));
    *out = h;
    return FG_OK;
}

fg_status fg_emu_build(fg_context *ctx, fg_kernel *k)
{
    if (k->emu)
        return FG_OK;
    if (!k->source || !k->name[0])
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' has no source to emulate", k->name);
    const fg_embedded_file *pre = fg_embedded_find("prelude_emu.h");
    if (!pre)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "the emulation prelude (templates/prelude_emu.h) is not embedded");

    /* The command line: compiler words, fixed flags, sanitizer, extra flags. */
    const char *env_cxx = getenv("FUSEGEN_HOST_CXX");
    const char *cxx_cmd = env_cxx && *env_cxx ? env_cxx : FG_HOST_CXX;
    const char *argv[MAX_ARGS + 2];
    int n = 0;
    char *cxx_words = split_words(cxx_cmd, argv, &n, 8);
    if (n == 0) {
        free(cxx_words);
        return fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "FUSEGEN_HOST_CXX names no compiler");
    }
    int ncxx = n;
    static const char *const fixed[] = {"-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-Wall", "-Wextra",
                                        "-Wno-unused-parameter", "-Wno-unused-function"};
    for (size_t i = 0; i < FG_COUNTOF(fixed); i++)
        argv[n++] = fixed[i];
    if (env_on("FUSEGEN_EMU_ASAN")) {
        argv[n++] = "-fsanitize=address";
        argv[n++] = "-fno-omit-frame-pointer";
    }
    char *extra_words = split_words(getenv("FUSEGEN_EMU_CXXFLAGS"), argv, &n, MAX_ARGS - 8);

    fg_status st = FG_OK;
    char *vlog = NULL;
    const char *version = compiler_version(argv, ncxx, cxx_cmd, &vlog);
    if (!version) {
        st = fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "kernel '%s': the host C++ compiler '%s' does not run: %.2000s",
                           k->name, cxx_cmd, vlog ? vlog : "");
        free(vlog);
        goto done;
    }

    /* Cache key over everything that determines the shared object. */
    fg_key kh;
    fg_key_begin(&kh, NULL);
    fg_key_part(&kh, "kind", "emu", 3);
    fg_key_part(&kh, "generator", FG_VERSION_STRING, strlen(FG_VERSION_STRING));
    fg_key_part(&kh, "compiler", cxx_cmd, strlen(cxx_cmd));
    fg_key_part(&kh, "compiler-version", version, strlen(version));
    for (int i = ncxx; i < n; i++)
        fg_key_part(&kh, "option", argv[i], strlen(argv[i]));
    fg_key_part(&kh, "prelude", pre->text, pre->len);
    fg_key_part(&kh, "source", k->source, strlen(k->source));
    char key[33];
    fg_key_end(&kh, key);

    char *dir = make_tmpdir();
    if (!dir) {
        st = fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "kernel '%s': cannot create a build directory under %s: %s",
                           k->name, getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", strerror(errno));
        goto done;
    }
    fg_cache *cache = fg_ctx_cache(ctx);
    void *so = NULL;
    size_t size = 0;
    int compiled = 0;
    if (!cache || fg_cache_fetch(cache, key, &so, &size, NULL) == FG_CACHE_MISS) {
        so = NULL;
        st = compile_so(ctx, k, dir, argv, n, pre->text, &so, &size);
        compiled = st == FG_OK;
        if (compiled && cache) {
            fg_buf meta = {0};
            fg_buf_printf(&meta, "name=%s\nkind=emu\ngenerator=%s\ncompiler=%s\n", k->name, FG_VERSION_STRING, version);
            fg_cache_put_meta(cache, key, so, size, meta.s);   /* a failed store only costs a rebuild */
            fg_buf_free(&meta);
        }
    }
    emu_handle *h = NULL;
    if (st == FG_OK)
        st = load_so(ctx, k, dir, so, size, compiled, &h);
    free(so);
    if (env_on("FUSEGEN_EMU_KEEP"))
        fg_diag_warn(ctx, FG_NOLOC, "kernel '%s': emulation build files kept in %s", k->name, dir);
    else
        remove_tmpdir(dir, k->name);
    free(dir);
    if (st == FG_OK) {
        memcpy(h->key, key, sizeof key);
        k->emu = h;
    }
done:
    free(cxx_words);
    free(extra_words);
    return st;
}

fg_status fg_emu_launch(fg_context *ctx, const fg_kernel *k, const uint64_t *args)
{
    emu_handle *h = k->emu;
    if (!h)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' was not built for emulation (fg_emu_build)",
                             k->name);
    const unsigned *g = k->grid, *b = k->block;
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
    _Alignas(16) uint64_t slots[FG_MAX_KPARAMS + 1] = {0};
    if (k->nparams > 0)
        memcpy(slots, args, (size_t)k->nparams * sizeof *slots);
    char err[1024];
    pthread_mutex_lock(&h->lock);
    int rc = fg_emu_sched_run(h->sched, h->entry, slots, g, b, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (rc != 0)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "emulated kernel '%s' failed: %s", k->name, err);
    return FG_OK;
}

void fg_emu_release(fg_kernel *k)
{
    emu_handle *h = k->emu;
    if (!h)
        return;
    pthread_mutex_lock(&h->lock);   /* no launch in flight */
    pthread_mutex_unlock(&h->lock);
    pthread_mutex_destroy(&h->lock);
    dlclose(h->dl);
    fg_emu_sched_free(h->sched);
    free(h);
    k->emu = NULL;
}
