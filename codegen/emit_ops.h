/*
 * emit_ops.h -- the template families of the re-indexing and row kinds:
 * copy (reshape, transpose, concat; emit_copy.c, templates/copy.cuh),
 * softmax (emit_softmax.c, templates/softmax.cuh), lrn (emit_lrn.c,
 * templates/lrn.cuh) and reduce (emit_reduce.c, templates/reduce.cuh), and
 * the index helpers they share.  The template
 * registry (template.c) points at the emitters and checks.
 */
#ifndef FG_EMIT_OPS_H
#define FG_EMIT_OPS_H

#include "emit_impl.h"

struct fg_tcand;

fg_status fg_emit_copy(fg_emitter *em);
fg_status fg_emit_softmax(fg_emitter *em);
fg_status fg_emit_lrn(fg_emitter *em);
int fg_check_copy(const struct fg_tcand *c, char *why, size_t whysz);
int fg_check_softmax(const struct fg_tcand *c, char *why, size_t whysz);
int fg_check_lrn(const struct fg_tcand *c, char *why, size_t whysz);
/* The reduce family (emit_reduce.c, templates/reduce.cuh). */
fg_status fg_emit_reduce(fg_emitter *em);
int fg_check_reduce(const struct fg_tcand *c, char *why, size_t whysz);

/* Body of a helper `float f(const Params &p, fg_i64 lin)` returning tensor t's
 * element at logical (row-major) index lin, in t's layout (emit_softmax.c). */
fg_status fg_em_lin_load_body(fg_emitter *em, int t, fg_buf *b);
/* Body of a helper `void f(const Params &p, fg_i64 lin, float v)` storing v
 * through the epilogue at the output's logical index lin (emit_softmax.c). */
fg_status fg_em_lin_store_body(fg_emitter *em, fg_buf *b);

/* Nonzero when tensor t's memory order is its logical row-major order
 * (every tensor but a rank-4 NHWC one with more than one channel and more
 * than one pixel). */
int fg_em_row_major(const fg_emitter *em, int t);
/* Emits, at indentation ind, locals names[d] = axis d of the logical
 * (row-major) index `lin` of tensor t, for every axis of size above 1;
 * names of size-1 axes are set to "0" (not declared).  names must hold
 * t's rank writable entries; base gives their prefix when non-NULL
 * ("x" -> x0, x1, ...), else the output coordinate names are used. */
void fg_em_lin_coords(fg_emitter *em, int t, const char *lin, const char *base, char names[][16], int ind,
                      fg_buf *out);
/* Sets the launch of a one-dimensional grid-stride kernel over work items. */
void fg_em_launch_1d(fg_emitter *em, int64_t work, int64_t threads);
/* Reads the `threads` tile parameter (default def): 32..1024, a multiple of 32. */
fg_status fg_em_threads(fg_emitter *em, int64_t def, int64_t *threads);

#endif /* FG_EMIT_OPS_H */
