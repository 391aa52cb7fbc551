/*
 * input_file.h -- reading the files that a rules directory or a graph path
 * names: regular files only, of bounded size, opened so that a FIFO or a
 * device can never block or feed the loader without end; and the file names
 * a rules directory may use (they reach generated source as provenance
 * comments and error messages).
 */
#ifndef FG_INPUT_FILE_H
#define FG_INPUT_FILE_H

#include <stddef.h>

/* Size limits: one file of a rules directory (YAML or Lua), and a graph. */
#define FG_RULES_FILE_MAX ((size_t)16 << 20)
#define FG_GRAPH_FILE_MAX ((size_t)256 << 20)

/* Reads the regular file at path (symbolic links followed) of at most max
 * bytes into a malloc'd NUL-terminated buffer.  Anything else (a directory,
 * a FIFO, a device, a socket, a file larger than max, or one that grows past
 * max while it is read) is refused without reading it: returns NULL with a
 * reason ("not a regular file (a FIFO)", "is 20 MiB, more than the 16 MiB
 * limit", strerror text) in why[0..size) and errno set (ENOENT and the
 * like from the system, EISDIR, EINVAL for other kinds of file, EFBIG). */
char *fg_read_input_file(const char *path, size_t max, size_t *len, char *why, size_t size);

/* Nonzero when name is a file name a rules directory may hold: 1 to 255
 * bytes of letters, digits, '.', '_', '-' and '+', not starting with '-'. */
int fg_rules_file_name_ok(const char *name);

/* Nonzero when path contains a control character (bytes 0x01-0x1f, 0x7f). */
int fg_has_control_chars(const char *path);

/* Writes s into out[0..size) with every byte outside printable ASCII (and
 * the backslash and single quote) escaped as \n, \t, \\, \' or \xHH, cut
 * with "..." when it does not fit.  Returns out. */
char *fg_escape_name(const char *s, char *out, size_t size);

#endif /* FG_INPUT_FILE_H */
