/*
 * testutil.h -- helpers shared by the cmocka unit tests.  Include after
 * <cmocka.h>'s prerequisites (stdarg, stddef, setjmp, stdint).
 */
#ifndef FG_TESTUTIL_H
#define FG_TESTUTIL_H

#include "context.h"

/* Absolute path of a file in the source tree (static buffer per call slot). */
const char *tu_src(const char *rel);
/* Creates a fresh temporary directory; returns its malloc'd path. */
char *tu_tmpdir(void);
/* Writes text to dir/name (creating dir); returns the malloc'd full path. */
char *tu_write(const char *dir, const char *name, const char *text);
/* Removes a directory tree (rm -rf). */
void tu_rmtree(const char *dir);
/* A fresh temporary directory holding copies of the shipped vocabulary
 * (rules/ops.yaml, rules/pointwise.yaml) and no fusion rules; malloc'd path. */
char *tu_vocab_dir(void);
/* "rule:node1,node2" of the plan group holding node `name` ("-" for no rule);
 * fails the test when the node is in no group.  Static buffer. */
const char *tu_group_desc(const fg_context *ctx, const fg_plan *p, const char *name);
/* Runs compiled plan e of source graph g once on seeded random inputs
 * (rounded to each input's dtype) with NaN-poisoned outputs, and asserts that
 * every output is within relative L2 `tol` of the host reference of g. */
void tu_exec_vs_reference(fg_context *ctx, const fg_graph *g, struct fg_exec *e, uint64_t seed, double tol);
/* A context with no rules loaded (quiet warnings). */
fg_context *tu_ctx_empty(void);
/* A context with the shipped rules/ loaded; fails the test if they do not load. */
fg_context *tu_ctx_shipped(void);
/* Nonzero when some recorded error's formatted text contains needle. */
int tu_has_error(const fg_context *ctx, const char *needle);
/* Prints all recorded errors to stderr (for failing tests). */
void tu_dump_errors(const fg_context *ctx);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd), returns
 * the exit status (0..255) or -1. */
int tu_run(const char *cmd, char **out);

#endif
