/*
 * onnx_fold.c -- import-time constant folding of ONNX nodes (contract in
 * onnx_fold.h, user notes in docs/onnx.md): which nodes fold, and the
 * evaluation of each operator the folder knows on constants: shape
 * arithmetic (Shape, Size, Gather, Slice, Concat, Squeeze, Unsqueeze,
 * Reshape, Flatten, Transpose, Expand, Range, ConstantOfShape, Cast),
 * element-wise arithmetic with numpy broadcasting, comparisons, logic,
 * Where, Mod and ScatterND.  Float values are evaluated in double, integers
 * and bools (1 / 0) in int64, and rounded to the output type at the end.
 */
#include "onnx_fold.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "num.h"
#include "onnx_load.h"
#include "util.h"

const char *fg_onnx_dtype_name(int dt)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
                                        "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64",
                                        "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                        "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0",
                                        "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2"};
    return dt >= 0 && dt < (int)FG_COUNTOF(names) ? names[dt] : "an unknown type";
}

int fg_onnx_dtype_size(int dt)
{
    switch (dt) {
    case FG_ONNX_DTYPE_FLOAT:
    case FG_ONNX_DTYPE_INT32: return 4;
    case FG_ONNX_DTYPE_INT64:
    case FG_ONNX_DTYPE_DOUBLE: return 8;
    case FG_ONNX_DTYPE_BOOL: return 1;
    case FG_ONNX_DTYPE_FLOAT16:
    case FG_ONNX_DTYPE_BFLOAT16: return 2;
    default: return 0;
    }
}

int fg_onnx_dtype_is_float(int dt)
{
    return dt == FG_ONNX_DTYPE_FLOAT || dt == FG_ONNX_DTYPE_FLOAT16 || dt == FG_ONNX_DTYPE_BFLOAT16 ||
           dt == FG_ONNX_DTYPE_DOUBLE;
}

static int dt_int(int dt) { return dt == FG_ONNX_DTYPE_INT32 || dt == FG_ONNX_DTYPE_INT64 || dt == FG_ONNX_DTYPE_BOOL; }
static int dt_held(int dt) { return fg_onnx_dtype_size(dt) != 0; }

/* ---- values ----------------------------------------------------------------- */

/* A value being computed: doubles for float types, int64 for integers. */
typedef struct val {
    int dtype;
    int rank;
    int64_t shape[FG_MAX_RANK];
    int64_t n;
    double *d;
    int64_t *i;
} val;

/* The node being folded. */
typedef struct fctx {
    const Onnx__NodeProto *n;
    int opset;
    const fg_onnx_fold_in *ins;
    int nins;
    uint64_t budget;   /* bytes the result may hold (fg_onnx_fold_eval) */
    char *err;
    size_t errsz;
} fctx;

static int ferr(fctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the reason the node cannot be folded; returns 0. */
static int ferr(fctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errsz, fmt, ap);
    va_end(ap);
    return 0;
}

static void val_free(val *v)
{
    free(v->d);
    free(v->i);
    v->d = NULL;
    v->i = NULL;
}

/* Values up to which an allocation is not checked against the folding
 * budget (an attribute's one value, a shape): what the budget bounds is
 * large results; their bytes still count once kept. */
#define FOLD_SMALL 64

/* Gives v dtype, rank and shape and allocates its values (zeroed); 0 with
 * an error when the count overflows the importer's limit or, when budget,
 * when the result would be over the folding budget (checked first). */
static int val_make(fctx *c, val *v, int dtype, int rank, const int64_t *shape, int budget)
{
    memset(v, 0, sizeof *v);
    if (rank < 0 || rank > FG_MAX_RANK)
        return ferr(c, "the result would have rank %d; at most %d is supported", rank, FG_MAX_RANK);
    v->dtype = dtype;
    v->rank = rank;
    v->n = 1;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(v->n, shape[d], &v->n) || v->n > FG_ONNX_MAX_WEIGHT_NUMEL)
            return ferr(c, "the result would have more than %lld elements", (long long)FG_ONNX_MAX_WEIGHT_NUMEL);
        v->shape[d] = shape[d];
    }
    unsigned es = dt_int(dtype) ? 8u : 4u;
    if (budget && v->n > FOLD_SMALL && (uint64_t)v->n * es > c->budget)
        return ferr(c, "the result (%lld values, %.1f MiB) is over what is left of the folding budget (%.1f MiB; "
                       "FUSEGEN_ONNX_FOLD_MB sets it)", (long long)v->n, (double)v->n * es / 1048576.0,
                    (double)c->budget / 1048576.0);
    if (dt_int(dtype))
        v->i = fg_xcalloc((size_t)v->n + 1, sizeof *v->i);
    else
        v->d = fg_xcalloc((size_t)v->n + 1, sizeof *v->d);
    return 1;
}

/* A result value (within the folding budget); see val_make. */
static int val_alloc(fctx *c, val *v, int dtype, int rank, const int64_t *shape)
{
    return val_make(c, v, dtype, rank, shape, 1);
}

/* Element j of v as a double (integers converted). */
static double vget(const val *v, int64_t j) { return v->d ? v->d[j] : (double)v->i[j]; }

/* Rounds x to the nearest value with bits mantissa bits (ties to even),
 * exponents from emin, largest finite value max (beyond: infinity). */
static double round_to(double x, int bits, int emin, double max)
{
    if (x == 0 || isnan(x) || isinf(x))
        return x;
    int e;
    frexp(x, &e);   /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (e < emin)
        e = emin;
    double q = ldexp(1.0, e - bits);
    double r = nearbyint(x / q) * q;
    if (fabs(r) > max)
        return copysign(INFINITY, x);
    return r;
}

/* x rounded to float type dt, as the float the importer holds. */
static float round_float(double x, int dt)
{
    switch (dt) {
    case FG_ONNX_DTYPE_FLOAT16: return (float)round_to(x, 10, -14, 65504.0);
    case FG_ONNX_DTYPE_BFLOAT16: return (float)round_to((double)(float)x, 7, -126, 3.3895313892515355e38);
    default: return (float)x;   /* float; double constants are held as fp32 */
    }
}

float fg_onnx_round_float(double x, int dt) { return round_float(x, dt); }

/* x wrapped to the integer type dt. */
static int64_t wrap_int(int64_t x, int dt)
{
    return dt == FG_ONNX_DTYPE_INT32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)x : dt == FG_ONNX_DTYPE_BOOL ? x != 0 : x;
}

/* The importer's form of v, in out (values handed over). */
static void val_to_const(val *v, fg_onnx_const *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = v->dtype;
    out->rank = v->rank;
    memcpy(out->shape, v->shape, sizeof out->shape);
    out->numel = v->n;
    out->weight = -1;
    if (v->i) {
        for (int64_t j = 0; j < v->n; j++)
            v->i[j] = wrap_int(v->i[j], v->dtype);
        out->i = v->i;
        v->i = NULL;
    } else {
        out->f = fg_xmalloc(sizeof(float) * (size_t)(v->n + 1));
        for (int64_t j = 0; j < v->n; j++)
            out->f[j] = round_float(v->d[j], v->dtype);
        val_free(v);
    }
}

/* ---- inputs and attributes ------------------------------------------------------- */

static int has_input(const fctx *c, int j) { return j < c->nins && (c->ins[j].k || c->ins[j].rank >= 0); }

/* Constant input j as a value (a copy); 0 with an error when absent or
 * computed. */
static int in_val(fctx *c, int j, val *v)
{
    memset(v, 0, sizeof *v);
    if (j >= c->nins || !c->ins[j].k)
        return ferr(c, "input %d is %s", j, has_input(c, j) ? "computed, not a constant" : "missing");
    const fg_onnx_const *k = c->ins[j].k;
    if (!dt_held(k->dtype))
        return ferr(c, "input %d has element type %s", j, fg_onnx_dtype_name(k->dtype));
    if (!val_make(c, v, k->dtype, k->rank, k->shape, 0))   /* a copy of an input: not a result */
        return 0;
    for (int64_t e = 0; e < v->n; e++) {
        if (v->i)
            v->i[e] = k->i[e];
        else
            v->d[e] = k->f[e];
    }
    return 1;
}

/* Integer constant input j (at most max values) into out; returns the
 * count, -1 on an error, -2 when absent. */
static int in_ints(fctx *c, int j, const char *what, int64_t *out, int max)
{
    if (!has_input(c, j))
        return -2;
    const fg_onnx_const *k = c->ins[j].k;
    if (!k)
        return ferr(c, "input '%s' is computed, not a constant", what), -1;
    if (!k->i)
        return ferr(c, "input '%s' has element type %s; int32 or int64 expected", what, fg_onnx_dtype_name(k->dtype)), -1;
    if (k->rank > 1)
        return ferr(c, "input '%s' must be a scalar or 1-D, got rank %d", what, k->rank), -1;
    if (k->numel > max)
        return ferr(c, "input '%s' has %lld values; at most %d are supported", what, (long long)k->numel, max), -1;
    memcpy(out, k->i, sizeof(int64_t) * (size_t)k->numel);
    return (int)k->numel;
}

static const Onnx__AttributeProto *attr(const fctx *c, const char *name)
{
    for (size_t j = 0; j < c->n->n_attribute; j++)
        if (c->n->attribute[j]->name && strcmp(c->n->attribute[j]->name, name) == 0)
            return c->n->attribute[j];
    return NULL;
}

/* An int attribute (def when absent); 0 with an error when of another type. */
static int attr_i(fctx *c, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = attr(c, name);
    *out = def;
    if (!a)
        return 1;
    if (!a->has_type || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return ferr(c, "attribute '%s' must be an int", name);
    *out = a->i;
    return 1;
}

/* An ints attribute into out (at most max); count, -2 absent, -1 error. */
static int attr_is(fctx *c, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a)
        return -2;
    if (!a->has_type || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return ferr(c, "attribute '%s' must be a list of ints", name), -1;
    if ((int)a->n_ints > max)
        return ferr(c, "attribute '%s' has %zu values; at most %d are supported", name, a->n_ints, max), -1;
    memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
    return (int)a->n_ints;
}

/* axis (may be negative) normalized into [0, rank); 0 with an error. */
static int norm_axis(fctx *c, int64_t axis, int rank, int64_t *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return ferr(c, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = a;
    return 1;
}

/* Row-major strides of a shape. */
static void strides_of(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d];
    }
}

/* Numpy broadcasting of shape b into (ra, a); 0 with an error. */
static int bcast(fctx *c, int *ra, int64_t *a, int rb, const int64_t *b)
{
    int r = *ra > rb ? *ra : rb;
    int64_t out[FG_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int64_t x = d - (r - *ra) >= 0 ? a[d - (r - *ra)] : 1, y = d - (r - rb) >= 0 ? b[d - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1)
            return ferr(c, "shapes do not broadcast (dimension %d: %lld and %lld)", d, (long long)x, (long long)y);
        out[d] = x == 1 ? y : x;
    }
    memcpy(a, out, sizeof(int64_t) * (size_t)r);
    *ra = r;
    return 1;
}

/* Offset in v of element o of the broadcast shape (rank r, strides ost). */
static int64_t bsrc(const val *v, int r, const int64_t *oshape, const int64_t *ost, int64_t o)
{
    int64_t st[FG_MAX_RANK], off = 0;
    strides_of(v->rank, v->shape, st);
    for (int d = 0; d < r; d++) {
        int64_t idx = (o / ost[d]) % oshape[d];
        int vd = d - (r - v->rank);
        if (vd >= 0 && v->shape[vd] != 1)
            off += idx * st[vd];
    }
    return off;
}

/* ---- element-wise arithmetic ---------------------------------------------------- */

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MIN, B_MAX } bop;

/* a op b in int64 (wrapping); 0 with an error on division by zero. */
static int int_op(fctx *c, bop op, int64_t a, int64_t b, int64_t *r)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case B_ADD: *r = (int64_t)(ua + ub); return 1;
    case B_SUB: *r = (int64_t)(ua - ub); return 1;
    case B_MUL: *r = (int64_t)(ua * ub); return 1;
    case B_DIV:
        if (b == 0)
            return ferr(c, "integer division by zero");
        *r = b == -1 ? (int64_t)(0 - ua) : a / b;   /* truncates toward zero, as onnxruntime */
        return 1;
    case B_POW: {
        double p = pow((double)a, (double)b);
        if (!(fabs(p) < 9.2e18))
            return ferr(c, "integer power %lld ** %lld is out of range", (long long)a, (long long)b);
        *r = (int64_t)p;
        return 1;
    }
    case B_MIN: *r = a < b ? a : b; return 1;
    case B_MAX: *r = a > b ? a : b; return 1;
    }
    return 0;
}

static double float_op(bop op, double a, double b)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case B_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    }
    return 0;
}

/* out = a op b with broadcasting; the type is a's (Pow's exponent may
 * differ). */
static int binop(fctx *c, bop op, const val *a, const val *b, val *out)
{
    if (a->dtype != b->dtype && op != B_POW)
        return ferr(c, "inputs have different element types (%s and %s)", fg_onnx_dtype_name(a->dtype), fg_onnx_dtype_name(b->dtype));
    int r = a->rank;
    int64_t shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    memcpy(shape, a->shape, sizeof shape);
    if (!bcast(c, &r, shape, b->rank, b->shape) || !val_alloc(c, out, a->dtype, r, shape))
        return 0;
    strides_of(r, shape, ost);
    for (int64_t o = 0; o < out->n; o++) {
        int64_t ia = bsrc(a, r, shape, ost, o), ib = bsrc(b, r, shape, ost, o);
        if (out->i) {
            int64_t bv = b->i ? b->i[ib] : (int64_t)b->d[ib];
            if (!int_op(c, op, a->i[ia], bv, &out->i[o])) {
                val_free(out);
                return 0;
            }
        } else {
            out->d[o] = float_op(op, a->d[ia], vget(b, ib));
        }
    }
    return 1;
}

static const struct {
    const char *name;
    bop op;
} binops[] = {{"Add", B_ADD}, {"Sub", B_SUB}, {"Mul", B_MUL}, {"Div", B_DIV}, {"Pow", B_POW},
              {"Min", B_MIN}, {"Max", B_MAX}, {"Sum", B_ADD}};

/* Add, Sub, Mul, Div, Pow; Min, Max and Sum over any number of inputs. */
static int f_binary(fctx *c, val *out)
{
    bop op = B_ADD;
    for (size_t j = 0; j < FG_COUNTOF(binops); j++)
        if (strcmp(binops[j].name, c->n->op_type) == 0)
            op = binops[j].op;
    if (!in_val(c, 0, out))
        return 0;
    for (int j = 1; j < c->nins; j++) {
        val b, r;
        if (!in_val(c, j, &b))
            return val_free(out), 0;
        int ok = binop(c, op, out, &b, &r);
        val_free(&b);
        val_free(out);
        if (!ok)
            return 0;
        *out = r;
    }
    return 1;
}

static double relu_d(double x) { return x > 0 ? x : isnan(x) ? x : 0; }
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static double neg_d(double x) { return -x; }
static double recip_d(double x) { return 1.0 / x; }
static double sign_d(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }

static const struct {
    const char *name;
    double (*fn)(double);
    int ints;   /* defined on integers (exactly, in int64) */
} unops[] = {
    {"Neg", neg_d, 1}, {"Abs", fabs, 1}, {"Relu", relu_d, 1}, {"Sign", sign_d, 1}, {"Sqrt", sqrt, 0},
    {"Exp", exp, 0}, {"Log", log, 0}, {"Reciprocal", recip_d, 0}, {"Floor", floor, 0}, {"Ceil", ceil, 0},
    {"Round", nearbyint, 0}, {"Sigmoid", sigmoid_d, 0}, {"Tanh", tanh, 0}, {"Erf", erf, 0}, {"Sin", sin, 0},
    {"Cos", cos, 0},
};

/* Element-wise functions of one input. */
static int f_unary(fctx *c, val *out)
{
    size_t u = 0;
    while (u < FG_COUNTOF(unops) && strcmp(unops[u].name, c->n->op_type) != 0)
        u++;
    if (u == FG_COUNTOF(unops) || !in_val(c, 0, out))
        return u == FG_COUNTOF(unops) ? ferr(c, "no evaluator") : 0;
    if (out->i && !unops[u].ints) {
        int dt = out->dtype;
        val_free(out);
        return ferr(c, "%s is not defined on %s", unops[u].name, fg_onnx_dtype_name(dt));
    }
    for (int64_t j = 0; j < out->n; j++) {
        if (out->i) {
            int64_t x = out->i[j];
            out->i[j] = u == 0 ? (int64_t)(0 - (uint64_t)x) : u == 1 ? (x < 0 ? (int64_t)(0 - (uint64_t)x) : x)
                        : u == 2 ? (x > 0 ? x : 0) : (x > 0) - (x < 0);
        } else {
            out->d[j] = unops[u].fn(out->d[j]);
        }
    }
    return 1;
}

/* ---- shapes ------------------------------------------------------------------------ */

/* Shape (start / end from opset 15) and Size, also of computed tensors. */
static int f_shape(fctx *c, val *out)
{
    if (!has_input(c, 0))
        return ferr(c, "input 0 is missing");
    const fg_onnx_fold_in *in = &c->ins[0];
    int rank = in->k ? in->k->rank : in->rank;
    const int64_t *shape = in->k ? in->k->shape : in->shape;
    if (strcmp(c->n->op_type, "Size") == 0) {
        if (!val_alloc(c, out, FG_ONNX_DTYPE_INT64, 0, NULL))
            return 0;
        out->i[0] = 1;
        for (int d = 0; d < rank; d++)
            out->i[0] *= shape[d];
        return 1;
    }
    int64_t start, end;
    if (!attr_i(c, "start", 0, &start) || !attr_i(c, "end", rank, &end))
        return 0;
    if (start < 0)
        start += rank;
    if (end < 0)
        end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    int64_t len = end > start ? end - start : 0;
    if (!val_alloc(c, out, FG_ONNX_DTYPE_INT64, 1, &len))
        return 0;
    for (int64_t d = 0; d < len; d++)
        out->i[d] = shape[start + d];
    return 1;
}

/* Decodes the one-value tensor t (ConstantOfShape's value) into out[0]. */
static int one_value(fctx *c, const Onnx__TensorProto *t, val *out)
{
    int dt = t->has_data_type ? t->data_type : 0;
    int64_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++)
        n *= t->dims[d];
    if (!dt_held(dt))
        return ferr(c, "value has element type %s; the folder holds float, float16, bfloat16, double, int32, "
                       "int64 and bool", fg_onnx_dtype_name(dt));
    if (n != 1)
        return ferr(c, "value must hold one element, it holds %lld", (long long)n);
    int64_t one = 1;
    if (!val_alloc(c, out, dt, 0, &one))
        return 0;
    if (t->has_raw_data) {
        const uint8_t *p = t->raw_data.data;
        size_t es = (size_t)fg_onnx_dtype_size(dt);
        if (t->raw_data.len != es)
            return val_free(out), ferr(c, "value's raw_data holds %zu bytes, %s needs %zu", t->raw_data.len,
                                       fg_onnx_dtype_name(dt), es);
        uint64_t u = fg_le_get(p, (int)es);
        switch (dt) {
        case FG_ONNX_DTYPE_FLOAT: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); out->d[0] = f; break; }
        case FG_ONNX_DTYPE_DOUBLE: { double x; memcpy(&x, &u, 8); out->d[0] = x; break; }
        case FG_ONNX_DTYPE_INT32: out->i[0] = (int32_t)(uint32_t)u; break;
        case FG_ONNX_DTYPE_INT64: out->i[0] = (int64_t)u; break;
        case FG_ONNX_DTYPE_BOOL: out->i[0] = u != 0; break;
        case FG_ONNX_DTYPE_BFLOAT16: out->d[0] = fg_bf16_to_f32((uint16_t)u); break;
        default: out->d[0] = fg_f16_to_f32((uint16_t)u); break;   /* FLOAT16 */
        }
        return 1;
    }
    size_t have = dt == FG_ONNX_DTYPE_FLOAT ? t->n_float_data : dt == FG_ONNX_DTYPE_DOUBLE ? t->n_double_data
                  : dt == FG_ONNX_DTYPE_INT64 ? t->n_int64_data : t->n_int32_data;
    if (have != 1)
        return val_free(out), ferr(c, "value holds %zu values, not one", have);
    switch (dt) {
    case FG_ONNX_DTYPE_FLOAT: out->d[0] = t->float_data[0]; break;
    case FG_ONNX_DTYPE_DOUBLE: out->d[0] = t->double_data[0]; break;
    case FG_ONNX_DTYPE_INT64: out->i[0] = t->int64_data[0]; break;
    case FG_ONNX_DTYPE_INT32: out->i[0] = t->int32_data[0]; break;
    case FG_ONNX_DTYPE_BOOL: out->i[0] = t->int32_data[0] != 0; break;
    case FG_ONNX_DTYPE_BFLOAT16: out->d[0] = fg_bf16_to_f32((uint16_t)t->int32_data[0]); break;
    default: out->d[0] = fg_f16_to_f32((uint16_t)t->int32_data[0]); break;   /* FLOAT16 */
    }
    return 1;
}

/* ConstantOfShape: a tensor of the given shape filled with value (float 0
 * by default). */
static int f_constant_of_shape(fctx *c, val *out)
{
    int64_t shape[FG_MAX_RANK + 1];
    int r = in_ints(c, 0, "input", shape, FG_MAX_RANK);
    if (r < 0)
        return r == -2 ? ferr(c, "input 0 is missing") : 0;
    val fill;
    const Onnx__AttributeProto *a = attr(c, "value");
    if (a) {
        if (!a->has_type || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR || !a->t)
            return ferr(c, "attribute 'value' must be a tensor");
        if (!one_value(c, a->t, &fill))
            return 0;
    } else {
        int64_t one = 1;
        if (!val_alloc(c, &fill, FG_ONNX_DTYPE_FLOAT, 0, &one))
            return 0;
    }
    for (int d = 0; d < r; d++)
        if (shape[d] < 0)
            return val_free(&fill), ferr(c, "shape[%d] = %lld is negative", d, (long long)shape[d]);
    int ok = val_alloc(c, out, fill.dtype, r, shape);
    for (int64_t j = 0; ok && j < out->n; j++) {
        if (out->i)
            out->i[j] = fill.i[0];
        else
            out->d[j] = fill.d[0];
    }
    val_free(&fill);
    return ok;
}

/* Copies v's values into a new value of the given shape (same count). */
static int reshaped(fctx *c, val *v, int rank, const int64_t *shape, val *out)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    if (n != v->n) {
        char b1[128];
        int at = 0;
        b1[0] = 0;
        for (int d = 0; d < rank && at < 100; d++)
            at += snprintf(b1 + at, sizeof b1 - (size_t)at, "%s%lld", d ? ", " : "", (long long)shape[d]);
        return ferr(c, "cannot reshape %lld elements to [%s]", (long long)v->n, b1);
    }
    *out = *v;
    out->rank = rank;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)rank);
    memset(v, 0, sizeof *v);
    return 1;
}

/* Reshape (0 copies a dimension unless allowzero, -1 is inferred). */
static int f_reshape(fctx *c, val *out)
{
    int64_t want[FG_MAX_RANK + 1], allowzero, known = 1;
    int n = in_ints(c, 1, "shape", want, FG_MAX_RANK);
    if (n == -2)
        return ferr(c, "input 'shape' is missing");
    if (n < 0 || !attr_i(c, "allowzero", 0, &allowzero))
        return 0;
    val v;
    if (!in_val(c, 0, &v))
        return 0;
    int infer = -1;
    for (int d = 0; d < n; d++) {
        if (want[d] == 0 && !allowzero) {
            if (d >= v.rank)
                return val_free(&v), ferr(c, "shape[%d] = 0 copies a dimension the input does not have", d);
            want[d] = v.shape[d];
        }
        if (want[d] == -1) {
            if (infer >= 0)
                return val_free(&v), ferr(c, "shape has more than one -1");
            infer = d;
        } else if (want[d] < 0) {
            return val_free(&v), ferr(c, "shape[%d] = %lld is negative", d, (long long)want[d]);
        } else if (known > 0 && want[d] > INT64_MAX / known) {   /* the product would overflow */
            return val_free(&v), ferr(c, "shape[%d] = %lld: the shape holds more elements than the input (%lld)", d,
                                      (long long)want[d], (long long)v.n);
        } else {
            known *= want[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || v.n % known)
            return val_free(&v), ferr(c, "cannot infer the -1 dimension (%lld elements, %lld in the others)",
                                      (long long)v.n, (long long)known);
        want[infer] = v.n / known;
    }
    int ok = reshaped(c, &v, n, want, out);
    val_free(&v);
    return ok;
}

static int f_flatten(fctx *c, val *out)
{
    val v;
    int64_t axis;
    if (!attr_i(c, "axis", 1, &axis) || !in_val(c, 0, &v))
        return 0;
    int64_t a = axis < 0 ? axis + v.rank : axis, shape[2] = {1, 1};
    if (a < 0 || a > v.rank)
        return val_free(&v), ferr(c, "axis %lld is out of range for rank %d", (long long)axis, v.rank);
    for (int d = 0; d < v.rank; d++)
        shape[d < a ? 0 : 1] *= v.shape[d];
    int ok = reshaped(c, &v, 2, shape, out);
    val_free(&v);
    return ok;
}

/* Squeeze and Unsqueeze (axes an attribute before opset 13, an input
 * from 13). */
static int f_squeeze(fctx *c, val *out)
{
    int un = strcmp(c->n->op_type, "Unsqueeze") == 0;
    int64_t axes[FG_MAX_RANK * 2 + 1], shape[FG_MAX_RANK * 2 + 1];
    int n = c->opset < 13 ? attr_is(c, "axes", axes, FG_MAX_RANK * 2) : in_ints(c, 1, "axes", axes, FG_MAX_RANK * 2);
    if (n == -1)
        return 0;
    if (n == -2 && un)
        return ferr(c, "needs 'axes'");
    val v;
    if (!in_val(c, 0, &v))
        return 0;
    int orank = un ? v.rank + n : v.rank, mark[FG_MAX_RANK * 3] = {0}, no = 0;
    if (orank > FG_MAX_RANK)
        return val_free(&v), ferr(c, "the result would have rank %d; at most %d is supported", orank, FG_MAX_RANK);
    for (int j = 0; j < n; j++) {
        int64_t a = 0;
        if (!norm_axis(c, axes[j], orank, &a))
            return val_free(&v), 0;
        if (mark[a])
            return val_free(&v), ferr(c, "axis %lld is repeated", (long long)axes[j]);
        if (!un && v.shape[a] != 1)
            return val_free(&v), ferr(c, "axis %lld has size %lld, not 1", (long long)axes[j], (long long)v.shape[a]);
        mark[a] = 1;
    }
    if (un)
        for (int d = 0, src = 0; d < orank; d++)
            shape[no++] = mark[d] ? 1 : v.shape[src++];
    else
        for (int d = 0; d < v.rank; d++)
            if (!(n < 0 ? v.shape[d] == 1 : mark[d]))
                shape[no++] = v.shape[d];
    int ok = reshaped(c, &v, no, shape, out);
    val_free(&v);
    return ok;
}

static int f_identity(fctx *c, val *out) { return in_val(c, 0, out); }

/* Dropout at inference: the data (training_mode, opset 12 on, must be
 * false; the mask output must be unused, which the importer checks). */
static int f_dropout(fctx *c, val *out)
{
    if (has_input(c, 2)) {
        val tm;
        if (!in_val(c, 2, &tm))
            return 0;
        int on = tm.n > 0 && vget(&tm, 0) != 0;
        val_free(&tm);
        if (on)
            return ferr(c, "training_mode=true is not supported (inference only)");
    }
    return in_val(c, 0, out);
}

/* Gather along axis: out.shape = data.shape[:axis] + indices.shape +
 * data.shape[axis+1:]; negative indices count from the end. */
static int f_gather(fctx *c, val *out)
{
    val data, idx;
    int64_t axis;
    if (!attr_i(c, "axis", 0, &axis) || !in_val(c, 0, &data))
        return 0;
    if (!in_val(c, 1, &idx))
        return val_free(&data), 0;
    int ok = 0;
    int64_t a = 0, shape[FG_MAX_RANK * 2];
    if (!idx.i) {
        ferr(c, "indices have element type %s; int32 or int64 expected", fg_onnx_dtype_name(idx.dtype));
    } else if (data.rank == 0) {
        ferr(c, "data must have rank 1 or more");
    } else if (norm_axis(c, axis, data.rank, &a)) {
        int r = 0;
        for (int d = 0; d < a; d++)
            shape[r++] = data.shape[d];
        for (int d = 0; d < idx.rank; d++)
            shape[r++] = idx.shape[d];
        for (int d = (int)a + 1; d < data.rank; d++)
            shape[r++] = data.shape[d];
        int64_t outer = 1, inner = 1, dim = data.shape[a];
        for (int d = 0; d < a; d++)
            outer *= data.shape[d];
        for (int d = (int)a + 1; d < data.rank; d++)
            inner *= data.shape[d];
        ok = val_alloc(c, out, data.dtype, r, shape);
        for (int64_t j = 0; ok && j < idx.n; j++) {
            int64_t k = idx.i[j] < 0 ? idx.i[j] + dim : idx.i[j];
            if (k < 0 || k >= dim) {
                ok = ferr(c, "index %lld is out of range for axis %lld of size %lld", (long long)idx.i[j],
                          (long long)a, (long long)dim);
                val_free(out);
                break;
            }
            for (int64_t o = 0; o < outer; o++)
                for (int64_t e = 0; e < inner; e++) {
                    int64_t src = (o * dim + k) * inner + e, dst = (o * idx.n + j) * inner + e;
                    if (out->i)
                        out->i[dst] = data.i[src];
                    else
                        out->d[dst] = data.d[src];
                }
        }
    }
    val_free(&data);
    val_free(&idx);
    return ok;
}

/* Concat along axis; every input constant, same type and rank.  The
 * result's shape (and so its size against the limits) is known from the
 * inputs' shapes before a value is copied. */
static int f_concat(fctx *c, val *out)
{
    int64_t axis, a;
    if (!attr_i(c, "axis", 0, &axis))
        return 0;
    if (!attr(c, "axis"))
        return ferr(c, "needs attribute 'axis'");
    for (int j = 0; j < c->nins; j++) {
        if (!c->ins[j].k)
            return ferr(c, "input %d is %s", j, has_input(c, j) ? "computed, not a constant" : "missing");
        if (!dt_held(c->ins[j].k->dtype))
            return ferr(c, "input %d has element type %s", j, fg_onnx_dtype_name(c->ins[j].k->dtype));
    }
    const fg_onnx_const *k0 = c->ins[0].k;
    if (!norm_axis(c, axis, k0->rank, &a))
        return 0;
    int64_t shape[FG_MAX_RANK];
    memcpy(shape, k0->shape, sizeof shape);
    shape[a] = 0;
    for (int j = 0; j < c->nins; j++) {
        const fg_onnx_const *k = c->ins[j].k;
        if (k->dtype != k0->dtype || k->rank != k0->rank)
            return ferr(c, "input %d has type %s and rank %d; input 0 has %s and %d", j, fg_onnx_dtype_name(k->dtype),
                        k->rank, fg_onnx_dtype_name(k0->dtype), k0->rank);
        for (int d = 0; d < k0->rank; d++)
            if (d != a && k->shape[d] != k0->shape[d])
                return ferr(c, "input %d has size %lld in dimension %d; input 0 has %lld", j, (long long)k->shape[d], d,
                            (long long)k0->shape[d]);
        if (__builtin_add_overflow(shape[a], k->shape[a], &shape[a]) || shape[a] > FG_ONNX_MAX_WEIGHT_NUMEL)
            return ferr(c, "the result would have more than %lld elements", (long long)FG_ONNX_MAX_WEIGHT_NUMEL);
    }
    if (!val_alloc(c, out, k0->dtype, k0->rank, shape))
        return 0;
    int64_t outer = 1, inner = 1, at = 0;
    for (int d = 0; d < a; d++)
        outer *= shape[d];
    for (int d = (int)a + 1; d < k0->rank; d++)
        inner *= shape[d];
    for (int j = 0; j < c->nins; j++) {
        const fg_onnx_const *k = c->ins[j].k;
        int64_t len = k->shape[a] * inner;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t e = 0; e < len; e++) {
                int64_t dst = o * shape[a] * inner + at + e, src = o * len + e;
                if (out->i)
                    out->i[dst] = k->i[src];
                else
                    out->d[dst] = k->f[src];
            }
        at += len;
    }
    return 1;
}

/* *out = the view of *v (freed) of the given shape whose element at index
 * (i_0, ...) is v's at index beg[d] + i_d * step[d] along v's axis axis[d]
 * (beg NULL: 0, step NULL: 1, axis NULL: axis d).  Returns 0 when out
 * cannot be made (reported). */
static int take_view(fctx *c, val *v, val *out, const int64_t *shape, const int64_t *beg, const int64_t *step,
                     const int64_t *axis)
{
    int ok = val_alloc(c, out, v->dtype, v->rank, shape);
    int64_t ist[FG_MAX_RANK], ost[FG_MAX_RANK];
    strides_of(v->rank, v->shape, ist);
    strides_of(v->rank, shape, ost);
    for (int64_t o = 0; ok && o < out->n; o++) {
        int64_t src = 0;
        for (int d = 0; d < v->rank; d++)
            src += ((beg ? beg[d] : 0) + ((o / ost[d]) % shape[d]) * (step ? step[d] : 1)) * ist[axis ? axis[d] : d];
        if (out->i)
            out->i[o] = v->i[src];
        else
            out->d[o] = v->d[src];
    }
    val_free(v);
    return ok;
}

/* Slice: starts, ends, axes, steps as inputs (opset 10 on) or attributes
 * (before; no steps), clamped as ONNX specifies. */
static int f_slice(fctx *c, val *out)
{
    int64_t st[FG_MAX_RANK], en[FG_MAX_RANK], ax[FG_MAX_RANK], sp[FG_MAX_RANK];
    int ns, ne, na, nsp;
    if (c->opset < 10) {
        ns = attr_is(c, "starts", st, FG_MAX_RANK);
        ne = attr_is(c, "ends", en, FG_MAX_RANK);
        na = attr_is(c, "axes", ax, FG_MAX_RANK);
        nsp = -2;
    } else {
        ns = in_ints(c, 1, "starts", st, FG_MAX_RANK);
        ne = in_ints(c, 2, "ends", en, FG_MAX_RANK);
        na = in_ints(c, 3, "axes", ax, FG_MAX_RANK);
        nsp = in_ints(c, 4, "steps", sp, FG_MAX_RANK);
    }
    if (ns == -1 || ne == -1 || na == -1 || nsp == -1)
        return 0;
    if (ns < 0 || ne < 0)
        return ferr(c, "needs starts and ends");
    if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return ferr(c, "starts, ends, axes and steps must have the same length");
    val v;
    if (!in_val(c, 0, &v))
        return 0;
    int64_t beg[FG_MAX_RANK], step[FG_MAX_RANK], shape[FG_MAX_RANK];
    int seen[FG_MAX_RANK] = {0};
    for (int d = 0; d < v.rank; d++) {
        beg[d] = 0;
        step[d] = 1;
        shape[d] = v.shape[d];
    }
    for (int j = 0; j < ns; j++) {
        int64_t a = 0, s = nsp >= 0 ? sp[j] : 1;
        if (!norm_axis(c, na >= 0 ? ax[j] : j, v.rank, &a))
            return val_free(&v), 0;
        if (seen[a]++)
            return val_free(&v), ferr(c, "axis %lld is repeated", (long long)a);
        if (s == 0)
            return val_free(&v), ferr(c, "steps must not be 0");
        int64_t dim = v.shape[a], b = st[j], e = en[j];
        if (b < 0)
            b += dim;
        if (e < 0)
            e += dim;
        if (s > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
            shape[a] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            shape[a] = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        beg[a] = b;
        step[a] = s;
    }
    return take_view(c, &v, out, shape, beg, step, NULL);
}

/* Transpose by perm (default: reversed axes). */
static int f_transpose(fctx *c, val *out)
{
    val v;
    int64_t perm[FG_MAX_RANK + 1], shape[FG_MAX_RANK] = {0};
    if (!in_val(c, 0, &v))
        return 0;
    int np = attr_is(c, "perm", perm, FG_MAX_RANK);
    if (np == -1)
        return val_free(&v), 0;
    if (np == -2)
        for (np = 0; np < v.rank; np++)
            perm[np] = v.rank - 1 - np;
    int seen[FG_MAX_RANK] = {0};
    if (np != v.rank)
        return val_free(&v), ferr(c, "perm has %d values for rank %d", np, v.rank);
    for (int d = 0; d < np; d++) {
        if (perm[d] < 0 || perm[d] >= v.rank || seen[perm[d]]++)
            return val_free(&v), ferr(c, "perm is not a permutation of 0 .. %d", v.rank - 1);
        shape[d] = v.shape[perm[d]];
    }
    return take_view(c, &v, out, shape, NULL, NULL, perm);
}

/* Expand: data broadcast with shape (numpy rules, both ways). */
static int f_expand(fctx *c, val *out)
{
    int64_t want[FG_MAX_RANK + 1], shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    int n = in_ints(c, 1, "shape", want, FG_MAX_RANK);
    if (n < 0)
        return n == -2 ? ferr(c, "input 'shape' is missing") : 0;
    val v;
    if (!in_val(c, 0, &v))
        return 0;
    int r = v.rank;
    memcpy(shape, v.shape, sizeof shape);
    int ok = bcast(c, &r, shape, n, want) && val_alloc(c, out, v.dtype, r, shape);
    strides_of(r, shape, ost);
    for (int64_t o = 0; ok && o < out->n; o++) {
        int64_t s = bsrc(&v, r, shape, ost, o);
        if (out->i)
            out->i[o] = v.i[s];
        else
            out->d[o] = v.d[s];
    }
    val_free(&v);
    return ok;
}

/* Range(start, limit, delta): max(ceil((limit - start) / delta), 0) values. */
static int f_range(fctx *c, val *out)
{
    val s[3];
    int ok = 1, k = 0;
    for (; ok && k < 3; k++)
        ok = in_val(c, k, &s[k]);
    if (!ok)
        k--;
    for (int j = 0; ok && j < 3; j++)
        if (s[j].n != 1 || s[j].dtype != s[0].dtype)
            ok = ferr(c, "start, limit and delta must be scalars of one type");
    if (ok) {
        double st = vget(&s[0], 0), lim = vget(&s[1], 0), dl = vget(&s[2], 0);
        if (dl == 0 || isnan(dl)) {
            ok = ferr(c, "delta must not be 0");
        } else {
            double cnt = ceil((lim - st) / dl);
            int64_t n = cnt > 0 ? (cnt > (double)FG_ONNX_MAX_WEIGHT_NUMEL ? FG_ONNX_MAX_WEIGHT_NUMEL + 1 : (int64_t)cnt) : 0;
            ok = val_alloc(c, out, s[0].dtype, 1, &n);
            for (int64_t j = 0; ok && j < n; j++) {
                if (out->i)
                    out->i[j] = s[0].i[0] + j * s[2].i[0];
                else
                    out->d[j] = st + (double)j * dl;
            }
        }
    }
    for (int j = 0; j < k; j++)
        val_free(&s[j]);
    return ok;
}

/* Cast to a type the importer holds (saturate only concerns float8). */
static int cast_to(fctx *c, int64_t to, val *out);

static int f_cast(fctx *c, val *out)
{
    int64_t to;
    if (!attr_i(c, "to", 0, &to))
        return 0;
    if (!attr(c, "to"))
        return ferr(c, "needs attribute 'to'");
    return cast_to(c, to, out);
}

/* CastLike(input, target_type): Cast to the element type of input 1, which
 * may be computed (only its type is read). */
static int f_castlike(fctx *c, val *out)
{
    if (!has_input(c, 1))
        return ferr(c, "input 1 (target_type) is missing");
    int to = c->ins[1].k ? c->ins[1].k->dtype : c->ins[1].dtype;
    return cast_to(c, to ? to : FG_ONNX_DTYPE_FLOAT, out);
}

/* Input 0 cast to ONNX type to. */
static int cast_to(fctx *c, int64_t to, val *out)
{
    if (!dt_held((int)to))
        return ferr(c, "cast to %s: the folder holds float, float16, bfloat16, double, int32, int64 and bool",
                    fg_onnx_dtype_name((int)to));
    val v;
    if (!in_val(c, 0, &v))
        return 0;
    int ok = val_alloc(c, out, (int)to, v.rank, v.shape);
    for (int64_t j = 0; ok && j < v.n; j++) {
        if (out->d) {
            out->d[j] = vget(&v, j);
        } else if (to == FG_ONNX_DTYPE_BOOL) {
            out->i[j] = vget(&v, j) != 0;
        } else if (v.i) {
            out->i[j] = v.i[j];
        } else if (to == FG_ONNX_DTYPE_BOOL) {
            out->i[j] = v.d[j] != 0;   /* NaN too, as onnxruntime */
        } else {
            /* toward zero, as onnxruntime; out of range (undefined in ONNX)
             * saturates and NaN is 0, as the kernels' stores */
            double x = trunc(v.d[j]), hi = to == FG_ONNX_DTYPE_INT32 ? 2147483647.0 : 9223372036854775807.0;
            out->i[j] = x != x ? 0 : x <= -hi - 1 ? (int64_t)(-hi - 1) : x >= hi ? (to == FG_ONNX_DTYPE_INT32 ? INT32_MAX : INT64_MAX)
                                                                      : (int64_t)x;
        }
    }
    val_free(&v);
    return ok;
}

/* ---- comparisons, logic, Where, Mod, ScatterND ------------------------------------ */

/* The broadcast shape of inputs vs[0..n) into (*r, shape) and their
 * strides ost; 0 with an error. */
static int bcast_all(fctx *c, const val *vs, int n, int *r, int64_t *shape, int64_t *ost)
{
    *r = vs[0].rank;
    memcpy(shape, vs[0].shape, sizeof(int64_t) * FG_MAX_RANK);
    for (int j = 1; j < n; j++)
        if (!bcast(c, r, shape, vs[j].rank, vs[j].shape))
            return 0;
    strides_of(*r, shape, ost);
    return 1;
}

static const char *const cmp_names[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual: a BOOL result with
 * broadcasting (NaN compares false, as in IEEE arithmetic). */
static int f_compare(fctx *c, val *out)
{
    int op = 0;
    while (op < (int)FG_COUNTOF(cmp_names) && strcmp(cmp_names[op], c->n->op_type) != 0)
        op++;
    val v[2];
    if (!in_val(c, 0, &v[0]))
        return 0;
    if (!in_val(c, 1, &v[1]))
        return val_free(&v[0]), 0;
    int r, ok = 1;
    int64_t shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    if (v[0].dtype != v[1].dtype)
        ok = ferr(c, "inputs have different element types (%s and %s)", fg_onnx_dtype_name(v[0].dtype),
                  fg_onnx_dtype_name(v[1].dtype));
    ok = ok && bcast_all(c, v, 2, &r, shape, ost) && val_alloc(c, out, FG_ONNX_DTYPE_BOOL, r, shape);
    for (int64_t o = 0; ok && o < out->n; o++) {
        int64_t ia = bsrc(&v[0], r, shape, ost, o), ib = bsrc(&v[1], r, shape, ost, o);
        int lt, eq;
        if (v[0].i) {
            lt = v[0].i[ia] < v[1].i[ib];
            eq = v[0].i[ia] == v[1].i[ib];
        } else {
            lt = v[0].d[ia] < v[1].d[ib];
            eq = v[0].d[ia] == v[1].d[ib];
        }
        int gt = !lt && !eq && !(v[0].d && (isnan(v[0].d[ia]) || isnan(v[1].d[ib])));
        out->i[o] = op == 0 ? eq : op == 1 ? lt : op == 2 ? gt : op == 3 ? lt || eq : gt || eq;
    }
    val_free(&v[0]);
    val_free(&v[1]);
    return ok;
}

/* Not of a BOOL constant; And, Or, Xor of two, broadcast. */
static int f_logic(fctx *c, val *out)
{
    const char *t = c->n->op_type;
    int un = strcmp(t, "Not") == 0, nv = un ? 1 : 2;
    val v[2];
    for (int j = 0; j < nv; j++)
        if (!in_val(c, j, &v[j]))
            return j ? (val_free(&v[0]), 0) : 0;
    int r, ok = 1;
    int64_t shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    for (int j = 0; j < nv && ok; j++)
        if (v[j].dtype != FG_ONNX_DTYPE_BOOL)
            ok = ferr(c, "input %d has element type %s; %s takes bool", j, fg_onnx_dtype_name(v[j].dtype), t);
    ok = ok && bcast_all(c, v, nv, &r, shape, ost) && val_alloc(c, out, FG_ONNX_DTYPE_BOOL, r, shape);
    for (int64_t o = 0; ok && o < out->n; o++) {
        int64_t a = v[0].i[bsrc(&v[0], r, shape, ost, o)] != 0;
        int64_t b = un ? 0 : v[1].i[bsrc(&v[1], r, shape, ost, o)] != 0;
        out->i[o] = un ? !a : t[0] == 'A' ? a && b : t[0] == 'O' ? a || b : a != b;
    }
    for (int j = 0; j < nv; j++)
        val_free(&v[j]);
    return ok;
}

/* Where(condition, X, Y): X where the condition holds, else Y; the three
 * broadcast; X and Y of one type. */
static int f_where(fctx *c, val *out)
{
    val v[3];
    for (int j = 0; j < 3; j++)
        if (!in_val(c, j, &v[j])) {
            while (j-- > 0)
                val_free(&v[j]);
            return 0;
        }
    int r, ok = 1;
    int64_t shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    if (v[0].dtype != FG_ONNX_DTYPE_BOOL)
        ok = ferr(c, "the condition has element type %s, not bool", fg_onnx_dtype_name(v[0].dtype));
    else if (v[1].dtype != v[2].dtype)
        ok = ferr(c, "X and Y have different element types (%s and %s)", fg_onnx_dtype_name(v[1].dtype),
                  fg_onnx_dtype_name(v[2].dtype));
    ok = ok && bcast_all(c, v, 3, &r, shape, ost) && val_alloc(c, out, v[1].dtype, r, shape);
    for (int64_t o = 0; ok && o < out->n; o++) {
        const val *s = v[0].i[bsrc(&v[0], r, shape, ost, o)] ? &v[1] : &v[2];
        int64_t k = bsrc(s, r, shape, ost, o);
        if (out->i)
            out->i[o] = s->i[k];
        else
            out->d[o] = s->d[k];
    }
    for (int j = 0; j < 3; j++)
        val_free(&v[j]);
    return ok;
}

/* Mod(A, B): fmod = 0 takes the divisor's sign (integers: Python's %),
 * fmod = 1 the dividend's (C's fmod); broadcasting; a zero integer divisor
 * is an error. */
static int f_mod(fctx *c, val *out)
{
    int64_t fm;
    if (!attr_i(c, "fmod", 0, &fm))
        return 0;
    val v[2];
    if (!in_val(c, 0, &v[0]))
        return 0;
    if (!in_val(c, 1, &v[1]))
        return val_free(&v[0]), 0;
    int r, ok = 1;
    int64_t shape[FG_MAX_RANK], ost[FG_MAX_RANK];
    if (v[0].dtype != v[1].dtype)
        ok = ferr(c, "inputs have different element types (%s and %s)", fg_onnx_dtype_name(v[0].dtype),
                  fg_onnx_dtype_name(v[1].dtype));
    ok = ok && bcast_all(c, v, 2, &r, shape, ost) && val_alloc(c, out, v[0].dtype, r, shape);
    for (int64_t o = 0; ok && o < out->n; o++) {
        int64_t ia = bsrc(&v[0], r, shape, ost, o), ib = bsrc(&v[1], r, shape, ost, o);
        if (out->i) {
            int64_t a = v[0].i[ia], b = v[1].i[ib];
            if (b == 0) {
                ok = ferr(c, "integer modulo by zero");
                break;
            }
            int64_t m = b == -1 ? 0 : a % b;
            if (!fm && m != 0 && ((m < 0) != (b < 0)))
                m += b;
            out->i[o] = m;
        } else {
            double a = v[0].d[ia], b = v[1].d[ib], m = fmod(a, b);
            if (!fm && m != 0 && ((m < 0) != (b < 0)))
                m += b;
            out->d[o] = m;
        }
    }
    if (!ok)
        val_free(out);
    val_free(&v[0]);
    val_free(&v[1]);
    return ok;
}

/* ScatterND(data, indices, updates): a copy of data with the slices that
 * indices [..., k] name replaced by (reduction none) or combined with (add,
 * mul, max, min) the updates, in order; negative indices count from the
 * end. */
static int f_scatter_nd(fctx *c, val *out)
{
    char red[16] = "none";
    const Onnx__AttributeProto *ra = attr(c, "reduction");
    if (ra) {
        if (!ra->has_type || ra->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
            return ferr(c, "attribute 'reduction' must be a string");
        size_t n = ra->s.len < sizeof red - 1 ? ra->s.len : sizeof red - 1;
        if (n)   /* a string attribute without its value has no data (NULL) */
            memcpy(red, ra->s.data, n);
        red[n] = 0;
    }
    int rop = strcmp(red, "none") == 0 ? 0 : strcmp(red, "add") == 0 ? 1 : strcmp(red, "mul") == 0 ? 2
              : strcmp(red, "max") == 0 ? 3 : strcmp(red, "min") == 0 ? 4 : -1;
    if (rop < 0)
        return ferr(c, "reduction '%s' is not none, add, mul, max or min", red);
    val idx, upd;
    if (!in_val(c, 0, out))
        return 0;
    if (!in_val(c, 1, &idx))
        return val_free(out), 0;
    if (!in_val(c, 2, &upd))
        return val_free(out), val_free(&idx), 0;
    int ok = 1;
    int q = idx.rank;
    int64_t k = q ? idx.shape[q - 1] : 0;
    if (!idx.i || idx.dtype == FG_ONNX_DTYPE_BOOL)
        ok = ferr(c, "indices must be int64");
    else if (q < 1 || k < 1 || k > out->rank)
        ok = ferr(c, "indices' last dimension %lld must be 1 to the data's rank %d", (long long)k, out->rank);
    else if (upd.dtype != out->dtype || upd.rank != q - 1 + out->rank - (int)k)
        ok = ferr(c, "updates must have the data's type and rank %d", q - 1 + out->rank - (int)k);
    for (int d = 0; ok && d < upd.rank; d++)
        if (upd.shape[d] != (d < q - 1 ? idx.shape[d] : out->shape[k + d - (q - 1)]))
            ok = ferr(c, "updates' dimension %d is %lld, indices and data need %lld", d, (long long)upd.shape[d],
                      (long long)(d < q - 1 ? idx.shape[d] : out->shape[k + d - (q - 1)]));
    int64_t st[FG_MAX_RANK], slice = 1, nidx = 1;
    strides_of(out->rank, out->shape, st);
    for (int d = (int)k; ok && d < out->rank; d++)
        slice *= out->shape[d];
    for (int d = 0; ok && d < q - 1; d++)
        nidx *= idx.shape[d];
    for (int64_t j = 0; ok && j < nidx; j++) {
        int64_t off = 0;
        for (int64_t a = 0; a < k && ok; a++) {
            int64_t x = idx.i[j * k + a], dim = out->shape[a];
            if (x < 0)
                x += dim;
            if (x < 0 || x >= dim)
                ok = ferr(c, "index %lld is out of range for dimension %lld of size %lld",
                          (long long)idx.i[j * k + a], (long long)a, (long long)dim);
            off += x * st[a];
        }
        for (int64_t e = 0; ok && e < slice; e++) {
            double u = vget(&upd, j * slice + e), o = vget(out, off + e);
            double rv = rop == 0 ? u : rop == 1 ? o + u : rop == 2 ? o * u : rop == 3 ? (o > u ? o : u)
                        : (o < u ? o : u);
            if (out->i)
                out->i[off + e] = rop == 0 ? upd.i[j * slice + e] : rop == 1 ? out->i[off + e] + upd.i[j * slice + e]
                                  : (int64_t)rv;
            else
                out->d[off + e] = rv;
        }
    }
    val_free(&idx);
    val_free(&upd);
    if (!ok)
        val_free(out);
    return ok;
}

/* ---- IsNaN, IsInf, Trilu, GatherElements ------------------------------------------ */

/* IsNaN, IsInf (detect_negative, detect_positive): bool results. */
static int f_predicate(fctx *c, val *out)
{
    val x;
    int64_t neg = 1, pos = 1;
    if (!attr_i(c, "detect_negative", 1, &neg) || !attr_i(c, "detect_positive", 1, &pos) || !in_val(c, 0, &x))
        return 0;
    int ok = 0;
    if (x.i)
        ferr(c, "input of type %s", fg_onnx_dtype_name(x.dtype));
    else if (val_alloc(c, out, FG_ONNX_DTYPE_BOOL, x.rank, x.shape)) {
        for (int64_t j = 0; j < x.n; j++)
            out->i[j] = strcmp(c->n->op_type, "IsNaN") == 0 ? isnan(x.d[j]) != 0
                                                            : isinf(x.d[j]) && (x.d[j] > 0 ? pos : neg);
        ok = 1;
    }
    val_free(&x);
    return ok;
}

/* Trilu(input, k?): the lower (upper = 0) or upper triangle of the last
 * two axes from diagonal k, the rest zero. */
static int f_trilu(fctx *c, val *out)
{
    int64_t upper = 1, k = 0, n = 0;
    if (!attr_i(c, "upper", 1, &upper))
        return 0;
    if (has_input(c, 1) && (n = in_ints(c, 1, "k", &k, 1)) < 0)
        return 0;
    if (!in_val(c, 0, out))
        return 0;
    if (out->rank < 2)
        return val_free(out), ferr(c, "input must have rank 2 or more");
    int64_t R = out->shape[out->rank - 2], C = out->shape[out->rank - 1];
    for (int64_t j = 0; j < out->n; j++) {
        int64_t col = j % C, row = (j / C) % R;
        if (upper ? col - row < k : col - row > k) {
            if (out->i)
                out->i[j] = 0;
            else
                out->d[j] = 0;
        }
    }
    return 1;
}

/* GatherElements(data, indices, axis): out[.., i, ..] = data[.., indices[.., i, ..], ..]. */
static int f_gather_elements(fctx *c, val *out)
{
    val data, idx;
    int64_t axis, a = 0;
    if (!attr_i(c, "axis", 0, &axis) || !in_val(c, 0, &data))
        return 0;
    if (!in_val(c, 1, &idx))
        return val_free(&data), 0;
    int ok = 0;
    if (!idx.i || idx.dtype == FG_ONNX_DTYPE_BOOL)
        ferr(c, "indices have element type %s; int32 or int64 expected", fg_onnx_dtype_name(idx.dtype));
    else if (idx.rank != data.rank)
        ferr(c, "indices have rank %d, data rank %d", idx.rank, data.rank);
    else if (norm_axis(c, axis, data.rank, &a) && val_alloc(c, out, data.dtype, idx.rank, idx.shape)) {
        int64_t ist[FG_MAX_RANK], dst[FG_MAX_RANK];
        strides_of(idx.rank, idx.shape, ist);
        strides_of(data.rank, data.shape, dst);
        ok = 1;
        for (int64_t o = 0; ok && o < idx.n; o++) {
            int64_t src = 0;
            for (int d = 0; d < idx.rank; d++) {
                int64_t cd = (o / ist[d]) % idx.shape[d];
                if (d == a) {
                    cd = idx.i[o] < 0 ? idx.i[o] + data.shape[d] : idx.i[o];
                    if (cd < 0 || cd >= data.shape[d])
                        ok = ferr(c, "index %lld is out of range for axis %lld of size %lld", (long long)idx.i[o],
                                  (long long)a, (long long)data.shape[d]);
                } else if (cd >= data.shape[d]) {
                    ok = ferr(c, "indices have extent %lld on axis %d, data %lld", (long long)idx.shape[d], d,
                              (long long)data.shape[d]);
                }
                src += cd * dst[d];
            }
            if (ok && out->i)
                out->i[o] = data.i[src];
            else if (ok)
                out->d[o] = data.d[src];
        }
        if (!ok)
            val_free(out);
    }
    val_free(&data);
    val_free(&idx);
    return ok;
}

/* ---- the table ------------------------------------------------------------------ */

typedef struct fold_op {
    const char *type;
    int (*fn)(fctx *c, val *out);
    const char *attrs;   /* attributes understood, space separated */
    int min_in, max_in;  /* max_in -1: any number */
} fold_op;

static const fold_op fold_ops[] = {
    {"Abs", f_unary, "", 1, 1},
    {"Add", f_binary, "", 2, 2},
    {"Cast", f_cast, "to saturate", 1, 1},
    {"CastLike", f_castlike, "saturate", 2, 2},
    {"Ceil", f_unary, "", 1, 1},
    {"Concat", f_concat, "axis", 1, -1},
    {"ConstantOfShape", f_constant_of_shape, "value", 1, 1},
    {"Cos", f_unary, "", 1, 1},
    {"Div", f_binary, "", 2, 2},
    {"Dropout", f_dropout, "seed ratio", 1, 3},
    {"Erf", f_unary, "", 1, 1},
    {"Exp", f_unary, "", 1, 1},
    {"Expand", f_expand, "", 2, 2},
    {"Flatten", f_flatten, "axis", 1, 1},
    {"Floor", f_unary, "", 1, 1},
    {"Gather", f_gather, "axis", 2, 2},
    {"GatherElements", f_gather_elements, "axis", 2, 2},
    {"Identity", f_identity, "", 1, 1},
    {"IsInf", f_predicate, "detect_negative detect_positive", 1, 1},
    {"IsNaN", f_predicate, "", 1, 1},
    {"Log", f_unary, "", 1, 1},
    {"Max", f_binary, "", 1, -1},
    {"Min", f_binary, "", 1, -1},
    {"Mul", f_binary, "", 2, 2},
    {"Neg", f_unary, "", 1, 1},
    {"Pow", f_binary, "", 2, 2},
    {"Range", f_range, "", 3, 3},
    {"Reciprocal", f_unary, "", 1, 1},
    {"Relu", f_unary, "", 1, 1},
    {"Reshape", f_reshape, "allowzero", 2, 2},
    {"Round", f_unary, "", 1, 1},
    {"Shape", f_shape, "start end", 1, 1},
    {"Sigmoid", f_unary, "", 1, 1},
    {"Sign", f_unary, "", 1, 1},
    {"Sin", f_unary, "", 1, 1},
    {"Size", f_shape, "", 1, 1},
    {"Slice", f_slice, "starts ends axes", 1, 5},
    {"Sqrt", f_unary, "", 1, 1},
    {"Squeeze", f_squeeze, "axes", 1, 2},
    {"Sub", f_binary, "", 2, 2},
    {"Sum", f_binary, "", 1, -1},
    {"Tanh", f_unary, "", 1, 1},
    {"Transpose", f_transpose, "perm", 1, 1},
    {"Trilu", f_trilu, "upper", 1, 2},
    {"Unsqueeze", f_squeeze, "axes", 1, 2},
    {"Equal", f_compare, "", 2, 2},
    {"Less", f_compare, "", 2, 2},
    {"Greater", f_compare, "", 2, 2},
    {"LessOrEqual", f_compare, "", 2, 2},
    {"GreaterOrEqual", f_compare, "", 2, 2},
    {"Not", f_logic, "", 1, 1},
    {"And", f_logic, "", 2, 2},
    {"Or", f_logic, "", 2, 2},
    {"Xor", f_logic, "", 2, 2},
    {"Where", f_where, "", 3, 3},
    {"Mod", f_mod, "fmod", 2, 2},
    {"ScatterND", f_scatter_nd, "reduction", 3, 3},
};

static const fold_op *find_fold_op(const char *type)
{
    for (size_t j = 0; type && j < FG_COUNTOF(fold_ops); j++)
        if (strcmp(fold_ops[j].type, type) == 0)
            return &fold_ops[j];
    return NULL;
}

static int default_domain(const Onnx__NodeProto *n)
{
    return !n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0;
}

int fg_onnx_fold_known(const char *op_type) { return find_fold_op(op_type) != NULL; }

/* A set of ONNX names (pointers into the decoded model). */
typedef struct name_set {
    UT_hash_handle hh;
    const char *name;
} name_set;

static void set_add(name_set **s, const char *name)
{
    name_set *e;
    HASH_FIND_STR(*s, name, e);
    if (e)
        return;
    e = fg_xcalloc(1, sizeof *e);
    e->name = name;
    HASH_ADD_KEYPTR(hh, *s, e->name, strlen(e->name), e);
}

static int set_has(name_set *s, const char *name)
{
    name_set *e;
    HASH_FIND_STR(s, name, e);
    return e != NULL;
}

void fg_onnx_fold_mark(const Onnx__GraphProto *gp, unsigned char *fold)
{
    name_set *consts = NULL, *e, *tmp;
    for (size_t j = 0; j < gp->n_initializer; j++)
        if (gp->initializer[j]->name && gp->initializer[j]->name[0])
            set_add(&consts, gp->initializer[j]->name);
    for (size_t j = 0; j < gp->n_node; j++) {
        const Onnx__NodeProto *n = gp->node[j];
        fold[j] = 0;
        int is_const = 0;
        if (default_domain(n) && n->op_type && strcmp(n->op_type, "Constant") == 0) {
            is_const = 1;   /* decoded by the importer */
        } else if (default_domain(n) && find_fold_op(n->op_type)) {
            int shape_only = strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0, all = 1;
            int type_of_1 = strcmp(n->op_type, "CastLike") == 0;   /* input 1: only its type is read */
            for (size_t k = 0; k < n->n_input && all; k++)
                if (n->input[k] && n->input[k][0] && !shape_only && !(type_of_1 && k == 1) &&
                    !set_has(consts, n->input[k]))
                    all = 0;
            fold[j] = (unsigned char)all;
            is_const = all;
        }
        if (is_const && n->n_output && n->output[0] && n->output[0][0])
            set_add(&consts, n->output[0]);
    }
    HASH_ITER(hh, consts, e, tmp) {
        HASH_DEL(consts, e);
        free(e);
    }
}

static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return 1;
    return 0;
}

uint64_t fg_onnx_const_bytes(const fg_onnx_const *k)
{
    return k->numel > 0 ? (uint64_t)k->numel * (k->i ? 8u : 4u) : 0;
}

int fg_onnx_fold_eval(const Onnx__NodeProto *n, int opset, const fg_onnx_fold_in *ins, int nins, uint64_t budget,
                      fg_onnx_const *out, char *err, size_t errsz)
{
    fctx c = {.n = n, .opset = opset, .ins = ins, .nins = nins, .budget = budget, .err = err, .errsz = errsz};
    const fold_op *op = default_domain(n) ? find_fold_op(n->op_type) : NULL;
    memset(out, 0, sizeof *out);
    out->weight = -1;
    if (!op)
        return ferr(&c, "the folder does not evaluate this operator");
    while (nins > 0 && !has_input(&c, nins - 1))
        nins--;
    c.nins = nins;
    if (nins < op->min_in || (op->max_in >= 0 && nins > op->max_in))
        return ferr(&c, "has %d inputs; %s takes %d to %d", nins, op->type, op->min_in,
                    op->max_in >= 0 ? op->max_in : 2147483647);
    for (size_t j = 0; j < n->n_attribute; j++) {
        const char *an = n->attribute[j]->name ? n->attribute[j]->name : "";
        if (!word_in(op->attrs, an))
            return ferr(&c, "attribute '%.60s' is not supported when folding %s", an, op->type);
    }
    val v = {0};
    if (!op->fn(&c, &v))
        return 0;
    val_to_const(&v, out);
    return 1;
}
