/*
 * reference_ops.h -- host reference functions of the re-indexing and row
 * kinds (reshape, transpose, concat, softmax, lrn, reduce), in the signature of the
 * per-kind table of reference.c: node nd of g, every tensor's values in
 * logical order (vals), the output to fill (y, fg_tensor_numel elements).
 */
#ifndef FG_REFERENCE_OPS_H
#define FG_REFERENCE_OPS_H

#include "ir.h"

void fg_ref_reshape(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_transpose(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_concat(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_softmax(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_lrn(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_reduce(const fg_graph *g, const fg_node *nd, double **vals, double *y);

#endif /* FG_REFERENCE_OPS_H */
