/*
 * context.h -- the fg_context record: settings (resolved once at creation,
 * env.h), recorded errors and warnings, interned strings (diag.c), the
 * loaded vocabulary (op definitions), fusion and rewrite rules, registered
 * templates and Lua hook state, the attached GPU's arch as the API layer
 * found it, and the runtime's per-context state (kernel cache, JIT, device),
 * owned by the runtime and reached through an opaque pointer here.
 *
 * The record calls nobody above it: each subsystem that hangs state on the
 * context (hooks, registered templates, rewrites, the runtime) registers
 * its own teardown with fg_ctx_on_free, and loading the rules directory
 * into a new context is the API layer's (fg_context_init, runtime/api.c).
 */
#ifndef FG_CONTEXT_H
#define FG_CONTEXT_H

#include <pthread.h>

#include "env.h"
#include "ir.h"
#include "util.h"

struct fg_hooks;     /* hook.h: Lua state for the rule hooks */
struct fg_rewrite;   /* rewrite.h */
struct fg_runtime;   /* runtime: cache, JIT, device */

typedef struct fg_intern_entry fg_intern_entry;

typedef void (*fg_ctx_teardown_fn)(fg_context *ctx);

struct fg_context {
    fg_options opts;               /* resolved (env.h); the strings are the owned copies below */
    char *rules_dir;               /* option or $FUSEGEN_RULES, else the shipped rules */
    char *cache_dir;               /* option, $FUSEGEN_CACHE_DIR, $XDG_CACHE_HOME/fusegen, ~/.cache/fusegen, or NULL */
    char *arch;                    /* option only (NULL: the attached GPU's or $FUSEGEN_ARCH, arch.h) */
    char device_arch[16];          /* the attached GPU's arch ("sm_90"), "" for none (fg_ctx_set_device_arch) */
    int device_asked;              /* nonzero once device_arch is set */
    fg_env env;                    /* settings without a public field */

    pthread_mutex_t lock;          /* guards errors, warnings, interning, the log function, teardown */
    fg_error *errors;
    int nerrors, errors_cap;
    char **warnings;
    int nwarnings, warnings_cap;
    int quiet;                     /* nonzero: the default logger prints nothing ($FUSEGEN_QUIET) */
    fg_log_fn log;                 /* NULL: the default logger (stderr) */
    void *log_user;
    fg_intern_entry *interned;     /* uthash set */
    fg_ctx_teardown_fn *teardown;  /* fg_ctx_on_free, run latest first */
    int nteardown, teardown_cap;

    fg_opdef **ops;                /* vocabulary */
    int nops, ops_cap;
    fg_rule **rules;               /* fusion rules, load order */
    int nrules, rules_cap;
    struct fg_rewrite **rewrites;  /* rewrite rules (rewrite.h), load order */
    int nrewrites, rewrites_cap;
    struct fg_hooks *hooks;        /* NULL until a .lua file is loaded */
    struct fg_template **templates; /* templates registered by rules directories (template.h) */
    int ntemplates, templates_cap;

    struct fg_runtime *rt;         /* NULL until first needed */
};

/* Creates a context with every setting resolved from opts, the environment
 * and the defaults (env.h), nothing loaded yet.  *out is set even on error
 * (the errors are recorded there; the caller frees it).  Returns FG_OK or
 * the first error of the settings. */
fg_status fg_ctx_new(fg_context **out, const fg_options *opts);

/* Records the attached GPU's arch ("sm_90"; NULL or "": no GPU) for
 * fg_target_arch.  The API layer asks the backend once per context, before
 * planning; the first recording stands (later ones are ignored), so a test
 * may record a stand-in GPU first.  Thread-safe. */
void fg_ctx_set_device_arch(fg_context *ctx, const char *arch);
/* Nonzero once fg_ctx_set_device_arch was called on ctx. */
int fg_ctx_device_asked(const fg_context *ctx);

/* Registers fn to run when ctx is freed, before the vocabulary and the
 * diagnostics are released; later registrations run first, and a function
 * already registered is not added twice.  Thread-safe. */
void fg_ctx_on_free(fg_context *ctx, fg_ctx_teardown_fn fn);

/* Frees the op definitions and fusion rules (fg_context_free; and the rules
 * loader when loading ran out of memory, which also unloads what the other
 * loaders registered). */
void fg_ctx_clear_vocabulary(fg_context *ctx);

/* The names of the vocabulary's ops, in load order (for suggestions):
 * a malloc'd array of ctx->nops entries the caller frees. */
const char **fg_ctx_op_names(const fg_context *ctx);

/* Vocabulary lookups (NULL / -1 when absent). */
const fg_opdef *fg_ctx_find_op(const fg_context *ctx, const char *name);
/* The op whose `onnx:` key names ONNX operator type (NULL when none). */
const fg_opdef *fg_ctx_find_onnx_op(const fg_context *ctx, const char *type);
int fg_ctx_find_rule(const fg_context *ctx, const char *name);

/* Adds an op definition or rule (ownership passes to the context).  A duplicate
 * name, or a second op claiming one ONNX operator, is an error that points at
 * both definitions. */
fg_status fg_ctx_add_op(fg_context *ctx, fg_opdef *op);
fg_status fg_ctx_add_rule(fg_context *ctx, fg_rule *rule);

#endif /* FG_CONTEXT_H */
