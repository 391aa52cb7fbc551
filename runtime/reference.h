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
 * (malloc, checked: FG_ERR_NOMEM with "out of host memory" located at the
 * node or weight when the buffer cannot be had) and filled.  Folded nodes
 * compute the identity of input 0. */
fg_status fg_reference_run(fg_context *ctx, const fg_graph *g, double **vals);
/* fg_reference_run under the out-of-memory guard (codegen/oom.h), for
 * callers that are not guarded (the command line): when host memory runs
 * out (the values are sized by the graph's tensors), FG_ERR_NOMEM with "out
 * of memory while running the reference" located at the graph's file; every
 * slot the call filled is NULL again (what it allocated is freed), the
 * others are as the caller left them. */
fg_status fg_reference_run_guarded(fg_context *ctx, const fg_graph *g, double **vals);
void fg_reference_free(const fg_graph *g, double **vals);

/* Fills fresh random values for every graph input (seeded, splitmix64;
 * into the slot's buffer when it has one, else a new one;
 * same seed, same values): floats in [-1, 1); bools 0 or 1; integers that
 * index a gather's data in [-D, D) (D its extent: negative indices count
 * from the end), other integers in [-8, 8). */
void fg_reference_random_inputs(const fg_graph *g, uint64_t seed, double **vals);
/* The same with every NULL input slot's buffer allocated first, checked:
 * FG_ERR_NOMEM with "out of host memory" located at the input's declaration
 * and the slots it had filled NULL again; the filling runs under the guard. */
fg_status fg_reference_random_inputs_guarded(fg_context *ctx, const fg_graph *g, uint64_t seed, double **vals);

/* Relative L2 error ||a-b|| / max(||b||, tiny) and max |a-b| over n values. */
double fg_rel_l2(const double *a, const double *b, int64_t n, double *max_abs);

#endif /* FG_REFERENCE_H */
