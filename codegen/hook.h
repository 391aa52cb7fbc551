/*
 * hook.h -- Lua hooks: the part of a rule that YAML cannot say.
 *
 * All hook files of a context share one Lua 5.4 state.  Each file runs in its
 * own sandbox environment holding only safe libraries (base functions without
 * load/loadstring/dofile/loadfile/require/collectgarbage, string, table, math,
 * utf8); io, os, package and debug are absent.  Every global function a file
 * defines becomes a hook under its name (a name defined twice is an error).
 * Every load and call runs under lua_pcall with a traceback, a step budget
 * (VM instructions plus the work of library functions; fg_options.hook_steps,
 * default 10 million), a memory cap (hook_memory, default 64 MiB for the
 * state) and a wall-clock deadline (hook_timeout_ms, default 2000 ms);
 * exceeding any stops the hook with a clear error.  Errors carry the hook's
 * file:line.  Argument tables are built in a protected call: running out of
 * memory there fails the call, never the process.
 *
 * A rules directory is data: nothing a hook returns reaches generated source
 * as text.  An epilogue hook returns an expression (docs/expressions.md),
 * parsed and checked here; the emitter renders the parsed expression.
 *
 * The tables hooks receive (documented in docs/rules.md):
 *   node   = { name=, op=, attrs={...}, inputs={ {name=, shape={...}, dtype=}, ... },
 *              output={name=, shape=, dtype=, layout=} }
 *   group  = { rule=, template=, nodes={ node, ... } } where each input of a node
 *              that is a weight also has data={...} (1-based array of numbers)
 */
#ifndef FG_HOOK_H
#define FG_HOOK_H

#include "ir.h"

typedef struct fg_hooks fg_hooks;
struct fg_expr;

/* Loads a .lua file (a regular file of at most 16 MiB) into the context's
 * hook state (created on first use). */
fg_status fg_hooks_load(fg_context *ctx, const char *path);
/* The same for the len bytes of text, read from path by the caller (the
 * rules directory loader, which opens each file once). */
fg_status fg_hooks_load_text(fg_context *ctx, const char *path, const char *text, size_t len);
void fg_hooks_free(fg_hooks *h);

/* Nonzero when a hook of that name was loaded. */
int fg_hooks_has(const fg_context *ctx, const char *name);
/* Interned path of the file defining hook name, or NULL. */
const char *fg_hooks_file(const fg_context *ctx, const char *name);

/* Predicate hook: name(node) -> boolean.  site is the rule line that names
 * the hook (reported with the error).  *result is 0 or 1. */
fg_status fg_hook_predicate(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, int node,
                            int *result);

/* Fold hook: name(group) -> table { [weight tensor name] = {values...}, ... }.
 * Each returned array replaces that weight's data in g (the plan's copy) and
 * must have exactly its element count; anything else is an error. */
fg_status fg_hook_fold(fg_context *ctx, const char *name, fg_loc site, fg_graph *g, const fg_group *grp);

/* Epilogue hook: name(group) -> string in the expression language (docs/expressions.md)
 * over the variables `v` (the accumulator, index 0) and `c` (the channel index, index 1);
 * the value replaces v.  Parsed and checked here; *expr is owned by the caller (fg_expr_free).
 * A result that is not a string, is longer than 4096 bytes, or does not
 * parse (unknown variables or functions, too deep) is an FG_ERR_HOOK error
 * at the hook's file:line naming the rule site; *expr is NULL then. */
fg_status fg_hook_epilogue(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g,
                           const fg_group *grp, struct fg_expr **expr);

/* Template-parameter hook: name(group) -> table of integers; for each of
 * keys[0..n) present in the table, vals[i] is set (others left as they are).
 * Non-integer or non-positive values are errors. */
fg_status fg_hook_params(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g,
                         const fg_group *grp, const char *const *keys, int n, int64_t *vals);

/* Template-selection hook (a rule's `select:`): name(group, {template names})
 * -> one of the names.  Called only when more than one template accepted the
 * group; *choice is the index of the returned name in names[0..n). */
fg_status fg_hook_select(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, const fg_group *grp,
                         const char *const *names, int n, int *choice);

#endif /* FG_HOOK_H */
