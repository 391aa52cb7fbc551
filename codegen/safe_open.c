/*
 * safe_open.c -- opening input files once, beneath an opened directory,
 * and reading them from the descriptor (contract in safe_open.h).
 */
#include "safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static int fail(int err, char *why, size_t whysz, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Writes the reason, sets errno to err and returns -1. */
static int fail(int err, char *why, size_t whysz, const char *fmt, ...)
{
    if (why && whysz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whysz, fmt, ap);
        va_end(ap);
    }
    errno = err;
    return -1;
}

const char *fg_file_kind(unsigned mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a regular file";
}

/* Refuses what is not a regular file; 0 when st describes one. */
static int check_regular(const struct stat *st, char *why, size_t whysz)
{
    if (S_ISREG(st->st_mode))
        return 0;
    return fail(S_ISDIR(st->st_mode) ? EISDIR : EINVAL, why, whysz, "not a regular file (%s)",
                fg_file_kind(st->st_mode));
}

int fg_dir_open(const char *path, char *why, size_t whysz)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fail(e, why, whysz, "cannot open directory %s: %s", path, strerror(e));
    }
    return fd;
}

int fg_dir_open_parent(const char *path, const char **base, char *why, size_t whysz)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        *base = path;
        return fg_dir_open(".", why, whysz);
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = fg_xmalloc(n + 1);
    memcpy(dir, path, n);
    dir[n] = 0;
    *base = slash + 1;
    int fd = fg_dir_open(dir, why, whysz);
    free(dir);
    return fd;
}

/* Opens the last component name beneath directory cur and checks it. */
static int open_last(int cur, const char *name, int nofollow, uint64_t *size, char *why, size_t whysz)
{
    struct stat st;
    /* Look before opening (opening a device can have effects of its own);
     * what is read is decided by the fstat of the opened descriptor below. */
    if (fstatat(cur, name, &st, nofollow ? AT_SYMLINK_NOFOLLOW : 0) == 0) {
        if (nofollow && S_ISLNK(st.st_mode))
            return fail(ELOOP, why, whysz, "is a symbolic link (refused: it could lead out of the directory)");
        if (check_regular(&st, why, whysz))
            return -1;
    }
    int fd = openat(cur, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        int e = errno;
        if (nofollow && e == ELOOP)
            return fail(e, why, whysz, "is a symbolic link (refused: it could lead out of the directory)");
        return fail(e, why, whysz, "%s", strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(e, why, whysz, "%s", strerror(e));
    }
    if (check_regular(&st, why, whysz)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

int fg_open_beneath(int dirfd, const char *rel, int flags, uint64_t *size, char *why, size_t whysz)
{
    if (!rel || !*rel)
        return fail(EINVAL, why, whysz, "is an empty path");
    if (!(flags & FG_OPEN_NOFOLLOW))
        return open_last(dirfd, rel, 0, size, why, whysz);
    if (rel[0] == '/')
        return fail(EPERM, why, whysz, "is an absolute path (refused: it must be relative to the directory)");
    char *copy = fg_xstrdup(rel);
    char *comps[256];
    int n = 0;
    for (char *s = copy, *tok; (tok = strsep(&s, "/"));) {
        if (!*tok || strcmp(tok, ".") == 0)
            continue;
        if (strcmp(tok, "..") == 0) {
            free(copy);
            return fail(EPERM, why, whysz, "has a '..' component (refused: it could lead out of the directory)");
        }
        if (n == (int)FG_COUNTOF(comps)) {
            free(copy);
            return fail(ENAMETOOLONG, why, whysz, "has more than %d components", (int)FG_COUNTOF(comps));
        }
        comps[n++] = tok;
    }
    if (n == 0 || rel[strlen(rel) - 1] == '/') {
        free(copy);
        return fail(EISDIR, why, whysz, "names a directory, not a file");
    }
    int cur = dirfd, fd = -1;
    for (int i = 0; i < n - 1; i++) {
        int next = openat(cur, comps[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            struct stat st;
            if ((e == ELOOP || e == ENOTDIR) && fstatat(cur, comps[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                fail(ELOOP, why, whysz, "passes through the symbolic link '%s' (refused: it could lead out of the "
                     "directory)", comps[i]);
            else
                fail(e, why, whysz, "%s: %s", comps[i], strerror(e));
            goto out;
        }
        if (cur != dirfd)
            close(cur);
        cur = next;
    }
    fd = open_last(cur, comps[n - 1], 1, size, why, whysz);
out:;
    int e = errno;
    if (cur != dirfd)
        close(cur);
    free(copy);
    errno = e;
    return fd;
}

int fg_open_beside(const char *path, int *dirfd, uint64_t *size, char *why, size_t whysz)
{
    const char *base;
    *dirfd = fg_dir_open_parent(path, &base, why, whysz);
    if (*dirfd < 0)
        return -1;
    int fd = open_last(*dirfd, base, 0, size, why, whysz);
    if (fd < 0) {
        int e = errno;
        close(*dirfd);
        *dirfd = -1;
        errno = e;
    }
    return fd;
}

const char *fg_reason_sep(const char *why)
{
    static const char *const verbs[] = {"is ", "has ", "passes ", "names "};
    for (size_t i = 0; i < FG_COUNTOF(verbs); i++)
        if (strncmp(why, verbs[i], strlen(verbs[i])) == 0)
            return " ";
    return ": ";
}

/* Writes a byte count for messages: "12 bytes", "16 MiB", "16.0 MiB". */
static void put_size(char *out, size_t size, unsigned long long bytes)
{
    if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0)
        snprintf(out, size, "%llu MiB", bytes >> 20);
    else if (bytes >= (1ULL << 20))
        snprintf(out, size, "%.1f MiB", (double)bytes / (double)(1ULL << 20));
    else
        snprintf(out, size, "%llu bytes", bytes);
}

char *fg_read_fd(int fd, size_t max, size_t *len, char *why, size_t whysz)
{
    struct stat st;
    if (len)
        *len = 0;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        fail(e, why, whysz, "%s", strerror(e));
        return NULL;
    }
    if (check_regular(&st, why, whysz))
        return NULL;
    off_t at = lseek(fd, 0, SEEK_CUR);
    unsigned long long left = at >= 0 && st.st_size > at ? (unsigned long long)(st.st_size - at) : 0;
    if (left > max) {
        char a[32], b[32];
        put_size(a, sizeof a, (unsigned long long)st.st_size);
        put_size(b, sizeof b, max);
        fail(EFBIG, why, whysz, "the file is %s, more than the %s limit", a, b);
        return NULL;
    }
    size_t cap = (size_t)left + 1, n = 0;
    char *buf = fg_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max) {   /* grew past the limit while being read */
                char b[32];
                put_size(b, sizeof b, max);
                free(buf);
                fail(EFBIG, why, whysz, "the file grew past the %s limit while it was read", b);
                return NULL;
            }
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            buf = fg_xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            fail(e, why, whysz, "%s", strerror(e));
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}
