/*
 * concat_inplace.c -- concat elimination (contract and rules in
 * concat_inplace.h): decides, after grouping, which concat inputs their
 * producers write straight into the concat's output, records the views on
 * the plan with one --explain line per decision, and drops the groups of
 * concats left with nothing to copy.
 *
 * Concats are visited in graph order and their inputs in slot order, so a
 * tensor read by several concats (DenseNet) is in place in the first one
 * that can take it and copied by the others.  Each placement is tentative
 * until the byte intervals of the buffer it joins pass the hazard check:
 * every kernel's writes and reads inside that buffer, resolved through the
 * views, must show no kernel reading bytes it writes, no two kernels
 * writing the same bytes, and no read before the write of the bytes read.
 */
#include "concat_inplace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "diag.h"
#include "kind.h"
#include "template.h"
#include "util.h"

/* A byte interval of a root buffer touched by group `group`. */
typedef struct span {
    int group;
    int tensor;
    int64_t lo, hi;
} span;

typedef struct cstate {
    fg_context *ctx;
    fg_plan *p;
    const fg_graph *g;
    fg_concat_views *v;
    int *writer;           /* tensor -> group whose output it is, or -1 */
    span *w, *r;           /* scratch: writes and reads inside one root */
    int nw, nr, wcap, rcap;
} cstate;

/* Storage bytes of tensor t (numel x element size). */
static int64_t tbytes(const fg_graph *g, int t)
{
    return fg_tensor_numel(&g->tensors[t]) * (int64_t)fg_dtype_size(g->tensors[t].dtype);
}

/* The tensor stored on its own that t lies inside (t itself when it is no
 * view), with t's byte offset in it in *off. */
static int resolve(const fg_concat_views *v, int t, int64_t *off)
{
    int64_t o = 0;
    for (int depth = 0; v->parent[t] >= 0 && depth <= v->ntensors; depth++) {
        o += v->offset[t];
        t = v->parent[t];
    }
    *off = o;
    return t;
}

/* The lone concat node of group gi whose output is the group's output, or -1. */
static int lone_concat(const fg_plan *p, int gi)
{
    const fg_group *grp = &p->groups[gi];
    if (grp->nnodes != 1)
        return -1;
    const fg_node *nd = &p->graph->nodes[grp->nodes[0]];
    return nd->op->kind == FG_OPK_CONCAT && nd->output == grp->output ? grp->nodes[0] : -1;
}

/* Stored order of t's axes (outermost first): NHWC rank 4 is N, H, W, C. */
static void stored_order(const fg_tensor *t, int order[FG_MAX_RANK])
{
    static const int nhwc[4] = {0, 2, 3, 1};
    for (int d = 0; d < t->rank; d++)
        order[d] = t->rank == 4 && t->layout == FG_LAYOUT_NHWC ? nhwc[d] : d;
}

/* Elements of concat output y between one index of the concat axis and
 * the next, when every stored axis before `axis` has extent 1 (the slices
 * are contiguous); else -1 with the axis that breaks it in *bad. */
static int64_t slice_inner(const fg_tensor *y, int axis, int *bad)
{
    int order[FG_MAX_RANK], pos = 0;
    stored_order(y, order);
    while (pos < y->rank && order[pos] != axis)
        pos++;
    for (int k = 0; k < pos; k++)
        if (y->shape[order[k]] != 1) {
            *bad = order[k];
            return -1;
        }
    int64_t inner = 1;
    for (int k = pos + 1; k < y->rank; k++)
        inner *= y->shape[order[k]];
    return inner;
}

/* Element offset of input slot `slot` of concat node nd inside its output
 * (inner as slice_inner gave). */
static int64_t slot_elems(const fg_graph *g, const fg_node *nd, int axis, int slot, int64_t inner)
{
    int64_t at = 0;
    for (int i = 0; i < slot; i++)
        at += g->tensors[nd->inputs[i]].shape[axis];
    return at * inner;
}

int fg_concat_slot_inplace(const fg_plan *p, int node, int slot)
{
    if (!p || !p->views || node < 0 || node >= p->graph->nnodes)
        return 0;
    const fg_node *nd = &p->graph->nodes[node];
    if (nd->op->kind != FG_OPK_CONCAT || slot < 0 || slot >= nd->ninputs || nd->inputs[slot] < 0)
        return 0;
    int t = nd->inputs[slot];
    return p->views->parent[t] == nd->output && p->views->slot[t] == slot;
}

int fg_concat_view_parent(const fg_plan *p, int t, int64_t *offset)
{
    if (offset)
        *offset = 0;
    if (!p || !p->views || t < 0 || t >= p->views->ntensors || p->views->parent[t] < 0)
        return -1;
    if (offset)
        *offset = p->views->offset[t];
    return p->views->parent[t];
}

/* ---- the hazard check ---------------------------------------------------- */

/* Appends the interval [lo, hi) of tensor's bytes, touched by group. */
static void add_span(span **v, int *n, int *cap, int group, int tensor, int64_t lo, int64_t hi)
{
    span *s = FG_PUSH(*v, *n, *cap);
    s->group = group;
    s->tensor = tensor;
    s->lo = lo;
    s->hi = hi;
}

/* Collects, for every group, the byte intervals it writes and reads inside
 * buffer `root` (after resolving views).  A lone concat writes only its
 * copied slots and reads only their inputs; any other group writes its
 * output and reads every tensor it takes from memory. */
static void collect_spans(cstate *S, int root)
{
    const fg_plan *p = S->p;
    const fg_graph *g = S->g;
    S->nw = S->nr = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        const fg_group *grp = &p->groups[gi];
        int cn = lone_concat(p, gi);
        int64_t off;
        if (cn >= 0) {
            const fg_node *nd = &g->nodes[cn];
            int r = resolve(S->v, nd->output, &off), any = 0;
            for (int i = 0; i < nd->ninputs; i++)
                any |= nd->inputs[i] >= 0 && fg_concat_slot_inplace(p, cn, i);
            int axis = fg_concat_axis(nd, &g->tensors[nd->output]), bad;
            int64_t inner = any && axis >= 0 ? slice_inner(&g->tensors[nd->output], axis, &bad) : -1;
            int64_t es = (int64_t)fg_dtype_size(g->tensors[nd->output].dtype);
            if (inner < 0 && r == root)   /* nothing in place: the whole output */
                add_span(&S->w, &S->nw, &S->wcap, gi, nd->output, off, off + tbytes(g, nd->output));
            for (int i = 0; i < nd->ninputs; i++) {
                int t = nd->inputs[i];
                if (t < 0 || fg_concat_slot_inplace(p, cn, i))
                    continue;
                if (inner >= 0 && r == root) {
                    int64_t lo = off + slot_elems(g, nd, axis, i, inner) * es;
                    add_span(&S->w, &S->nw, &S->wcap, gi, nd->output, lo, lo + tbytes(g, t));
                }
                int64_t toff;
                if (resolve(S->v, t, &toff) == root)
                    add_span(&S->r, &S->nr, &S->rcap, gi, t, toff, toff + tbytes(g, t));
            }
            continue;
        }
        if (resolve(S->v, grp->output, &off) == root)
            add_span(&S->w, &S->nw, &S->wcap, gi, grp->output, off, off + tbytes(g, grp->output));
        for (int k = 0; k < grp->nnodes; k++) {
            const fg_node *nd = &g->nodes[grp->nodes[k]];
            for (int j = 0; j < nd->ninputs; j++) {
                int t = nd->inputs[j], made = 0;
                if (t < 0)
                    continue;
                for (int q = 0; q < grp->nnodes && !made; q++)
                    made = g->nodes[grp->nodes[q]].output == t;
                int64_t toff;
                if (!made && resolve(S->v, t, &toff) == root)
                    add_span(&S->r, &S->nr, &S->rcap, gi, t, toff, toff + tbytes(g, t));
            }
        }
    }
}

/* A group named by its last node, as --explain lines name kernels. */
static const char *group_name(const cstate *S, int gi)
{
    return S->g->nodes[S->p->groups[gi].nodes[S->p->groups[gi].nnodes - 1]].name;
}

/* Checks the kernels' accesses inside buffer root; 0 and the first problem
 * in why when one kernel reads bytes it writes, two kernels write the same
 * bytes, or a kernel reads bytes a later kernel writes. */
static int root_safe(cstate *S, int root, char *why, size_t whysz)
{
    collect_spans(S, root);
    const fg_graph *g = S->g;
    for (int a = 0; a < S->nw; a++) {
        const span *x = &S->w[a];
        for (int b = a + 1; b < S->nw; b++) {
            const span *y = &S->w[b];
            if (x->lo < y->hi && y->lo < x->hi) {
                snprintf(why, whysz, "the kernels of %s and %s would write the same bytes of %s", group_name(S, x->group),
                         group_name(S, y->group), g->tensors[root].name);
                return 0;
            }
        }
        for (int b = 0; b < S->nr; b++) {
            const span *y = &S->r[b];
            if (!(x->lo < y->hi && y->lo < x->hi) || y->group > x->group)
                continue;
            if (y->group == x->group)
                snprintf(why, whysz, "the kernel of %s would read %s while writing %s over it",
                         group_name(S, x->group), g->tensors[y->tensor].name, g->tensors[x->tensor].name);
            else
                snprintf(why, whysz, "the kernel of %s would read %s before the kernel of %s writes it",
                         group_name(S, y->group), g->tensors[y->tensor].name, group_name(S, x->group));
            return 0;
        }
    }
    return 1;
}

int fg_concat_views_check(const fg_plan *p, char *why, size_t whysz)
{
    if (!p || !p->views)
        return 1;
    cstate S;
    memset(&S, 0, sizeof S);
    S.p = (fg_plan *)p;
    S.g = p->graph;
    S.v = p->views;
    int ok = 1;
    char *seen = fg_xcalloc((size_t)p->views->ntensors + 1, 1);
    for (int t = 0; t < p->views->ntensors && ok; t++) {
        int64_t off;
        int root = p->views->parent[t] >= 0 ? resolve(p->views, t, &off) : -1;
        if (root < 0 || seen[root])
            continue;
        seen[root] = 1;
        if (p->views->parent[root] >= 0) {
            snprintf(why, whysz, "the views of %s form a cycle", p->graph->tensors[t].name);
            ok = 0;
            break;
        }
        ok = root_safe(&S, root, why, whysz);
    }
    free(seen);
    free(S.w);
    free(S.r);
    return ok;
}

/* ---- the decision -------------------------------------------------------- */

/* Takes b's text as the next --explain line. */
static void line(cstate *S, fg_buf *b)
{
    *FG_PUSH(S->v->lines, S->v->nlines, S->v->lines_cap) = fg_buf_take(b);
}

/* 1, with the reason in why, when slot i of concat node n (its slice at
 * off bytes) cannot be written in place; 0 when the rules before the
 * hazard check allow it.  Places nothing. */
static int slot_refused(cstate *S, int n, int i, int64_t off, char *why, size_t whysz)
{
    const fg_graph *g = S->g;
    const fg_node *nd = &g->nodes[n];
    const fg_tensor *y = &g->tensors[nd->output];
    int t = nd->inputs[i];
    const fg_tensor *x = &g->tensors[t];
    if (x->is_input)
        return snprintf(why, whysz, "%s is a graph input", x->name), 1;
    if (x->is_weight)
        return snprintf(why, whysz, "%s is a constant", x->name), 1;
    if (x->is_output)
        return snprintf(why, whysz, "%s is a graph output (stored where the caller binds it)", x->name), 1;
    if (S->writer[t] < 0)
        return snprintf(why, whysz, "%s is not stored by a kernel of its own", x->name), 1;
    if (x->dtype != y->dtype)
        return snprintf(why, whysz, "%s is %s, the concat's output %s", x->name, fg_dtype_name(x->dtype),
                        fg_dtype_name(y->dtype)), 1;
    if (x->rank == 4 && x->layout != y->layout)
        return snprintf(why, whysz, "%s is stored %s, the concat's output %s", x->name, fg_layout_name(x->layout),
                        fg_layout_name(y->layout)), 1;
    for (int j = 0; j < i; j++)
        if (nd->inputs[j] == t && fg_concat_slot_inplace(S->p, n, j))
            return snprintf(why, whysz, "%s is written in place at input %d already", x->name, j), 1;
    if (S->v->parent[t] >= 0)
        return snprintf(why, whysz, "%s is written in place in %s already", x->name,
                        g->tensors[S->v->parent[t]].name), 1;
    if (off % FG_CONCAT_VIEW_ALIGN)
        return snprintf(why, whysz, "its offset, %" PRId64 " bytes, is not a multiple of %d (the alignment of "
                        "vectorized accesses)", off, FG_CONCAT_VIEW_ALIGN), 1;
    return 0;
}

/* Decides the inputs of concat node n. */
static void decide_concat(cstate *S, int n)
{
    const fg_graph *g = S->g;
    fg_concat_views *v = S->v;
    const fg_node *nd = &g->nodes[n];
    const fg_tensor *y = &g->tensors[nd->output];
    int gi = S->p->node_group[n];
    fg_buf b = {0};
    fg_buf_printf(&b, "concat %s: ", nd->name);
    if (gi < 0 || lone_concat(S->p, gi) != n) {
        fg_buf_put(&b, "inputs copied because its output is not stored (");
        if (gi >= 0) {
            const fg_group *grp = &S->p->groups[gi];
            fg_buf_put(&b, "one kernel also applies");
            for (int k = 0; k < grp->nnodes; k++)
                if (grp->nodes[k] != n)
                    fg_buf_printf(&b, " %s", g->nodes[grp->nodes[k]].name);
        } else {
            fg_buf_put(&b, "no kernel writes it");
        }
        fg_buf_put(&b, ")");
        line(S, &b);
        return;
    }
    int axis = fg_concat_axis(nd, y), bad = -1;
    int64_t inner = axis >= 0 ? slice_inner(y, axis, &bad) : -1;
    if (inner < 0) {
        fg_buf_printf(&b, "inputs copied because its slices are strided (axis %d, of extent %" PRId64
                          ", precedes the concat axis %d in the %s layout)",
                      bad, bad >= 0 ? y->shape[bad] : 0, axis, y->rank == 4 ? fg_layout_name(y->layout) : "row-major");
        line(S, &b);
        return;
    }
    fg_buf_free(&b);
    int64_t es = (int64_t)fg_dtype_size(y->dtype);
    for (int i = 0; i < nd->ninputs; i++) {
        int t = nd->inputs[i];
        if (t < 0)
            continue;
        int64_t off = slot_elems(g, nd, axis, i, inner) * es;
        char why[512];
        fg_buf_printf(&b, "concat %s: input %d (%s) ", nd->name, i, g->tensors[t].name);
        if (!slot_refused(S, n, i, off, why, sizeof why)) {
            v->parent[t] = nd->output;
            v->slot[t] = i;
            v->offset[t] = off;
            int64_t roff;
            int root = resolve(v, nd->output, &roff);
            if (root_safe(S, root, why, sizeof why)) {
                v->nviews++;
                fg_buf_printf(&b, "written in place at offset %" PRId64 " bytes of %s", off, y->name);
                line(S, &b);
                continue;
            }
            v->parent[t] = -1;
            v->slot[t] = -1;
            v->offset[t] = 0;
        }
        fg_buf_printf(&b, "copied because %s", why);
        line(S, &b);
    }
}

/* Removes the groups of concats whose every input is in place; their nodes
 * map to group -1. */
static void drop_empty(cstate *S)
{
    fg_plan *p = S->p;
    const fg_graph *g = S->g;
    int *remap = fg_xmalloc((size_t)(p->ngroups ? p->ngroups : 1) * sizeof *remap);
    int kept = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        int cn = lone_concat(p, gi), all = cn >= 0;
        for (int i = 0; all && i < g->nodes[cn].ninputs; i++)
            all = g->nodes[cn].inputs[i] < 0 || fg_concat_slot_inplace(p, cn, i);
        if (all) {
            remap[gi] = -1;
            free(p->groups[gi].choice);
            S->v->eliminated++;
            fg_buf b = {0};
            fg_buf_printf(&b, "concat %s: no kernel (every input is written in place)", g->nodes[cn].name);
            line(S, &b);
            continue;
        }
        remap[gi] = kept;
        p->groups[kept++] = p->groups[gi];
    }
    fg_plan_renumber(p, remap, kept);
    free(remap);
}

void fg_plan_renumber(fg_plan *p, const int *remap, int kept)
{
    for (int n = 0; n < p->graph->nnodes; n++)
        if (p->node_group[n] >= 0)
            p->node_group[n] = remap[p->node_group[n]];
    p->ngroups = kept;
}

fg_status fg_concat_inplace_plan(fg_context *ctx, fg_plan *p)
{
    const fg_graph *g = p->graph;
    int nconcat = 0;
    for (int n = 0; n < g->nnodes; n++)
        nconcat += g->nodes[n].op->kind == FG_OPK_CONCAT;
    if (!nconcat)
        return FG_OK;
    cstate S;
    memset(&S, 0, sizeof S);
    S.ctx = ctx;
    S.p = p;
    S.g = g;
    fg_concat_views *v = fg_xcalloc(1, sizeof *v);
    size_t nt = (size_t)g->ntensors + 1;
    v->ntensors = g->ntensors;
    v->parent = fg_xmalloc(nt * sizeof *v->parent);
    v->slot = fg_xmalloc(nt * sizeof *v->slot);
    v->offset = fg_xcalloc(nt, sizeof *v->offset);
    S.writer = fg_xmalloc(nt * sizeof *S.writer);
    for (int t = 0; t < g->ntensors; t++)
        v->parent[t] = v->slot[t] = S.writer[t] = -1;
    S.v = v;
    p->views = v;
    fg_status st = FG_OK;
    for (int gi = 0; gi < p->ngroups; gi++) {
        int t = p->groups[gi].output;
        if (t < 0 || t >= g->ntensors || S.writer[t] >= 0) {
            st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "concat elimination: group %d writes tensor %d, "
                               "which another group writes or which does not exist", gi, t);
            break;
        }
        S.writer[t] = gi;
    }
    for (int n = 0; n < g->nnodes && st == FG_OK; n++)
        if (g->nodes[n].op->kind == FG_OPK_CONCAT && !g->nodes[n].folded)
            decide_concat(&S, n);
    if (st == FG_OK)
        drop_empty(&S);
    char why[512];
    if (st == FG_OK && !fg_concat_views_check(p, why, sizeof why))
        st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "concat elimination: %s", why);
    free(S.writer);
    free(S.w);
    free(S.r);
    return st;
}

void fg_concat_views_free(fg_concat_views *v)
{
    if (!v)
        return;
    free(v->parent);
    free(v->slot);
    free(v->offset);
    for (int i = 0; i < v->nlines; i++)
        free(v->lines[i]);
    free(v->lines);
    for (int i = 0; i < v->nalias_lines; i++)
        free(v->alias_lines[i]);
    free(v->alias_lines);
    free(v);
}
