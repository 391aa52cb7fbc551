/*
 * cache.c -- the kernel cache (cache.h): a uthash table in memory, then a
 * directory of verified, atomically published entry files.
 *
 * Entry file <dir>/<key[0..2)>/<key>.fgk:
 *
 *   offset  size  field
 *        0     4  magic "FGKC"
 *        4     4  format version (FG_CACHE_FORMAT), little endian
 *        8     8  payload size
 *       16    16  XXH3-128 of metadata + payload (low 64 bits, then high)
 *       32     4  metadata size
 *       36     4  header size (80)
 *       40    32  key (32 hex digits)
 *       72     8  creation time, seconds since the epoch
 *       80     -  metadata text, then the payload
 *
 * A file that fails any check (short, wrong magic/version/key, sizes that do
 * not add up, checksum) is deleted, counted in stats.corrupt and reported as
 * a miss, so the caller recompiles and replaces it.  Writers publish with
 * fg_write_file_atomic (temporary file + rename), so readers in other
 * processes see either the old file, the new one or none, never a mix.
 * Eviction deletes least-recently-used files (mtime, refreshed on every disk
 * hit) until the directory fits its limit; files that vanish meanwhile
 * (another process evicting) are skipped.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "context.h"
#include "diag.h"
#include "util.h"

#define FG_CACHE_FORMAT 1u
#define HDR_SIZE 80u
#define DEFAULT_LIMIT_MB 1024.0
#define STALE_TMP_SECONDS 3600

typedef struct mem_entry {
    UT_hash_handle hh;
    char key[33];
    void *data;
    size_t size;
    char *meta;
} mem_entry;

struct fg_cache {
    fg_context *ctx;
    char *dir;                  /* NULL: memory only */
    uint64_t limit;
    pthread_mutex_t lock;       /* guards mem, st, disk_bytes, scanned, dir */
    mem_entry *mem;
    fg_cache_stats st;
    int64_t disk_bytes;         /* estimate of the directory's size */
    int scanned;                /* disk_bytes has been measured once */
    int warned;                 /* the one "memory only" warning was given */
};

/* ---- small helpers ---------------------------------------------------- */

static int is_key(const char *k)
{
    if (!k)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f')))
            return 0;
    return k[32] == 0;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* <dir>/<k0k1>/<key>.fgk into a malloc'd string. */
static char *entry_path(const char *dir, const char *key)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s/%s.fgk", dir, key, key);
    return fg_buf_take(&b);
}

/* Reads a whole file; returns malloc'd bytes or NULL with errno.  *st gets
 * the opened file's stat (to recognise it later). */
static unsigned char *read_all(const char *path, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    size_t n = (size_t)st->st_size, got = 0;
    unsigned char *buf = fg_xmalloc(n + 1);
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return buf;
}

/* Checks an entry file's bytes.  On success points *payload / *meta into buf
 * and returns 1; returns 0 for anything malformed.  key may be NULL (listing
 * by file name checks the name separately). */
static int entry_verify(const unsigned char *buf, size_t len, const char *key, const unsigned char **payload,
                        uint64_t *psize, const char **meta, uint32_t *msize, int64_t *created)
{
    if (len < HDR_SIZE || memcmp(buf, "FGKC", 4) != 0)
        return 0;
    if (get_le32(buf + 4) != FG_CACHE_FORMAT || get_le32(buf + 36) != HDR_SIZE)
        return 0;
    uint64_t ps = get_le64(buf + 8);
    uint32_t ms = get_le32(buf + 32);
    if (key && memcmp(buf + 40, key, 32) != 0)
        return 0;
    if (ps > len || (uint64_t)HDR_SIZE + ms + ps != len)
        return 0;
    fg_hash128 h = fg_hash128_of(buf + HDR_SIZE, len - HDR_SIZE);
    if (h.lo != get_le64(buf + 16) || h.hi != get_le64(buf + 24))
        return 0;
    *payload = buf + HDR_SIZE + ms;
    *psize = ps;
    *meta = (const char *)buf + HDR_SIZE;
    *msize = ms;
    if (created)
        *created = (int64_t)get_le64(buf + 72);
    return 1;
}

/* Serialises an entry (header + metadata + payload) into a malloc'd buffer. */
static unsigned char *entry_encode(const char *key, const void *data, size_t size, const char *meta, size_t *len)
{
    size_t ms = meta ? strlen(meta) : 0;
    *len = HDR_SIZE + ms + size;
    unsigned char *b = fg_xcalloc(1, *len);
    memcpy(b, "FGKC", 4);
    put_le32(b + 4, FG_CACHE_FORMAT);
    put_le64(b + 8, size);
    put_le32(b + 32, (uint32_t)ms);
    put_le32(b + 36, HDR_SIZE);
    memcpy(b + 40, key, 32);
    put_le64(b + 72, (uint64_t)time(NULL));
    if (ms)
        memcpy(b + HDR_SIZE, meta, ms);
    if (size)
        memcpy(b + HDR_SIZE + ms, data, size);
    fg_hash128 h = fg_hash128_of(b + HDR_SIZE, *len - HDR_SIZE);
    put_le64(b + 16, h.lo);
    put_le64(b + 24, h.hi);
    return b;
}

static int env_disk_off(void)
{
    const char *e = getenv("FUSEGEN_CACHE");
    return e && (strcasecmp(e, "off") == 0 || strcmp(e, "0") == 0 || strcasecmp(e, "false") == 0 ||
                 strcasecmp(e, "no") == 0);
}

/* The default directory, malloc'd, or NULL when none can be named. */
static char *default_dir(void)
{
    const char *e = getenv("FUSEGEN_CACHE_DIR");
    if (e && *e)
        return fg_xstrdup(e);
    e = getenv("XDG_CACHE_HOME");
    if (e && *e)
        return fg_path_join(e, "fusegen");
    e = getenv("HOME");
    if (e && *e)
        return fg_path_join(e, ".cache/fusegen");
    return NULL;
}

static uint64_t default_limit(void)
{
    const char *e = getenv("FUSEGEN_CACHE_MAX_MB");
    double mb = DEFAULT_LIMIT_MB;
    if (e && *e) {
        char *end;
        double v = strtod(e, &end);
        if (end != e && v >= 0)
            mb = v;
    }
    return (uint64_t)(mb * 1024.0 * 1024.0);
}

/* Drops to memory-only after a failure to use the directory; warns once.
 * Called with c->lock held. */
static void degrade_locked(fg_cache *c, const char *what, int err)
{
    if (!c->dir)
        return;
    if (!c->warned && c->ctx)
        fg_diag_warn(c->ctx, FG_NOLOC, "kernel cache directory '%s' is not usable (%s: %s); caching in memory only",
                     c->dir, what, strerror(err));
    c->warned = 1;
    free(c->dir);
    c->dir = NULL;
}

/* ---- open / close ----------------------------------------------------- */

fg_cache *fg_cache_open(fg_context *ctx, const char *dir, uint64_t limit_bytes)
{
    fg_cache *c = fg_xcalloc(1, sizeof *c);
    c->ctx = ctx;
    pthread_mutex_init(&c->lock, NULL);
    c->limit = limit_bytes ? limit_bytes : default_limit();
    if (env_disk_off())
        return c;
    c->dir = dir && *dir ? fg_xstrdup(dir) : default_dir();
    if (!c->dir) {
        if (ctx)
            fg_diag_warn(ctx, FG_NOLOC, "no kernel cache directory (set FUSEGEN_CACHE_DIR or HOME); caching in memory only");
        c->warned = 1;
        return c;
    }
    /* Strip trailing slashes so paths print cleanly. */
    size_t n = strlen(c->dir);
    while (n > 1 && c->dir[n - 1] == '/')
        c->dir[--n] = 0;
    if (fg_mkdir_p(c->dir, 0755) != 0) {
        pthread_mutex_lock(&c->lock);
        degrade_locked(c, "cannot create it", errno);
        pthread_mutex_unlock(&c->lock);
    }
    return c;
}

void fg_cache_close(fg_cache *c)
{
    if (!c)
        return;
    mem_entry *e, *tmp;
    HASH_ITER(hh, c->mem, e, tmp) {
        HASH_DEL(c->mem, e);
        free(e->data);
        free(e->meta);
        free(e);
    }
    free(c->dir);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *fg_cache_dir(const fg_cache *c) { return c ? c->dir : NULL; }
uint64_t fg_cache_limit(const fg_cache *c) { return c ? c->limit : 0; }

void fg_cache_get_stats(const fg_cache *c, fg_cache_stats *s)
{
    fg_cache *m = (fg_cache *)c;
    pthread_mutex_lock(&m->lock);
    *s = c->st;
    pthread_mutex_unlock(&m->lock);
}

/* ---- memory table ----------------------------------------------------- */

/* Inserts or replaces key in the memory table.  c->lock held. */
static void mem_store_locked(fg_cache *c, const char *key, const void *data, size_t size, const char *meta)
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

/* ---- lookup ----------------------------------------------------------- */

fg_cache_where fg_cache_fetch(fg_cache *c, const char *key, void **data, size_t *size, char **meta)
{
    *data = NULL;
    *size = 0;
    if (meta)
        *meta = NULL;
    if (!c || !is_key(key))
        return FG_CACHE_MISS;

    pthread_mutex_lock(&c->lock);
    mem_entry *e;
    HASH_FIND(hh, c->mem, key, 32, e);
    if (e) {
        *data = fg_xmalloc(e->size);
        memcpy(*data, e->data, e->size);
        *size = e->size;
        if (meta && e->meta)
            *meta = fg_xstrdup(e->meta);
        c->st.mem_hits++;
        pthread_mutex_unlock(&c->lock);
        return FG_CACHE_MEMORY;
    }
    char *path = c->dir ? entry_path(c->dir, key) : NULL;
    pthread_mutex_unlock(&c->lock);

    fg_cache_where where = FG_CACHE_MISS;
    if (path) {
        size_t len = 0;
        struct stat st;
        unsigned char *buf = read_all(path, &len, &st);
        if (buf) {
            const unsigned char *pl;
            const char *mt;
            uint64_t ps;
            uint32_t ms;
            if (entry_verify(buf, len, key, &pl, &ps, &mt, &ms, NULL)) {
                *data = fg_xmalloc(ps);
                memcpy(*data, pl, ps);
                *size = ps;
                char *mcopy = ms ? fg_xstrndup(mt, ms) : NULL;
                utimensat(AT_FDCWD, path, NULL, 0); /* LRU: refresh mtime; failure is harmless */
                pthread_mutex_lock(&c->lock);
                mem_store_locked(c, key, *data, ps, mcopy);
                c->st.disk_hits++;
                pthread_mutex_unlock(&c->lock);
                if (meta)
                    *meta = mcopy;
                else
                    free(mcopy);
                where = FG_CACHE_DISK;
            } else {
                /* Corrupt or truncated: delete it unless another process has
                 * already replaced it with a different file. */
                struct stat now;
                if (stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
                    unlink(path);
                pthread_mutex_lock(&c->lock);
                c->st.corrupt++;
                c->disk_bytes -= (int64_t)len;
                pthread_mutex_unlock(&c->lock);
            }
            free(buf);
        }
        free(path);
    }
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

/* ---- directory scanning ----------------------------------------------- */

typedef struct scan_item {
    char key[33];
    char *path;
    uint64_t size;
    int64_t mtime;
} scan_item;

static int is_hex2(const char *s)
{
    return strlen(s) == 2 && strchr("0123456789abcdef", s[0]) && strchr("0123456789abcdef", s[1]);
}

/* Lists every entry file of dir (and, when clean_tmp, removes temporary files
 * left behind by writers that died more than an hour ago).  Files vanishing
 * during the scan are skipped.  Returns the count; *out is malloc'd. */
static int scan_dir(const char *dir, scan_item **out, int clean_tmp)
{
    scan_item *items = NULL;
    int n = 0, cap = 0;
    DIR *d = opendir(dir);
    if (!d) {
        *out = NULL;
        return 0;
    }
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d)) != NULL) {
        if (!is_hex2(de->d_name))
            continue;
        char *sub = fg_path_join(dir, de->d_name);
        DIR *sd = opendir(sub);
        if (sd) {
            struct dirent *fe;
            while ((fe = readdir(sd)) != NULL) {
                const char *name = fe->d_name;
                size_t len = strlen(name);
                char *p = fg_path_join(sub, name);
                struct stat st;
                if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
                    free(p);
                    continue;
                }
                if (len == 36 && strcmp(name + 32, ".fgk") == 0) {
                    char k[33];
                    memcpy(k, name, 32);
                    k[32] = 0;
                    if (is_key(k)) {
                        scan_item *it = FG_PUSH(items, n, cap);
                        memcpy(it->key, k, 33);
                        it->path = p;
                        it->size = (uint64_t)st.st_size;
                        it->mtime = (int64_t)st.st_mtime;
                        continue;
                    }
                } else if (clean_tmp && strstr(name, ".fgk.tmp.") && now - st.st_mtime > STALE_TMP_SECONDS) {
                    unlink(p);
                }
                free(p);
            }
            closedir(sd);
        }
        free(sub);
    }
    closedir(d);
    *out = items;
    return n;
}

static void scan_free(scan_item *items, int n)
{
    for (int i = 0; i < n; i++)
        free(items[i].path);
    free(items);
}

static int by_mtime(const void *a, const void *b)
{
    const scan_item *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Deletes least-recently-used entries until the directory fits the limit,
 * sparing `keep` (the entry just written).  Returns the bytes that remain. */
static int64_t evict(fg_cache *c, const char *dir, const char *keep, uint64_t *evicted)
{
    scan_item *items;
    int n = scan_dir(dir, &items, 1);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += (int64_t)items[i].size;
    if ((uint64_t)total > c->limit) {
        qsort(items, (size_t)n, sizeof *items, by_mtime);
        for (int i = 0; i < n && (uint64_t)total > c->limit; i++) {
            if (keep && strcmp(items[i].key, keep) == 0)
                continue;
            if (unlink(items[i].path) == 0)
                (*evicted)++;
            /* ENOENT: another process evicted it first; either way it is gone. */
            total -= (int64_t)items[i].size;
        }
    }
    scan_free(items, n);
    return total;
}

/* ---- store ------------------------------------------------------------ */

fg_status fg_cache_put_meta(fg_cache *c, const char *key, const void *data, size_t size, const char *meta)
{
    if (!c || !is_key(key))
        return FG_ERR_INTERNAL;
    pthread_mutex_lock(&c->lock);
    mem_store_locked(c, key, data, size, meta);
    c->st.stores++;
    char *dir = c->dir ? fg_xstrdup(c->dir) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (!dir)
        return FG_OK;

    size_t len;
    unsigned char *buf = entry_encode(key, data, size, meta, &len);
    char *path = entry_path(dir, key);
    char *slash = strrchr(path, '/');
    *slash = 0;
    int rc = fg_mkdir_p(path, 0755);
    *slash = '/';
    const char *what = "cannot create a subdirectory";
    if (rc == 0) {
        rc = fg_write_file_atomic(path, buf, len);
        what = "cannot write an entry";
    }
    int err = errno;
    free(buf);
    free(path);

    pthread_mutex_lock(&c->lock);
    if (rc != 0) {
        degrade_locked(c, what, err);
        pthread_mutex_unlock(&c->lock);
        free(dir);
        return FG_OK;
    }
    int need_scan = !c->scanned;
    c->disk_bytes += (int64_t)len;
    int over = (uint64_t)(c->disk_bytes > 0 ? c->disk_bytes : 0) > c->limit;
    pthread_mutex_unlock(&c->lock);

    if (need_scan || over) {
        uint64_t ev = 0;
        int64_t remain = need_scan && !over ? -1 : 0;
        if (need_scan) {
            scan_item *items;
            int n = scan_dir(dir, &items, 1);
            int64_t total = 0;
            for (int i = 0; i < n; i++)
                total += (int64_t)items[i].size;
            scan_free(items, n);
            remain = total;
            over = (uint64_t)total > c->limit;
        }
        if (over)
            remain = evict(c, dir, key, &ev);
        pthread_mutex_lock(&c->lock);
        c->disk_bytes = remain;
        c->scanned = 1;
        c->st.evictions += ev;
        pthread_mutex_unlock(&c->lock);
    }
    free(dir);
    return FG_OK;
}

fg_status fg_cache_put(fg_cache *c, const char *key, const void *data, size_t size)
{
    return fg_cache_put_meta(c, key, data, size, NULL);
}

/* ---- clear, list, explain --------------------------------------------- */

int fg_cache_clear(fg_cache *c)
{
    if (!c)
        return 0;
    int removed = 0;
    pthread_mutex_lock(&c->lock);
    mem_entry *e, *tmp;
    int nmem = 0;
    HASH_ITER(hh, c->mem, e, tmp) {
        HASH_DEL(c->mem, e);
        free(e->data);
        free(e->meta);
        free(e);
        nmem++;
    }
    char *dir = c->dir ? fg_xstrdup(c->dir) : NULL;
    c->disk_bytes = 0;
    c->scanned = 1;
    pthread_mutex_unlock(&c->lock);
    if (!dir)
        return nmem;
    scan_item *items;
    int n = scan_dir(dir, &items, 1);
    for (int i = 0; i < n; i++)
        if (unlink(items[i].path) == 0)
            removed++;
    scan_free(items, n);
    /* Remove the now empty two-digit subdirectories (a concurrent writer's
     * files keep theirs alive: rmdir fails on a non-empty directory). */
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!is_hex2(de->d_name))
                continue;
            char *sub = fg_path_join(dir, de->d_name);
            rmdir(sub);
            free(sub);
        }
        closedir(d);
    }
    free(dir);
    return removed;
}

/* Fills e from a file; valid says whether it verified. */
static void entry_info(const char *key, const char *path, fg_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, 33);
    e->path = fg_xstrdup(path);
    size_t len = 0;
    struct stat st;
    unsigned char *buf = read_all(path, &len, &st);
    if (!buf)
        return;
    e->file_size = (uint64_t)st.st_size;
    e->mtime = (int64_t)st.st_mtime;
    const unsigned char *pl;
    const char *mt;
    uint64_t ps;
    uint32_t ms;
    if (entry_verify(buf, len, key, &pl, &ps, &mt, &ms, &e->created)) {
        e->valid = 1;
        e->payload_size = ps;
        e->meta = ms ? fg_xstrndup(mt, ms) : NULL;
    }
    free(buf);
}

int fg_cache_list(fg_cache *c, fg_cache_entry **out)
{
    *out = NULL;
    if (!c || !c->dir)
        return 0;
    scan_item *items;
    int n = scan_dir(c->dir, &items, 0);
    if (n > 1)
        qsort(items, (size_t)n, sizeof *items, by_mtime);
    fg_cache_entry *es = fg_xcalloc((size_t)(n ? n : 1), sizeof *es);
    for (int i = 0; i < n; i++)
        entry_info(items[i].key, items[i].path, &es[i]);
    scan_free(items, n);
    *out = es;
    return n;
}

int fg_cache_find_entry(fg_cache *c, const char *prefix, fg_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    size_t pl = prefix ? strlen(prefix) : 0;
    if (!c || !c->dir || pl < 4 || pl > 32)
        return 0;
    for (size_t i = 0; i < pl; i++)
        if (!strchr("0123456789abcdef", prefix[i]))
            return 0;
    scan_item *items;
    int n = scan_dir(c->dir, &items, 0), found = -1, count = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(items[i].key, prefix, pl) == 0) {
            found = i;
            count++;
        }
    if (count == 1)
        entry_info(items[found].key, items[found].path, e);
    scan_free(items, n);
    return count == 1 ? 1 : count > 1 ? -1 : 0;
}

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
