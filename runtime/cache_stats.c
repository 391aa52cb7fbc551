/*
 * cache_stats.c -- the cache directory's per-tier counters (cache_stats.h):
 * a small text file read and rewritten under flock.  The file starts with
 * a header line (STATS_MAGIC); one without it (or, from earlier versions,
 * without a first counter line "memory_hits N") is not the cache's and is
 * never rewritten or removed.  It is created with its header in place (a
 * temporary file linked to the name), so no other process sees it empty.
 */
#define _GNU_SOURCE
#include "cache_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_fsz.h"
#include "env.h"
#include "num.h"
#include "util.h"

#define STATS_FILE "stats"
#define STATS_MAX 8192   /* the file is a few hundred bytes; a larger one is not ours */
#define STATS_MAGIC "# fusegen cache counters 1\n"
#define STATS_LEGACY "memory_hits "   /* how files of earlier versions start */

static const char *const names[] = {
    "memory_hits",     "disk_hits",      "remote_hits",   "compiled",      "remote_lookups",   "remote_misses",
    "remote_rejected", "remote_errors",  "remote_skipped", "remote_stores", "remote_oversized",
};
FG_STATIC_ASSERT(FG_COUNTOF(names) == FG_TC_COUNT, "names out of sync with fg_tier_counter");

const char *fg_tier_counter_name(fg_tier_counter c)
{
    return (unsigned)c < FG_TC_COUNT ? names[c] : "?";
}

/* Whether the open file fd starts as a counters file does. */
static int stats_is_ours(int fd)
{
    char head[sizeof STATS_MAGIC];
    ssize_t n = pread(fd, head, sizeof head - 1, 0);
    if (n < 0)
        return 0;
    head[n] = 0;
    return strncmp(head, STATS_MAGIC, strlen(STATS_MAGIC)) == 0 ||
           strncmp(head, STATS_LEGACY, strlen(STATS_LEGACY)) == 0;
}

/* Creates <dir>/stats holding only its header, unless something has that
 * name already: written to a temporary file (0600) and linked to the name,
 * which fails rather than replaces. */
static void stats_create(const char *dir)
{
    static unsigned counter;
    char tmp[64];
    snprintf(tmp, sizeof tmp, STATS_FILE ".tmp.%ld.%u", (long)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    char *tpath = fg_path_join(dir, tmp), *path = fg_path_join(dir, STATS_FILE);
    int fd = open(tpath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        fg_cache_fsz_begin();
        int ok = fchmod(fd, 0600) == 0 && fg_write_all(fd, STATS_MAGIC, strlen(STATS_MAGIC)) == 0;
        fg_cache_fsz_end();
        if (close(fd) == 0 && ok)
            (void)link(tpath, path);   /* EEXIST: another process made it, or a foreign file */
        unlink(tpath);
    }
    free(tpath);
    free(path);
}

/* Opens <dir>/stats (creating it 0600 when create) and takes the lock.
 * Returns the descriptor, or -1 (absent without create: errno ENOENT; a
 * file that is not the cache's: EPERM). */
static int stats_open(const char *dir, int create, int lock)
{
    if (!dir || !*dir)
        return -1;
    char *path = fg_path_join(dir, STATS_FILE);
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        stats_create(dir);
        fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    }
    free(path);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
        st.st_size > STATS_MAX || flock(fd, lock) != 0 || !stats_is_ours(fd)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Parses the file's lines into v (added to what is there). */
static void stats_parse(int fd, uint64_t v[FG_TC_COUNT])
{
    char buf[STATS_MAX + 1];
    ssize_t n = pread(fd, buf, STATS_MAX, 0);
    if (n <= 0)
        return;
    buf[n] = 0;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = 0;
        long long x;
        for (int i = 0; i < FG_TC_COUNT; i++)
            if (strcmp(line, names[i]) == 0 && fg_parse_count(sp + 1, 0, INT64_MAX, &x) == 0)
                v[i] += (uint64_t)x;
    }
}

static int stats_write(int fd, const uint64_t v[FG_TC_COUNT])
{
    fg_buf b = {0};
    fg_buf_put(&b, STATS_MAGIC);
    for (int i = 0; i < FG_TC_COUNT; i++)
        fg_buf_printf(&b, "%s %llu\n", names[i], (unsigned long long)(v[i] > INT64_MAX ? INT64_MAX : v[i]));
    fg_cache_fsz_begin();
    int ok = ftruncate(fd, 0) == 0 && pwrite(fd, b.s, b.len, 0) == (ssize_t)b.len;
    fg_cache_fsz_end();
    fg_buf_free(&b);
    return ok ? 0 : -1;
}

int fg_cache_stats_add(const char *dir, const uint64_t add[FG_TC_COUNT])
{
    int any = 0;
    for (int i = 0; i < FG_TC_COUNT; i++)
        any |= add[i] != 0;
    if (!any)
        return 0;
    int fd = stats_open(dir, 1, LOCK_EX);
    if (fd < 0)
        return -1;
    uint64_t v[FG_TC_COUNT] = {0};
    stats_parse(fd, v);
    for (int i = 0; i < FG_TC_COUNT; i++)
        v[i] += add[i];
    int r = stats_write(fd, v);
    close(fd);   /* releases the lock */
    return r;
}

int fg_cache_stats_read(const char *dir, uint64_t out[FG_TC_COUNT])
{
    memset(out, 0, sizeof(uint64_t) * FG_TC_COUNT);
    int fd = stats_open(dir, 0, LOCK_SH);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    stats_parse(fd, out);
    close(fd);
    return 0;
}

int fg_cache_stats_zero(const char *dir)
{
    int fd = stats_open(dir, 1, LOCK_EX);
    if (fd < 0)
        return -1;
    uint64_t v[FG_TC_COUNT] = {0};
    int r = stats_write(fd, v);
    close(fd);
    return r;
}

void fg_cache_stats_remove(const char *dir)
{
    int fd = stats_open(dir, 0, LOCK_EX);   /* only the cache's own file */
    if (fd < 0)
        return;
    struct stat st, now;
    char *path = fg_path_join(dir, STATS_FILE);
    if (fstat(fd, &st) == 0 && lstat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
        unlink(path);
    free(path);
    close(fd);
}
