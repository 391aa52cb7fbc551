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

#include "oom.h"
#include "safe_open.h"
#include "util.h"

char *fg_read_input_file(const char *path, size_t max, size_t *len, char *why, size_t size)
{
    if (len)
        *len = 0;
    if (size)
        why[0] = 0;
    /* Opened once (as named: links followed), checked and read from the
     * descriptor (safe_open.h). */
    int fd = fg_open_beneath(AT_FDCWD, path, 0, NULL, why, size);
    if (fd < 0)
        return NULL;
    fg_oom_defer_close(fd);   /* closed if reading unwinds (oom.h) */
    char *buf = fg_read_fd(fd, max, len, why, size);
    int err = errno;
    fg_oom_close(fd);
    errno = err;
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
