/*
 * index_kinds.h -- the data-movement kinds slice, expand and pad: what their
 * attributes mean, their shape inference (the op-kind table, kind.c, points
 * at it), and the per-axis source of an output coordinate, which the host
 * reference (runtime/reference_index.c) and the copy family's index maps
 * (index_map.c) both follow.
 *
 *   slice   attrs starts, steps, shape (ints, one per axis): output
 *           coordinate o of axis d reads input coordinate starts[d] +
 *           steps[d] * o (steps may be negative); shape gives the output
 *           extents, every read inside the input.  ONNX Slice (clamped and
 *           negative indices resolved at import), Split (one slice per
 *           output) and Gather with constant indices in arithmetic
 *           progression (a scalar index: a slice then a reshape dropping
 *           the axis).
 *   expand  attrs shape (numpy broadcasting of the input to it: ONNX
 *           Expand) or reps (the input repeated reps[d] times along axis d:
 *           ONNX Tile).  An input axis of size 1 reads 0; one of the
 *           output's size reads the coordinate; a tiled one reads it modulo
 *           the input's size.
 *   pad     attrs pads (ints, begins then ends: ONNX order, negative =
 *           crop), mode (string constant, reflect, edge or wrap), value
 *           (float, constant mode): output coordinate o of axis d stands
 *           for input coordinate o - pads[d]; outside the input, constant
 *           mode gives value, reflect mirrors about the edge element, edge
 *           repeats it, wrap wraps around.
 */
#ifndef FG_INDEX_KINDS_H
#define FG_INDEX_KINDS_H

#include "ir.h"
#include "shape.h"

typedef enum fg_pad_mode {
    FG_PAD_CONSTANT = 0,
    FG_PAD_REFLECT,
    FG_PAD_EDGE,
    FG_PAD_WRAP,
    FG_PAD_MODE_COUNT
} fg_pad_mode;

/* Mode names as written in `mode:`, in fg_pad_mode order, NULL-terminated. */
extern const char *const fg_pad_mode_names[];

/* Pad mode of node n (its `mode` attribute), or -1 when not a known mode. */
int fg_pad_mode_of(const fg_node *n);

/* Shape inference of the kinds (errors located at the node). */
fg_status fg_infer_slice(fg_infer *s);
fg_status fg_infer_expand(fg_infer *s);
fg_status fg_infer_pad(fg_infer *s);

/* Input coordinate of a pad axis of input size dim read at raw coordinate
 * r = o - pad_begin in mode m: r itself inside [0, dim), else the mode's
 * source (constant mode: -1, the pad value). */
int64_t fg_pad_source(fg_pad_mode m, int64_t r, int64_t dim);

#endif /* FG_INDEX_KINDS_H */
