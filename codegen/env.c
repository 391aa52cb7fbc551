/*
 * env.c -- resolves a context's settings once, at its creation (fg_ctx_new): API
 * options first, then the environment, then the defaults (see env.h).  This
 * is the only file that calls getenv.
 */
#define _GNU_SOURCE /* dladdr */
#include "env.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "context.h"
#include "diag.h"

/* The layout of fg_options in fusegen 0.1: what size == 0 means. */
#define OPTIONS_BASE_SIZE (offsetof(fg_options, log_user) + sizeof(void *))
#define OPTIONS_MIN_SIZE (offsetof(fg_options, size) + sizeof(size_t))
/* Fields added after 0.1 follow that layout directly (size 0 leaves them 0). */
FG_STATIC_ASSERT(OPTIONS_BASE_SIZE == offsetof(fg_options, remote_cache),
                 "fg_options: size 0 must keep meaning the 0.1 layout (new fields go at the end)");

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

/* ---- strict parsers ------------------------------------------------------ */

/* Leading decimal digits of s into *v (no overflow past limit); returns the
 * number of digits, or -1 when the value exceeds limit. */
static int digits(const char *s, unsigned long long limit, unsigned long long *v)
{
    int n = 0;
    *v = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        unsigned d = (unsigned)(s[n] - '0');
        if (*v > (limit - d) / 10)
            return -1;
        *v = *v * 10 + d;
    }
    return n;
}

int fg_parse_count(const char *s, long long min, long long max, long long *out)
{
    unsigned long long v;
    int n = s ? digits(s, (unsigned long long)max, &v) : 0;
    if (n <= 0 || s[n] || (long long)v < min)
        return -1;
    *out = (long long)v;
    return 0;
}

int fg_parse_bytes(const char *s, long long min, long long max, long long *out)
{
    unsigned long long v;
    int n = s ? digits(s, (unsigned long long)max, &v) : 0;
    if (n <= 0)
        return -1;
    const char *p = s + n;
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i')
            p++;
    }
    if (*p == 'b' || *p == 'B')
        p++;
    if (*p || v > ((unsigned long long)max >> shift))
        return -1;
    v <<= shift;
    if ((long long)v < min)
        return -1;
    *out = (long long)v;
    return 0;
}

int fg_parse_mebibytes(const char *s, uint64_t *bytes)
{
    unsigned long long whole, frac = 0;
    int n = s ? digits(s, (unsigned long long)FG_MAX_CACHE_MAX_MB, &whole) : 0;
    if (n <= 0)
        return -1;
    const char *p = s + n;
    if (*p == '.') {
        p++;
        /* Up to nine fraction digits count; more must still be digits. */
        unsigned long long scale = 1;
        int nf = 0;
        for (; *p >= '0' && *p <= '9'; p++, nf++)
            if (nf < 9) {
                frac = frac * 10 + (unsigned long long)(*p - '0');
                scale *= 10;
            }
        if (nf == 0)
            return -1;
        frac = (frac << 20) / scale;   /* < 2^20 * 10^9 / 10^9: no overflow */
    }
    if (*p)
        return -1;
    uint64_t b = ((uint64_t)whole << 20) + frac;
    if (b == 0 || (whole == (unsigned long long)FG_MAX_CACHE_MAX_MB && frac))
        return -1;
    *bytes = b;
    return 0;
}

int fg_parse_switch(const char *s, int *out)
{
    static const char *const on[] = {"1", "on", "true", "yes"}, *const off[] = {"0", "off", "false", "no"};
    for (size_t i = 0; s && i < FG_COUNTOF(on); i++) {
        if (strcasecmp(s, on[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, off[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Copies s[0..n) into out (size bytes) when it fits and is not empty. */
static int url_part(const char *s, size_t n, char *out, size_t size)
{
    if (n == 0 || n >= size)
        return -1;
    memcpy(out, s, n);
    out[n] = 0;
    return 0;
}

int fg_parse_remote_url(const char *s, fg_remote_url *out)
{
    static const char scheme[] = "redis://";
    fg_remote_url u;
    memset(&u, 0, sizeof u);
    u.port = 6379;
    if (!s || strncmp(s, scheme, sizeof scheme - 1) != 0)
        return -1;
    const char *p = s + sizeof scheme - 1;
    for (const char *q = p; *q; q++)
        if ((unsigned char)*q <= ' ' || (unsigned char)*q >= 0x7f)
            return -1;   /* no spaces, control characters or non-ASCII anywhere */
    /* Credentials: everything before the last '@' ("user:password" or ":password"). */
    const char *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (!colon)
            return -1;
        if (colon > p && url_part(p, (size_t)(colon - p), u.user, sizeof u.user) != 0)
            return -1;
        if (url_part(colon + 1, (size_t)(at - colon - 1), u.password, sizeof u.password) != 0)
            return -1;
        p = at + 1;
    }
    /* Host. */
    const char *h = p;
    size_t hn;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close)
            return -1;
        h = p + 1;
        hn = (size_t)(close - h);
        for (size_t i = 0; i < hn; i++)
            if (!strchr("0123456789abcdefABCDEF:.", h[i]))
                return -1;
        p = close + 1;
    } else {
        while (*p && (isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == '_'))
            p++;
        hn = (size_t)(p - h);
    }
    if (url_part(h, hn, u.host, sizeof u.host) != 0)
        return -1;
    /* Port, then database. */
    long long v;
    char num[16];
    if (*p == ':') {
        size_t n = strcspn(++p, "/");
        if (url_part(p, n, num, sizeof num) != 0 || fg_parse_count(num, 1, 65535, &v) != 0)
            return -1;
        u.port = (int)v;
        p += n;
    }
    if (*p == '/') {
        p++;
        if (*p) {
            if (fg_parse_count(p, 0, 1000000, &v) != 0)
                return -1;
            u.db = (int)v;
            p += strlen(p);
        }
    }
    if (*p)
        return -1;
    *out = u;
    return 0;
}

/* ---- copying sized option structs ------------------------------------------ */

fg_status fg_copy_sized(fg_context *ctx, const char *what, void *dst, size_t dst_size, const void *src,
                        size_t declared, size_t base_size, size_t min_size)
{
    memset(dst, 0, dst_size);
    size_t n = declared ? declared : base_size;
    if (n < min_size)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                             "%s.size is %zu, less than the %zu bytes of its first version (set it to sizeof(%s) or 0)",
                             what, n, min_size, what);
    if (n > dst_size) {
        const unsigned char *extra = (const unsigned char *)src + dst_size;
        for (size_t i = 0; i < n - dst_size; i++)
            if (extra[i])
                return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC,
                                     "%s (size %zu) sets fields that this fusegen %s (size %zu) does not know", what, n,
                                     FG_VERSION_STRING, dst_size);
        n = dst_size;
    }
    memcpy(dst, src, n);
    return FG_OK;
}

/* ---- the environment ------------------------------------------------------ */

/* The variable's value, or NULL when unset or empty. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static char *env_dup(const char *name)
{
    const char *v = env(name);
    return v ? fg_xstrdup(v) : NULL;
}

/* One warning for a variable whose value is not usable. */
static void env_bad(fg_context *ctx, const char *name, const char *value, const char *expected, const char *fallback)
{
    fg_diag_warn(ctx, FG_NOLOC, "ignoring %s='%.64s%s': expected %s; using %s", name, value,
                 strlen(value) > 64 ? "..." : "", expected, fallback);
}

/* A count variable: the parsed value, or def (with a warning when malformed). */
static long long env_count(fg_context *ctx, const char *name, long long min, long long max, long long def)
{
    const char *v = env(name);
    long long r = def;
    if (v && fg_parse_count(v, min, max, &r) != 0) {
        char expected[96], fallback[48];
        snprintf(expected, sizeof expected, "a whole number from %lld to %lld", min, max);
        snprintf(fallback, sizeof fallback, "the default %lld", def);
        env_bad(ctx, name, v, expected, fallback);
        r = def;
    }
    return r;
}

static int env_switch(fg_context *ctx, const char *name, int def)
{
    const char *v = env(name);
    int r = def;
    if (v && fg_parse_switch(v, &r) != 0) {
        env_bad(ctx, name, v, "1, on, true, yes, 0, off, false or no", def ? "on" : "off");
        r = def;
    }
    return r;
}

/* An API field that must be 0 (the default) or lie in [min, max]: a value
 * out of range is recorded and replaced by 0, so the context still gets
 * usable settings. */
static fg_status check_field(fg_context *ctx, const char *field, long long *v, long long min, long long max)
{
    if (*v == 0 || (*v >= min && *v <= max))
        return FG_OK;
    fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                                 "fg_options.%s is %lld: expected 0 (the default) or %lld to %lld", field, *v, min, max);
    *v = 0;
    return st;
}

/* The disk cache directory: the option, $FUSEGEN_CACHE_DIR,
 * $XDG_CACHE_HOME/fusegen, $HOME/.cache/fusegen; NULL when none is named. */
static char *cache_dir(const char *given)
{
    if (given && *given)
        return fg_xstrdup(given);
    const char *e = env("FUSEGEN_CACHE_DIR");
    if (e)
        return fg_xstrdup(e);
    if ((e = env("XDG_CACHE_HOME")) != NULL)
        return fg_path_join(e, "fusegen");
    if ((e = env("HOME")) != NULL)
        return fg_path_join(e, ".cache/fusegen");
    return NULL;
}

/* The remote tier's settings into ctx->env and the remote_cache* fields of
 * o (which then point at ctx->env's copies).  A bad field is an error, a bad
 * variable one warning; either leaves that setting at its default (for the
 * URL: no remote tier).  The URL is never echoed, as it may hold a password. */
static fg_status remote_settings(fg_context *ctx, fg_options *o)
{
    fg_env *e = &ctx->env;
    fg_status bad = FG_OK;
    const char *url = o->remote_cache, *from = "fg_options.remote_cache";
    if (!url) {
        url = env("FUSEGEN_REMOTE_CACHE");
        from = "FUSEGEN_REMOTE_CACHE";
    }
    if (url && *url && strcmp(url, "off") != 0) {
        if (fg_parse_remote_url(url, &e->remote) == 0) {
            e->remote_url = fg_xstrdup(url);
            char where[300];
            snprintf(where, sizeof where, "redis://%s%s%s:%d/%d", strchr(e->remote.host, ':') ? "[" : "",
                     e->remote.host, strchr(e->remote.host, ':') ? "]" : "", e->remote.port, e->remote.db);
            e->remote_where = fg_xstrdup(where);
        } else if (o->remote_cache) {
            bad = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                                "fg_options.remote_cache is not a remote cache URL: expected "
                                "redis://[[user]:password@]host[:port][/db] or \"off\"");
        } else {
            fg_diag_warn(ctx, FG_NOLOC, "ignoring %s: expected redis://[[user]:password@]host[:port][/db] or off; "
                         "using no remote cache", from);
        }
    }
    e->remote_key_file = o->remote_cache_key_file && *o->remote_cache_key_file
                             ? fg_xstrdup(o->remote_cache_key_file)
                             : env_dup("FUSEGEN_REMOTE_CACHE_KEY_FILE");

    const char *mode = o->remote_cache_mode;
    if (mode && strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0) {
        bad = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_options.remote_cache_mode is '%.16s': expected \"ro\" "
                            "or \"rw\" (or NULL)", mode);
        mode = NULL;
    }
    if (!mode && (mode = env("FUSEGEN_REMOTE_CACHE_MODE")) != NULL && strcmp(mode, "ro") != 0 &&
        strcmp(mode, "rw") != 0) {
        env_bad(ctx, "FUSEGEN_REMOTE_CACHE_MODE", mode, "ro or rw", "ro");
        mode = NULL;
    }
    e->remote_mode = fg_xstrdup(mode ? mode : "ro");
    e->remote_rw = strcmp(e->remote_mode, "rw") == 0;

    long long timeout = o->remote_cache_timeout_ms;
    if (check_field(ctx, "remote_cache_timeout_ms", &timeout, 1, FG_MAX_REMOTE_TIMEOUT_MS))
        bad = FG_ERR_INPUT;
    if (timeout == 0)
        timeout = env_count(ctx, "FUSEGEN_REMOTE_CACHE_TIMEOUT_MS", 1, FG_MAX_REMOTE_TIMEOUT_MS,
                            FG_DEFAULT_REMOTE_TIMEOUT_MS);
    e->remote_timeout_ms = (int)timeout;
    long long ttl = o->remote_cache_ttl_s;
    if (check_field(ctx, "remote_cache_ttl_s", &ttl, 1, FG_MAX_REMOTE_TTL_S))
        bad = FG_ERR_INPUT;
    if (ttl == 0)
        ttl = env_count(ctx, "FUSEGEN_REMOTE_CACHE_TTL", 1, FG_MAX_REMOTE_TTL_S, FG_DEFAULT_REMOTE_TTL_S);
    e->remote_ttl_s = ttl;

    o->remote_cache = e->remote_url;
    o->remote_cache_key_file = e->remote_key_file;
    o->remote_cache_mode = e->remote_mode;
    o->remote_cache_timeout_ms = e->remote_timeout_ms;
    o->remote_cache_ttl_s = e->remote_ttl_s;
    return bad;
}

fg_status fg_env_resolve(fg_context *ctx, const fg_options *given)
{
    fg_options o;
    memset(&o, 0, sizeof o);
    fg_status st = FG_OK;
    if (given)
        st = fg_copy_sized(ctx, "fg_options", &o, sizeof o, given, given->size, OPTIONS_BASE_SIZE, OPTIONS_MIN_SIZE);
    if (st)
        memset(&o, 0, sizeof o);
    ctx->log = o.log;
    ctx->log_user = o.log_user;
    ctx->quiet = env_switch(ctx, "FUSEGEN_QUIET", 0);

    /* The API fields: every one out of range is an error (all are reported). */
    fg_status bad = FG_OK;
    if ((unsigned)o.device >= FG_DEVICE_COUNT) {
        bad = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_options.device is %d: not an fg_device (0 to %d)",
                            (int)o.device, FG_DEVICE_COUNT - 1);
        o.device = FG_DEVICE_AUTO;
    }
    long long jobs = o.jobs, timeout = o.hook_timeout_ms;
    if (check_field(ctx, "jobs", &jobs, 1, FG_MAX_JOBS))
        bad = FG_ERR_INPUT;
    if (check_field(ctx, "hook_steps", &o.hook_steps, 1, FG_MAX_HOOK_STEPS))
        bad = FG_ERR_INPUT;
    if (check_field(ctx, "hook_memory", &o.hook_memory, FG_MIN_HOOK_MEMORY, FG_MAX_HOOK_MEMORY))
        bad = FG_ERR_INPUT;
    if (check_field(ctx, "hook_timeout_ms", &timeout, 1, FG_MAX_HOOK_TIMEOUT_MS))
        bad = FG_ERR_INPUT;
    if (check_field(ctx, "cache_max_mb", &o.cache_max_mb, 1, FG_MAX_CACHE_MAX_MB))
        bad = FG_ERR_INPUT;
    o.jobs = (int)jobs;
    o.hook_timeout_ms = (int)timeout;

    fg_env *e = &ctx->env;
    ctx->rules_dir = o.rules_dir && *o.rules_dir ? fg_xstrdup(o.rules_dir) : env_dup("FUSEGEN_RULES");
    if (!ctx->rules_dir)
        ctx->rules_dir = default_rules_dir();
    ctx->cache_dir = cache_dir(o.cache_dir);
    ctx->arch = o.arch && *o.arch ? fg_xstrdup(o.arch) : NULL;
    e->arch = env_dup("FUSEGEN_ARCH");
    e->nvrtc_options = env_dup("FUSEGEN_NVRTC_OPTIONS");
    e->dump_source = env_dup("FUSEGEN_DUMP_SOURCE");
    e->cuda_library = env_dup("FUSEGEN_CUDA_LIBRARY");
    if (!e->cuda_library)
        e->cuda_library = fg_xstrdup("libcuda.so.1");
    e->host_cxx = env_dup("FUSEGEN_HOST_CXX");
    e->emu_cxxflags = env_dup("FUSEGEN_EMU_CXXFLAGS");
    e->tmpdir = env_dup("TMPDIR");
    if (!e->tmpdir)
        e->tmpdir = fg_xstrdup("/tmp");
    e->emu_asan = env_switch(ctx, "FUSEGEN_EMU_ASAN", 0);
    e->emu_debug = env_switch(ctx, "FUSEGEN_EMU_DEBUG", 0);
    e->emu_keep = env_switch(ctx, "FUSEGEN_EMU_KEEP", 0);
    e->emu_strict = env_switch(ctx, "FUSEGEN_EMU_STRICT", 0);
    e->emu_shuffle = env_count(ctx, "FUSEGEN_EMU_SHUFFLE", 0, INT64_MAX, 0);
    e->keep_layout = env_switch(ctx, "FUSEGEN_KEEP_LAYOUT", 0);
    e->pdl = env_switch(ctx, "FUSEGEN_PDL", 1);
    e->emu_stack_bytes = (size_t)env_count(ctx, "FUSEGEN_EMU_STACK_KB", FG_MIN_EMU_STACK_KB, FG_MAX_EMU_STACK_KB,
                                           FG_DEFAULT_EMU_STACK_KB) * 1024;

    if (o.hook_steps == 0)
        o.hook_steps = env_count(ctx, "FUSEGEN_HOOK_STEPS", 1, FG_MAX_HOOK_STEPS, FG_DEFAULT_HOOK_STEPS);
    if (o.hook_memory == 0) {
        const char *v = env("FUSEGEN_HOOK_MEMORY");
        o.hook_memory = FG_DEFAULT_HOOK_MEMORY;
        if (v && fg_parse_bytes(v, FG_MIN_HOOK_MEMORY, FG_MAX_HOOK_MEMORY, &o.hook_memory) != 0)
            env_bad(ctx, "FUSEGEN_HOOK_MEMORY", v, "a byte count from 64K to 1T (digits, then K, M, G or T)",
                    "the default 64M");
    }
    if (o.hook_timeout_ms == 0)
        o.hook_timeout_ms = (int)env_count(ctx, "FUSEGEN_HOOK_TIMEOUT_MS", 1, FG_MAX_HOOK_TIMEOUT_MS,
                                           FG_DEFAULT_HOOK_TIMEOUT_MS);
    if (o.cache_max_mb) {
        e->cache_limit_bytes = (uint64_t)o.cache_max_mb << 20;
    } else {
        const char *v = env("FUSEGEN_CACHE_MAX_MB");
        e->cache_limit_bytes = (uint64_t)FG_DEFAULT_CACHE_MAX_MB << 20;
        if (v && fg_parse_mebibytes(v, &e->cache_limit_bytes) != 0)
            env_bad(ctx, "FUSEGEN_CACHE_MAX_MB", v, "a size in MiB above 0 and at most 2^40 (\"512\", \"0.5\")",
                    "the default 1024");
        o.cache_max_mb = (long long)((e->cache_limit_bytes + (1u << 20) - 1) >> 20);
    }
    {
        const char *v = env("FUSEGEN_ONNX_FOLD_MB");
        e->onnx_fold_bytes = (uint64_t)FG_DEFAULT_ONNX_FOLD_MB << 20;
        if (v && fg_parse_mebibytes(v, &e->onnx_fold_bytes) != 0)
            env_bad(ctx, "FUSEGEN_ONNX_FOLD_MB", v, "a size in MiB above 0 and at most 2^40 (\"512\", \"0.5\")",
                    "the default 2048");
    }
    if (!o.cache_off)
        o.cache_off = !env_switch(ctx, "FUSEGEN_CACHE", 1);
    if (remote_settings(ctx, &o))
        bad = FG_ERR_INPUT;

    o.size = sizeof o;
    o.rules_dir = ctx->rules_dir;
    o.cache_dir = ctx->cache_dir;
    o.arch = ctx->arch;
    ctx->opts = o;
    return st ? st : bad;
}

void fg_env_free(fg_env *e)
{
    free(e->arch);
    free(e->nvrtc_options);
    free(e->dump_source);
    free(e->cuda_library);
    free(e->host_cxx);
    free(e->emu_cxxflags);
    free(e->tmpdir);
    free(e->remote_url);
    free(e->remote_where);
    free(e->remote_key_file);
    free(e->remote_mode);
    memset(e, 0, sizeof *e);   /* also clears the parsed password */
}
