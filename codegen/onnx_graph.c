/*
 * onnx_graph.c -- graph assembly of the ONNX importer (onnx_impl.h, contract
 * in onnx_load.h, format notes in docs/onnx.md): the loader's state (values,
 * constants, sanitized unique names, new tensors), graph inputs with their
 * symbolic dimensions, graph outputs, the opset check, the model walk that
 * folds or converts each node, and the public entry points.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx_impl.h"
#include "oom.h"
#include "safe_open.h"
#include "kind.h"
#include "shape.h"

/* ---- the loader's state --------------------------------------------------- */

fg_status fg_onnx_lerr(loader *L, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    fg_diag_error(L->ctx, FG_ERR_INPUT, L->loc, "%s", b.s);
    fg_buf_free(&b);
    return FG_ERR_INPUT;
}

/* A name for messages: bytes outside printable ASCII (and the quote and
 * backslash) as \xHH, cut with "..." when it does not fit. */
const char *fg_onnx_esc(const char *s, char *buf, size_t size)
{
    size_t at = 0;
    for (s = s ? s : ""; *s && at + 8 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'')
            at += (size_t)snprintf(buf + at, size - at, "\\x%02x", c);
        else
            buf[at++] = (char)c;
    }
    if (*s && size > 4)
        at = (at < size - 4 ? at : size - 4) + (size_t)snprintf(buf + (at < size - 4 ? at : size - 4), 4, "...");
    buf[at < size ? at : size - 1] = 0;
    return buf;
}

value *fg_onnx_vfind(value *t, const char *name)
{
    value *v;
    HASH_FIND_STR(t, name, v);
    return v;
}

void fg_onnx_vset(value **t, const char *name, vkind kind, int idx)
{
    value *v = fg_onnx_vfind(*t, name);
    if (!v) {
        v = fg_xcalloc(1, sizeof *v);
        v->name = name;
        HASH_ADD_KEYPTR(hh, *t, v->name, strlen(v->name), v);
    }
    v->kind = kind;
    v->idx = idx;
}

static void vfree(value **t)
{
    value *v, *tmp;
    HASH_ITER(hh, *t, v, tmp) {
        HASH_DEL(*t, v);
        free(v);
    }
}

static name_ent *name_find(name_ent *t, const char *s)
{
    name_ent *e;
    HASH_FIND_STR(t, s, e);
    return e;
}

/* A graph name for raw: sanitized, unique in *set, interned.  A taken base
 * name keeps the next suffix to try, so n names with one base cost O(n). */
const char *fg_onnx_unique_name(loader *L, name_ent **set, const char *raw)
{
    fg_buf b = {0};
    const char *s = raw && *raw ? raw : "t";
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        fg_buf_put(&b, "t_");
    for (const char *c = s; *c && b.len < 200; c++) {
        char ch = *c;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '.';
        fg_buf_putn(&b, ok ? &ch : "_", 1);
    }
    size_t base = b.len;
    name_ent *be = name_find(*set, b.s);
    if (be) {
        int k = be->next > 2 ? be->next : 2;
        for (;; k++) {
            b.len = base;
            b.s[base] = 0;
            fg_buf_printf(&b, "_%d", k);
            if (!name_find(*set, b.s))
                break;
        }
        be->next = k + 1;
    }
    name_ent *e = fg_xcalloc(1, sizeof *e);
    e->name = fg_buf_take(&b);
    HASH_ADD_KEYPTR(hh, *set, e->name, strlen(e->name), e);
    return fg_intern(L->ctx, e->name);
}

static void names_free(name_ent **t)
{
    name_ent *e, *tmp;
    HASH_ITER(hh, *t, e, tmp) {
        HASH_DEL(*t, e);
        free(e->name);
        free(e);
    }
}

int fg_onnx_add_tensor(loader *L, const fg_tensor *t, const char *onnx_name)
{
    int idx = fg_graph_add_tensor(L->g, t);
    fg_grow((void **)&L->tensor_onnx, &L->tensor_onnx_cap, idx + 1, sizeof *L->tensor_onnx);
    L->tensor_onnx[idx] = onnx_name;
    return idx;
}

/* The placeholder that stands for the outputs of a node that failed. */
int fg_onnx_unknown_tensor(loader *L)
{
    if (L->unknown < 0) {
        fg_tensor t = {0};
        t.name = fg_intern(L->ctx, "<unknown>");
        t.rank = -1;
        t.producer = -1;
        t.loc = L->loc;
        L->unknown = fg_onnx_add_tensor(L, &t, NULL);
    }
    return L->unknown;
}

/* A new constant of the given shape with float values (taken over). */
int fg_onnx_new_const(loader *L, const char *name, int dtype, int rank, const int64_t *shape, float *f, int64_t *iv)
{
    konst k = {0};
    k.name = name;
    k.dtype = dtype;
    k.rank = rank;
    k.numel = 1;
    for (int d = 0; d < rank; d++) {
        k.shape[d] = shape[d];
        k.numel *= shape[d];
    }
    k.f = f;
    k.i = iv;
    k.weight = -1;
    *FG_PUSH(L->consts, L->nconsts, L->consts_cap) = k;
    return L->nconsts - 1;
}

/* A weight tensor with the given values (copied); returns its index. */
int fg_onnx_new_weight(loader *L, const char *onnx_name, const char *hint, fg_dtype dt, int rank,
                              const int64_t *shape, const float *data)
{
    fg_tensor t = {0};
    t.name = fg_onnx_unique_name(L, &L->tnames, hint);
    t.dtype = dt;
    t.layout = FG_LAYOUT_NCHW;
    t.rank = rank;
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    t.producer = -1;
    t.is_weight = 1;
    t.loc = L->loc;
    int64_t n = fg_tensor_numel(&t);
    t.data = fg_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    memcpy(t.data, data, sizeof(float) * (size_t)n);
    return fg_onnx_add_tensor(L, &t, onnx_name);
}

/* ---- graph inputs, outputs, the model ------------------------------------------- */

static int input_dim(loader *L, const char *iname, int axis, const Onnx__TensorShapeProto__Dimension *d,
                     int64_t *out, int *used_dims)
{
    char b1[160];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 1 || d->dim_value > (1ll << 31))
            return fg_onnx_lerr(L, "graph input '%s': dimension %d is %lld; fusegen needs positive sizes",
                                fg_onnx_esc(iname, b1, sizeof b1), axis, (long long)d->dim_value), 0;
        *out = d->dim_value;
        return 1;
    }
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && d->dim_param[0]) {
        *out = 1;
        for (int k = 0; L->opts && k < L->opts->ndims; k++)
            if (L->opts->dims[k].name && strcmp(L->opts->dims[k].name, d->dim_param) == 0) {
                *out = L->opts->dims[k].value;
                used_dims[k] = 1;
            }
        return 1;
    }
    return fg_onnx_lerr(L, "graph input '%s': dimension %d has neither a size nor a name (dim_param)",
                        fg_onnx_esc(iname, b1, sizeof b1), axis), 0;
}

static void load_inputs(loader *L, const Onnx__GraphProto *gp, int *used_dims)
{
    char b1[160];
    int cap = 0;
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *nm = vi->name ? vi->name : "";
        if (!*nm) {
            fg_onnx_lerr(L, "graph input %zu has no name", i);
            continue;
        }
        value *v = fg_onnx_vfind(L->values, nm);
        if (v && v->kind == V_CONST)
            continue;   /* an input that is also an initializer: a weight */
        if (v) {
            fg_onnx_lerr(L, "graph input '%s' is listed twice", fg_onnx_esc(nm, b1, sizeof b1));
            continue;
        }
        if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type) {
            fg_onnx_lerr(L, "graph input '%s' is not a tensor", fg_onnx_esc(nm, b1, sizeof b1));
            continue;
        }
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        int et = tt->has_elem_type ? tt->elem_type : 0;
        int dt = et == FG_ONNX_DTYPE_DOUBLE ? FG_DTYPE_F32 : fg_onnx_dtype_fg(et);
        if (dt < 0) {
            fg_onnx_lerr(L, "graph input '%s' has element type %s; inputs must be float, double, float16, bfloat16, "
                         "int64, int32 or bool",
                         fg_onnx_esc(nm, b1, sizeof b1), fg_onnx_dtype_name(et));
            continue;
        }
        if (!tt->shape) {
            fg_onnx_lerr(L, "graph input '%s' has no shape", fg_onnx_esc(nm, b1, sizeof b1));
            continue;
        }
        if (tt->shape->n_dim > FG_MAX_RANK) {
            fg_onnx_lerr(L, "graph input '%s' has rank %zu; at most %d is supported", fg_onnx_esc(nm, b1, sizeof b1),
                         tt->shape->n_dim, FG_MAX_RANK);
            continue;
        }
        fg_tensor t = {0};
        t.dtype = (fg_dtype)dt;
        t.layout = FG_LAYOUT_NCHW;
        t.producer = -1;
        t.is_input = 1;
        t.loc = L->loc;
        t.rank = tt->shape->n_dim ? (int)tt->shape->n_dim : 1;
        t.shape[0] = 1;
        t.model_rank0 = tt->shape->n_dim == 0;
        t.model_float64 = et == FG_ONNX_DTYPE_DOUBLE;
        int ok = 1;
        int64_t numel = 1;
        for (size_t d = 0; d < tt->shape->n_dim && ok; d++) {
            ok = input_dim(L, nm, (int)d, tt->shape->dim[d], &t.shape[d], used_dims);
            if (ok && (__builtin_mul_overflow(numel, t.shape[d], &numel) || numel > (1ll << 31))) {
                fg_onnx_lerr(L, "graph input '%s' has more than 2^31 elements", fg_onnx_esc(nm, b1, sizeof b1));
                ok = 0;
            }
        }
        if (!ok)
            continue;
        t.name = fg_onnx_unique_name(L, &L->tnames, nm);
        int idx = fg_onnx_add_tensor(L, &t, nm);
        fg_onnx_vset(&L->values, nm, V_TENSOR, idx);
        *FG_PUSH(L->g->inputs, L->g->ninputs, cap) = idx;
    }
}

/* A node copying tensor t (any rank) into a new tensor for graph output name. */
static int copy_node(loader *L, int t, const char *name)
{
    const fg_opdef *op = fg_ctx_find_op(L->ctx, "identity");
    if (!op) {
        fg_onnx_lerr(L, "graph output '%s' needs a copy, and op 'identity' is not in the loaded vocabulary (rules/onnx_ops.yaml)",
                     name);
        return -1;
    }
    fg_node n = {0};
    n.op = op;
    n.ninputs = op->ninputs;
    for (int i = 0; i < FG_MAX_INPUTS; i++)
        n.inputs[i] = -1;
    n.inputs[0] = t;
    char hint[300];
    snprintf(hint, sizeof hint, "%s.copy", name);
    n.name = fg_onnx_unique_name(L, &L->nnames, hint);
    n.loc = L->loc;
    fg_tensor o = {0};
    o.name = fg_onnx_unique_name(L, &L->tnames, name);
    o.rank = -1;
    o.producer = -1;
    o.loc = L->loc;
    n.output = fg_onnx_add_tensor(L, &o, name);
    int nd = fg_graph_add_node(L->g, &n);
    return fg_kind_infer_shape(L->ctx, L->g, nd) == FG_OK ? n.output : -1;
}

static void load_outputs(loader *L, const Onnx__GraphProto *gp)
{
    char b1[160];
    int cap = 0;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *nm = gp->output[i]->name ? gp->output[i]->name : "";
        value *v = fg_onnx_vfind(L->values, nm);
        if (!v) {
            fg_onnx_lerr(L, "graph output '%s' is not produced by any node", fg_onnx_esc(nm, b1, sizeof b1));
            continue;
        }
        if (v->kind == V_CONST) {
            fg_onnx_lerr(L, "graph output '%s' is a constant; outputs must be computed", fg_onnx_esc(nm, b1, sizeof b1));
            continue;
        }
        const Onnx__TypeProto *ty = gp->output[i]->type;
        int et = ty && ty->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && ty->tensor_type &&
                         ty->tensor_type->has_elem_type ? ty->tensor_type->elem_type : 0;
        if (et && et != FG_ONNX_DTYPE_DOUBLE && fg_onnx_dtype_fg(et) < 0) {
            fg_onnx_lerr(L, "graph output '%s' has element type %s; outputs must be float, double, float16, "
                         "bfloat16, int64, int32 or bool",
                         fg_onnx_esc(nm, b1, sizeof b1), fg_onnx_dtype_name(et));
            continue;
        }
        int t = v->idx;
        fg_tensor *tt = &L->g->tensors[t];
        if (tt->rank < 0)
            continue;   /* an error already reported */
        const char *owner = L->tensor_onnx[t];
        if (tt->is_input || tt->is_weight || tt->is_output || (owner && strcmp(owner, nm) != 0 && fg_onnx_vfind(L->outs, owner))) {
            t = copy_node(L, t, nm);   /* a graph output is a tensor of its own */
        } else if (!owner || strcmp(owner, nm) != 0) {
            /* an alias (Identity, Dropout, a no-op reshape) of a tensor made for
             * a name that is not a graph output: the tensor takes this name */
            tt->name = fg_onnx_unique_name(L, &L->tnames, nm);
            L->tensor_onnx[t] = nm;
        }
        if (t < 0)
            continue;
        fg_tensor *out = &L->g->tensors[t];
        out->is_output = 1;
        /* what the model declares: rank 0 (a shape with no dimension) and float64 (computed in fp32
         * here: an fp32 result is what the graph's Cast to double became) */
        const Onnx__TensorShapeProto *sh = et ? ty->tensor_type->shape : NULL;
        out->model_rank0 = sh && sh->n_dim == 0 && fg_tensor_numel(out) == 1;
        out->model_float64 = et == FG_ONNX_DTYPE_DOUBLE && out->dtype == FG_DTYPE_F32;
        fg_onnx_vset(&L->values, nm, V_TENSOR, t);
        *FG_PUSH(L->g->outputs, L->g->noutputs, cap) = t;
    }
}

static int model_opset(loader *L, const Onnx__ModelProto *m)
{
    int found = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0) {
            L->opset = o->has_version ? (int)o->version : 0;
            found = 1;
        }
    }
    if (!found)
        return fg_onnx_lerr(L, "the model imports no opset of the default ONNX domain"), 0;
    if (L->opset < FG_ONNX_OPSET_MIN || L->opset > FG_ONNX_OPSET_MAX)
        return fg_onnx_lerr(L, "opset %d is not supported: this importer knows opsets %d to %d", L->opset, FG_ONNX_OPSET_MIN,
                            FG_ONNX_OPSET_MAX), 0;
    return 1;
}

/* One error naming every unsupported operator type with its nodes. */
static int check_ops(loader *L, const Onnx__GraphProto *gp)
{
    fg_buf b = {0};
    int nbad = 0;
    char *done = fg_xcalloc(gp->n_node + 1, 1);
    char b1[160], b2[160];
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (done[i] || fg_onnx_find_op(L, n) || L->fold[i])
            continue;
        const char *dom = n->domain && n->domain[0] ? n->domain : NULL;
        fg_buf_printf(&b, "%s%s%s%s (", nbad++ ? "; " : "", dom ? fg_onnx_esc(dom, b2, sizeof b2) : "", dom ? "." : "",
                      fg_onnx_esc(n->op_type, b1, sizeof b1));
        int cnt = 0;
        for (size_t j = i; j < gp->n_node; j++) {
            const Onnx__NodeProto *m = gp->node[j];
            const char *mdom = m->domain && m->domain[0] ? m->domain : NULL;
            if (done[j] || fg_onnx_find_op(L, m) || L->fold[j] || strcmp(m->op_type ? m->op_type : "", n->op_type ? n->op_type : "") ||
                (!dom != !mdom) || (dom && strcmp(dom, mdom)))
                continue;
            done[j] = 1;
            if (cnt < 8)
                fg_buf_printf(&b, "%snode %zu '%s'", cnt ? ", " : "", j, fg_onnx_esc(m->name, b1, sizeof b1));
            cnt++;
        }
        if (cnt > 8)
            fg_buf_printf(&b, " and %d more", cnt - 8);
        fg_buf_put(&b, ")");
    }
    if (nbad)
        fg_onnx_lerr(L, "unsupported operator%s: %s (docs/onnx.md lists what is supported)", nbad > 1 ? "s" : "", b.s);
    fg_buf_free(&b);
    free(done);
    return nbad == 0;
}

/* A node's location for messages: "node 3 'relu_1' (Relu)". */
static const char *node_label(const Onnx__GraphProto *gp, size_t i, char *buf, size_t size)
{
    char b1[160];
    snprintf(buf, size, "node %zu '%s' (%s)", i, fg_onnx_esc(gp->node[i]->name, b1, sizeof b1),
             gp->node[i]->op_type ? gp->node[i]->op_type : "");
    return buf;
}

/* Every tensor has one producer (the ONNX graph is in SSA form): a name
 * written by two nodes, or by a node and also a graph input or initializer,
 * is an error naming both.  Returns 1 when none is. */
static int check_producers(loader *L, const Onnx__GraphProto *gp)
{
    char b1[160], l1[260], l2[260];
    int ok = 1;
    value *made = NULL;   /* output name -> producing node */
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i]->name && gp->input[i]->name[0] && !fg_onnx_vfind(made, gp->input[i]->name))
            fg_onnx_vset(&made, gp->input[i]->name, V_TENSOR, -1);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && gp->initializer[i]->name[0] && !fg_onnx_vfind(made, gp->initializer[i]->name))
            fg_onnx_vset(&made, gp->initializer[i]->name, V_CONST, -1);
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; j < gp->node[i]->n_output; j++) {
            const char *nm = gp->node[i]->output[j];
            if (!nm || !nm[0])
                continue;   /* an optional output left out */
            value *v = fg_onnx_vfind(made, nm);
            if (!v) {
                fg_onnx_vset(&made, nm, V_TENSOR, (int)i);
                continue;
            }
            if (v->idx >= 0)
                fg_onnx_lerr(L, "tensor '%s' is produced twice: by %s and by %s", fg_onnx_esc(nm, b1, sizeof b1),
                             node_label(gp, (size_t)v->idx, l1, sizeof l1), node_label(gp, i, l2, sizeof l2));
            else
                fg_onnx_lerr(L, "tensor '%s' is produced by %s but is also a graph %s", fg_onnx_esc(nm, b1, sizeof b1),
                             node_label(gp, i, l2, sizeof l2), v->kind == V_CONST ? "initializer" : "input");
            ok = 0;
        }
    vfree(&made);
    return ok;
}

static void load_model(loader *L, const Onnx__ModelProto *m)
{
    char b1[160];
    if (!m->graph) {
        fg_onnx_lerr(L, "the model has no graph");
        return;
    }
    const Onnx__GraphProto *gp = m->graph;
    L->g->name = fg_onnx_unique_name(L, &L->nnames, gp->name && gp->name[0] ? gp->name : "onnx_model");
    L->fold = fg_xcalloc(gp->n_node + 1, 1);
    fg_onnx_fold_mark(gp, L->fold);
    if (!model_opset(L, m) || !check_ops(L, gp) || !check_producers(L, gp))
        return;
    if (gp->n_sparse_initializer)
        fg_onnx_lerr(L, "sparse initializers are not supported");
    /* names that something reads */
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; j < gp->node[i]->n_input; j++)
            if (gp->node[i]->input[j] && gp->node[i]->input[j][0])
                fg_onnx_vset(&L->used, gp->node[i]->input[j], V_TENSOR, 0);
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i]->name) {
            if (fg_onnx_vfind(L->outs, gp->output[i]->name))
                fg_onnx_lerr(L, "graph output '%s' is listed twice", fg_onnx_esc(gp->output[i]->name, b1, sizeof b1));
            fg_onnx_vset(&L->used, gp->output[i]->name, V_TENSOR, 0);
            fg_onnx_vset(&L->outs, gp->output[i]->name, V_TENSOR, 0);
        }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        char what[220];
        snprintf(what, sizeof what, "initializer '%s'", fg_onnx_esc(t->name, b1, sizeof b1));
        if (!t->name || !t->name[0]) {
            fg_onnx_lerr(L, "initializer %zu has no name", i);
            continue;
        }
        if (fg_onnx_vfind(L->values, t->name)) {
            fg_onnx_lerr(L, "%s is given twice", what);
            continue;
        }
        if (!fg_onnx_vfind(L->used, t->name)) {
            fg_onnx_vset(&L->values, t->name, V_CONST, -1);   /* nothing reads it: not decoded, but not an input */
            continue;
        }
        int c = fg_onnx_decode_tensor(L, t, t->name, what);
        if (c >= 0)
            fg_onnx_vset(&L->values, t->name, V_CONST, c);
    }
    int *used_dims = fg_xcalloc((size_t)(L->opts ? L->opts->ndims : 0) + 1, sizeof(int));
    load_inputs(L, gp, used_dims);
    for (int k = 0; L->opts && k < L->opts->ndims; k++)
        if (!used_dims[k]) {
            fg_buf names = {0};
            for (size_t i = 0; i < gp->n_input; i++) {
                const Onnx__ValueInfoProto *vi = gp->input[i];
                if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
                    !vi->type->tensor_type || !vi->type->tensor_type->shape)
                    continue;
                const Onnx__TensorShapeProto *sp = vi->type->tensor_type->shape;
                for (size_t d = 0; d < sp->n_dim; d++)
                    if (sp->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                        sp->dim[d]->dim_param && (!names.s || !strstr(names.s, sp->dim[d]->dim_param)))
                        fg_buf_printf(&names, "%s'%s'", names.len ? ", " : "", fg_onnx_esc(sp->dim[d]->dim_param, b1, sizeof b1));
            }
            fg_onnx_lerr(L, "dimension '%s' is not a symbolic dimension of the model's inputs (%s%s)",
                         fg_onnx_esc(L->opts->dims[k].name, b1, sizeof b1), names.len ? "it has " : "it has none",
                         names.len ? names.s : "");
            fg_buf_free(&names);
        }
    free(used_dims);
    if (L->ctx->nerrors != L->errs0)
        return;
    for (size_t i = 0; i < gp->n_node; i++) {
        if (L->fold[i])
            fg_onnx_fold_node(L, (int)i, gp->node[i]);
        else
            fg_onnx_convert_node(L, (int)i, gp->node[i], fg_onnx_find_op(L, gp->node[i]));
    }
    load_outputs(L, gp);
    if (L->g->noutputs == 0 && gp->n_output == 0)
        fg_onnx_lerr(L, "the model has no graph outputs");
}

/* protobuf-c allocates through the guard (oom.h): under it what it holds is
 * freed if loading unwinds, and a failed allocation is told from bad bytes. */
static void *pb_alloc(void *data, size_t n) { return fg_oom_try_alloc(n); }
static void pb_free(void *data, void *p) { fg_free(p); }
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

static fg_status load(fg_context *ctx, const char *name, const void *data, size_t len, const char *base_dir,
                      int base_fd, const char *path, const fg_onnx_options *opts, fg_graph **out)
{
    int errs0 = ctx->nerrors;
    loader L = {0};
    L.ctx = ctx;
    L.file = fg_intern(ctx, name);
    L.loc = (fg_loc){L.file, 0, 0};
    L.base_dir = base_dir;
    L.base_fd = base_fd;
    L.opts = opts;
    L.unknown = -1;
    L.fold_left = ctx->env.onnx_fold_bytes ? ctx->env.onnx_fold_bytes : (uint64_t)FG_DEFAULT_ONNX_FOLD_MB << 20;
    for (int k = 0; opts && k < opts->ndims; k++)
        if (!opts->dims[k].name || opts->dims[k].value < 1 || opts->dims[k].value > (1ll << 31))
            return fg_onnx_lerr(&L, "dimension %d of the options: needs a name and a value from 1 to 2^31", k);
    if (!fg_onnx_depth_ok(&onnx__model_proto__descriptor, data, (const uint8_t *)data + len, 0))
        return fg_onnx_lerr(&L, "not a usable ONNX model: messages nest more than %d deep", FG_ONNX_PB_MAX_DEPTH);
    fg_oom_take_failure();
    Onnx__ModelProto *m = onnx__model_proto__unpack(&pb_allocator, len, data);
    if (!m && fg_oom_take_failure())
        fg_oom_raise(len);
    if (!m)
        return fg_onnx_lerr(&L, "not a valid ONNX model (the protobuf message could not be decoded: corrupt or truncated)");
    L.errs0 = errs0;
    L.g = fg_xcalloc(1, sizeof *L.g);
    L.g->path = path ? fg_intern(ctx, path) : NULL;
    load_model(&L, m);
    fg_graph_recount(L.g);
    for (int t = 0; t < L.g->ntensors; t++)   /* the model's own names, before the model is freed */
        if (t < L.tensor_onnx_cap && L.tensor_onnx[t] && strcmp(L.tensor_onnx[t], L.g->tensors[t].name) != 0)
            L.g->tensors[t].source_name = fg_intern(ctx, L.tensor_onnx[t]);
    onnx__model_proto__free_unpacked(m, &pb_allocator);
    vfree(&L.values);
    vfree(&L.used);
    vfree(&L.outs);
    names_free(&L.tnames);
    names_free(&L.nnames);
    for (int i = 0; i < L.nconsts; i++) {
        free(L.consts[i].f);
        free(L.consts[i].i);
    }
    free(L.consts);
    free(L.tensor_onnx);
    free(L.fold);
    if (L.own_base_fd)
        fg_oom_close(L.base_fd);
    if (ctx->nerrors != errs0) {
        fg_graph_free(L.g);
        return FG_ERR_INPUT;
    }
    *out = L.g;
    return FG_OK;
}

/* A load's arguments, for the guard (oom.h). */
typedef struct load_call {
    fg_context *ctx;
    const char *name;
    const void *data;
    size_t len;
    const fg_onnx_options *opts;
    fg_graph **out;
} load_call;

static fg_status memory_body(void *arg)
{
    load_call *c = arg;
    return load(c->ctx, c->name, c->data, c->len, c->opts ? c->opts->base_dir : NULL, -1, NULL, c->opts, c->out);
}

/* fg_graph_load_onnx's work: the model's directory and then the model in it
 * are opened once; external data is opened beneath the directory's
 * descriptor.  The descriptors are closed if loading unwinds. */
static fg_status file_body(void *arg)
{
    load_call *c = arg;
    fg_context *ctx = c->ctx;
    const char *path = c->name;
    char why[300];
    size_t len = 0;
    int dirfd, fd = fg_open_beside(path, &dirfd, NULL, why, sizeof why);
    fg_oom_defer_close(dirfd);
    fg_oom_defer_close(fd);
    unsigned char *data = fd < 0 ? NULL : (unsigned char *)fg_read_fd(fd, FG_ONNX_FILE_MAX, &len, why, sizeof why);
    if (fd >= 0)
        fg_oom_close(fd);
    if (!data) {
        if (dirfd >= 0)
            fg_oom_close(dirfd);
        return fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, path), 0, 0}, "cannot read model: %s", why);
    }
    fg_status st = fg_onnx_load_at(ctx, path, data, len, dirfd, c->opts, c->out);
    fg_oom_close(dirfd);
    free(data);
    return st;
}

/* Runs a body under the guard; a graph that ran out of memory is not handed out. */
static fg_status guarded(load_call *c, fg_oom_body_fn body)
{
    fg_status st =
        fg_oom_guard(c->ctx, (fg_loc){fg_intern(c->ctx, c->name), 0, 0}, "loading the ONNX model", body, NULL, c);
    if (st == FG_ERR_NOMEM)
        *c->out = NULL;
    return st;
}

FG_API fg_status fg_graph_load_onnx_memory(fg_context *ctx, const char *name, const void *data, size_t len,
                                           const fg_onnx_options *o, fg_graph **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !out || (!data && len))
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_graph_load_onnx_memory: NULL argument")
                   : FG_ERR_INPUT;
    if (o && o->ndims && (o->ndims < 0 || !o->dims))
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_onnx_options: ndims %d without dims", o->ndims);
    load_call c = {ctx, name ? name : "<onnx>", data, len, o, out};
    return guarded(&c, memory_body);
}

fg_status fg_onnx_load_at(fg_context *ctx, const char *path, const void *data, size_t len, int dirfd,
                          const fg_onnx_options *o, fg_graph **out)
{
    *out = NULL;
    return load(ctx, path, data, len, NULL, dirfd, path, o, out);
}

FG_API fg_status fg_graph_load_onnx(fg_context *ctx, const char *path, const fg_onnx_options *o, fg_graph **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !out || !path)
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_graph_load_onnx: NULL argument") : FG_ERR_INPUT;
    if (o && o->ndims && (o->ndims < 0 || !o->dims))
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_onnx_options: ndims %d without dims", o->ndims);
    load_call c = {ctx, path, NULL, 0, o, out};
    return guarded(&c, file_body);
}
