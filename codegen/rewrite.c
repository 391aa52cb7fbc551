/*
 * rewrite.c -- rewrite rules (contract in rewrite.h, language in
 * docs/rules.md#rewrite-rules): the loader of `rewrite:` documents, the
 * matcher (a small backtracking search over the DAG from each candidate
 * root, commutative ops tried in both input orders) and the replacement,
 * which edits the plan's copy of the graph before fusion.
 */
#include "rewrite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "expr.h"
#include "kind.h"
#include "load.h"
#include "plan.h"
#include "shape.h"

static const char *const rewrite_keys[] = {"rewrite", "inputs", "match", "replace"};
static const char *const step_keys[] = {"op", "where", "inputs", "commutative", "attrs"};
static const char *const const_keys[] = {"const", "tol", "as", "per_channel"};
static const char *const replace_keys[] = {"op", "inputs", "attrs"};
static const char *const fill_keys[] = {"fill", "like"};

#define DEFAULT_TOL 1e-6

/* ---- loading ----------------------------------------------------------- */

/* The names a pattern knows while it is read. */
typedef struct rw_names {
    fg_context *ctx;
    fg_rewrite *rw;
    int nall;                               /* every step name of `match:`, in order */
    const char *all[FG_RW_MAX_STEPS];
    int used[FG_RW_MAX_STEPS];              /* step i is consumed by a later step */
    int var_used[FG_RW_MAX_VARS];
} rw_names;

/* Nonzero when a two-input pointwise op gives the same value with its
 * inputs swapped: its expression (attributes at their defaults) is
 * evaluated at fixed sample points.  add, mul, min and max commute; sub,
 * div and a per-channel second input do not. */
static int op_commutes(const fg_opdef *op)
{
    static const double pts[][2] = {{0.3, -1.7}, {2.5, 0.75}, {-0.6, -3.1}, {1.1, 4.2}, {-2.9, 0.05}};
    if (op->kind != FG_OPK_POINTWISE || op->ninputs != 2 || !op->expr || op->inputs[0].optional ||
        op->inputs[1].optional || op->inputs[0].per_channel != op->inputs[1].per_channel)
        return 0;
    double a[2 + FG_MAX_ATTRS], b[2 + FG_MAX_ATTRS];
    for (int i = 0; i < op->nattrs; i++)
        a[2 + i] = b[2 + i] = fg_attr_number(&op->attrs[i].def);
    for (size_t k = 0; k < FG_COUNTOF(pts); k++) {
        a[0] = b[1] = pts[k][0];
        a[1] = b[0] = pts[k][1];
        double x = fg_expr_eval(op->expr, a), y = fg_expr_eval(op->expr, b);
        if (!(x == y || (isnan(x) && isnan(y))))
            return 0;
    }
    return 1;
}

static int find_str(const char *const *v, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return i;
    return -1;
}

/* A name that is neither an input nor an earlier step. */
static void bad_ref(rw_names *N, int step, const fg_ynode *v)
{
    fg_context *ctx = N->ctx;
    const fg_rewrite *rw = N->rw;
    int later = find_str(N->all, N->nall, v->str);
    if (later == step) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "step '%s' consumes its own output (a cycle)", v->str);
        return;
    }
    if (later > step) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc,
                      "step '%s' consumes step '%s', which comes later (a step may consume only the match's "
                      "inputs and earlier steps, so a pattern has no cycle)",
                      N->all[step], v->str);
        return;
    }
    const char *cands[FG_RW_MAX_VARS + FG_RW_MAX_STEPS];
    int nc = 0;
    for (int i = 0; i < rw->nvars; i++)
        cands[nc++] = rw->vars[i];
    for (int i = 0; i < step; i++)
        cands[nc++] = N->all[i];
    const char *s = fg_suggest(v->str, cands, nc);
    fg_buf b = {0};
    for (int i = 0; i < rw->nvars; i++)
        fg_buf_printf(&b, "%s%s", i ? ", " : "", rw->vars[i]);
    fg_diag_error(ctx, FG_ERR_INPUT, v->loc,
                  "unknown name '%s' in step '%s': not an input of the rewrite (inputs: %s) nor an earlier step%s%s%s",
                  v->str, N->all[step], b.s ? b.s : "", s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    fg_buf_free(&b);
}

/* `{ const: 0.5, tol: 1e-6, as: name, per_channel: true }`. */
static int parse_const(rw_names *N, const fg_ynode *m, fg_rw_arg *a)
{
    fg_context *ctx = N->ctx;
    fg_rewrite *rw = N->rw;
    int e0 = ctx->nerrors;
    fg_ycheck_keys(ctx, m, "a constant input", const_keys, (int)FG_COUNTOF(const_keys));
    a->kind = FG_RW_ARG_CONST;
    a->capture = -1;
    a->tol = DEFAULT_TOL;
    const fg_ynode *c = fg_ymap_get(m, "const"), *tol = fg_ymap_get(m, "tol"), *as = fg_ymap_get(m, "as"),
                   *pc = fg_ymap_get(m, "per_channel");
    if (!c) {
        fg_diag_error(ctx, FG_ERR_INPUT, m->loc,
                      "a step input mapping needs `const:` (a number, or `any` for any constant)");
        return 0;
    }
    if (c->kind == FG_YNODE_SCALAR && c->style == FG_YSTYLE_PLAIN && strcmp(c->str, "any") == 0) {
        a->any = 1;
    } else if (!fg_yscalar_float(c, &a->value) || !isfinite(a->value)) {
        char d[96];
        fg_diag_error(ctx, FG_ERR_INPUT, c->loc, "const must be a finite number or `any`, got %s",
                      fg_ynode_describe(c, d, sizeof d));
    }
    if (tol) {
        if (a->any)
            fg_diag_error(ctx, FG_ERR_INPUT, tol->loc, "`tol` needs a numeric `const`, not `any`");
        else if (fg_yget_float(ctx, tol, "tol", &a->tol) && !(a->tol >= 0 && isfinite(a->tol)))
            fg_diag_error(ctx, FG_ERR_INPUT, tol->loc, "tol must be a finite number >= 0, got %g", a->tol);
    }
    if (pc)
        fg_yget_bool(ctx, pc, "per_channel", &a->per_channel);
    const char *name;
    if (as && fg_yget_name(ctx, as, "as", &name)) {
        if (find_str(rw->caps, rw->ncaps, name) >= 0)
            fg_diag_error(ctx, FG_ERR_INPUT, as->loc, "capture '%s' is named twice in rewrite '%s'", name, rw->name);
        else if (find_str(rw->vars, rw->nvars, name) >= 0 || find_str(N->all, N->nall, name) >= 0)
            fg_diag_error(ctx, FG_ERR_INPUT, as->loc, "capture '%s' has the name of an input or a step", name);
        else if (rw->ncaps >= FG_RW_MAX_CAPS)
            fg_diag_error(ctx, FG_ERR_INPUT, as->loc, "rewrite '%s' captures more than %d constants", rw->name,
                          FG_RW_MAX_CAPS);
        else {
            a->capture = rw->ncaps;
            rw->cap_per_channel[rw->ncaps] = a->per_channel;
            rw->caps[rw->ncaps++] = fg_intern(ctx, name);
        }
    }
    return ctx->nerrors == e0;
}

/* The `inputs:` of step si: names (inputs of the rewrite, earlier steps),
 * `~` (absent) or constant mappings. */
static void parse_step_inputs(rw_names *N, int si, const fg_ynode *v)
{
    fg_context *ctx = N->ctx;
    fg_rw_step *s = &N->rw->steps[si];
    if (!fg_yexpect(ctx, v, FG_YNODE_SEQ, "inputs"))
        return;
    if (v->n > FG_MAX_INPUTS) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "step '%s' lists %d inputs (at most %d)", s->name, v->n,
                      FG_MAX_INPUTS);
        return;
    }
    for (int i = 0; i < v->n; i++) {
        const fg_ynode *it = v->items[i];
        fg_rw_arg *a = &s->args[s->nargs];
        memset(a, 0, sizeof *a);
        a->loc = it->loc;
        a->capture = -1;
        if (fg_ynode_is_null(it)) {
            a->kind = FG_RW_ARG_ABSENT;
        } else if (it->kind == FG_YNODE_MAP) {
            if (!parse_const(N, it, a))
                continue;
        } else {
            const char *name;
            if (!fg_yget_name(ctx, it, "a step input", &name))
                continue;
            int k;
            if ((k = find_str(N->rw->vars, N->rw->nvars, name)) >= 0) {
                a->kind = FG_RW_ARG_VAR;
                a->index = k;
                N->var_used[k] = 1;
            } else if ((k = find_str(N->all, N->nall, name)) >= 0 && k < si) {
                a->kind = FG_RW_ARG_STEP;
                a->index = k;
                N->used[k] = 1;
            } else {
                bad_ref(N, si, it);
                continue;
            }
        }
        s->nargs++;
    }
}

/* Adds name to the step's where variables unless present. */
static int add_where_var(fg_rw_step *s, const char *name)
{
    for (int i = 0; i < s->nwhere_vars; i++)
        if (s->where_vars[i] == name)
            return 1;
    if (s->nwhere_vars >= FG_MAX_WHERE_VARS)
        return 0;
    s->where_vars[s->nwhere_vars++] = name;
    return 1;
}

/* The attribute variable called name (bound to a list or to one number),
 * added on first use; -1 after an error at v. */
static int attr_var(fg_context *ctx, fg_rewrite *rw, const char *name, int list, const fg_ynode *v)
{
    int k = find_str(rw->binds, rw->nbinds, name);
    if (k >= 0) {
        if (rw->bind_list[k] != list) {
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "attribute variable '%s' stands for %s here but for %s before",
                          name, list ? "an ints list" : "one number", list ? "one number" : "an ints list");
            return -1;
        }
        return k;
    }
    if (rw->nbinds >= FG_RW_MAX_BINDS) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "rewrite '%s' has more than %d attribute variables", rw->name,
                      FG_RW_MAX_BINDS);
        return -1;
    }
    rw->bind_list[rw->nbinds] = list;
    rw->binds[rw->nbinds] = fg_intern(ctx, name);
    return rw->nbinds++;
}

/* One element of an attribute pattern: a number or bool literal, or an
 * attribute variable (list: it stands for a whole ints list). */
static int parse_attr_el(fg_context *ctx, fg_rewrite *rw, const fg_ynode *v, int list, int *bind, double *value)
{
    int64_t i;
    int b;
    *bind = -1;
    if (v->kind == FG_YNODE_SCALAR && v->style == FG_YSTYLE_PLAIN && fg_yscalar_bool(v, &b)) {
        *value = b;
        return 1;
    }
    if (v->kind == FG_YNODE_SCALAR && fg_yscalar_int(v, &i)) {
        *value = (double)i;
        return 1;
    }
    if (v->kind == FG_YNODE_SCALAR && fg_yscalar_float(v, value))
        return 1;
    const char *name;
    if (!fg_yget_name(ctx, v, "an attribute value (a number, true / false, or a variable name)", &name))
        return 0;
    *bind = attr_var(ctx, rw, name, list, v);
    return *bind >= 0;
}

/* `attrs: { keepdims: true, axes: [A] }` of step s: every named attribute
 * exists in each of the step's ops; a list pattern needs an ints attribute. */
static void parse_step_attrs(fg_context *ctx, fg_rewrite *rw, fg_rw_step *s, const fg_ynode *v)
{
    if (!fg_yexpect(ctx, v, FG_YNODE_MAP, "attrs"))
        return;
    for (int i = 0; i < v->n; i++) {
        const fg_ynode *k = FG_YKEY(v, i), *av = FG_YVAL(v, i);
        const char *name;
        if (!fg_yget_name(ctx, k, "an attribute name", &name))
            continue;
        int type = -1, ok = 1;
        for (int o = 0; o < s->nops && ok; o++) {
            const fg_opdef *d = s->ops[o];
            int a = 0;
            while (a < d->nattrs && strcmp(d->attrs[a].name, name) != 0)
                a++;
            if (a == d->nattrs) {
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "step '%s': op '%s' has no attribute '%s'", s->name,
                              d->name, name);
                ok = 0;
            } else if (type >= 0 && (type == FG_ATTR_INTS) != (d->attrs[a].type == FG_ATTR_INTS)) {
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "step '%s': attribute '%s' is a list in some ops and not "
                              "in others", s->name, name);
                ok = 0;
            } else {
                type = (int)d->attrs[a].type;
            }
        }
        if (!ok || type < 0)
            continue;
        for (int j = 0; j < s->nattrs; j++)
            if (strcmp(s->attrs[j].name, name) == 0) {
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "attribute '%s' given twice", name);
                ok = 0;
            }
        if (!ok)
            continue;
        fg_rw_attr *pa = &s->attrs[s->nattrs];
        memset(pa, 0, sizeof *pa);
        pa->name = fg_intern(ctx, name);
        pa->loc = av->loc;
        if (av->kind == FG_YNODE_SEQ) {
            if (type != FG_ATTR_INTS) {
                fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "attribute '%s' is not an ints list: give one value",
                              name);
                continue;
            }
            if (av->n < 1 || av->n > FG_MAX_INTS) {
                fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "a list pattern has 1 to %d elements", FG_MAX_INTS);
                continue;
            }
            pa->n = av->n;
            for (int e = 0; e < av->n && ok; e++)
                ok = parse_attr_el(ctx, rw, av->items[e], 0, &pa->el[e].bind, &pa->el[e].value);
        } else {
            pa->n = -1;
            ok = parse_attr_el(ctx, rw, av, type == FG_ATTR_INTS, &pa->el[0].bind, &pa->el[0].value);
            if (ok && type == FG_ATTR_INTS && pa->el[0].bind < 0) {
                fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "attribute '%s' is an ints list: give a list ([1, A]) or "
                              "a variable", name);
                ok = 0;
            }
        }
        if (ok)
            s->nattrs++;
    }
}

/* One step `- name: { op: ..., inputs: [...], where: ..., commutative: ..., attrs: ... }`. */
static void parse_step(rw_names *N, int si, const fg_ynode *item, const char **names)
{
    fg_context *ctx = N->ctx;
    fg_rewrite *rw = N->rw;
    fg_rw_step *s = &rw->steps[si];
    const fg_ynode *k = FG_YKEY(item, 0), *v = FG_YVAL(item, 0);
    s->name = fg_intern(ctx, N->all[si]);
    s->loc = k->loc;
    if (!fg_yexpect(ctx, v, FG_YNODE_MAP, "a match step"))
        return;
    fg_ycheck_keys(ctx, v, "a rewrite step", step_keys, (int)FG_COUNTOF(step_keys));
    const fg_ynode *op = fg_ymap_get(v, "op"), *ins = fg_ymap_get(v, "inputs"), *where = fg_ymap_get(v, "where"),
                   *comm = fg_ymap_get(v, "commutative"), *attrs = fg_ymap_get(v, "attrs");
    if (!op) {
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "step '%s' needs `op`", s->name);
    } else {
        const fg_ynode *const *items = &op;
        int n = 1;
        if (op->kind == FG_YNODE_SEQ) {
            items = (const fg_ynode *const *)op->items;
            n = op->n;
        }
        for (int i = 0; i < n; i++) {
            const char *name;
            if (!fg_yget_name(ctx, items[i], "op", &name))
                continue;
            const fg_opdef *d = fg_ctx_find_op(ctx, name);
            if (!d)
                fg_diag_unknown(ctx, items[i]->loc, "op", name, names, ctx->nops);
            else if (s->nops >= FG_MAX_STEP_OPS)
                fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "step '%s' lists more than %d ops", s->name,
                              FG_MAX_STEP_OPS);
            else
                s->ops[s->nops++] = d;
        }
        if (n == 0)
            fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "step '%s': `op` is an empty list", s->name);
    }
    int e0 = ctx->nerrors;
    if (!ins)
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc,
                      "step '%s' needs `inputs` (the match's inputs, earlier steps or constants it reads)", s->name);
    else
        parse_step_inputs(N, si, ins);
    /* input counts, unless an input was wrong already (its entry is missing) */
    for (int i = 0; ins && ctx->nerrors == e0 && i < s->nops; i++) {
        const fg_opdef *d = s->ops[i];
        int required = 0;
        for (int j = 0; j < d->ninputs; j++)
            required += !d->inputs[j].optional;
        if (s->nargs > d->ninputs || s->nargs < required)
            fg_diag_error(ctx, FG_ERR_INPUT, ins->loc, "step '%s' gives %d input%s but op '%s' takes %d%s", s->name,
                          s->nargs, s->nargs == 1 ? "" : "s", d->name, d->ninputs,
                          required < d->ninputs ? " (some optional)" : "");
        for (int j = 0; j < s->nargs && j < d->ninputs; j++)
            if (s->args[j].kind == FG_RW_ARG_ABSENT && !d->inputs[j].optional)
                fg_diag_error(ctx, FG_ERR_INPUT, s->args[j].loc, "input '%s' of op '%s' is not optional: it cannot be ~",
                              d->inputs[j].name, d->name);
    }
    int force = -1;
    if (comm && fg_yget_bool(ctx, comm, "commutative", &force) && force) {
        for (int i = 0; i < s->nops; i++)
            if (s->ops[i]->ninputs != 2)
                fg_diag_error(ctx, FG_ERR_INPUT, comm->loc,
                              "`commutative: true` needs ops of two inputs; op '%s' has %d", s->ops[i]->name,
                              s->ops[i]->ninputs);
    }
    for (int i = 0; i < s->nops; i++)
        if (force == 1 || (force < 0 && op_commutes(s->ops[i])))
            s->commutes |= 1u << i;
    if (attrs && s->nops && !fg_ynode_is_null(attrs))
        parse_step_attrs(ctx, rw, s, attrs);
    if (where && s->nops) {
        const char *src;
        if (fg_yget_str(ctx, where, "where", &src)) {
            int fits = 1;
            for (int i = 0; i < s->nops && fits; i++)
                for (int a = 0; a < s->ops[i]->nattrs && fits; a++)
                    fits = add_where_var(s, s->ops[i]->attrs[a].name);
            if (!fits) {
                fg_diag_error(ctx, FG_ERR_INPUT, where->loc, "step '%s' can see more than %d attribute names",
                              s->name, FG_MAX_WHERE_VARS);
            } else {
                int e1 = ctx->nerrors;
                s->where_src = fg_intern(ctx, src);
                s->where = fg_expr_parse(ctx, src, fg_ynode_text_loc(where), s->where_vars, s->nwhere_vars);
                if (!s->where && ctx->nerrors == e1)
                    fg_diag_error(ctx, FG_ERR_INPUT, fg_ynode_text_loc(where), "invalid `where` expression");
            }
        }
    }
}

/* `inputs: [x, y]` of the rewrite (default [x]). */
static void parse_vars(fg_context *ctx, fg_rewrite *rw, const fg_ynode *v)
{
    if (!v) {
        rw->vars[rw->nvars++] = fg_intern(ctx, "x");
        return;
    }
    if (!fg_yexpect(ctx, v, FG_YNODE_SEQ, "inputs"))
        return;
    if (v->n == 0 || v->n > FG_RW_MAX_VARS) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "a rewrite has 1 to %d inputs, got %d", FG_RW_MAX_VARS, v->n);
        return;
    }
    for (int i = 0; i < v->n; i++) {
        const char *name;
        if (!fg_yget_name(ctx, v->items[i], "an input name", &name))
            continue;
        if (find_str(rw->vars, rw->nvars, name) >= 0)
            fg_diag_error(ctx, FG_ERR_INPUT, v->items[i]->loc, "input '%s' is named twice", name);
        else
            rw->vars[rw->nvars++] = fg_intern(ctx, name);
    }
}

/* Names the replacement may read: the inputs, then the captures. */
static void bound_names(const fg_rewrite *rw, fg_buf *b)
{
    for (int i = 0; i < rw->nvars; i++)
        fg_buf_printf(b, "%s%s", i ? ", " : "", rw->vars[i]);
    for (int i = 0; i < rw->ncaps; i++)
        fg_buf_printf(b, ", %s", rw->caps[i]);
}

/* One input of `replace: { inputs: [...] }` for op input slot. */
static int parse_rep_arg(fg_context *ctx, fg_rewrite *rw, const fg_ynode *it, fg_rw_rep_arg *a)
{
    memset(a, 0, sizeof *a);
    a->loc = it->loc;
    if (fg_ynode_is_null(it)) {
        a->kind = FG_RW_REP_ABSENT;
        return 1;
    }
    if (it->kind == FG_YNODE_MAP) {
        if (fg_ycheck_keys(ctx, it, "a replacement input", fill_keys, (int)FG_COUNTOF(fill_keys)))
            return 0;
        const fg_ynode *f = fg_ymap_get(it, "fill"), *like = fg_ymap_get(it, "like");
        const char *name;
        if (!f || !like) {
            fg_diag_error(ctx, FG_ERR_INPUT, it->loc,
                          "a replacement input mapping is `{ fill: VALUE, like: CAPTURE }` (a new per-channel "
                          "constant)");
            return 0;
        }
        if (!fg_yget_float(ctx, f, "fill", &a->fill) || !fg_yget_name(ctx, like, "like", &name))
            return 0;
        a->kind = FG_RW_REP_FILL;
        a->index = find_str(rw->caps, rw->ncaps, name);
        if (a->index < 0) {
            fg_diag_error(ctx, FG_ERR_INPUT, like->loc, "`like: %s` must name a constant the pattern captured with "
                          "`as:` and `per_channel: true`", name);
            return 0;
        }
        if (!rw->cap_per_channel[a->index]) {
            fg_diag_error(ctx, FG_ERR_INPUT, like->loc, "`like: %s`: capture '%s' is not `per_channel: true`", name,
                          name);
            return 0;
        }
        return 1;
    }
    const char *name;
    if (!fg_yget_name(ctx, it, "a replacement input", &name))
        return 0;
    if ((a->index = find_str(rw->vars, rw->nvars, name)) >= 0) {
        a->kind = FG_RW_REP_VAR;
        return 1;
    }
    if ((a->index = find_str(rw->caps, rw->ncaps, name)) >= 0) {
        a->kind = FG_RW_REP_CAPTURE;
        return 1;
    }
    const char *cands[FG_RW_MAX_VARS + FG_RW_MAX_CAPS];
    int nc = 0;
    for (int i = 0; i < rw->nvars; i++)
        cands[nc++] = rw->vars[i];
    for (int i = 0; i < rw->ncaps; i++)
        cands[nc++] = rw->caps[i];
    const char *s = fg_suggest(name, cands, nc);
    fg_buf b = {0};
    bound_names(rw, &b);
    fg_diag_error(ctx, FG_ERR_INPUT, it->loc,
                  "replacement input '%s' is not bound by the pattern (it may read: %s)%s%s%s", name, b.s ? b.s : "",
                  s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    fg_buf_free(&b);
    return 0;
}

/* `replace: { op: gelu, inputs: [x], attrs: { ... } }`. */
static void parse_replace(fg_context *ctx, fg_rewrite *rw, const fg_ynode *v, const char **names)
{
    if (!fg_yexpect(ctx, v, FG_YNODE_MAP, "replace"))
        return;
    fg_ycheck_keys(ctx, v, "replace", replace_keys, (int)FG_COUNTOF(replace_keys));
    const fg_ynode *op = fg_ymap_get(v, "op"), *ins = fg_ymap_get(v, "inputs"), *attrs = fg_ymap_get(v, "attrs");
    const char *name;
    if (!op) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "replace needs `op`");
        return;
    }
    if (!fg_yget_name(ctx, op, "op", &name))
        return;
    const fg_opdef *d = fg_ctx_find_op(ctx, name);
    if (!d) {
        fg_diag_unknown(ctx, op->loc, "op", name, names, ctx->nops);
        return;
    }
    rw->op = d;
    if (!ins) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "replace needs `inputs` (names the pattern binds)");
    } else if (fg_yexpect(ctx, ins, FG_YNODE_SEQ, "inputs")) {
        int required = 0;
        for (int j = 0; j < d->ninputs; j++)
            required += !d->inputs[j].optional;
        if (ins->n > d->ninputs || ins->n < required)
            fg_diag_error(ctx, FG_ERR_INPUT, ins->loc, "replace gives %d input%s but op '%s' takes %d%s", ins->n,
                          ins->n == 1 ? "" : "s", d->name, d->ninputs, required < d->ninputs ? " (some optional)" : "");
        for (int i = 0; i < ins->n && i < d->ninputs; i++) {
            fg_rw_rep_arg *a = &rw->args[i];
            if (!parse_rep_arg(ctx, rw, ins->items[i], a))
                continue;
            if (a->kind == FG_RW_REP_ABSENT && !d->inputs[i].optional)
                fg_diag_error(ctx, FG_ERR_INPUT, a->loc, "input '%s' of op '%s' is not optional: it cannot be ~",
                              d->inputs[i].name, d->name);
            if (a->kind == FG_RW_REP_FILL && !d->inputs[i].per_channel)
                fg_diag_error(ctx, FG_ERR_INPUT, a->loc, "`fill:` makes a per-channel constant, but input '%s' of op "
                              "'%s' is not per_channel", d->inputs[i].name, d->name);
        }
        rw->nargs = ins->n < d->ninputs ? ins->n : d->ninputs;
        for (int i = rw->nargs; i < d->ninputs; i++)
            rw->args[i] = (fg_rw_rep_arg){FG_RW_REP_ABSENT, 0, 0, ins->loc};
        rw->nargs = d->ninputs;
    }
    int set[FG_MAX_ATTRS] = {0};
    for (int a = 0; a < d->nattrs; a++) {
        rw->attrs[a] = d->attrs[a].def;
        rw->attr_bind[a] = -1;
    }
    if (attrs && !fg_ynode_is_null(attrs) && fg_yexpect(ctx, attrs, FG_YNODE_MAP, "attrs")) {
        const char *an[FG_MAX_ATTRS];
        for (int a = 0; a < d->nattrs; a++)
            an[a] = d->attrs[a].name;
        for (int i = 0; i < attrs->n; i++) {
            const fg_ynode *k = FG_YKEY(attrs, i), *av = FG_YVAL(attrs, i);
            int a = k->kind == FG_YNODE_SCALAR ? find_str(an, d->nattrs, k->str) : -1;
            if (a < 0) {
                if (k->kind == FG_YNODE_SCALAR)
                    fg_diag_unknown(ctx, k->loc, "attribute", k->str, an, d->nattrs);
                else
                    fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "an attribute name must be a scalar");
                continue;
            }
            if (set[a]) {
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "attribute '%s' given twice", k->str);
                continue;
            }
            set[a] = 1;
            int b = av->kind == FG_YNODE_SCALAR && av->style == FG_YSTYLE_PLAIN
                        ? find_str(rw->binds, rw->nbinds, av->str) : -1;
            if (b >= 0) {   /* an attribute variable of the pattern */
                if (rw->bind_list[b] != (d->attrs[a].type == FG_ATTR_INTS))
                    fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "attribute variable '%s' stands for %s, but attribute "
                                  "'%s' of %s is %s", av->str, rw->bind_list[b] ? "an ints list" : "one number",
                                  k->str, d->name, d->attrs[a].type == FG_ATTR_INTS ? "a list" : "one value");
                rw->attr_bind[a] = b;
                continue;
            }
            char what[160];
            snprintf(what, sizeof what, "attribute '%s' of %s", an[a], d->name);
            if (fg_attr_parse(ctx, av, d->attrs[a].type, d->attrs[a].lens, what, &rw->attrs[a]) &&
                d->attrs[a].type == FG_ATTR_FLOAT)
                rw->attrs[a].i = (int64_t)rw->attrs[a].f;
        }
    }
    for (int a = 0; a < d->nattrs; a++)
        if (d->attrs[a].required && !set[a])
            fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "replacement op '%s' needs attribute '%s' (%s, no default)",
                          d->name, d->attrs[a].name, fg_attr_type_name(d->attrs[a].type));
}

static void rewrite_free(fg_rewrite *rw)
{
    if (!rw)
        return;
    for (int s = 0; s < rw->nsteps; s++)
        fg_expr_free(rw->steps[s].where);
    free(rw);
}

static int find_rewrite(const fg_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nrewrites; i++)
        if (strcmp(ctx->rewrites[i]->name, name) == 0)
            return i;
    return -1;
}

fg_status fg_rewrite_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash)
{
    int errs0 = ctx->nerrors;
    fg_rewrite *rw = fg_xcalloc(1, sizeof *rw);
    const char **names = fg_ctx_op_names(ctx);
    rw_names N;
    memset(&N, 0, sizeof N);
    N.ctx = ctx;
    N.rw = rw;
    const char *name;

    fg_ycheck_keys(ctx, map, "a rewrite", rewrite_keys, (int)FG_COUNTOF(rewrite_keys));
    rw->loc = fg_ymap_key(map, "rewrite")->loc;
    rw->file_hash = file_hash;
    rw->name = fg_yget_name(ctx, fg_ymap_get(map, "rewrite"), "rewrite name", &name) ? fg_intern(ctx, name) : "?";
    parse_vars(ctx, rw, fg_ymap_get(map, "inputs"));

    const fg_ynode *match = fg_ymap_get(map, "match");
    if (!match) {
        fg_diag_error(ctx, FG_ERR_INPUT, rw->loc, "rewrite '%s' has no `match`", rw->name);
    } else if (fg_yexpect(ctx, match, FG_YNODE_SEQ, "match")) {
        if (match->n == 0)
            fg_diag_error(ctx, FG_ERR_INPUT, match->loc, "rewrite '%s': `match` is empty", rw->name);
        if (match->n > FG_RW_MAX_STEPS)
            fg_diag_error(ctx, FG_ERR_INPUT, match->loc, "rewrite '%s' has %d steps (at most %d)", rw->name,
                          match->n, FG_RW_MAX_STEPS);
        /* Step names first, so that a reference to a later step is told
         * apart from an unknown name. */
        int ok = match->n <= FG_RW_MAX_STEPS;
        for (int i = 0; ok && i < match->n; i++) {
            const fg_ynode *item = match->items[i];
            char d[96];
            if (item->kind != FG_YNODE_MAP || item->n != 1) {
                fg_diag_error(ctx, FG_ERR_INPUT, item->loc,
                              "a match step must be a mapping with one key, its name (`- e: { op: erf, inputs: [x] }`), "
                              "got %s",
                              fg_ynode_describe(item, d, sizeof d));
                ok = 0;
            } else if (fg_yget_name(ctx, FG_YKEY(item, 0), "step name", &name)) {
                if (find_str(N.all, N.nall, name) >= 0) {
                    fg_diag_error(ctx, FG_ERR_INPUT, FG_YKEY(item, 0)->loc, "duplicate step '%s' in rewrite '%s'",
                                  name, rw->name);
                    ok = 0;
                } else if (find_str(rw->vars, rw->nvars, name) >= 0) {
                    fg_diag_error(ctx, FG_ERR_INPUT, FG_YKEY(item, 0)->loc,
                                  "step '%s' has the name of an input of rewrite '%s'", name, rw->name);
                    ok = 0;
                }
                N.all[N.nall++] = name;
            } else {
                ok = 0;
            }
        }
        if (ok) {
            rw->nsteps = match->n;
            int e1 = ctx->nerrors;
            for (int i = 0; i < match->n; i++)
                parse_step(&N, i, match->items[i], names);
            /* what no step uses (unless a reference was wrong already) */
            int clean = ctx->nerrors == e1;
            for (int i = 0; clean && i + 1 < rw->nsteps; i++)
                if (!N.used[i])
                    fg_diag_error(ctx, FG_ERR_INPUT, rw->steps[i].loc,
                                  "step '%s' feeds no later step (every step but the last, which is replaced, must "
                                  "be consumed by a later one)",
                                  rw->steps[i].name);
            for (int i = 0; clean && i < rw->nvars; i++)
                if (!N.var_used[i])
                    fg_diag_error(ctx, FG_ERR_INPUT, rw->loc, "input '%s' of rewrite '%s' is read by no step",
                                  rw->vars[i], rw->name);
        }
    }
    const fg_ynode *rep = fg_ymap_get(map, "replace");
    if (!rep)
        fg_diag_error(ctx, FG_ERR_INPUT, rw->loc, "rewrite '%s' has no `replace`", rw->name);
    else if (rw->nsteps > 0 || ctx->nerrors == errs0)
        parse_replace(ctx, rw, rep, names);
    free(names);

    if (ctx->nerrors == errs0) {
        int old = find_rewrite(ctx, rw->name);
        if (old >= 0) {
            const fg_rewrite *o = ctx->rewrites[old];
            fg_diag_error(ctx, FG_ERR_INPUT, rw->loc, "duplicate rewrite '%s' (first defined at %s:%d)", rw->name,
                          o->loc.file ? o->loc.file : "?", o->loc.line);
        }
    }
    if (ctx->nerrors != errs0) {
        rewrite_free(rw);
        return FG_ERR_INPUT;
    }
    *FG_PUSH(ctx->rewrites, ctx->nrewrites, ctx->rewrites_cap) = rw;
    return FG_OK;
}

void fg_rewrites_free(fg_context *ctx)
{
    for (int i = 0; i < ctx->nrewrites; i++)
        rewrite_free(ctx->rewrites[i]);
    free(ctx->rewrites);
    ctx->rewrites = NULL;
    ctx->nrewrites = ctx->rewrites_cap = 0;
}

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

static int where_holds(const fg_rw_step *st, const fg_node *nd)
{
    double vals[FG_MAX_WHERE_VARS + 1];
    for (int i = 0; i < st->nwhere_vars; i++) {
        vals[i] = 0.0;
        if (!fg_expr_uses(st->where, i))
            continue;
        const fg_attr_value *v = fg_node_attr(nd, st->where_vars[i]);
        if (!v)
            return 0;
        vals[i] = fg_attr_number(v);
    }
    return fg_expr_eval(st->where, vals) != 0.0;
}

/* Two attribute values are equal: ints lists element by element, anything
 * else as numbers. */
static int attr_equal(const fg_attr_value *a, const fg_attr_value *b)
{
    if ((a->type == FG_ATTR_INTS) != (b->type == FG_ATTR_INTS))
        return 0;
    if (a->type == FG_ATTR_INTS)
        return a->n == b->n && memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0;
    return fg_attr_number(a) == fg_attr_number(b);
}

/* Value v matches literal or variable (binding it on first use). */
static int attr_el_holds(rw_match *M, int bind, double lit, const fg_attr_value *v)
{
    if (bind < 0)
        return v->type != FG_ATTR_INTS && fg_attr_number(v) == lit;
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
            if (!attr_el_holds(M, pa->el[0].bind, pa->el[0].value, v))
                return 0;
            continue;
        }
        if (v->type != FG_ATTR_INTS || v->n != pa->n)
            return 0;
        for (int e = 0; e < pa->n; e++) {
            fg_attr_value one = {.type = FG_ATTR_INT, .i = v->ints[e], .f = (double)v->ints[e]};
            if (!attr_el_holds(M, pa->el[e].bind, pa->el[e].value, &one))
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
    if (nd->folded || !step_has_op(st, nd->op, &opi) || (st->where && !where_holds(st, nd)))
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
 * attribute variables filled in (converted to the attribute's type). */
static void rep_attrs(const fg_rewrite *rw, const rw_match *M, fg_attr_value *out)
{
    memcpy(out, rw->attrs, sizeof rw->attrs);
    for (int a = 0; a < rw->op->nattrs; a++) {
        int b = rw->attr_bind[a];
        if (b < 0)
            continue;
        const fg_attr_value *v = &M->bval[b];
        if (rw->op->attrs[a].type == FG_ATTR_INTS) {
            out[a] = *v;
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
        if (a->kind == FG_RW_REP_VAR && t->dtype != out->dtype)
            return 0;
        if (rank < 0) {
            rank = t->rank;
            memcpy(shape, t->shape, sizeof shape);
            continue;
        }
        int r = t->rank > rank ? t->rank : rank;
        int64_t res[FG_MAX_RANK];
        for (int d = 0; d < r; d++) {
            int da = d - (r - rank), db = d - (r - t->rank);
            int64_t x = da >= 0 ? shape[da] : 1, y = db >= 0 ? t->shape[db] : 1;
            if (x != y && x != 1 && y != 1)
                return 0;
            res[d] = x == 1 ? y : x;
        }
        rank = r;
        memcpy(shape, res, sizeof res);
    }
    if (rank != out->rank)
        return 0;
    for (int d = 0; d < rank; d++)
        if (shape[d] != out->shape[d])
            return 0;
    return 1;
}

/* ---- replacement ------------------------------------------------------- */

/* A new weight tensor named "<root>.<input>" (made unique) of shape [c],
 * dtype like `like`, filled from vals. */
static int new_vector(fg_context *ctx, fg_graph *g, const fg_node *root, const char *input, const fg_tensor *like,
                      int64_t c, const float *vals)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s.%s", root->name, input);
    size_t base = b.len;
    for (int k = 2; fg_graph_find_tensor(g, b.s) >= 0; k++) {
        b.len = base;
        b.s[base] = 0;
        fg_buf_printf(&b, "_%d", k);
    }
    fg_tensor t;
    memset(&t, 0, sizeof t);
    t.name = fg_intern(ctx, b.s);
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
    fg_buf_printf(&b, "rewrite %s (%s:%d): ", rw->name, fg_plan_short_path(rw->loc.file), rw->loc.line);
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
