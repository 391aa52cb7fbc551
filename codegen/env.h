/*
 * env.h -- the settings of a context, resolved once when it is created (fg_ctx_new): each
 * from the first of the API option (fg_options), its environment variable,
 * the default.  No other module reads the environment: they read ctx->opts
 * (the public fields, resolved) and ctx->env (settings that have no public
 * field).  docs/api.md lists every variable.
 *
 * Numbers are parsed strictly: digits only (no sign, no exponent, no
 * spaces), within a stated range, without wrapping.  A malformed or
 * out-of-range environment value gives one warning naming the variable and
 * its value, and the default is used; an out-of-range API field is an
 * FG_ERR_INPUT error.
 */
#ifndef FG_ENV_H
#define FG_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "fusegen.h"

/* Defaults and ranges (the same for the API field and the variable). */
#define FG_DEFAULT_HOOK_STEPS 10000000LL
#define FG_MAX_HOOK_STEPS 1000000000000LL            /* 10^12 */
#define FG_DEFAULT_HOOK_MEMORY (64LL << 20)
#define FG_MIN_HOOK_MEMORY (64LL << 10)
#define FG_MAX_HOOK_MEMORY (1LL << 40)
#define FG_DEFAULT_HOOK_TIMEOUT_MS 2000
#define FG_MAX_HOOK_TIMEOUT_MS 3600000               /* one hour */
#define FG_DEFAULT_CACHE_MAX_MB 1024LL
#define FG_DEFAULT_ONNX_FOLD_MB 2048LL   /* import-time folding, all results of one load */
#define FG_MAX_CACHE_MAX_MB (1LL << 40)              /* 2^60 bytes */
#define FG_DEFAULT_EMU_STACK_KB 64
#define FG_MIN_EMU_STACK_KB 16
#define FG_MAX_EMU_STACK_KB (1 << 20)                /* 1 GiB */
#define FG_MAX_JOBS 4096
#define FG_DEFAULT_REMOTE_TIMEOUT_MS 500
#define FG_MAX_REMOTE_TIMEOUT_MS 60000
#define FG_DEFAULT_REMOTE_TTL_S (30LL * 24 * 3600)  /* 30 days */
#define FG_MAX_REMOTE_TTL_S 2147483647LL

/* A parsed remote cache address: redis://[[user]:password@]host[:port][/db]. */
typedef struct fg_remote_url {
    char host[256];             /* a name, an IPv4 address, or an IPv6 address (written [::1] in the URL) */
    int port;                   /* 1..65535, default 6379 */
    int db;                     /* 0..1000000, default 0 */
    char user[128];             /* "" when none (AUTH password alone) */
    char password[256];         /* "" when none (no AUTH) */
} fg_remote_url;

/* Settings without a public field.  Strings are owned (NULL: unset). */
typedef struct fg_env {
    char *arch;                 /* FUSEGEN_ARCH: used when neither the option nor a GPU names one */
    char *nvrtc_options;        /* FUSEGEN_NVRTC_OPTIONS: extra NVRTC options, white-space separated */
    char *dump_source;          /* FUSEGEN_DUMP_SOURCE: directory for copies of compiled sources */
    char *cuda_library;         /* FUSEGEN_CUDA_LIBRARY, else "libcuda.so.1" (never NULL after init) */
    char *host_cxx;             /* FUSEGEN_HOST_CXX: the emulation compiler command; NULL: the configured one */
    char *emu_cxxflags;         /* FUSEGEN_EMU_CXXFLAGS: extra emulation compiler flags */
    char *tmpdir;               /* $TMPDIR, else "/tmp" (never NULL after init) */
    int emu_asan;               /* FUSEGEN_EMU_ASAN */
    int emu_debug;              /* FUSEGEN_EMU_DEBUG */
    int emu_keep;               /* FUSEGEN_EMU_KEEP */
    int emu_strict;             /* FUSEGEN_EMU_STRICT */
    long long emu_shuffle;      /* FUSEGEN_EMU_SHUFFLE: the emulator's schedule seed (0: first in, first out) */
    int keep_layout;            /* FUSEGEN_KEEP_LAYOUT: the planner stores every tensor in the graph's layout */
    int pdl;                    /* FUSEGEN_PDL (default 1): the CUDA backend may launch with programmatic dependent launch */
    size_t emu_stack_bytes;     /* FUSEGEN_EMU_STACK_KB * 1024, else 64 KiB */
    /* The disk cache limit in bytes: opts.cache_max_mb MiB, else
     * $FUSEGEN_CACHE_MAX_MB (which may have a fraction: "0.5"), else 1 GiB. */
    uint64_t cache_limit_bytes;
    /* The remote tier (runtime/remote_cache.c): opts.remote_cache* first,
     * then $FUSEGEN_REMOTE_CACHE, _KEY_FILE, _MODE, _TIMEOUT_MS, _TTL. */
    char *remote_url;           /* the URL as given; NULL: no remote tier (unset, "off", or malformed) */
    char *remote_where;         /* "redis://host:port/db": the URL without credentials, for messages */
    fg_remote_url remote;       /* remote_url parsed */
    char *remote_key_file;      /* the fleet secret's file; NULL: none given */
    char *remote_mode;          /* "ro" or "rw" (never NULL after init) */
    int remote_rw;              /* remote_mode is "rw" */
    int remote_timeout_ms;
    long long remote_ttl_s;
    /* The ONNX importer's budget for the values constant folding makes, in
     * bytes, for one load: $FUSEGEN_ONNX_FOLD_MB (fractions allowed), else
     * FG_DEFAULT_ONNX_FOLD_MB. */
    uint64_t onnx_fold_bytes;
} fg_env;

/* Resolves every setting of ctx (whose log function is already set) from
 * given (NULL: none) and the environment: fills ctx->opts (public fields,
 * with the strings owned by ctx: rules_dir is the shipped rules when neither
 * the option nor $FUSEGEN_RULES names one: <prefix>/share/fusegen/rules next
 * to the installed library, else the source tree's rules/, else the
 * configured install prefix), ctx->env, ctx->quiet.  Returns FG_OK, or
 * FG_ERR_INPUT / FG_ERR_UNSUPPORTED for bad options (recorded). */
fg_status fg_env_resolve(fg_context *ctx, const fg_options *given);
/* Frees the strings of env. */
void fg_env_free(fg_env *env);

/* Copies a caller's option struct of declared size `declared` (0: base_size,
 * the layout of fusegen 0.1) into dst (ours, dst_size bytes, zeroed first).
 * Returns FG_OK, FG_ERR_INPUT when declared is below min_size, or
 * FG_ERR_UNSUPPORTED when bytes past dst_size (fields of a newer fusegen) are
 * set; what names the struct in the recorded message. */
fg_status fg_copy_sized(fg_context *ctx, const char *what, void *dst, size_t dst_size, const void *src,
                        size_t declared, size_t base_size, size_t min_size);

/* ---- strict parsers (0 on success, -1 otherwise; *out untouched then) ---- */

/* A decimal whole number in [min, max] (min >= 0): digits only. */
int fg_parse_count(const char *s, long long min, long long max, long long *out);
/* A byte count: digits, then an optional K, M, G or T (binary) with an
 * optional "i" and "B" ("64M", "64MiB", "1g"), in [min, max]. */
int fg_parse_bytes(const char *s, long long min, long long max, long long *out);
/* Mebibytes with an optional fraction ("1024", "0.02"): more than 0 and at
 * most FG_MAX_CACHE_MAX_MB; *bytes receives the value in bytes (at least 1). */
int fg_parse_mebibytes(const char *s, uint64_t *bytes);
/* A switch: 1/on/true/yes or 0/off/false/no, any case. */
int fg_parse_switch(const char *s, int *out);
/* A remote cache URL: "redis://", an optional "[user]:password@", a host
 * (letters, digits, '.', '-', '_'; or an IPv6 address in brackets), an
 * optional ":port" (1..65535) and an optional "/db" (0..1000000).  Nothing
 * else: no query, no spaces, no empty parts. */
int fg_parse_remote_url(const char *s, fg_remote_url *out);

#endif /* FG_ENV_H */
