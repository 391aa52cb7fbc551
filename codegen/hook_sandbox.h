/*
 * hook_sandbox.h -- the Lua state behind the rule hooks: a capped allocator,
 * a step budget (VM instructions plus the work of library functions), a
 * wall-clock deadline, sandbox environments with bounded library functions
 * (hook_lib.c) and a protected call that reports what went wrong and where.
 * hook.c builds the hook registry and the argument tables on top of it;
 * nothing else uses this header.
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
    FG_SBF_TIME,       /* the wall-clock deadline passed */
    FG_SBF_ARGS,       /* the argument tables alone exceed the memory cap */
} fg_sandbox_fail;

/* The budgets of every load and call.  Each is positive. */
typedef struct fg_sandbox_limits {
    long long steps;   /* VM instructions, plus the charged work of library functions */
    size_t memory;     /* bytes the state may hold (the arguments of a call get as much again) */
    int timeout_ms;    /* wall clock of one load or call */
} fg_sandbox_limits;

/* A failure report.  Strings are malloc'd (or NULL) and released by
 * fg_sandbox_failure_clear. */
typedef struct fg_sandbox_failure {
    fg_sandbox_fail kind;
    char *message;     /* Lua's message, as Lua formatted it ("path:3: boom") */
    char *traceback;   /* "stack traceback:\n\t..." or NULL */
    char *src;         /* file of the innermost hook frame (chunk name without '@'), or NULL */
    int line;          /* its current line, 0 when unknown */
} fg_sandbox_failure;

/* Creates the state with the given budgets (a field <= 0 takes its default:
 * 10,000,000 steps, 64 MiB, 2000 ms).  Aborts only when the state itself
 * cannot be allocated. */
fg_sandbox *fg_sandbox_new(const fg_sandbox_limits *lim);
void fg_sandbox_free(fg_sandbox *sb);
lua_State *fg_sandbox_state(fg_sandbox *sb);

long long fg_sandbox_step_limit(const fg_sandbox *sb);
size_t fg_sandbox_memory_limit(const fg_sandbox *sb);
int fg_sandbox_timeout_ms(const fg_sandbox *sb);
/* Bytes the state holds now. */
size_t fg_sandbox_memory_used(const fg_sandbox *sb);

/* Pushes a fresh environment table holding only the safe globals. */
void fg_sandbox_push_env(fg_sandbox *sb);

/* Compiles text (text chunks only, never bytecode) and pushes the function,
 * under the memory cap, the step budget (charged for what the compiler
 * allocates) and the deadline.  chunkname is "@path".  Returns 0, or -1 with
 * *f filled and nothing pushed. */
int fg_sandbox_load(fg_sandbox *sb, const char *text, size_t len, const char *chunkname, fg_sandbox_failure *f);

/* Calls the function below the nargs arguments on top of the stack, under
 * the budgets, leaving nres results.  arg_bytes is memory that the arguments
 * took (it does not count against the cap).  Returns 0, or -1 with *f filled
 * and the function, arguments and any partial results popped.  The state
 * stays usable either way. */
int fg_sandbox_call(fg_sandbox *sb, int nargs, int nres, size_t arg_bytes, fg_sandbox_failure *f);

/* Builds the arguments of a call: runs push(L) (which finds what it needs in
 * ud, reachable as the light userdata at index 1) in a protected call that
 * must leave exactly nvalues values, which stay pushed.  What push allocates
 * may take up to the memory cap on top of what the state holds; *bytes is
 * what it took (pass it to fg_sandbox_call).  Returns 0, or -1 with *f
 * filled (FG_SBF_ARGS when the cap was hit) and nothing pushed. */
int fg_sandbox_push_args(fg_sandbox *sb, lua_CFunction push, void *ud, int nvalues, size_t *bytes,
                         fg_sandbox_failure *f);

void fg_sandbox_failure_clear(fg_sandbox_failure *f);

/* ---- for the library functions of hook_lib.c ----------------------------- */

/* Charges steps of work to the running call; when that exceeds the budget or
 * the deadline has passed, stops the call (raises; does not return).  Does
 * nothing outside a call. */
void fg_sandbox_charge(lua_State *L, unsigned long long steps);
/* Bytes the running call may still allocate; stops the call as out of memory
 * when need exceeds that (raises; does not return). */
void fg_sandbox_need_memory(lua_State *L, size_t need);
/* Replaces the functions of the string, table, utf8 and math libraries and
 * the base functions hooks may use with versions whose work is charged to
 * the step budget (hook_lib.c).  Called once by fg_sandbox_new. */
void fg_sandbox_bound_libs(lua_State *L);

#endif /* FG_HOOK_SANDBOX_H */
