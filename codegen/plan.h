/*
 * plan.h -- the planner: matches fusion rules on a graph and returns fused
 * groups (fg_plan in ir.h), with parameters folded in the plan's own copy of
 * the graph.  Legality lives here, once, in C: a fused intermediate has one
 * consumer and is not a graph output; each step consumes the previous step's
 * output; dtypes and layouts agree with the rule's guards.  Conflicts resolve
 * by priority, then longest match, then graph order.  Deterministic.
 */
#ifndef FG_PLAN_H
#define FG_PLAN_H

#include <stdio.h>

#include "ir.h"

/* fg_plan_free is public (fusegen.h); so is fg_plan_build, which the API
 * layer (runtime/api.c) defines: it records the attached GPU's arch on the
 * context (fg_ctx_set_device_arch), then calls fg_plan_make. */

/* The planner: fg_plan_build's contract (fusegen.h), for the target arch
 * the context holds (fg_target_arch, arch.h); it asks no device.  Its
 * messages name fg_plan_build. */
fg_status fg_plan_make(fg_context *ctx, const fg_graph *g, fg_plan **out);

/* Options for printing. */
typedef struct fg_plan_print_opts {
    int explain;     /* add the near-miss notes ("relu1 not fused into conv1: ...") */
} fg_plan_print_opts;

/* Prints the plan as a table: group, rule and its file:line, nodes, template,
 * epilogue; then counts before and after (ops vs kernels, intermediate bytes
 * no longer written to memory). */
void fg_plan_print(const fg_context *ctx, const fg_plan *p, const fg_plan_print_opts *o, FILE *out);

/* Writes the graph with groups as Graphviz clusters. */
void fg_plan_dot(const fg_context *ctx, const fg_plan *p, FILE *out);

/* Summary numbers. */
typedef struct fg_plan_stats {
    int ops;            /* nodes of the source graph */
    int kernels;        /* groups */
    int folded;         /* nodes folded away */
    int64_t saved_bytes;
} fg_plan_stats;
void fg_plan_get_stats(const fg_plan *p, fg_plan_stats *s);

#endif /* FG_PLAN_H */
