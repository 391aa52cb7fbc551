/*
 * diag.c -- the context's diagnostics (diag.h): recorded errors, warnings and
 * where they are logged, interned strings, "did you mean" suggestions,
 * file paths as messages and plan notes show them, and the names of the
 * public enums.  A leaf: it knows the context's fields and
 * nothing of the loaders, the planner or the runtime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "context.h"
#include "oom.h"

struct fg_intern_entry {
    UT_hash_handle hh;
    char s[];
};

/* ---- enum names ----------------------------------------------------------- */

static const char *const status_names[] = {
    "ok", "input error", "hook error", "I/O error", "out of memory", "compile error",
    "CUDA error", "no CUDA device", "unsupported", "check failed", "internal error",
};
FG_STATIC_ASSERT(FG_COUNTOF(status_names) == FG_STATUS_COUNT, "status_names out of sync");

static const char *const dtype_names[] = {"fp32", "fp16", "bf16", "int64", "int32", "bool"};
FG_STATIC_ASSERT(FG_COUNTOF(dtype_names) == FG_DTYPE_COUNT, "dtype_names out of sync");

static const char *const layout_names[] = {"NCHW", "NHWC"};
FG_STATIC_ASSERT(FG_COUNTOF(layout_names) == FG_LAYOUT_COUNT, "layout_names out of sync");

static const char *const device_names[] = {"auto", "cuda", "emu"};
FG_STATIC_ASSERT(FG_COUNTOF(device_names) == FG_DEVICE_COUNT, "device_names out of sync");

static const char *const attr_type_names[] = {"int", "float", "bool", "ints", "string"};
FG_STATIC_ASSERT(FG_COUNTOF(attr_type_names) == FG_ATTR_TYPE_COUNT, "attr_type_names out of sync");

#define ENUM_NAME(table, v) ((unsigned)(v) < FG_COUNTOF(table) ? table[v] : "?")

FG_API const char *fg_status_name(fg_status s) { return ENUM_NAME(status_names, s); }
FG_API const char *fg_dtype_name(fg_dtype t) { return ENUM_NAME(dtype_names, t); }
FG_API const char *fg_layout_name(fg_layout l) { return ENUM_NAME(layout_names, l); }
FG_API const char *fg_device_name(fg_device d) { return ENUM_NAME(device_names, d); }
const char *fg_attr_type_name(fg_attr_type t) { return ENUM_NAME(attr_type_names, t); }
FG_API const char *fg_version(void) { return FG_VERSION_STRING; }

/* ---- interning ------------------------------------------------------------ */

static const char *intern_locked(fg_context *ctx, const char *s)
{
    fg_intern_entry *e;
    size_t n = strlen(s);
    HASH_FIND(hh, ctx->interned, s, n, e);
    if (e)
        return e->s;
    e = fg_xmalloc(sizeof *e + n + 1);
    memcpy(e->s, s, n + 1);
    HASH_ADD(hh, ctx->interned, s[0], n, e);
    return e->s;
}

const char *fg_intern(fg_context *ctx, const char *s)
{
    if (!s)
        return NULL;
    fg_oom_hold();   /* the context's, and under its lock (oom.h) */
    pthread_mutex_lock(&ctx->lock);
    const char *r = intern_locked(ctx, s);
    pthread_mutex_unlock(&ctx->lock);
    fg_oom_release();
    return r;
}

/* ---- errors and warnings ---------------------------------------------------- */

fg_status fg_diag_error(fg_context *ctx, fg_status st, fg_loc loc, const char *fmt, ...)
{
    if (!ctx)
        return st;
    fg_oom_hold();
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&ctx->lock);
    fg_error *e = FG_PUSH(ctx->errors, ctx->nerrors, ctx->errors_cap);
    e->status = st;
    e->file = loc.file;
    e->line = loc.line;
    e->col = loc.col;
    e->message = intern_locked(ctx, b.s ? b.s : "");
    pthread_mutex_unlock(&ctx->lock);
    fg_buf_free(&b);
    fg_oom_release();
    return st;
}

void fg_diag_warn(fg_context *ctx, fg_loc loc, const char *fmt, ...)
{
    if (!ctx)
        return;
    fg_oom_hold();
    fg_buf b = {0};
    if (loc.file)
        fg_buf_printf(&b, "%s:%d:%d: ", loc.file, loc.line, loc.col);
    fg_buf_put(&b, "warning: ");
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&ctx->lock);
    fg_log_fn fn = ctx->log;
    void *user = ctx->log_user;
    int quiet = ctx->quiet;
    char *line = fg_xstrdup(b.s);
    *FG_PUSH(ctx->warnings, ctx->nwarnings, ctx->warnings_cap) = line;
    /* The default logger prints under the lock, so lines never interleave; a
     * caller's function runs outside it, so it may take locks of its own. */
    if (!fn && !quiet)
        fprintf(stderr, "%s\n", b.s);
    pthread_mutex_unlock(&ctx->lock);
    fg_oom_release();   /* the caller's function runs as the caller's code */
    if (fn)
        fn(user, FG_LOG_WARNING, b.s);
    fg_buf_free(&b);
}

FG_API void fg_context_set_log(fg_context *ctx, fg_log_fn fn, void *user)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->lock);
    ctx->log = fn;
    ctx->log_user = fn ? user : NULL;
    pthread_mutex_unlock(&ctx->lock);
}

FG_API int fg_context_error_count(const fg_context *ctx) { return ctx ? ctx->nerrors : 0; }

FG_API const fg_error *fg_context_error(const fg_context *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->nerrors ? &ctx->errors[i] : NULL;
}

FG_API void fg_context_clear_errors(fg_context *ctx)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->lock);
    ctx->nerrors = 0;
    pthread_mutex_unlock(&ctx->lock);
}

FG_API char *fg_error_format(const fg_error *e, char *buf, size_t size)
{
    if (!buf || !size)
        return buf;
    const char *msg = e && e->message ? e->message : "";
    if (!e) {
        snprintf(buf, size, "no error");
    } else if (e->file && e->line > 0) {
        snprintf(buf, size, "%s:%d:%d: error: %s", e->file, e->line, e->col > 0 ? e->col : 1, msg);
    } else if (e->file) {
        snprintf(buf, size, "%s: error: %s", e->file, msg);
    } else {
        snprintf(buf, size, "error: %s", msg);
    }
    return buf;
}

void fg_diag_free(fg_context *ctx)
{
    free(ctx->errors);
    ctx->errors = NULL;
    ctx->nerrors = ctx->errors_cap = 0;
    for (int i = 0; i < ctx->nwarnings; i++)
        free(ctx->warnings[i]);
    free(ctx->warnings);
    ctx->warnings = NULL;
    ctx->nwarnings = ctx->warnings_cap = 0;
    fg_intern_entry *e, *tmp;
    HASH_ITER(hh, ctx->interned, e, tmp) {
        HASH_DEL(ctx->interned, e);
        free(e);
    }
}

/* ---- suggestions ------------------------------------------------------------- */

const char *fg_suggest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL;
    int bestd = 1 << 20;
    if (!name)
        return NULL;
    size_t len = strlen(name);
    int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    for (int i = 0; i < n; i++) {
        if (!cands[i])
            continue;
        int d = fg_edit_distance(name, cands[i]);
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    return bestd <= limit ? best : NULL;
}

fg_status fg_diag_unknown(fg_context *ctx, fg_loc loc, const char *what, const char *name,
                          const char *const *cands, int n)
{
    const char *s = fg_suggest(name, cands, n);
    if (s)
        return fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown %s '%s' (did you mean '%s'?)", what, name, s);
    return fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown %s '%s'", what, name);
}

const char *fg_short_path(const char *path)
{
    static __thread char cwd[4096];
    static __thread int have;
    if (!path)
        return "?";
    if (!have) {
        if (!getcwd(cwd, sizeof cwd))
            cwd[0] = 0;
        have = 1;
    }
    size_t n = strlen(cwd);
    if (n > 1 && strncmp(path, cwd, n) == 0 && path[n] == '/')
        return path + n + 1;
    return path;
}
