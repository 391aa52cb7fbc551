/*
 * cache_stats.c -- the cache directory's per-tier counters (cache_stats.h):
 * a small text file read and rewritten under flock.
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

#include "env.h"
#include "util.h"

#define STATS_FILE "stats"
#define STATS_MAX 8192   /* the file is a few hundred bytes; a larger one is not ours */

static const char *const names[] = {
    "memory_hits",     "disk_hits",      "remote_hits",   "compiled",      "remote_lookups",   "remote_misses",
    "remote_rejected", "remote_errors",  "remote_skipped", "remote_stores", "remote_oversized",
};
FG_STATIC_ASSERT(FG_COUNTOF(names) == FG_TC_COUNT, "names out of sync with fg_tier_counter");

const char *fg_tier_counter_name(fg_tier_counter c)
{
    return (unsigned)c < FG_TC_COUNT ? names[c] : "?";
}

/* Opens <dir>/stats (creating it 0600 when create) and takes the lock.
 * Returns the descriptor, or -1 (absent without create: errno ENOENT). */
static int stats_open(const char *dir, int create, int lock)
{
    if (!dir || !*dir)
        return -1;
    char *path = fg_path_join(dir, STATS_FILE);
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    free(path);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) ||
        st.st_size > STATS_MAX || flock(fd, lock) != 0) {
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
    for (int i = 0; i < FG_TC_COUNT; i++)
        fg_buf_printf(&b, "%s %llu\n", names[i], (unsigned long long)(v[i] > INT64_MAX ? INT64_MAX : v[i]));
    int ok = ftruncate(fd, 0) == 0 && pwrite(fd, b.s, b.len, 0) == (ssize_t)b.len;
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
    if (!dir || !*dir)
        return;
    char *path = fg_path_join(dir, STATS_FILE);
    unlink(path);
    free(path);
}
