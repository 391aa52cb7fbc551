/*
 * safe_open.h -- opening input files once.  A loader that reads a file
 * relative to a model's or graph's directory opens that directory once
 * (fg_dir_open, fg_dir_open_parent) and then the file beneath the opened
 * directory descriptor, component by component with openat (fg_open_beneath):
 * with FG_OPEN_NOFOLLOW an absolute path, a ".." component and a symbolic
 * link anywhere in the relative path are refused, so what is opened lies in
 * the directory whatever is renamed or swapped meanwhile.  What was opened
 * is checked on the descriptor (fstat: a regular file, its size) and read
 * from it only (fg_read_fd); no path is resolved twice.
 *
 * Every function returns -1 (or NULL) with a one-line reason in
 * why[0..whysz): a phrase to follow the file's name ("is a symbolic link;
 * ...", "has a '..' component ..."), or "not a regular file (a FIFO)" or
 * strerror text; fg_reason_sep says how to join it.  errno is set.
 */
#ifndef FG_SAFE_OPEN_H
#define FG_SAFE_OPEN_H

#include <stddef.h>
#include <stdint.h>

/* fg_open_beneath flags. */
enum {
    FG_OPEN_NOFOLLOW = 1,   /* refuse absolute paths, ".." and symbolic links in the relative path */
};

/* Opens the directory path (O_DIRECTORY; links in path are followed: the
 * caller named it) for use as the root of fg_open_beneath.  Returns the
 * descriptor, or -1 with a reason. */
int fg_dir_open(const char *path, char *why, size_t whysz);

/* Opens the directory that holds path (the part before its last '/', "/"
 * for "/name", "." without a slash) and points *base at path's last
 * component.  Returns the descriptor, or -1 with a reason. */
int fg_dir_open_parent(const char *path, const char **base, char *why, size_t whysz);

/* Opens the regular file rel beneath the directory descriptor dirfd
 * (AT_FDCWD: the working directory) for reading, never blocking on a FIFO or
 * taking a terminal.  Without FG_OPEN_NOFOLLOW rel is opened as named (links
 * followed), with it see the top of this file.  The opened descriptor is
 * checked with fstat: a regular file, whose size goes to *size (may be
 * NULL).  Returns the descriptor, or -1 with a reason. */
int fg_open_beneath(int dirfd, const char *rel, int flags, uint64_t *size, char *why, size_t whysz);

/* Opens path's directory (fg_dir_open_parent) and then path's last
 * component beneath it as fg_open_beneath without flags does (path was
 * named by the caller): the file of a model or graph whose neighbours are
 * opened relative to *dirfd afterwards.  Returns the file's descriptor with
 * the directory's in *dirfd, or -1 (nothing left open) with a reason. */
int fg_open_beside(const char *path, int *dirfd, uint64_t *size, char *why, size_t whysz);

/* Reads the rest of the regular file open as fd (from its current offset),
 * at most max bytes, into a malloc'd buffer with a NUL after the bytes; a
 * file that grows past max while it is read is refused (EFBIG).  Returns
 * the buffer (its length in *len), or NULL with a reason. */
char *fg_read_fd(int fd, size_t max, size_t *len, char *why, size_t whysz);

/* What goes between a file's name and a reason of these functions in a
 * message: " " before a phrase ("is a symbolic link ..."), else ": ". */
const char *fg_reason_sep(const char *why);

/* A file kind for messages: "a directory", "a FIFO", ... (st_mode bits). */
const char *fg_file_kind(unsigned mode);

#endif /* FG_SAFE_OPEN_H */
