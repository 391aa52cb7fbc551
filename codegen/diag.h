/*
 * diag.h -- the error record.  Every module reports problems through
 * fg_diag_error(), which appends an fg_error (problem + location) to the
 * context.  Locations point at user files: rule/op/graph YAML, Lua hooks,
 * generated sources.  File name strings are interned in the context and live
 * as long as it does.  Implemented in diag.c, with the names of the public
 * enums.
 */
#ifndef FG_DIAG_H
#define FG_DIAG_H

#include "fusegen.h"

/* A position in a user file: 1-based line and column, 0 when unknown. */
typedef struct fg_loc {
    const char *file;   /* interned (fg_intern) or NULL */
    int line;
    int col;
} fg_loc;

#define FG_NOLOC ((fg_loc){NULL, 0, 0})

/* Records an error and returns its status, so callers can write
 *   return fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown op '%s'", name); */
fg_status fg_diag_error(fg_context *ctx, fg_status st, fg_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records a warning (not counted as an error) and hands the line
 * "file:line:col: warning: ..." to the context's log function (by default
 * stderr, unless quiet).  Both functions do nothing but return when ctx is
 * NULL. */
void fg_diag_warn(fg_context *ctx, fg_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees the recorded errors, warnings and interned strings (fg_context_free). */
void fg_diag_free(fg_context *ctx);

/* Returns a copy of s owned by the context (identical strings share storage). */
const char *fg_intern(fg_context *ctx, const char *s);

/* "did you mean" helper: the candidate closest to name within a small edit
 * distance, or NULL. */
const char *fg_suggest(const char *name, const char *const *candidates, int n);
/* Records "unknown <what> '<name>'" at loc, with "(did you mean 'x'?)" when
 * fg_suggest finds a close candidate; returns FG_ERR_INPUT. */
fg_status fg_diag_unknown(fg_context *ctx, fg_loc loc, const char *what, const char *name,
                          const char *const *candidates, int n);

/* A file path as plan tables, notes and messages show it: relative to the
 * current directory (read once per thread) when it lies below it, else
 * unchanged; "?" for NULL. */
const char *fg_short_path(const char *path);

#endif /* FG_DIAG_H */
