/*
 * onnx_convert.c -- the converters of the ONNX importer (onnx_impl.h): one
 * function per supported operator mapping a node onto ops of the loaded
 * vocabulary with ONNX attribute semantics, the operator table, and the
 * conversion or folding of one node.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"
#include "context.h"
#include "expr.h"
#include "kind.h"
#include "shape.h"

/* One node being converted. */
typedef struct nctx {
    loader *L;
    int idx;
    const Onnx__NodeProto *n;
    char label[256];           /* "node 12 'Conv_3' (Conv)" */
    int bad;
    int nout_defined;          /* outputs 0 .. nout_defined-1 were defined by the converter */
    const fg_opdef *def;       /* an operator imported as data: the op whose `onnx:` key names it */
} nctx;

static fg_status nerr(nctx *nc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fg_status nerr(nctx *nc, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    fg_diag_error(nc->L->ctx, FG_ERR_INPUT, nc->L->loc, "%s: %s", nc->label, b.s);
    fg_buf_free(&b);
    nc->bad = 1;
    return FG_ERR_INPUT;
}

/* The weight made from constant ci (created on first use); -1 when the
 * constant cannot be a tensor (reported). */
static int const_weight(nctx *nc, int ci)
{
    loader *L = nc->L;
    konst *k = &L->consts[ci];
    char b1[200];
    if (k->weight >= 0)
        return k->weight;
    int dt = fg_onnx_dtype_fg(k->dtype);
    if (dt < 0) {
        nerr(nc, "constant '%s' of type %s is used as a tensor; tensors are float, float16, bfloat16, int64, int32 or "
             "bool", fg_onnx_esc(k->name, b1, sizeof b1), fg_onnx_dtype_name(k->dtype));
        return -1;
    }
    if (k->numel < 1) {
        nerr(nc, "constant '%s' is empty", fg_onnx_esc(k->name, b1, sizeof b1));
        return -1;
    }
    /* weights hold float values: an integer constant must be exact in one */
    float *f = k->f;
    if (!f) {
        f = fg_xmalloc(sizeof(float) * (size_t)k->numel);
        for (int64_t j = 0; j < k->numel; j++) {
            if (k->i[j] > (1 << 24) || k->i[j] < -(1 << 24)) {
                nerr(nc, "integer constant '%s' holds %lld, beyond 2^24: integer weights are exact only up to 2^24",
                     fg_onnx_esc(k->name, b1, sizeof b1), (long long)k->i[j]);
                free(f);
                return -1;
            }
            f[j] = (float)k->i[j];
        }
    }
    int64_t one = 1;
    k->weight = fg_onnx_new_weight(L, k->name, k->name, (fg_dtype)dt, k->rank ? k->rank : 1, k->rank ? k->shape : &one, f);
    if (f != k->f)
        free(f);
    return k->weight;
}

/* ---- attributes ------------------------------------------------------------- */

static const Onnx__AttributeProto *attr_get(const nctx *nc, const char *name)
{
    for (size_t i = 0; i < nc->n->n_attribute; i++)
        if (nc->n->attribute[i]->name && strcmp(nc->n->attribute[i]->name, name) == 0)
            return nc->n->attribute[i];
    return NULL;
}

static int attr_type(const Onnx__AttributeProto *a) { return a->has_type ? (int)a->type : 0; }

/* Attribute name when it has type type; NULL when it is absent, or of
 * another type (reported: it "must be <what>"). */
static const Onnx__AttributeProto *attr_typed(nctx *nc, const char *name, int type, const char *what)
{
    const Onnx__AttributeProto *a = attr_get(nc, name);
    if (a && attr_type(a) != type) {
        nerr(nc, "attribute '%s' must be %s", name, what);
        return NULL;
    }
    return a;
}

static int64_t attr_int(nctx *nc, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr_typed(nc, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an int");
    return a ? a->i : def;
}

/* The node's `axis` attribute (def when absent) normalized for rank (a
 * negative axis counts from the end) into *a: 0, or -1 after a located
 * error when it is out of range. */
static int axis_attr(nctx *nc, int rank, int64_t def, int64_t *a)
{
    int64_t axis = attr_int(nc, "axis", def);
    *a = axis < 0 ? axis + rank : axis;
    if (*a < 0 || *a >= rank)
        return nerr(nc, "axis %lld is out of range for rank %d", (long long)axis, rank), -1;
    return 0;
}

static double attr_float(nctx *nc, const char *name, double def)
{
    const Onnx__AttributeProto *a = attr_typed(nc, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "a float");
    return a ? a->f : def;
}

/* A string attribute into buf (def when absent). */
static const char *attr_str(nctx *nc, const char *name, const char *def, char *buf, size_t size)
{
    const Onnx__AttributeProto *a = attr_typed(nc, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "a string");
    if (!a)
        return def;
    size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
    if (n)   /* a string attribute without its value has no data (NULL) */
        memcpy(buf, a->s.data, n);
    buf[n] = 0;
    return buf;
}

/* An ints attribute of exactly want values (any count 1..max when want is 0)
 * into out; returns the count, 0 when absent, -1 on an error (reported). */
static int attr_ints(nctx *nc, const char *name, int want, int max, int64_t *out)
{
    if (!attr_get(nc, name))
        return 0;
    const Onnx__AttributeProto *a = attr_typed(nc, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "a list of ints");
    if (!a)
        return -1;
    if ((want && (int)a->n_ints != want) || (!want && (a->n_ints < 1 || (int)a->n_ints > max))) {
        if (want)
            nerr(nc, "attribute '%s' must have %d values, got %zu", name, want, a->n_ints);
        else
            nerr(nc, "attribute '%s' must have 1 to %d values, got %zu", name, max, a->n_ints);
        return -1;
    }
    memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
    return (int)a->n_ints;
}

/* ---- inputs and outputs of a node ------------------------------------------ */

static int nin(const nctx *nc)
{
    int n = (int)nc->n->n_input;
    while (n > 0 && (!nc->n->input[n - 1] || !nc->n->input[n - 1][0]))
        n--;
    return n;
}

static int has_in(const nctx *nc, int i)
{
    return i < (int)nc->n->n_input && nc->n->input[i] && nc->n->input[i][0];
}

static value *in_value(const nctx *nc, int i) { return has_in(nc, i) ? fg_onnx_vfind(nc->L->values, nc->n->input[i]) : NULL; }

/* Constant input i, or NULL (absent or computed). */
static konst *in_const(const nctx *nc, int i)
{
    value *v = in_value(nc, i);
    return v && v->kind == V_CONST ? &nc->L->consts[v->idx] : NULL;
}

/* Tensor of input i (a constant becomes a weight); -1 absent or error. */
static int in_tensor(nctx *nc, int i)
{
    value *v = in_value(nc, i);
    if (!v)
        return -1;
    return v->kind == V_CONST ? const_weight(nc, v->idx) : v->idx;
}

static fg_tensor *T(const nctx *nc, int t) { return &nc->L->g->tensors[t]; }

/* Output i's ONNX name is read by a node or is a graph output. */
static int out_used(const nctx *nc, int i)
{
    return i < (int)nc->n->n_output && nc->n->output[i] && nc->n->output[i][0] &&
           fg_onnx_vfind(nc->L->used, nc->n->output[i]);
}

static void def_output(nctx *nc, int i, vkind kind, int idx)
{
    if (i < (int)nc->n->n_output && nc->n->output[i] && nc->n->output[i][0])
        fg_onnx_vset(&nc->L->values, nc->n->output[i], kind, idx);
    if (nc->nout_defined < i + 1)
        nc->nout_defined = i + 1;
}

/* Output 0 names the same value as input i (Identity, Dropout, no-op reshapes). */
static void alias_output(nctx *nc, int i)
{
    value *v = in_value(nc, i);
    def_output(nc, 0, v->kind, v->idx);
}

/* ---- emitting graph nodes -------------------------------------------------- */

typedef struct aset {
    const char *name;
    fg_attr_value v;
} aset;

static fg_attr_value a_ints2(int64_t a, int64_t b)
{
    fg_attr_value v = {.type = FG_ATTR_INTS, .n = 2};
    v.ints[0] = a;
    v.ints[1] = b;
    return v;
}
static fg_attr_value a_intsn(const int64_t *v, int n)
{
    fg_attr_value a = {.type = FG_ATTR_INTS, .n = n};
    memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
    return a;
}
static fg_attr_value a_float(double f)
{
    /* .i: f truncated, saturated (a cast of NaN or of a value outside int64 is undefined) */
    int64_t i = f != f ? 0 : f >= 0x1p63 ? INT64_MAX : f < -0x1p63 ? INT64_MIN : (int64_t)f;
    return (fg_attr_value){.type = FG_ATTR_FLOAT, .f = f, .i = i};
}
static fg_attr_value a_int(int64_t i) { return (fg_attr_value){.type = FG_ATTR_INT, .i = i, .f = (double)i}; }
static fg_attr_value a_bool(int b) { return (fg_attr_value){.type = FG_ATTR_BOOL, .i = b != 0, .f = b != 0}; }

/* Appends a node of op opname reading tensors ins[0..nins) (-1: absent) with
 * attributes as[0..nas) (the op's defaults fill the rest), infers its
 * shape, and names its output after ONNX output out_slot (or onnx_out).
 * Returns the output tensor or -1 (reported). */
static int emit(nctx *nc, const char *opname, const int *ins, int nins, const aset *as, int nas, int out_slot,
                const char *suffix)
{
    loader *L = nc->L;
    const fg_opdef *op = fg_ctx_find_op(L->ctx, opname);
    if (!op) {
        nerr(nc, "op '%s' is not in the loaded vocabulary (the shipped rules/ops.yaml, pointwise.yaml and "
                 "onnx_ops.yaml define every op the importer uses)", opname);
        return -1;
    }
    if (nins > op->ninputs) {
        nerr(nc, "op '%s' takes %d inputs, the mapping gives %d (rules changed?)", opname, op->ninputs, nins);
        return -1;
    }
    fg_node n = {0};
    n.op = op;
    n.ninputs = op->ninputs;
    for (int i = 0; i < FG_MAX_INPUTS; i++)
        n.inputs[i] = i < nins ? ins[i] : -1;
    for (int i = 0; i < op->ninputs; i++)
        if (!op->inputs[i].optional && n.inputs[i] < 0) {
            nerr(nc, "op '%s' needs input '%s'", opname, op->inputs[i].name);
            return -1;
        }
    int set[FG_MAX_ATTRS] = {0};
    for (int a = 0; a < op->nattrs; a++)
        n.attrs[a] = op->attrs[a].def;
    for (int j = 0; j < nas; j++) {
        int a = -1;
        for (int q = 0; q < op->nattrs && a < 0; q++)
            if (strcmp(op->attrs[q].name, as[j].name) == 0)
                a = q;
        if (a < 0 || op->attrs[a].type != as[j].v.type) {
            nerr(nc, "op '%s' of the loaded vocabulary has no %s attribute '%s' (rules changed?)", opname,
                 fg_attr_type_name(as[j].v.type), as[j].name);
            return -1;
        }
        n.attrs[a] = as[j].v;
        set[a] = 1;
    }
    for (int a = 0; a < op->nattrs; a++)
        if (op->attrs[a].required && !set[a]) {
            nerr(nc, "op '%s' needs attribute '%s' (rules changed?)", opname, op->attrs[a].name);
            return -1;
        }
    const char *onnx_out = out_slot < (int)nc->n->n_output ? nc->n->output[out_slot] : NULL;
    char hint[300];
    const char *nname = nc->n->name && nc->n->name[0] ? nc->n->name : NULL;
    if (nname)
        snprintf(hint, sizeof hint, "%s%s", nname, suffix ? suffix : "");
    else
        snprintf(hint, sizeof hint, "%s_%d%s", nc->n->op_type, nc->idx, suffix ? suffix : "");
    n.name = fg_onnx_unique_name(L, &L->nnames, hint);
    n.loc = L->loc;
    fg_tensor t = {0};
    t.name = fg_onnx_unique_name(L, &L->tnames, onnx_out && *onnx_out && !suffix ? onnx_out : hint);
    t.rank = -1;
    t.producer = -1;
    t.layout = FG_LAYOUT_NCHW;
    t.loc = L->loc;
    n.output = fg_onnx_add_tensor(L, &t, suffix ? NULL : onnx_out);
    int nd = fg_graph_add_node(L->g, &n);
    L->g->tensors[n.output].producer = nd;
    if (fg_kind_infer_shape(L->ctx, L->g, nd) != FG_OK) {
        nc->bad = 1;
        return -1;
    }
    return n.output;
}

/* emit() whose result is ONNX output 0. */
static int emit_out(nctx *nc, const char *opname, const int *ins, int nins, const aset *as, int nas)
{
    int t = emit(nc, opname, ins, nins, as, nas, 0, NULL);
    if (t >= 0)
        def_output(nc, 0, V_TENSOR, t);
    return t;
}

/* ---- operators --------------------------------------------------------------- */

/* The activation (computed) input 0 as a tensor of known shape, or -1. */
static int x_in(nctx *nc)
{
    int t = in_tensor(nc, 0);
    if (t < 0 && !nc->bad)
        nerr(nc, "input 0 is missing");
    return t;
}

static int op_hardsigmoid(nctx *nc)
{
    int x = x_in(nc);
    double alpha = attr_float(nc, "alpha", 0.2), beta = attr_float(nc, "beta", 0.5);
    if (x < 0)
        return -1;
    /* PyTorch's hardsigmoid (x/6 + 1/2) has an op of its own that fusion rules know. */
    if ((float)alpha == (float)(1.0 / 6.0) && beta == 0.5)
        return emit_out(nc, "hardsigmoid", &x, 1, NULL, 0);
    aset a[2] = {{"alpha", a_float(alpha)}, {"beta", a_float(beta)}};
    return emit_out(nc, "hardsigmoid_ab", &x, 1, a, 2);
}

static int op_gelu(nctx *nc)
{
    char buf[32];
    int x = x_in(nc);
    const char *ap = attr_str(nc, "approximate", "none", buf, sizeof buf);
    if (x < 0)
        return -1;
    if (strcmp(ap, "none") == 0)
        return emit_out(nc, "gelu", &x, 1, NULL, 0);
    if (strcmp(ap, "tanh") == 0)
        return emit_out(nc, "gelu_tanh", &x, 1, NULL, 0);
    return nerr(nc, "approximate='%s' is not 'none' or 'tanh'", ap), -1;
}

/* ---- operators as data: an op's `onnx:` key ---------------------------------- */

/* The value of ONNX attribute a as op attribute d (an ONNX float for a
 * float, an int for an int, bool or float); 0 with an error otherwise. */
static int data_attr(nctx *nc, const Onnx__AttributeProto *a, const fg_attr_def *d, fg_attr_value *out)
{
    int t = attr_type(a);
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && d->type == FG_ATTR_FLOAT && a->has_f) {
        *out = a_float(a->f);
        return 1;
    }
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->has_i) {
        if (d->type == FG_ATTR_INT)
            *out = a_int(a->i);
        else if (d->type == FG_ATTR_BOOL)
            *out = a_bool(a->i != 0);
        else if (d->type == FG_ATTR_FLOAT)
            *out = a_float((double)a->i);
        else
            return nerr(nc, "attribute '%s' must be %s", d->name, fg_attr_type_name(d->type)), 0;
        return 1;
    }
    return nerr(nc, "attribute '%s' must be a single %s", d->name, d->type == FG_ATTR_FLOAT ? "float" : "int"), 0;
}

/* The element-wise op def on constant inputs ks[0 .. nk), its attributes
 * vals (after the inputs, in def's order): evaluated with def's expression
 * in double (numpy broadcasting), rounded to the first input's type, as
 * ONNX output 0.  Returns 1, or 0 (reported). */
static int data_fold(nctx *nc, const fg_opdef *def, konst *const *ks, int nk, const double *attrs)
{
    int64_t shape[FG_MAX_RANK] = {0};
    int rank = 0, dtype = ks[0]->dtype;
    for (int j = 0; j < nk; j++) {
        if (!ks[j]->f)
            return nerr(nc, "input %d is an integer constant; %s is folded through op '%s''s expression, which "
                            "takes float types", j, nc->n->op_type, def->name), 0;
        if (j == 0)
            memcpy(shape, ks[0]->shape, sizeof shape), rank = ks[0]->rank;
        else if ((rank = fg_broadcast_shape(shape, rank, ks[j]->shape, ks[j]->rank)) < 0)
            return nerr(nc, "the constant inputs do not broadcast"), 0;
    }
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        if (__builtin_mul_overflow(n, shape[d], &n) || n > FG_ONNX_MAX_WEIGHT_NUMEL)
            return nerr(nc, "the folded result would have more than %lld elements", (long long)FG_ONNX_MAX_WEIGHT_NUMEL), 0;
    float *f = fg_xmalloc(sizeof *f * (size_t)(n + 1));
    double vals[FG_MAX_INPUTS + FG_MAX_ATTRS];
    for (int a = 0; a < def->nattrs; a++)
        vals[def->ninputs + a] = attrs[a];
    for (int j = nk; j < def->ninputs; j++)
        vals[j] = 0;   /* an absent optional input reads as 0 */
    for (int64_t e = 0; e < n; e++) {
        for (int j = 0; j < nk; j++) {   /* element e of the result in input j, broadcast */
            int64_t rem = e, off = 0, stride = 1;
            for (int d = rank - 1; d >= 0; d--) {
                int64_t c = rem % shape[d];
                rem /= shape[d];
                int jd = d - (rank - ks[j]->rank);
                if (jd >= 0) {
                    if (ks[j]->shape[jd] > 1)
                        off += c * stride;
                    stride *= ks[j]->shape[jd];
                }
            }
            vals[j] = ks[j]->f[off];
        }
        f[e] = fg_onnx_round_float(fg_expr_eval(def->expr, vals), dtype);
    }
    int ci = fg_onnx_new_const(nc->L, nc->n->output[0], dtype, rank, shape, f, NULL);
    def_output(nc, 0, V_CONST, ci);
    return 1;
}

/* An operator whose op definition has an `onnx:` key (docs/onnx.md,
 * "Operators as data"): ONNX input i is the op's input i, an ONNX attribute
 * sets the op's attribute of the same name (the op's defaults are ONNX's),
 * and constant inputs become weights -- or, when every input is constant,
 * the expression folds them. */
static int op_data(nctx *nc)
{
    const fg_opdef *def = nc->def;
    aset as[FG_MAX_ATTRS];
    double attrs[FG_MAX_ATTRS];
    int nas = 0;
    for (int a = 0; a < def->nattrs; a++) {
        attrs[a] = fg_attr_number(&def->attrs[a].def);
        const Onnx__AttributeProto *p = attr_get(nc, def->attrs[a].name);
        if (!p)
            continue;
        if (!data_attr(nc, p, &def->attrs[a], &as[nas].v))
            return -1;
        as[nas].name = def->attrs[a].name;
        attrs[a] = fg_attr_number(&as[nas++].v);
    }
    int ni = nin(nc), ins[FG_MAX_INPUTS], nconst = 0;
    konst *ks[FG_MAX_INPUTS];
    for (int i = 0; i < ni; i++) {
        ks[i] = in_const(nc, i);
        nconst += ks[i] != NULL;
        if (!has_in(nc, i))
            return nerr(nc, "input %d ('%s' of op '%s') is missing", i, def->inputs[i].name, def->name), -1;
    }
    if (ni > 0 && nconst == ni)
        return data_fold(nc, def, ks, ni, attrs) ? 0 : -1;
    for (int i = 0; i < ni; i++)
        if ((ins[i] = in_tensor(nc, i)) < 0)
            return -1;
    return emit_out(nc, def->name, ins, ni, as, nas);
}

/* A scalar constant input i into *v: 1 given, 0 absent, -1 error. */
static int scalar_in(nctx *nc, int i, const char *what, double *v)
{
    if (!has_in(nc, i))
        return 0;
    konst *k = in_const(nc, i);
    if (!k)
        return nerr(nc, "%s must be a constant (an initializer or a Constant node)", what), -1;
    if (k->numel != 1)
        return nerr(nc, "%s must be a scalar, got %lld values", what, (long long)k->numel), -1;
    *v = k->f ? (double)k->f[0] : (double)k->i[0];
    return 1;
}

/* Clip whose min or max is computed (a graph input or a node's output):
 * min(max(x, lo), hi) over tensors, each bound a one-element tensor that
 * broadcasts onto x (a constant bound becomes a weight). */
static int clip_computed(nctx *nc, int x)
{
    int ins[3] = {x, -1, -1}, n = 1;
    static const char *const what[3] = {"", "min", "max"};
    for (int i = 1; i <= 2; i++) {
        if (!has_in(nc, i))
            continue;
        int t = in_tensor(nc, i);
        if (t < 0)
            return -1;
        int64_t numel = fg_tensor_numel(T(nc, t));
        if (numel != 1)
            return nerr(nc, "%s must be a scalar, got %lld values", what[i], (long long)numel), -1;
        ins[n++] = t;
    }
    if (has_in(nc, 1) && has_in(nc, 2))
        return emit_out(nc, "clip_t", ins, 3, NULL, 0);
    return emit_out(nc, has_in(nc, 1) ? "clip_min_t" : "clip_max_t", ins, 2, NULL, 0);
}

static int op_clip(nctx *nc)
{
    double lo = 0, hi = 0;
    int x = x_in(nc);
    if (x < 0)
        return -1;
    if ((has_in(nc, 1) && !in_const(nc, 1)) || (has_in(nc, 2) && !in_const(nc, 2)))
        return clip_computed(nc, x);
    int has_lo = scalar_in(nc, 1, "min", &lo), has_hi = scalar_in(nc, 2, "max", &hi);
    if (x < 0 || has_lo < 0 || has_hi < 0)
        return -1;
    if (has_lo && has_hi && lo == 0 && hi == 6)
        return emit_out(nc, "relu6", &x, 1, NULL, 0);
    if (has_lo && !has_hi && lo == 0)
        return emit_out(nc, "relu", &x, 1, NULL, 0);
    if (has_lo && has_hi) {
        aset a[2] = {{"lo", a_float(lo)}, {"hi", a_float(hi)}};
        return emit_out(nc, "clip", &x, 1, a, 2);
    }
    if (has_lo) {
        aset a = {"lo", a_float(lo)};
        return emit_out(nc, "clip_min", &x, 1, &a, 1);
    }
    if (has_hi) {
        aset a = {"hi", a_float(hi)};
        return emit_out(nc, "clip_max", &x, 1, &a, 1);
    }
    alias_output(nc, 0);
    return x;
}

/* ---- Max, Min, comparisons, Where (function bodies: Relu, HardSigmoid, Clip, ...) ---- */

/* Max / Min of one or more tensors, broadcast numpy-style: a chain of
 * binary max2 / min2 (NaN propagates). */
static int variadic_minmax(nctx *nc, const char *op)
{
    int n = nin(nc), acc = in_tensor(nc, 0);
    if (acc < 0)
        return nc->bad ? -1 : (nerr(nc, "input 0 is missing"), -1);
    if (n == 1) {
        alias_output(nc, 0);
        return acc;
    }
    for (int i = 1; i < n && acc >= 0; i++) {
        int ins[2] = {acc, in_tensor(nc, i)};
        if (ins[1] < 0)
            return nc->bad ? -1 : (nerr(nc, "input %d is missing", i), -1);
        if (i == 1 && in_const(nc, 0) && !in_const(nc, 1)) {   /* the computed operand first */
            ins[0] = ins[1];
            ins[1] = acc;
        }
        acc = i + 1 < n ? emit(nc, op, ins, 2, NULL, 0, 0, ".acc") : emit_out(nc, op, ins, 2, NULL, 0);
    }
    return acc;
}

static int op_max(nctx *nc) { return variadic_minmax(nc, "max2"); }
static int op_min(nctx *nc) { return variadic_minmax(nc, "min2"); }

/* Less, Greater, Equal, LessOrEqual, GreaterOrEqual: a bool tensor (a NaN
 * operand compares false, as IEEE and ONNX). */
static int compare_op(nctx *nc, const char *op)
{
    int ins[2] = {in_tensor(nc, 0), in_tensor(nc, 1)};
    if (ins[0] < 0 || ins[1] < 0)
        return nc->bad ? -1 : (nerr(nc, "needs two inputs"), -1);
    return emit_out(nc, op, ins, 2, NULL, 0);
}

static int op_less(nctx *nc) { return compare_op(nc, "cmp_less"); }
static int op_greater(nctx *nc) { return compare_op(nc, "cmp_greater"); }
static int op_equal(nctx *nc) { return compare_op(nc, "cmp_equal"); }
static int op_less_equal(nctx *nc) { return compare_op(nc, "cmp_less_equal"); }
static int op_greater_equal(nctx *nc) { return compare_op(nc, "cmp_greater_equal"); }

/* Where(condition, X, Y): a bool condition; X and Y broadcast. */
static int op_where(nctx *nc)
{
    int ins[3] = {in_tensor(nc, 0), in_tensor(nc, 1), in_tensor(nc, 2)};
    if (ins[0] < 0 || ins[1] < 0 || ins[2] < 0)
        return nc->bad ? -1 : (nerr(nc, "needs three inputs"), -1);
    if (T(nc, ins[0])->dtype != FG_DTYPE_BOOL)
        return nerr(nc, "the condition is %s; bool expected", fg_dtype_name(T(nc, ins[0])->dtype)), -1;
    return emit_out(nc, "where", ins, 3, NULL, 0);
}

static int op_prelu(nctx *nc)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    konst *k = in_const(nc, 1);
    const fg_tensor *xt = T(nc, x);
    if (k && k->f && k->numel == 1) {
        aset a = {"alpha", a_float(k->f[0])};
        return emit_out(nc, "leaky_relu", &x, 1, &a, 1);
    }
    if (k && k->f && xt->rank >= 2) {
        /* [C, 1, ..., 1] (after leading 1s) broadcast against x is per channel. */
        int r = k->rank, lead = 0;
        while (lead < r && k->shape[lead] == 1 && r - lead > xt->rank - 1)
            lead++;
        int per = r - lead == xt->rank - 1 && k->shape[lead] == xt->shape[1];
        for (int d = lead + 1; per && d < r; d++)
            per = k->shape[d] == 1;
        if (per) {
            int64_t c = xt->shape[1];
            char hint[300];
            snprintf(hint, sizeof hint, "%s.c", k->name);
            int w = fg_onnx_new_weight(nc->L, NULL, hint, xt->dtype, 1, &c, k->f);
            int ins[2] = {x, w};
            return emit_out(nc, "prelu", ins, 2, NULL, 0);
        }
    }
    int ins[2] = {x, in_tensor(nc, 1)};
    if (ins[1] < 0)
        return -1;
    return emit_out(nc, "prelu_broadcast", ins, 2, NULL, 0);
}

static int binary(nctx *nc, const char *op, int commutative)
{
    int a = in_tensor(nc, 0), b = in_tensor(nc, 1);
    if (a < 0 || b < 0)
        return nc->bad ? -1 : (nerr(nc, "needs two inputs"), -1);
    if (in_const(nc, 0) && in_const(nc, 1))
        return nerr(nc, "both inputs are constants; fold constant subgraphs before importing "
                        "(onnxruntime's or onnx-simplifier's constant folding)"), -1;
    /* The computed operand first, so that fusion rules see it as the chain. */
    int ins[2] = {a, b};
    if (commutative && in_const(nc, 0)) {
        ins[0] = b;
        ins[1] = a;
    }
    return emit_out(nc, op, ins, 2, NULL, 0);
}

static int op_add(nctx *nc) { return binary(nc, "add", 1); }
static int op_sub(nctx *nc) { return binary(nc, "sub", 0); }
static int op_pow(nctx *nc) { return binary(nc, "pow", 0); }
static int op_mul(nctx *nc) { return binary(nc, "mul", 1); }
/* Div; of integer tensors refused: ONNX truncates the quotient toward
 * zero, which fp32 arithmetic gets right only for small operands. */
static int op_div(nctx *nc)
{
    value *v = in_value(nc, 0);
    if (v && v->kind == V_TENSOR && !fg_dtype_is_float(T(nc, v->idx)->dtype))
        return nerr(nc, "Div of computed %s tensors is not supported (integer division truncates; kernels compute "
                        "in fp32)", fg_dtype_name(T(nc, v->idx)->dtype)), -1;
    return binary(nc, "div", 0);
}

/* Pads of a 2-D window op for both spatial axes: begin[2], end[2] from
 * auto_pad / pads.  Returns 0 on an error (reported). */
static int window_pads(nctx *nc, const int64_t *hw, const int64_t *k, const int64_t *s, const int64_t *d,
                       int64_t *beg, int64_t *end, int *same)
{
    char buf[32];
    const char *ap = attr_str(nc, "auto_pad", "NOTSET", buf, sizeof buf);
    int64_t pads[4] = {0, 0, 0, 0};
    *same = 0;
    if (strcmp(ap, "NOTSET") == 0) {
        if (attr_ints(nc, "pads", 4, 4, pads) < 0)
            return 0;
    } else if (strcmp(ap, "VALID") == 0) {
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        *same = 1;
        for (int a = 0; a < 2; a++) {
            int64_t out = (hw[a] + s[a] - 1) / s[a];
            int64_t total = (out - 1) * s[a] + (k[a] - 1) * d[a] + 1 - hw[a];
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            pads[a] = ap[5] == 'U' ? small : big;
            pads[a + 2] = ap[5] == 'U' ? big : small;
        }
    } else {
        nerr(nc, "auto_pad='%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
        return 0;
    }
    for (int a = 0; a < 4; a++)
        if (pads[a] < 0) {
            nerr(nc, "pads must not be negative");
            return 0;
        }
    beg[0] = pads[0], beg[1] = pads[1], end[0] = pads[2], end[1] = pads[3];
    return 1;
}

/* The `padding` attribute of conv2d / pool2d for ONNX pads beg / end (H, W):
 * [top, left] when each axis is padded equally, else [top, left, bottom,
 * right]. */
static fg_attr_value a_pads(const int64_t *beg, const int64_t *end)
{
    fg_attr_value v = a_ints2(beg[0], beg[1]);
    if (beg[0] != end[0] || beg[1] != end[1]) {
        v.n = 4;
        v.ints[2] = end[0];
        v.ints[3] = end[1];
    }
    return v;
}

/* kernel_shape / strides / dilations of a 2-D window op; 0 on error. */
static int window_attrs(nctx *nc, int64_t *k, int64_t *s, int64_t *d, int need_kernel)
{
    s[0] = s[1] = d[0] = d[1] = 1;
    int nk = attr_ints(nc, "kernel_shape", 0, 8, k);
    if (nk < 0 || attr_ints(nc, "strides", 0, 8, s) < 0 || attr_ints(nc, "dilations", 0, 8, d) < 0)
        return 0;
    if (need_kernel && nk == 0)
        return nerr(nc, "needs attribute 'kernel_shape'"), 0;
    const Onnx__AttributeProto *as = attr_get(nc, "strides"), *ad = attr_get(nc, "dilations");
    if ((nk && nk != 2) || (as && as->n_ints != 2) || (ad && ad->n_ints != 2))
        return nerr(nc, "only 2-D windows are supported (kernel_shape, strides and dilations of 2 values)"), 0;
    for (int a = 0; a < 2; a++)
        if (s[a] < 1 || d[a] < 1 || (nk && k[a] < 1))
            return nerr(nc, "kernel_shape, strides and dilations must be positive"), 0;
    return 1;
}

static int op_conv(nctx *nc)
{
    value *xv = in_value(nc, 0);
    if (xv && xv->kind == V_TENSOR && T(nc, xv->idx)->rank == 3)
        return fg_onnx_lift_1d(nc, op_conv, 1);   /* 1-D: the 2-D form with H = 1 */
    int x = x_in(nc), w = in_tensor(nc, 1), b = has_in(nc, 2) ? in_tensor(nc, 2) : -1;
    if (x < 0 || w < 0 || (has_in(nc, 2) && b < 0))
        return nc->bad ? -1 : (nerr(nc, "needs inputs X and W"), -1);
    const fg_tensor *xt = T(nc, x), *wt = T(nc, w);
    if (xt->rank != 4 || wt->rank != 4)
        return nerr(nc, "only 2-D convolution is supported (input rank 4, weight rank 4; got %d and %d)", xt->rank,
                    wt->rank), -1;
    int64_t k[2] = {wt->shape[2], wt->shape[3]}, kk[2], s[2], d[2], beg[2], end[2];
    if (!window_attrs(nc, kk, s, d, 0))
        return -1;
    if (attr_get(nc, "kernel_shape") && (kk[0] != k[0] || kk[1] != k[1]))
        return nerr(nc, "kernel_shape [%lld, %lld] differs from the weight's [%lld, %lld]", (long long)kk[0],
                    (long long)kk[1], (long long)k[0], (long long)k[1]), -1;
    int same;
    if (!window_pads(nc, &xt->shape[2], k, s, d, beg, end, &same))
        return -1;
    int64_t group = attr_int(nc, "group", 1);
    if (nc->bad)
        return -1;
    aset as[4] = {{"stride", a_ints2(s[0], s[1])},
                  {"padding", a_pads(beg, end)},
                  {"dilation", a_ints2(d[0], d[1])},
                  {"groups", a_int(group)}};
    int ins[3] = {x, w, b};
    return emit_out(nc, "conv2d", ins, 3, as, 4);
}

static int op_batch_norm(nctx *nc)
{
    int ins[5];
    for (int i = 0; i < 5; i++)
        if ((ins[i] = in_tensor(nc, i)) < 0)
            return nc->bad ? -1 : (nerr(nc, "needs 5 inputs (X, scale, B, input_mean, input_var)"), -1);
    if (attr_int(nc, "training_mode", 0))
        return nerr(nc, "training_mode=1 is not supported (inference only)"), -1;
    aset a = {"eps", a_float(attr_float(nc, "epsilon", 1e-5))};
    return nc->bad ? -1 : emit_out(nc, "batch_norm", ins, 5, &a, 1);
}

/* MaxPool / AveragePool: pads (any per side, or auto_pad), strides,
 * dilations and ceil_mode map to the pool2d attributes one to one;
 * count_include_pad to avg_pool2d's.  storage_order orders only the
 * optional Indices output, which fg_onnx_convert_node refuses when it is used, so
 * either value gives the same values. */
static int op_maxpool(nctx *nc);
static int op_avgpool(nctx *nc);

static int pool(nctx *nc, int is_max)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *xt = T(nc, x);
    if (xt->rank == 3)
        return fg_onnx_lift_1d(nc, is_max ? op_maxpool : op_avgpool, 0);
    if (xt->rank != 4)
        return nerr(nc, "only 1-D and 2-D pooling is supported (input rank 3 or 4, got %d)", xt->rank), -1;
    int64_t k[2], s[2], d[2], beg[2], end[2];
    if (!window_attrs(nc, k, s, d, 1))
        return -1;
    int ceil_mode = attr_int(nc, "ceil_mode", 0) != 0, same;
    if (!window_pads(nc, &xt->shape[2], k, s, d, beg, end, &same))
        return -1;
    if (same)
        ceil_mode = 0; /* SAME: the output size is ceil(size / stride) whatever ceil_mode says */
    aset as[6] = {{"kernel", a_ints2(k[0], k[1])}, {"stride", a_ints2(s[0], s[1])},
                  {"padding", a_pads(beg, end)},   {"dilation", a_ints2(d[0], d[1])},
                  {"ceil_mode", a_bool(ceil_mode)}};
    if (is_max) {
        int64_t order = attr_int(nc, "storage_order", 0);
        if (order != 0 && order != 1)
            return nerr(nc, "storage_order must be 0 or 1, got %lld", (long long)order), -1;
        return nc->bad ? -1 : emit_out(nc, "max_pool2d", &x, 1, as, 5);
    }
    as[5] = (aset){"count_include_pad", a_bool(attr_int(nc, "count_include_pad", 0) != 0)};
    return nc->bad ? -1 : emit_out(nc, "avg_pool2d", &x, 1, as, 6);
}


static int op_maxpool(nctx *nc) { return pool(nc, 1); }
static int op_avgpool(nctx *nc) { return pool(nc, 0); }

static int op_global_avg(nctx *nc)
{
    int x = x_in(nc);
    if (x >= 0 && T(nc, x)->rank == 3)
        return fg_onnx_lift_1d(nc, op_global_avg, 0);
    if (x >= 0 && T(nc, x)->rank != 4)
        return nerr(nc, "only 1-D and 2-D global pooling is supported (input rank 3 or 4, got %d)", T(nc, x)->rank), -1;
    return x < 0 ? -1 : emit_out(nc, "global_avg_pool", &x, 1, NULL, 0);
}

/* GlobalMaxPool: the max over H, W, NaN propagating. */
static int op_global_max(nctx *nc)
{
    int x = x_in(nc);
    if (x >= 0 && T(nc, x)->rank == 3)
        return fg_onnx_lift_1d(nc, op_global_max, 0);
    if (x >= 0 && T(nc, x)->rank != 4)
        return nerr(nc, "only 1-D and 2-D global pooling is supported (input rank 3 or 4, got %d)", T(nc, x)->rank), -1;
    return x < 0 ? -1 : emit_out(nc, "global_max_pool", &x, 1, NULL, 0);
}

/* Output 0 is input 0 viewed with shape (rank r): a constant is re-shaped,
 * a computed tensor keeps its shape (alias) or becomes [N, rest] (flatten);
 * anything else is refused. */
static int reshape_to(nctx *nc, int r, const int64_t *shape)
{
    char b1[128], b2[128];
    value *v = in_value(nc, 0);
    if (!v)
        return nerr(nc, "input 0 is missing"), -1;
    if (v->kind == V_CONST) {
        konst *k = &nc->L->consts[v->idx];
        int64_t n = k->numel, m = 1;
        for (int d = 0; d < r; d++)
            m *= shape[d];
        if (m != n)
            return nerr(nc, "cannot reshape a constant of %lld elements to %s", (long long)n,
                        fg_shape_str(shape, r, b1, sizeof b1)), -1;
        float *f = k->f ? memcpy(fg_xmalloc(sizeof(float) * (size_t)(n + 1)), k->f, sizeof(float) * (size_t)n) : NULL;
        int64_t *iv =
            k->i ? memcpy(fg_xmalloc(sizeof(int64_t) * (size_t)(n + 1)), k->i, sizeof(int64_t) * (size_t)n) : NULL;
        int c = fg_onnx_new_const(nc->L, nc->n->output[0], k->dtype, r, shape, f, iv);
        def_output(nc, 0, V_CONST, c);
        return 0;
    }
    int x = v->idx;
    const fg_tensor *xt = T(nc, x);
    int same = xt->rank == (r ? r : 1);
    for (int d = 0; same && d < r; d++)
        same = xt->shape[d] == shape[d];
    if (r == 0 && same)
        same = xt->shape[0] == 1;
    if (same) {
        alias_output(nc, 0);
        return x;
    }
    if (r == 2 && xt->rank >= 2 && shape[0] == xt->shape[0])
        return emit_out(nc, "flatten", &x, 1, NULL, 0);
    /* any other shape: a reshape (a copy kernel re-indexing when the layout needs it) */
    int64_t n = 1, one = 1;
    for (int d = 0; d < r; d++)
        n *= shape[d];
    if (n != fg_tensor_numel(xt))
        return nerr(nc, "cannot reshape %s to %s (element counts differ)",
                    fg_shape_str(xt->shape, xt->rank, b1, sizeof b1), fg_shape_str(shape, r, b2, sizeof b2)), -1;
    aset a = {"shape", a_intsn(r ? shape : &one, r ? r : 1)};
    return emit_out(nc, "reshape", &x, 1, &a, 1);
}

/* The shape of input 0 (constant or tensor). */
static int in0_shape(nctx *nc, int64_t *shape)
{
    value *v = in_value(nc, 0);
    if (!v) {
        nerr(nc, "input 0 is missing");
        return -1;
    }
    if (v->kind == V_CONST) {
        konst *k = &nc->L->consts[v->idx];
        memcpy(shape, k->shape, sizeof(int64_t) * (size_t)k->rank);
        return k->rank;
    }
    const fg_tensor *t = T(nc, v->idx);
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
    return t->rank;
}

/* An int64 list from constant input i (or attribute name for opsets before
 * attr_until); returns the count, -1 on error, -2 when absent. */
static int ints_in(nctx *nc, int i, const char *name, int attr_until, int64_t *out, int max)
{
    if (nc->L->opset < attr_until) {
        int n = attr_ints(nc, name, 0, max, out);
        return n == 0 ? -2 : n;
    }
    if (!has_in(nc, i))
        return -2;
    konst *k = in_const(nc, i);
    if (!k)
        return nerr(nc, "input '%s' must be a constant (an initializer or a Constant node)", name), -1;
    if (!k->i)
        return nerr(nc, "input '%s' must be int64", name), -1;
    if (k->numel > max)
        return nerr(nc, "input '%s' has %lld values, at most %d are supported", name, (long long)k->numel, max), -1;
    memcpy(out, k->i, sizeof(int64_t) * (size_t)k->numel);
    return (int)k->numel;
}

static int op_reshape(nctx *nc)
{
    int64_t in[FG_MAX_RANK], want[FG_MAX_RANK + 2], numel = 1;
    int r = in0_shape(nc, in);
    if (r < 0)
        return -1;
    int n = ints_in(nc, 1, "shape", 0, want, FG_MAX_RANK);
    if (n == -2)
        return nerr(nc, "needs input 'shape'"), -1;
    if (n < 0)
        return -1;
    int allowzero = (int)attr_int(nc, "allowzero", 0), infer = -1;
    int64_t known = 1;
    for (int d = 0; d < r; d++)
        numel *= in[d];
    for (int d = 0; d < n; d++) {
        if (want[d] == 0 && !allowzero) {
            if (d >= r)
                return nerr(nc, "shape[%d] = 0 copies a dimension the input does not have", d), -1;
            want[d] = in[d];
        }
        if (want[d] == -1) {
            if (infer >= 0)
                return nerr(nc, "shape has more than one -1"), -1;
            infer = d;
            continue;
        }
        if (want[d] < 1)
            return nerr(nc, "shape[%d] = %lld is not supported", d, (long long)want[d]), -1;
        if (want[d] > numel / known)   /* more elements than the input has (and the product cannot overflow) */
            return nerr(nc, "shape[%d] = %lld: the shape holds more than the input's %lld elements", d,
                        (long long)want[d], (long long)numel), -1;
        known *= want[d];
    }
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return nerr(nc, "cannot infer the -1 dimension (%lld elements, %lld in the others)", (long long)numel,
                        (long long)known), -1;
        want[infer] = numel / known;
    }
    return reshape_to(nc, n, want);
}

static int op_flatten(nctx *nc)
{
    int64_t in[FG_MAX_RANK];
    int r = in0_shape(nc, in);
    if (r < 0)
        return -1;
    int64_t axis = attr_int(nc, "axis", 1);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis > r)
        return nerr(nc, "axis %lld out of range for rank %d", (long long)attr_int(nc, "axis", 1), r), -1;
    int64_t shape[2] = {1, 1};
    for (int d = 0; d < r; d++)
        shape[d < axis ? 0 : 1] *= in[d];
    return reshape_to(nc, 2, shape);
}

static int op_squeeze(nctx *nc, int un)
{
    int64_t in[FG_MAX_RANK], axes[FG_MAX_INTS], out[FG_MAX_RANK + FG_MAX_INTS];
    int r = in0_shape(nc, in);
    if (r < 0)
        return -1;
    int n = ints_in(nc, 1, "axes", 13, axes, FG_MAX_INTS);
    if (n == -1)
        return -1;
    if (n == -2 && un)
        return nerr(nc, "needs 'axes'"), -1;
    int orank = un ? r + n : r, mark[FG_MAX_RANK + FG_MAX_INTS] = {0}, no = 0;
    for (int j = 0; j < (n < 0 ? 0 : n); j++) {
        int64_t a = axes[j] < 0 ? axes[j] + orank : axes[j];
        if (a < 0 || a >= orank || mark[a])
            return nerr(nc, "axis %lld out of range or repeated", (long long)axes[j]), -1;
        if (!un && in[a] != 1)
            return nerr(nc, "axis %lld has size %lld, not 1", (long long)axes[j], (long long)in[a]), -1;
        mark[a] = 1;
    }
    if (un) {
        if (orank > FG_MAX_RANK)
            return nerr(nc, "result rank %d is more than %d", orank, FG_MAX_RANK), -1;
        for (int d = 0, src = 0; d < orank; d++)
            out[no++] = mark[d] ? 1 : in[src++];
    } else {
        for (int d = 0; d < r; d++)
            if (!(n < 0 ? in[d] == 1 : mark[d]))
                out[no++] = in[d];
    }
    return reshape_to(nc, no, out);
}

static int op_squeeze0(nctx *nc) { return op_squeeze(nc, 0); }
static int op_unsqueeze(nctx *nc) { return op_squeeze(nc, 1); }

static int op_identity(nctx *nc)
{
    if (!in_value(nc, 0))
        return nerr(nc, "input 0 is missing"), -1;
    alias_output(nc, 0);
    return 0;
}

/* Cast to ONNX type `to` of computed input 0 (constants fold, onnx_fold.c):
 * to the same type, the identity; to double, the input's float type
 * (graphs hold no float64 tensors; an integer or bool input becomes fp32);
 * to an integer type, `cast_int` (toward zero, saturating); to bool,
 * `cast_bool` (nonzero, NaN included, is true); to a float type, `cast`. */
static int cast_to(nctx *nc, int to)
{
    value *v = in_value(nc, 0);
    if (!v)
        return nerr(nc, "input 0 is missing"), -1;
    int x = v->kind == V_TENSOR ? v->idx : in_tensor(nc, 0);
    if (x < 0)
        return -1;
    fg_dtype dt = T(nc, x)->dtype;
    int fdt = to == FG_ONNX_DTYPE_DOUBLE ? (fg_dtype_is_float(dt) ? (int)dt : FG_DTYPE_F32) : fg_onnx_dtype_fg(to);
    if (fdt < 0)
        return nerr(nc, "casts a computed tensor to %s; tensors are float, float16, bfloat16, int64, int32 or bool",
                    fg_onnx_dtype_name(to)), -1;
    if (fdt == (int)dt) {
        alias_output(nc, 0);
        return 0;
    }
    static const char *const names[] = {"to"};
    fg_attr_value av = {.type = FG_ATTR_STRING, .s = fg_intern(nc->L->ctx, fg_dtype_name((fg_dtype)fdt))};
    const char *op = fdt == FG_DTYPE_BOOL ? "cast_bool" : fg_dtype_is_float((fg_dtype)fdt) ? "cast" : "cast_int";
    return fg_onnx_nc_emit_out(nc, op, &x, 1, names, &av, fdt == FG_DTYPE_BOOL ? 0 : 1);
}

static int op_cast(nctx *nc)
{
    int64_t to = attr_int(nc, "to", -1);
    if (nc->bad)
        return -1;
    if (to < 0)
        return nerr(nc, "needs attribute 'to'"), -1;
    return cast_to(nc, (int)to);
}

/* CastLike(input, target_type): to input 1's element type. */
static int op_cast_like(nctx *nc)
{
    value *t = in_value(nc, 1);
    if (!t)
        return nerr(nc, "input 1 is missing"), -1;
    int to = t->kind == V_CONST ? nc->L->consts[t->idx].dtype : fg_onnx_dtype_of(T(nc, t->idx)->dtype);
    return cast_to(nc, to);
}

static int op_dropout(nctx *nc)
{
    if (has_in(nc, 2)) {
        double tm = 0;
        if (scalar_in(nc, 2, "training_mode", &tm) < 0)
            return -1;
        if (tm != 0)
            return nerr(nc, "training_mode=true is not supported (inference only)"), -1;
    }
    return op_identity(nc);
}

/* MatMul with numpy semantics: A [..., M, K] by B [..., K, N], the batch
 * axes broadcast, either side computed or constant; a rank-1 A or B is a
 * vector (shape inference, fg_matmul_geom, checks the rest). */
static int op_matmul(nctx *nc)
{
    char b1[128], b2[128];
    int a = in_tensor(nc, 0), b = in_tensor(nc, 1);
    if (a < 0 || b < 0)
        return nc->bad ? -1 : (nerr(nc, "needs inputs A and B"), -1);
    const fg_tensor *at = T(nc, a), *bt = T(nc, b);
    if (at->rank < 1 || bt->rank < 1)
        return nerr(nc, "A %s and B %s: supported are operands of rank 1 to %d",
                    fg_shape_str(at->shape, at->rank, b1, sizeof b1), fg_shape_str(bt->shape, bt->rank, b2, sizeof b2),
                    FG_MAX_RANK),
               -1;
    if (at->rank == 1 && bt->rank == 1) {
        /* A dot product: the rank-0 result is [1] (as every rank-0 tensor);
         * B becomes the column [K, 1], and A [K] times it is [1]. */
        int64_t col[2] = {bt->shape[0], 1};
        konst *kb = in_const(nc, 1);
        if (kb && kb->f) {
            char hint[300];
            snprintf(hint, sizeof hint, "%s.col", kb->name);
            b = fg_onnx_new_weight(nc->L, NULL, hint, at->dtype, 2, col, kb->f);
        } else {
            aset as = {"shape", a_intsn(col, 2)};
            b = emit(nc, "reshape", &b, 1, &as, 1, 0, ".col");
        }
        if (b < 0)
            return -1;
    }
    int ins[2] = {a, b};
    return emit_out(nc, "matmul", ins, 2, NULL, 0);
}

/* A copy of constant k's values times s, as a weight of the given shape. */
static int scaled_weight(nctx *nc, konst *k, double s, fg_dtype dt, int rank, const int64_t *shape, const char *sfx)
{
    if (!k->f)
        return nerr(nc, "constant '%s' is %s; a float type is expected", k->name, fg_onnx_dtype_name(k->dtype)), -1;
    float *v = fg_xmalloc(sizeof(float) * (size_t)(k->numel + 1));
    for (int64_t i = 0; i < k->numel; i++)
        v[i] = (float)((double)k->f[i] * s);
    char hint[300];
    snprintf(hint, sizeof hint, "%s%s", k->name, sfx);
    int w = fg_onnx_new_weight(nc->L, NULL, hint, dt, rank, shape, v);
    free(v);
    return w;
}

/* Tensor t times the constant s (a one-element weight broadcast by mul):
 * an intermediate named with sfx, or output 0 (scale_out). */
static int scale_mul(nctx *nc, int t, double s, const char *sfx, int out)
{
    float v = (float)s;
    int64_t one = 1;
    char hint[300];
    snprintf(hint, sizeof hint, "%s%s", T(nc, t)->name, sfx ? sfx : ".scale");
    int w = fg_onnx_new_weight(nc->L, NULL, hint, T(nc, t)->dtype, 1, &one, &v);
    if (w < 0)
        return -1;
    int ins[2] = {t, w};
    return out ? emit_out(nc, "mul", ins, 2, NULL, 0) : emit(nc, "mul", ins, 2, NULL, 0, 0, sfx);
}

static int scale_by(nctx *nc, int t, double s, const char *sfx) { return scale_mul(nc, t, s, sfx, 0); }
static int scale_out(nctx *nc, int t, double s) { return scale_mul(nc, t, s, NULL, 1); }

/* Gemm: alpha * A' B' + beta * C.  A constant B or C takes alpha or beta
 * into its values; a computed one gets a mul (alpha after the product, beta
 * on C).  C of (N), (1, N), (M, 1), (M, N) is the gemm's bias; a computed C
 * of one element ([1]; a rank-0 tensor is [1]) is added after the product,
 * broadcast, as is any C when alpha is applied after the product. */
static int op_gemm(nctx *nc)
{
    char b1[128];
    int c_after = -1;
    int a = in_tensor(nc, 0);
    if (a < 0 || !has_in(nc, 1))
        return nc->bad ? -1 : (nerr(nc, "needs inputs A and B"), -1);
    double alpha = attr_float(nc, "alpha", 1.0), beta = attr_float(nc, "beta", 1.0);
    int ta = (int)attr_int(nc, "transA", 0), tb = (int)attr_int(nc, "transB", 0);
    if (nc->bad)
        return -1;
    const fg_tensor *at = T(nc, a);
    if (at->rank != 2)
        return nerr(nc, "A must be rank 2, got %d", at->rank), -1;
    konst *kb = in_const(nc, 1);
    int b, scale_after = 0;   /* alpha multiplies the product (B computed) */
    if (alpha != 1.0 && kb && kb->f) {
        b = scaled_weight(nc, kb, alpha, at->dtype, kb->rank, kb->shape, ".alpha");
    } else {
        b = in_tensor(nc, 1);
        scale_after = alpha != 1.0;
    }
    if (b < 0)
        return -1;
    const fg_tensor *bt = T(nc, b);
    if (bt->rank != 2)
        return nerr(nc, "B must be rank 2, got %d", bt->rank), -1;
    int64_t M = ta ? at->shape[1] : at->shape[0], N = tb ? bt->shape[0] : bt->shape[1];
    int c = -1;
    if (has_in(nc, 2) && beta != 0.0) {
        konst *kc = in_const(nc, 2);
        if (kc && kc->f && (kc->numel == 1 || beta != 1.0 || kc->rank == 0)) {
            /* a scalar C is spread over [N]; beta is folded into C */
            if (kc->numel == 1) {
                float *v = fg_xmalloc(sizeof(float) * (size_t)N);
                for (int64_t i = 0; i < N; i++)
                    v[i] = (float)((double)kc->f[0] * beta);
                char hint[300];
                snprintf(hint, sizeof hint, "%s.n", kc->name);
                c = fg_onnx_new_weight(nc->L, NULL, hint, at->dtype, 1, &N, v);
                free(v);
            } else {
                c = scaled_weight(nc, kc, beta, at->dtype, kc->rank, kc->shape, ".beta");
            }
        } else {
            c = in_tensor(nc, 2);
            if (c >= 0 && beta != 1.0)   /* a computed C: beta * C by an inserted mul */
                c = scale_by(nc, c, beta, ".beta");
            if (c < 0)
                return -1;
        }
        const fg_tensor *ct = T(nc, c);
        int ok = (ct->rank == 1 && ct->shape[0] == N) ||
                 (ct->rank == 2 && (ct->shape[0] == M || ct->shape[0] == 1) && (ct->shape[1] == N || ct->shape[1] == 1));
        /* a C of one element ([1]; rank 0 is [1]) is added after the product, broadcast */
        int bc = ct->rank == 1 && ct->shape[0] == 1;
        if (!ok && !bc)
            return nerr(nc, "C %s does not broadcast onto [%lld, %lld]",
                        fg_shape_str(ct->shape, ct->rank, b1, sizeof b1), (long long)M, (long long)N), -1;
        if (!ok || scale_after) {   /* alpha * (A B) + C: C cannot be inside the product */
            c_after = c;
            c = -1;
        }
    }
    aset as[2] = {{"trans_a", a_bool(ta)}, {"trans_b", a_bool(tb)}};
    int ins[3] = {a, b, c};
    if (!scale_after && c_after < 0)
        return emit_out(nc, "gemm", ins, 3, as, 2);
    int t = emit(nc, "gemm", ins, 3, as, 2, 0, ".ab");
    if (t >= 0 && scale_after)
        t = c_after < 0 ? scale_out(nc, t, alpha) : scale_by(nc, t, alpha, ".alpha");
    if (t < 0 || c_after < 0)
        return t;
    int sum[2] = {t, c_after};
    return emit_out(nc, "add", sum, 2, NULL, 0);
}

/* Constant: the value becomes a constant of the graph. */
static int op_constant(nctx *nc)
{
    loader *L = nc->L;
    if (nc->n->n_attribute != 1)
        return nerr(nc, "needs exactly one value attribute"), -1;
    const Onnx__AttributeProto *a = nc->n->attribute[0];
    const char *nm = a->name ? a->name : "";
    const char *out = nc->n->n_output ? nc->n->output[0] : "";
    char what[320];
    snprintf(what, sizeof what, "%s", nc->label);
    int c = -1;
    int64_t shape1 = 0;
    if (strcmp(nm, "value") == 0 && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR && a->t) {
        c = fg_onnx_decode_tensor(L, a->t, out, what);
        if (c < 0)
            nc->bad = 1;
    } else if (strcmp(nm, "value_float") == 0 && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        float *f = fg_xmalloc(sizeof(float));
        f[0] = a->f;
        c = fg_onnx_new_const(L, out, FG_ONNX_DTYPE_FLOAT, 0, NULL, f, NULL);
    } else if (strcmp(nm, "value_int") == 0 && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
        int64_t *iv = fg_xmalloc(sizeof(int64_t));
        iv[0] = a->i;
        c = fg_onnx_new_const(L, out, FG_ONNX_DTYPE_INT64, 0, NULL, NULL, iv);
    } else if (strcmp(nm, "value_floats") == 0 && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
        shape1 = (int64_t)a->n_floats;
        float *f = fg_xmalloc(sizeof(float) * (a->n_floats + 1));
        memcpy(f, a->floats, sizeof(float) * a->n_floats);
        c = fg_onnx_new_const(L, out, FG_ONNX_DTYPE_FLOAT, 1, &shape1, f, NULL);
    } else if (strcmp(nm, "value_ints") == 0 && attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
        shape1 = (int64_t)a->n_ints;
        int64_t *iv = fg_xmalloc(sizeof(int64_t) * (a->n_ints + 1));
        memcpy(iv, a->ints, sizeof(int64_t) * a->n_ints);
        c = fg_onnx_new_const(L, out, FG_ONNX_DTYPE_INT64, 1, &shape1, NULL, iv);
    } else {
        char b1[64];
        return nerr(nc, "attribute '%s' is not supported (value, value_float(s), value_int(s))",
                    fg_onnx_esc(nm, b1, sizeof b1)), -1;
    }
    if (c < 0)
        return -1;
    def_output(nc, 0, V_CONST, c);
    return 0;
}

/* ---- Transpose, Softmax, Concat, Sum, LRN ------------------------------------------ */

/* Transpose: `perm` (default: the axes reversed).  A constant is transposed
 * at load time; a computed tensor gets a transpose node (a copy kernel). */
static int op_transpose(nctx *nc)
{
    char b1[128];
    int64_t in[FG_MAX_RANK], perm[FG_MAX_INTS], shape[FG_MAX_RANK];
    int r = in0_shape(nc, in);
    if (r < 0)
        return -1;
    int np = attr_ints(nc, "perm", 0, FG_MAX_INTS, perm);
    if (np < 0)
        return -1;
    if (np == 0) {
        np = r;
        for (int d = 0; d < r; d++)
            perm[d] = r - 1 - d;
    }
    int seen[FG_MAX_RANK] = {0};
    if (np != r)
        return nerr(nc, "perm has %d entries for an input of rank %d", np, r), -1;
    for (int d = 0; d < r; d++) {
        if (perm[d] < 0 || perm[d] >= r || seen[perm[d]])
            return nerr(nc, "perm is not a permutation of the axes of %s", fg_shape_str(in, r, b1, sizeof b1)), -1;
        seen[perm[d]] = 1;
        shape[d] = in[perm[d]];
    }
    int ident = 1;
    for (int d = 0; d < r; d++)
        ident &= perm[d] == d;
    value *v = in_value(nc, 0);
    if (ident) {
        alias_output(nc, 0);
        return 0;
    }
    if (v->kind == V_CONST) {
        konst *k = &nc->L->consts[v->idx];
        int64_t xs[FG_MAX_RANK], s = 1, n = k->numel;
        for (int d = r - 1; d >= 0; d--) {
            xs[d] = s;
            s *= in[d];
        }
        float *f = k->f ? fg_xmalloc(sizeof(float) * (size_t)(n + 1)) : NULL;
        int64_t *iv = k->i ? fg_xmalloc(sizeof(int64_t) * (size_t)(n + 1)) : NULL;
        for (int64_t i = 0; i < n; i++) {
            int64_t rest = i, off = 0;
            for (int d = r - 1; d >= 0; d--) {
                off += (rest % shape[d]) * xs[perm[d]];
                rest /= shape[d];
            }
            if (f)
                f[i] = k->f[off];
            if (iv)
                iv[i] = k->i[off];
        }
        int c = fg_onnx_new_const(nc->L, nc->n->output[0], k->dtype, r, shape, f, iv);
        def_output(nc, 0, V_CONST, c);
        return 0;
    }
    int x = v->idx;
    aset a = {"perm", a_intsn(perm, r)};
    return emit_out(nc, "transpose", &x, 1, &a, 1);
}

/* Softmax and LogSoftmax (what: the ONNX name) as op opname: opset 13
 * normalizes along `axis` (default -1); earlier opsets coerce the input to
 * 2-D at `axis` (default 1) and normalize each row of the trailing axes
 * together. */
static int softmax_like(nctx *nc, const char *opname, const char *what)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    if (in_const(nc, 0))
        return nerr(nc, "a %s of a constant is not supported (fold constants first)", what), -1;
    const fg_tensor *xt = T(nc, x);
    int legacy = nc->L->opset < 13;
    int64_t a;
    if (axis_attr(nc, xt->rank, legacy ? 1 : -1, &a) < 0)
        return -1;
    aset as[2] = {{"axis", a_int(a)}, {"naxes", a_int(legacy ? 0 : 1)}};
    return emit_out(nc, opname, &x, 1, as, 2);
}

static int op_softmax(nctx *nc) { return softmax_like(nc, "softmax", "Softmax"); }
static int op_log_softmax(nctx *nc) { return softmax_like(nc, "log_softmax", "LogSoftmax"); }

/* The start of the variadic operators (Concat, Sum): *n gets the count of
 * inputs.  Returns -1 on an error (reported), 0 when the node is done (one
 * input: output 0 is that input), 1 to go on. */
static int variadic_start(nctx *nc, int *n)
{
    *n = nin(nc);
    if (*n < 1)
        return nerr(nc, "needs at least one input"), -1;
    int all_const = 1;
    for (int i = 0; i < *n; i++)
        all_const &= in_const(nc, i) != NULL;
    if (all_const)
        return nerr(nc, "every input is a constant; fold constant subgraphs before importing"), -1;
    if (*n == 1) {
        alias_output(nc, 0);
        return 0;
    }
    return 1;
}

/* Concat along `axis`: one concat node of up to FG_MAX_INPUTS inputs, a
 * chain of them for more (each joins the previous result and the next
 * inputs). */
static int op_concat(nctx *nc)
{
    int n, ins[FG_MAX_INPUTS], r = variadic_start(nc, &n);
    if (r <= 0)
        return r;
    int x0 = in_tensor(nc, 0);
    if (x0 < 0)
        return -1;
    int rank = T(nc, x0)->rank;
    int64_t a;
    if (axis_attr(nc, rank, 0, &a) < 0)
        return -1;
    aset as = {"axis", a_int(a)};
    int acc = x0, next = 1, part = 0;
    while (next < n) {
        int k = 0;
        ins[k++] = acc;
        while (k < FG_MAX_INPUTS && next < n) {
            int t = in_tensor(nc, next++);
            if (t < 0)
                return -1;
            ins[k++] = t;
        }
        char suffix[32];
        snprintf(suffix, sizeof suffix, "_part%d", part++);
        acc = next < n ? emit(nc, "concat", ins, k, &as, 1, 0, suffix) : emit_out(nc, "concat", ins, k, &as, 1);
        if (acc < 0)
            return -1;
    }
    return acc;
}

/* The n inputs of a variadic node added in a chain (numpy broadcasting),
 * a computed input first so that fusion rules see it as the chain; the
 * last add is the node's output when out, else an intermediate.  The sum,
 * or -1 (reported). */
static int add_chain(nctx *nc, int n, int out)
{
    int first = 0;
    while (in_const(nc, first))
        first++;
    int acc = in_tensor(nc, first);
    for (int i = 0, done = 1; i < n && acc >= 0; i++) {
        if (i == first)
            continue;
        int ins[2] = {acc, in_tensor(nc, i)};
        if (ins[1] < 0)
            return -1;
        char suffix[32];
        snprintf(suffix, sizeof suffix, "_add%d", done);
        acc = ++done < n || !out ? emit(nc, "add", ins, 2, NULL, 0, 0, suffix) : emit_out(nc, "add", ins, 2, NULL, 0);
    }
    return acc;
}

/* Sum: a chain of adds, which the pointwise rules fuse. */
static int op_sum(nctx *nc)
{
    int n, r = variadic_start(nc, &n);
    return r <= 0 ? r : add_chain(nc, n, 1);
}

/* Mean: the Sum's chain of adds (an intermediate) times 1 / n, which the
 * pointwise rules fuse into one kernel. */
static int op_mean(nctx *nc)
{
    int n, r = variadic_start(nc, &n);
    if (r <= 0)
        return r;
    int acc = add_chain(nc, n, 0);
    return acc < 0 ? -1 : scale_out(nc, acc, 1.0 / n);
}

/* LRN: size (required), alpha, beta, bias over [N, C, ...]. */
static int op_lrn(nctx *nc)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    if (!attr_get(nc, "size"))
        return nerr(nc, "needs attribute 'size'"), -1;
    int64_t size = attr_int(nc, "size", 1);
    if (size < 1)
        return nerr(nc, "size must be positive, got %lld", (long long)size), -1;
    if (T(nc, x)->rank < 3)
        return nerr(nc, "input must be [N, C, D1, ...] (rank 3 or more), got rank %d", T(nc, x)->rank), -1;
    aset as[4] = {{"size", a_int(size)},
                  {"alpha", a_float(attr_float(nc, "alpha", 1e-4))},
                  {"beta", a_float(attr_float(nc, "beta", 0.75))},
                  {"bias", a_float(attr_float(nc, "bias", 1.0))}};
    return emit_out(nc, "lrn", &x, 1, as, 4);
}

/* ---- Reduce* ------------------------------------------------------------------ */

/* A Reduce* operator as the reduce op opname: `axes` from the attribute
 * before opset axes_input (13 for ReduceSum, 18 for the others), else from
 * the optional constant input 1; none (or an empty list) reduces every axis,
 * or with noop_with_empty_axes is the identity.  Axes are normalized
 * (non-negative, ascending, each once), so that rewrite rules compare them;
 * keepdims (default 1). */
static int reduce_op(nctx *nc, const char *opname, int axes_input)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *xt = T(nc, x);
    int64_t axes[FG_MAX_INTS], norm[FG_MAX_RANK];
    int n = ints_in(nc, 1, "axes", axes_input, axes, FG_MAX_INTS);
    if (n == -1)
        return -1;
    if (n < 0)
        n = 0;
    if (nc->L->opset < axes_input && has_in(nc, 1))
        return nerr(nc, "has 2 inputs; axes is an attribute before opset %d", axes_input), -1;
    if (n == 0 && attr_int(nc, "noop_with_empty_axes", 0)) {
        alias_output(nc, 0);
        return 0;
    }
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + xt->rank : axes[i];
        if (a < 0 || a >= xt->rank)
            return nerr(nc, "axis %lld is out of range for rank %d", (long long)axes[i], xt->rank), -1;
        if (mask & (1u << a))
            return nerr(nc, "axis %lld is given twice", (long long)axes[i]), -1;
        mask |= 1u << a;
    }
    int nn = 0;
    for (int a = 0; a < xt->rank; a++)
        if (n == 0 || (mask & (1u << a)))
            norm[nn++] = a;
    aset as[2] = {{"axes", a_intsn(norm, nn)}, {"keepdims", a_bool(attr_int(nc, "keepdims", 1) != 0)}};
    return emit_out(nc, opname, &x, 1, as, 2);
}

static int op_reduce_sum(nctx *nc) { return reduce_op(nc, "reduce_sum", 13); }
static int op_reduce_mean(nctx *nc) { return reduce_op(nc, "reduce_mean", 18); }
static int op_reduce_max(nctx *nc) { return reduce_op(nc, "reduce_max", 18); }
static int op_reduce_min(nctx *nc) { return reduce_op(nc, "reduce_min", 18); }
static int op_reduce_prod(nctx *nc) { return reduce_op(nc, "reduce_prod", 18); }
static int op_reduce_sum_square(nctx *nc) { return reduce_op(nc, "reduce_sum_square", 18); }
static int op_reduce_l1(nctx *nc) { return reduce_op(nc, "reduce_l1", 18); }
static int op_reduce_l2(nctx *nc) { return reduce_op(nc, "reduce_l2", 18); }
static int op_reduce_log_sum(nctx *nc) { return reduce_op(nc, "reduce_log_sum", 18); }
static int op_reduce_log_sum_exp(nctx *nc) { return reduce_op(nc, "reduce_log_sum_exp", 18); }

/* ArgMax / ArgMin (int64 result): `axis` (default 0, negative from the end),
 * keepdims (default 1), select_last_index (the _last ops). */
static int arg_op(nctx *nc, const char *opname)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    int64_t a;
    if (axis_attr(nc, T(nc, x)->rank, 0, &a) < 0)
        return -1;
    char name[32];
    snprintf(name, sizeof name, "%s%s", opname, attr_int(nc, "select_last_index", 0) ? "_last" : "");
    aset as[2] = {{"axes", a_intsn(&a, 1)}, {"keepdims", a_bool(attr_int(nc, "keepdims", 1) != 0)}};
    return emit_out(nc, name, &x, 1, as, 2);
}

static int op_argmax(nctx *nc) { return arg_op(nc, "argmax"); }
static int op_argmin(nctx *nc) { return arg_op(nc, "argmin"); }

/* ---- LayerNormalization, RMSNormalization -------------------------------------- */

/* LayerNormalization (opset 17; rms: RMSNormalization, opset 23) as one
 * layer_norm over the axes from `axis` (default -1) on: scale, bias (Layer
 * only, optional); statistics in fp32 (stash_type 1, the default; other
 * stash types are refused); the training outputs Mean and InvStdDev only
 * while unused. */
static int norm_like(nctx *nc, int rms)
{
    int x = x_in(nc);
    if (x < 0)
        return -1;
    if (in_const(nc, 0))
        return nerr(nc, "a %s of a constant is not supported (fold constants first)", nc->n->op_type), -1;
    if (!rms && (out_used(nc, 1) || out_used(nc, 2)))
        return nerr(nc, "its Mean and InvStdDev outputs (statistics for training) are not computed: only output Y "
                        "may be used"), -1;
    int64_t stash = attr_int(nc, "stash_type", 1);
    if (stash != 1)
        return nerr(nc, "stash_type %lld is not supported: statistics are computed in float (stash_type 1)",
                    (long long)stash), -1;
    int64_t a, r = T(nc, x)->rank;
    if (axis_attr(nc, (int)r, -1, &a) < 0)
        return -1;
    int ins[3] = {x, in_tensor(nc, 1), !rms && has_in(nc, 2) ? in_tensor(nc, 2) : -1};
    if (ins[1] < 0 || (!rms && has_in(nc, 2) && ins[2] < 0))
        return nc->bad ? -1 : (nerr(nc, "scale is missing"), -1);
    aset as[3] = {{"axis", a_int(a)}, {"eps", a_float(attr_float(nc, "epsilon", 1e-5))}, {"rms", a_bool(rms)}};
    return emit_out(nc, "layer_norm", ins, 3, as, 3);
}

static int op_layer_norm(nctx *nc) { return norm_like(nc, 0); }
static int op_rms_norm(nctx *nc) { return norm_like(nc, 1); }
/* ---- services for the converters of other files (onnx_impl.h) ----------- */

fg_status fg_onnx_nerr(nctx *nc, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    fg_status st = nerr(nc, "%s", b.s);
    fg_buf_free(&b);
    return st;
}
const Onnx__NodeProto *fg_onnx_nc_node(const nctx *nc) { return nc->n; }
int fg_onnx_nc_opset(const nctx *nc) { return nc->L->opset; }
int fg_onnx_nc_has_in(const nctx *nc, int i) { return has_in(nc, i); }
const konst *fg_onnx_nc_const(const nctx *nc, int i) { return in_const(nc, i); }
int fg_onnx_nc_tensor(nctx *nc, int i) { return in_tensor(nc, i); }
const fg_tensor *fg_onnx_nc_T(const nctx *nc, int t) { return T(nc, t); }
int fg_onnx_nc_out_used(const nctx *nc, int i) { return out_used(nc, i); }
int64_t fg_onnx_nc_attr_int(nctx *nc, const char *name, int64_t def) { return attr_int(nc, name, def); }
int fg_onnx_nc_axis(nctx *nc, int rank, int64_t def, int64_t *axis) { return axis_attr(nc, rank, def, axis); }
double fg_onnx_nc_attr_float(nctx *nc, const char *name, double def) { return attr_float(nc, name, def); }
const char *fg_onnx_nc_attr_str(nctx *nc, const char *name, const char *def, char *buf, size_t size)
{
    return attr_str(nc, name, def, buf, size);
}
int fg_onnx_nc_attr_ints(nctx *nc, const char *name, int want, int max, int64_t *out)
{
    return attr_ints(nc, name, want, max, out);
}
int fg_onnx_nc_ints_in(nctx *nc, int i, const char *name, int attr_until, int64_t *out, int max)
{
    return ints_in(nc, i, name, attr_until, out, max);
}
int fg_onnx_nc_emit(nctx *nc, const char *opname, const int *ins, int nins, const char *const *names,
                    const fg_attr_value *vals, int nas, int out_slot, const char *suffix)
{
    aset as[FG_MAX_ATTRS];
    for (int j = 0; j < nas && j < FG_MAX_ATTRS; j++)
        as[j] = (aset){names[j], vals[j]};
    return emit(nc, opname, ins, nins, as, nas < FG_MAX_ATTRS ? nas : FG_MAX_ATTRS, out_slot, suffix);
}
void fg_onnx_nc_def_output(nctx *nc, int i, int t) { def_output(nc, i, V_TENSOR, t); }
void fg_onnx_nc_alias(nctx *nc, int i) { alias_output(nc, i); }
int fg_onnx_nc_reshape_to(nctx *nc, int r, const int64_t *shape) { return reshape_to(nc, r, shape); }
void fg_onnx_nc_set_node(nctx *nc, const Onnx__NodeProto *n) { nc->n = n; }

/* ---- services of onnx_convert_resize.c ------------------------------------ */

fg_status fg_onnx_nc_err(nctx *nc, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    nerr(nc, "%s", b.s);
    fg_buf_free(&b);
    return FG_ERR_INPUT;
}
int fg_onnx_nc_failed(const nctx *nc) { return nc->bad; }
loader *fg_onnx_nc_loader(const nctx *nc) { return nc->L; }
int fg_onnx_nc_x(nctx *nc) { return x_in(nc); }
int fg_onnx_nc_in_tensor(nctx *nc, int i) { return in_tensor(nc, i); }
fg_onnx_const *fg_onnx_nc_in_const(const nctx *nc, int i) { return in_const(nc, i); }
const Onnx__AttributeProto *fg_onnx_nc_attr(const nctx *nc, const char *name) { return attr_get(nc, name); }
int fg_onnx_nc_emit_out(nctx *nc, const char *opname, const int *ins, int nins, const char *const *names,
                        const fg_attr_value *vals, int nas)
{
    aset as[FG_MAX_ATTRS];
    for (int i = 0; i < nas && i < FG_MAX_ATTRS; i++)
        as[i] = (aset){names[i], vals[i]};
    return emit_out(nc, opname, ins, nins, as, nas < FG_MAX_ATTRS ? nas : FG_MAX_ATTRS);
}

/* ---- the operator table -------------------------------------------------------- */

struct fg_onnx_op {
    const char *type;
    int (*fn)(nctx *nc);
    const char *attrs;          /* attributes handled, space separated */
    int min_in, max_in;
    int nout;                   /* outputs defined; others must be unused */
};

static const fg_onnx_op onnx_ops[] = {
    {"Add", op_add, "", 2, 2, 1},
    {"AveragePool", op_avgpool, "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides", 1, 1, 1},
    {"BatchNormalization", op_batch_norm, "epsilon momentum training_mode", 5, 5, 1},
    {"Cast", op_cast, "round_mode saturate to", 1, 1, 1},
    {"CastLike", op_cast_like, "round_mode saturate", 2, 2, 1},
    {"Clip", op_clip, "", 1, 3, 1},
    {"Constant", op_constant, "value value_float value_floats value_int value_ints", 0, 0, 1},
    {"Concat", op_concat, "axis", 1, 1 << 20, 1},
    {"Conv", op_conv, "auto_pad dilations group kernel_shape pads strides", 2, 3, 1},
    {"Div", op_div, "", 2, 2, 1},
    {"Dropout", op_dropout, "seed ratio", 1, 3, 1},
    {"Equal", op_equal, "", 2, 2, 1},
    {"Flatten", op_flatten, "axis", 1, 1, 1},
    {"Gelu", op_gelu, "approximate", 1, 1, 1},
    {"Greater", op_greater, "", 2, 2, 1},
    {"GreaterOrEqual", op_greater_equal, "", 2, 2, 1},
    {"Gemm", op_gemm, "alpha beta transA transB", 2, 3, 1},
    {"GlobalAveragePool", op_global_avg, "", 1, 1, 1},
    {"GlobalMaxPool", op_global_max, "", 1, 1, 1},
    {"HardSigmoid", op_hardsigmoid, "alpha beta", 1, 1, 1},
    {"Identity", op_identity, "", 1, 1, 1},
    {"LRN", op_lrn, "alpha beta bias size", 1, 1, 1},
    {"LogSoftmax", op_log_softmax, "axis", 1, 1, 1},
    {"Less", op_less, "", 2, 2, 1},
    {"LessOrEqual", op_less_equal, "", 2, 2, 1},
    {"MatMul", op_matmul, "", 2, 2, 1},
    {"Max", op_max, "", 1, 1 << 20, 1},
    {"MaxPool", op_maxpool, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides", 1, 1, 1},
    {"Min", op_min, "", 1, 1 << 20, 1},
    {"Mul", op_mul, "", 2, 2, 1},
    {"PRelu", op_prelu, "", 2, 2, 1},
    {"Pow", op_pow, "", 2, 2, 1},
    {"ReduceL1", op_reduce_l1, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceL2", op_reduce_l2, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceLogSum", op_reduce_log_sum, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceLogSumExp", op_reduce_log_sum_exp, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceMax", op_reduce_max, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceMean", op_reduce_mean, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceMin", op_reduce_min, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceProd", op_reduce_prod, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceSum", op_reduce_sum, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"ReduceSumSquare", op_reduce_sum_square, "axes keepdims noop_with_empty_axes", 1, 2, 1},
    {"Reshape", op_reshape, "allowzero", 2, 2, 1},
    {"Softmax", op_softmax, "axis", 1, 1, 1},
    {"Squeeze", op_squeeze0, "axes", 1, 2, 1},
    {"Sub", op_sub, "", 2, 2, 1},
    {"Sum", op_sum, "", 1, 1 << 20, 1},
    {"Transpose", op_transpose, "perm", 1, 1, 1},
    {"Unsqueeze", op_unsqueeze, "axes", 1, 2, 1},
    {"Where", op_where, "", 3, 3, 1},
    {"LayerNormalization", op_layer_norm, "axis epsilon stash_type", 2, 3, 1},
    {"RMSNormalization", op_rms_norm, "axis epsilon stash_type", 2, 2, 1},
    {"Resize", fg_onnx_op_resize, "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside "
     "extrapolation_value keep_aspect_ratio_policy mode nearest_mode", 1, 4, 1},
    {"Upsample", fg_onnx_op_upsample, "mode scales", 1, 2, 1},
    {"ConvTranspose", fg_onnx_op_conv_transpose, "auto_pad dilations group kernel_shape output_padding output_shape "
     "pads strides", 2, 3, 1},
    {"Slice", fg_onnx_op_slice, "starts ends axes", 1, 5, 1},
    {"Split", fg_onnx_op_split, "axis split num_outputs", 1, 2, 1},
    {"Gather", fg_onnx_op_gather, "axis", 2, 2, 1},
    {"ArgMax", op_argmax, "axis keepdims select_last_index", 1, 1, 1},
    {"ArgMin", op_argmin, "axis keepdims select_last_index", 1, 1, 1},
    {"GatherND", fg_onnx_op_gather_nd, "batch_dims", 2, 2, 1},
    {"Expand", fg_onnx_op_expand, "", 2, 2, 1},
    {"Tile", fg_onnx_op_tile, "", 2, 2, 1},
    {"Pad", fg_onnx_op_pad, "mode pads value", 1, 4, 1},
    {"Mean", op_mean, "", 1, 1 << 20, 1},
};

/* The row of every operator imported as data (op_data reads the op). */
static const fg_onnx_op data_row = {"", op_data, "", 0, FG_MAX_INPUTS, 1};

const fg_onnx_op *fg_onnx_find_op(const loader *L, const Onnx__NodeProto *n)
{
    if ((n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) || !n->op_type)
        return NULL;
    for (size_t i = 0; i < FG_COUNTOF(onnx_ops); i++)
        if (strcmp(onnx_ops[i].type, n->op_type) == 0)
            return &onnx_ops[i];
    return fg_ctx_find_onnx_op(L->ctx, n->op_type) ? &data_row : NULL;
}


static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    if (n == 0)   /* an empty name is no word (and strstr finds "" everywhere: the loop would not advance) */
        return 0;
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return 1;
    return 0;
}

/* Whether attribute name is handled by op (for an operator imported as
 * data, def: one of its op's attributes). */
static int handles_attr(const fg_onnx_op *op, const fg_opdef *def, const char *name)
{
    if (!def)
        return word_in(op->attrs, name);
    for (int a = 0; a < def->nattrs; a++)
        if (strcmp(def->attrs[a].name, name) == 0)
            return 1;
    return 0;
}

/* Converts node i.  Outputs of a node that failed, or that reads the
 * output of one, stand for the unknown placeholder. */
void fg_onnx_convert_node(loader *L, int i, const Onnx__NodeProto *n, const fg_onnx_op *op)
{
    char b1[160];
    nctx nc = {.L = L, .idx = i, .n = n, .def = op == &data_row ? fg_ctx_find_onnx_op(L->ctx, n->op_type) : NULL};
    snprintf(nc.label, sizeof nc.label, "node %d '%s' (%s)", i, fg_onnx_esc(n->name, b1, sizeof b1), n->op_type);
    int quiet = 0, min_in = op->min_in, max_in = op->max_in;
    if (nc.def) {
        max_in = nc.def->ninputs;
        for (min_in = 0; min_in < max_in && !nc.def->inputs[min_in].optional; min_in++)
            ;
    }
    for (size_t j = 0; j < n->n_input; j++) {
        if (!n->input[j] || !n->input[j][0])
            continue;
        value *v = fg_onnx_vfind(L->values, n->input[j]);
        if (!v) {
            nerr(&nc, "input '%s' is not a graph input, an initializer or the output of an earlier node",
                 fg_onnx_esc(n->input[j], b1, sizeof b1));
            continue;
        }
        if (v->kind == V_TENSOR && L->g->tensors[v->idx].rank < 0)
            quiet = 1;   /* downstream of an error already reported */
    }
    int ni = nin(&nc);
    if (!nc.bad && (ni < min_in || ni > max_in))
        nerr(&nc, "has %d inputs; %s takes %d to %d", ni, n->op_type, min_in, max_in);
    for (size_t j = 0; j < n->n_attribute; j++) {
        const char *an = n->attribute[j]->name ? n->attribute[j]->name : "";
        if (!handles_attr(op, nc.def, an)) {
            char b2[80];
            nerr(&nc, "attribute '%s' is not supported", fg_onnx_esc(an, b2, sizeof b2));
        }
        if (n->attribute[j]->ref_attr_name && n->attribute[j]->ref_attr_name[0])
            nerr(&nc, "attribute references (ref_attr_name) are only valid in functions");
    }
    if (!nc.bad && !quiet)
        op->fn(&nc);
    for (int j = nc.nout_defined; !nc.bad && !quiet && j < (int)n->n_output; j++)
        if (out_used(&nc, j))
            nerr(&nc, "output %d ('%s') is used, but only the first output of %s is supported", j,
                 fg_onnx_esc(n->output[j], b1, sizeof b1), n->op_type);
    if (nc.bad || quiet)
        for (size_t j = 0; j < n->n_output; j++)
            if (n->output[j] && n->output[j][0])
                fg_onnx_vset(&L->values, n->output[j], V_TENSOR, fg_onnx_unknown_tensor(L));
}

/* Folds node i, which fg_onnx_fold_mark marked: its inputs are constants
 * (Shape and Size: any tensor, whose shape is static), its output becomes
 * a constant.  A node that cannot be evaluated is an error naming it. */
void fg_onnx_fold_node(loader *L, int i, const Onnx__NodeProto *n)
{
    char b1[160], why[300];
    nctx nc = {.L = L, .idx = i, .n = n};
    snprintf(nc.label, sizeof nc.label, "node %d '%s' (%s)", i, fg_onnx_esc(n->name, b1, sizeof b1), n->op_type);
    fg_onnx_fold_in *ins = fg_xcalloc(n->n_input + 1, sizeof *ins);
    int quiet = 0;
    for (size_t j = 0; j < n->n_input; j++) {
        ins[j].rank = -1;
        if (!n->input[j] || !n->input[j][0])
            continue;
        value *v = fg_onnx_vfind(L->values, n->input[j]);
        if (!v) {
            nerr(&nc, "input '%s' is not a graph input, an initializer or the output of an earlier node",
                 fg_onnx_esc(n->input[j], b1, sizeof b1));
        } else if (v->kind == V_CONST) {
            ins[j].k = &L->consts[v->idx];
        } else {
            ins[j].rank = L->g->tensors[v->idx].rank;
            ins[j].shape = L->g->tensors[v->idx].shape;
            ins[j].dtype = fg_onnx_dtype_of(L->g->tensors[v->idx].dtype);
            quiet |= ins[j].rank < 0;   /* downstream of an error already reported */
        }
    }
    konst k;
    if (!nc.bad && !quiet) {
        if (fg_onnx_fold_eval(n, L->opset, ins, (int)n->n_input, L->fold_left, &k, why, sizeof why)) {
            uint64_t kb = fg_onnx_const_bytes(&k);
            L->fold_left = kb < L->fold_left ? L->fold_left - kb : 0;
            k.name = n->n_output ? n->output[0] : "";
            *FG_PUSH(L->consts, L->nconsts, L->consts_cap) = k;
            def_output(&nc, 0, V_CONST, L->nconsts - 1);
        } else {
            nerr(&nc, "cannot be folded (its inputs are constants): %s", why);
        }
    }
    free(ins);
    for (int j = 1; !nc.bad && !quiet && j < (int)n->n_output; j++)
        if (out_used(&nc, j))
            nerr(&nc, "output %d ('%s') is used, but only the first output of a folded %s is computed", j,
                 fg_onnx_esc(n->output[j], b1, sizeof b1), n->op_type);
    if (nc.bad || quiet || !n->n_output)
        for (size_t j = 0; j < n->n_output; j++)
            if (n->output[j] && n->output[j][0])
                fg_onnx_vset(&L->values, n->output[j], V_TENSOR, fg_onnx_unknown_tensor(L));
}
