/*
 * cache.c -- the kernel cache (cache.h): the cache object, its memory tier
 * (a uthash table of every entry fetched or stored in this process) and the
 * sequence of the two tiers: a lookup tries memory, then the directory; a
 * store writes both; clear empties both.  The disk tier -- verified,
 * atomically published entry files that only the current user can have
 * written -- is cache_disk.c, behind the private cache_impl.h.
 */
#include "cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "cache_impl.h"
#include "context.h"
#include "diag.h"
#include "util.h"

#define DEFAULT_LIMIT_MB 1024u

/* ---- small helpers ---------------------------------------------------- */

int fg_cache_is_key(const char *k)
{
    if (!k)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f')))
            return 0;
    return k[32] == 0;
}

/* ---- configuration ---------------------------------------------------- */

/* The settings come from the context (resolved once by fg_context_init from
 * its options, then the environment: FUSEGEN_CACHE, FUSEGEN_CACHE_DIR,
 * XDG_CACHE_HOME, HOME, FUSEGEN_CACHE_MAX_MB; see codegen/env.h).  Without a
 * context: no directory unless one is given, and the default limit. */

static int disk_off(const fg_context *ctx) { return ctx && ctx->opts.cache_off; }

static uint64_t default_limit(const fg_context *ctx)
{
    if (ctx && ctx->env.cache_limit_bytes)
        return ctx->env.cache_limit_bytes;
    return (uint64_t)DEFAULT_LIMIT_MB << 20;
}

/* Whether the disk is in use (snapshot). */
int fg_cache_disk_on(fg_cache *c)
{
    pthread_mutex_lock(&c->lock);
    int on = c->use_disk;
    pthread_mutex_unlock(&c->lock);
    return on;
}

/* ---- memory table ----------------------------------------------------- */

/* Inserts or replaces key in the memory table.  c->lock held. */
void fg_cache_mem_store_locked(fg_cache *c, const char *key, const void *data, size_t size, const char *meta)
{
    mem_entry *e;
    HASH_FIND(hh, c->mem, key, 32, e);
    if (!e) {
        e = fg_xcalloc(1, sizeof *e);
        memcpy(e->key, key, 33);
        HASH_ADD(hh, c->mem, key[0], 32, e);
    } else {
        free(e->data);
        free(e->meta);
    }
    e->data = fg_xmalloc(size);
    if (size)
        memcpy(e->data, data, size);
    e->size = size;
    e->meta = meta ? fg_xstrdup(meta) : NULL;
}

/* Empties the memory table; returns how many entries it held.  c->lock held
 * (or c private to the caller). */
static int mem_clear_locked(fg_cache *c)
{
    mem_entry *e, *tmp;
    int n = 0;
    HASH_ITER(hh, c->mem, e, tmp) {
        HASH_DEL(c->mem, e);
        free(e->data);
        free(e->meta);
        free(e);
        n++;
    }
    return n;
}

/* ---- open / close ----------------------------------------------------- */

fg_cache *fg_cache_open(fg_context *ctx, const char *dir, uint64_t limit_bytes)
{
    fg_cache *c = fg_xcalloc(1, sizeof *c);
    c->ctx = ctx;
    c->dfd = -1;
    pthread_mutex_init(&c->lock, NULL);
    c->limit = limit_bytes ? limit_bytes : default_limit(ctx);
    if (disk_off(ctx))
        return c;
    if (dir && *dir)
        c->path = fg_xstrdup(dir);
    else if (ctx && ctx->cache_dir && *ctx->cache_dir)
        c->path = fg_xstrdup(ctx->cache_dir);
    if (!c->path) {
        if (ctx)
            fg_diag_warn(ctx, FG_NOLOC, "no kernel cache directory (set FUSEGEN_CACHE_DIR or HOME); caching in memory only");
        c->warned = 1;
        return c;
    }
    fg_cache_disk_open(c);
    return c;
}

void fg_cache_close(fg_cache *c)
{
    if (!c)
        return;
    mem_clear_locked(c);
    if (c->dfd >= 0)
        close(c->dfd);
    free(c->path);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *fg_cache_dir(const fg_cache *c)
{
    if (!c)
        return NULL;
    return fg_cache_disk_on((fg_cache *)c) ? c->path : NULL;
}

uint64_t fg_cache_limit(const fg_cache *c) { return c ? c->limit : 0; }

void fg_cache_get_stats(const fg_cache *c, fg_cache_stats *s)
{
    fg_cache *m = (fg_cache *)c;
    pthread_mutex_lock(&m->lock);
    *s = c->st;
    pthread_mutex_unlock(&m->lock);
}

/* ---- lookup ----------------------------------------------------------- */

fg_cache_where fg_cache_fetch(fg_cache *c, const char *key, void **data, size_t *size, char **meta)
{
    if (data)
        *data = NULL;
    if (size)
        *size = 0;
    if (meta)
        *meta = NULL;
    if (!c || !fg_cache_is_key(key) || !data || !size)
        return FG_CACHE_MISS;

    pthread_mutex_lock(&c->lock);
    mem_entry *e;
    HASH_FIND(hh, c->mem, key, 32, e);
    if (e) {
        *data = fg_xmalloc(e->size);
        if (e->size)
            memcpy(*data, e->data, e->size);
        *size = e->size;
        if (meta && e->meta)
            *meta = fg_xstrdup(e->meta);
        c->st.mem_hits++;
        pthread_mutex_unlock(&c->lock);
        return FG_CACHE_MEMORY;
    }
    int on = c->use_disk;
    pthread_mutex_unlock(&c->lock);

    fg_cache_where where = on ? fg_cache_disk_fetch(c, key, data, size, meta) : FG_CACHE_MISS;
    if (where == FG_CACHE_MISS) {
        pthread_mutex_lock(&c->lock);
        c->st.misses++;
        pthread_mutex_unlock(&c->lock);
    }
    return where;
}

int fg_cache_get(fg_cache *c, const char *key, void **data, size_t *size)
{
    return fg_cache_fetch(c, key, data, size, NULL) != FG_CACHE_MISS;
}

/* ---- store ------------------------------------------------------------ */

fg_status fg_cache_put_meta(fg_cache *c, const char *key, const void *data, size_t size, const char *meta)
{
    if (!c || !fg_cache_is_key(key) || (size && !data))
        return FG_ERR_INTERNAL;
    pthread_mutex_lock(&c->lock);
    fg_cache_mem_store_locked(c, key, data, size, meta);
    c->st.stores++;
    int on = c->use_disk;
    pthread_mutex_unlock(&c->lock);
    if (on)
        fg_cache_disk_store(c, key, data, size, meta);
    return FG_OK;
}

fg_status fg_cache_put(fg_cache *c, const char *key, const void *data, size_t size)
{
    return fg_cache_put_meta(c, key, data, size, NULL);
}

/* ---- clear ------------------------------------------------------------ */

int fg_cache_clear(fg_cache *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    int nmem = mem_clear_locked(c);
    int on = c->use_disk;
    c->disk_bytes = 0;
    c->scanned = 1;
    pthread_mutex_unlock(&c->lock);
    if (!on)
        return nmem;
    return fg_cache_disk_clear(c);
}

/* ---- entries --------------------------------------------------------- */

void fg_cache_entry_free(fg_cache_entry *e)
{
    if (!e)
        return;
    free(e->path);
    free(e->meta);
    e->path = NULL;
    e->meta = NULL;
}

void fg_cache_entries_free(fg_cache_entry *es, int n)
{
    for (int i = 0; i < n; i++)
        fg_cache_entry_free(&es[i]);
    free(es);
}

char *fg_cache_meta_get(const char *meta, const char *name, char *out, size_t size)
{
    if (!meta || !size)
        return NULL;
    size_t nl = strlen(name);
    for (const char *p = meta; *p;) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        if (ll > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t vl = ll - nl - 1;
            if (vl >= size)
                vl = size - 1;
            memcpy(out, p + nl + 1, vl);
            out[vl] = 0;
            return out;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return NULL;
}
