/*
 * hook_sandbox.c -- the Lua 5.4 state that runs rule hooks, and the fences
 * around it:
 *
 *   memory        every allocation goes through sb_alloc, which refuses to grow
 *                 the state past its cap while a hook runs (Lua then raises
 *                 "not enough memory");
 *   steps         a count hook every 1000 VM instructions charges the budget
 *                 of the running call; the library functions (hook_lib.c)
 *                 charge the work they do inside one C call, and the
 *                 allocator charges what it hands out, so no single
 *                 instruction can run on unpaid;
 *   wall clock    the same count hook, the charges and large allocations
 *                 check the call's deadline; once a call has made a large
 *                 allocation (so that one instruction, such as comparing or
 *                 concatenating big strings, may take long) the count hook
 *                 runs every 16 instructions;
 *   globals       each hook file gets its own environment holding copies of
 *                 the safe base functions and of the string, table, math and
 *                 utf8 libraries; io, os, package, debug, load and friends do
 *                 not exist there.
 *
 * Stopping is sticky: once a call is over budget (or out of memory, or past
 * its deadline) every further count hook raises again, every instruction,
 * every charge raises, every allocation fails, and the sandbox's own
 * pcall/xpcall re-raise instead of catching, so a hook cannot swallow the
 * stop.  Nothing here reads the environment: the budgets come from the
 * caller (fg_sandbox_new).
 */
#include "hook_sandbox.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "util.h"

#define DEFAULT_STEPS 10000000LL
#define DEFAULT_MEMORY ((size_t)64 << 20)
#define DEFAULT_TIMEOUT_MS 2000
#define STEP_CHUNK 1000
/* Count-hook period once a call holds large blocks. */
#define SMALL_CHUNK 16
/* An allocation this large switches the count hook to SMALL_CHUNK and
 * checks the clock. */
#define BIG_ALLOC ((size_t)256 << 10)
/* A state holding this much besides a call's arguments may hold big strings
 * (one comparison of two of them is one instruction): such calls start with
 * the short count-hook period. */
#define BIG_STATE ((size_t)8 << 20)
/* Allocated bytes per charged step. */
#define ALLOC_BYTES_PER_STEP 64
/* Room the message handler may use beyond the cap to build a traceback. */
#define HANDLER_SLACK ((size_t)1 << 20)
#define SRC_MAX 4096

struct fg_sandbox {
    lua_State *L;
    /* memory */
    size_t used;           /* bytes the state holds */
    size_t limit;          /* the cap */
    size_t allowed;        /* cap of the running call: limit + its argument bytes */
    int enforce;           /* nonzero while hook code (or argument building) may allocate */
    int in_handler;        /* the message handler is building a report */
    /* steps and time */
    long long step_limit;
    long long steps;       /* charged to the running call */
    long long since_clock; /* steps charged since the clock was last read */
    size_t alloc_bytes;    /* allocated bytes not yet charged as steps */
    int chunk;             /* normal count-hook period */
    int chunk_now;         /* the period in force */
    int timeout_ms;
    long long deadline_ns; /* CLOCK_MONOTONIC */
    int in_call;
    int over_steps;        /* sticky stop flags of the running call */
    int over_mem;
    int over_time;
    /* what the message handler and the allocator saw */
    char *err_msg;
    char *err_tb;
    char frame_src[SRC_MAX];
    int frame_line;
    char oom_src[SRC_MAX];  /* where an allocation failed (memory, steps or time) */
    int oom_line;
    /* registry references */
    int safe_ref;          /* template table: global name -> value */
    int stop_ref;          /* the error value raised when a call is stopped */
};

static fg_sandbox *sandbox_of(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int stopped(const fg_sandbox *sb) { return sb->over_steps || sb->over_mem || sb->over_time; }

/* Walks the stack from level up; copies the first frame of a hook file (a
 * chunk named "@path") with a known line into src/line.  Reads only, never
 * allocates, so it is safe inside the allocator. */
static int find_hook_frame(lua_State *L, int level, char *src, int *line)
{
    lua_Debug ar;
    for (; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar))
            continue;
        if (ar.currentline > 0 && ar.source && ar.source[0] == '@') {
            snprintf(src, SRC_MAX, "%s", ar.source + 1);
            *line = ar.currentline;
            return 1;
        }
    }
    return 0;
}

static void count_hook(lua_State *L, lua_Debug *ar);

/* Adds n steps to the running call and reads the clock when enough have
 * accumulated (or when force is set); sets the stop flags.  Returns nonzero
 * when the call is stopped. */
static int add_steps(fg_sandbox *sb, long long n, int force)
{
    if (stopped(sb))
        return 1;
    sb->steps = n > LLONG_MAX - sb->steps ? LLONG_MAX : sb->steps + n;
    sb->since_clock = n > LLONG_MAX - sb->since_clock ? LLONG_MAX : sb->since_clock + n;
    if (sb->steps > sb->step_limit) {
        sb->over_steps = 1;
    } else if (force || sb->since_clock >= STEP_CHUNK) {
        sb->since_clock = 0;
        if (now_ns() >= sb->deadline_ns)
            sb->over_time = 1;
    }
    return stopped(sb);
}

/* Charges an allocation of grow bytes to the running call.  Returns 0 when
 * the call is (now) stopped and the allocation must fail. */
static int charge_alloc(fg_sandbox *sb, size_t grow)
{
    if (stopped(sb))
        return 0;
    sb->alloc_bytes += grow;
    long long n = (long long)(sb->alloc_bytes / ALLOC_BYTES_PER_STEP);
    sb->alloc_bytes %= ALLOC_BYTES_PER_STEP;
    if (add_steps(sb, n, grow >= BIG_ALLOC))
        return 0;
    if (grow >= BIG_ALLOC && sb->chunk_now > SMALL_CHUNK && sb->chunk > SMALL_CHUNK) {
        /* lua_sethook is safe anywhere, the allocator included */
        sb->chunk_now = SMALL_CHUNK;
        lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, SMALL_CHUNK);
    }
    return 1;
}

/* lua_Alloc enforcing the cap, and charging a running call for what it
 * allocates.  Outside hook calls and argument building (state set-up)
 * allocation is unlimited: those allocations are fusegen's own. */
static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    fg_sandbox *sb = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        sb->used -= old;
        return NULL;
    }
    if (sb->enforce && nsize > old) {
        size_t grow = nsize - old;
        size_t cap = sb->allowed + (sb->in_handler ? HANDLER_SLACK : 0);
        int ok = sb->in_call && !sb->in_handler ? charge_alloc(sb, grow) : 1;
        if (ok && (sb->used > cap || grow > cap - sb->used))
            ok = 0;
        if (!ok) {
            /* Lua retries after an emergency collection, so this is not yet
             * an error; remember where it happened in case it becomes one. */
            if (sb->in_call && sb->L && !sb->in_handler)
                find_hook_frame(sb->L, 0, sb->oom_src, &sb->oom_line);
            return NULL;
        }
    }
    void *p = (realloc)(ptr, nsize);   /* Lua's own memory: never tracked (oom.h) */
    if (!p)
        return NULL;
    sb->used = sb->used - old + nsize;
    return p;
}

static int sb_panic(lua_State *L)
{
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "fusegen: unprotected Lua error: %s\n", msg ? msg : "?");
    abort();
}

/* Raises the stop value; the caller has set a sticky flag.  From now on the
 * count hook fires at every instruction, so that code running between two
 * protected calls cannot slip past. */
static int raise_stop(lua_State *L, fg_sandbox *sb)
{
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, sb->stop_ref);
    return lua_error(L);
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    fg_sandbox *sb = sandbox_of(L);
    if (!stopped(sb)) {
        if (!sb->in_call || !add_steps(sb, sb->chunk_now, 1))
            return;
    }
    raise_stop(L, sb);
}

void fg_sandbox_charge(lua_State *L, unsigned long long steps)
{
    fg_sandbox *sb = sandbox_of(L);
    if (!sb->in_call || sb->in_handler)
        return;
    if (add_steps(sb, steps > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)steps, 0))
        raise_stop(L, sb);
}

static size_t room(const fg_sandbox *sb)
{
    return sb->used < sb->allowed ? sb->allowed - sb->used : 0;
}

void fg_sandbox_need_memory(lua_State *L, size_t need)
{
    fg_sandbox *sb = sandbox_of(L);
    if (!sb->enforce || sb->in_handler || room(sb) >= need)
        return;
    lua_gc(L, LUA_GCCOLLECT);   /* garbage does not count */
    if (room(sb) >= need)
        return;
    if (!stopped(sb) && sb->in_call)
        find_hook_frame(L, 0, sb->oom_src, &sb->oom_line);
    sb->over_mem = 1;
    raise_stop(L, sb);
}

/* Common tail of the sandbox pcall/xpcall: the function's results (or the
 * error value) lie above index base. */
static int finish_pcall(lua_State *L, int status, int base)
{
    fg_sandbox *sb = sandbox_of(L);
    if (status == LUA_ERRMEM)
        sb->over_mem = 1;
    if (status != LUA_OK && stopped(sb))
        return lua_error(L); /* a stop is not the hook's to catch */
    if (status != LUA_OK) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, base + 1);
    return lua_gettop(L) - base;
}

static int sb_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    return finish_pcall(L, st, 0);
}

/* The message handler of the sandbox xpcall: runs the hook's handler
 * (upvalue 1) in a protected call of its own.  Lua calls a message handler
 * with hooks disabled when the error was raised by the count hook, and calls
 * it again for an error inside it; both would let a looping handler run
 * forever.  A stopped call skips the hook's handler altogether. */
static int sb_xpcall_msgh(lua_State *L)
{
    fg_sandbox *sb = sandbox_of(L);
    if (stopped(sb))
        return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_pcall(L, lua_gettop(L) - 1, 1, 0);
    return 1;
}

static int sb_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    /* f, handler, args -> msgh(handler), f, args */
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, sb_xpcall_msgh, 1);
    lua_replace(L, 2);
    lua_pushvalue(L, 1);
    lua_copy(L, 2, 1);
    lua_replace(L, 2);
    int st = lua_pcall(L, n - 2, LUA_MULTRET, 1);
    return finish_pcall(L, st, 1);
}

/* setmetatable without finalizers: Lua runs __gc with hooks disabled, so a
 * finalizer would escape the instruction budget.  (A __gc field added to a
 * metatable after setmetatable never makes its object finalizable.) */
static int sb_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in hooks");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* print writes to stderr: stdout may carry generated source.  What it
 * writes is charged like the bytes a library function reads. */
static int sb_print(lua_State *L)
{
    int n = lua_gettop(L);
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, i, &len);
        fg_sandbox_charge(L, 1 + len / 16);
        if (i > 1)
            fputc('\t', stderr);
        fwrite(s, 1, len, stderr);
        lua_pop(L, 1);
    }
    fputc('\n', stderr);
    fflush(stderr);
    return 0;
}

/* Message handler of every call: keeps the message, the traceback and the
 * innermost hook frame before the stack unwinds. */
static int sb_msgh(lua_State *L)
{
    fg_sandbox *sb = sandbox_of(L);
    sb->in_handler = 1;
    free(sb->err_msg);
    free(sb->err_tb);
    sb->err_msg = sb->err_tb = NULL;
    if (lua_type(L, 1) == LUA_TSTRING) {
        sb->err_msg = fg_xstrdup(lua_tostring(L, 1));
    } else {
        char buf[96];
        snprintf(buf, sizeof buf, "(error object is a %s value)", luaL_typename(L, 1));
        sb->err_msg = fg_xstrdup(buf);
    }
    sb->frame_src[0] = 0;
    sb->frame_line = 0;
    find_hook_frame(L, 1, sb->frame_src, &sb->frame_line);
    luaL_traceback(L, L, NULL, 1);
    sb->err_tb = fg_xstrdup(lua_tostring(L, -1));
    lua_settop(L, 1);
    sb->in_handler = 0;
    return 1;
}

static const char *const safe_base[] = {
    "assert", "error", "ipairs", "next", "pairs", "rawequal", "rawget", "rawlen", "rawset",
    "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type", "_VERSION",
    "string", "table", "math", "utf8",
};

/* Fills the template every environment is copied from. */
static void build_safe_table(lua_State *L, fg_sandbox *sb)
{
    lua_newtable(L);
    lua_pushglobaltable(L);
    for (size_t i = 0; i < FG_COUNTOF(safe_base); i++) {
        lua_getfield(L, -1, safe_base[i]);
        lua_setfield(L, -3, safe_base[i]);
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, sb_pcall);
    lua_setfield(L, -2, "pcall");
    lua_pushcfunction(L, sb_xpcall);
    lua_setfield(L, -2, "xpcall");
    lua_pushcfunction(L, sb_setmetatable);
    lua_setfield(L, -2, "setmetatable");
    lua_pushcfunction(L, sb_print);
    lua_setfield(L, -2, "print");
    sb->safe_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

fg_sandbox *fg_sandbox_new(const fg_sandbox_limits *lim)
{
    fg_sandbox *sb = fg_xcalloc(1, sizeof *sb);
    sb->step_limit = lim && lim->steps > 0 ? lim->steps : DEFAULT_STEPS;
    sb->limit = lim && lim->memory > 0 ? lim->memory : DEFAULT_MEMORY;
    sb->allowed = sb->limit;
    sb->timeout_ms = lim && lim->timeout_ms > 0 ? lim->timeout_ms : DEFAULT_TIMEOUT_MS;
    sb->chunk = sb->step_limit < STEP_CHUNK ? (int)sb->step_limit : STEP_CHUNK;
    sb->chunk_now = sb->chunk;
    lua_State *L = lua_newstate(sb_alloc, sb);
    if (!L) {
        fprintf(stderr, "fusegen: out of memory creating the Lua state\n");
        abort();
    }
    sb->L = L;
    lua_atpanic(L, sb_panic);

    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},        {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    for (size_t i = 0; i < FG_COUNTOF(libs); i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    /* Hooks must be deterministic: fixed random seed. */
    lua_getglobal(L, "math");
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    /* Strings share one metatable whose __index is the real string library:
     * hide it so that one file cannot change string methods for another. */
    lua_pushliteral(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    /* Bounded library functions, in the library tables themselves (the
     * string metatable reaches them too), before environments copy them. */
    fg_sandbox_bound_libs(L);

    build_safe_table(L, sb);
    lua_pushliteral(L, "hook stopped: budget exceeded");
    sb->stop_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_sethook(L, count_hook, LUA_MASKCOUNT, sb->chunk);
    return sb;
}

void fg_sandbox_free(fg_sandbox *sb)
{
    if (!sb)
        return;
    /* Finalizers run by lua_close stop at their first count hook. */
    sb->over_steps = 1;
    sb->enforce = 0;
    lua_close(sb->L);
    free(sb->err_msg);
    free(sb->err_tb);
    free(sb);
}

lua_State *fg_sandbox_state(fg_sandbox *sb) { return sb->L; }
long long fg_sandbox_step_limit(const fg_sandbox *sb) { return sb->step_limit; }
size_t fg_sandbox_memory_limit(const fg_sandbox *sb) { return sb->limit; }
int fg_sandbox_timeout_ms(const fg_sandbox *sb) { return sb->timeout_ms; }
size_t fg_sandbox_memory_used(const fg_sandbox *sb) { return sb->used; }

void fg_sandbox_push_env(fg_sandbox *sb)
{
    lua_State *L = sb->L;
    lua_newtable(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, sb->safe_ref);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        /* env, safe, key, value */
        if (lua_type(L, -1) == LUA_TTABLE) {
            /* a library: the environment gets its own shallow copy */
            lua_newtable(L);
            lua_pushnil(L);
            while (lua_next(L, -3)) {
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_rawset(L, -4);
            }
            lua_remove(L, -2);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -5);
    }
    lua_pop(L, 1);
}

void fg_sandbox_failure_clear(fg_sandbox_failure *f)
{
    free(f->message);
    free(f->traceback);
    free(f->src);
    memset(f, 0, sizeof *f);
}

/* Starts charging a call: fresh budget and deadline, cap raised by its
 * arguments' bytes. */
static void call_begin(fg_sandbox *sb, size_t arg_bytes)
{
    sb->steps = 0;
    sb->since_clock = 0;
    sb->alloc_bytes = 0;
    sb->over_steps = sb->over_mem = sb->over_time = 0;
    sb->allowed = sb->limit + arg_bytes < sb->limit ? (size_t)-1 : sb->limit + arg_bytes;
    sb->deadline_ns = now_ns() + (long long)sb->timeout_ms * 1000000LL;
    sb->enforce = 1;
    sb->in_call = 1;
    sb->in_handler = 0;
    sb->oom_src[0] = 0;
    sb->oom_line = 0;
    sb->frame_src[0] = 0;
    sb->frame_line = 0;
    free(sb->err_msg);
    free(sb->err_tb);
    sb->err_msg = sb->err_tb = NULL;
    sb->chunk_now = sb->chunk;
    if (sb->used > arg_bytes && sb->used - arg_bytes > BIG_STATE && sb->chunk > SMALL_CHUNK)
        sb->chunk_now = SMALL_CHUNK;
    lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, sb->chunk_now);
}

static void call_end(fg_sandbox *sb)
{
    sb->enforce = 0;
    sb->in_call = 0;
    sb->in_handler = 0;
    sb->over_steps = sb->over_mem = sb->over_time = 0;
    sb->steps = 0;
    sb->allowed = sb->limit;
    sb->chunk_now = sb->chunk;
    lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, sb->chunk);
}

/* Which budget a failed load or call ran into.  A time or step stop can
 * surface as a memory error (the allocator refuses to hand out memory once a
 * call is stopped), so those come first. */
static fg_sandbox_fail failure_kind(const fg_sandbox *sb, int st)
{
    if (sb->over_time)
        return FG_SBF_TIME;
    if (sb->over_steps)
        return FG_SBF_STEPS;
    if (sb->over_mem || st == LUA_ERRMEM)
        return FG_SBF_MEMORY;
    return FG_SBF_ERROR;
}

int fg_sandbox_load(fg_sandbox *sb, const char *text, size_t len, const char *chunkname, fg_sandbox_failure *f)
{
    lua_State *L = sb->L;
    memset(f, 0, sizeof *f);
    call_begin(sb, 0);
    int st = luaL_loadbufferx(L, text, len, chunkname, "t");
    /* The compiler runs no count hook: look at the clock once more. */
    if (st == LUA_OK && !stopped(sb) && now_ns() >= sb->deadline_ns)
        sb->over_time = 1;
    fg_sandbox_fail kind = failure_kind(sb, st);
    if (kind == FG_SBF_NONE || (st == LUA_OK && kind == FG_SBF_ERROR)) {
        call_end(sb);
        return 0;
    }
    f->kind = kind;
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        f->message = fg_xstrdup(msg ? msg : "cannot load chunk");
    } else {
        f->message = fg_xstrdup("stopped");
    }
    lua_pop(L, 1);   /* the error message, or the compiled function */
    sb->over_steps = sb->over_mem = sb->over_time = 0;
    sb->allowed = sb->limit;
    lua_gc(L, LUA_GCCOLLECT);
    call_end(sb);
    return -1;
}

int fg_sandbox_call(fg_sandbox *sb, int nargs, int nres, size_t arg_bytes, fg_sandbox_failure *f)
{
    lua_State *L = sb->L;
    memset(f, 0, sizeof *f);
    int fn = lua_gettop(L) - nargs;
    lua_pushcfunction(L, sb_msgh);
    lua_insert(L, fn);
    call_begin(sb, arg_bytes);
    int st = lua_pcall(L, nargs, nres, fn);
    fg_sandbox_fail kind = failure_kind(sb, st);
    if (st == LUA_OK && kind == FG_SBF_ERROR)
        kind = FG_SBF_NONE;
    if (kind == FG_SBF_NONE) {
        call_end(sb);
        lua_remove(L, fn);
        return 0;
    }
    f->kind = kind;
    if (sb->err_msg) {
        f->message = sb->err_msg;
        sb->err_msg = NULL;
    } else if (st != LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
        f->message = fg_xstrdup(lua_tostring(L, -1));
    } else {
        f->message = fg_xstrdup("error");
    }
    f->traceback = sb->err_tb;
    sb->err_tb = NULL;
    /* A memory failure is located where the allocation failed; a stop raised
     * through the message handler where it was raised; one that surfaced as
     * a failed allocation (no handler runs then) where that was. */
    if (f->kind == FG_SBF_MEMORY && sb->oom_src[0]) {
        f->src = fg_xstrdup(sb->oom_src);
        f->line = sb->oom_line;
    } else if (sb->frame_src[0]) {
        f->src = fg_xstrdup(sb->frame_src);
        f->line = sb->frame_line;
    } else if (sb->oom_src[0]) {
        f->src = fg_xstrdup(sb->oom_src);
        f->line = sb->oom_line;
    }
    /* Drop everything the call left and reclaim its garbage while the fences
     * are still up (finalizers may run). */
    lua_settop(L, fn - 1);
    sb->over_steps = sb->over_mem = sb->over_time = 0;
    sb->steps = 0;
    sb->allowed = sb->limit;
    lua_gc(L, LUA_GCCOLLECT);
    call_end(sb);
    return -1;
}

int fg_sandbox_push_args(fg_sandbox *sb, lua_CFunction push, void *ud, int nvalues, size_t *bytes,
                         fg_sandbox_failure *f)
{
    lua_State *L = sb->L;
    memset(f, 0, sizeof *f);
    *bytes = 0;
    size_t before = sb->used;
    sb->allowed = before + sb->limit < before ? (size_t)-1 : before + sb->limit;
    sb->over_mem = 0;
    sb->enforce = 1;
    sb->in_call = 0;
    lua_pushcfunction(L, push);
    lua_pushlightuserdata(L, ud);
    int st = lua_pcall(L, 1, nvalues, 0);
    sb->enforce = 0;
    sb->allowed = sb->limit;
    if (st == LUA_OK) {
        *bytes = sb->used > before ? sb->used - before : 0;
        return 0;
    }
    f->kind = st == LUA_ERRMEM ? FG_SBF_ARGS : FG_SBF_ERROR;
    const char *msg = lua_tostring(L, -1);
    f->message = fg_xstrdup(msg ? msg : "error");
    lua_pop(L, 1);
    lua_gc(L, LUA_GCCOLLECT);
    return -1;
}
