/*
 * reference_resize.h -- host reference functions of the resize and
 * conv_transpose2d kinds, in the signature of the per-kind table of
 * reference.c: node nd of g, every tensor's values in logical order (vals),
 * the output to fill (y, fg_tensor_numel elements).
 */
#ifndef FG_REFERENCE_RESIZE_H
#define FG_REFERENCE_RESIZE_H

#include "ir.h"

void fg_ref_resize(const fg_graph *g, const fg_node *nd, double **vals, double *y);
void fg_ref_conv_transpose(const fg_graph *g, const fg_node *nd, double **vals, double *y);

#endif /* FG_REFERENCE_RESIZE_H */
