/*
 * index_map.h -- composed index maps of reshape / transpose chains, shared
 * by the copy family (emit_copy.c: a chain composed into one re-indexing
 * copy) and by anchors that read their main input through an input map
 * (a group whose leading nodes are the anchor's `input_map:` steps,
 * rules/shuffle.yaml: ShuffleNet's channel shuffle read by the depthwise
 * conv that follows it, with no copy kernel).
 *
 * A reshape keeps the logical (row-major) order of the elements and a
 * transpose permutes the axes (a slice, expand or pad maps each axis on its
 * own, index_kinds.h; only the copy family takes them), so a chain of them is a permutation of the
 * elements: given the logical coordinates of the chain's last output, the
 * composition walks the nodes last to first and yields the logical
 * coordinates of the first node's input, which the kernel reads in its own
 * layout.  The tensors between the nodes are never stored.
 */
#ifndef FG_INDEX_MAP_H
#define FG_INDEX_MAP_H

#include "emit_impl.h"

/* Emits, at indentation ind, the locals mapping coordinates oc (logical
 * coordinates of the output of nodes[n - 1]; "0" for a size-1 axis) back
 * through reshape / transpose nodes nodes[n - 1] .. nodes[0] to the logical
 * coordinates of nodes[0]'s input 0, whose names are written to ic (FG_MAX_RANK
 * entries of 16 bytes; "0" for a size-1 axis).  out_lin, when not NULL, is
 * the linear memory index of nodes[n - 1]'s output, used as its logical index
 * when that tensor is stored row-major (the copy kernel's own output). */
void fg_imap_compose(fg_emitter *em, const int *nodes, int n, const char *const *oc, const char *out_lin, int ind,
                     char ic[][16], fg_buf *b);

/* A constant pad's condition in a composed map: the local `bool name`
 * (the element lies inside the pad's input) and the value outside. */
#define FG_IMAP_MAX_MASKS 4
typedef struct fg_imap_mask {
    char name[16];
    double value;
} fg_imap_mask;

/* fg_imap_compose through any reshape, transpose, slice, expand or pad
 * nodes (the copy family's chains): each constant pad appends its mask to
 * masks (FG_IMAP_MAX_MASKS entries; *nmasks counts them, the node nearest
 * the output first), and the caller reads the input only where every mask
 * holds, else the value of the first that does not.  The coordinates are
 * always inside the input (clamped where a mask fails). */
void fg_imap_compose_masked(fg_emitter *em, const int *nodes, int n, const char *const *oc, const char *out_lin,
                            int ind, char ic[][16], fg_imap_mask *masks, int *nmasks, fg_buf *b);

/* The tensor a kernel reads for its input t: the source of the group's
 * input map (input 0 of nodes[0]) when t is the map's output (fg_group.nmap),
 * else t itself. */
int fg_imap_source(const fg_emitter *em, int t);

/* Appends the helper `FG_DEVICE fg_i64 fname(const Params &p, coords...)`
 * giving the offset of an element of tensor t at t's logical coordinates
 * coords in fg_imap_source(em, t): through the composed input map when t is
 * the map's output, else fg_em_offset_fn's offset in t.  The kernel reads
 * p.<fg_em_tensor(fg_imap_source(em, t))> + fname(p, ...). */
fg_status fg_imap_offset_fn(fg_emitter *em, const char *fname, int t, const char *const *coords);

#endif /* FG_INDEX_MAP_H */
