/* context.c -- fg_context life cycle, errors, interning, enum names. */
#define _GNU_SOURCE /* dladdr */
#include "context.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "expr.h"
#include "hook.h"

struct fg_intern_entry {
    UT_hash_handle hh;
    char s[];
};

static const char *const status_names[] = {
    "ok", "input error", "hook error", "I/O error", "out of memory", "compile error",
    "CUDA error", "no CUDA device", "unsupported", "check failed", "internal error",
};
FG_STATIC_ASSERT(FG_COUNTOF(status_names) == FG_STATUS_COUNT, "status_names out of sync");

static const char *const dtype_names[] = {"fp32", "fp16", "bf16"};
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

static char *env_or(const char *given, const char *env)
{
    if (given && *given)
        return fg_xstrdup(given);
    const char *e = getenv(env);
    return e && *e ? fg_xstrdup(e) : NULL;
}

/* Nonzero when dir/ops.yaml exists. */
static int has_rules(const char *dir)
{
    char *probe = fg_path_join(dir, "ops.yaml");
    FILE *f = fopen(probe, "r");
    free(probe);
    if (f)
        fclose(f);
    return f != NULL;
}

/* The shipped rules, first found of: <prefix>/share/fusegen/rules next to
 * the installed library that holds this code (wherever it was installed),
 * the source tree's rules/ (a build tree), the configured install prefix. */
static char *default_rules_dir(void)
{
    Dl_info info;
    if (dladdr((void *)default_rules_dir, &info) && info.dli_fname) {
        char *lib = fg_xstrdup(info.dli_fname);
        char *slash = strrchr(lib, '/');
        if (slash) {
            *slash = 0;
            char *dir = fg_path_join(lib, "../share/fusegen/rules");
            free(lib);
            char *real = has_rules(dir) ? realpath(dir, NULL) : NULL;
            free(dir);
            if (real)
                return real;
        } else {
            free(lib);
        }
    }
    const char *cands[] = {FG_SOURCE_DIR "/rules", FG_INSTALL_DATA_DIR "/rules"};
    for (size_t i = 0; i < FG_COUNTOF(cands); i++)
        if (has_rules(cands[i]))
            return fg_xstrdup(cands[i]);
    return fg_xstrdup(cands[0]);
}

FG_API fg_status fg_context_init(fg_context **out, const fg_options *opts)
{
    fg_context *ctx = fg_xcalloc(1, sizeof *ctx);
    *out = ctx;
    if (opts)
        ctx->opts = *opts;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->rules_dir = env_or(opts ? opts->rules_dir : NULL, "FUSEGEN_RULES");
    if (!ctx->rules_dir)
        ctx->rules_dir = default_rules_dir();
    ctx->cache_dir = opts && opts->cache_dir ? fg_xstrdup(opts->cache_dir) : NULL;
    ctx->arch = opts && opts->arch ? fg_xstrdup(opts->arch) : NULL; /* $FUSEGEN_ARCH: jit.c */
    ctx->opts.rules_dir = ctx->rules_dir;
    ctx->opts.cache_dir = ctx->cache_dir;
    ctx->opts.arch = ctx->arch;
    if (opts && opts->no_rules)
        return FG_OK;
    return fg_rules_load(ctx, ctx->rules_dir);
}


FG_API void fg_context_free(fg_context *ctx)
{
    if (!ctx)
        return;
    fg_runtime_free(ctx);
    fg_hooks_free(ctx->hooks);
    for (int i = 0; i < ctx->nops; i++) {
        fg_expr_free(ctx->ops[i]->expr);
        free(ctx->ops[i]);
    }
    free(ctx->ops);
    for (int i = 0; i < ctx->nrules; i++) {
        for (int s = 0; s < ctx->rules[i]->nsteps; s++)
            fg_expr_free(ctx->rules[i]->steps[s].where);
        free(ctx->rules[i]);
    }
    free(ctx->rules);
    free(ctx->errors);
    for (int i = 0; i < ctx->nwarnings; i++)
        free(ctx->warnings[i]);
    free(ctx->warnings);
    fg_intern_entry *e, *tmp;
    HASH_ITER(hh, ctx->interned, e, tmp) {
        HASH_DEL(ctx->interned, e);
        free(e);
    }
    free(ctx->rules_dir);
    free(ctx->cache_dir);
    free(ctx->arch);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

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
    pthread_mutex_lock(&ctx->lock);
    const char *r = intern_locked(ctx, s);
    pthread_mutex_unlock(&ctx->lock);
    return r;
}

fg_status fg_diag_error(fg_context *ctx, fg_status st, fg_loc loc, const char *fmt, ...)
{
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
    return st;
}

void fg_diag_warn(fg_context *ctx, fg_loc loc, const char *fmt, ...)
{
    fg_buf b = {0};
    if (loc.file)
        fg_buf_printf(&b, "%s:%d:%d: ", loc.file, loc.line, loc.col);
    fg_buf_put(&b, "warning: ");
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->quiet && !getenv("FUSEGEN_QUIET"))
        fprintf(stderr, "%s\n", b.s);
    *FG_PUSH(ctx->warnings, ctx->nwarnings, ctx->warnings_cap) = fg_buf_take(&b);
    pthread_mutex_unlock(&ctx->lock);
}

FG_API int fg_context_error_count(const fg_context *ctx) { return ctx ? ctx->nerrors : 0; }

FG_API const fg_error *fg_context_error(const fg_context *ctx, int i)
{
    return ctx && i >= 0 && i < ctx->nerrors ? &ctx->errors[i] : NULL;
}

FG_API void fg_context_clear_errors(fg_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->nerrors = 0;
    pthread_mutex_unlock(&ctx->lock);
}

FG_API char *fg_error_format(const fg_error *e, char *buf, size_t size)
{
    if (!size)
        return buf;
    if (!e) {
        snprintf(buf, size, "no error");
    } else if (e->file && e->line > 0) {
        snprintf(buf, size, "%s:%d:%d: error: %s", e->file, e->line, e->col > 0 ? e->col : 1, e->message);
    } else if (e->file) {
        snprintf(buf, size, "%s: error: %s", e->file, e->message);
    } else {
        snprintf(buf, size, "error: %s", e->message);
    }
    return buf;
}

const char *fg_suggest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL;
    int bestd = 1 << 20;
    size_t len = strlen(name);
    int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    for (int i = 0; i < n; i++) {
        int d = fg_edit_distance(name, cands[i]);
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    return bestd <= limit ? best : NULL;
}

const fg_opdef *fg_ctx_find_op(const fg_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nops; i++)
        if (strcmp(ctx->ops[i]->name, name) == 0)
            return ctx->ops[i];
    return NULL;
}

int fg_ctx_find_rule(const fg_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nrules; i++)
        if (strcmp(ctx->rules[i]->name, name) == 0)
            return i;
    return -1;
}

fg_status fg_ctx_add_op(fg_context *ctx, fg_opdef *op)
{
    const fg_opdef *old = fg_ctx_find_op(ctx, op->name);
    if (old) {
        fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "duplicate op '%s' (first defined at %s:%d)",
                                     op->name, old->loc.file ? old->loc.file : "?", old->loc.line);
        fg_expr_free(op->expr);
        free(op);
        return st;
    }
    *FG_PUSH(ctx->ops, ctx->nops, ctx->ops_cap) = op;
    return FG_OK;
}

fg_status fg_ctx_add_rule(fg_context *ctx, fg_rule *rule)
{
    int old = fg_ctx_find_rule(ctx, rule->name);
    if (old >= 0) {
        const fg_rule *o = ctx->rules[old];
        fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, rule->loc, "duplicate rule '%s' (first defined at %s:%d)",
                                     rule->name, o->loc.file ? o->loc.file : "?", o->loc.line);
        for (int s = 0; s < rule->nsteps; s++)
            fg_expr_free(rule->steps[s].where);
        free(rule);
        return st;
    }
    *FG_PUSH(ctx->rules, ctx->nrules, ctx->rules_cap) = rule;
    return FG_OK;
}
