/*
 * context.h -- the fg_context: settings (resolved once at init, env.h),
 * recorded errors and warnings, interned strings (diag.c), the loaded
 * vocabulary (op definitions), fusion and rewrite rules and Lua hook state, and the
 * runtime's per-context state (kernel cache, JIT, device), owned by the
 * runtime and reached through an opaque pointer here.  codegen/ never calls
 * runtime/: the runtime registers its own teardown with fg_ctx_on_free.
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
    char *arch;                    /* option only (NULL: the JIT resolves it) */
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

/* Registers fn to run when ctx is freed, before the vocabulary and the
 * diagnostics are released; later registrations run first, and a function
 * already registered is not added twice.  Thread-safe. */
void fg_ctx_on_free(fg_context *ctx, fg_ctx_teardown_fn fn);

/* The names of the vocabulary's ops, in load order (for suggestions):
 * a malloc'd array of ctx->nops entries the caller frees. */
const char **fg_ctx_op_names(const fg_context *ctx);

/* Vocabulary lookups (NULL / -1 when absent). */
const fg_opdef *fg_ctx_find_op(const fg_context *ctx, const char *name);
int fg_ctx_find_rule(const fg_context *ctx, const char *name);

/* Adds an op definition or rule (ownership passes to the context).  A duplicate
 * name is an error that points at both definitions. */
fg_status fg_ctx_add_op(fg_context *ctx, fg_opdef *op);
fg_status fg_ctx_add_rule(fg_context *ctx, fg_rule *rule);

#endif /* FG_CONTEXT_H */
