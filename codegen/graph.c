/*
 * graph.c -- helpers over fg_graph (ir.h): lookups, attribute access, deep
 * copy, appending tensors and nodes, consumer counts, element counts and
 * dtype sizes, and fg_graph_free.
 */
#include <stdlib.h>
#include <string.h>

#include "context.h"

const char *fg_tensor_user_name(const fg_tensor *t) { return t->source_name ? t->source_name : t->name; }

int fg_graph_find_tensor(const fg_graph *g, const char *name)
{
    for (int i = 0; i < g->ntensors; i++)
        if (g->tensors[i].source_name && strcmp(g->tensors[i].source_name, name) == 0)
            return i;
    for (int i = 0; i < g->ntensors; i++)
        if (g->tensors[i].name == name || strcmp(g->tensors[i].name, name) == 0)
            return i;
    return -1;
}

int fg_graph_find_node(const fg_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].name == name || strcmp(g->nodes[i].name, name) == 0)
            return i;
    return -1;
}

int64_t fg_tensor_numel(const fg_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

int fg_dtype_is_float(fg_dtype t) { return t == FG_DTYPE_F32 || t == FG_DTYPE_F16 || t == FG_DTYPE_BF16; }

size_t fg_dtype_size(fg_dtype t)
{
    switch (t) {
    case FG_DTYPE_I64: return 8;
    case FG_DTYPE_F32:
    case FG_DTYPE_I32: return 4;
    case FG_DTYPE_F16:
    case FG_DTYPE_BF16: return 2;
    case FG_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

const fg_attr_value *fg_node_attr(const fg_node *n, const char *name)
{
    if (!n->op)
        return NULL;
    for (int i = 0; i < n->op->nattrs; i++)
        if (strcmp(n->op->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

/* INT/BOOL: the value; INTS: element index (the last one past the end, 0
 * when empty); FLOAT: truncated; missing attribute: 0. */
int64_t fg_node_attr_int(const fg_node *n, const char *name, int index)
{
    const fg_attr_value *v = fg_node_attr(n, name);
    if (!v)
        return 0;
    switch (v->type) {
    case FG_ATTR_INT:
    case FG_ATTR_BOOL: return v->i;
    case FG_ATTR_FLOAT: return (int64_t)v->f;
    case FG_ATTR_INTS:
        if (v->n == 0)
            return 0;
        return v->ints[index < 0 ? 0 : index < v->n ? index : v->n - 1];
    default: return 0;
    }
}

/* Contract in ir.h.  Lengths other than 2 and 4 are refused by the op
 * definition (`len: [2, 4]`); a shorter list repeats its last value. */
void fg_node_pads(const fg_node *n, int64_t beg[2], int64_t end[2])
{
    const fg_attr_value *v = fg_node_attr(n, "padding");
    int sided = v && v->type == FG_ATTR_INTS && v->n >= 4;
    for (int a = 0; a < 2; a++) {
        beg[a] = fg_node_attr_int(n, "padding", a);
        end[a] = sided ? v->ints[a + 2] : beg[a];
    }
}

/* Contracts in ir.h. */
double fg_attr_number(const fg_attr_value *v)
{
    switch (v->type) {
    case FG_ATTR_INT:
    case FG_ATTR_BOOL: return (double)v->i;
    case FG_ATTR_FLOAT: return v->f;
    case FG_ATTR_INTS: return v->n > 0 ? (double)v->ints[0] : 0.0;
    default: return 0.0;
    }
}

double fg_node_attr_num(const fg_node *n, const char *name, double def)
{
    const fg_attr_value *v = fg_node_attr(n, name);
    return v ? fg_attr_number(v) : def;
}

int fg_node_input(const fg_node *n, const char *name)
{
    for (int i = 0; n->op && i < n->op->ninputs; i++)
        if (strcmp(n->op->inputs[i].name, name) == 0)
            return i;
    return -1;
}

/* FLOAT: the value; INT/BOOL converted; others and missing: 0. */
double fg_node_attr_float(const fg_node *n, const char *name)
{
    const fg_attr_value *v = fg_node_attr(n, name);
    if (!v)
        return 0;
    switch (v->type) {
    case FG_ATTR_FLOAT: return v->f;
    case FG_ATTR_INT:
    case FG_ATTR_BOOL: return (double)v->i;
    default: return 0;
    }
}

fg_graph *fg_graph_clone(const fg_graph *g)
{
    fg_graph *c = fg_xcalloc(1, sizeof *c);
    *c = *g;
    c->tensors = fg_xcalloc((size_t)g->ntensors + 1, sizeof *c->tensors);
    c->tensors_cap = g->ntensors + 1;
    if (g->ntensors)
        memcpy(c->tensors, g->tensors, sizeof *c->tensors * (size_t)g->ntensors);
    for (int i = 0; i < g->ntensors; i++) {
        fg_tensor *t = &c->tensors[i];
        t->borrowed = t->data != NULL;
        if (t->scale) {
            size_t n = (size_t)t->shape[t->scale_axis];
            t->scale = memcpy(fg_xmalloc(n * sizeof *t->scale), t->scale, n * sizeof *t->scale);
        }
    }
    c->nodes = fg_xcalloc((size_t)g->nnodes + 1, sizeof *c->nodes);
    c->nodes_cap = g->nnodes + 1;
    if (g->nnodes)
        memcpy(c->nodes, g->nodes, sizeof *c->nodes * (size_t)g->nnodes);
    c->inputs = fg_xcalloc((size_t)g->ninputs + 1, sizeof *c->inputs);
    if (g->ninputs)   /* a graph of weights alone has no inputs (and a NULL array) */
        memcpy(c->inputs, g->inputs, sizeof *c->inputs * (size_t)g->ninputs);
    c->outputs = fg_xcalloc((size_t)g->noutputs + 1, sizeof *c->outputs);
    if (g->noutputs)
        memcpy(c->outputs, g->outputs, sizeof *c->outputs * (size_t)g->noutputs);
    return c;
}

/* Elements per slice of axis a (the product of the dimensions after a). */
static int64_t inner_of(const fg_tensor *t, int a)
{
    int64_t inner = 1;
    for (int i = a + 1; i < t->rank; i++)
        inner *= t->shape[i];
    return inner;
}

float *fg_tensor_own(fg_tensor *t)
{
    if (!t->data)
        return NULL;
    if (t->borrowed || t->scale) {
        int64_t n = fg_tensor_numel(t);
        float *d = t->borrowed ? fg_xmalloc(sizeof(float) * (size_t)(n ? n : 1)) : t->data;
        fg_tensor_values(t, d);
        t->data = d;
        t->borrowed = 0;
        free(t->scale);
        t->scale = NULL;
    }
    return t->data;
}

void fg_tensor_values(const fg_tensor *t, float *dst)
{
    int64_t n = fg_tensor_numel(t);
    if (!t->scale) {
        if (dst != t->data)
            memcpy(dst, t->data, sizeof(float) * (size_t)n);
        return;
    }
    int64_t inner = inner_of(t, t->scale_axis), dim = t->shape[t->scale_axis];
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)((double)t->data[i] * t->scale[(i / inner) % dim]);
}

void fg_tensor_values_f64(const fg_tensor *t, double *dst)
{
    int64_t n = fg_tensor_numel(t);
    int64_t inner = t->scale ? inner_of(t, t->scale_axis) : 1, dim = t->scale ? t->shape[t->scale_axis] : 1;
    for (int64_t i = 0; i < n; i++)
        dst[i] = t->scale ? (double)(float)((double)t->data[i] * t->scale[(i / inner) % dim]) : (double)t->data[i];
}

void fg_tensor_scale(fg_tensor *t, int axis, const double *s)
{
    if (t->scale && t->scale_axis != axis)
        fg_tensor_own(t);
    int64_t dim = t->shape[axis];
    if (!t->scale) {
        t->scale = fg_xmalloc((size_t)(dim ? dim : 1) * sizeof *t->scale);
        for (int64_t i = 0; i < dim; i++)
            t->scale[i] = 1.0;
        t->scale_axis = axis;
    }
    for (int64_t i = 0; i < dim; i++)
        t->scale[i] *= s[i];
}

int fg_graph_add_tensor(fg_graph *g, const fg_tensor *t)
{
    *FG_PUSH(g->tensors, g->ntensors, g->tensors_cap) = *t;
    return g->ntensors - 1;
}

int fg_graph_add_node(fg_graph *g, const fg_node *n)
{
    *FG_PUSH(g->nodes, g->nnodes, g->nodes_cap) = *n;
    return g->nnodes - 1;
}

int fg_graph_reads(const fg_graph *g, int t)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].ninputs; j++)
            n += g->nodes[i].inputs[j] == t;
    return n;
}

void fg_graph_recount(fg_graph *g)
{
    for (int i = 0; i < g->ntensors; i++) {
        g->tensors[i].producer = -1;
        g->tensors[i].nconsumers = 0;
    }
    for (int n = 0; n < g->nnodes; n++) {
        const fg_node *nd = &g->nodes[n];
        if (nd->output >= 0 && nd->output < g->ntensors)
            g->tensors[nd->output].producer = n;
        for (int i = 0; i < nd->ninputs; i++)
            if (nd->inputs[i] >= 0 && nd->inputs[i] < g->ntensors)
                g->tensors[nd->inputs[i]].nconsumers++;
    }
}

FG_API void fg_graph_free(fg_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->ntensors; i++) {
        if (!g->tensors[i].borrowed)
            free(g->tensors[i].data);
        free(g->tensors[i].scale);
    }
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g);
}
