/*
 * rewrite.h -- rewrite rules (`rewrite:` documents of a rules directory,
 * docs/rules.md#rewrite-rules): a pattern over a small DAG of nodes, with
 * attribute and constant predicates, and one replacement op.  Exporters
 * write activations as subgraphs (x * sigmoid(x), the erf form of GELU);
 * rewrites turn them back into ops before fusion.
 *
 * One module in two files behind this header: the loader, rewrite_load.c
 * (fg_rewrite_load, called by rules_dir.c in the rules pass, checks a
 * document and adds the rewrite to the context), and the pass,
 * rewrite_pass.c (fg_rewrite_graph, called by the planner on the plan's
 * copy of the graph, before matching, applies the context's rewrites until
 * none applies), and one built-in rewrite, rewrite_attn_cast.c
 * (fg_rewrite_attention_casts).  The rewrites belong to the context: the loader registers
 * their teardown (fg_rewrites_free) with fg_ctx_on_free.
 */
#ifndef FG_REWRITE_H
#define FG_REWRITE_H

#include "ir.h"
#include "yaml_doc.h"

#define FG_RW_MAX_STEPS 16      /* steps of one pattern */
#define FG_RW_MAX_VARS 4        /* external inputs of one pattern (`inputs:`) */
#define FG_RW_MAX_CAPS 8        /* constants captured with `as:` */
#define FG_RW_MAX_BINDS 8       /* attribute variables of one pattern */

/* What one input of a pattern step must be. */
typedef enum fg_rw_arg_kind {
    FG_RW_ARG_VAR = 0,     /* an external input of the match (`x`): any tensor, the same one at every use */
    FG_RW_ARG_STEP,        /* the output of an earlier step's node */
    FG_RW_ARG_CONST,       /* a constant (a weight): `{ const: 0.5, tol: 1e-6 }` or `{ const: any }` */
    FG_RW_ARG_ABSENT,      /* `~`: an optional input that must be absent */
    FG_RW_ARG_KIND_COUNT
} fg_rw_arg_kind;

typedef struct fg_rw_arg {
    fg_rw_arg_kind kind;
    int index;             /* VAR: input index; STEP: step index */
    int any;               /* CONST: any constant (no value test) */
    double value, tol;     /* CONST: every element within tol of value */
    int per_channel;       /* CONST: one value per channel of the step's output (docs/rules.md) */
    int capture;           /* CONST: index into captures (`as:`), or -1 */
    fg_loc loc;
} fg_rw_arg;

/* One attribute pattern of a step (`attrs: { keepdims: true, axes: [A] }`):
 * the attribute's whole value, or an ints list of exactly n elements, each a
 * literal or an attribute variable.  A variable takes the value at its first
 * use; every later use (in any step) must see an equal value; the
 * replacement's `attrs` may read it. */
typedef struct fg_rw_attr {
    const char *name;              /* an attribute of every op of the step (interned) */
    int n;                         /* -1: the whole value, el[0]; else an ints list of n elements */
    struct {
        int bind;                  /* attribute variable index, or -1: the literal value */
        double value;
        const char *str;           /* a string attribute's literal (quoted in YAML; interned), or NULL */
    } el[FG_MAX_INTS];
    fg_loc loc;
} fg_rw_attr;

typedef struct fg_rw_step {
    const char *name;                      /* interned */
    int nops;
    const fg_opdef *ops[FG_MAX_STEP_OPS];  /* alternation */
    unsigned commutes;                     /* bit i: ops[i] takes its two inputs in either order */
    struct fg_expr *where;                 /* attribute predicate or NULL */
    const char *where_src;
    int nwhere_vars;
    const char *where_vars[FG_MAX_WHERE_VARS];
    int nargs;
    fg_rw_arg args[FG_MAX_INPUTS];
    int nattrs;                            /* `attrs:` patterns */
    fg_rw_attr attrs[FG_MAX_ATTRS];
    fg_loc loc;
} fg_rw_step;

/* One input of the replacement node. */
typedef enum fg_rw_rep_kind {
    FG_RW_REP_VAR = 0,     /* an external input of the match */
    FG_RW_REP_CAPTURE,     /* a captured constant */
    FG_RW_REP_FILL,        /* `{ fill: v, like: cap }`: a new [C] weight of v, C from the capture */
    FG_RW_REP_ABSENT,      /* `~`: an absent optional input */
    FG_RW_REP_KIND_COUNT
} fg_rw_rep_kind;

typedef struct fg_rw_rep_arg {
    fg_rw_rep_kind kind;
    int index;             /* VAR: input index; CAPTURE, FILL: capture index */
    double fill;           /* FILL */
    fg_loc loc;
} fg_rw_rep_arg;

typedef struct fg_rewrite {
    const char *name;                      /* interned, unique among rewrites */
    int nvars;
    const char *vars[FG_RW_MAX_VARS];      /* `inputs:` (default [x]) */
    int ncaps;
    const char *caps[FG_RW_MAX_CAPS];      /* `as:` names, in pattern order */
    int cap_per_channel[FG_RW_MAX_CAPS];   /* the capture was declared per_channel */
    int nsteps;                            /* the last step is the root: its node is replaced */
    fg_rw_step steps[FG_RW_MAX_STEPS];
    int nbinds;
    const char *binds[FG_RW_MAX_BINDS];    /* attribute variables, in pattern order */
    int bind_list[FG_RW_MAX_BINDS];        /* the variable holds a whole ints list (else one value) */
    int bind_str[FG_RW_MAX_BINDS];         /* the variable holds a string (bound from a string attribute) */
    const fg_opdef *op;                    /* the replacement op (any kind) */
    int nargs;
    fg_rw_rep_arg args[FG_MAX_INPUTS];
    fg_attr_value attrs[FG_MAX_ATTRS];     /* parallel to op->attrs, defaults filled in */
    int attr_bind[FG_MAX_ATTRS];           /* parallel to op->attrs: the attribute variable giving its value,
                                              or -1 (attrs[] holds it) */
    int attr_cap[FG_MAX_ATTRS];            /* parallel to op->attrs: the captured one-element constant giving
                                              its value (`eps: EPS` with `as: EPS`), or -1 */
    fg_loc loc;                            /* the `rewrite:` line */
    uint64_t file_hash;
} fg_rewrite;

/* Loads one rewrite from a mapping with a `rewrite:` key (ops must be
 * loaded) and adds it to the context.  Every problem is reported at its key
 * or value; a document with an error is not added.  Returns FG_OK or
 * FG_ERR_INPUT. */
fg_status fg_rewrite_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash);

/* Applies the context's rewrites to g in place, in passes over the nodes in
 * graph order (each node tried as the root of each rewrite, in load order)
 * until a pass changes nothing; at most 4 * nodes + 64 applications (then
 * one warning).  A match applies only when every matched node but the root
 * has an output read by matched nodes alone that is not a graph output, and
 * the replacement computes the root's output shape and dtype (element-wise
 * ops: numpy broadcasting of their inputs; other kinds: their shape
 * inference).  The
 * replacement takes the root's place, name, location and output tensor; the
 * other matched nodes are removed (tensors keep their indices; their
 * outputs are left without producer or consumer), and producers and
 * consumer counts are recomputed.  One line per application is appended to
 * (*notes)[*nnotes...] (malloc'd strings, the array grown with realloc):
 * "rewrite NAME (FILE:LINE): node, node, ... -> op root". */
fg_status fg_rewrite_graph(fg_context *ctx, fg_graph *g, char ***notes, int *nnotes);

/* An interned name for a tensor (node 0) or node (node 1) a rewrite adds
 * to g: stem itself, else stem_2, stem_3, ... the first that g does not
 * use yet (rewrite_pass.c). */
const char *fg_rewrite_fresh_name(fg_context *ctx, const fg_graph *g, const char *stem, int node);

/* The built-in rewrite of rewrite_attn_cast.c, run by the planner after
 * fg_rewrite_graph: an attention whose half scores S = matmul(Q, K) (no
 * bias, read by the cast alone) are cast to fp32 before element-wise fp32
 * nodes (each read once), a softmax, an optional nan_to_zero and a matmul
 * by a cast to fp32 of a tensor of S's dtype (TorchScript's fp16 export of
 * scaled_dot_product_attention with an fp32 mask) computes the scores in
 * fp32 from cast operands: casts of Q and K are inserted before the matmul,
 * which takes the cast's output; the cast is removed.  The chain is then of
 * one dtype, which the attention rule fuses.  One note per edit, as
 * fg_rewrite_graph's: "rewrite attention_scores_fp32 (built in): ...". */
fg_status fg_rewrite_attention_casts(fg_context *ctx, fg_graph *g, char ***notes, int *nnotes);

/* Frees the context's rewrites (the teardown fg_rewrite_load registers). */
void fg_rewrites_free(fg_context *ctx);

#endif /* FG_REWRITE_H */
