/*
 * reference_norm.h -- the host reference of the layer_norm kind (layer and
 * RMS normalization with an optional residual skip), in the signature of the
 * per-kind table of reference.c.
 */
#ifndef FG_REFERENCE_NORM_H
#define FG_REFERENCE_NORM_H

#include "ir.h"

/* Node nd of g over every tensor's logical values (vals), into y. */
void fg_ref_layer_norm(const fg_graph *g, const fg_node *nd, double **vals, double *y);

#endif /* FG_REFERENCE_NORM_H */
