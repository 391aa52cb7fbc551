/*
 * kind.h -- the op-kind table (fg_kind_info): for each fg_op_kind, what C
 * knows about it.  The op-definition loader (input counts, `expr`, the
 * `reduce:` values), the rule loader (what a step, `repeat`, `input_map` and
 * `apply:` may match), the graph loader (modes no kernel computes), the
 * planner (anchor or epilogue, pure permutations, the template family of a
 * lone node, weight checks), shape inference, the capability variables that
 * templates test and the performance report (FLOPs) all read this one table
 * instead of switching on the kind.  The host reference (runtime/reference.c)
 * keeps its per-kind functions in a table of its own, indexed by the same
 * enum (codegen/ never calls runtime/).
 *
 * A new op kind is its fg_op_kind value (ir.h), its row here, its shape
 * inference (shape.c or a file of its own), its reference row and its
 * template family (docs/architecture.md, "How to add an op kind").
 */
#ifndef FG_KIND_H
#define FG_KIND_H

#include <stddef.h>

#include "ir.h"

struct fg_infer;     /* shape.h */

/* What a node of the kind can be in a fused group. */
typedef enum fg_kind_role {
    FG_ROLE_ANCHOR = 0,    /* computed by a template; the group's first node (conv2d, matmul, pools) */
    FG_ROLE_ELEMENTWISE,   /* one value per output element from an expression: an epilogue stage,
                              which a rule's epilogue may `apply:` */
    FG_ROLE_RESHAPE,       /* a copy with re-indexing (flatten, reshape, transpose, concat): the main
                              node of its group (pointwise or copy template) */
    FG_ROLE_COUNT
} fg_kind_role;

/* Traits of a kind beyond its role (bits of fg_kind_info.traits). */
enum {
    FG_KIND_EXPR = 1u << 0,        /* op definitions give an `expr` (required) */
    FG_KIND_REPEAT = 1u << 1,      /* a rule step matching only such kinds may `repeat` (one or more
                                      nodes in a row, each an epilogue stage) */
    FG_KIND_PERMUTATION = 1u << 2, /* a pure permutation of its input's elements that a reading kernel
                                      composes into its loads (index_map.c): a rule's `input_map` step */
    FG_KIND_AXES = 1u << 3,        /* a permutation that moves whole axes (its `perm` attribute); a
                                      permutation without it keeps the row-major order (a reshape) */
    FG_KIND_BIAS_COLUMNS = 1u << 4,/* an anchor whose `bias` and hook column `c` index the output's last
                                      axis (a GEMM's columns) and broadcast numpy-style; otherwise they
                                      index the channel axis */
    FG_KIND_MOVES = 1u << 5        /* data movement that is no permutation (slice, expand, pad): its index
                                      map composes with reshapes and transposes into one copy kernel
                                      (index_map.c) at any element count */
};

#define FG_KIND_MAX_VARS 16

typedef struct fg_kind_info {
    const char *name;              /* as written after `kind:` */
    int min_inputs, max_inputs;    /* op definitions must declare this many (required: at least min) */
    const char *inputs_form;       /* for messages: "inputs [x, weight, bias?]" */
    fg_kind_role role;
    unsigned traits;               /* FG_KIND_* bits */
    /* The values an op definition may give after `reduce:` (NULL-terminated);
     * NULL: the kind takes no `reduce`.  reduce_default: the value when the
     * definition gives none; NULL: `reduce` is required. */
    const char *const *reductions;
    const char *reduce_default;
    const char *family;            /* template family that runs a lone node of the kind */
    fg_status (*infer)(struct fg_infer *s);   /* shape inference (shape.c) */
    /* Capability variables (what template `where` constraints read): names,
     * and a function filling values for node nd of g; returns the count. */
    const char *const *var_names;
    int (*vars)(const fg_graph *g, int nd, double *vals);
    /* FLOPs of one unfolded node n of g, for the performance report's
     * roofline (docs/api.md); NULL: none counted, the node's bound is its
     * bytes (the re-indexing kinds, softmax, lrn, reduce). */
    double (*flops)(const fg_graph *g, const fg_node *n);
    /* A bool attribute selecting a mode no kernel computes (batch_norm's
     * `training`), refused at load when true with mode_refused as the
     * reason; NULL: none. */
    const char *mode_attr;
    const char *mode_refused;
    /* Checks the constant parameters of node nd before planning (values a
     * kernel cannot turn into finite outputs), recording errors at the node;
     * NULL: nothing to check. */
    fg_status (*check_weights)(fg_context *ctx, const fg_graph *g, int nd);
} fg_kind_info;

/* The entry of kind k (k must be valid: op definitions are checked at load). */
const fg_kind_info *fg_kind(fg_op_kind k);
/* Infers the output shape of node of g with its kind's inference
 * (fg_shape_infer_by, shape.h, has the contract). */
fg_status fg_kind_infer_shape(fg_context *ctx, fg_graph *g, int node);
/* Kind by name, or -1. */
int fg_kind_find(const char *name);
/* Index of variable name in kind k's capability variables, or -1. */
int fg_kind_var(fg_op_kind k, const char *name);
/* Number of capability variables of kind k. */
int fg_kind_nvars(fg_op_kind k);

/* The kinds (bit k for kind k) of role role. */
unsigned fg_kinds_of_role(fg_kind_role role);
/* The kinds whose traits include every bit of traits (0: every kind). */
unsigned fg_kinds_with(unsigned traits);
/* The kinds that take a `reduce:` value. */
unsigned fg_kinds_reducing(void);
/* The names of the kinds in mask, in enum order, for messages: "a", "a or
 * b", "a, b or c" with last_sep " or " (or " and ").  Writes buf; returns it. */
const char *fg_kinds_text(unsigned mask, const char *last_sep, char *buf, size_t size);
/* Kind k's allowed `reduce:` values for messages: "max or avg" for two,
 * else "one of a, b, c".  Writes buf; returns it. */
const char *fg_kind_reductions_text(fg_op_kind k, char *buf, size_t size);
/* Whether r is one of kind k's allowed `reduce:` values. */
int fg_kind_reduction_ok(fg_op_kind k, const char *r);

#endif /* FG_KIND_H */
