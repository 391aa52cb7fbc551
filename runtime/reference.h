/*
 * reference.h -- the host reference (the oracle): executes a graph on the CPU
 * in double precision, op by op, unfused.  Run on the source graph it gives
 * the truth; run on a plan's folded graph it checks the folding.
 */
#ifndef FG_REFERENCE_H
#define FG_REFERENCE_H

#include "ir.h"

/* vals has g->ntensors slots.  Slots of graph inputs must be filled by the
 * caller (logical NCHW order, fg_tensor_numel elements); weights are taken from
 * tensor data when their slot is NULL.  Every other slot is allocated
 * (malloc) and filled.  Folded nodes compute the identity of input 0. */
fg_status fg_reference_run(fg_context *ctx, const fg_graph *g, double **vals);
void fg_reference_free(const fg_graph *g, double **vals);

/* Fills fresh random values for every graph input (seeded, splitmix64;
 * same seed, same values): floats in [-1, 1); bools 0 or 1; integers that
 * index a gather's data in [-D, D) (D its extent: negative indices count
 * from the end), other integers in [-8, 8). */
void fg_reference_random_inputs(const fg_graph *g, uint64_t seed, double **vals);

/* Relative L2 error ||a-b|| / max(||b||, tiny) and max |a-b| over n values. */
double fg_rel_l2(const double *a, const double *b, int64_t n, double *max_abs);

#endif /* FG_REFERENCE_H */
