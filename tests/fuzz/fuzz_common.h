/*
 * fuzz_common.h -- helpers shared by the fuzz targets (tests/fuzz): the
 * source tree's location, private temporary directories, whole-file writes,
 * and the check every loader target makes on the error record.
 *
 * A violated check prints what it saw and calls abort(), which libFuzzer and
 * the standalone driver both report as a crash of the input being run.
 */
#ifndef FG_FUZZ_COMMON_H
#define FG_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fusegen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_FAIL(...)                                                                                                   \
    do {                                                                                                               \
        fprintf(stderr, "fuzz check failed (%s:%d): ", __FILE__, __LINE__);                                           \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fputc('\n', stderr);                                                                                           \
        abort();                                                                                                       \
    } while (0)

/* The source tree: $FUSEGEN_SOURCE_DIR, else the one this was built from. */
static inline const char *fz_source_dir(void)
{
    const char *e = getenv("FUSEGEN_SOURCE_DIR");
    return e && *e ? e : FG_SOURCE_DIR;
}

static inline int fz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static char *fz_tmp_root;

static inline void fz_cleanup(void)
{
    if (fz_tmp_root)
        nftw(fz_tmp_root, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(fz_tmp_root);
    fz_tmp_root = NULL;
}

/* A fresh directory under this process's private temporary root (removed at
 * exit); returns a malloc'd path. */
static inline char *fz_tmpdir(const char *tag)
{
    if (!fz_tmp_root) {
        const char *t = getenv("TMPDIR");
        char tmpl[4096];
        snprintf(tmpl, sizeof tmpl, "%s/fusegen-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpl))
            FZ_FAIL("mkdtemp %s: %s", tmpl, strerror(errno));
        fz_tmp_root = strdup(tmpl);
        atexit(fz_cleanup);
    }
    size_t n = strlen(fz_tmp_root) + strlen(tag) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", fz_tmp_root, tag);
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        FZ_FAIL("mkdir %s: %s", p, strerror(errno));
    return p;
}

/* Replaces path's contents with data (plain write, not atomic). */
static inline void fz_write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        FZ_FAIL("open %s: %s", path, strerror(errno));
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, (const char *)data + done, size - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            FZ_FAIL("write %s: %s", path, strerror(errno));
        done += (size_t)w;
    }
    close(fd);
}

/* An upper bound on the number of lines of text as libyaml counts them (it
 * breaks lines at LF, CR, NEL and U+2028/2029). */
static inline long fz_max_lines(const uint8_t *d, size_t n)
{
    long lines = 1;
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '\n' || d[i] == '\r')
            lines++;
        else if (d[i] == 0xC2 && i + 1 < n && d[i + 1] == 0x85)
            lines++;
        else if (d[i] == 0xE2 && i + 2 < n && d[i + 1] == 0x80 && (d[i + 2] == 0xA8 || d[i + 2] == 0xA9))
            lines++;
    }
    return lines;
}

static inline void fz_dump_errors(const fg_context *ctx, int from)
{
    char buf[1024];
    for (int i = from; i < fg_context_error_count(ctx); i++)
        fprintf(stderr, "  %s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
}

/* The error-record contract of a loader call that returned st and recorded
 * errors from index from on:
 *   - FG_OK records nothing; a failure records at least one error;
 *   - every recorded error has a valid failure status and a non-empty message;
 *   - an error with a file has a line >= 1 (and, when the file is input_file,
 *     a line within the input's max_lines + 1: the end-of-input mark) and a
 *     column >= 0. */
static inline void fz_check_errors(const fg_context *ctx, fg_status st, int from, const char *what,
                                   const char *input_file, long max_lines)
{
    int n = fg_context_error_count(ctx);
    if ((int)st < 0 || st >= FG_STATUS_COUNT)
        FZ_FAIL("%s returned an invalid status %d", what, (int)st);
    if (st == FG_OK && n != from) {
        fz_dump_errors(ctx, from);
        FZ_FAIL("%s returned FG_OK but recorded %d error(s)", what, n - from);
    }
    if (st != FG_OK && n == from)
        FZ_FAIL("%s returned %s but recorded no error", what, fg_status_name(st));
    for (int i = from; i < n; i++) {
        const fg_error *e = fg_context_error(ctx, i);
        if (!e)
            FZ_FAIL("%s: error %d of %d is NULL", what, i, n);
        if (e->status <= FG_OK || e->status >= FG_STATUS_COUNT)
            FZ_FAIL("%s: error %d has status %d", what, i, (int)e->status);
        if (!e->message || !e->message[0]) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d has an empty message", what, i);
        }
        if (e->file && e->line < 1) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d names file %s but has line %d", what, i, e->file, e->line);
        }
        if (e->col < 0) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d has column %d", what, i, e->col);
        }
        if (e->file && input_file && strcmp(e->file, input_file) == 0 && e->line > max_lines + 1) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d points at line %d of an input with at most %ld lines", what, i, e->line, max_lines);
        }
    }
}

#endif /* FG_FUZZ_COMMON_H */
