/*
 * plan.c -- the planner: matches the context's fusion rules on a graph and
 * builds the fused groups of an fg_plan (ir.h), then runs the rules' folds
 * on the plan's private copy of the graph and resolves each group's
 * epilogue to graph indices.
 *
 * Matching walks the nodes in graph (topological) order.  A node not grouped
 * yet anchors a small backtracking search per rule whose first step accepts
 * it; the best complete match (priority, then most nodes, then load order)
 * becomes a group.  Legality lives here, once: every fused intermediate has
 * exactly one consumer and is not a graph output, every step consumes the
 * previous step's output (as the input its `chain_input` names), all nodes
 * share the output dtype and shape (but an anchor that a `chain_input` step
 * takes: attention's P V), the rule's dtype and layout guards hold, and a node belongs to one group.  When a rule
 * almost matched, a note says which condition failed (--explain).
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "reshape_alias.h"
#include "context.h"
#include "expr.h"
#include "fold.h"
#include "layout_assign.h"
#include "hook.h"
#include "kind.h"
#include "rewrite.h"
#include "shape.h"
#include "template.h"
#include "util.h"
#include "where.h"

/* A candidate match of one rule: nodes in chain order and the step each took. */
typedef struct pmatch {
    int n;
    int nodes[FG_MAX_GROUP_NODES];
    int steps[FG_MAX_GROUP_NODES];
} pmatch;

/* A near-miss note: child was not fused into parent. */
typedef struct pnote {
    int child, parent;
    char *text;
} pnote;

/* Op pointer -> index into ctx->ops, sorted by pointer for bsearch. */
typedef struct opslot {
    const fg_opdef *op;
    int idx;
} opslot;

typedef struct planner {
    fg_context *ctx;
    fg_graph *g;
    int *cons_start;       /* consumers of tensor t: cons[cons_start[t] .. cons_start[t+1]), unique, ascending */
    int *cons;
    int *reads;            /* tensor -> number of reads (a node reading twice counts twice) */
    int *member;           /* node -> group index, -1 while free */
    fg_group *groups;
    int ngroups, groups_cap;
    int (*gsteps)[FG_MAX_GROUP_NODES];   /* per group: the rule step of each node */
    int gsteps_cap;
    pnote *notes;
    int nnotes, notes_cap;
    opslot *opidx;         /* sorted */
    int nopidx;
    int **rules_by_op;     /* per ctx op index: rule indices (ascending), -1 terminated */
    fg_status st;          /* first hook error */
} planner;

/* ---- small helpers ----------------------------------------------------- */

static int op_lookup(const planner *P, const fg_opdef *op)
{
    int lo = 0, hi = P->nopidx - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (P->opidx[mid].op == op)
            return P->opidx[mid].idx;
        if ((uintptr_t)P->opidx[mid].op < (uintptr_t)op)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int cmp_opslot(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const opslot *)a)->op, y = (uintptr_t)((const opslot *)b)->op;
    return x < y ? -1 : x > y;
}

/* Nonzero when step st names op (by alternation or by kind). */
static int step_names_op(const fg_rule_step *st, const fg_opdef *op)
{
    for (int i = 0; i < st->nops; i++)
        if (st->ops[i] == op)
            return 1;
    return (st->kinds & (1u << op->kind)) != 0;
}

/* Accepts node for step s of r: 1 yes; -1 when the step does not name the
 * node's op at all; 0 when it does but `where` or the predicate hook is
 * false (why is filled in). */
static int step_accepts(planner *P, const fg_rule *r, int s, int node, char *why, size_t whysz)
{
    const fg_rule_step *st = &r->steps[s];
    const fg_node *nd = &P->g->nodes[node];
    if (!step_names_op(st, nd->op))
        return -1;
    if (st->where && !fg_where_holds(st->where, st->where_vars, st->nwhere_vars, nd)) {
        snprintf(why, whysz, "where \"%s\" is false", st->where_src ? st->where_src : "?");
        return 0;
    }
    if (st->where_hook) {
        int res = 0;
        fg_status hs = fg_hook_predicate(P->ctx, st->where_hook, st->loc, P->g, node, &res);
        if (hs != FG_OK) {
            if (P->st == FG_OK)
                P->st = hs;
            snprintf(why, whysz, "hook '%s' failed", st->where_hook);
            return 0;
        }
        if (!res) {
            snprintf(why, whysz, "hook '%s' returned false", st->where_hook);
            return 0;
        }
    }
    return 1;
}

static void add_note(planner *P, const fg_rule *r, int child, int parent, const char *why)
{
    fg_buf b = {0};
    const fg_graph *g = P->g;
    if (parent >= 0)
        fg_buf_printf(&b, "%s not fused into %s", g->nodes[child].name, g->nodes[parent].name);
    else
        fg_buf_printf(&b, "%s not matched", g->nodes[child].name);
    fg_buf_printf(&b, " (rule %s at %s:%d): %s", r->name, fg_short_path(r->loc.file), r->loc.line, why);
    pnote *nt = FG_PUSH(P->notes, P->nnotes, P->notes_cap);
    nt->child = child;
    nt->parent = parent;
    nt->text = fg_buf_take(&b);
}

static void mask_names(unsigned mask, int count, const char *(*name)(int), fg_buf *b)
{
    int first = 1;
    for (int i = 0; i < count; i++)
        if (mask & (1u << i)) {
            fg_buf_printf(b, "%s%s", first ? "" : ", ", name(i));
            first = 0;
        }
}
static const char *dtype_name_i(int i) { return fg_dtype_name((fg_dtype)i); }
static const char *layout_name_i(int i) { return fg_layout_name((fg_layout)i); }

/* ---- epilogue, candidates and templates ---------------------------------- */

/* The epilogue stages of a group of rule r (NULL: a lone node) over
 * nodes[0..n) with their rule steps: rule stages resolved to graph indices;
 * stages of absent optional steps, absent inputs or folded nodes are
 * skipped; an APPLY of a repeat step gives one entry per node.  Writes at
 * most cap entries to out and returns the count (which may exceed cap). */
static int collect_epilogue(const fg_graph *g, const fg_rule *r, const int *nodes, const int *steps, int n,
                            fg_group_epi *out, int cap)
{
    int cnt = 0;
#define PUSH_EPI(k, nd_, t_, h_)                                                                              \
    do {                                                                                                       \
        if (cnt < cap)                                                                                         \
            out[cnt] = (fg_group_epi){.kind = (k), .node = (nd_), .tensor = (t_), .hook = (h_)};               \
        cnt++;                                                                                                 \
    } while (0)
    if (!r) {
        const fg_node *nd = &g->nodes[nodes[0]];
        fg_kind_role role = fg_kind(nd->op->kind)->role;
        int bi = fg_node_input(nd, "bias");
        if (role == FG_ROLE_ANCHOR && bi >= 0 && nd->inputs[bi] >= 0)
            PUSH_EPI(FG_EPI_BIAS, nodes[0], nd->inputs[bi], NULL);
        else if (role == FG_ROLE_ELEMENTWISE && !nd->folded)
            PUSH_EPI(FG_EPI_APPLY, nodes[0], -1, NULL);
        return cnt;
    }
    for (int e = 0; e < r->nepilogue; e++) {
        const fg_epi_stage *es = &r->epilogue[e];
        for (int i = 0; i < n; i++) {
            if (es->step >= 0 && steps[i] != es->step)
                continue;
            if (es->step < 0 && i > 0)
                break;
            int node = nodes[i];
            const fg_node *nd = &g->nodes[node];
            if (es->kind == FG_EPI_BIAS) {
                const fg_rule_step *rs = &r->steps[es->step];
                int bi = -1;
                if (rs->nops > 0 && es->input >= 0 && es->input < rs->ops[0]->ninputs)
                    bi = fg_node_input(nd, rs->ops[0]->inputs[es->input].name);
                else if (es->input >= 0 && es->input < nd->ninputs)
                    bi = es->input;
                if (bi >= 0 && nd->inputs[bi] >= 0 && !nd->folded)
                    PUSH_EPI(FG_EPI_BIAS, node, nd->inputs[bi], NULL);
                break;
            } else if (es->kind == FG_EPI_APPLY) {
                if (!nd->folded)
                    PUSH_EPI(FG_EPI_APPLY, node, -1, NULL);
            } else {
                PUSH_EPI(FG_EPI_HOOK, node, -1, es->hook);
                break;
            }
        }
    }
#undef PUSH_EPI
    return cnt;
}

/* The number of leading nodes of a match that its rule's `input_map:` steps
 * took (the anchor's input map; 0: none).  steps[i] < 0: a lone node. */
static int match_nmap(const fg_rule *r, const int *steps, int n)
{
    int k = 0;
    while (r && k < n - 1 && steps[k] >= 0 && r->steps[steps[k]].input_map)
        k++;
    return k;
}

/* Describes a candidate group for the template checks: main node, epilogue
 * stages and tensor parameters (upper bounds: folds may only remove some). */
static void make_cand(const fg_graph *g, const fg_rule *r, const int *nodes, const int *steps, int n, fg_tcand *c)
{
    enum { MAXT = FG_MAX_GROUP_NODES * (FG_MAX_INPUTS + 1) };
    memset(c, 0, sizeof *c);
    c->g = g;
    c->rule = r;
    c->nnodes = n;
    c->nodes = nodes;
    int nmap = match_nmap(r, steps, n);
    const fg_node *first = &g->nodes[nodes[nmap]];
    c->anchor = fg_kind(first->op->kind)->role == FG_ROLE_ANCHOR ? nodes[nmap] : -1;
    c->main_node = c->anchor;
    for (int i = 0; i < n && c->main_node < 0; i++)
        if (!g->nodes[nodes[i]].folded)
            c->main_node = nodes[i];
    if (c->main_node < 0)
        c->main_node = nodes[0];
    fg_group_epi epi[FG_MAX_GROUP_NODES * 2];
    int ne = collect_epilogue(g, r, nodes, steps, n, epi, (int)FG_COUNTOF(epi));
    c->nepi = ne;
    if (r && r->nepilogue == 0)
        c->nepi = n - 1;   /* every node after the main one is applied */
    if (c->anchor >= 0) {
        int bi = fg_node_input(first, "bias");
        int bt = bi >= 0 ? first->inputs[bi] : -1, covered = 0;
        for (int i = 0; i < ne && i < (int)FG_COUNTOF(epi); i++)
            covered |= epi[i].kind == FG_EPI_BIAS && epi[i].tensor == bt;
        if (bt >= 0 && !covered)
            c->nepi++;
    }
    int seen[MAXT], ns = 0;
    for (int i = 0; i < n; i++) {
        const fg_node *nd = &g->nodes[nodes[i]];
        int ts[FG_MAX_INPUTS + 1], nt = 0;
        for (int j = 0; j < nd->ninputs; j++) {
            int t = nd->inputs[j];
            int inside = 0;
            for (int k = 0; k < i && t >= 0 && !inside; k++)
                inside = g->tensors[t].producer == nodes[k];
            if (t >= 0 && !inside)
                ts[nt++] = t;
        }
        if (i == n - 1)
            ts[nt++] = nd->output;
        for (int j = 0; j < nt; j++) {
            int dup = 0;
            for (int k = 0; k < ns && !dup; k++)
                dup = seen[k] == ts[j];
            if (!dup && ns < MAXT)
                seen[ns++] = ts[j];
        }
    }
    c->ntensors = ns;
}

/* A candidate whose leading nmap nodes are the anchor's input map: the
 * template that would run the group without the map (the default choice
 * for c's nodes after the map) must read through the map, so that saving
 * the copy never trades a faster template (tensor cores, vector loads) for
 * one that reads element by element.  0 with why when it cannot. */
static int map_keeps_template(const fg_context *ctx, const fg_tcand *c, int nmap, char *why, size_t whysz)
{
    fg_tcand alone = *c;
    alone.nodes = c->nodes + nmap;
    alone.nnodes = c->nnodes - nmap;
    const fg_template *cands[64];
    const fg_node *main = &c->g->nodes[c->main_node];
    const char *want = c->rule ? c->rule->template_name : fg_kind(main->op->kind)->family;
    int n = fg_template_candidates(ctx, want, main->op->kind, cands, (int)FG_COUNTOF(cands));
    const fg_template *best = NULL;
    char r[384];
    for (int i = 0; i < n; i++)
        if (fg_template_check(cands[i], &alone, r, sizeof r) && (!best || cands[i]->priority > best->priority))
            best = cands[i];
    if (best && !fg_template_input_map_ok(best, r, sizeof r)) {
        snprintf(why, whysz, "the input map stays a copy: %s, the template for %s alone, %s", best->name, main->name,
                 r);
        return 0;
    }
    return 1;
}

/* Checks the templates that may run candidate c (the rule's `template:`,
 * else the main node's kind family for a lone node).  Returns the number
 * accepted, with acc[0..) in registry order and *best the default choice
 * (highest priority, then registry order).  With 0 accepted, why holds every
 * refusal; text (optional) receives the whole story for --explain. */
static int check_templates(const fg_context *ctx, const fg_tcand *c, const fg_template **acc, int *best, char *why,
                           size_t whysz, fg_buf *text)
{
    int nmap = 0;
    while (nmap < c->nnodes && c->nodes[nmap] != c->anchor && c->anchor >= 0)
        nmap++;
    if (c->anchor < 0 || nmap == c->nnodes)
        nmap = 0;
    if (nmap > 0 && !map_keeps_template(ctx, c, nmap, why, whysz))
        return 0;
    const fg_template *cands[64];
    const fg_node *main = &c->g->nodes[c->main_node];
    const char *want = c->rule ? c->rule->template_name : fg_kind(main->op->kind)->family;
    int n = fg_template_candidates(ctx, want, main->op->kind, cands, (int)FG_COUNTOF(cands)), na = 0;
    fg_buf refused = {0};
    char r[384];
    *best = -1;
    for (int i = 0; i < n; i++) {
        if (fg_template_check(cands[i], c, r, sizeof r) && (nmap == 0 || fg_template_input_map_ok(cands[i], r, sizeof r))) {
            if (*best < 0 || cands[i]->priority > acc[*best]->priority)
                *best = na;
            acc[na++] = cands[i];
        } else {
            fg_buf_printf(&refused, "%s%s refused: %s", refused.len ? "; " : "", cands[i]->name, r);
        }
    }
    if (n == 0)
        snprintf(why, whysz, "no template%s%s%s computes %s nodes", want ? " of '" : "", want ? want : "",
                 want ? "'" : "", fg_op_kind_name(main->op->kind));
    else if (na == 0)
        snprintf(why, whysz, "no template can run it: %s", refused.s);
    if (text && na > 0) {
        fg_buf_printf(text, "%s chosen (priority %d)", acc[*best]->name, acc[*best]->priority);
        for (int i = 0; i < na; i++)
            if (i != *best)
                fg_buf_printf(text, "; %s accepted (priority %d)", acc[i]->name, acc[i]->priority);
        if (refused.len)
            fg_buf_printf(text, "; %s", refused.s);
    }
    fg_buf_free(&refused);
    return na;
}

/* ---- the search -------------------------------------------------------- */

typedef struct search {
    planner *P;
    const fg_rule *r;
    pmatch cur, best;
    int have_best;
} search;

static void try_step(search *S, int s);

/* Whole-match conditions: dtype and layout guards, no cycles through
 * apply inputs.  Records a note and returns 0 when one fails. */
static int match_legal(search *S)
{
    planner *P = S->P;
    const fg_graph *g = P->g;
    const fg_rule *r = S->r;
    const pmatch *m = &S->cur;
    unsigned all_dt = (1u << FG_DTYPE_COUNT) - 1, all_lay = (1u << FG_LAYOUT_COUNT) - 1;
    const fg_tensor *out0 = &g->tensors[g->nodes[m->nodes[0]].output];
    int child = m->n > 1 ? m->nodes[1] : m->nodes[0], parent = m->n > 1 ? m->nodes[0] : -1;
    char why[512];
    if (r->dtypes && (r->dtypes & all_dt) != all_dt && !(r->dtypes & (1u << out0->dtype))) {
        fg_buf b = {0};
        fg_buf_printf(&b, "dtype %s not allowed by rule %s (dtypes: ", fg_dtype_name(out0->dtype), r->name);
        mask_names(r->dtypes, FG_DTYPE_COUNT, dtype_name_i, &b);
        fg_buf_put(&b, ")");
        if (m->n > 1)
            add_note(P, r, child, parent, b.s);
        fg_buf_free(&b);
        return 0;
    }
    for (int i = 0; i < m->n; i++) {
        const fg_tensor *t = &g->tensors[g->nodes[m->nodes[i]].output];
        if (t->rank != 4)
            continue;
        if (r->layouts && (r->layouts & all_lay) != all_lay && !(r->layouts & (1u << t->layout))) {
            fg_buf b = {0};
            fg_buf_printf(&b, "layout %s not allowed by rule %s (layouts: ", fg_layout_name(t->layout), r->name);
            mask_names(r->layouts, FG_LAYOUT_COUNT, layout_name_i, &b);
            fg_buf_put(&b, ")");
            if (m->n > 1)
                add_note(P, r, child, parent, b.s);
            fg_buf_free(&b);
            return 0;
        }
    }
    /* An input map is a pure permutation of the elements: reshapes and
     * transposes only, each keeping the element count, and a node after it. */
    int nmap = match_nmap(r, m->steps, m->n);
    for (int i = 0; i < nmap; i++) {
        const fg_node *nd = &g->nodes[m->nodes[i]];
        if (!(fg_kind(nd->op->kind)->traits & FG_KIND_PERMUTATION) || nd->ninputs < 1 || nd->inputs[0] < 0 ||
            fg_tensor_numel(&g->tensors[nd->inputs[0]]) != fg_tensor_numel(&g->tensors[nd->output])) {
            snprintf(why, sizeof why, "%s (op %s) is not a pure permutation of its input's elements, so it cannot "
                     "be an input map", nd->name, nd->op->name);
            add_note(P, r, m->nodes[nmap < m->n ? nmap : i], m->nodes[i], why);
            return 0;
        }
    }
    if (nmap > 0 && nmap == m->n)
        return 0;
    /* An input of a later node must not come from itself or a later node of the group. */
    for (int i = 1; i < m->n; i++) {
        const fg_node *nd = &g->nodes[m->nodes[i]];
        for (int j = 0; j < nd->ninputs; j++) {
            if (nd->inputs[j] < 0)
                continue;
            int prod = g->tensors[nd->inputs[j]].producer;
            for (int k = i; k < m->n; k++)
                if (prod == m->nodes[k]) {
                    snprintf(why, sizeof why, "input %s of %s is produced inside the group",
                             g->tensors[nd->inputs[j]].name, nd->name);
                    add_note(P, r, m->nodes[i], m->nodes[i - 1], why);
                    return 0;
                }
        }
    }
    return 1;
}

/* Capability before commitment: every built-in fold of the rule and at
 * least one template must accept the match; otherwise a note says why and
 * the search goes on with smaller matches. */
static int match_capable(search *S)
{
    planner *P = S->P;
    const fg_rule *r = S->r;
    const pmatch *m = &S->cur;
    int child = m->n > 1 ? m->nodes[m->n - 1] : m->nodes[0], parent = m->n > 1 ? m->nodes[m->n - 2] : -1;
    char why[1024];
    for (int f = 0; f < r->nfolds; f++)
        if (!fg_fold_check(r, &r->folds[f], P->g, m->nodes, m->n, why, sizeof why)) {
            if (m->n > 1)
                add_note(P, r, child, parent, why);
            return 0;
        }
    fg_tcand c;
    const fg_template *acc[64];
    int best;
    make_cand(P->g, r, m->nodes, m->steps, m->n, &c);
    c.arch = fg_target_arch(P->ctx);
    int nmap = match_nmap(r, m->steps, m->n);
    if (nmap > 0 && c.anchor >= 0 && !map_keeps_template(P->ctx, &c, nmap, why, sizeof why)) {
        add_note(P, r, c.anchor, m->nodes[nmap - 1], why);
        return 0;
    }
    if (check_templates(P->ctx, &c, acc, &best, why, sizeof why, NULL) == 0) {
        if (m->n > 1)
            add_note(P, r, child, parent, why);
        return 0;
    }
    return 1;
}

static void complete(search *S)
{
    if (S->have_best && S->cur.n <= S->best.n)
        return;
    if (!match_legal(S) || !match_capable(S))
        return;
    S->best = S->cur;
    S->have_best = 1;
}

static int same_shape(const fg_tensor *a, const fg_tensor *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

/* Takes one node for step s: a consumer of the last matched node's output.
 * A fused node must not change the shape (a broadcast that grows the output
 * cannot run in the producer's epilogue). */
static void take_step(search *S, int s)
{
    planner *P = S->P;
    const fg_graph *g = P->g;
    const fg_rule *r = S->r;
    if (S->cur.n >= FG_MAX_GROUP_NODES)
        return;
    int prev = S->cur.nodes[S->cur.n - 1];
    int t = g->nodes[prev].output;
    const fg_tensor *tt = &g->tensors[t];
    char why[512];
    for (int k = P->cons_start[t]; k < P->cons_start[t + 1]; k++) {
        int c = P->cons[k];
        int a = step_accepts(P, r, s, c, why, sizeof why);
        if (a < 0)
            continue;
        if (a == 0) {
            add_note(P, r, c, prev, why);
            continue;
        }
        if (tt->is_output) {
            snprintf(why, sizeof why, "%s's output is a graph output", g->nodes[prev].name);
            add_note(P, r, c, prev, why);
            continue;
        }
        if (P->reads[t] != 1) {
            fg_buf b = {0};
            int others = 0;
            for (int q = P->cons_start[t]; q < P->cons_start[t + 1]; q++)
                if (P->cons[q] != c) {
                    fg_buf_printf(&b, "%s%s", others ? ", " : "", g->nodes[P->cons[q]].name);
                    others++;
                }
            if (others)
                snprintf(why, sizeof why, "%s's output also feeds %s", g->nodes[prev].name, b.s);
            else
                snprintf(why, sizeof why, "%s reads %s's output more than once", g->nodes[c].name,
                         g->nodes[prev].name);
            fg_buf_free(&b);
            add_note(P, r, c, prev, why);
            continue;
        }
        if (P->member[c] >= 0) {
            const fg_group *og = &P->groups[P->member[c]];
            snprintf(why, sizeof why, "%s is already in the group of %s (rule %s)", g->nodes[c].name,
                     g->nodes[og->nodes[0]].name, og->rule >= 0 ? P->ctx->rules[og->rule]->name : "-");
            add_note(P, r, c, prev, why);
            continue;
        }
        /* one dtype through the chain, except a bool on either side of an
         * element-wise step: its 0 / 1 is exact in the registers between */
        fg_dtype cdt = g->tensors[g->nodes[c].output].dtype, pdt = g->tensors[g->nodes[prev].output].dtype;
        int bool_step = (cdt == FG_DTYPE_BOOL || pdt == FG_DTYPE_BOOL) &&
                        fg_kind(g->nodes[c].op->kind)->role == FG_ROLE_ELEMENTWISE &&
                        fg_kind(g->nodes[prev].op->kind)->role == FG_ROLE_ELEMENTWISE;
        if (cdt != pdt && !bool_step) {
            snprintf(why, sizeof why, "dtypes differ (%s %s, %s %s)", g->nodes[prev].name, fg_dtype_name(pdt),
                     g->nodes[c].name, fg_dtype_name(cdt));
            add_note(P, r, c, prev, why);
            continue;
        }
        const fg_tensor *ct = &g->tensors[g->nodes[c].output];
        /* re-indexing copies chain at any shape: the copy template composes their index maps
         * (slices, expands and pads at any element count too) */
        const fg_kind_info *kc = fg_kind(g->nodes[c].op->kind), *kp = fg_kind(g->nodes[prev].op->kind);
        int reindex = kc->role == FG_ROLE_RESHAPE && kp->role == FG_ROLE_RESHAPE &&
                      (fg_tensor_numel(ct) == fg_tensor_numel(tt) || ((kc->traits | kp->traits) & FG_KIND_MOVES));
        /* the anchor after an input map reads the map's output as its input 0
         * and computes a tensor of its own shape */
        int reads_map = r->steps[S->cur.steps[S->cur.n - 1]].input_map && !r->steps[s].input_map;
        if (reads_map && (g->nodes[c].ninputs < 1 || g->nodes[c].inputs[0] != t)) {
            snprintf(why, sizeof why, "%s reads the input map's output %s, but not as its input 0 (%s)",
                     g->nodes[c].name, tt->name, g->nodes[c].op->inputs[0].name);
            add_note(P, r, c, prev, why);
            continue;
        }
        /* a step that names its chain input reads the previous output there;
         * an anchor op so placed computes a tensor of its own shape (the
         * template runs it: attention's P V) */
        const fg_rule_step *cs = &r->steps[s];
        int slot = cs->chain_input - 1;
        if (slot >= 0 && (slot >= g->nodes[c].ninputs || g->nodes[c].inputs[slot] != t)) {
            snprintf(why, sizeof why, "%s does not read %s's output as its input %d (chain_input of step %s)",
                     g->nodes[c].name, g->nodes[prev].name, slot, cs->name);
            add_note(P, r, c, prev, why);
            continue;
        }
        int own_shape = slot >= 0 && fg_kind(g->nodes[c].op->kind)->role == FG_ROLE_ANCHOR;
        if (!same_shape(ct, tt) && !reindex && !reads_map && !own_shape) {
            fg_buf b = {0};
        char sb[160];
            fg_buf_printf(&b, "%s's output ", g->nodes[c].name);
            fg_buf_put(&b, fg_shape_str(ct->shape, ct->rank, sb, sizeof sb));
            fg_buf_printf(&b, " is larger than %s's ", g->nodes[prev].name);
            fg_buf_put(&b, fg_shape_str(tt->shape, tt->rank, sb, sizeof sb));
            fg_buf_put(&b, " (broadcast): an epilogue computes one value per element of the fused output");
            snprintf(why, sizeof why, "%s", b.s);
            fg_buf_free(&b);
            add_note(P, r, c, prev, why);
            continue;
        }
        S->cur.nodes[S->cur.n] = c;
        S->cur.steps[S->cur.n] = s;
        S->cur.n++;
        if (r->steps[s].repeat)
            take_step(S, s);
        try_step(S, s + 1);
        S->cur.n--;
    }
}

/* Fills step s (greedily, then without it when it is optional) and the rest. */
static void try_step(search *S, int s)
{
    if (s == S->r->nsteps) {
        complete(S);
        return;
    }
    take_step(S, s);
    if (S->r->steps[s].optional)
        try_step(S, s + 1);
}

/* Best match of rule r anchored at node, or 0 when none. */
static int match_rule(planner *P, const fg_rule *r, int node, pmatch *out)
{
    search S;
    memset(&S, 0, sizeof S);
    S.P = P;
    S.r = r;
    char why[512];
    for (int s = 0; s < r->nsteps; s++) {
        if (step_accepts(P, r, s, node, why, sizeof why) == 1) {
            S.cur.n = 1;
            S.cur.nodes[0] = node;
            S.cur.steps[0] = s;
            if (r->steps[s].repeat)
                take_step(&S, s);
            try_step(&S, s + 1);
        }
        if (!r->steps[s].optional)
            break;
    }
    if (S.have_best)
        *out = S.best;
    return S.have_best;
}

/* ---- groups ------------------------------------------------------------ */

/* Commits match m of rule (-1: a lone node) as a group and chooses its
 * template: the default among those that accept it, or the rule's `select`
 * hook's pick.  A lone node no template can run is an error at the node. */
static int add_group(planner *P, int rule, const pmatch *m)
{
    const fg_graph *g = P->g;
    fg_group *grp = FG_PUSH(P->groups, P->ngroups, P->groups_cap);
    memset(grp, 0, sizeof *grp);
    fg_grow((void **)&P->gsteps, &P->gsteps_cap, P->ngroups, sizeof *P->gsteps);
    int gi = P->ngroups - 1;
    grp->rule = rule;
    grp->nnodes = m->n;
    for (int i = 0; i < m->n; i++) {
        grp->nodes[i] = m->nodes[i];
        P->gsteps[gi][i] = m->steps[i];
        P->member[m->nodes[i]] = gi;
    }
    const fg_rule *r = rule >= 0 ? P->ctx->rules[rule] : NULL;
    grp->nmap = match_nmap(r, m->steps, m->n);
    const fg_node *first = &g->nodes[m->nodes[grp->nmap]];
    grp->anchor = fg_kind(first->op->kind)->role == FG_ROLE_ANCHOR ? m->nodes[grp->nmap] : -1;
    grp->output = g->nodes[m->nodes[m->n - 1]].output;

    fg_tcand c;
    const fg_template *acc[64];
    int best;
    char why[1024];
    fg_buf text = {0};
    make_cand(g, r, m->nodes, m->steps, m->n, &c);
    c.arch = fg_target_arch(P->ctx);
    int na = check_templates(P->ctx, &c, acc, &best, why, sizeof why, &text);
    if (na == 0) {
        /* only a lone node gets here: rule matches were checked before */
        fg_status st = fg_diag_error(P->ctx, FG_ERR_UNSUPPORTED, first->loc, "node '%s' (op %s): %s", first->name,
                                     first->op->name, why);
        if (P->st == FG_OK)
            P->st = st;
        grp->template_name = fg_kind(first->op->kind)->family;
        fg_buf_free(&text);
        return gi;
    }
    grp->template_name = acc[best]->name;
    if (r && r->select_hook && na > 1) {
        const char *names[64];
        for (int i = 0; i < na; i++)
            names[i] = acc[i]->name;
        int pick = -1;
        fg_status st = fg_hook_select(P->ctx, r->select_hook, r->loc, g, grp, names, na, &pick);
        if (st != FG_OK) {
            if (P->st == FG_OK)
                P->st = st;
        } else {
            grp->template_name = acc[pick]->name;
            fg_buf_printf(&text, "; hook %s picked %s", r->select_hook, acc[pick]->name);
        }
    }
    /* the chosen template's default tile / split-K (--explain) */
    const fg_template *ct = fg_template_find(P->ctx, grp->template_name);
    char tiles[256];
    if (ct) {
        fg_template_describe(ct, &c, tiles, sizeof tiles);
        if (tiles[0])
            fg_buf_printf(&text, "; %s: %s", ct->name, tiles);
    }
    grp->choice = fg_buf_take(&text);
    return gi;
}

/* Resolves the epilogue of group gi after folds (collect_epilogue).  The
 * capability checks bounded the count before folding, which only removes
 * stages. */
static fg_status resolve_epilogue(planner *P, int gi)
{
    fg_group *grp = &P->groups[gi];
    const fg_rule *r = grp->rule >= 0 ? P->ctx->rules[grp->rule] : NULL;
    int n = collect_epilogue(P->g, r, grp->nodes, P->gsteps[gi], grp->nnodes, grp->epi, FG_MAX_EPILOGUE);
    if (n > FG_MAX_EPILOGUE)
        return fg_diag_error(P->ctx, FG_ERR_INTERNAL, r ? r->loc : FG_NOLOC,
                             "rule %s: a group's epilogue has %d stages (at most %d) after the capability check",
                             r ? r->name : "-", n, FG_MAX_EPILOGUE);
    grp->nepi = n;
    return FG_OK;
}

static int cmp_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Puts groups in execution order: by their last node.  A group's inputs come
 * from graph inputs, weights or another group's last node, which precedes
 * the consuming node in graph order. */
static void order_groups(planner *P)
{
    int n = P->ngroups;
    int(*key)[2] = fg_xmalloc((size_t)(n ? n : 1) * sizeof *key);
    int *perm = fg_xmalloc((size_t)(n ? n : 1) * sizeof *perm);
    for (int i = 0; i < n; i++) {
        key[i][0] = P->groups[i].nodes[P->groups[i].nnodes - 1];
        key[i][1] = i;
    }
    qsort(key, (size_t)n, sizeof *key, cmp_pair);
    for (int i = 0; i < n; i++)
        perm[i] = key[i][1];
    free(key);
    fg_group *ng = fg_xmalloc((size_t)(n ? n : 1) * sizeof *ng);
    int(*ns)[FG_MAX_GROUP_NODES] = fg_xmalloc((size_t)(n ? n : 1) * sizeof *ns);
    for (int i = 0; i < n; i++) {
        ng[i] = P->groups[perm[i]];
        memcpy(ns[i], P->gsteps[perm[i]], sizeof ns[i]);
        for (int k = 0; k < ng[i].nnodes; k++)
            P->member[ng[i].nodes[k]] = i;
    }
    free(P->groups);
    free(P->gsteps);
    free(perm);
    P->groups = ng;
    P->gsteps = ns;
    P->groups_cap = P->gsteps_cap = n;
}

/* ---- setup ------------------------------------------------------------- */

static void build_consumers(planner *P)
{
    const fg_graph *g = P->g;
    int nt = g->ntensors;
    P->cons_start = fg_xcalloc((size_t)nt + 1, sizeof *P->cons_start);
    P->reads = fg_xcalloc((size_t)nt + 1, sizeof *P->reads);
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].ninputs; j++) {
            int t = g->nodes[i].inputs[j];
            if (t < 0)
                continue;
            P->reads[t]++;
            int dup = 0;
            for (int k = 0; k < j && !dup; k++)
                dup = g->nodes[i].inputs[k] == t;
            if (!dup)
                P->cons_start[t + 1]++;
        }
    for (int t = 0; t < nt; t++)
        P->cons_start[t + 1] += P->cons_start[t];
    P->cons = fg_xmalloc((size_t)(P->cons_start[nt] ? P->cons_start[nt] : 1) * sizeof *P->cons);
    int *fill = fg_xmalloc((size_t)(nt ? nt : 1) * sizeof *fill);
    memcpy(fill, P->cons_start, (size_t)nt * sizeof *fill);
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i].ninputs; j++) {
            int t = g->nodes[i].inputs[j];
            if (t < 0)
                continue;
            int dup = 0;
            for (int k = 0; k < j && !dup; k++)
                dup = g->nodes[i].inputs[k] == t;
            if (!dup)
                P->cons[fill[t]++] = i;
        }
    free(fill);
}

/* Indexes the rules by the ops their leading steps accept (a rule whose
 * first steps are optional is listed under each op they could start with). */
static void build_rule_index(planner *P)
{
    const fg_context *ctx = P->ctx;
    P->nopidx = ctx->nops;
    P->opidx = fg_xmalloc((size_t)(ctx->nops ? ctx->nops : 1) * sizeof *P->opidx);
    for (int i = 0; i < ctx->nops; i++) {
        P->opidx[i].op = ctx->ops[i];
        P->opidx[i].idx = i;
    }
    qsort(P->opidx, (size_t)ctx->nops, sizeof *P->opidx, cmp_opslot);
    P->rules_by_op = fg_xcalloc((size_t)(ctx->nops ? ctx->nops : 1), sizeof *P->rules_by_op);
    int *tmp = fg_xmalloc((size_t)(ctx->nrules + 1) * sizeof *tmp);
    for (int o = 0; o < ctx->nops; o++) {
        int n = 0;
        for (int ri = 0; ri < ctx->nrules; ri++) {
            const fg_rule *r = ctx->rules[ri];
            for (int s = 0; s < r->nsteps; s++) {
                if (step_names_op(&r->steps[s], ctx->ops[o])) {
                    tmp[n++] = ri;
                    break;
                }
                if (!r->steps[s].optional)
                    break;
            }
        }
        tmp[n] = -1;
        P->rules_by_op[o] = fg_xmalloc((size_t)(n + 1) * sizeof *tmp);
        memcpy(P->rules_by_op[o], tmp, (size_t)(n + 1) * sizeof *tmp);
    }
    free(tmp);
}

static void planner_free(planner *P)
{
    free(P->cons_start);
    free(P->cons);
    free(P->reads);
    free(P->member);
    for (int i = 0; P->groups && i < P->ngroups; i++)
        free(P->groups[i].choice);   /* only when the plan did not take the groups */
    free(P->groups);
    free(P->gsteps);
    for (int i = 0; i < P->nnotes; i++)
        free(P->notes[i].text);
    free(P->notes);
    if (P->rules_by_op)
        for (int i = 0; i < P->nopidx; i++)
            free(P->rules_by_op[i]);
    free(P->rules_by_op);
    free(P->opidx);
}

/* Better candidate: higher priority, then more nodes, then earlier rule. */
static int better(const fg_context *ctx, int ra, const pmatch *a, int rb, const pmatch *b)
{
    if (rb < 0)
        return 1;
    int pa = ctx->rules[ra]->priority, pb = ctx->rules[rb]->priority;
    if (pa != pb)
        return pa > pb;
    if (a->n != b->n)
        return a->n > b->n;
    return ra < rb;
}

/* Keeps the notes whose nodes did not end up in one group; drops repeats.
 * They follow the notes already in p (the rewrites applied). */
static void finish_notes(planner *P, fg_plan *p)
{
    p->notes = fg_xrealloc(p->notes, (size_t)(p->nnotes + P->nnotes + 1) * sizeof *p->notes);
    for (int i = 0; i < P->nnotes; i++) {
        pnote *nt = &P->notes[i];
        int keep = !(nt->parent >= 0 && P->member[nt->child] == P->member[nt->parent]);
        for (int k = 0; k < p->nnotes && keep; k++)
            keep = strcmp(p->notes[k], nt->text) != 0;
        if (keep) {
            p->notes[p->nnotes++] = nt->text;
            nt->text = NULL;
        }
    }
}

/* ---- weights that cannot be right -------------------------------------- */

/* Before planning: a weight holding NaN or inf gets one warning, and each
 * node's kind checks its constant parameters (an inference batch norm's
 * var + eps must be positive: an error at the node). */
static fg_status check_weights(fg_context *ctx, const fg_graph *g)
{
    fg_status st = FG_OK;
    for (int t = 0; t < g->ntensors; t++) {
        const fg_tensor *x = &g->tensors[t];
        if (!x->is_weight || !x->data)
            continue;
        int64_t n = fg_tensor_numel(x), bad = -1, nbad = 0;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(x->data[i]) && nbad++ == 0)
                bad = i;
        if (nbad)
            fg_diag_warn(ctx, x->loc, "weight '%s' has %lld non-finite value%s (the first at index %lld)", x->name,
                         (long long)nbad, nbad == 1 ? "" : "s", (long long)bad);
    }
    for (int i = 0; i < g->nnodes; i++) {
        const fg_kind_info *ki = fg_kind(g->nodes[i].op->kind);
        fg_status cst = ki->check_weights ? ki->check_weights(ctx, g, i) : FG_OK;
        if (cst != FG_OK)
            st = cst;
    }
    return st;
}

/* ---- entry points ------------------------------------------------------ */

/* The name of group grp's main node (the anchor, else its first unfolded
 * node), for the located errors of its hooks. */
static const char *main_name(const fg_graph *g, const fg_group *grp)
{
    int m = grp->anchor;
    for (int i = 0; i < grp->nnodes && m < 0; i++)
        if (!g->nodes[grp->nodes[i]].folded)
            m = grp->nodes[i];
    return g->nodes[m >= 0 ? m : grp->nodes[0]].name;
}

/* Runs the hooks of group grp that decide its kernel, on the finished plan:
 * the rule's `params:` hook for the chosen template's declared tile keys
 * (each value checked against its range, kept in grp->tile) and the
 * epilogue hooks (their expressions kept in grp->epi[].expr), so that
 * emission is a function of the plan.  Errors are located at the rule. */
static fg_status run_group_hooks(fg_context *ctx, fg_plan *p, fg_group *grp)
{
    const fg_rule *r = grp->rule >= 0 ? ctx->rules[grp->rule] : NULL;
    if (!r)
        return FG_OK;
    fg_status st = FG_OK;
    const fg_template *t = fg_template_find(ctx, grp->template_name);
    const fg_tile_key *tk = t ? fg_template_base(t)->tiles : NULL;
    if (r->tile_hook && tk && tk->name) {
        const char *keys[FG_MAX_TILE_KEYS];
        int n = 0;
        while (n < FG_MAX_TILE_KEYS && tk[n].name) {
            keys[n] = tk[n].name;
            n++;
        }
        int64_t vals[FG_MAX_TILE_KEYS] = {0};
        st = fg_hook_params(ctx, r->tile_hook, r->loc, p->graph, grp, keys, n, vals);
        for (int i = 0; i < n && st == FG_OK; i++) {
            char msg[256];
            if (vals[i] && (st = fg_template_tile_check(t, keys[i], vals[i], msg, sizeof msg)) != FG_OK)
                return fg_diag_error(ctx, st, r->loc, "%s (kernel for %s, rule '%s')", msg, main_name(p->graph, grp),
                                     r->name);
            grp->tile[i] = vals[i];
        }
    }
    for (int k = 0; k < grp->nepi && st == FG_OK; k++) {
        fg_group_epi *e = &grp->epi[k];
        if (e->kind != FG_EPI_HOOK)
            continue;
        fg_loc site = r->loc;
        for (int i = 0; i < r->nepilogue; i++)
            if (r->epilogue[i].kind == FG_EPI_HOOK && r->epilogue[i].hook && strcmp(r->epilogue[i].hook, e->hook) == 0) {
                site = r->epilogue[i].loc;
                break;
            }
        st = fg_hook_epilogue(ctx, e->hook, site, p->graph, grp, &e->expr);
    }
    return st;
}

fg_status fg_plan_make(fg_context *ctx, const fg_graph *g, fg_plan **out)
{
    if (!out)
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_build: out is NULL") : FG_ERR_INPUT;
    *out = NULL;
    if (!ctx || !g)
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_build: graph is NULL") : FG_ERR_INPUT;
    fg_status wst = check_weights(ctx, g);
    if (wst != FG_OK)
        return wst;
    double t_match = fg_now();
    fg_plan *p = fg_xcalloc(1, sizeof *p);
    p->source = g;
    p->graph = fg_graph_clone(g);
    if (!p->graph) {
        free(p);
        return fg_diag_error(ctx, FG_ERR_NOMEM, FG_NOLOC, "could not copy graph %s", g->name ? g->name : "");
    }
    /* Rewrite rules turn subgraphs back into ops (rewrite.h), on the copy. */
    fg_status rst = fg_rewrite_graph(ctx, p->graph, &p->notes, &p->nnotes);
    if (rst == FG_OK)
        rst = fg_rewrite_attention_casts(ctx, p->graph, &p->notes, &p->nnotes);
    if (rst != FG_OK) {
        fg_plan_free(p);
        return rst;
    }
    /* The plan's own tensors NHWC for tensor-core convolutions (layout_assign.h). */
    fg_layout_assign(ctx, p->graph, &p->nhwc_acts, &p->nhwc_weights);
    p->kmajor_b = fg_layout_kmajor_b(ctx, p->graph);
    planner P;
    memset(&P, 0, sizeof P);
    P.ctx = ctx;
    P.g = p->graph;
    fg_graph *pg = p->graph;
    P.member = fg_xmalloc((size_t)(pg->nnodes ? pg->nnodes : 1) * sizeof *P.member);
    for (int i = 0; i < pg->nnodes; i++)
        P.member[i] = -1;
    build_consumers(&P);
    build_rule_index(&P);

    for (int n = 0; n < pg->nnodes; n++) {
        if (P.member[n] >= 0)
            continue;
        int best_rule = -1;
        pmatch best, m;
        memset(&best, 0, sizeof best);
        if (!pg->nodes[n].folded) {
            int oi = op_lookup(&P, pg->nodes[n].op);
            if (oi >= 0) {
                for (const int *rp = P.rules_by_op[oi]; *rp >= 0; rp++)
                    if (match_rule(&P, ctx->rules[*rp], n, &m) && better(ctx, *rp, &m, best_rule, &best)) {
                        best = m;
                        best_rule = *rp;
                    }
            } else {
                for (int ri = 0; ri < ctx->nrules; ri++)
                    if (match_rule(&P, ctx->rules[ri], n, &m) && better(ctx, ri, &m, best_rule, &best)) {
                        best = m;
                        best_rule = ri;
                    }
            }
        }
        if (best_rule < 0) {
            best.n = 1;
            best.nodes[0] = n;
            best.steps[0] = -1;
        }
        add_group(&P, best_rule, &best);
    }
    fg_status st = P.st;
    order_groups(&P);
    double t_fold = fg_now();
    p->match_ms = (t_fold - t_match) * 1e3;

    /* Folds, in each rule's order, on the plan's copy. */
    for (int gi = 0; gi < P.ngroups && st == FG_OK; gi++) {
        fg_group *grp = &P.groups[gi];
        if (grp->rule < 0)
            continue;
        const fg_rule *r = ctx->rules[grp->rule];
        for (int f = 0; f < r->nfolds && st == FG_OK; f++)
            st = fg_fold_apply(ctx, r, &r->folds[f], pg, grp);
    }
    p->fold_ms = (fg_now() - t_fold) * 1e3;
    for (int gi = 0; gi < P.ngroups && st == FG_OK; gi++) {
        fg_group *grp = &P.groups[gi];
        st = resolve_epilogue(&P, gi);
        grp->saved_bytes = 0;
        for (int i = 0; i + 1 < grp->nnodes; i++) {
            const fg_tensor *t = &pg->tensors[pg->nodes[grp->nodes[i]].output];
            grp->saved_bytes += fg_tensor_numel(t) * (int64_t)fg_dtype_size(t->dtype) * 2;
        }
    }
    if (st != FG_OK) {
        planner_free(&P);
        fg_plan_free(p);
        return st;
    }
    p->node_group = fg_xmalloc((size_t)(pg->nnodes ? pg->nnodes : 1) * sizeof *p->node_group);
    for (int i = 0; i < pg->nnodes; i++)
        p->node_group[i] = pg->nodes[i].folded ? -1 : P.member[i];
    finish_notes(&P, p);
    p->groups = P.groups;
    p->ngroups = P.ngroups;
    P.groups = NULL;
    planner_free(&P);
    /* Concat elimination: producers that write into their slice of a
     * concat's output, and concats left with nothing to copy (concat_inplace.h). */
    st = fg_concat_inplace_plan(ctx, p);
    if (st == FG_OK)   /* lone flatten / reshape of row-major data: an alias (reshape_alias.h) */
        st = fg_reshape_alias_plan(ctx, p);
    /* every group's hooks, on the finished plan; every error reported */
    fg_status hst = FG_OK;
    for (int gi = 0; gi < p->ngroups && st == FG_OK; gi++) {
        fg_status hs = run_group_hooks(ctx, p, &p->groups[gi]);
        if (hs != FG_OK && hst == FG_OK)
            hst = hs;
    }
    if (st == FG_OK)
        st = hst;
    if (st != FG_OK) {
        fg_plan_free(p);
        return st;
    }
    *out = p;
    return FG_OK;
}

FG_API void fg_plan_free(fg_plan *p)
{
    if (!p)
        return;
    if (p->graph)
        fg_graph_free(p->graph);
    for (int i = 0; i < p->ngroups; i++) {
        free(p->groups[i].choice);
        for (int k = 0; k < p->groups[i].nepi; k++)
            fg_expr_free(p->groups[i].epi[k].expr);
    }
    free(p->groups);
    for (int i = 0; i < p->nnotes; i++)
        free(p->notes[i]);
    free(p->notes);
    free(p->node_group);
    fg_concat_views_free(p->views);
    free(p);
}

FG_API int fg_plan_group_count(const fg_plan *p) { return p ? p->ngroups : 0; }
