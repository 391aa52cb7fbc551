/*
 * ir.h -- the data fusegen works on: op definitions (the vocabulary), model
 * graphs, fusion rules, and plans (fused groups).  Loaders fill these from
 * YAML; the planner, folding, reference and emitter read them.
 *
 * Ownership: op definitions and rules belong to the context (fg_context_free
 * releases them); a graph owns its tensors, nodes and weight data; a plan owns
 * a private copy of the graph (folding rewrites that copy, never the input;
 * weights it does not rewrite are borrowed, copy-on-write, from the input).
 */
#ifndef FG_IR_H
#define FG_IR_H

#include <stdint.h>

#include "diag.h"
#include "fusegen.h"

#define FG_MAX_RANK 6
#define FG_MAX_INPUTS 8
#define FG_MAX_ATTRS 12
#define FG_MAX_INTS 8
#define FG_MAX_STEPS 8
#define FG_MAX_STEP_OPS 32
#define FG_MAX_EPILOGUE 12
#define FG_MAX_FOLDS 4
#define FG_MAX_GROUP_NODES 16
#define FG_MAX_WHERE_VARS 64

struct fg_expr;      /* expr.h */
struct fg_concat_views;  /* concat_inplace.h */

/* ---- attributes ------------------------------------------------------- */

typedef enum fg_attr_type {
    FG_ATTR_INT = 0,
    FG_ATTR_FLOAT,
    FG_ATTR_BOOL,
    FG_ATTR_INTS,      /* a list of at most FG_MAX_INTS integers */
    FG_ATTR_STRING,
    FG_ATTR_TYPE_COUNT
} fg_attr_type;

const char *fg_attr_type_name(fg_attr_type t);

typedef struct fg_attr_value {
    fg_attr_type type;
    int64_t i;                  /* INT, BOOL */
    double f;                   /* FLOAT (an INT given for a FLOAT is converted) */
    int n;                      /* INTS: count */
    int64_t ints[FG_MAX_INTS];  /* INTS */
    const char *s;              /* STRING: interned */
} fg_attr_value;

typedef struct fg_attr_def {
    const char *name;           /* interned */
    fg_attr_type type;
    int required;               /* no default: a node must give it */
    fg_attr_value def;          /* default when !required */
    unsigned lens;              /* INTS: allowed lengths, bit n = length n may be given
                                   (`len: 2` or `len: [2, 4]`); 0 = any (1..FG_MAX_INTS) */
} fg_attr_def;

/* ---- op definitions --------------------------------------------------- */

/* What C knows about an op: its kind, whose entry in the op-kind table
 * (kind.h) says what the kind means.  Everything else (names, inputs,
 * attributes, pointwise expressions) is data in rules/ *.yaml. */
typedef enum fg_op_kind {
    FG_OPK_POINTWISE = 0,  /* expr over inputs; numpy broadcasting; per-channel inputs */
    FG_OPK_CONV2D,         /* x[N,C,H,W] w[K,C/g,R,S] bias?[K]; stride, padding, dilation, groups */
    FG_OPK_MATMUL,         /* a[..,M,K] b[K,N] (trans_a / trans_b) bias?  */
    FG_OPK_BATCH_NORM,     /* x gamma beta mean var; eps, training; expr = inference form */
    FG_OPK_POOL2D,         /* max or avg pooling; kernel, stride, padding, dilation, ceil_mode,
                              count_include_pad (avg) */
    FG_OPK_GLOBAL_POOL,    /* mean (reduce: avg) or max over H,W -> [N,C,1,1] */
    FG_OPK_FLATTEN,        /* [N,C,H,W] -> [N,C*H*W] */
    FG_OPK_RESHAPE,        /* any shape of as many elements, logical (row-major) order kept */
    FG_OPK_TRANSPOSE,      /* axes permuted: out axis i is input axis perm[i] */
    FG_OPK_CONCAT,         /* inputs joined along `axis` (2 to FG_MAX_INPUTS of them) */
    FG_OPK_SOFTMAX,        /* exp(x - max) / sum over axes axis .. axis + naxes - 1 (`log`: its log) */
    FG_OPK_LRN,            /* local response normalization across channels (ONNX LRN) */
    FG_OPK_REDUCE,         /* a reduction (reduce: sum, mean, max, ...) over `axes`, `keepdims` (reduce.h) */
    FG_OPK_LAYER_NORM,     /* x scale? bias? skip?: (x + skip) normalized over axes axis.. (mean and variance,
                              or `rms`: root mean square), times scale plus bias (layernorm.h) */
    FG_OPK_RESIZE,         /* spatial resize of [N,C,H,W]: nearest / linear / cubic, ONNX coordinate modes (resize.h) */
    FG_OPK_CONV_TRANSPOSE2D, /* x[N,C,H,W] w[C,K/g,R,S] bias?[K]; stride, padding, output_padding, dilation,
                                groups (conv_transpose.h) */
    FG_OPK_SLICE,          /* per-axis start, step (may be negative) and output extents (index_kinds.h) */
    FG_OPK_EXPAND,         /* numpy broadcasting to `shape`, or `reps` repeats per axis (index_kinds.h) */
    FG_OPK_PAD,            /* `pads` begins then ends (negative: crop), `mode`, `value` (index_kinds.h) */
    FG_OPK_GATHER,         /* data[.., indices, ..] along `axis`, integer indices computed or constant (gather.h) */
    FG_OPK_COUNT
} fg_op_kind;

const char *fg_op_kind_name(fg_op_kind k);

typedef struct fg_input_def {
    const char *name;      /* interned; also the variable name in expr */
    int optional;          /* written `bias?` in YAML */
    int per_channel;       /* pointwise: a [C] vector broadcast along the channel axis */
} fg_input_def;

typedef struct fg_opdef {
    const char *name;              /* interned, unique */
    fg_op_kind kind;
    int ninputs;
    fg_input_def inputs[FG_MAX_INPUTS];
    int nattrs;
    fg_attr_def attrs[FG_MAX_ATTRS];
    const char *expr_src;          /* pointwise / batch_norm: expression text */
    struct fg_expr *expr;          /* parsed expr_src (variables: inputs and attrs) */
    const char *reduce;            /* pool2d, global_pool: "max" or "avg"; reduce: a reduction of
                                      reduce.h (sum, mean, max, min, prod, ...) */
    const char *onnx;              /* the ONNX operator imported one-to-one onto this op (its
                                      `onnx:` key, an element-wise kind's), or NULL: interned */
    /* The output's element type (`dtype:`, element-wise kinds): fixed (a
     * dtype, as comparisons' bool), an input's (as Where's x), or named by a
     * string attribute (as a cast's `to`); by default input 0's. */
    int dtype_fixed;               /* an fg_dtype, or -1 */
    int dtype_input;               /* an input slot, or -1 */
    int dtype_attr;                /* a string attribute's slot, or -1 */
    fg_loc loc;                    /* the `op:` line */
    uint64_t file_hash;            /* hash of the defining file's bytes */
} fg_opdef;

/* ---- graphs ----------------------------------------------------------- */

typedef struct fg_tensor {
    const char *name;              /* interned; a C identifier (generated source uses it) */
    const char *source_name;       /* the name the model file gives it (an ONNX name that is no C
                                      identifier, as `onnx::Conv_0`), or NULL when that is name:
                                      what users type and read (fg_tensor_user_name); interned */
    fg_dtype dtype;
    fg_layout layout;              /* meaningful for rank-4 tensors */
    int rank;
    int64_t shape[FG_MAX_RANK];    /* logical shape, NCHW order for rank 4 */
    int producer;                  /* node index; -1 for graph inputs and weights */
    int is_input;                  /* fed by the caller */
    int is_weight;                 /* constant; data != NULL */
    int is_output;                 /* a graph output */
    int nconsumers;                /* nodes reading it (a node reading twice counts twice) */
    float *data;                   /* weights: stored values (fp32, logical order) */
    int borrowed;                  /* data belongs to the graph this one was cloned from:
                                      call fg_tensor_own before writing it */
    double *scale;                 /* pending fold scale along scale_axis, or NULL: the
                                      weight's values are data[i] * scale[slice of i]
                                      (read them with fg_tensor_values); owned */
    int scale_axis;
    int model_rank0;               /* a graph input or output the model declares rank 0: stored as
                                      [1], reported as rank 0 (fg_exec_*_info) */
    int model_float64;             /* a graph input or output the model declares float64: fp32
                                      here, converted at the boundary by the bindings */
    fg_loc loc;
} fg_tensor;

typedef struct fg_node {
    const char *name;              /* interned, unique in the graph */
    const fg_opdef *op;
    int ninputs;                   /* == op->ninputs */
    int inputs[FG_MAX_INPUTS];     /* tensor indices, parallel to op->inputs; -1 = absent optional */
    int output;                    /* tensor index */
    fg_attr_value attrs[FG_MAX_ATTRS]; /* parallel to op->attrs, defaults filled in */
    int folded;                    /* plan copies only: folded away, computes the identity of input 0 */
    fg_loc loc;
} fg_node;

struct fg_graph {
    const char *name;
    const char *path;              /* file it was loaded from (interned) or NULL */
    uint64_t seed;                 /* for generated weights */
    fg_precision precision;        /* fp32 arithmetic plans may use (fusegen.h) */
    fg_tensor *tensors;
    int ntensors, tensors_cap;
    fg_node *nodes;                /* topologically sorted after loading */
    int nnodes, nodes_cap;
    int *inputs;                   /* tensor indices of graph inputs, file order */
    int ninputs;
    int *outputs;                  /* tensor indices of graph outputs, file order */
    int noutputs;
};

/* Lookup helpers (graph.c).  A tensor is found by its user name (the model's
 * own, fg_tensor_user_name) first, then by its identifier. */
int fg_graph_find_tensor(const fg_graph *g, const char *name);   /* -1 if none */
/* The name users type and read: the model's own, else the identifier. */
const char *fg_tensor_user_name(const fg_tensor *t);
int fg_graph_find_node(const fg_graph *g, const char *name);     /* -1 if none */
int64_t fg_tensor_numel(const fg_tensor *t);
/* The precision named s ("exact", "tf32"), or -1 (precision.c). */
int fg_precision_parse(const char *s);
size_t fg_dtype_size(fg_dtype t);
/* Whether t is fp32, fp16 or bf16 (the types arithmetic templates take). */
int fg_dtype_is_float(fg_dtype t);
/* Attribute access by name on a node (must exist in its op definition). */
const fg_attr_value *fg_node_attr(const fg_node *n, const char *name);
int64_t fg_node_attr_int(const fg_node *n, const char *name, int index);
/* An attribute value as a number (INTS: the first element; STRING: 0). */
double fg_attr_number(const fg_attr_value *v);
/* Attribute name of n as a number, or def when n's op does not define it. */
double fg_node_attr_num(const fg_node *n, const char *name, double def);
/* Slot of n's op input called name, or -1. */
int fg_node_input(const fg_node *n, const char *name);
double fg_node_attr_float(const fg_node *n, const char *name);
/* Begin and end padding of a conv2d / pool2d node along H and W: `padding`
 * [top, left] pads both sides equally, [top, left, bottom, right] (ONNX
 * order) gives each side; no `padding` attribute: zeros.  Index arithmetic
 * needs only beg; the output size uses beg + end. */
void fg_node_pads(const fg_node *n, int64_t beg[2], int64_t end[2]);
/* Copy whose weight data is borrowed from g (copy-on-write through
 * fg_tensor_own), so g must outlive the copy. */
fg_graph *fg_graph_clone(const fg_graph *g);
/* Makes t's data private (copies borrowed data), applies a pending scale,
 * and returns the data, ready to be written. */
float *fg_tensor_own(fg_tensor *t);
/* A weight's values, pending scale applied, as float or double. */
void fg_tensor_values(const fg_tensor *t, float *dst);
void fg_tensor_values_f64(const fg_tensor *t, double *dst);
/* Multiplies a weight's values along axis by s[0 .. shape[axis]) without
 * touching the data now: the scale is applied when the values are read or
 * the data is made private.  This is how folds rescale large weights. */
void fg_tensor_scale(fg_tensor *t, int axis, const double *s);
/* Appends a tensor/node and returns its index (graph.c). */
int fg_graph_add_tensor(fg_graph *g, const fg_tensor *t);
int fg_graph_add_node(fg_graph *g, const fg_node *n);
/* Recomputes producer / nconsumers from the nodes. */
void fg_graph_recount(fg_graph *g);
/* How many times tensor t is read by g's nodes, counted now (a node reading
 * it twice counts twice); unlike nconsumers, never stale. */
int fg_graph_reads(const fg_graph *g, int t);

/* ---- fusion rules ----------------------------------------------------- */

typedef struct fg_rule_step {
    const char *name;                      /* step name, e.g. "conv" */
    int nops;
    const fg_opdef *ops[FG_MAX_STEP_OPS];  /* `op: [a, b]`: alternation */
    unsigned kinds;                        /* `kind: [pointwise]`: any op of these kinds, bit (1u << fg_op_kind) */
    int optional;                          /* `optional: true` */
    int repeat;                            /* `repeat: true`: one or more in a row (pointwise only) */
    int input_map;                         /* `input_map: true`: a leading reshape / transpose step whose node
                                              is not computed: the anchor reads its main input through the
                                              composed index map (index_map.h) */
    int chain_input;                       /* `chain_input: N`: the node reads the previous step's output as
                                              its input N (stored N + 1; 0: as any input) */
    struct fg_expr *where;                 /* attribute predicate or NULL */
    const char *where_src;
    const char *where_hook;                /* Lua function name or NULL */
    int nwhere_vars;                       /* variable i of `where` is the attribute named */
    const char *where_vars[FG_MAX_WHERE_VARS]; /* where_vars[i] (interned; union over the step's ops) */
    fg_loc loc;
} fg_rule_step;

typedef enum fg_epi_kind {
    FG_EPI_BIAS = 0,       /* add a per-channel vector: `bias: conv.bias` */
    FG_EPI_APPLY,          /* apply a pointwise step's expression: residual add, activation,
                              or a batch_norm (a per-channel scale/shift) */
    FG_EPI_HOOK,           /* CUDA text returned by a Lua hook */
    FG_EPI_KIND_COUNT
} fg_epi_kind;

typedef struct fg_epi_stage {
    fg_epi_kind kind;
    int step;              /* rule step index it refers to (APPLY of a repeat step: every node it matched) */
    int input;             /* BIAS: input index of that step's op (e.g. conv's `bias`) */
    const char *hook;      /* HOOK: Lua function name */
    fg_loc loc;
} fg_epi_stage;

typedef struct fg_fold {
    const char *name;      /* builtin fold (fold.c) or Lua function */
    int is_hook;
    fg_loc loc;
} fg_fold;

typedef struct fg_rule {
    const char *name;                      /* interned, unique */
    int priority;                          /* higher wins */
    int nsteps;
    fg_rule_step steps[FG_MAX_STEPS];
    int nfolds;
    fg_fold folds[FG_MAX_FOLDS];
    const char *template_name;             /* a template family or template (template.h); NULL: any */
    const char *select_hook;               /* Lua function choosing among accepted templates, or NULL */
    int nepilogue;
    fg_epi_stage epilogue[FG_MAX_EPILOGUE];
    unsigned dtypes;                       /* bit (1u << fg_dtype) allowed; all if `dtypes:` absent */
    unsigned layouts;                      /* bit (1u << fg_layout) allowed */
    const char *tile_hook;                 /* Lua function choosing template parameters, or NULL */
    const char *hook_file;                 /* Lua file the rule's hooks live in, or NULL */
    fg_loc loc;                            /* the `rule:` line */
    uint64_t file_hash;                    /* hash of the rule file (and its hook file) */
} fg_rule;

/* ---- plans ------------------------------------------------------------ */

/* A resolved epilogue stage of one group: what to apply, with graph indices. */
typedef struct fg_group_epi {
    fg_epi_kind kind;
    int node;              /* plan-graph node the stage comes from */
    int tensor;            /* BIAS: the bias tensor; else -1 */
    const char *hook;      /* HOOK */
    struct fg_expr *expr;  /* HOOK: the hook's expression over v and c, from the planner (owned by the plan) */
} fg_group_epi;

#define FG_MAX_TILE_KEYS 8     /* tile keys a template declares (fg_template.tiles) */

typedef struct fg_group {
    int rule;                              /* index into ctx rules; -1: single op, no rule */
    int nnodes;
    int nodes[FG_MAX_GROUP_NODES];         /* plan-graph nodes in chain order */
    int anchor;                            /* node that the template computes (conv/matmul/pool), or -1 */
    int nmap;                              /* nodes[0 .. nmap): the anchor's input map, reshapes and
                                              transposes the anchor reads its input 0 through (never
                                              stored; 0: none); the anchor is nodes[nmap] */
    const char *template_name;             /* the template chosen (template.h) */
    int64_t tile[FG_MAX_TILE_KEYS];        /* the rule's `params:` hook's value for each of the template's tile
                                              keys (fg_template.tiles order), in its declared range; 0: the
                                              template's default */
    int nepi;
    fg_group_epi epi[FG_MAX_EPILOGUE];
    int output;                            /* tensor the group writes */
    int64_t saved_bytes;                   /* intermediate bytes no longer written + read back */
    char *choice;                          /* templates considered and why (--explain); owned by the plan */
} fg_group;

struct fg_plan {
    fg_graph *graph;                       /* owned copy, folding applied; weights the folds did not
                                              rewrite are borrowed from source */
    const fg_graph *source;                /* the graph planned (not owned; must outlive the plan) */
    int ngroups;
    fg_group *groups;                      /* in execution order */
    char **notes;                          /* --explain: one line per near miss */
    int nnotes;
    int *node_group;                       /* plan-graph node -> group index (-1: folded away, or a
                                              concat whose inputs are all written in place) */
    struct fg_concat_views *views;         /* concat elimination: tensors stored inside a concat's
                                              output (concat_inplace.h); owned; NULL: none */
    double match_ms, fold_ms;              /* time spent matching rules and folding parameters */
    int nhwc_acts, nhwc_weights;           /* tensors the layout pass stored NHWC (layout_assign.h) */
    int kmajor_b;                          /* matmul weights stored [N, K] for tf32 wgmma (layout_assign.h) */
};

#endif /* FG_IR_H */
