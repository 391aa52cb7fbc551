/*
 * hook.c -- Lua rule hooks: loading hook files into the context's sandbox
 * (hook_sandbox.c), the registry of hook names, the node and group tables
 * hooks receive (built in a protected call, under the memory cap), the kinds
 * of call (predicate, fold, epilogue, params, select) with the checks on
 * what they return, and error reports that point at the hook's file:line
 * and name the rule line that called it.  An epilogue hook returns an
 * expression, which is parsed and checked here: no text from a hook reaches
 * generated source.
 */
#include "hook.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <uthash.h>

#include "context.h"
#include "env.h"
#include "expr.h"
#include "hook_sandbox.h"
#include "input_file.h"
#include "oom.h"
#include "util.h"

/* What an epilogue hook may return: the expression's length in bytes. */
#define EPILOGUE_MAX_LEN 4096

typedef struct hook_entry {
    UT_hash_handle hh;
    const char *name;   /* interned */
    const char *file;   /* interned path of the defining file */
    int line;           /* line of its `function` */
    int ref;            /* registry reference to the function */
} hook_entry;

struct fg_hooks {
    fg_sandbox *sb;
    hook_entry *byname;     /* uthash on name */
    const char **files;     /* interned paths of the loaded files */
    int nfiles, files_cap;
    pthread_mutex_t lock;   /* one Lua state: one caller at a time */
};

/* ---- registry ---------------------------------------------------------- */

/* The budgets of the context's hooks (its resolved options; 0 means the
 * default). */
static fg_sandbox_limits hook_limits(const fg_context *ctx)
{
    fg_sandbox_limits lim = {0};
    lim.steps = ctx->opts.hook_steps > 0 ? ctx->opts.hook_steps : FG_DEFAULT_HOOK_STEPS;
    lim.memory = (size_t)(ctx->opts.hook_memory > 0 ? ctx->opts.hook_memory : FG_DEFAULT_HOOK_MEMORY);
    lim.timeout_ms = ctx->opts.hook_timeout_ms > 0 ? ctx->opts.hook_timeout_ms : FG_DEFAULT_HOOK_TIMEOUT_MS;
    return lim;
}

/* Frees the context's hook state (registered with fg_ctx_on_free). */
static void hooks_teardown(fg_context *ctx)
{
    fg_hooks_free(ctx->hooks);
    ctx->hooks = NULL;
}

/* The context's hook state, created (its teardown registered) on first use. */
static fg_hooks *hooks_get(fg_context *ctx)
{
    if (!ctx->hooks) {
        fg_oom_hold();   /* the context's from the start: nothing tracked, nothing half-made */
        fg_ctx_on_free(ctx, hooks_teardown);
        fg_hooks *h = fg_xcalloc(1, sizeof *h);
        fg_sandbox_limits lim = hook_limits(ctx);
        h->sb = fg_sandbox_new(&lim);
        pthread_mutex_init(&h->lock, NULL);
        ctx->hooks = h;
        fg_oom_release();
    }
    return ctx->hooks;
}

void fg_hooks_free(fg_hooks *h)
{
    if (!h)
        return;
    hook_entry *e, *tmp;
    HASH_ITER(hh, h->byname, e, tmp) {
        HASH_DEL(h->byname, e);
        free(e);
    }
    fg_sandbox_free(h->sb);
    free(h->files);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static hook_entry *hook_find(fg_hooks *h, const char *name)
{
    hook_entry *e = NULL;
    if (h && name)
        HASH_FIND_STR(h->byname, name, e);
    return e;
}

int fg_hooks_has(const fg_context *ctx, const char *name)
{
    return fg_hooks_file(ctx, name) != NULL;
}

const char *fg_hooks_file(const fg_context *ctx, const char *name)
{
    fg_hooks *h = ctx->hooks;
    if (!h)
        return NULL;
    pthread_mutex_lock(&h->lock);
    hook_entry *e = hook_find(h, name);
    const char *f = e ? e->file : NULL;
    pthread_mutex_unlock(&h->lock);
    return f;
}

/* ---- error locations --------------------------------------------------- */

/* The loaded file that Lua's source name src[0..n) stands for: the path
 * itself, or "...tail" when Lua shortened a long path. */
static const char *known_file(const fg_hooks *h, const char *src, size_t n)
{
    for (int i = 0; i < h->nfiles; i++)
        if (strlen(h->files[i]) == n && memcmp(h->files[i], src, n) == 0)
            return h->files[i];
    if (n > 3 && memcmp(src, "...", 3) == 0) {
        const char *tail = src + 3;
        size_t tn = n - 3;
        for (int i = 0; i < h->nfiles; i++) {
            size_t fl = strlen(h->files[i]);
            if (fl >= tn && memcmp(h->files[i] + fl - tn, tail, tn) == 0)
                return h->files[i];
        }
    }
    return NULL;
}

/* Splits Lua's "path:line: text" when path is a loaded hook file. */
static int split_location(const fg_hooks *h, const char *msg, fg_loc *loc, const char **rest)
{
    for (const char *p = strchr(msg, ':'); p; p = strchr(p + 1, ':')) {
        const char *d = p + 1;
        if (!isdigit((unsigned char)*d))
            continue;
        while (isdigit((unsigned char)*d))
            d++;
        if (*d != ':')
            continue;
        const char *f = known_file(h, msg, (size_t)(p - msg));
        if (!f)
            continue;
        *loc = (fg_loc){f, atoi(p + 1), 0};
        *rest = d + 1 + (d[1] == ' ');
        return 1;
    }
    return 0;
}

static void put_limit(fg_buf *b, size_t bytes)
{
    if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
        fg_buf_printf(b, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        fg_buf_printf(b, "%zu KiB", bytes >> 10);
    else
        fg_buf_printf(b, "%zu bytes", bytes);
}

/* Appends " (hook 'x' called from rules/r.yaml:12)" or the load context. */
static void put_site(fg_buf *b, const char *hook, fg_loc site)
{
    if (!hook)
        return;
    if (site.file && site.line > 0)
        fg_buf_printf(b, " (hook '%s' called from %s:%d)", hook, site.file, site.line);
    else if (site.file)
        fg_buf_printf(b, " (hook '%s' called from %s)", hook, site.file);
    else
        fg_buf_printf(b, " (hook '%s')", hook);
}

/* Records a failed load or call as FG_ERR_HOOK.  hook is NULL while a file
 * loads (path names it); e, when known, is the fallback location. */
static fg_status report_failure(fg_context *ctx, fg_hooks *h, const fg_sandbox_failure *f, const char *hook,
                                const hook_entry *e, fg_loc site, const char *path)
{
    fg_loc loc = FG_NOLOC;
    const char *text = f->message ? f->message : "error";
    const char *rest;
    if (f->kind == FG_SBF_ERROR && f->message && split_location(h, f->message, &loc, &rest)) {
        text = rest;
    } else if (f->src) {
        const char *k = known_file(h, f->src, strlen(f->src));
        loc = (fg_loc){k ? k : fg_intern(ctx, f->src), f->line, 0};
    } else if (e) {
        loc = (fg_loc){e->file, e->line, 0};
    } else if (path) {
        loc = (fg_loc){path, 1, 0};   /* no line known: the file's first */
    }
    if (!hook && path && loc.file == path && loc.line <= 0)
        loc.line = 1;
    fg_buf b = {0};
    char what[256];
    if (hook)
        snprintf(what, sizeof what, "hook '%s'", hook);
    else
        snprintf(what, sizeof what, "hook file '%s'", path ? path : "?");
    switch (f->kind) {
    case FG_SBF_STEPS:
        fg_buf_printf(&b, "%s exceeded its instruction budget (%lld steps): infinite loop?", what,
                      fg_sandbox_step_limit(h->sb));
        break;
    case FG_SBF_MEMORY:
        fg_buf_printf(&b, "%s exceeded its memory limit (", what);
        put_limit(&b, fg_sandbox_memory_limit(h->sb));
        fg_buf_put(&b, ")");
        break;
    case FG_SBF_TIME:
        fg_buf_printf(&b, "%s exceeded its time limit (%d ms)", what, fg_sandbox_timeout_ms(h->sb));
        break;
    case FG_SBF_ARGS:
        fg_buf_printf(&b, "the arguments of %s exceed the hook memory limit (", what);
        put_limit(&b, fg_sandbox_memory_limit(h->sb));
        fg_buf_put(&b, "): the group's weights are too large to pass to a hook");
        break;
    default:
        fg_buf_put(&b, text);
        break;
    }
    if (f->kind == FG_SBF_ERROR)
        put_site(&b, hook, site);
    else if (hook && site.file)
        fg_buf_printf(&b, " (called from %s:%d)", site.file, site.line);
    if (f->traceback)
        fg_buf_printf(&b, "\n%s", f->traceback);
    fg_status st = fg_diag_error(ctx, FG_ERR_HOOK, loc, "%s", b.s);
    fg_buf_free(&b);
    return st;
}

/* A problem with what hook e returned: located at the hook's definition. */
static fg_status __attribute__((format(printf, 4, 5)))
result_error(fg_context *ctx, const hook_entry *e, fg_loc site, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (site.file)
        fg_buf_printf(&b, " (called from %s:%d)", site.file, site.line);
    fg_status st = fg_diag_error(ctx, FG_ERR_HOOK, (fg_loc){e->file, e->line, 0}, "%s", b.s);
    fg_buf_free(&b);
    return st;
}

/* ---- loading ----------------------------------------------------------- */

typedef struct new_hook {
    const char *name;
    int line;
    int ref;
} new_hook;

static int new_hook_cmp(const void *a, const void *b)
{
    const new_hook *x = a, *y = b;
    return x->line != y->line ? (x->line < y->line ? -1 : 1) : strcmp(x->name, y->name);
}

/* Nonzero when s[0..n) is a Lua identifier (the names rules can use). */
static int is_identifier(const char *s, size_t n)
{
    if (n == 0 || n > 255 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* Registers every Lua function in the environment table on top of the
 * stack whose name is an identifier as a hook of file path (other keys,
 * set through _ENV["..."], are not names a rule could use). */
static fg_status register_hooks(fg_context *ctx, fg_hooks *h, const char *path)
{
    lua_State *L = fg_sandbox_state(h->sb);
    new_hook *found = NULL;
    int nfound = 0, cap = 0;
    /* No collection (hence no finalizer) may touch the table mid-traversal. */
    lua_gc(L, LUA_GCSTOP);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        size_t klen = 0;
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TFUNCTION && !lua_iscfunction(L, -1) &&
            (lua_tolstring(L, -2, &klen), is_identifier(lua_tostring(L, -2), klen))) {
            lua_Debug ar;
            lua_pushvalue(L, -1);
            lua_getinfo(L, ">S", &ar);
            new_hook *n = FG_PUSH(found, nfound, cap);
            n->name = fg_intern(ctx, lua_tostring(L, -2));
            n->line = ar.linedefined;
            n->ref = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the value */
        } else {
            lua_pop(L, 1);
        }
    }
    lua_gc(L, LUA_GCRESTART);
    if (nfound > 1)
        qsort(found, (size_t)nfound, sizeof *found, new_hook_cmp);
    fg_status st = FG_OK;
    for (int i = 0; i < nfound; i++) {
        hook_entry *old = hook_find(h, found[i].name);
        if (old) {
            st = fg_diag_error(ctx, FG_ERR_HOOK, (fg_loc){path, found[i].line, 0},
                               "hook '%s' is defined twice: in %s:%d and in %s:%d", found[i].name, old->file,
                               old->line, path, found[i].line);
            luaL_unref(L, LUA_REGISTRYINDEX, found[i].ref);
            continue;
        }
        hook_entry *e = fg_xcalloc(1, sizeof *e);
        e->name = found[i].name;
        e->file = path;
        e->line = found[i].line;
        e->ref = found[i].ref;
        HASH_ADD_KEYPTR(hh, h->byname, e->name, strlen(e->name), e);
    }
    free(found);
    return st;
}

fg_status fg_hooks_load(fg_context *ctx, const char *path)
{
    size_t len;
    char why[160];
    char *text = fg_read_input_file(path, FG_RULES_FILE_MAX, &len, why, sizeof why);
    if (!text)
        return fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, path), 0, 0}, "cannot read hook file: %s", why);
    fg_status st = fg_hooks_load_text(ctx, path, text, len);
    free(text);
    return st;
}

fg_status fg_hooks_load_text(fg_context *ctx, const char *path, const char *text, size_t len)
{
    const char *ipath = fg_intern(ctx, path);
    fg_hooks *h = hooks_get(ctx);
    pthread_mutex_lock(&h->lock);
    fg_oom_hold();   /* Lua runs under the lock: nothing unwinds through it (oom.h) */
    lua_State *L = fg_sandbox_state(h->sb);
    int top = lua_gettop(L);
    if (!known_file(h, ipath, strlen(ipath)))
        *FG_PUSH(h->files, h->nfiles, h->files_cap) = ipath;

    fg_status st = FG_OK;
    fg_sandbox_failure f;
    char *chunkname = fg_xmalloc(strlen(path) + 2);
    chunkname[0] = '@';
    strcpy(chunkname + 1, path);
    if (fg_sandbox_load(h->sb, text, len, chunkname, &f) != 0) {
        st = report_failure(ctx, h, &f, NULL, NULL, FG_NOLOC, ipath);
        fg_sandbox_failure_clear(&f);
        goto out;
    }
    /* fn -> env fn, with env as the chunk's _ENV */
    fg_sandbox_push_env(h->sb);
    lua_pushvalue(L, -1);
    lua_setupvalue(L, -3, 1);
    lua_insert(L, -2);
    if (fg_sandbox_call(h->sb, 0, 0, 0, &f) != 0) {
        st = report_failure(ctx, h, &f, NULL, NULL, FG_NOLOC, ipath);
        fg_sandbox_failure_clear(&f);
        goto out;
    }
    st = register_hooks(ctx, h, ipath);
out:
    lua_settop(L, top);
    fg_oom_release();
    pthread_mutex_unlock(&h->lock);
    free(chunkname);
    return st;
}

/* ---- argument tables ---------------------------------------------------- */

static void push_attr(lua_State *L, const fg_attr_value *v)
{
    switch (v->type) {
    case FG_ATTR_INT: lua_pushinteger(L, (lua_Integer)v->i); break;
    case FG_ATTR_FLOAT: lua_pushnumber(L, v->f); break;
    case FG_ATTR_BOOL: lua_pushboolean(L, v->i != 0); break;
    case FG_ATTR_INTS:
        lua_createtable(L, v->n, 0);
        for (int i = 0; i < v->n; i++) {
            lua_pushinteger(L, (lua_Integer)v->ints[i]);
            lua_rawseti(L, -2, i + 1);
        }
        break;
    case FG_ATTR_STRING: lua_pushstring(L, v->s ? v->s : ""); break;
    default: lua_pushnil(L); break;
    }
}

/* { name=, shape={...}, dtype=, layout= [, input=, weight=true, data={...}] } */
static void push_tensor(lua_State *L, const fg_tensor *t, const char *input, int with_data)
{
    lua_createtable(L, 0, 7);
    lua_pushstring(L, t->name ? t->name : "");
    lua_setfield(L, -2, "name");
    lua_createtable(L, t->rank, 0);
    for (int i = 0; i < t->rank; i++) {
        lua_pushinteger(L, (lua_Integer)t->shape[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_pushstring(L, fg_dtype_name(t->dtype));
    lua_setfield(L, -2, "dtype");
    lua_pushstring(L, fg_layout_name(t->layout));
    lua_setfield(L, -2, "layout");
    if (input) {
        lua_pushstring(L, input);
        lua_setfield(L, -2, "input");
    }
    if (t->is_weight) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "weight");
        if (with_data && t->data) {
            int64_t n = fg_tensor_numel(t);
            if (n < 0 || n > (1 << 30))
                luaL_error(L, "weight '%s' has too many elements for a hook", t->name ? t->name : "?");
            /* scratch space in the state (collected if this fails half-way) */
            float *v = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *v, 0);
            fg_tensor_values(t, v);   /* an earlier fold's pending scale applied */
            lua_createtable(L, (int)n, 0);
            for (int64_t i = 0; i < n; i++) {
                lua_pushnumber(L, v[i]);
                lua_rawseti(L, -2, (lua_Integer)i + 1);
            }
            lua_remove(L, -2);
            lua_setfield(L, -2, "data");
        }
    }
}

/* { name=, op=, kind=, attrs={...}, inputs={...}, output={...} } */
static void push_node(lua_State *L, const fg_graph *g, int ni, int with_data)
{
    const fg_node *n = &g->nodes[ni];
    const fg_opdef *op = n->op;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, n->name ? n->name : "");
    lua_setfield(L, -2, "name");
    if (op) {
        lua_pushstring(L, op->name);
        lua_setfield(L, -2, "op");
        lua_pushstring(L, fg_op_kind_name(op->kind));
        lua_setfield(L, -2, "kind");
    }
    lua_createtable(L, 0, op ? op->nattrs : 0);
    for (int i = 0; op && i < op->nattrs; i++) {
        push_attr(L, &n->attrs[i]);
        lua_setfield(L, -2, op->attrs[i].name);
    }
    lua_setfield(L, -2, "attrs");
    lua_createtable(L, n->ninputs, 0);
    int k = 0;
    for (int i = 0; i < n->ninputs; i++) {
        int t = n->inputs[i];
        if (t < 0 || t >= g->ntensors)
            continue; /* absent optional input */
        push_tensor(L, &g->tensors[t], op && i < op->ninputs ? op->inputs[i].name : NULL, with_data);
        lua_rawseti(L, -2, ++k);
    }
    lua_setfield(L, -2, "inputs");
    if (n->output >= 0 && n->output < g->ntensors) {
        push_tensor(L, &g->tensors[n->output], NULL, 0);
        lua_setfield(L, -2, "output");
    }
}

/* { rule=, template=, nodes={...}, anchor=, output= } */
static void push_group(fg_context *ctx, lua_State *L, const fg_graph *g, const fg_group *grp, int with_data)
{
    lua_createtable(L, 0, 5);
    if (grp->rule >= 0 && grp->rule < ctx->nrules) {
        lua_pushstring(L, ctx->rules[grp->rule]->name);
        lua_setfield(L, -2, "rule");
    }
    if (grp->template_name) {
        lua_pushstring(L, grp->template_name);
        lua_setfield(L, -2, "template");
    }
    lua_createtable(L, grp->nnodes, 0);
    for (int i = 0; i < grp->nnodes; i++) {
        push_node(L, g, grp->nodes[i], with_data);
        lua_rawseti(L, -2, i + 1);
        if (grp->nodes[i] == grp->anchor) {
            lua_pushinteger(L, i + 1);
            lua_setfield(L, -3, "anchor");
        }
    }
    lua_setfield(L, -2, "nodes");
    if (grp->output >= 0 && grp->output < g->ntensors) {
        push_tensor(L, &g->tensors[grp->output], NULL, 0);
        lua_setfield(L, -2, "output");
    }
}

/* ---- calls -------------------------------------------------------------- */

/* Looks name up; on success locks the hooks, pushes the function and
 * returns the entry with *top set to the stack top before the push. */
static fg_status call_begin(fg_context *ctx, const char *name, fg_loc site, hook_entry **out, int *top)
{
    fg_hooks *h = ctx->hooks;
    if (h) {
        pthread_mutex_lock(&h->lock);
        fg_oom_hold();   /* released by call_end */
    }
    hook_entry *e = hook_find(h, name);
    if (!e) {
        const char **names = NULL;
        int n = 0, cap = 0;
        hook_entry *it, *tmp;
        if (h)
            HASH_ITER(hh, h->byname, it, tmp) *FG_PUSH(names, n, cap) = it->name;
        const char *s = fg_suggest(name ? name : "", names, n);
        free(names);
        if (h) {
            fg_oom_release();
            pthread_mutex_unlock(&h->lock);
        }
        if (s)
            return fg_diag_error(ctx, FG_ERR_INPUT, site, "unknown hook '%s' (did you mean '%s'?)", name, s);
        return fg_diag_error(ctx, FG_ERR_INPUT, site, "unknown hook '%s'%s", name ? name : "(null)",
                             h ? "" : " (no hook file is loaded)");
    }
    lua_State *L = fg_sandbox_state(h->sb);
    *top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->ref);
    *out = e;
    return FG_OK;
}

static void call_end(fg_context *ctx, int top)
{
    lua_settop(fg_sandbox_state(ctx->hooks->sb), top);
    fg_oom_release();
    pthread_mutex_unlock(&ctx->hooks->lock);
}

/* What a call passes: a node, or a group (and, for a select hook, the
 * names of the templates offered). */
typedef struct call_args {
    fg_context *ctx;
    const fg_graph *g;
    int node;
    const fg_group *grp;
    int with_data;
    const char *const *names;
    int nnames;
} call_args;

/* Pushes the arguments described by the call_args at index 1; runs in a
 * protected call (fg_sandbox_push_args), so that running out of memory
 * fails the call instead of the process. */
static int push_args(lua_State *L)
{
    const call_args *a = lua_touserdata(L, 1);
    if (a->grp)
        push_group(a->ctx, L, a->g, a->grp, a->with_data);
    else
        push_node(L, a->g, a->node, a->with_data);
    if (a->names) {
        lua_createtable(L, a->nnames, 0);
        for (int i = 0; i < a->nnames; i++) {
            lua_pushstring(L, a->names[i]);
            lua_rawseti(L, -2, i + 1);
        }
    }
    return lua_gettop(L) - 1;
}

/* Pushes the arguments and runs the hook (already pushed by call_begin);
 * its one result is left on top. */
static fg_status call_run_args(fg_context *ctx, hook_entry *e, fg_loc site, const call_args *a)
{
    fg_hooks *h = ctx->hooks;
    fg_sandbox_failure f;
    size_t bytes;
    int nargs = a->names ? 2 : 1;
    if (fg_sandbox_push_args(h->sb, push_args, (void *)a, nargs, &bytes, &f) == 0 &&
        fg_sandbox_call(h->sb, nargs, 1, bytes, &f) == 0)
        return FG_OK;
    fg_status st = report_failure(ctx, h, &f, e->name, e, site, NULL);
    fg_sandbox_failure_clear(&f);
    return st;
}

static fg_status call_run(fg_context *ctx, hook_entry *e, fg_loc site, const fg_graph *g, int node,
                          const fg_group *grp, int with_data)
{
    call_args a = {.ctx = ctx, .g = g, .node = node, .grp = grp, .with_data = with_data};
    return call_run_args(ctx, e, site, &a);
}

fg_status fg_hook_predicate(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, int node,
                            int *result)
{
    hook_entry *e;
    int top;
    if (node < 0 || node >= g->nnodes)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, site, "hook '%s' called on node %d of %d", name, node, g->nnodes);
    fg_status st = call_begin(ctx, name, site, &e, &top);
    if (st != FG_OK)
        return st;
    lua_State *L = fg_sandbox_state(ctx->hooks->sb);
    st = call_run(ctx, e, site, g, node, NULL, 0);
    if (st == FG_OK) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            st = result_error(ctx, e, site, "hook '%s' must return a boolean, got %s", name, luaL_typename(L, -1));
        else
            *result = lua_toboolean(L, -1) ? 1 : 0;
    }
    call_end(ctx, top);
    return st;
}

/* The index of the weight tensor called name among the inputs of the
 * group's nodes, or -1. */
static int group_weight(const fg_graph *g, const fg_group *grp, const char *name, size_t len)
{
    for (int i = 0; i < grp->nnodes; i++) {
        const fg_node *n = &g->nodes[grp->nodes[i]];
        for (int k = 0; k < n->ninputs; k++) {
            int t = n->inputs[k];
            if (t >= 0 && t < g->ntensors && g->tensors[t].is_weight && g->tensors[t].name &&
                strlen(g->tensors[t].name) == len && memcmp(g->tensors[t].name, name, len) == 0)
                return t;
        }
    }
    return -1;
}

static void put_group_weights(fg_buf *b, const fg_graph *g, const fg_group *grp)
{
    int any = 0;
    for (int i = 0; i < grp->nnodes; i++) {
        const fg_node *n = &g->nodes[grp->nodes[i]];
        for (int k = 0; k < n->ninputs; k++) {
            int t = n->inputs[k];
            if (t >= 0 && t < g->ntensors && g->tensors[t].is_weight) {
                fg_buf_printf(b, "%s%s", any ? ", " : "", g->tensors[t].name);
                any = 1;
            }
        }
    }
    if (!any)
        fg_buf_put(b, "none");
}

/* Checks the fold result on top of the stack; with apply, replaces the
 * weights (only called once every entry has passed the check). */
static fg_status fold_result(fg_context *ctx, const hook_entry *e, fg_loc site, fg_graph *g, const fg_group *grp,
                             int apply)
{
    lua_State *L = fg_sandbox_state(ctx->hooks->sb);
    int tbl = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, tbl)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return result_error(ctx, e, site, "hook '%s' returned a %s key; fold hooks map weight names to arrays",
                                e->name, luaL_typename(L, -2));
        size_t klen;
        const char *key = lua_tolstring(L, -2, &klen);
        int t = group_weight(g, grp, key, klen);
        if (t < 0) {
            fg_buf b = {0};
            put_group_weights(&b, g, grp);
            fg_status st = result_error(ctx, e, site, "hook '%s' returned values for '%s', which is not a weight "
                                        "of the group (weights: %s)", e->name, key, b.s);
            fg_buf_free(&b);
            return st;
        }
        fg_tensor *tensor = &g->tensors[t];
        if (lua_type(L, -1) != LUA_TTABLE)
            return result_error(ctx, e, site, "hook '%s' returned a %s for weight '%s'; expected an array of numbers",
                                e->name, luaL_typename(L, -1), key);
        int64_t numel = fg_tensor_numel(tensor);
        lua_Unsigned len = lua_rawlen(L, -1);
        if ((int64_t)len != numel)
            return result_error(ctx, e, site, "hook '%s' returned %llu values for weight '%s', which has %lld",
                                e->name, (unsigned long long)len, key, (long long)numel);
        float *data = apply ? fg_xmalloc((size_t)(numel > 0 ? numel : 1) * sizeof(float)) : NULL;
        for (int64_t i = 0; i < numel; i++) {
            if (lua_rawgeti(L, -1, (lua_Integer)i + 1) != LUA_TNUMBER) {
                fg_status st = result_error(ctx, e, site, "hook '%s': value %lld of weight '%s' is a %s, not a number",
                                            e->name, (long long)i + 1, key, luaL_typename(L, -1));
                free(data);
                return st;
            }
            if (data)
                data[i] = (float)lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
        if (data) {
            if (!tensor->borrowed)
                free(tensor->data);
            tensor->data = data;
            tensor->borrowed = 0;
            free(tensor->scale);   /* the hook returned the values themselves */
            tensor->scale = NULL;
        }
        lua_pop(L, 1);
    }
    return FG_OK;
}

fg_status fg_hook_fold(fg_context *ctx, const char *name, fg_loc site, fg_graph *g, const fg_group *grp)
{
    hook_entry *e;
    int top;
    fg_status st = call_begin(ctx, name, site, &e, &top);
    if (st != FG_OK)
        return st;
    lua_State *L = fg_sandbox_state(ctx->hooks->sb);
    st = call_run(ctx, e, site, g, -1, grp, 1);
    if (st == FG_OK) {
        if (lua_type(L, -1) != LUA_TTABLE)
            st = result_error(ctx, e, site, "hook '%s' must return a table of weight arrays, got %s", name,
                              luaL_typename(L, -1));
        else if ((st = fold_result(ctx, e, site, g, grp, 0)) == FG_OK)
            st = fold_result(ctx, e, site, g, grp, 1);
    }
    call_end(ctx, top);
    return st;
}

/* Quotes the start of an expression a hook returned, escaped, for messages. */
static const char *quote_expr(const char *s, size_t len, char *out, size_t size)
{
    char *cut = fg_xstrndup(s, len < 200 ? len : 200);
    fg_escape_name(cut, out, size);
    if (len > 200 && strlen(out) + 4 < size)
        strcat(out, "...");
    free(cut);
    return out;
}

fg_status fg_hook_epilogue(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, const fg_group *grp,
                           struct fg_expr **expr)
{
    hook_entry *e;
    int top;
    *expr = NULL;
    fg_status st = call_begin(ctx, name, site, &e, &top);
    if (st != FG_OK)
        return st;
    lua_State *L = fg_sandbox_state(ctx->hooks->sb);
    st = call_run(ctx, e, site, g, -1, grp, 0);
    if (st == FG_OK) {
        size_t len;
        char q[256];
        if (lua_type(L, -1) != LUA_TSTRING) {
            st = result_error(ctx, e, site, "hook '%s' must return an expression string over v and c, got %s", name,
                              luaL_typename(L, -1));
        } else {
            const char *s = lua_tolstring(L, -1, &len);
            if (strlen(s) != len) {
                st = result_error(ctx, e, site, "hook '%s' returned a string containing a NUL byte", name);
            } else if (len > EPILOGUE_MAX_LEN) {
                st = result_error(ctx, e, site, "hook '%s' returned an expression of %zu bytes (at most %d): '%s'",
                                  name, len, EPILOGUE_MAX_LEN, quote_expr(s, len, q, sizeof q));
            } else {
                static const char *const vars[] = {"v", "c"};
                char msg[512];
                int off = 0;
                *expr = fg_expr_parse_quiet(s, vars, 2, msg, sizeof msg, &off);
                if (!*expr)
                    st = result_error(ctx, e, site, "hook '%s' returned '%s', which is not an expression over v and "
                                      "c: %s (at byte %d)", name, quote_expr(s, len, q, sizeof q), msg, off + 1);
            }
        }
    }
    call_end(ctx, top);
    return st;
}

fg_status fg_hook_params(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, const fg_group *grp,
                         const char *const *keys, int n, int64_t *vals)
{
    hook_entry *e;
    int top;
    fg_status st = call_begin(ctx, name, site, &e, &top);
    if (st != FG_OK)
        return st;
    lua_State *L = fg_sandbox_state(ctx->hooks->sb);
    st = call_run(ctx, e, site, g, -1, grp, 0);
    if (st == FG_OK && lua_type(L, -1) != LUA_TTABLE)
        st = result_error(ctx, e, site, "hook '%s' must return a table of integers, got %s", name,
                          luaL_typename(L, -1));
    int64_t *got = fg_xcalloc((size_t)(n > 0 ? n : 1), sizeof *got);
    int tbl = lua_gettop(L);
    for (int i = 0; st == FG_OK && i < n; i++) {
        lua_pushstring(L, keys[i]);
        int type = lua_rawget(L, tbl);
        lua_Integer v = 0;
        int ok = 0;
        if (type == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        if (type == LUA_TNUMBER)
            v = lua_tointegerx(L, -1, &ok);
        if (!ok) {
            if (type == LUA_TNUMBER)
                st = result_error(ctx, e, site, "hook '%s' returned %.17g for '%s'; expected a positive integer",
                                  name, (double)lua_tonumber(L, -1), keys[i]);
            else
                st = result_error(ctx, e, site, "hook '%s' returned a %s for '%s'; expected a positive integer", name,
                                  luaL_typename(L, -1), keys[i]);
        } else if (v <= 0) {
            st = result_error(ctx, e, site, "hook '%s' returned %lld for '%s'; expected a positive integer", name,
                              (long long)v, keys[i]);
        }
        got[i] = (int64_t)v;
        lua_pop(L, 1);
    }
    if (st == FG_OK) {
        for (int i = 0; i < n; i++)
            if (got[i] > 0)
                vals[i] = got[i];
        /* Keys nobody asked for are probably typos: say so. */
        lua_pushnil(L);
        while (lua_next(L, tbl)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING) {
                fg_diag_warn(ctx, (fg_loc){e->file, e->line, 0}, "hook '%s' returned a %s key; ignored", name,
                             luaL_typename(L, -1));
                continue;
            }
            const char *k = lua_tostring(L, -1);
            int known = 0;
            for (int i = 0; i < n && !known; i++)
                known = strcmp(keys[i], k) == 0;
            if (!known) {
                const char *s = fg_suggest(k, keys, n);
                fg_diag_warn(ctx, (fg_loc){e->file, e->line, 0}, "hook '%s' returned unknown parameter '%s'%s%s%s",
                             name, k, s ? " (did you mean '" : "; ignored", s ? s : "", s ? "'?)" : "");
            }
        }
    }
    free(got);
    call_end(ctx, top);
    return st;
}

fg_status fg_hook_select(fg_context *ctx, const char *name, fg_loc site, const fg_graph *g, const fg_group *grp,
                         const char *const *names, int n, int *choice)
{
    hook_entry *e;
    int top;
    fg_status st = call_begin(ctx, name, site, &e, &top);
    if (st != FG_OK)
        return st;
    fg_hooks *h = ctx->hooks;
    lua_State *L = fg_sandbox_state(h->sb);
    call_args a = {.ctx = ctx, .g = g, .node = -1, .grp = grp, .names = names, .nnames = n};
    if ((st = call_run_args(ctx, e, site, &a)) != FG_OK) {
        /* reported */
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        st = result_error(ctx, e, site, "hook '%s' must return the name of one of the templates offered, got %s",
                          name, luaL_typename(L, -1));
    } else {
        const char *s = lua_tostring(L, -1);
        *choice = -1;
        for (int i = 0; i < n && *choice < 0; i++)
            if (strcmp(names[i], s) == 0)
                *choice = i;
        if (*choice < 0) {
            fg_buf b = {0};
            for (int i = 0; i < n; i++)
                fg_buf_printf(&b, "%s%s", i ? ", " : "", names[i]);
            st = result_error(ctx, e, site, "hook '%s' returned '%s', which is not among the templates offered (%s)",
                              name, s, b.s);
            fg_buf_free(&b);
        }
    }
    call_end(ctx, top);
    return st;
}
