/*
 * concat_inplace.h -- concat elimination: the producers of a concat's inputs
 * write straight into their slice of the concat's output, so the concat
 * copies only the inputs that cannot be written in place, and needs no
 * kernel at all when every input is.
 *
 * The decision is made once, in C, after grouping (fg_concat_inplace_plan,
 * called by fg_plan_build).  An input tensor t of a concat node C is written
 * in place -- stored inside C's output at a byte offset, a *view* -- when
 *
 *   - C is a group of its own and its output is stored (a concat fused with
 *     the ops after it has no output buffer to write into);
 *   - C's slices are contiguous: every axis before the concat axis has
 *     extent 1 in the output's stored layout (NCHW batch 1 along channels;
 *     NHWC channel slices are strided and always copied);
 *   - t is stored by a kernel of the plan (the output of a group, or of a
 *     concat: nested views), not a graph input, a constant or a graph output;
 *   - t has C's dtype and layout, fills one slot of C (a second slot of the
 *     same tensor is copied) and is written in place in no other concat;
 *   - the byte offset is a multiple of FG_CONCAT_VIEW_ALIGN, the alignment
 *     of the vectorized and tensor-memory accesses kernels make;
 *   - no kernel then reads bytes it writes, and no two kernels write the
 *     same bytes, inside the buffer C's output resolves to (checked on the
 *     resolved intervals after each tentative placement).
 *
 * Views nest: a concat's output may itself be in place in a later concat,
 * so a whole DenseNet-style chain can share one buffer.  The executor
 * resolves a view to its root (a tensor stored in its own right) plus the
 * summed offset, and keeps the root live while any tensor inside it is.
 */
#ifndef FG_CONCAT_INPLACE_H
#define FG_CONCAT_INPLACE_H

#include "context.h"
#include "ir.h"

#define FG_CONCAT_VIEW_ALIGN 16

typedef struct fg_concat_views {
    int ntensors;
    int *parent;          /* per plan-graph tensor: the concat output it is stored inside, or -1 */
    int *slot;            /* when parent >= 0: the input slot of the concat node it fills */
    int64_t *offset;      /* when parent >= 0: byte offset inside parent's storage */
    char **lines;         /* --explain: one line per concat input (or per concat left alone) */
    int nlines, lines_cap;
    int nviews;           /* tensors written in place */
    int eliminated;       /* concat nodes left without a kernel */
    int naliases;         /* flatten / reshape outputs aliasing their input (reshape_alias.h), slot -1 */
    char **alias_lines;   /* --explain: one line per lone flatten / reshape */
    int nalias_lines, alias_cap;
} fg_concat_views;

/* Decides which concat inputs of plan p are written in place (the rules
 * above), records them in p->views, and removes the groups of concats whose
 * every input is in place (p->node_group of such a node becomes -1).  Call
 * once, after the groups are final.  Fails only on an internal
 * inconsistency (a located error on ctx). */
fg_status fg_concat_inplace_plan(fg_context *ctx, fg_plan *p);

/* Checks every buffer that holds views in plan p, resolved to byte
 * intervals: 1 when no kernel reads bytes it writes, no two kernels write the
 * same bytes and no kernel reads bytes a later kernel writes; else 0 with
 * the first problem in why.  fg_concat_inplace_plan applies it to each
 * placement and to the result. */
int fg_concat_views_check(const fg_plan *p, char *why, size_t whysz);

/* Releases v and what it owns; NULL is fine. */
void fg_concat_views_free(fg_concat_views *v);

/* The tensor t is stored inside (its parent concat output), with the byte
 * offset in *offset; -1 when t is stored on its own. */
int fg_concat_view_parent(const fg_plan *p, int t, int64_t *offset);

/* Nonzero when input slot `slot` of concat node `node` is written in place
 * by its producer (the concat's kernel does not copy it). */
int fg_concat_slot_inplace(const fg_plan *p, int node, int slot);

/* After a pass dropped groups of p and moved the kept ones to 0 .. kept - 1
 * (remap[old group] = its new index, -1 for a dropped one): renumbers every
 * node's group and sets the count (concat elimination, reshape aliases). */
void fg_plan_renumber(fg_plan *p, const int *remap, int kept);

#endif /* FG_CONCAT_INPLACE_H */
