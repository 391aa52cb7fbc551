/*
 * input_file.c -- bounded reads of regular files for the loaders (rules
 * directories, hook files, graphs), the file names a rules directory may
 * hold, and escaping of names for messages.  See input_file.h.
 */
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

static void put_size(char *out, size_t size, unsigned long long bytes)
{
    if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0)
        snprintf(out, size, "%llu MiB", bytes >> 20);
    else if (bytes >= (1ULL << 20))
        snprintf(out, size, "%.1f MiB", (double)bytes / (double)(1ULL << 20));
    else
        snprintf(out, size, "%llu bytes", bytes);
}

/* Refuses what is not a regular file of at most max bytes; 0 when fine. */
static int check_stat(const struct stat *st, size_t max, char *why, size_t size)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, size, "not a regular file (%s)", file_kind(st->st_mode));
        errno = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    if (st->st_size < 0 || (unsigned long long)st->st_size > max) {
        char a[32], b[32];
        put_size(a, sizeof a, (unsigned long long)st->st_size);
        put_size(b, sizeof b, max);
        snprintf(why, size, "the file is %s, more than the %s limit", a, b);
        errno = EFBIG;
        return -1;
    }
    return 0;
}

char *fg_read_input_file(const char *path, size_t max, size_t *len, char *why, size_t size)
{
    struct stat st;
    if (len)
        *len = 0;
    if (size)
        why[0] = 0;
    /* Look before opening: opening a device can have effects of its own. */
    if (stat(path, &st) != 0) {
        snprintf(why, size, "%s", strerror(errno));
        return NULL;
    }
    if (check_stat(&st, max, why, size) != 0)
        return NULL;
    /* O_NONBLOCK: a FIFO swapped in after the stat does not block the open. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, size, "%s", strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || check_stat(&st, max, why, size) != 0) {
        int err = errno;
        if (!why[0])
            snprintf(why, size, "%s", strerror(err));
        close(fd);
        errno = err;
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = fg_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max) {   /* grew past the limit while being read */
                char b[32];
                put_size(b, sizeof b, max);
                snprintf(why, size, "the file grew past the %s limit while it was read", b);
                errno = EFBIG;
                free(buf);
                close(fd);
                return NULL;
            }
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            buf = fg_xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            snprintf(why, size, "%s", strerror(err));
            free(buf);
            close(fd);
            errno = err;
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int fg_rules_file_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 255 || name[0] == '-')
        return 0;
    for (const char *c = name; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                 *c == '_' || *c == '-' || *c == '+';
        if (!ok)
            return 0;
    }
    return 1;
}

int fg_has_control_chars(const char *path)
{
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return 1;
    return 0;
}

char *fg_escape_name(const char *s, char *out, size_t size)
{
    size_t o = 0;
    if (size == 0)
        return out;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char piece[8];
        if (*c == '\n')
            strcpy(piece, "\\n");
        else if (*c == '\t')
            strcpy(piece, "\\t");
        else if (*c == '\\' || *c == '\'')
            snprintf(piece, sizeof piece, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f)
            snprintf(piece, sizeof piece, "\\x%02x", *c);
        else
            snprintf(piece, sizeof piece, "%c", *c);
        size_t k = strlen(piece);
        if (o + k + 4 > size) {   /* room for "..." and the NUL */
            if (o + 4 <= size)
                memcpy(out + o, "...", 3), o += 3;
            break;
        }
        memcpy(out + o, piece, k);
        o += k;
    }
    out[o < size ? o : size - 1] = 0;
    return out;
}
