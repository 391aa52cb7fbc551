/*
 * onnx_impl.h -- internals of the ONNX importer shared by its three parts
 * (contract in onnx_load.h, format notes in docs/onnx.md):
 *   onnx_decode.c   recognising a model, reading it, the nesting guard,
 *                   tensors as constants;
 *   onnx_convert.c  the converters of each operator, the operator table, the
 *                   conversion or folding of one node (onnx_convert_index.c:
 *                   the converters of the data-movement operators, through
 *                   the services declared at the end of this header);
 *   onnx_graph.c    the loader's state, graph inputs and outputs, the model
 *                   walk, the entry points;
 *   onnx_convert_resize.c  the converters of Resize, Upsample, ConvTranspose
 *                   (through the node services of onnx_convert.c below).
 * Nothing outside these files includes this header.
 */
#ifndef FG_ONNX_IMPL_H
#define FG_ONNX_IMPL_H

#include <stdint.h>
#include <uthash.h>

#include <onnx/onnx.pb-c.h>

#include "context.h"
#include "onnx_fold.h"
#include "onnx_load.h"

/* Nesting of messages allowed in a model (a graph in an attribute in a node
 * in a graph ... counts one per message). */
#define FG_ONNX_PB_MAX_DEPTH 64

typedef enum vkind { V_TENSOR = 0, V_CONST } vkind;

/* What an ONNX value name stands for: a graph tensor or a constant. */
typedef struct value {
    UT_hash_handle hh;
    const char *name;      /* the ONNX name (owned by the decoded model) */
    vkind kind;
    int idx;               /* tensor index or constant index */
} value;

/* A constant (initializer, Constant node output or folded result). */
typedef fg_onnx_const konst;

/* A set of names (sanitized graph names in use). */
typedef struct name_ent {
    UT_hash_handle hh;
    char *name;
    int next;   /* as a base name: the next suffix to try (0: 2) */
} name_ent;

/* The state of one load. */
typedef struct loader {
    fg_context *ctx;
    fg_graph *g;
    const char *file;          /* interned, for locations */
    fg_loc loc;
    const char *base_dir;      /* external data root, or NULL */
    int base_fd;               /* base_dir opened (once, at the first external tensor), or -1 */
    int own_base_fd;           /* base_fd is closed at the end of the load */
    const fg_onnx_options *opts;
    int opset;
    value *values;
    konst *consts;
    int nconsts, consts_cap;
    name_ent *tnames, *nnames; /* tensor and node names in use */
    const char **tensor_onnx;  /* per tensor: the ONNX name it was made for (NULL: derived) */
    int tensor_onnx_cap;
    value *used;               /* ONNX names read by some node or listed as graph outputs */
    value *outs;               /* ONNX names of the graph outputs */
    int errs0;                 /* the context's error count when the load began */
    int unknown;               /* tensor index of the "unknown" placeholder (after an error), or -1 */
    unsigned char *fold;       /* per node: folded at import (onnx_fold.h) */
    uint64_t fold_left;        /* bytes folded results may still take (ctx->env.onnx_fold_bytes at the start) */
} loader;

/* ---- onnx_graph.c: the loader's state ------------------------------------ */

/* Reports an error at the model's location; returns FG_ERR_INPUT. */
fg_status fg_onnx_lerr(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name for messages in buf: bytes outside printable ASCII (and the quote
 * and backslash) as \xHH, cut with "..." when it does not fit. */
const char *fg_onnx_esc(const char *s, char *buf, size_t size);
/* The value an ONNX name stands for in table t, or NULL. */
value *fg_onnx_vfind(value *t, const char *name);
/* Sets (adds or replaces) what name stands for in *t; name is not copied. */
void fg_onnx_vset(value **t, const char *name, vkind kind, int idx);
/* A graph name for raw: sanitized, unique in *set, interned. */
const char *fg_onnx_unique_name(loader *L, name_ent **set, const char *raw);
/* Appends tensor t made for ONNX name onnx_name (NULL: derived); its index. */
int fg_onnx_add_tensor(loader *L, const fg_tensor *t, const char *onnx_name);
/* The placeholder that stands for the outputs of a node that failed. */
int fg_onnx_unknown_tensor(loader *L);
/* A new constant of the given shape with values f or iv (taken over); its
 * index. */
int fg_onnx_new_const(loader *L, const char *name, int dtype, int rank, const int64_t *shape, float *f, int64_t *iv);
/* A weight tensor with the given values (copied); returns its index. */
int fg_onnx_new_weight(loader *L, const char *onnx_name, const char *hint, fg_dtype dt, int rank,
                       const int64_t *shape, const float *data);

/* ---- onnx_decode.c: decoding ---------------------------------------------- */

/* 0 when messages of type d in p .. end nest deeper than
 * FG_ONNX_PB_MAX_DEPTH (depth: the nesting of p itself); 1 otherwise (also
 * when the bytes are malformed: protobuf-c reports that). */
int fg_onnx_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth);
/* fusegen dtype of an ONNX float type; -1 for others. */
int fg_onnx_dtype_fg(int dt);
/* The ONNX data type of fusegen dtype t (0 for none). */
int fg_onnx_dtype_of(fg_dtype t);
/* Decodes TensorProto t into a new constant named name (what: for
 * messages); returns its index or -1 (errors reported). */
int fg_onnx_decode_tensor(loader *L, const Onnx__TensorProto *t, const char *name, const char *what);

/* ---- onnx_convert.c: converters ------------------------------------------- */

/* A supported operator: its converter and what it accepts. */
typedef struct fg_onnx_op fg_onnx_op;

/* The supported operator node n is, or NULL: a converter of the importer,
 * or an op of the loaded vocabulary whose `onnx:` key names n's type (of
 * the default domain). */
const fg_onnx_op *fg_onnx_find_op(const loader *L, const Onnx__NodeProto *n);
/* Converts node i of operator op.  Outputs of a node that failed, or that
 * reads the output of one, stand for the unknown placeholder. */
void fg_onnx_convert_node(loader *L, int i, const Onnx__NodeProto *n, const fg_onnx_op *op);
/* Folds node i, which fg_onnx_fold_mark marked: its output becomes a
 * constant.  A node that cannot be evaluated is an error naming it. */
void fg_onnx_fold_node(loader *L, int i, const Onnx__NodeProto *n);

/* ---- onnx_convert.c: node services for converters in other files ---------- */
/* struct nctx is the node being converted (onnx_convert.c). */
struct nctx;

/* Reports an error at the node (its label first) and marks it failed;
 * returns FG_ERR_INPUT. */
fg_status fg_onnx_nc_err(struct nctx *nc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nonzero when the node failed (an error was reported). */
int fg_onnx_nc_failed(const struct nctx *nc);
/* The loader, and the node's proto. */
loader *fg_onnx_nc_loader(const struct nctx *nc);
/* The computed input 0 as a tensor (reported when missing), or -1. */
int fg_onnx_nc_x(struct nctx *nc);
/* fg_onnx_nc_has_in (below): input i is given (a non-empty name). */
/* Input i as a tensor (a constant becomes a weight), or -1. */
int fg_onnx_nc_in_tensor(struct nctx *nc, int i);
/* Constant input i, or NULL (absent or computed). */
fg_onnx_const *fg_onnx_nc_in_const(const struct nctx *nc, int i);
/* Attribute name of the node, or NULL. */
const Onnx__AttributeProto *fg_onnx_nc_attr(const struct nctx *nc, const char *name);
/* Appends a node of op opname reading ins[0..nins) with attributes
 * names[i] = vals[i] (i < nas) whose output is the node's output 0;
 * returns the output tensor or -1 (reported). */
int fg_onnx_nc_emit_out(struct nctx *nc, const char *opname, const int *ins, int nins, const char *const *names,
                        const fg_attr_value *vals, int nas);

/* ---- onnx_convert_resize.c: converters --------------------------------- */

int fg_onnx_op_resize(struct nctx *nc);
int fg_onnx_op_upsample(struct nctx *nc);
int fg_onnx_op_conv_transpose(struct nctx *nc);
/* ---- onnx_convert.c: services for converters kept in files of their own
 * (onnx_convert_index.c: Slice, Split, Gather, Expand, Tile, Pad) ---------- */

/* The node being converted (onnx_convert.c's state of one node). */
typedef struct nctx fg_onnx_nctx;

/* Reports "<node label>: <message>" and marks the node failed; FG_ERR_INPUT. */
fg_status fg_onnx_nerr(fg_onnx_nctx *nc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The ONNX node, the model's opset. */
const Onnx__NodeProto *fg_onnx_nc_node(const fg_onnx_nctx *nc);
int fg_onnx_nc_opset(const fg_onnx_nctx *nc);
/* Whether input i is given; constant input i or NULL (absent or computed);
 * input i as a tensor (a constant becomes a weight), -1 absent or error. */
int fg_onnx_nc_has_in(const fg_onnx_nctx *nc, int i);
const konst *fg_onnx_nc_const(const fg_onnx_nctx *nc, int i);
int fg_onnx_nc_tensor(fg_onnx_nctx *nc, int i);
/* Tensor t of the graph being built. */
const fg_tensor *fg_onnx_nc_T(const fg_onnx_nctx *nc, int t);
/* Whether output i is read by a node or is a graph output. */
int fg_onnx_nc_out_used(const fg_onnx_nctx *nc, int i);
/* Attribute readers (absent: def; of another type: reported, def); ints:
 * exactly want values (1..max when want is 0), the count, 0 absent, -1 bad. */
int64_t fg_onnx_nc_attr_int(fg_onnx_nctx *nc, const char *name, int64_t def);
/* The `axis` attribute (def when absent) normalized for rank into *axis: 0,
 * or -1 after a located error when it is out of range. */
int fg_onnx_nc_axis(fg_onnx_nctx *nc, int rank, int64_t def, int64_t *axis);
double fg_onnx_nc_attr_float(fg_onnx_nctx *nc, const char *name, double def);
const char *fg_onnx_nc_attr_str(fg_onnx_nctx *nc, const char *name, const char *def, char *buf, size_t size);
int fg_onnx_nc_attr_ints(fg_onnx_nctx *nc, const char *name, int want, int max, int64_t *out);
/* An int64 list from constant input i (attribute name before opset
 * attr_until); the count, -1 on error (reported), -2 when absent. */
int fg_onnx_nc_ints_in(fg_onnx_nctx *nc, int i, const char *name, int attr_until, int64_t *out, int max);
/* Appends a node of op opname reading ins[0..nins) with attributes
 * names[j] = vals[j], its output named after ONNX output out_slot (suffix
 * non-NULL: an intermediate named after the node); the output tensor or -1
 * (reported). */
int fg_onnx_nc_emit(fg_onnx_nctx *nc, const char *opname, const int *ins, int nins, const char *const *names,
                    const fg_attr_value *vals, int nas, int out_slot, const char *suffix);
/* ONNX output i stands for tensor t; output 0 for the same value as input i. */
void fg_onnx_nc_def_output(fg_onnx_nctx *nc, int i, int t);
void fg_onnx_nc_alias(fg_onnx_nctx *nc, int i);
/* Output 0 is input 0 viewed with shape[0..r) (as ONNX Reshape). */
int fg_onnx_nc_reshape_to(fg_onnx_nctx *nc, int r, const int64_t *shape);
/* The converters of onnx_convert_index.c (rows of onnx_convert.c's table). */
int fg_onnx_op_slice(fg_onnx_nctx *nc);
int fg_onnx_op_split(fg_onnx_nctx *nc);
int fg_onnx_op_gather(fg_onnx_nctx *nc);
int fg_onnx_op_gather_nd(fg_onnx_nctx *nc);
int fg_onnx_op_expand(fg_onnx_nctx *nc);
int fg_onnx_op_tile(fg_onnx_nctx *nc);
int fg_onnx_op_pad(fg_onnx_nctx *nc);
/* The node being converted becomes n (a stand-in with other inputs,
 * outputs or attributes; the caller restores the original). */
void fg_onnx_nc_set_node(fg_onnx_nctx *nc, const Onnx__NodeProto *n);

/* ---- onnx_convert_1d.c ------------------------------------------------- */

/* Converts a 1-D window node (input 0 of rank 3; weighted: input 1 is a
 * rank-3 weight) through conv2d, its 2-D converter, on the [N, C, 1, L]
 * view; output 0 is the result viewed as rank 3.  Returns the output
 * tensor or -1 (reported). */
int fg_onnx_lift_1d(fg_onnx_nctx *nc, int (*conv2d)(fg_onnx_nctx *), int weighted);

#endif /* FG_ONNX_IMPL_H */
