/*
 * cache_disk.c -- the disk tier of the kernel cache (cache.h; the memory tier
 * and the order of the tiers are cache.c, internals in cache_impl.h): a
 * directory of verified, atomically published entry files that only the
 * current user can have written.
 *
 * Entry file <dir>/<key[0..2)>/<key>.fgk (format 2):
 *
 *   offset  size  field
 *        0     4  magic "FGKC"
 *        4     4  format version (FG_CACHE_FORMAT), little endian
 *        8     4  header size (80)
 *       12     4  metadata size
 *       16     8  payload size
 *       24     8  creation time, seconds since the epoch
 *       32    32  key (32 hex digits)
 *       64    16  XXH3-128 of bytes 0..64, the metadata and the payload
 *                 (low 64 bits, then high)
 *       80     -  metadata text, then the payload
 *
 * Every header field, the key included, is under the checksum, so an entry
 * copied under another key's name, or with its key or sizes rewritten, fails
 * verification.  The checksum detects accidents, not attacks: what keeps other
 * users out is ownership.  The directory is opened once and used through its
 * descriptor; it, each two-digit subdirectory and each entry must be owned by
 * the effective user and not writable by group or others.  Directories are
 * created 0700 and entry files 0600 whatever the umask.  A directory that
 * fails the check makes the cache memory-only with one warning.  An entry
 * file is read only after lstat and fstat show a regular file of bounded size
 * with the right owner and mode (opened O_NOFOLLOW | O_NONBLOCK, so a planted
 * symlink is not followed and a planted FIFO does not block).  A file that
 * fails any check (not the user's own, not a regular file, too large, short,
 * wrong magic / version / key, sizes that do not add up, checksum) is removed
 * when it is still the file that was examined, counted (stats.refused or
 * stats.corrupt) and reported as a miss, so the caller recompiles and
 * replaces it.  Writers publish with a temporary file (O_EXCL, 0600) and
 * renameat, so readers in other processes see the old file, the new one or
 * none, never a mix.  Eviction deletes least-recently-used files (mtime,
 * refreshed on every disk hit) until the directory fits its limit; files that
 * vanish meanwhile (another process evicting) are skipped.  Clear and
 * eviction delete only what the cache wrote: a regular file at an entry name
 * must start with the magic (entry_removable).  Writes run with SIGXFSZ
 * ignored (cache_fsz.h): a file-size limit is a failed write, not a kill.
 */
#define _GNU_SOURCE
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache_fsz.h"
#include "cache_impl.h"
#include "context.h"
#include "diag.h"
#include "num.h"
#include "util.h"

#define FG_CACHE_FORMAT 2u
#define HDR_SIZE 80u
#define SUM_OFFSET 64u              /* the checksum: bytes 64..80 */
#define STALE_TMP_SECONDS 3600
#define WHY_SIZE 160

_Static_assert(SUM_OFFSET + 16 == HDR_SIZE, "the checksum ends the header");
_Static_assert(FG_CACHE_ENTRY_MAX <= (uint64_t)SIZE_MAX / 2, "an entry fits in memory");

/* ---- entry files ------------------------------------------------------ */

/* "<key>.fgk" */
static void entry_name(const char *key, char out[40])
{
    snprintf(out, 40, "%.32s.fgk", key);
}

/* "<k0k1>/<key>.fgk", relative to the directory. */
static void entry_rel(const char *key, char out[48])
{
    snprintf(out, 48, "%.2s/%.32s.fgk", key, key);
}

/* <dir>/<k0k1>/<key>.fgk into a malloc'd string (for listings and messages). */
static char *entry_path(const char *dir, const char *key)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s/%s.fgk", dir, key, key);
    return fg_buf_take(&b);
}

/* XXH3-128 of an entry's bytes 0..SUM_OFFSET and HDR_SIZE..len (len >= HDR_SIZE). */
static fg_hash128 entry_sum(const unsigned char *buf, size_t len)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        fg_hash128 z = {0, 0};
        return z;   /* cannot happen in practice; a zero sum fails verification */
    }
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, buf, SUM_OFFSET);
    XXH3_128bits_update(st, buf + HDR_SIZE, len - HDR_SIZE);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    fg_hash128 r = {h.low64, h.high64};
    return r;
}

/* Why st (a directory or an entry file) is not the current user's own, into
 * why; returns 0 when it is. */
static int foreign(const struct stat *st, char *why, size_t n)
{
    if (st->st_uid != geteuid()) {
        snprintf(why, n, "owned by uid %u, not by the current user (uid %u)", (unsigned)st->st_uid,
                 (unsigned)geteuid());
        return 1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, n, "writable by %s (mode %04o)",
                 (st->st_mode & S_IWGRP) && (st->st_mode & S_IWOTH) ? "group and others"
                 : (st->st_mode & S_IWGRP)                          ? "group"
                                                                    : "others",
                 (unsigned)(st->st_mode & 07777));
        return 1;
    }
    return 0;
}

static const char *file_kind(mode_t m)
{
    return S_ISLNK(m) ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m)                   ? "a device"
                                                        : "not a regular file";
}

/* Checks an entry file's bytes.  On success points *payload / *meta into buf
 * and returns 1; returns 0 for anything malformed.  key may be NULL (listing
 * by file name checks the name separately). */
static int entry_verify(const unsigned char *buf, size_t len, const char *key, const unsigned char **payload,
                        uint64_t *psize, const char **meta, uint32_t *msize, int64_t *created)
{
    if (len < HDR_SIZE || memcmp(buf, "FGKC", 4) != 0)
        return 0;
    if ((uint32_t)fg_le_get(buf + 4, 4) != FG_CACHE_FORMAT || (uint32_t)fg_le_get(buf + 8, 4) != HDR_SIZE)
        return 0;
    uint32_t ms = (uint32_t)fg_le_get(buf + 12, 4);
    uint64_t ps = fg_le_get(buf + 16, 8);
    if (key && memcmp(buf + 32, key, 32) != 0)
        return 0;
    if (ps > len || ms > len || (uint64_t)HDR_SIZE + ms + ps != len)
        return 0;
    fg_hash128 h = entry_sum(buf, len);
    if (h.lo != fg_le_get(buf + SUM_OFFSET, 8) || h.hi != fg_le_get(buf + SUM_OFFSET + 8, 8))
        return 0;
    *payload = buf + HDR_SIZE + ms;
    *psize = ps;
    *meta = (const char *)buf + HDR_SIZE;
    *msize = ms;
    if (created)
        *created = (int64_t)fg_le_get(buf + 24, 8);
    return 1;
}

/* Serialises an entry (header + metadata + payload) into a malloc'd buffer. */
static unsigned char *entry_encode(const char *key, const void *data, size_t size, const char *meta, size_t *len)
{
    size_t ms = meta ? strlen(meta) : 0;
    *len = HDR_SIZE + ms + size;
    unsigned char *b = fg_xcalloc(1, *len);
    memcpy(b, "FGKC", 4);
    fg_le_put(b + 4, FG_CACHE_FORMAT, 4);
    fg_le_put(b + 8, HDR_SIZE, 4);
    fg_le_put(b + 12, (uint32_t)ms, 4);
    fg_le_put(b + 16, size, 8);
    fg_le_put(b + 24, (uint64_t)time(NULL), 8);
    memcpy(b + 32, key, 32);
    if (ms)
        memcpy(b + HDR_SIZE, meta, ms);
    if (size)
        memcpy(b + HDR_SIZE + ms, data, size);
    fg_hash128 h = entry_sum(b, *len);
    fg_le_put(b + SUM_OFFSET, h.lo, 8);
    fg_le_put(b + SUM_OFFSET + 8, h.hi, 8);
    return b;
}

/* ---- falling back to memory only -------------------------------------- */

/* Drops to memory-only after a failure to use the directory; warns once.
 * Called with c->lock held.  The directory descriptor stays open until
 * fg_cache_close (other threads may be using it). */
static void degrade_locked(fg_cache *c, const char *what, int err)
{
    if (!c->use_disk)
        return;
    if (!c->warned && c->ctx)
        fg_diag_warn(c->ctx, FG_NOLOC, "kernel cache directory '%s' is not usable (%s: %s); caching in memory only",
                     c->path, what, strerror(err));
    c->warned = 1;
    c->use_disk = 0;
}

/* Drops to memory-only because the directory tree is not the user's own;
 * warns once.  sub: the subdirectory at fault, or NULL for the directory. */
static void distrust_locked(fg_cache *c, const char *sub, const char *why)
{
    if (!c->use_disk)
        return;
    if (!c->warned && c->ctx)
        fg_diag_warn(c->ctx, FG_NOLOC,
                     "kernel cache directory '%s%s%s' is %s; not using it, caching in memory only (the directory "
                     "and its entries must belong to the current user and not be writable by group or others: "
                     "chown it, or chmod 700 it)",
                     c->path, sub ? "/" : "", sub ? sub : "", why);
    c->warned = 1;
    c->use_disk = 0;
}

static void distrust(fg_cache *c, const char *sub, const char *why)
{
    pthread_mutex_lock(&c->lock);
    distrust_locked(c, sub, why);
    pthread_mutex_unlock(&c->lock);
}

/* ---- directories ------------------------------------------------------ */

/* Creates path and its missing parents with mode 0700 (never more, whatever
 * the umask).  *created says whether path itself was made here.  Returns 0,
 * or -1 with errno. */
static int make_dirs(const char *path, int *created)
{
    *created = 0;
    char *p = fg_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            errno = e;
            return -1;
        }
        *s = '/';
    }
    int r = mkdir(p, 0700);
    int e = errno;
    free(p);
    if (r == 0) {
        *created = 1;
        return 0;
    }
    errno = e;
    return e == EEXIST ? 0 : -1;
}

/* Opens subdirectory name (two hex digits) of the cache directory without
 * following a symlink, creating it 0700 first when create.  Returns the
 * descriptor, or -1 with errno: ENOENT (absent), ENOTDIR/ELOOP (something
 * else is in its place), EPERM (not the user's own; *why says how). */
static int open_sub(fg_cache *c, const char *name, int create, char *why, size_t n)
{
    int made = 0;
    if (create) {
        if (mkdirat(c->dfd, name, 0700) == 0)
            made = 1;
        else if (errno != EEXIST)
            return -1;
    }
    int fd = openat(c->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (made && (st.st_mode & 07777) != 0700 && fchmod(fd, 0700) == 0)
        st.st_mode = (st.st_mode & ~(mode_t)07777) | 0700;
    if (foreign(&st, why, n)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* ---- opening the directory ------------------------------------------- */

void fg_cache_disk_open(fg_cache *c)
{
    /* Strip trailing slashes so paths print cleanly. */
    size_t n = strlen(c->path);
    while (n > 1 && c->path[n - 1] == '/')
        c->path[--n] = 0;

    c->use_disk = 1;   /* so that the fallbacks below warn */
    int created = 0;
    if (make_dirs(c->path, &created) != 0) {
        degrade_locked(c, "cannot create it", errno);
        return;
    }
    /* The directory itself may be a symlink (a cache on another disk); what
     * it resolves to must be the user's own. */
    c->dfd = open(c->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dfd < 0) {
        degrade_locked(c, "cannot open it", errno);
        return;
    }
    struct stat st;
    char why[WHY_SIZE];
    if (fstat(c->dfd, &st) != 0) {
        degrade_locked(c, "cannot stat it", errno);
    } else {
        if (created && (st.st_mode & 07777) != 0700 && fchmod(c->dfd, 0700) == 0)
            st.st_mode = (st.st_mode & ~(mode_t)07777) | 0700;
        if (foreign(&st, why, sizeof why))
            distrust_locked(c, NULL, why);
    }
    if (!c->use_disk) {
        close(c->dfd);
        c->dfd = -1;
    }
}

/* ---- reading and removing entry files --------------------------------- */

/* What reading one entry file found. */
typedef enum read_result {
    READ_OK = 0,    /* *buf holds the file's bytes */
    READ_ABSENT,    /* no such file */
    READ_REFUSED,   /* not a regular file, not the user's own, or too large: why says which */
    READ_ERROR,     /* could not be examined or read (errno) */
} read_result;

/* Reads entry file `name` of the directory sfd.  Refuses, without reading a
 * byte, anything but a regular file of at most FG_CACHE_ENTRY_MAX bytes owned
 * by the user and not writable by group or others: lstat first (a symlink,
 * FIFO, socket or device is never opened), then open with O_NOFOLLOW and
 * O_NONBLOCK (a file swapped in meanwhile is neither followed nor waited on)
 * and check the opened file again with fstat.  *seen gets the status of what
 * was examined (remove_seen removes that file and no other).  On READ_OK
 * *buf (malloc'd) holds *len bytes (fewer than the size when the file
 * shrank) and, when fdp is not NULL, *fdp is the open descriptor, which the
 * caller closes. */
static read_result read_entry(int sfd, const char *name, unsigned char **buf, size_t *len, int *fdp, struct stat *seen,
                              char *why, size_t n)
{
    *buf = NULL;
    *len = 0;
    if (fdp)
        *fdp = -1;
    if (fstatat(sfd, name, seen, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? READ_ABSENT : READ_ERROR;
    if (!S_ISREG(seen->st_mode)) {
        snprintf(why, n, "%s, not a regular file", file_kind(seen->st_mode));
        return READ_REFUSED;
    }
    int fd = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return READ_ABSENT;
        if (errno == ELOOP) {
            snprintf(why, n, "a symbolic link, not a regular file");
            return READ_REFUSED;   /* swapped in after the lstat; *seen no longer matches, so it stays */
        }
        return READ_ERROR;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return READ_ERROR;
    }
    *seen = st;
    read_result r = READ_REFUSED;
    if (!S_ISREG(st.st_mode))
        snprintf(why, n, "%s, not a regular file", file_kind(st.st_mode));
    else if (foreign(&st, why, n))
        ;
    else if ((uint64_t)st.st_size > FG_CACHE_ENTRY_MAX)
        snprintf(why, n, "%lld bytes, over the %llu MiB limit of an entry", (long long)st.st_size,
                 (unsigned long long)(FG_CACHE_ENTRY_MAX >> 20));
    else
        r = READ_OK;
    if (r != READ_OK) {
        close(fd);
        return r;
    }
    size_t want = (size_t)st.st_size, got = 0;
    unsigned char *b = fg_xmalloc(want + 1);
    while (got < want) {
        ssize_t k = read(fd, b + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(b);
            close(fd);
            errno = e;
            return READ_ERROR;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    *buf = b;
    *len = got;
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    return READ_OK;
}

/* Removes entry `name` of sfd if it is still the file *seen describes (not a
 * replacement another process published meanwhile).  Returns 0 when removed. */
static int remove_seen(int sfd, const char *name, const struct stat *seen)
{
    struct stat now;
    if (fstatat(sfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != seen->st_ino || now.st_dev != seen->st_dev)
        return -1;
    return unlinkat(sfd, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
}

/* Counts a refused entry and warns about the first one. */
static void note_refused(fg_cache *c, const char *key, const char *why, int removed, int64_t bytes)
{
    pthread_mutex_lock(&c->lock);
    c->st.refused++;
    if (removed)
        c->disk_bytes -= bytes;
    if (!c->warned_entry && c->ctx) {
        char *p = entry_path(c->path, key);
        fg_diag_warn(c->ctx, FG_NOLOC, "kernel cache entry '%s' is %s; %s", p, why,
                     removed ? "removed it" : "not using it");
        free(p);
    }
    c->warned_entry = 1;
    pthread_mutex_unlock(&c->lock);
}

/* ---- lookup ----------------------------------------------------------- */

/* The disk half of fg_cache_fetch.  Never returns FG_CACHE_MEMORY. */
fg_cache_where fg_cache_disk_fetch(fg_cache *c, const char *key, void **data, size_t *size, char **meta)
{
    char sub[3] = {key[0], key[1], 0}, name[40], why[WHY_SIZE];
    entry_name(key, name);
    int sfd = open_sub(c, sub, 0, why, sizeof why);
    if (sfd < 0) {
        if (errno == EPERM)
            distrust(c, sub, why);
        return FG_CACHE_MISS;   /* absent, or not a directory: the store reports that */
    }
    unsigned char *buf;
    size_t len;
    int fd;
    struct stat seen;
    fg_cache_where where = FG_CACHE_MISS;
    read_result r = read_entry(sfd, name, &buf, &len, &fd, &seen, why, sizeof why);
    if (r == READ_REFUSED) {
        int removed = remove_seen(sfd, name, &seen) == 0;
        note_refused(c, key, why, removed, S_ISREG(seen.st_mode) ? (int64_t)seen.st_size : 0);
    } else if (r == READ_OK) {
        const unsigned char *pl;
        const char *mt;
        uint64_t ps;
        uint32_t ms;
        if (entry_verify(buf, len, key, &pl, &ps, &mt, &ms, NULL)) {
            *data = fg_xmalloc(ps);
            memcpy(*data, pl, ps);
            *size = ps;
            char *mcopy = ms ? fg_xstrndup(mt, ms) : NULL;
            futimens(fd, NULL);   /* LRU: refresh mtime; failure is harmless */
            pthread_mutex_lock(&c->lock);
            fg_cache_mem_store_locked(c, key, *data, ps, mcopy);
            c->st.disk_hits++;
            pthread_mutex_unlock(&c->lock);
            if (meta)
                *meta = mcopy;
            else
                free(mcopy);
            where = FG_CACHE_DISK;
        } else {
            /* Corrupt, truncated, of another format or another key: remove
             * it unless another process has already replaced it. */
            int removed = remove_seen(sfd, name, &seen) == 0;
            pthread_mutex_lock(&c->lock);
            c->st.corrupt++;
            if (removed)
                c->disk_bytes -= (int64_t)seen.st_size;
            pthread_mutex_unlock(&c->lock);
        }
        close(fd);
        free(buf);
    }
    close(sfd);
    return where;
}

/* ---- directory scanning ----------------------------------------------- */

typedef struct scan_item {
    char key[33];
    char rel[48];    /* "<k0k1>/<key>.fgk", relative to the directory */
    uint64_t size;   /* 0 for what is not a regular file */
    int64_t mtime;
} scan_item;

static int is_hex2(const char *s)
{
    return strlen(s) == 2 && strchr("0123456789abcdef", s[0]) && strchr("0123456789abcdef", s[1]);
}

/* A fresh DIR stream over the cache directory (its own file offset). */
static DIR *open_top(fg_cache *c)
{
    int fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d)
        close(fd);
    return d;
}

/* Whether name is a writer's temporary file of subdirectory sub:
 * "<key>.fgk.tmp.<12 hex digits>" (write_atomic_at). */
static int is_tmp_name(const char *name, const char *sub)
{
    if (strlen(name) != 32 + 9 + 12 || memcmp(name + 32, ".fgk.tmp.", 9) != 0 || memcmp(name, sub, 2) != 0)
        return 0;
    for (int i = 0; i < 32 + 9 + 12; i++)
        if ((i < 32 || i >= 41) && !strchr("0123456789abcdef", name[i]))
            return 0;
    return 1;
}

/* Lists every entry file of the directory, whatever its type, so that
 * planted symlinks and FIFOs are listed as invalid and cleared or evicted
 * like any other entry (nothing is followed or opened here).  When
 * clean_tmp, temporary files left behind by writers that died more than an
 * hour ago are removed.  A subdirectory that is not the user's own makes the
 * cache memory-only (with its one warning) and is skipped.  Files vanishing
 * during the scan are skipped.  Returns the count; *out is malloc'd. */
static int scan_dir(fg_cache *c, scan_item **out, int clean_tmp)
{
    scan_item *items = NULL;
    int n = 0, cap = 0;
    *out = NULL;
    if (c->dfd < 0)
        return 0;
    DIR *d = open_top(c);
    if (!d)
        return 0;
    struct dirent *de;
    time_t now = time(NULL);
    while ((de = readdir(d)) != NULL) {
        if (!is_hex2(de->d_name))
            continue;
        char why[WHY_SIZE];
        int sfd = open_sub(c, de->d_name, 0, why, sizeof why);
        if (sfd < 0) {
            if (errno == EPERM)
                distrust(c, de->d_name, why);
            continue;
        }
        DIR *sd = fdopendir(sfd);
        if (!sd) {
            close(sfd);
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL) {
            const char *name = fe->d_name;
            size_t len = strlen(name);
            struct stat st;
            if (fstatat(dirfd(sd), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode))
                continue;
            if (len == 36 && strcmp(name + 32, ".fgk") == 0) {
                char k[33];
                memcpy(k, name, 32);
                k[32] = 0;
                if (fg_cache_is_key(k) && memcmp(k, de->d_name, 2) == 0) {
                    scan_item *it = FG_PUSH(items, n, cap);
                    memcpy(it->key, k, 33);
                    entry_rel(k, it->rel);
                    it->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
                    it->mtime = (int64_t)st.st_mtime;
                }
            } else if (clean_tmp && is_tmp_name(name, de->d_name) && now - st.st_mtime > STALE_TMP_SECONDS) {
                unlinkat(dirfd(sd), name, 0);
            }
        }
        closedir(sd);
    }
    closedir(d);
    *out = items;
    return n;
}

/* Whether the cache may delete entry file rel (relative to dfd) in clear or
 * eviction: a regular file must start with the entry magic (a file the cache
 * did not write is left alone); anything else at an entry name (a planted
 * symlink, FIFO or socket) is removed, which touches no file's content. */
static int entry_removable(int dfd, const char *rel)
{
    struct stat st;
    if (fstatat(dfd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    if (!S_ISREG(st.st_mode))
        return !S_ISDIR(st.st_mode);
    int fd = openat(dfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char m[4];
    int ours = pread(fd, m, 4, 0) == 4 && memcmp(m, "FGKC", 4) == 0;
    close(fd);
    return ours;
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
static int64_t evict(fg_cache *c, const char *keep, uint64_t *evicted)
{
    scan_item *items;
    int n = scan_dir(c, &items, 1);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += (int64_t)items[i].size;
    if ((uint64_t)total > c->limit) {
        qsort(items, (size_t)n, sizeof *items, by_mtime);
        for (int i = 0; i < n && (uint64_t)total > c->limit; i++) {
            if ((keep && strcmp(items[i].key, keep) == 0) || !entry_removable(c->dfd, items[i].rel))
                continue;
            if (unlinkat(c->dfd, items[i].rel, 0) == 0)
                (*evicted)++;
            /* ENOENT: another process evicted it first; either way it is gone. */
            total -= (int64_t)items[i].size;
        }
    }
    free(items);
    return total;
}

/* ---- store ------------------------------------------------------------ */

/* Writes data into the new file fd, sets its mode to exactly 0600 and
 * closes it; returns 0, or the errno of the first failure. */
static int fill_and_close(int fd, const void *data, size_t len)
{
    int ok = fchmod(fd, 0600) == 0 && fg_write_all(fd, data, len) == 0;
    int e = ok ? 0 : errno;
    if (close(fd) != 0 && ok)
        e = errno;
    return e;
}

/* Writes data to a new file in directory dfd under a fresh temporary name
 * (O_CREAT | O_EXCL | O_NOFOLLOW, mode exactly 0600) and renames it to name,
 * which replaces whatever was there (a symlink is replaced, not followed).
 * Returns 0, or -1 with errno. */
static int write_atomic_at(int dfd, const char *name, const void *data, size_t len)
{
    static uint64_t counter;
    char tmp[96];
    int fd = -1;
    for (int attempt = 0; attempt < 32 && fd < 0; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed[4] = {(uint64_t)getpid(), (uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec,
                            __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED)};
        uint64_t r = fg_hash64(seed, sizeof seed);
        snprintf(tmp, sizeof tmp, "%s.tmp.%012llx", name, (unsigned long long)(r & 0xffffffffffffull));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    int e = fill_and_close(fd, data, len), ok = e == 0;
    if (ok && renameat(dfd, tmp, dfd, name) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlinkat(dfd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

void fg_cache_disk_store(fg_cache *c, const char *key, const void *data, size_t size, const char *meta)
{
    size_t ms = meta ? strlen(meta) : 0;
    if (ms > UINT32_MAX || (uint64_t)HDR_SIZE + ms + size > FG_CACHE_ENTRY_MAX)
        return;   /* memory only (an entry too large for the disk stays in memory) */

    size_t len;
    unsigned char *buf = entry_encode(key, data, size, meta, &len);
    char sub[3] = {key[0], key[1], 0}, name[40], why[WHY_SIZE];
    entry_name(key, name);
    int rc = -1, err;
    const char *what = "cannot create a subdirectory";
    int sfd = open_sub(c, sub, 1, why, sizeof why);
    err = errno;
    if (sfd >= 0) {
        fg_cache_fsz_begin();   /* a file-size limit: EFBIG, a failed write, not SIGXFSZ */
        rc = write_atomic_at(sfd, name, buf, len);
        fg_cache_fsz_end();
        err = errno;
        what = "cannot write an entry";
        close(sfd);
    }
    free(buf);

    pthread_mutex_lock(&c->lock);
    if (rc != 0) {
        if (sfd < 0 && err == EPERM)
            distrust_locked(c, sub, why);
        else
            degrade_locked(c, what, err);
        pthread_mutex_unlock(&c->lock);
        return;
    }
    int need_scan = !c->scanned;
    c->disk_bytes += (int64_t)len;
    int over = (uint64_t)(c->disk_bytes > 0 ? c->disk_bytes : 0) > c->limit;
    pthread_mutex_unlock(&c->lock);

    if (need_scan || over) {
        uint64_t ev = 0;
        int64_t remain = 0;
        if (need_scan) {
            scan_item *items;
            int n = scan_dir(c, &items, 1);
            int64_t total = 0;
            for (int i = 0; i < n; i++)
                total += (int64_t)items[i].size;
            free(items);
            remain = total;
            over = (uint64_t)total > c->limit;
        }
        if (over)
            remain = evict(c, key, &ev);
        pthread_mutex_lock(&c->lock);
        c->disk_bytes = remain;
        c->scanned = 1;
        c->st.evictions += ev;
        pthread_mutex_unlock(&c->lock);
    }
}

/* ---- clear, list, explain --------------------------------------------- */

int fg_cache_disk_clear(fg_cache *c)
{
    int removed = 0;
    scan_item *items;
    int n = scan_dir(c, &items, 1);
    for (int i = 0; i < n; i++)
        if (entry_removable(c->dfd, items[i].rel) && unlinkat(c->dfd, items[i].rel, 0) == 0)
            removed++;
    free(items);
    /* Remove the now empty two-digit subdirectories (a concurrent writer's
     * files keep theirs alive: rmdir fails on a non-empty directory). */
    DIR *d = open_top(c);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (is_hex2(de->d_name))
                unlinkat(c->dfd, de->d_name, AT_REMOVEDIR);
        closedir(d);
    }
    return removed;
}

/* Fills e from an entry file, read like a lookup does (nothing followed,
 * nothing waited on, nothing removed); valid says whether it verified. */
static void entry_info(fg_cache *c, const char *key, fg_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, 33);
    e->path = entry_path(c->path, key);
    char sub[3] = {key[0], key[1], 0}, name[40], why[WHY_SIZE];
    entry_name(key, name);
    int sfd = open_sub(c, sub, 0, why, sizeof why);
    if (sfd < 0)
        return;
    unsigned char *buf;
    size_t len;
    struct stat seen;
    read_result r = read_entry(sfd, name, &buf, &len, NULL, &seen, why, sizeof why);
    close(sfd);
    if (r == READ_ABSENT || r == READ_ERROR)
        return;
    e->file_size = (uint64_t)seen.st_size;
    e->mtime = (int64_t)seen.st_mtime;
    const unsigned char *pl;
    const char *mt;
    uint64_t ps;
    uint32_t ms;
    if (r == READ_OK && entry_verify(buf, len, key, &pl, &ps, &mt, &ms, &e->created)) {
        e->valid = 1;
        e->payload_size = ps;
        e->meta = ms ? fg_xstrndup(mt, ms) : NULL;
    }
    free(buf);
}

int fg_cache_list(fg_cache *c, fg_cache_entry **out)
{
    *out = NULL;
    if (!c || !fg_cache_disk_on(c))
        return 0;
    scan_item *items;
    int n = scan_dir(c, &items, 0);
    if (n > 1)
        qsort(items, (size_t)n, sizeof *items, by_mtime);
    fg_cache_entry *es = fg_xcalloc((size_t)(n ? n : 1), sizeof *es);
    for (int i = 0; i < n; i++)
        entry_info(c, items[i].key, &es[i]);
    free(items);
    *out = es;
    return n;
}

int fg_cache_find_entry(fg_cache *c, const char *prefix, fg_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    size_t pl = prefix ? strlen(prefix) : 0;
    if (!c || !fg_cache_disk_on(c) || pl < 4 || pl > 32)
        return 0;
    for (size_t i = 0; i < pl; i++)
        if (!strchr("0123456789abcdef", prefix[i]))
            return 0;
    scan_item *items;
    int n = scan_dir(c, &items, 0), found = -1, count = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(items[i].key, prefix, pl) == 0) {
            found = i;
            count++;
        }
    if (count == 1)
        entry_info(c, items[found].key, e);
    free(items);
    return count == 1 ? 1 : count > 1 ? -1 : 0;
}

/* ---- verified payloads for loaders ------------------------------------ */

int fg_cache_write_private(const char *dir, const char *name, const void *data, size_t size, char **path)
{
    if (path)
        *path = NULL;
    if (!dir || !*dir || !name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
        (size && !data)) {
        errno = EINVAL;
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    struct stat st;
    if (fstat(dfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        close(dfd);
        errno = EPERM;
        return -1;
    }
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        close(dfd);
        errno = e;
        return -1;
    }
    fg_cache_fsz_begin();
    int e = fill_and_close(fd, data, size), ok = e == 0;
    fg_cache_fsz_end();
    if (!ok)
        unlinkat(dfd, name, 0);
    close(dfd);
    if (!ok) {
        errno = e;
        return -1;
    }
    if (path)
        *path = fg_path_join(dir, name);
    return 0;
}
