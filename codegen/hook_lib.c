/*
 * hook_lib.c -- the library functions hooks may call, bounded.  The count
 * hook that charges a hook's step budget only runs between VM instructions;
 * one call of a C library function is one instruction, however long it runs
 * (string.rep("", math.maxinteger) loops 2^63 times, table.move and
 * table.insert walk whatever range their arguments name, a backtracking
 * pattern on a few hundred bytes takes longer than the universe).  So here:
 *
 *   - string.find, match, gmatch and gsub are reimplemented over a pattern
 *     matcher of our own (the Lua 5.4 pattern language: classes, sets,
 *     quantifiers, captures, %b, %f, back-references, anchors) that charges
 *     every step it takes; plain finds use a linear-time search;
 *   - string.rep builds its result by doubling copies and checks its size
 *     against the memory cap before allocating anything;
 *   - every other C function of the string, table, utf8 and math libraries
 *     and the base functions hooks may use is wrapped: before it runs it is
 *     charged for its arguments and for the work they ask for (the range of
 *     table.move, concat and unpack, the elements table.insert and remove
 *     shift, n log n for table.sort, the bytes of format strings and of the
 *     strings upper/lower/reverse/utf8 read), afterwards for its results.
 *
 * A charge that exceeds the budget (or finds the deadline passed) stops the
 * call through hook_sandbox.c, exactly like the count hook.  Error messages
 * follow Lua's.
 */
#define _GNU_SOURCE   /* memmem */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "hook_sandbox.h"
#include "util.h"

/* Bytes of string a library function reads or copies per charged step
 * (memcpy-like work: about as long as one VM instruction). */
#define BYTES_PER_STEP 64
/* Subject characters the matcher tests one by one per charged step. */
#define CHARS_PER_STEP 4
/* Matcher steps collected before they are charged. */
#define MATCH_FLUSH 1024
#define MATCH_MAX_DEPTH 200
#define MATCH_MAX_CAPTURES 32
#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)
/* Lua refuses to return more values than this from one call. */
#define MAX_RESULTS 1000000

/* ---- the pattern matcher ------------------------------------------------- */

typedef struct matcher {
    lua_State *L;
    const char *src;       /* subject */
    const char *src_end;
    const char *pat_end;
    int level;             /* captures opened */
    int depth;             /* recursion left */
    unsigned long long work;
    struct {
        const char *at;
        ptrdiff_t len;     /* or CAP_UNFINISHED, CAP_POSITION */
    } cap[MATCH_MAX_CAPTURES];
} matcher;

static void m_init(matcher *m, lua_State *L, const char *s, size_t ls, const char *p, size_t lp)
{
    m->L = L;
    m->src = s;
    m->src_end = s + ls;
    m->pat_end = p + lp;
    m->work = 0;
}

static void m_reset(matcher *m)
{
    m->level = 0;
    m->depth = MATCH_MAX_DEPTH;
}

/* Records n steps; charges them in batches. */
static void m_tick(matcher *m, unsigned long long n)
{
    m->work += n;
    if (m->work >= MATCH_FLUSH) {
        unsigned long long w = m->work;
        m->work = 0;
        fg_sandbox_charge(m->L, w);
    }
}

static void m_flush(matcher *m)
{
    unsigned long long w = m->work;
    m->work = 0;
    if (w)
        fg_sandbox_charge(m->L, w);
}

/* One past the single-character item at p (a character, %x, or a [set]). */
static const char *item_end(matcher *m, const char *p)
{
    char c = *p++;
    if (c == '%') {
        if (p >= m->pat_end)
            luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c == '[') {
        if (*p == '^')
            p++;
        do {   /* the first character of a set may be ']' */
            if (p >= m->pat_end)
                luaL_error(m->L, "malformed pattern (missing ']')");
            c = *p++;
            if (c == '%' && p < m->pat_end)
                p++;
        } while (*p != ']');
        return p + 1;
    }
    return p;
}

/* Does character c belong to class %cl? */
static int class_has(int c, int cl)
{
    int r;
    switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break;   /* kept by Lua 5.4 for compatibility */
    default: return cl == c;
    }
    r = r != 0;
    return isupper(cl) ? !r : r;
}

/* Does c belong to the set [ ... ] from p (at '[') to last (at its ']')? */
static int set_has(int c, const char *p, const char *last)
{
    int in = 1;
    p++;
    if (*p == '^') {
        in = 0;
        p++;
    }
    for (; p < last; p++) {
        if (*p == '%') {
            p++;
            if (class_has(c, (unsigned char)*p))
                return in;
        } else if (p[1] == '-' && p + 2 < last) {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
                return in;
            p += 2;
        } else if ((unsigned char)*p == c) {
            return in;
        }
    }
    return !in;
}

/* Does the subject character at s match the item p..ep? */
static int item_has(const matcher *m, const char *s, const char *p, const char *ep)
{
    if (s >= m->src_end)
        return 0;
    int c = (unsigned char)*s;
    switch (*p) {
    case '.': return 1;
    case '%': return class_has(c, (unsigned char)p[1]);
    case '[': return set_has(c, p, ep - 1);
    default: return (unsigned char)*p == c;
    }
}

static const char *do_match(matcher *m, const char *s, const char *p);

/* Greedy: as many as possible, then give back one at a time. */
static const char *expand_max(matcher *m, const char *s, const char *p, const char *ep)
{
    ptrdiff_t i = 0;
    while (item_has(m, s + i, p, ep))
        i++;
    m_tick(m, (unsigned long long)i / CHARS_PER_STEP + 1);
    for (; i >= 0; i--) {
        const char *r = do_match(m, s + i, ep + 1);
        if (r)
            return r;
    }
    return NULL;
}

/* Lazy: as few as possible, one more at a time. */
static const char *expand_min(matcher *m, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = do_match(m, s, ep + 1);
        if (r)
            return r;
        if (!item_has(m, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t what)
{
    if (m->level >= MATCH_MAX_CAPTURES)
        luaL_error(m->L, "too many captures");
    m->cap[m->level].at = s;
    m->cap[m->level].len = what;
    m->level++;
    const char *r = do_match(m, s, p);
    if (!r)
        m->level--;
    return r;
}

static const char *close_capture(matcher *m, const char *s, const char *p)
{
    int l = m->level - 1;
    while (l >= 0 && m->cap[l].len != CAP_UNFINISHED)
        l--;
    if (l < 0)
        luaL_error(m->L, "invalid pattern capture");
    m->cap[l].len = s - m->cap[l].at;
    const char *r = do_match(m, s, p);
    if (!r)
        m->cap[l].len = CAP_UNFINISHED;
    return r;
}

/* %bxy at p (pointing at x). */
static const char *balanced(matcher *m, const char *s, const char *p)
{
    if (p >= m->pat_end - 1)
        luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= m->src_end || *s != p[0])
        return NULL;
    const char *start = s;
    int open = p[0], close = p[1], depth = 1;
    for (s++; s < m->src_end; s++) {
        if (*s == close) {
            if (--depth == 0)
                break;
        } else if (*s == open) {
            depth++;
        }
    }
    m_tick(m, (unsigned long long)(s - start) / CHARS_PER_STEP + 1);
    return s < m->src_end ? s + 1 : NULL;
}

/* %1 .. %9 */
static const char *backref(matcher *m, const char *s, int digit)
{
    int l = digit - '1';
    if (l < 0 || l >= m->level || m->cap[l].len == CAP_UNFINISHED)
        luaL_error(m->L, "invalid capture index %%%d", l + 1);
    ptrdiff_t len = m->cap[l].len;
    if (len < 0 || m->src_end - s < len)
        return NULL;   /* a position capture matches nothing */
    m_tick(m, (unsigned long long)len / BYTES_PER_STEP + 1);
    return memcmp(m->cap[l].at, s, (size_t)len) == 0 ? s + len : NULL;
}

/* Matches pattern p (to pat_end) at subject position s; returns the end of
 * the match or NULL. */
static const char *do_match(matcher *m, const char *s, const char *p)
{
    if (m->depth-- == 0)
        luaL_error(m->L, "pattern too complex");
    for (;;) {
        m_tick(m, 1);
        if (p == m->pat_end)
            break;
        if (*p == '(') {
            s = p[1] == ')' ? open_capture(m, s, p + 2, CAP_POSITION) : open_capture(m, s, p + 1, CAP_UNFINISHED);
            break;
        }
        if (*p == ')') {
            s = close_capture(m, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == m->pat_end) {
            s = s == m->src_end ? s : NULL;
            break;
        }
        if (*p == '%' && p[1] == 'b') {
            s = balanced(m, s, p + 2);
            if (!s)
                break;
            p += 4;
            continue;
        }
        if (*p == '%' && p[1] == 'f') {
            p += 2;
            if (*p != '[')
                luaL_error(m->L, "missing '[' after '%%f' in pattern");
            const char *ep = item_end(m, p);
            int before = s == m->src ? 0 : (unsigned char)s[-1];
            int here = s < m->src_end ? (unsigned char)*s : 0;
            if (!set_has(before, p, ep - 1) && set_has(here, p, ep - 1)) {
                p = ep;
                continue;
            }
            s = NULL;
            break;
        }
        if (*p == '%' && isdigit((unsigned char)p[1])) {
            s = backref(m, s, p[1]);
            if (!s)
                break;
            p += 2;
            continue;
        }
        /* a single-character item, perhaps with a quantifier */
        const char *ep = item_end(m, p);
        if (!item_has(m, s, p, ep)) {
            if (*ep == '*' || *ep == '?' || *ep == '-') {
                p = ep + 1;   /* zero repetitions */
                continue;
            }
            s = NULL;
            break;
        }
        if (*ep == '?') {
            const char *r = do_match(m, s + 1, ep + 1);
            if (r) {
                s = r;
                break;
            }
            p = ep + 1;
            continue;
        }
        if (*ep == '+') {
            s = expand_max(m, s + 1, p, ep);
            break;
        }
        if (*ep == '*') {
            s = expand_max(m, s, p, ep);
            break;
        }
        if (*ep == '-') {
            s = expand_min(m, s, p, ep);
            break;
        }
        s++;
        p = ep;
    }
    m->depth++;
    return s;
}

/* Pushes capture i of the match s..e (the whole match when the pattern has
 * no captures and i is 0). */
static void push_capture(matcher *m, int i, const char *s, const char *e)
{
    if (i >= m->level) {
        if (i != 0)
            luaL_error(m->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(m->L, s, (size_t)(e - s));
        return;
    }
    ptrdiff_t len = m->cap[i].len;
    if (len == CAP_UNFINISHED)
        luaL_error(m->L, "unfinished capture");
    if (len == CAP_POSITION)
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->src) + 1);
    else
        lua_pushlstring(m->L, m->cap[i].at, (size_t)len);
}

/* Pushes every capture (or the whole match when there is none and s is
 * given); returns how many. */
static int push_captures(matcher *m, const char *s, const char *e)
{
    int n = m->level == 0 && s ? 1 : m->level;
    luaL_checkstack(m->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

/* ---- find, match, gmatch, gsub -------------------------------------------- */

/* A 1-based start position, Lua's way: negative counts from the end, 0 and
 * anything before the start is 1.  Returns it 0-based. */
static size_t start_offset(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos - 1;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 0;
    return len + (size_t)pos;
}

static int has_specials(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (strchr("^$*+?.([%-", p[i]) && p[i])
            return 1;
    return 0;
}

static int find_or_match(lua_State *L, int find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
        /* glibc's memmem is linear in the subject */
        fg_sandbox_charge(L, 1 + (ls - init + lp) / BYTES_PER_STEP);
        const char *hit = lp == 0 ? s + init : lp > ls - init ? NULL : memmem(s + init, ls - init, p, lp);
        if (hit) {
            lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
            lua_pushinteger(L, (lua_Integer)(hit - s + (ptrdiff_t)lp));
            return 2;
        }
        luaL_pushfail(L);
        return 1;
    }
    matcher m;
    int anchor = lp > 0 && *p == '^';
    m_init(&m, L, s, ls, p, lp);
    if (anchor)
        p++;
    const char *s1 = s + init;
    do {
        m_reset(&m);
        const char *e = do_match(&m, s1, p);
        if (e) {
            m_flush(&m);
            if (find) {
                lua_pushinteger(L, (lua_Integer)(s1 - s) + 1);
                lua_pushinteger(L, (lua_Integer)(e - s));
                return push_captures(&m, NULL, NULL) + 2;
            }
            return push_captures(&m, s1, e);
        }
    } while (s1++ < m.src_end && !anchor);
    m_flush(&m);
    luaL_pushfail(L);
    return 1;
}

static int lib_find(lua_State *L) { return find_or_match(L, 1); }
static int lib_match(lua_State *L) { return find_or_match(L, 0); }

/* gmatch's iteration state (upvalue 3; upvalues 1 and 2 keep the subject and
 * the pattern alive). */
typedef struct gmatch_state {
    size_t next;       /* where the next search starts */
    size_t last_end;   /* end of the last match */
    int has_last;
} gmatch_state;

static int gmatch_step(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
    gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
    matcher m;
    m_init(&m, L, s, ls, p, lp);
    for (size_t at = g->next; at <= ls; at++) {
        m_reset(&m);
        const char *e = do_match(&m, s + at, p);
        /* an empty match right where the last one ended does not count */
        if (e && !(g->has_last && (size_t)(e - s) == g->last_end)) {
            g->next = g->last_end = (size_t)(e - s);
            g->has_last = 1;
            m_flush(&m);
            return push_captures(&m, s + at, e);
        }
    }
    g->next = ls + 1;
    m_flush(&m);
    return 0;
}

static int lib_gmatch(lua_State *L)
{
    size_t ls;
    luaL_checklstring(L, 1, &ls);
    luaL_checkstring(L, 2);
    size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
    lua_settop(L, 2);
    gmatch_state *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->next = init > ls ? ls + 1 : init;
    g->last_end = 0;
    g->has_last = 0;
    lua_pushcclosure(L, gmatch_step, 3);
    return 1;
}

/* Appends the replacement string (argument 3) for the match s..e. */
static void add_replacement(matcher *m, luaL_Buffer *b, const char *s, const char *e)
{
    lua_State *L = m->L;
    size_t l;
    const char *r = lua_tolstring(L, 3, &l);
    fg_sandbox_charge(L, 1 + l / BYTES_PER_STEP);
    const char *pct;
    while ((pct = memchr(r, '%', l)) != NULL) {
        luaL_addlstring(b, r, (size_t)(pct - r));
        pct++;   /* the character after '%' (the terminating NUL at the end) */
        if (*pct == '%') {
            luaL_addchar(b, '%');
        } else if (*pct == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (isdigit((unsigned char)*pct)) {
            push_capture(m, *pct - '1', s, e);
            luaL_tolstring(L, -1, NULL);   /* a position capture is a number */
            lua_remove(L, -2);
            luaL_addvalue(b);
        } else {
            luaL_error(L, "invalid use of '%c' in replacement string", '%');
        }
        l -= (size_t)(pct + 1 - r);
        r = pct + 1;
    }
    luaL_addlstring(b, r, l);
}

/* Appends what replaces the match s..e: a string template, or the value a
 * table or function gives (false or nil keep the match). */
static void add_value(matcher *m, luaL_Buffer *b, const char *s, const char *e, int how)
{
    lua_State *L = m->L;
    if (how == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int n = push_captures(m, s, e);
        lua_call(L, n, 1);
    } else if (how == LUA_TTABLE) {
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    } else {
        add_replacement(m, b, s, e);
        return;
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
    } else if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    } else {
        luaL_addvalue(b);
    }
}

static int lib_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *src = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int how = lua_type(L, 3);
    lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    luaL_argexpected(L, how == LUA_TNUMBER || how == LUA_TSTRING || how == LUA_TFUNCTION || how == LUA_TTABLE, 3,
                     "string/function/table");
    int anchor = lp > 0 && *p == '^';
    matcher m;
    m_init(&m, L, src, ls, p, lp);
    if (anchor)
        p++;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *s = src, *last = NULL;
    lua_Integer n = 0;
    while (n < max_n) {
        m_reset(&m);
        const char *e = do_match(&m, s, p);
        if (e && e != last) {
            n++;
            add_value(&m, &b, s, e, how);
            s = last = e;
        } else if (s < m.src_end) {
            luaL_addchar(&b, *s++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    m_flush(&m);
    luaL_addlstring(&b, s, (size_t)(m.src_end - s));
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}

/* string.rep: the size is checked (Lua's limit, then the memory cap) before
 * anything is allocated, and the result is built by doubling copies, so the
 * time is linear in the result whatever the count. */
static int lib_rep(lua_State *L)
{
    size_t l, lsep;
    const char *s = luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    const char *sep = luaL_optlstring(L, 3, "", &lsep);
    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    if (l + lsep < l || l + lsep > (size_t)INT_MAX / (lua_Unsigned)n)
        return luaL_error(L, "resulting string too large");
    size_t total = (size_t)n * l + (size_t)(n - 1) * lsep;
    fg_sandbox_need_memory(L, 2 * total);   /* the buffer, then the string */
    fg_sandbox_charge(L, 1 + total / BYTES_PER_STEP);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, total);
    memcpy(out, s, l);
    size_t done = l;
    if (n > 1) {
        memcpy(out + l, sep, lsep);
        done += lsep;
    }
    /* out is a prefix of (s sep)(s sep)...; done is a whole number of periods */
    while (done < total) {
        size_t k = done < total - done ? done : total - done;
        memcpy(out + done, out, k);
        done += k;
    }
    luaL_pushresultsize(&b, total);
    return 1;
}

/* ---- charged wrappers ------------------------------------------------------ */

typedef enum cost {
    COST_CALL,     /* arguments and results only */
    COST_BYTES,    /* plus the bytes of its string arguments */
    COST_FORMAT,   /* plus a step per byte of argument 1 (a format) */
    COST_MOVE,     /* table.move: the range f..e, before */
    COST_CONCAT,   /* table.concat: the range i..j, after (it stops at a missing element) */
    COST_UNPACK,   /* table.unpack: the range i..j */
    COST_INSERT,   /* table.insert(t, pos, v): the elements it shifts, before */
    COST_REMOVE,   /* table.remove(t, pos): the elements it shifts, before */
    COST_SORT,     /* table.sort: n log n, after (it stops at a missing element) */
    COST_CODES,    /* utf8.codes: its iterator is wrapped as COST_CODES_STEP */
    COST_CODES_STEP, /* one step of that iterator: the continuation bytes it skips */
} cost;

static unsigned long long sat_add(unsigned long long a, unsigned long long b)
{
    return a > ULLONG_MAX - b ? ULLONG_MAX : a + b;
}

/* Elements in i..j (0 when empty). */
static unsigned long long range_len(lua_Integer i, lua_Integer j)
{
    if (j < i)
        return 0;
    lua_Unsigned d = (lua_Unsigned)j - (lua_Unsigned)i;
    return d == (lua_Unsigned)-1 ? ULLONG_MAX : (unsigned long long)d + 1;
}

/* Integer argument i, or def when absent; 0 (and nothing) when it is not an
 * integer: the function itself will complain. */
static int int_arg(lua_State *L, int i, lua_Integer def, lua_Integer *out)
{
    if (lua_isnoneornil(L, i)) {
        *out = def;
        return 1;
    }
    int ok = 0;
    *out = lua_tointegerx(L, i, &ok);
    return ok;
}

/* The length the table functions use (#t, with __len); only for tables. */
static int table_len(lua_State *L, lua_Integer *n)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return 0;
    *n = luaL_len(L, 1);
    return 1;
}

/* The work an argument-dependent function is about to do: charged before
 * the call for loops that run over missing elements without complaint,
 * after it (*after) for those that stop at the first missing element (their
 * work is bounded by what the table holds). */
static unsigned long long work_of(lua_State *L, cost kind, int nargs, unsigned long long *after)
{
    lua_Integer a, b, n, t;
    *after = 0;
    switch (kind) {
    case COST_MOVE:
        if (!int_arg(L, 2, 0, &a) || !int_arg(L, 3, 0, &b) || !int_arg(L, 4, 0, &t))
            return 0;
        /* table.move's own checks come first: what it refuses costs nothing */
        if (b < a || (a <= 0 && b >= LUA_MAXINTEGER + a) || t > LUA_MAXINTEGER - (b - a))
            return 0;
        return range_len(a, b);
    case COST_CONCAT:
        if (table_len(L, &n) && int_arg(L, 3, 1, &a) && int_arg(L, 4, n, &b))
            *after = range_len(a, b);
        return 0;
    case COST_UNPACK: {
        if (!table_len(L, &n) || !int_arg(L, 2, 1, &a) || !int_arg(L, 3, n, &b))
            return 0;
        unsigned long long k = range_len(a, b);
        return k <= MAX_RESULTS ? k : 0;   /* more is refused at once */
    }
    case COST_INSERT:
        if (nargs != 3 || !table_len(L, &n) || !int_arg(L, 2, 0, &a) || a < 1 || a > n)
            return 0;
        return range_len(a, n);
    case COST_REMOVE:
        if (nargs < 2 || !table_len(L, &n) || !int_arg(L, 2, n, &a) || a < 1 || a >= n)
            return 0;
        return range_len(a, n);
    case COST_SORT: {
        if (!table_len(L, &n) || n < 2 || n >= INT_MAX)
            return 0;
        unsigned long long k = (unsigned long long)n, lg = 1;
        while ((1ULL << lg) < k)
            lg++;
        *after = k * lg;
        return 0;
    }
    case COST_CODES_STEP: {
        size_t len;
        int ok = 0;
        const char *s = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &len) : NULL;
        lua_Integer at = lua_tointegerx(L, 2, &ok);
        unsigned long long k = 0;
        if (s && ok && at >= 0)
            for (size_t i = (size_t)at; i < len && ((unsigned char)s[i] & 0xC0) == 0x80; i++)
                k++;
        return k / CHARS_PER_STEP;
    }
    default:
        return 0;
    }
}

/* The wrapper: upvalue 1 is the library's C function, upvalue 2 its cost
 * kind.  The function runs in this frame (it uses no upvalues of its own),
 * so its error messages name it as before. */
static int charged_call(lua_State *L)
{
    lua_CFunction fn = lua_tocfunction(L, lua_upvalueindex(1));
    cost kind = (cost)lua_tointeger(L, lua_upvalueindex(2));
    int nargs = lua_gettop(L);
    unsigned long long c = 1 + (unsigned long long)nargs, after = 0;
    if (kind == COST_BYTES || kind == COST_FORMAT) {
        for (int i = 1; i <= nargs; i++) {
            if (lua_type(L, i) != LUA_TSTRING)
                continue;
            size_t len = lua_rawlen(L, i);
            c = sat_add(c, kind == COST_FORMAT && i == 1 ? len : len / BYTES_PER_STEP);
        }
    } else if (kind != COST_CALL) {
        c = sat_add(c, work_of(L, kind, nargs, &after));
        lua_settop(L, nargs);   /* table_len may have left nothing, but be sure */
    }
    fg_sandbox_charge(L, c);
    int nres = fn(L);
    fg_sandbox_charge(L, sat_add(after, (unsigned long long)(nres > 0 ? nres : 0)));
    if (kind == COST_CODES && nres >= 1) {
        /* the iterator (first result) is a C function too: charge it */
        int it = lua_gettop(L) - nres + 1;
        if (lua_iscfunction(L, it)) {
            luaL_checkstack(L, 2, NULL);
            lua_pushvalue(L, it);
            lua_pushinteger(L, COST_CODES_STEP);
            lua_pushcclosure(L, charged_call, 2);
            lua_replace(L, it);
        }
    }
    return nres;
}

typedef struct lib_fn {
    const char *name;
    int cost;                 /* cost kind for a wrapped function */
    lua_CFunction replace;    /* or a replacement */
} lib_fn;

static const lib_fn string_fns[] = {
    {"find", 0, lib_find},         {"match", 0, lib_match},       {"gmatch", 0, lib_gmatch},
    {"gsub", 0, lib_gsub},         {"rep", 0, lib_rep},           {"format", COST_FORMAT, NULL},
    {"pack", COST_FORMAT, NULL},   {"packsize", COST_FORMAT, NULL}, {"unpack", COST_FORMAT, NULL},
    {"upper", COST_BYTES, NULL},   {"lower", COST_BYTES, NULL},   {"reverse", COST_BYTES, NULL},
};
static const lib_fn table_fns[] = {
    {"move", COST_MOVE, NULL},     {"concat", COST_CONCAT, NULL}, {"unpack", COST_UNPACK, NULL},
    {"insert", COST_INSERT, NULL}, {"remove", COST_REMOVE, NULL}, {"sort", COST_SORT, NULL},
};
static const lib_fn utf8_fns[] = {
    {"len", COST_BYTES, NULL}, {"codepoint", COST_BYTES, NULL}, {"offset", COST_BYTES, NULL},
    {"codes", COST_CODES, NULL},
};
static const lib_fn base_fns[] = {
    {"assert", COST_CALL, NULL},   {"error", COST_CALL, NULL},    {"ipairs", COST_CALL, NULL},
    {"next", COST_CALL, NULL},     {"pairs", COST_CALL, NULL},    {"rawequal", COST_CALL, NULL},
    {"rawget", COST_CALL, NULL},   {"rawlen", COST_CALL, NULL},   {"rawset", COST_CALL, NULL},
    {"select", COST_CALL, NULL},   {"getmetatable", COST_CALL, NULL}, {"tonumber", COST_BYTES, NULL},
    {"tostring", COST_CALL, NULL}, {"type", COST_CALL, NULL},
};

/* Wraps (or replaces) the C functions of the table on top of the stack:
 * those listed get their cost kind or replacement, the others COST_CALL.
 * Functions with upvalues of their own (math.random) are left alone: they
 * do constant work. */
static void bound_table(lua_State *L, const lib_fn *fns, size_t nfns, int all)
{
    int t = lua_gettop(L);
    /* collect the names first: the table is changed below */
    const char *names[64];
    int n = 0;
    if (all) {
        lua_pushnil(L);
        while (lua_next(L, t) && n < (int)FG_COUNTOF(names)) {
            if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1))
                names[n++] = lua_tostring(L, -2);   /* the keys stay in the table */
            lua_pop(L, 1);
        }
    } else {
        for (size_t i = 0; i < nfns; i++)
            names[n++] = fns[i].name;
    }
    for (int i = 0; i < n; i++) {
        const lib_fn *spec = NULL;
        for (size_t k = 0; k < nfns && !spec; k++)
            if (strcmp(fns[k].name, names[i]) == 0)
                spec = &fns[k];
        if (spec && spec->replace) {
            lua_pushcfunction(L, spec->replace);
            lua_setfield(L, t, names[i]);
            continue;
        }
        if (lua_getfield(L, t, names[i]) != LUA_TFUNCTION || !lua_iscfunction(L, -1) ||
            lua_getupvalue(L, -1, 1) != NULL) {
            lua_settop(L, t);
            continue;
        }
        lua_pushinteger(L, spec ? spec->cost : COST_CALL);
        lua_pushcclosure(L, charged_call, 2);
        lua_setfield(L, t, names[i]);
    }
    lua_settop(L, t);
}

void fg_sandbox_bound_libs(lua_State *L)
{
    static const struct {
        const char *lib;
        const lib_fn *fns;
        size_t n;
    } libs[] = {
        {"string", string_fns, FG_COUNTOF(string_fns)},
        {"table", table_fns, FG_COUNTOF(table_fns)},
        {"utf8", utf8_fns, FG_COUNTOF(utf8_fns)},
        {"math", NULL, 0},
    };
    for (size_t i = 0; i < FG_COUNTOF(libs); i++) {
        lua_getglobal(L, libs[i].lib);
        bound_table(L, libs[i].fns, libs[i].n, 1);
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);
    bound_table(L, base_fns, FG_COUNTOF(base_fns), 0);
    lua_pop(L, 1);
}
