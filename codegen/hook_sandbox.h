/*
 * hook_sandbox.h -- the Lua state behind the rule hooks: a capped allocator,
 * an instruction budget, sandbox environments and a protected call that
 * reports what went wrong and where.  hook.c builds the hook registry and the
 * argument tables on top of it; nothing else uses this header.
 */
#ifndef FG_HOOK_SANDBOX_H
#define FG_HOOK_SANDBOX_H

#include <stddef.h>

#include <lua.h>

typedef struct fg_sandbox fg_sandbox;

/* Why a protected load or call failed. */
typedef enum fg_sandbox_fail {
    FG_SBF_NONE = 0,
    FG_SBF_ERROR,      /* a Lua error: syntax, runtime or error() */
    FG_SBF_STEPS,      /* the instruction budget ran out */
    FG_SBF_MEMORY,     /* the memory cap was hit */
} fg_sandbox_fail;

/* A failure report.  Strings are malloc'd (or NULL) and released by
 * fg_sandbox_failure_clear. */
typedef struct fg_sandbox_failure {
    fg_sandbox_fail kind;
    char *message;     /* Lua's message, as Lua formatted it ("path:3: boom") */
    char *traceback;   /* "stack traceback:\n\t..." or NULL */
    char *src;         /* file of the innermost hook frame (chunk name without '@'), or NULL */
    int line;          /* its current line, 0 when unknown */
} fg_sandbox_failure;

/* Creates the state.  The limits come from $FUSEGEN_HOOK_STEPS (VM
 * instructions per call, default 10,000,000) and $FUSEGEN_HOOK_MEMORY (bytes,
 * a K/M/G suffix allowed, default 64 MiB). */
fg_sandbox *fg_sandbox_new(void);
void fg_sandbox_free(fg_sandbox *sb);
lua_State *fg_sandbox_state(fg_sandbox *sb);

long long fg_sandbox_step_limit(const fg_sandbox *sb);
size_t fg_sandbox_memory_limit(const fg_sandbox *sb);
/* Bytes the state holds now. */
size_t fg_sandbox_memory_used(const fg_sandbox *sb);

/* Pushes a fresh environment table holding only the safe globals. */
void fg_sandbox_push_env(fg_sandbox *sb);

/* Compiles text (text chunks only, never bytecode) and pushes the function.
 * chunkname is "@path".  Returns 0, or -1 with *f filled and nothing pushed. */
int fg_sandbox_load(fg_sandbox *sb, const char *text, size_t len, const char *chunkname, fg_sandbox_failure *f);

/* Calls the function below the nargs arguments on top of the stack, under
 * the budgets, leaving nres results.  arg_bytes is memory that the arguments
 * took (it does not count against the cap).  Returns 0, or -1 with *f filled
 * and the function, arguments and any partial results popped.  The state
 * stays usable either way. */
int fg_sandbox_call(fg_sandbox *sb, int nargs, int nres, size_t arg_bytes, fg_sandbox_failure *f);

void fg_sandbox_failure_clear(fg_sandbox_failure *f);

#endif /* FG_HOOK_SANDBOX_H */
