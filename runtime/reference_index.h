/*
 * reference_index.h -- host reference of the data-movement kinds slice,
 * expand and pad (codegen/index_kinds.h has what their attributes mean) and
 * of gather (codegen/gather.h), in
 * the signature of reference.c's per-kind table: node nd of g, every
 * tensor's values in logical order (vals), the output to fill (y).
 */
#ifndef FG_REFERENCE_INDEX_H
#define FG_REFERENCE_INDEX_H

#include "ir.h"

void fg_ref_slice(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_expand(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_pad(const fg_graph *g, const fg_node *nd, double **vals, double *y);
/* gather (gather.h): an index outside the data reads nothing: NaN for a
 * float output, 0 for an integer one. */
void fg_ref_gather(const fg_graph *g, const fg_node *nd, double **vals, double *y);

#endif /* FG_REFERENCE_INDEX_H */
