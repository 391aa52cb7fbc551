/*
 * context.h -- the fg_context: options, recorded errors, interned strings, the
 * loaded vocabulary (op definitions), fusion rules and Lua hook state, and
 * the runtime's per-context state (kernel cache, JIT, device), each owned by
 * its module and reached through an opaque pointer here.
 */
#ifndef FG_CONTEXT_H
#define FG_CONTEXT_H

#include <pthread.h>

#include "ir.h"
#include "util.h"

struct fg_hooks;     /* hook.h: Lua state for the rule hooks */
struct fg_runtime;   /* runtime: cache, JIT, device */

typedef struct fg_intern_entry fg_intern_entry;

struct fg_context {
    fg_options opts;               /* strings below are owned copies */
    char *rules_dir;
    char *cache_dir;
    char *arch;

    pthread_mutex_t lock;          /* guards errors, warnings and interning */
    fg_error *errors;
    int nerrors, errors_cap;
    char **warnings;
    int nwarnings, warnings_cap;
    int quiet;                     /* nonzero: warnings are recorded, not printed */
    fg_intern_entry *interned;     /* uthash set */

    fg_opdef **ops;                /* vocabulary */
    int nops, ops_cap;
    fg_rule **rules;               /* fusion rules, load order */
    int nrules, rules_cap;
    struct fg_hooks *hooks;        /* NULL until a .lua file is loaded */

    struct fg_runtime *rt;         /* NULL until first needed */
};

/* Releases ctx->rt (runtime/runtime.c). */
void fg_runtime_free(fg_context *ctx);

/* Vocabulary lookups (NULL / -1 when absent). */
const fg_opdef *fg_ctx_find_op(const fg_context *ctx, const char *name);
int fg_ctx_find_rule(const fg_context *ctx, const char *name);

/* Adds an op definition or rule (ownership passes to the context).  A duplicate
 * name is an error that points at both definitions. */
fg_status fg_ctx_add_op(fg_context *ctx, fg_opdef *op);
fg_status fg_ctx_add_rule(fg_context *ctx, fg_rule *rule);

#endif /* FG_CONTEXT_H */
