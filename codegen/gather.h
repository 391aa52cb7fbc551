/*
 * gather.h -- the gather kind: what a `gather` node means (ONNX Gather with
 * computed indices: token embeddings, `x[:, 0]`), its geometry and shape
 * inference.  out[o, q, r] = data[o, indices[q], r], with o running over
 * data's axes before `axis`, q over every index (indices of any rank, in
 * logical order) and r over data's axes after `axis`; so out's shape is
 * data[:axis] + indices' shape + data[axis + 1:].  An index below zero
 * counts from the end (ONNX); one still outside [0, D) has no element to
 * read: the output element is NaN (a float output) or 0 (an integer one),
 * in the kernel and the reference alike.
 */
#ifndef FG_GATHER_H
#define FG_GATHER_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;

typedef struct fg_gather_geom {
    int axis;          /* in [0, data rank) */
    int64_t outer;     /* product of data's axes before axis */
    int64_t dim;       /* D, data's extent along axis */
    int64_t nidx;      /* number of indices */
    int64_t inner;     /* product of data's axes after axis */
} fg_gather_geom;

/* The geometry of gather node nd over its data and indices tensors: 0, or
 * -1 with the reason in why (an integer indices type is required, the
 * output rank must stay within FG_MAX_RANK). */
int fg_gather_geom_of(const fg_node *nd, const fg_tensor *data, const fg_tensor *idx, fg_gather_geom *g, char *why,
                      size_t whysz);
fg_status fg_infer_gather(struct fg_infer *s);

#endif /* FG_GATHER_H */
