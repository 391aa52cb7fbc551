/*
 * kind.h -- the op-kind table (fg_kind_info): for each fg_op_kind, what C
 * knows about it.  The op-definition loader (input counts, `expr`,
 * `reduce`), the planner (anchor or epilogue, the template family of a lone
 * node), shape inference and the capability variables that templates test
 * all read this one table instead of switching on the kind.  The host
 * reference (runtime/reference.c) keeps its per-kind functions in a table of
 * its own, indexed by the same enum (codegen/ never calls runtime/).
 */
#ifndef FG_KIND_H
#define FG_KIND_H

#include "ir.h"

struct fg_infer;     /* shape.h */

/* What a node of the kind can be in a fused group. */
typedef enum fg_kind_role {
    FG_ROLE_ANCHOR = 0,    /* computed by a template; the group's first node (conv2d, matmul, pools) */
    FG_ROLE_ELEMENTWISE,   /* one value per output element from an expression: an epilogue stage */
    FG_ROLE_RESHAPE,       /* a copy with re-indexing (flatten, reshape, transpose, concat): the main
                              node of its group (pointwise or copy template) */
    FG_ROLE_COUNT
} fg_kind_role;

#define FG_KIND_MAX_VARS 16

typedef struct fg_kind_info {
    const char *name;              /* as written after `kind:` */
    int min_inputs, max_inputs;    /* op definitions must declare this many (required: at least min) */
    const char *inputs_form;       /* for messages: "inputs [x, weight, bias?]" */
    fg_kind_role role;
    int has_expr;                  /* op definitions give an `expr` (required) */
    int has_reduce;                /* op definitions give `reduce:` (pool kinds: max|avg; reduce: reduce.h) */
    const char *family;            /* template family that runs a lone node of the kind */
    fg_status (*infer)(struct fg_infer *s);   /* shape inference (shape.c) */
    /* Capability variables (what template `where` constraints read): names,
     * and a function filling values for node nd of g; returns the count. */
    const char *const *var_names;
    int (*vars)(const fg_graph *g, int nd, double *vals);
} fg_kind_info;

/* The entry of kind k (k must be valid: op definitions are checked at load). */
const fg_kind_info *fg_kind(fg_op_kind k);
/* Kind by name, or -1. */
int fg_kind_find(const char *name);
/* Index of variable name in kind k's capability variables, or -1. */
int fg_kind_var(fg_op_kind k, const char *name);
/* Number of capability variables of kind k. */
int fg_kind_nvars(fg_op_kind k);

#endif /* FG_KIND_H */
