/* oom.c -- checked allocation (util.h: fg_xmalloc and kin, fg_free,
 * fg_realloc) and the out-of-memory guard they unwind to (oom.h): the
 * per-thread set of allocations a guarded call made, its deferred
 * cleanups, held regions, and allocation-failure injection.  The bottom of
 * the library: it calls nothing of it (the guard's message is recorded by
 * oom_guard.c). */
#include "oom.h"

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* This file is where the real functions are called. */
#undef free
#undef realloc

#define TOMB ((void *)1)

typedef struct deferred {
    void (*fn)(void *);
    void *arg;
} deferred;

typedef struct oom_state {
    int active;               /* a guard runs on this thread */
    int hold;                 /* fg_oom_hold depth */
    jmp_buf *jb;
    void **set;               /* open addressing; NULL empty, TOMB deleted */
    size_t cap, live, used;   /* used: live + tombstones */
    deferred *defer;          /* fg_oom_defer, kept between guards */
    int ndefer, defer_cap;
    int lib_failed;           /* fg_oom_try_alloc failed */
    int env_read;
    long fail_at, counted;    /* injection */
    int fired;
} oom_state;

static _Thread_local oom_state S;

/* ---- the tracked set ------------------------------------------------------ */

/* The first slot to probe for addr (cap a power of two). */
static size_t slot_of(uintptr_t addr, size_t cap)
{
    uint64_t h = (uint64_t)addr;
    h ^= h >> 33;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return (size_t)h & (cap - 1);
}

/* Adds p, not in the set, into a slot reserved by set_reserve. */
static void set_insert(void *p)
{
    size_t i = slot_of((uintptr_t)p, S.cap);
    while (S.set[i] && S.set[i] != TOMB)
        i = (i + 1) & (S.cap - 1);
    if (!S.set[i])
        S.used++;
    S.set[i] = p;
    S.live++;
}

/* Makes room for one more entry; returns 0, or -1 when the set cannot grow. */
static int set_reserve(void)
{
    if (S.cap && (S.used + 1) * 4 < S.cap * 3)
        return 0;
    size_t cap = 64;
    while (cap * 3 <= (S.live + 1) * 8)
        cap *= 2;
    void **old = S.set;
    size_t ocap = S.cap;
    void **nv = calloc(cap, sizeof *nv);
    if (!nv)
        return -1;
    S.set = nv;
    S.cap = cap;
    S.live = S.used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i] && old[i] != TOMB)
            set_insert(old[i]);
    free(old);
    return 0;
}

/* The slot holding the allocation at addr, or -1.  (An address, not a
 * pointer: it is also asked about memory realloc has just released.) */
static long set_find(uintptr_t addr)
{
    if (!S.live || !addr)
        return -1;
    size_t i = slot_of(addr, S.cap);
    while (S.set[i]) {
        if ((uintptr_t)S.set[i] == addr)
            return (long)i;
        i = (i + 1) & (S.cap - 1);
    }
    return -1;
}

/* Forgets the allocation at addr (nothing when it is not tracked). */
static void set_remove(uintptr_t addr)
{
    long i = set_find(addr);
    if (i >= 0) {
        S.set[i] = TOMB;
        S.live--;
    }
}

/* Drops the set (not what it names: the caller owns that now). */
static void set_clear(void)
{
    free(S.set);
    S.set = NULL;
    S.cap = S.live = S.used = 0;
}

/* ---- failing ---------------------------------------------------------------- */

/* Nonzero when allocations are tracked and may unwind: a guard runs, no hold. */
static int tracking(void) { return S.active && !S.hold; }

/* Nonzero when injection fails this allocation. */
static int inject(void)
{
    if (!tracking())
        return 0;
    if (!S.env_read) {
        S.env_read = 1;
        const char *v = getenv("FUSEGEN_FAIL_ALLOC");
        if (v && *v && !S.fail_at) {
            S.fail_at = strtol(v, NULL, 10);
            S.counted = 0;
        }
    }
    if (++S.counted != S.fail_at || S.fail_at <= 0)
        return 0;
    S.fail_at = 0;
    S.fired = 1;
    return 1;
}

_Noreturn void fg_oom_raise(size_t n)
{
    if (tracking())
        longjmp(*S.jb, 1);
    fprintf(stderr, "fusegen: out of memory allocating %zu bytes\n", n);
    abort();
}

/* Tracks p, just allocated; on failure frees it and unwinds. */
static void *track(void *p, size_t n)
{
    if (tracking()) {
        if (set_reserve() != 0) {
            free(p);
            fg_oom_raise(n);
        }
        set_insert(p);
    }
    return p;
}

/* ---- util.h's allocation ---------------------------------------------------- */

void *fg_xmalloc(size_t n)
{
    if (inject())
        fg_oom_raise(n);
    void *p = malloc(n ? n : 1);
    if (!p)
        fg_oom_raise(n);
    return track(p, n);
}

void *fg_xcalloc(size_t n, size_t size)
{
    if (inject())
        fg_oom_raise(n * size);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        fg_oom_raise(n * size);
    return track(p, n * size);
}

void *fg_xrealloc(void *p, size_t n)
{
    if (!p)
        return fg_xmalloc(n);
    int tracked = set_find((uintptr_t)p) >= 0;
    if (inject() || (tracked && set_reserve() != 0))
        fg_oom_raise(n);
    uintptr_t old = (uintptr_t)p;
    void *q = realloc(p, n ? n : 1);
    if (!q)
        fg_oom_raise(n);   /* p is intact, and still tracked when it was */
    if (tracked && (uintptr_t)q != old) {
        set_remove(old);
        set_insert(q);
    }
    return q;
}

void fg_free(void *p)
{
    if (p && S.live)
        set_remove((uintptr_t)p);
    free(p);
}

void *fg_realloc(void *p, size_t n)
{
    if (!p) {
        if (tracking() && set_reserve() != 0)
            return NULL;
        void *q = malloc(n);
        if (q && tracking())
            set_insert(q);
        return q;
    }
    if (n == 0) {   /* glibc's realloc(p, 0) frees p */
        fg_free(p);
        return NULL;
    }
    int tracked = set_find((uintptr_t)p) >= 0;
    if (tracked && set_reserve() != 0)
        return NULL;
    uintptr_t old = (uintptr_t)p;
    void *q = realloc(p, n);
    if (q && tracked && (uintptr_t)q != old) {
        set_remove(old);
        set_insert(q);
    }
    return q;
}

/* ---- oom.h ------------------------------------------------------------------ */

void *fg_oom_try_alloc(size_t n)
{
    void *p = NULL;
    if (!inject() && (!tracking() || set_reserve() == 0))
        p = malloc(n ? n : 1);
    if (!p) {
        S.lib_failed = 1;
        return NULL;
    }
    if (tracking())
        set_insert(p);
    return p;
}

int fg_oom_take_failure(void)
{
    int f = S.lib_failed;
    S.lib_failed = 0;
    return f;
}

int fg_oom_guarded(void) { return tracking(); }

int fg_oom_owns(const void *p) { return p && set_find((uintptr_t)p) >= 0; }

void fg_oom_hold(void) { S.hold++; }

void fg_oom_release(void) { S.hold--; }

void fg_oom_defer(void (*fn)(void *), void *arg)
{
    if (!S.active)
        return;
    if (S.ndefer == S.defer_cap) {
        int cap = S.defer_cap ? S.defer_cap * 2 : 16;
        deferred *v = realloc(S.defer, (size_t)cap * sizeof *v);
        if (!v) {   /* cannot be registered: released now, and unwinding */
            fn(arg);
            fg_oom_raise(0);
        }
        S.defer = v;
        S.defer_cap = cap;
    }
    S.defer[S.ndefer++] = (deferred){fn, arg};
}

void fg_oom_undefer(void *arg)
{
    for (int i = S.ndefer - 1; i >= 0; i--) {
        if (S.defer[i].arg == arg) {
            memmove(&S.defer[i], &S.defer[i + 1], (size_t)(S.ndefer - i - 1) * sizeof *S.defer);
            S.ndefer--;
            return;
        }
    }
}

/* fg_oom_defer_close's cleanup: arg is the descriptor. */
static void close_cb(void *arg) { close((int)(intptr_t)arg); }

void fg_oom_defer_close(int fd)
{
    if (fd >= 0)
        fg_oom_defer(close_cb, (void *)(intptr_t)fd);
}

int fg_oom_close(int fd)
{
    fg_oom_undefer((void *)(intptr_t)fd);
    return close(fd);
}

void fg_oom_adopt(void *p)
{
    if (p && tracking()) {
        if (set_reserve() != 0) {
            free(p);
            fg_oom_raise(0);
        }
        set_insert(p);
    }
}

void fg_oom_fail_at(long n)
{
    S.env_read = 1;
    S.fail_at = n > 0 ? n : 0;
    S.counted = 0;
    S.fired = 0;
}

long fg_oom_counted(void) { return S.counted; }

int fg_oom_fired(void)
{
    int f = S.fired;
    S.fired = 0;
    return f;
}

/* Leaves the guard: the thread is unguarded again. */
static void end_guard(void)
{
    set_clear();
    S.ndefer = 0;
    S.active = 0;
    S.hold = 0;
    S.jb = NULL;
    S.lib_failed = 0;
}

fg_status fg_oom_run(fg_oom_body_fn body, fg_oom_undo_fn undo, void *arg, int *unwound)
{
    *unwound = 0;
    if (S.active || S.hold)
        return body(arg);
    jmp_buf jb;
    S.active = 1;
    S.hold = 0;
    S.jb = &jb;
    S.ndefer = 0;
    S.lib_failed = 0;
    if (setjmp(jb)) {
        /* Unwound: nothing below may unwind again. */
        S.hold = 1;
        for (int i = S.ndefer - 1; i >= 0; i--)
            S.defer[i].fn(S.defer[i].arg);
        S.ndefer = 0;
        if (undo)
            undo(arg);
        for (size_t i = 0; i < S.cap; i++)
            if (S.set[i] && S.set[i] != TOMB)
                free(S.set[i]);
        end_guard();
        *unwound = 1;
        return FG_ERR_NOMEM;
    }
    fg_status st = body(arg);
    end_guard();
    return st;
}
