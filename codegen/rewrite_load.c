/*
 * rewrite_load.c -- the loader of `rewrite:` documents (contract in
 * rewrite.h, language in docs/rules.md#rewrite-rules): checks each pattern
 * step, its inputs, attribute patterns and `where`, and the replacement,
 * reporting every problem at its key or value, and adds the rewrite to the
 * context.  The pass that applies rewrites is rewrite_pass.c.
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
#include "where.h"

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
    if (fg_kind(op->kind)->role != FG_ROLE_ELEMENTWISE || op->ninputs != 2 || !op->expr || op->inputs[0].optional ||
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

/* One element of an attribute pattern: a number or bool literal, a quoted
 * string literal of a string attribute (is_string; *str), or an attribute
 * variable (list: it stands for a whole ints list). */
static int parse_attr_el(fg_context *ctx, fg_rewrite *rw, const fg_ynode *v, int list, int is_string, int *bind,
                         double *value, const char **str)
{
    int64_t i;
    int b;
    *bind = -1;
    *str = NULL;
    if (is_string && v->kind == FG_YNODE_SCALAR && v->style != FG_YSTYLE_PLAIN) {
        *str = fg_intern(ctx, v->str);
        return 1;
    }
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
    int fresh = find_str(rw->binds, rw->nbinds, name) < 0;
    *bind = attr_var(ctx, rw, name, list, v);
    if (*bind < 0)
        return 0;
    if (fresh)
        rw->bind_str[*bind] = is_string;
    else if (rw->bind_str[*bind] != is_string) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "attribute variable '%s' stands for %s here but for %s before",
                      name, is_string ? "a string" : "a number", is_string ? "a number" : "a string");
        return 0;
    }
    return 1;
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
                ok = parse_attr_el(ctx, rw, av->items[e], 0, 0, &pa->el[e].bind, &pa->el[e].value, &pa->el[e].str);
        } else {
            pa->n = -1;
            ok = parse_attr_el(ctx, rw, av, type == FG_ATTR_INTS, type == FG_ATTR_STRING, &pa->el[0].bind,
                               &pa->el[0].value, &pa->el[0].str);
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
            fg_where_compile(ctx, src, where->loc, fg_ynode_text_loc(where), s->name,
                             (const fg_opdef *const *)s->ops, s->nops, s->where_vars, &s->nwhere_vars, &s->where,
                             &s->where_src);
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
        rw->attr_cap[a] = -1;
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
                if (rw->bind_list[b] != (d->attrs[a].type == FG_ATTR_INTS) ||
                    rw->bind_str[b] != (d->attrs[a].type == FG_ATTR_STRING))
                    fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "attribute variable '%s' stands for %s, but attribute "
                                  "'%s' of %s is %s", av->str,
                                  rw->bind_list[b] ? "an ints list" : rw->bind_str[b] ? "a string" : "one number",
                                  k->str, d->name,
                                  d->attrs[a].type == FG_ATTR_INTS     ? "a list"
                                  : d->attrs[a].type == FG_ATTR_STRING ? "a string"
                                                                       : "one value");
                rw->attr_bind[a] = b;
                continue;
            }
            int c = av->kind == FG_YNODE_SCALAR && av->style == FG_YSTYLE_PLAIN
                        ? find_str(rw->caps, rw->ncaps, av->str) : -1;
            if (c >= 0) {   /* a captured constant of one element (checked when the rewrite applies) */
                if (d->attrs[a].type == FG_ATTR_INTS || d->attrs[a].type == FG_ATTR_STRING || rw->cap_per_channel[c])
                    fg_diag_error(ctx, FG_ERR_INPUT, av->loc, "capture '%s' gives one number, but attribute '%s' of "
                                  "%s is %s", av->str, k->str, d->name,
                                  rw->cap_per_channel[c] ? "not per-channel" : fg_attr_type_name(d->attrs[a].type));
                rw->attr_cap[a] = c;
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
    fg_ctx_on_free(ctx, fg_rewrites_free);
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
