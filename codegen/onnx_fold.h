/*
 * onnx_fold.h -- import-time constant folding for the ONNX importer
 * (docs/onnx.md, "Constant folding").  A node whose inputs are all
 * constants (initializers, Constant nodes, outputs of folded nodes) and
 * whose operator the folder knows is evaluated while the model is loaded,
 * as onnxruntime's constant folding does: its outputs become constants,
 * then weights where a node reads them as tensors.  Shape and Size also fold
 * on computed tensors, whose shapes are static once the graph is loaded.
 *
 * Values are evaluated in double (float types) or in int64 (integer types)
 * and rounded to the node's output type at the end: float16 and bfloat16
 * results are rounded to nearest even, int32 results wrap as int32 does.
 * The folder is codegen only: nothing here calls the runtime.
 */
#ifndef FG_ONNX_FOLD_H
#define FG_ONNX_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include <onnx/onnx.pb-c.h>

#include "ir.h"

/* ONNX TensorProto.DataType values the importer and the folder hold. */
typedef enum fg_onnx_dtype {
    FG_ONNX_DTYPE_FLOAT = 1,
    FG_ONNX_DTYPE_INT32 = 6,
    FG_ONNX_DTYPE_INT64 = 7,
    FG_ONNX_DTYPE_BOOL = 9,
    FG_ONNX_DTYPE_FLOAT16 = 10,
    FG_ONNX_DTYPE_DOUBLE = 11,
    FG_ONNX_DTYPE_BFLOAT16 = 16,
} fg_onnx_dtype;

/* The ONNX name of data type dt ("FLOAT", "INT64", ...; any value). */
const char *fg_onnx_dtype_name(int dt);
/* Bytes of one element of dt; 0 for a type not held. */
int fg_onnx_dtype_size(int dt);
/* x rounded (ties to even) to ONNX float type dt, as the float a constant
 * of that type holds (fp16 and bf16 values are exact in a float). */
float fg_onnx_round_float(double x, int dt);
/* Nonzero for the float types held (float, float16, bfloat16, double). */
int fg_onnx_dtype_is_float(int dt);

/* A constant of the importer: an initializer, a Constant node's value or a
 * folded result.  Float types (float, float16, bfloat16, double) hold their
 * values in f (fp32; fp16 and bf16 values are exact), int32 and int64 in i. */
typedef struct fg_onnx_const {
    const char *name;      /* ONNX name (owned by the decoded model) */
    int dtype;             /* ONNX TensorProto data type */
    int rank;              /* may be 0 (a scalar) */
    int64_t shape[FG_MAX_RANK];
    int64_t numel;
    float *f;              /* float types */
    int64_t *i;            /* integer types */
    int weight;            /* graph tensor made from it, or -1 */
} fg_onnx_const;

/* One input of a node to fold: a constant, or (Shape and Size only) the
 * static shape of a computed tensor.  k NULL and rank -1: absent. */
typedef struct fg_onnx_fold_in {
    const fg_onnx_const *k;
    int rank;
    const int64_t *shape;
    int dtype;                 /* a computed input's ONNX element type (0: unknown) */
} fg_onnx_fold_in;

/* Most outputs a folded node defines. */
#define FG_ONNX_FOLD_MAX_OUT 1

/* Nonzero when the folder evaluates operator op_type of the default
 * domain ("Gather", "Add", ...).  Constant is not among them: the importer
 * decodes its value itself. */
int fg_onnx_fold_known(const char *op_type);

/* Marks in fold[0 .. gp->n_node) the nodes that will be folded: a known
 * operator of the default domain whose inputs are all constant (names of
 * initializers, outputs of Constant nodes and of nodes marked before it);
 * Shape and Size with any input; CastLike with any input 1 (its type).
 * Nodes are in topological order, as ONNX requires. */
void fg_onnx_fold_mark(const Onnx__GraphProto *gp, unsigned char *fold);

/* Evaluates node n (opset: the model's default-domain opset) on ins[0 ..
 * nins) into out[0] (name and weight left to the caller; values malloc'd,
 * owned by the caller).  budget: the bytes the result may hold (4 per float
 * value, 8 per integer), checked from the shapes before anything is
 * allocated or copied.  Returns 1, or 0 with a reason in err (without the
 * node's label, which the caller adds). */
int fg_onnx_fold_eval(const Onnx__NodeProto *n, int opset, const fg_onnx_fold_in *ins, int nins, uint64_t budget,
                      fg_onnx_const *out, char *err, size_t errsz);
/* The bytes constant k holds (4 per float value, 8 per integer). */
uint64_t fg_onnx_const_bytes(const fg_onnx_const *k);

#endif /* FG_ONNX_FOLD_H */
