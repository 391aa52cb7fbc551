/*
 * oom.h -- the out-of-memory guard (docs/architecture.md, "Errors").  The
 * public entry points that input can reach run their work under
 * fg_oom_guard: loading a rules directory, a graph, an ONNX model, weights;
 * planning, with its rewrites and folds; compiling a plan (fg_plan_compile:
 * emission, placement, the weight block) and running it (fg_exec_run,
 * fg_exec_run_host: binding); emission for callers that are not guarded
 * (fg_emit_group_guarded: the command line, the report) and the host
 * reference of the command line (runtime/reference.h).  Parts of those calls
 * run held (below) and so still abort on a real failure: obtaining kernel
 * binaries (the kernel cache in memory and on disk, the remote tier, NVRTC
 * or the host compiler, the compile batch's worker threads), loading them
 * (the driver's modules, the emulator's dlopen'ed copies) and launching
 * them (the driver, the emulator's scheduler and its threads) -- their
 * allocations are bookkeeping, bounded by the sources and binaries, not by
 * tensor sizes.  Buffers sized by tensor sizes are checked allocations
 * instead (NULL -> FG_ERR_NOMEM with "out of host memory: N bytes for ..."
 * located at the tensor): the exec's weight block, intermediate arena,
 * split-K buffers and staging (the backends' alloc), the reference's values,
 * the run command's host buffers.  Worker threads never unwind: a guard is
 * per thread, and a thread that runs none (a pool worker) aborts on a real
 * failure as outside any guard.  fg_xmalloc and its kin (util.h) keep their
 * contract -- they never return NULL -- but under a guard an allocation
 * that fails unwinds to the guard (longjmp) instead of aborting.  Every
 * allocation the guarded work made through them and has not freed is then
 * freed, with the cleanups deferred below, and the call returns
 * FG_ERR_NOMEM with "out of memory while <what>" recorded at its location.
 *
 * What makes that sound:
 *   - util.h routes free() and realloc() of every library file through
 *     fg_free / fg_realloc, so the guard knows what is still live;
 *   - state that outlives the call (the context's errors, interned strings,
 *     registered teardowns, the hook state's Lua calls, the runtime record,
 *     anything allocated under a lock, the backend calls named above) is
 *     made inside fg_oom_hold / fg_oom_release: there
 *     nothing is tracked and nothing unwinds (a real failure aborts, as
 *     outside any guard);
 *   - a lock taken around guarded work (the emission lock, an exec's run
 *     lock) is released by a deferred cleanup (fg_oom_defer) if it unwinds;
 *   - resources that are not memory of ours (a libyaml parser, a DIR, a
 *     FILE, an exec under construction with its backend memory and loaded
 *     kernels) are registered with fg_oom_defer while held; their handle must
 *     live on the heap or be the pointer itself, never in a stack frame
 *     that the unwinding leaves;
 *   - protobuf-c, which takes an allocator per call, allocates through
 *     fg_oom_try_alloc, which reports failure as NULL and marks it, so that
 *     the caller tells out of memory from bad input (Jansson's allocator is
 *     process-wide, the application's to set: its header is deferred, and
 *     its own out-of-memory error code raised);
 *   - uthash's tables are fg_xmalloc's (util.h).
 *
 * Injection, for tests: the environment variable FUSEGEN_FAIL_ALLOC=N (read
 * once per thread) or fg_oom_fail_at(N) makes the Nth allocation that could
 * unwind on the calling thread fail, once.  The state is per thread; a guard
 * inside a guard runs as part of the outer one.
 */
#ifndef FG_OOM_H
#define FG_OOM_H

#include "diag.h"

typedef fg_status (*fg_oom_body_fn)(void *arg);
typedef void (*fg_oom_undo_fn)(void *arg);

/* Runs body(arg) under the calling thread's guard and returns its status.
 * When an allocation fails inside: the deferred cleanups run (latest
 * first), then undo(arg) when given (to detach from longer-lived state what
 * the call attached to it; it runs with allocation held), then every
 * tracked allocation still live is freed; the error "out of memory while
 * <what>" is recorded at loc and FG_ERR_NOMEM returned.  Inside another
 * guard it only calls body. */
fg_status fg_oom_guard(fg_context *ctx, fg_loc loc, const char *what, fg_oom_body_fn body, fg_oom_undo_fn undo,
                       void *arg);

/* fg_oom_guard without the message (oom.c; fg_oom_guard is oom_guard.c's,
 * above the diagnostics): *unwound is set when body ran out of memory. */
fg_status fg_oom_run(fg_oom_body_fn body, fg_oom_undo_fn undo, void *arg, int *unwound);

/* Nonzero while a guard runs on the calling thread (and no hold is in force). */
int fg_oom_guarded(void);

/* Opens / closes a held region on the calling thread (they nest): allocations
 * are not tracked, never unwind and are never failed by injection. */
void fg_oom_hold(void);
void fg_oom_release(void);

/* Registers fn(arg) to run if the current guard unwinds; fg_oom_undefer(arg)
 * removes the latest registration with that arg.  Outside a guard both do
 * nothing.  At most 32 at once: one more runs fn(arg) and unwinds. */
void fg_oom_defer(void (*fn)(void *), void *arg);
void fg_oom_undefer(void *arg);

/* The same for a file descriptor: fg_oom_defer_close(fd) (nothing for fd < 0)
 * after opening, fg_oom_close(fd) (undefer, then close) instead of close. */
void fg_oom_defer_close(int fd);
int fg_oom_close(int fd);

/* Makes p (malloc'd by someone else: realpath, strdup) one of the guard's
 * tracked allocations, so that unwinding frees it.  Outside a guard: nothing. */
void fg_oom_adopt(void *p);

/* Nonzero when p is one of the current guard's tracked allocations (made
 * under it and not freed): what unwinding will free.  For undo functions,
 * to detach such memory from longer-lived state. */
int fg_oom_owns(const void *p);

/* An allocator for libraries: malloc(n), tracked under a guard and subject
 * to injection, NULL on failure (remembered: fg_oom_take_failure). */
void *fg_oom_try_alloc(size_t n);
/* Nonzero when fg_oom_try_alloc failed since the last call; clears it. */
int fg_oom_take_failure(void);
/* Unwinds to the current guard as a failed allocation would (aborts with a
 * message outside a guard or in a held region). */
_Noreturn void fg_oom_raise(size_t n);

/* Injection: the nth allocation from now on the calling thread that could
 * unwind fails (0: none).  fg_oom_fired reports whether it did (and clears). */
void fg_oom_fail_at(long n);
int fg_oom_fired(void);
/* How many allocations that could unwind the calling thread made since the
 * last fg_oom_fail_at (for sizing an injection loop). */
long fg_oom_counted(void);

#endif /* FG_OOM_H */
