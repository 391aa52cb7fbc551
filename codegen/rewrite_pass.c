/*
 * rewrite_pass.c -- the rewrite pass (contract in rewrite.h): the matcher,
 * a small backtracking search over the DAG from each candidate root
 * (commutative ops tried in both input orders), the legality of a match,
 * and the replacement, which edits the plan's copy of the graph before
 * fusion.  The rewrites come from rewrite_load.c.
 */
#include "rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kind.h"
#include "shape.h"
#include "where.h"

/* ---- matching ---------------------------------------------------------- */

typedef struct goal {
    int step, node;
} goal;

#define MAX_GOALS (FG_RW_MAX_STEPS * FG_MAX_INPUTS + 1)

typedef struct rw_match {
    const fg_graph *g;
    const fg_rewrite *rw;
    int bind[FG_RW_MAX_STEPS];    /* step -> node, -1 while unbound */
    int var[FG_RW_MAX_VARS];      /* input -> tensor, -1 while unbound */
    int cap[FG_RW_MAX_CAPS];      /* capture -> tensor */
    int cap_c[FG_RW_MAX_CAPS];    /* capture -> channels of its step's output (per_channel) */
    int bset[FG_RW_MAX_BINDS];    /* attribute variable bound */
    fg_attr_value bval[FG_RW_MAX_BINDS];   /* its value */
} rw_match;

/* Nonzero when t is a constant holding one value per channel of out: with
 * the shapes aligned at the right, every axis of t but out's axis 1 has
 * size 1 (a per_channel input slot takes a [C] vector as it is). */
static int per_channel_shape(const fg_tensor *t, const fg_tensor *out, int slot_per_channel)
{
    if (out->rank < 2)
        return 0;
    if (slot_per_channel)
        return t->rank == 1 && (t->shape[0] == out->shape[1] || t->shape[0] == 1);
    if (t->rank > out->rank)
        return 0;
    for (int a = 0; a < t->rank; a++) {
        int oa = a + out->rank - t->rank;
        if (t->shape[a] != 1 && !(oa == 1 && t->shape[a] == out->shape[1]))
            return 0;
    }
    return 1;
}

/* Constant predicate: a weight with data, every value within tol of the
 * stated one (`any`: no value test). */
static int const_holds(const fg_graph *g, const fg_rw_arg *a, int t, const fg_tensor *out, int slot_pc)
{
    const fg_tensor *x = &g->tensors[t];
    if (!x->is_weight || !x->data)
        return 0;
    if (a->per_channel && !per_channel_shape(x, out, slot_pc))
        return 0;
    if (a->any)
        return 1;
    int64_t n = fg_tensor_numel(x);
    if (n < 1)
        return 0;
    if (!x->scale) {
        for (int64_t i = 0; i < n; i++)
            if (!(fabs((double)x->data[i] - a->value) <= a->tol))
                return 0;
        return 1;
    }
    /* a pending fold scale (rewrites run before folds, so only a caller's own) */
    double *all = fg_xmalloc((size_t)n * sizeof *all);
    fg_tensor_values_f64(x, all);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++)
        ok = fabs(all[i] - a->value) <= a->tol;
    free(all);
    return ok;
}

/* Nonzero when step s can take node's op; *opi is its index in the step. */
static int step_has_op(const fg_rw_step *s, const fg_opdef *op, int *opi)
{
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i] == op) {
            *opi = i;
            return 1;
        }
    return 0;
}

/* Two attribute values are equal: ints lists element by element, strings
 * as strings, anything else as numbers. */
static int attr_equal(const fg_attr_value *a, const fg_attr_value *b)
{
    if ((a->type == FG_ATTR_INTS) != (b->type == FG_ATTR_INTS) ||
        (a->type == FG_ATTR_STRING) != (b->type == FG_ATTR_STRING))
        return 0;
    if (a->type == FG_ATTR_INTS)
        return a->n == b->n && memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0;
    if (a->type == FG_ATTR_STRING)
        return a->s && b->s && strcmp(a->s, b->s) == 0;
    return fg_attr_number(a) == fg_attr_number(b);
}

/* Value v matches literal (a number, or the string str) or variable
 * (binding it on first use). */
static int attr_el_holds(rw_match *M, int bind, double lit, const char *str, const fg_attr_value *v)
{
    if (bind < 0 && str)
        return v->type == FG_ATTR_STRING && v->s && strcmp(v->s, str) == 0;
    if (bind < 0)
        return v->type != FG_ATTR_INTS && v->type != FG_ATTR_STRING && fg_attr_number(v) == lit;
    if (M->bset[bind])
        return attr_equal(&M->bval[bind], v);
    M->bset[bind] = 1;
    M->bval[bind] = *v;
    return 1;
}

/* The attribute patterns of step st hold for node nd (binding variables). */
static int attrs_hold(rw_match *M, const fg_rw_step *st, const fg_node *nd)
{
    for (int i = 0; i < st->nattrs; i++) {
        const fg_rw_attr *pa = &st->attrs[i];
        const fg_attr_value *v = fg_node_attr(nd, pa->name);
        if (!v)
            return 0;
        if (pa->n < 0) {
            if (!attr_el_holds(M, pa->el[0].bind, pa->el[0].value, pa->el[0].str, v))
                return 0;
            continue;
        }
        if (v->type != FG_ATTR_INTS || v->n != pa->n)
            return 0;
        for (int e = 0; e < pa->n; e++) {
            fg_attr_value one = {.type = FG_ATTR_INT, .i = v->ints[e], .f = (double)v->ints[e]};
            if (!attr_el_holds(M, pa->el[e].bind, pa->el[e].value, NULL, &one))
                return 0;
        }
    }
    return 1;
}

/* Satisfies goals[0..n) (the last first): step goals[i].step must take
 * node goals[i].node.  Backtracks over the input orders of commutative ops;
 * bindings are undone on failure. */
static int solve(rw_match *M, const goal *goals, int n)
{
    if (n == 0)
        return 1;
    const fg_graph *g = M->g;
    const fg_rewrite *rw = M->rw;
    int s = goals[n - 1].step, node = goals[n - 1].node;
    n--;
    if (M->bind[s] >= 0)
        return M->bind[s] == node && solve(M, goals, n);
    for (int o = 0; o < rw->nsteps; o++)
        if (M->bind[o] == node)
            return 0;   /* one node, one step */
    const fg_rw_step *st = &rw->steps[s];
    const fg_node *nd = &g->nodes[node];
    int opi;
    if (nd->folded || !step_has_op(st, nd->op, &opi) || (st->where && !fg_where_holds(st->where, st->where_vars, st->nwhere_vars, nd)))
        return 0;
    for (int j = st->nargs; j < nd->ninputs; j++)
        if (nd->inputs[j] >= 0)
            return 0;   /* an optional input the pattern does not list must be absent */
    int bset[FG_RW_MAX_BINDS];
    fg_attr_value bval[FG_RW_MAX_BINDS];
    memcpy(bset, M->bset, sizeof bset);
    memcpy(bval, M->bval, sizeof bval);
    if (!attrs_hold(M, st, nd)) {
        memcpy(M->bset, bset, sizeof bset);
        memcpy(M->bval, bval, sizeof bval);
        return 0;
    }
    M->bind[s] = node;
    int orders = (st->commutes >> opi) & 1 ? 2 : 1;
    const fg_tensor *out = &g->tensors[nd->output];
    for (int ord = 0; ord < orders; ord++) {
        int var[FG_RW_MAX_VARS], cap[FG_RW_MAX_CAPS], cap_c[FG_RW_MAX_CAPS];
        memcpy(var, M->var, sizeof var);
        memcpy(cap, M->cap, sizeof cap);
        memcpy(cap_c, M->cap_c, sizeof cap_c);
        goal next[MAX_GOALS];
        memcpy(next, goals, (size_t)n * sizeof *next);
        int nn = n, ok = 1;
        for (int j = 0; j < st->nargs && ok; j++) {
            const fg_rw_arg *a = &st->args[j];
            int slot = ord && j < 2 ? 1 - j : j;
            int t = slot < nd->ninputs ? nd->inputs[slot] : -1;
            switch (a->kind) {
            case FG_RW_ARG_ABSENT: ok = t < 0; break;
            case FG_RW_ARG_VAR:
                if (t < 0)
                    ok = 0;
                else if (M->var[a->index] >= 0)
                    ok = M->var[a->index] == t;
                else
                    M->var[a->index] = t;
                break;
            case FG_RW_ARG_STEP: {
                int p = t >= 0 ? g->tensors[t].producer : -1;
                if (p < 0 || nn >= MAX_GOALS)
                    ok = 0;
                else
                    next[nn++] = (goal){a->index, p};
                break;
            }
            default: /* CONST */
                ok = t >= 0 && const_holds(g, a, t, out, nd->op->inputs[slot].per_channel);
                if (ok && a->capture >= 0) {
                    if (M->cap[a->capture] >= 0)
                        ok = M->cap[a->capture] == t;
                    M->cap[a->capture] = t;
                    M->cap_c[a->capture] = out->rank >= 2 ? (int)out->shape[1] : 1;
                }
                break;
            }
        }
        if (ok && solve(M, next, nn))
            return 1;
        memcpy(M->var, var, sizeof var);
        memcpy(M->cap, cap, sizeof cap);
        memcpy(M->cap_c, cap_c, sizeof cap_c);
    }
    M->bind[s] = -1;
    memcpy(M->bset, bset, sizeof bset);
    memcpy(M->bval, bval, sizeof bval);
    return 0;
}

/* Tries rewrite rw with its root at node; fills M on success. */
static int match_at(const fg_graph *g, const fg_rewrite *rw, int node, rw_match *M)
{
    memset(M, 0, sizeof *M);
    M->g = g;
    M->rw = rw;
    for (int i = 0; i < FG_RW_MAX_STEPS; i++)
        M->bind[i] = -1;
    for (int i = 0; i < FG_RW_MAX_VARS; i++)
        M->var[i] = -1;
    for (int i = 0; i < FG_RW_MAX_CAPS; i++)
        M->cap[i] = -1;
    goal root = {rw->nsteps - 1, node};
    return solve(M, &root, 1);
}

/* The replacement node's attributes: the rewrite's, with those read from
 * attribute variables filled in (numbers converted to the attribute's type;
 * lists and strings as bound). */
static void rep_attrs(const fg_rewrite *rw, const rw_match *M, fg_attr_value *out)
{
    memcpy(out, rw->attrs, sizeof rw->attrs);
    for (int a = 0; a < rw->op->nattrs; a++) {
        int b = rw->attr_bind[a], c = rw->attr_cap[a];
        if (c >= 0 && M->cap[c] >= 0) {   /* a one-element constant (match_legal checked it) */
            double x = 0;
            const fg_tensor *t = &M->g->tensors[M->cap[c]];
            if (fg_tensor_numel(t) == 1)
                fg_tensor_values_f64(t, &x);
            out[a] = (fg_attr_value){.type = rw->op->attrs[a].type, .f = x, .i = (int64_t)x};
            if (out[a].type == FG_ATTR_BOOL)
                out[a].i = x != 0;
            continue;
        }
        if (b < 0)
            continue;
        const fg_attr_value *v = &M->bval[b];
        if (rw->op->attrs[a].type == FG_ATTR_INTS || rw->op->attrs[a].type == FG_ATTR_STRING) {
            out[a] = *v;   /* a string is bound from a string attribute (the interned name) */
            if (out[a].type != rw->op->attrs[a].type)
                out[a] = rw->op->attrs[a].def;   /* a number for a string: the default (rejected at load) */
            continue;
        }
        double x = fg_attr_number(v);
        out[a] = (fg_attr_value){.type = rw->op->attrs[a].type, .f = x, .i = (int64_t)x};
        if (out[a].type == FG_ATTR_BOOL)
            out[a].i = x != 0;
    }
}

/* The replacement node of a match (inputs: the bound tensors; a per-channel
 * capture or a fill, which apply() makes into a new vector, as -1). */
static void rep_node(const fg_graph *g, const fg_rewrite *rw, const rw_match *M, fg_node *nn)
{
    const fg_node *rn = &g->nodes[M->bind[rw->nsteps - 1]];
    memset(nn, 0, sizeof *nn);
    nn->name = rn->name;
    nn->op = rw->op;
    nn->ninputs = rw->op->ninputs;
    nn->output = rn->output;
    nn->loc = rn->loc;
    rep_attrs(rw, M, nn->attrs);
    for (int i = 0; i < rw->op->ninputs; i++) {
        const fg_rw_rep_arg *a = &rw->args[i];
        nn->inputs[i] = a->kind == FG_RW_REP_VAR                                            ? M->var[a->index]
                        : a->kind == FG_RW_REP_CAPTURE && !rw->cap_per_channel[a->index] ? M->cap[a->index]
                                                                                         : -1;
    }
}

/* A replacement op that is not element-wise computes the root's output:
 * its kind's shape inference (quiet: no context) on the replacement node
 * gives the root output's shape and dtype. */
static int infer_matches(const fg_graph *g, const fg_rewrite *rw, const rw_match *M)
{
    fg_node nn;
    rep_node(g, rw, M, &nn);
    const fg_tensor *out = &g->tensors[nn.output];
    fg_tensor scratch = *out;
    fg_infer s = {NULL, (fg_graph *)g, &nn, {0}, &scratch};
    for (int i = 0; i < nn.ninputs; i++) {
        if (rw->args[i].kind == FG_RW_REP_FILL ||
            (rw->args[i].kind == FG_RW_REP_CAPTURE && rw->cap_per_channel[rw->args[i].index]))
            return 0;   /* per-channel vectors are for element-wise ops */
        s.in[i] = nn.inputs[i] >= 0 ? &g->tensors[nn.inputs[i]] : NULL;
    }
    if (!s.in[0] || fg_kind(rw->op->kind)->infer(&s) != FG_OK || scratch.rank != out->rank ||
        scratch.dtype != out->dtype)
        return 0;
    for (int d = 0; d < out->rank; d++)
        if (scratch.shape[d] != out->shape[d])
            return 0;
    return 1;
}

/* The conditions under which a complete match may be replaced: every
 * intermediate is read by matched nodes only and is not a graph output; no
 * input of the match is produced inside it; the replacement computes the
 * root's output shape and dtype. */
static int match_legal(const fg_graph *g, const fg_rewrite *rw, const rw_match *M)
{
    int root = M->bind[rw->nsteps - 1];
    for (int s = 0; s + 1 < rw->nsteps; s++) {
        const fg_tensor *t = &g->tensors[g->nodes[M->bind[s]].output];
        if (t->is_output)
            return 0;
        int reads = 0, out = g->nodes[M->bind[s]].output;
        for (int k = 0; k < rw->nsteps; k++) {
            const fg_node *nd = &g->nodes[M->bind[k]];
            for (int j = 0; j < nd->ninputs; j++)
                reads += nd->inputs[j] == out;
        }
        if (reads != t->nconsumers)
            return 0;
    }
    for (int v = 0; v < rw->nvars; v++)
        for (int s = 0; s < rw->nsteps; s++)
            if (M->var[v] < 0 || M->var[v] == g->nodes[M->bind[s]].output)
                return 0;
    for (int a = 0; a < rw->op->nattrs; a++)   /* an attribute from a capture: one element */
        if (rw->attr_cap[a] >= 0 &&
            (M->cap[rw->attr_cap[a]] < 0 || fg_tensor_numel(&g->tensors[M->cap[rw->attr_cap[a]]]) != 1))
            return 0;
    if (fg_kind(rw->op->kind)->role != FG_ROLE_ELEMENTWISE)
        return infer_matches(g, rw, M);
    /* the replacement's output: numpy broadcasting of its inputs, per-channel
     * inputs of length C */
    const fg_tensor *out = &g->tensors[g->nodes[root].output];
    const fg_opdef *op = rw->op;
    int rank = -1;
    int64_t shape[FG_MAX_RANK];
    for (int i = 0; i < op->ninputs; i++) {
        const fg_rw_rep_arg *a = &rw->args[i];
        if (a->kind == FG_RW_REP_ABSENT)
            continue;
        if (op->inputs[i].per_channel) {
            int c = a->kind == FG_RW_REP_VAR ? -1 : M->cap_c[a->index];
            if (a->kind == FG_RW_REP_CAPTURE && !rw->cap_per_channel[a->index]) {
                const fg_tensor *ct = &g->tensors[M->cap[a->index]];
                c = ct->rank == 1 ? (int)ct->shape[0] : -1;
            }
            if (a->kind == FG_RW_REP_VAR) {
                const fg_tensor *vt = &g->tensors[M->var[a->index]];
                c = vt->rank == 1 ? (int)vt->shape[0] : -1;
            }
            if (out->rank < 2 || c != out->shape[1])
                return 0;
            continue;
        }
        const fg_tensor *t = &g->tensors[a->kind == FG_RW_REP_VAR ? M->var[a->index] : M->cap[a->index]];
        /* an input the output takes its dtype from (an op whose `dtype:` names one input, as Where's x:
         * that one; else every input) has the output's dtype */
        if (a->kind == FG_RW_REP_VAR && t->dtype != out->dtype && (op->dtype_input < 0 || op->dtype_input == i))
            return 0;
        if (rank < 0) {
            rank = t->rank;
            memcpy(shape, t->shape, sizeof shape);
            continue;
        }
        if ((rank = fg_broadcast_shape(shape, rank, t->shape, t->rank)) < 0)
            return 0;
    }
    if (rank != out->rank)
        return 0;
    for (int d = 0; d < rank; d++)
        if (shape[d] != out->shape[d])
            return 0;
    return 1;
}

/* ---- replacement ------------------------------------------------------- */

const char *fg_rewrite_fresh_name(fg_context *ctx, const fg_graph *g, const char *stem, int node)
{
    fg_buf b = {0};
    fg_buf_put(&b, stem);
    size_t base = b.len;
    for (int k = 2; (node ? fg_graph_find_node(g, b.s) : fg_graph_find_tensor(g, b.s)) >= 0; k++) {
        b.len = base;
        b.s[base] = 0;
        fg_buf_printf(&b, "_%d", k);
    }
    const char *name = fg_intern(ctx, b.s);
    fg_buf_free(&b);
    return name;
}

/* A new weight tensor named "<root>.<input>" (made unique) of shape [c],
 * dtype like `like`, filled from vals. */
static int new_vector(fg_context *ctx, fg_graph *g, const fg_node *root, const char *input, const fg_tensor *like,
                      int64_t c, const float *vals)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s.%s", root->name, input);
    fg_tensor t;
    memset(&t, 0, sizeof t);
    t.name = fg_rewrite_fresh_name(ctx, g, b.s, 0);
    fg_buf_free(&b);
    t.dtype = like->dtype;
    t.layout = FG_LAYOUT_NCHW;
    t.rank = 1;
    t.shape[0] = c;
    t.producer = -1;
    t.is_weight = 1;
    t.data = fg_xmalloc((size_t)(c ? c : 1) * sizeof *t.data);
    memcpy(t.data, vals, (size_t)c * sizeof *t.data);
    t.loc = like->loc;
    return fg_graph_add_tensor(g, &t);
}

/* The tensor passed for a captured per-channel constant: itself when it is
 * already a [C] vector, else a new [C] vector of its values (a size-1 axis
 * 1 repeats its one value). */
static int channel_vector(fg_context *ctx, fg_graph *g, const fg_node *root, const char *input, int t, int64_t c)
{
    const fg_tensor *x = &g->tensors[t];
    if (x->rank == 1 && x->shape[0] == c)
        return t;
    int64_t n = fg_tensor_numel(x);
    float *all = fg_xmalloc((size_t)(n ? n : 1) * sizeof *all), *v = fg_xmalloc((size_t)(c ? c : 1) * sizeof *v);
    fg_tensor_values(x, all);
    for (int64_t k = 0; k < c; k++)
        v[k] = all[n == c ? k : 0];
    fg_tensor like = *x;
    int r = new_vector(ctx, g, root, input, &like, c, v);
    free(all);
    free(v);
    return r;
}

/* Replaces the match: the new node takes the root's slot, name, location
 * and output; the other matched nodes are removed (all precede the root:
 * they are its ancestors in a topologically sorted list). */
static void apply(fg_context *ctx, fg_graph *g, const fg_rewrite *rw, const rw_match *M)
{
    int root = M->bind[rw->nsteps - 1];
    fg_node nn;
    memset(&nn, 0, sizeof nn);
    const fg_node *rn = &g->nodes[root];
    nn.name = rn->name;
    nn.op = rw->op;
    nn.ninputs = rw->op->ninputs;
    nn.output = rn->output;
    nn.loc = rn->loc;
    rep_attrs(rw, M, nn.attrs);
    int64_t c = g->tensors[rn->output].rank >= 2 ? g->tensors[rn->output].shape[1] : 1;
    for (int i = 0; i < rw->op->ninputs; i++) {
        const fg_rw_rep_arg *a = &rw->args[i];
        switch (a->kind) {
        case FG_RW_REP_VAR: nn.inputs[i] = M->var[a->index]; break;
        case FG_RW_REP_CAPTURE:
            nn.inputs[i] = rw->cap_per_channel[a->index]
                               ? channel_vector(ctx, g, rn, rw->op->inputs[i].name, M->cap[a->index], c)
                               : M->cap[a->index];
            break;
        case FG_RW_REP_FILL: {
            float *v = fg_xmalloc((size_t)(c ? c : 1) * sizeof *v);
            for (int64_t k = 0; k < c; k++)
                v[k] = (float)a->fill;
            fg_tensor like = g->tensors[M->cap[a->index]];
            nn.inputs[i] = new_vector(ctx, g, rn, rw->op->inputs[i].name, &like, c, v);
            free(v);
            break;
        }
        default: nn.inputs[i] = -1; break;
        }
    }
    g->nodes[root] = nn;
    int keep = 0;
    for (int i = 0; i < g->nnodes; i++) {
        int dead = 0;
        for (int s = 0; s + 1 < rw->nsteps && !dead; s++)
            dead = M->bind[s] == i;
        if (!dead)
            g->nodes[keep++] = g->nodes[i];
    }
    g->nnodes = keep;
    fg_graph_recount(g);
}

/* "rewrite NAME (FILE:LINE): a, b, c -> op root". */
static char *note_text(const fg_graph *g, const fg_rewrite *rw, const rw_match *M)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "rewrite %s (%s:%d): ", rw->name, fg_short_path(rw->loc.file), rw->loc.line);
    for (int s = 0; s < rw->nsteps; s++)
        fg_buf_printf(&b, "%s%s", s ? ", " : "", g->nodes[M->bind[s]].name);
    fg_buf_printf(&b, " -> %s %s", rw->op->name, g->nodes[M->bind[rw->nsteps - 1]].name);
    return fg_buf_take(&b);
}

fg_status fg_rewrite_graph(fg_context *ctx, fg_graph *g, char ***notes, int *nnotes)
{
    if (!ctx || !g)
        return FG_ERR_INPUT;
    if (ctx->nrewrites == 0 || g->nnodes == 0)
        return FG_OK;
    fg_graph_recount(g);
    long budget = 4L * g->nnodes + 64, applied = 0;
    int changed = 1;
    while (changed) {
        changed = 0;
        for (int n = 0; n < g->nnodes; n++) {
            for (int r = 0; r < ctx->nrewrites; r++) {
                const fg_rewrite *rw = ctx->rewrites[r];
                int opi;
                rw_match M;
                if (!step_has_op(&rw->steps[rw->nsteps - 1], g->nodes[n].op, &opi) || !match_at(g, rw, n, &M) ||
                    !match_legal(g, rw, &M))
                    continue;
                if (applied >= budget) {
                    fg_diag_warn(ctx, rw->loc, "rewrites stopped after %ld applications on graph %s (do two "
                                 "rewrites undo each other?)", applied, g->name ? g->name : "?");
                    return FG_OK;
                }
                char *text = note_text(g, rw, &M);
                if (notes && nnotes) {
                    *notes = fg_xrealloc(*notes, (size_t)(*nnotes + 1) * sizeof **notes);
                    (*notes)[(*nnotes)++] = text;
                } else {
                    free(text);
                }
                apply(ctx, g, rw, &M);
                applied++;
                changed = 1;
                n -= rw->nsteps - 1;   /* the root's new index: every removed node preceded it */
                r = -1;                /* try every rewrite again at the replacement */
            }
        }
    }
    return FG_OK;
}
