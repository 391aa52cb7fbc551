/*
 * emit_impl.h -- internals of source emission shared by emit.c (the
 * framework: placeholders, parameters, offsets, the epilogue, assembly) and
 * the template families emit_<family>.c, whose rows (template.h) point at
 * their emitters.
 *
 * A family fills the emitter's dictionary (placeholder -> text), names the
 * template file, registers the template's shape constants, and sets the
 * launch geometry; emit.c renders the template and assembles the source:
 *   header comment, #include, params struct, helper functions, kernel.
 */
#ifndef FG_EMIT_IMPL_H
#define FG_EMIT_IMPL_H

#include "context.h"
#include "emit.h"

#define FG_EM_MAX_VARS 48
#define FG_EM_MAX_SHAPES 48
#define FG_EM_MAX_PRE 8

struct fg_template;

typedef struct fg_emitter {
    fg_context *ctx;
    const struct fg_template *tpl; /* the group's template (template.h) */
    fg_status st;                 /* first internal failure (fg_em_fail), reported at the end */
    const fg_plan *plan;
    const fg_graph *g;
    const fg_group *grp;
    const fg_rule *rule;          /* NULL: single op */
    const fg_emit_opts *opts;
    fg_kernel *k;
    fg_loc loc;                   /* where errors point: the rule, else the anchor node */
    int out;                      /* output tensor index */
    const fg_tensor *ot;
    const fg_tensor *epi_ot;      /* the tensor whose coordinates fg_epilogue takes, when not the output
                                     (attention: the scores); NULL: ot */
    int main_node;                /* node the template computes (anchor or first pointwise node) */
    const char *template_file;    /* e.g. "conv2d.cuh" */
    unsigned threads;             /* block size (also FG_KERNEL's max_threads) */
    int vec_names;                /* fg_em_apply: inputs are arrays in_<name>[j], loaded by the caller */
    int npre;                     /* epilogue inputs the template loads itself (pointwise vector path): */
    struct { int t, per_channel; } pre[FG_EM_MAX_PRE]; /* a read of tensor t (so indexed) is the
                                     epilogue's parameter pre_<k>, passed after v; 0 for other families */
    int nvars;
    struct { const char *name; char *value; } vars[FG_EM_MAX_VARS];
    int nshapes;
    struct { char name[24]; int64_t value; } shapes[FG_EM_MAX_SHAPES];
    int epi_vec_axis;             /* set by a family before the epilogue: 1 + the output axis along which it
                                     calls fg_epilogue8 on 8 consecutive elements (0: it does not) */
    fg_buf helpers;               /* device functions placed before the kernel */
    fg_buf notes;                 /* extra header-comment lines */
} fg_emitter;

/* ---- emit.c: services for the families -------------------------------- */

/* Sets placeholder name (a string literal) to the formatted text. */
void fg_em_set(fg_emitter *em, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Registers a shape constant of the template: `const fg_i64 NAME = value;`
 * (specialized) or `= p.dim_NAME;` (an I64 parameter).  Only constants the
 * kernel text mentions are emitted. */
void fg_em_shape(fg_emitter *em, const char *name, int64_t value);
/* Adds the split-K parameters: a workspace of slot_bytes (placeholder WS)
 * and `counters` int counters in their own zeroed buffer (placeholder WSC);
 * with slot_bytes 0 neither, and WS / WSC name no field. */
void fg_em_split_buffers(fg_emitter *em, int64_t slot_bytes, int64_t counters);
/* Field name of tensor t in the params struct (added on first use). */
const char *fg_em_tensor(fg_emitter *em, int t, int writes);
/* C type of tensor t's elements: "float", "fg_half", "fg_bf16", "fg_i64",
 * "fg_i32", "fg_bool" (the preludes' storage types). */
const char *fg_em_ctype(fg_dtype d);
/* Whether every tensor the group reads or writes has a float type (vector
 * access paths take only those). */
int fg_em_all_float(const fg_emitter *em);
/* Appends the C text of dimension `axis` of tensor t: a literal when
 * specializing, else p.dim_<field>_<axis>. */
void fg_em_dim(fg_emitter *em, int t, int axis, fg_buf *out);
/* Appends the memory offset of tensor t's element at logical coordinates
 * coords[0..crank) of a space of shape cshape: numpy broadcasting
 * (right-aligned, size-1 axes read index 0); a per_channel rank-1 tensor is
 * indexed by the channel coordinate.  Follows t's own layout.  Errors when t
 * does not broadcast to cshape. */
fg_status fg_em_offset(fg_emitter *em, int t, int per_channel, const char *const *coords, int crank,
                       const int64_t *cshape, fg_buf *out);
/* Appends a helper `FG_DEVICE fg_i64 fname(const Params &p, fg_i64 n, ...)`
 * returning the offset of tensor t at its own logical coordinates. */
fg_status fg_em_offset_fn(fg_emitter *em, const char *fname, int t, const char *const *coords);
/* The channel axis of a rank-r output (per-channel inputs): 1, or 0 for rank 1. */
int fg_em_channel_axis(int rank);
/* Names of the output's logical coordinates (n c h w / b row col / row col / i0). */
const char *const *fg_em_coord_names(int rank);
/* Input slot of node n that carries the fused chain value (produced inside
 * the group), or -1. */
int fg_em_chain_input(const fg_emitter *em, int node);
/* Emits, at indentation ind, the loads of node's inputs other than the chain
 * input as locals `in_<name>` and returns in *expr the C expression of the
 * node's op with the chain input as `chain` (NULL: none).  Reads use the
 * output coordinates coords (rank of the output).  With a chain (an
 * epilogue node), a read listed in em->pre is the parameter pre_<k>. */
fg_status fg_em_apply(fg_emitter *em, int node, const char *chain, const char *const *coords, int ind,
                      fg_buf *code, fg_buf *expr);
/* The tile parameters keys[0..n), which the template declares
 * (fg_template.tiles): vals hold the defaults, replaced by the values the
 * rule's `params:` hook gave at plan time (fg_group.tile, in their declared
 * ranges). */
fg_status fg_em_tile_params(fg_emitter *em, const char *const *keys, int n, int64_t *vals);
/* Records an internal failure once (a limit of the emitter's own tables);
 * fg_emit_group returns it.  For paths that cannot return a status. */
void fg_em_fail(fg_emitter *em, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A C identifier from a name: non-alphanumerics become '_', a leading digit
 * gets a 't' before it. */
void fg_em_identifier(const char *s, char *out, size_t size);
/* Field name of an I64 parameter named base with that value (added once). */
const char *fg_em_i64_param(fg_emitter *em, const char *base, int64_t value);
/* Emits fg_epilogue(p, v, coordinates...) into em->helpers (emit_epilogue.c): the
 * coordinates of em->epi_ot when the family set it, else of the output. */
fg_status fg_em_epilogue(fg_emitter *em);
/* The scalar epilogue as function fname, taking em->pre's parameters
 * pre_<k> after v (bias stages read theirs too). */
fg_status fg_em_epilogue_named(fg_emitter *em, const char *fname);
/* emit_epilogue_vec.c: when the family set em->epi_vec_axis, emits
 * fg_epilogue8(p, float v[8], coordinates of the first element) -- the
 * epilogue of 8 consecutive elements along that axis, whose extra inputs
 * (residuals, biases) that run along it are read 16 bytes at a time -- and
 * sets placeholder VEC_EPI to 1; to 0 when the output's innermost axis is
 * not that axis or its size not a multiple of 8 (the template then keeps
 * its scalar epilogue).  Called by fg_em_epilogue. */
fg_status fg_em_epilogue_vec(fg_emitter *em);
/* Records an error at the emitter's location (rule or node). */
fg_status fg_em_error(fg_emitter *em, fg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Integer attribute `name` of node nd (element index of an INTS list). */
int64_t fg_em_attr_int(const fg_emitter *em, int nd, const char *name, int index);
/* Emits, at indentation ind, locals coords[0..rank) decomposing the linear
 * memory index `lin` of tensor t (t's layout): `const fg_i64 w = lin % 5;`... */
void fg_em_decompose(fg_emitter *em, int t, const char *lin, const char *const *coords, int ind, fg_buf *out);
/* Appends, at indentation ind, the statement that moves the mutable
 * coordinates coords of tensor t to its next element in memory order: the
 * innermost stored axis + 1, carried outwards (no division). */
void fg_em_step_coords(fg_emitter *em, int t, const char *const *coords, int ind, fg_buf *out);
/* Number of elements of tensor t. */
int64_t fg_em_numel(const fg_emitter *em, int t);

/* Appends dimension `axis` of tensor t: fg_em_dim's text, or for a tensor
 * made inside em's group that is not its output (never stored, so it has
 * no tensor parameter) a literal when specializing, else an I64 parameter
 * of its own (p.dim_t<tensor>_<axis>). */
void fg_em_group_dim(fg_emitter *em, int t, int axis, fg_buf *out);
/* Nonzero when tensor t's memory order is its logical row-major order
 * (every tensor but a rank-4 NHWC one with more than one channel and more
 * than one pixel). */
int fg_em_row_major(const fg_emitter *em, int t);
/* Emits, at indentation ind, locals names[d] = axis d of the logical
 * (row-major) index `lin` of tensor t, for every axis of size above 1;
 * names of size-1 axes are set to "0" (not declared).  names must hold
 * t's rank writable entries; base gives their prefix when non-NULL
 * ("x" -> x0, x1, ...), else the output coordinate names are used. */
void fg_em_lin_coords(fg_emitter *em, int t, const char *lin, const char *base, char names[][16], int ind,
                      fg_buf *out);
/* Body of a helper `float f(const Params &p, fg_i64 lin)` returning tensor t's
 * element at logical (row-major) index lin, in t's layout. */
fg_status fg_em_lin_load_body(fg_emitter *em, int t, fg_buf *b);
/* Body of a helper `void f(const Params &p, fg_i64 lin, float v)` storing v
 * through the epilogue at the output's logical index lin. */
fg_status fg_em_lin_store_body(fg_emitter *em, fg_buf *b);
/* Sets the launch of a one-dimensional grid-stride kernel over work items. */
void fg_em_launch_1d(fg_emitter *em, int64_t work, int64_t threads);
/* The `threads` tile parameter (default def), in the range the template
 * declares (fg_tile_threads: 32..1024, a multiple of 32). */
fg_status fg_em_threads(fg_emitter *em, int64_t def, int64_t *threads);

struct fg_matmul_geom_t;
/* Emits, at indentation ind, the locals yb<i> = coordinate i of batch `bt`
 * of a batched matmul's output (d: shape.h), registering the shape
 * constants YB<i> they divide by. */
void fg_em_batch_coords(fg_emitter *em, const struct fg_matmul_geom_t *d, int ind, fg_buf *b);
/* Emits the batch of blockIdx.z's output matrix in a batched matmul kernel:
 * a comment, fg_em_batch_coords' locals and the operands' matrix offsets
 * a_base, b_base (0 along broadcast axes, strides SA<i> / SB<i>) and
 * y_base; one `a_base = 0, b_base = 0, y_base = 0` line without batch axes. */
void fg_em_batch_text(fg_emitter *em, const struct fg_matmul_geom_t *d, fg_buf *b);
/* Placeholders an embedded template file uses (NULL-terminated list, read
 * from the file when it was embedded), or NULL when the file is not a kernel
 * template. */
const char *const *fg_template_placeholders(const char *file);
/* Names of all kernel template files (NULL-terminated). */
const char *const *fg_template_files(void);

/* Renders template text with em's dictionary into out.  A placeholder with
 * no value is an error; sections {{#X}}..{{/X}} (kept when X is neither empty
 * nor "0") and {{^X}}..{{/X}} (kept otherwise) may span lines. */
fg_status fg_em_render(fg_emitter *em, const char *name, const char *text, fg_buf *out);

#endif /* FG_EMIT_IMPL_H */
