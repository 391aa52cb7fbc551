/*
 * kcache.c -- obtaining kernel binaries through the kernel cache, once for
 * every backend (kcache.h): key, memory, disk, remote, compile, store; and
 * the parallel version over a plan's kernels.
 */
#include "kcache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "remote_cache.h"
#include "runtime.h"
#include "threadpool.h"

fg_cache *fg_ctx_cache(fg_context *ctx)
{
    struct fg_runtime *rt = fg_rt(ctx);
    pthread_mutex_lock(&rt->lock);
    if (!rt->cache_opened) {
        rt->cache = fg_cache_open(ctx, ctx->cache_dir, ctx->env.cache_limit_bytes);
        rt->cache_opened = 1;
    }
    fg_cache *c = rt->cache;
    pthread_mutex_unlock(&rt->lock);
    return c;
}

/* ---- metadata ------------------------------------------------------------- */

void fg_meta_put(fg_buf *b, const char *name, const char *value)
{
    fg_buf_printf(b, "%s=", name);
    for (const char *p = value ? value : ""; *p; p++) {
        if (*p == '\n')
            fg_buf_put(b, "\\n");
        else if (*p == '\\')
            fg_buf_put(b, "\\\\");
        else
            fg_buf_putn(b, p, 1);
    }
    fg_buf_put(b, "\n");
}

void fg_meta_value(const char *meta, const char *name, char *out, size_t size)
{
    if (!size)
        return;
    out[0] = 0;
    size_t nl = strlen(name);
    const char *p = meta;
    while (p && *p && !(strncmp(p, name, nl) == 0 && p[nl] == '=')) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p || !*p)
        return;
    size_t n = 0;
    for (p += nl + 1; *p && *p != '\n' && n + 1 < size; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            out[n++] = *p == 'n' ? '\n' : *p;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = 0;
}

/* ---- one kernel ------------------------------------------------------------ */

/* The sequence, with the toolchain already resolved. */
static fg_status obtain(fg_context *ctx, const fg_backend *be, const void *tc, fg_kernel *k, fg_jit_info *info)
{
    double t0 = fg_now();
    memset(info, 0, sizeof *info);
    if (!k->source)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel '%s' has no source", k->name);
    /* The remote tier keeps the key material (the bytes hashed into the key). */
    fg_remote *r = fg_ctx_remote(ctx);
    fg_buf material = {0};
    fg_key_record(r ? &material : NULL);
    be->key(tc, k, k->key);
    fg_key_record(NULL);
    if (be->after_key)
        be->after_key(ctx, tc, k);

    fg_cache *c = fg_ctx_cache(ctx);
    void *data = NULL;
    size_t size = 0;
    char *meta = NULL;
    fg_cache_where where = c ? fg_cache_fetch(c, k->key, &data, &size, &meta) : FG_CACHE_MISS;
    int remote_hit = where == FG_CACHE_MISS && fg_remote_fetch(r, k->key, material.s, material.len, &data, &size, &meta);
    if (remote_hit && c)
        fg_cache_put_meta(c, k->key, data, size, meta);   /* written back to memory and disk */
    if (where == FG_CACHE_MISS && !remote_hit) {
        char *log = NULL;
        free(meta);
        meta = NULL;
        fg_status st = be->compile(ctx, tc, k, &data, &size, &meta, &log);
        if (st) {
            free(log);
            free(meta);
            fg_buf_free(&material);
            return st;
        }
        if (c)
            fg_cache_put_meta(c, k->key, data, size, meta);   /* a failed store only costs a recompile */
        fg_remote_store(r, k->key, material.s, material.len, data, size, meta);   /* read-write mode only */
        snprintf(info->log, sizeof info->log, "%s", log ? log : "");
        free(log);
        info->from = FG_JIT_COMPILED;
    } else {
        fg_meta_value(meta, "log", info->log, sizeof info->log);
        info->from = remote_hit ? FG_JIT_REMOTE : where == FG_CACHE_MEMORY ? FG_JIT_MEMORY : FG_JIT_DISK;
    }
    fg_ctx_count_tier(ctx, info->from);
    fg_rt_count_kernel(ctx, info->from == FG_JIT_COMPILED ? (be->device == FG_DEVICE_CUDA ? FG_KC_NVRTC : FG_KC_HOST)
                            : info->from == FG_JIT_REMOTE ? FG_KC_REMOTE
                            : info->from == FG_JIT_MEMORY ? FG_KC_MEMORY : FG_KC_DISK);
    fg_buf_free(&material);
    free(meta);
    free(k->binary);
    k->binary = data;
    k->binary_size = size;
    info->size = size;
    info->seconds = fg_now() - t0;
    return FG_OK;
}

fg_status fg_kernel_obtain(fg_context *ctx, const fg_backend *be, fg_kernel *k, const char *target, fg_jit_info *info)
{
    fg_jit_info local;
    void *tc = NULL;
    if (!k)
        return fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "no kernel to compile");
    fg_status st = be->toolchain_new(ctx, target, &tc);
    if (!st)
        st = obtain(ctx, be, tc, k, info ? info : &local);
    if (tc)
        be->toolchain_free(tc);
    return st;
}

/* ---- a batch on a thread pool ------------------------------------------------ */

typedef struct batch {
    fg_context *ctx;
    const fg_backend *be;
    const void *tc;
    fg_kernel *ks;
    fg_jit_info *infos;
    fg_status *status;
    const int *todo;   /* the kernels to obtain: one per distinct key */
    int n;
    int done;
    int tty;
    pthread_mutex_t lock;
} batch;

static void obtain_task(void *arg, int t)
{
    batch *b = arg;
    fg_jit_info local;
    int i = b->todo[t];
    b->status[i] = obtain(b->ctx, b->be, b->tc, &b->ks[i], b->infos ? &b->infos[i] : &local);
    pthread_mutex_lock(&b->lock);
    b->done++;
    if (b->tty) {
        fprintf(stderr, "\rcompiling %d/%d kernels", b->done, b->n);
        fflush(stderr);
    }
    pthread_mutex_unlock(&b->lock);
}

/* same[i]: the first kernel with kernel i's key (i itself when none before
 * it has it).  Groups that compute the same thing have the same key
 * (emit_name.c), so each distinct kernel is obtained once. */
static void same_keys(const fg_backend *be, const void *tc, fg_kernel *ks, int n, int *same)
{
    for (int i = 0; i < n; i++) {
        same[i] = i;
        if (!ks[i].source)
            continue;
        be->key(tc, &ks[i], ks[i].key);
        for (int j = 0; j < i && same[i] == i; j++)
            if (same[j] == j && ks[j].source && strcmp(ks[i].key, ks[j].key) == 0)
                same[i] = j;
    }
}

fg_status fg_kernel_obtain_all(fg_context *ctx, const fg_backend *be, fg_kernel *ks, int n, const char *target,
                               fg_jit_info *infos)
{
    if (n <= 0)
        return FG_OK;
    void *tc = NULL;
    fg_status st = be->toolchain_new(ctx, target, &tc);
    if (st)
        return st;
    fg_ctx_cache(ctx);   /* open it once, before the workers race for it */

    int *same = fg_xcalloc((size_t)n, sizeof *same), *todo = fg_xcalloc((size_t)n, sizeof *todo), ntodo = 0;
    same_keys(be, tc, ks, n, same);
    for (int i = 0; i < n; i++)
        if (same[i] == i)
            todo[ntodo++] = i;
    batch b = {ctx, be, tc, ks, infos, fg_xcalloc((size_t)n, sizeof(fg_status)), todo, ntodo, 0, isatty(2),
               PTHREAD_MUTEX_INITIALIZER};
    int jobs = ctx->opts.jobs > 0 ? ctx->opts.jobs : fg_cpu_count();
    if (jobs > ntodo)
        jobs = ntodo;
    fg_threadpool *pool = fg_threadpool_new(jobs);
    fg_threadpool_run(pool, ntodo, obtain_task, &b);
    fg_threadpool_free(pool);
    if (b.tty) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    /* the others take a copy of their twin's binary */
    for (int i = 0; i < n; i++) {
        int j = same[i];
        if (j == i)
            continue;
        b.status[i] = b.status[j];
        if (b.status[j] != FG_OK || !ks[j].binary)
            continue;
        free(ks[i].binary);
        ks[i].binary = fg_xmalloc(ks[j].binary_size ? ks[j].binary_size : 1);
        memcpy(ks[i].binary, ks[j].binary, ks[j].binary_size);
        ks[i].binary_size = ks[j].binary_size;
        if (infos) {
            infos[i] = infos[j];
            infos[i].from = FG_JIT_SHARED;
            infos[i].seconds = 0;
        }
    }
    for (int i = 0; i < n && !st; i++)
        st = b.status[i];
    free(b.status);
    free(same);
    free(todo);
    pthread_mutex_destroy(&b.lock);
    be->toolchain_free(tc);
    return st;
}
