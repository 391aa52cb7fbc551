/*
 * rule_load.c -- fusion rules (`rule:` documents of a rules directory): the
 * match chain with its steps, `where` predicates and Lua predicates, folds,
 * the kernel template and its epilogue, dtype/layout guards, the hook file.
 * Every problem is reported at the key or value that causes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "expr.h"
#include "fold_names.h"
#include "hook.h"
#include "input_file.h"
#include "kind.h"
#include "load.h"
#include "safe_open.h"
#include "template.h"
#include "where.h"

static const char *const rule_keys[] = {"rule", "priority", "dtypes", "layouts", "hooks", "match", "fold", "kernel"};
static const char *const step_keys[] = {"op", "kind", "where", "where_hook", "optional", "repeat", "input_map", "chain_input"};
static const char *const kernel_keys[] = {"template", "select", "params", "epilogue"};
static const char *const epi_keys[] = {"bias", "apply", "hook"};

/* A scalar or a sequence of scalars, as an array of nodes (*out points at
 * one[0] for a lone scalar).  Returns the count, or -1 after an error. */
static int scalar_list(fg_context *ctx, const fg_ynode *v, const char *what, const fg_ynode **one,
                       const fg_ynode ***out)
{
    if (v->kind == FG_YNODE_SCALAR && !fg_ynode_is_null(v)) {
        one[0] = v;
        *out = one;
        return 1;
    }
    if (v->kind == FG_YNODE_SEQ) {
        for (int i = 0; i < v->n; i++)
            if (v->items[i]->kind != FG_YNODE_SCALAR) {
                char d[96];
                fg_diag_error(ctx, FG_ERR_INPUT, v->items[i]->loc, "%s must be a name or a list of names, got %s",
                              what, fg_ynode_describe(v->items[i], d, sizeof d));
                return -1;
            }
        *out = (const fg_ynode **)v->items;
        return v->n;
    }
    char d[96];
    fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "%s must be a name or a list of names, got %s", what,
                  fg_ynode_describe(v, d, sizeof d));
    return -1;
}

/* Reads a guard list (dtypes: / layouts:) into a bit set. */
static unsigned parse_guard(fg_context *ctx, const fg_ynode *v, const char *what, const char *const *names, int n)
{
    const fg_ynode **items, *one[1];
    int cnt = scalar_list(ctx, v, what, one, &items);
    unsigned bits = 0;
    for (int i = 0; i < cnt; i++) {
        int found = -1;
        for (int j = 0; j < n && found < 0; j++)
            if (strcmp(items[i]->str, names[j]) == 0)
                found = j;
        if (found < 0)
            fg_diag_unknown(ctx, items[i]->loc, what[0] == 'd' ? "dtype" : "layout", items[i]->str, names, n);
        else
            bits |= 1u << found;
    }
    return bits;
}

/* Nonzero when every op the step can match has kind in mask. */
static int step_kinds_within(const fg_context *ctx, const fg_rule_step *s, unsigned mask)
{
    if (s->nops == 0)
        return s->kinds && (s->kinds & ~mask) == 0;
    for (int i = 0; i < s->nops; i++)
        if (!(mask & (1u << s->ops[i]->kind)))
            return 0;
    return 1;
}

/* The ops a step can match: its alternation, else every op of its kinds. */
static int step_ops(const fg_context *ctx, const fg_rule_step *s, const fg_opdef ***out)
{
    if (s->nops) {
        *out = (const fg_opdef **)s->ops;
        return s->nops;
    }
    const fg_opdef **v = fg_xmalloc(sizeof *v * (size_t)(ctx->nops + 1));
    int n = 0;
    for (int i = 0; i < ctx->nops; i++)
        if (s->kinds & (1u << ctx->ops[i]->kind))
            v[n++] = ctx->ops[i];
    *out = v;
    return n;
}

static void require_hook(fg_context *ctx, const fg_ynode *v, const char *what, const char **out)
{
    const char *name;
    if (!fg_yget_name(ctx, v, what, &name))
        return;
    if (!fg_hooks_has(ctx, name)) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown hook '%s' (%s must name a function of a loaded .lua file)",
                      name, what);
        return;
    }
    *out = fg_intern(ctx, name);
}

/* One step `- name: {op: ..., ...}` of `match:`. */
static void parse_step(fg_context *ctx, fg_rule *r, const fg_ynode *item, const char **names)
{
    char d[96];
    if (item->kind != FG_YNODE_MAP || item->n != 1) {
        fg_diag_error(ctx, FG_ERR_INPUT, item->loc,
                      "a match step must be a mapping with one key, its name (`- conv: { op: conv2d }`), got %s",
                      fg_ynode_describe(item, d, sizeof d));
        return;
    }
    const fg_ynode *k = FG_YKEY(item, 0), *v = FG_YVAL(item, 0);
    const char *name;
    if (!fg_yget_name(ctx, k, "step name", &name))
        return;
    if (r->nsteps >= FG_MAX_STEPS) {
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "rule '%s' has more than %d steps", r->name, FG_MAX_STEPS);
        return;
    }
    for (int i = 0; i < r->nsteps; i++)
        if (strcmp(r->steps[i].name, name) == 0) {
            fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "duplicate step '%s' in rule '%s' (first at line %d)", name,
                          r->name, r->steps[i].loc.line);
            return;
        }
    fg_rule_step *s = &r->steps[r->nsteps++];
    memset(s, 0, sizeof *s);
    s->name = fg_intern(ctx, name);
    s->loc = k->loc;
    if (!fg_yexpect(ctx, v, FG_YNODE_MAP, "a match step"))
        return;
    fg_ycheck_keys(ctx, v, "a match step", step_keys, (int)FG_COUNTOF(step_keys));

    const fg_ynode *op = fg_ymap_get(v, "op"), *kind = fg_ymap_get(v, "kind");
    const fg_ynode **items, *one[1];
    int cnt, ok = 1;
    if (op && kind) {
        fg_diag_error(ctx, FG_ERR_INPUT, fg_ymap_key(v, "kind")->loc, "step '%s' gives both `op` and `kind`; use one",
                      s->name);
        ok = 0;
    } else if (!op && !kind) {
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "step '%s' needs `op` or `kind`", s->name);
        ok = 0;
    } else if (op) {
        cnt = scalar_list(ctx, op, "op", one, &items);
        ok = cnt > 0;
        for (int i = 0; i < cnt; i++) {
            const fg_opdef *d2 = fg_ctx_find_op(ctx, items[i]->str);
            if (!d2) {
                fg_diag_unknown(ctx, items[i]->loc, "op", items[i]->str, names, ctx->nops);
                ok = 0;
            } else if (s->nops >= FG_MAX_STEP_OPS) {
                fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "step '%s' lists more than %d ops", s->name,
                              FG_MAX_STEP_OPS);
                ok = 0;
                break;
            } else {
                s->ops[s->nops++] = d2;
            }
        }
    } else {
        const char *kn[FG_OPK_COUNT];
        for (int j = 0; j < FG_OPK_COUNT; j++)
            kn[j] = fg_op_kind_name((fg_op_kind)j);
        cnt = scalar_list(ctx, kind, "kind", one, &items);
        ok = cnt > 0;
        for (int i = 0; i < cnt; i++) {
            int found = fg_kind_find(items[i]->str);
            if (found < 0) {
                fg_diag_unknown(ctx, items[i]->loc, "op kind", items[i]->str, kn, FG_OPK_COUNT);
                ok = 0;
            } else {
                s->kinds |= 1u << found;
            }
        }
    }

    const fg_ynode *opt = fg_ymap_get(v, "optional"), *rep = fg_ymap_get(v, "repeat");
    if (opt)
        fg_yget_bool(ctx, opt, "optional", &s->optional);
    if (rep && fg_yget_bool(ctx, rep, "repeat", &s->repeat) && s->repeat && ok &&
        !step_kinds_within(ctx, s, fg_kinds_with(FG_KIND_REPEAT))) {
        char kt[160];
        fg_diag_error(ctx, FG_ERR_INPUT, rep->loc, "`repeat` is only for %s steps; step '%s' matches other kinds",
                      fg_kinds_text(fg_kinds_with(FG_KIND_REPEAT), " and ", kt, sizeof kt), s->name);
    }
    if (s->optional && r->nsteps == 1)
        fg_diag_error(ctx, FG_ERR_INPUT, opt->loc, "the first step of a rule ('%s') cannot be optional", s->name);
    const fg_ynode *im = fg_ymap_get(v, "input_map");
    if (im && fg_yget_bool(ctx, im, "input_map", &s->input_map) && s->input_map && ok) {
        char kt[160];
        if (!step_kinds_within(ctx, s, fg_kinds_with(FG_KIND_PERMUTATION)))
            fg_diag_error(ctx, FG_ERR_INPUT, im->loc, "`input_map` is only for %s steps (a pure permutation of the "
                          "elements); step '%s' matches other kinds",
                          fg_kinds_text(fg_kinds_with(FG_KIND_PERMUTATION), " and ", kt, sizeof kt), s->name);
        else if (r->nsteps > 1 && !r->steps[r->nsteps - 2].input_map)
            fg_diag_error(ctx, FG_ERR_INPUT, im->loc, "`input_map` steps must lead the chain; step '%s' follows "
                          "step '%s', which is not one", s->name, r->steps[r->nsteps - 2].name);
    }

    const fg_ynode *ci = fg_ymap_get(v, "chain_input");
    int64_t slot;
    if (ci && fg_yget_int(ctx, ci, "chain_input", &slot)) {
        if (r->nsteps == 1)
            fg_diag_error(ctx, FG_ERR_INPUT, ci->loc, "the first step of a rule ('%s') has no chain input (it "
                          "consumes no earlier step)", s->name);
        else if (slot < 0 || slot >= FG_MAX_INPUTS)
            fg_diag_error(ctx, FG_ERR_INPUT, ci->loc, "chain_input of step '%s' must be an input slot in 0..%d, got %"
                          PRId64, s->name, FG_MAX_INPUTS - 1, slot);
        else
            s->chain_input = (int)slot + 1;
    }

    const fg_ynode *where = fg_ymap_get(v, "where");
    if (where && ok) {
        const char *src;
        if (fg_yget_str(ctx, where, "where", &src)) {
            const fg_opdef **ops;
            int nops = step_ops(ctx, s, &ops);
            fg_where_compile(ctx, src, where->loc, fg_ynode_text_loc(where), s->name, ops, nops, s->where_vars,
                             &s->nwhere_vars, &s->where, &s->where_src);
            if (ops != (const fg_opdef **)s->ops)
                free(ops);
        }
    }
    const fg_ynode *wh = fg_ymap_get(v, "where_hook");
    if (wh)
        require_hook(ctx, wh, "where_hook", &s->where_hook);
}

static int find_step(const fg_rule *r, const char *name)
{
    for (int i = 0; i < r->nsteps; i++)
        if (strcmp(r->steps[i].name, name) == 0)
            return i;
    return -1;
}

/* Reports an unknown step name with a suggestion. */
static void unknown_step(fg_context *ctx, const fg_rule *r, fg_loc loc, const char *name)
{
    const char *cands[FG_MAX_STEPS];
    for (int i = 0; i < r->nsteps; i++)
        cands[i] = r->steps[i].name;
    const char *s = fg_suggest(name, cands, r->nsteps);
    if (s)
        fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown step '%s' in rule '%s' (did you mean '%s'?)", name, r->name, s);
    else
        fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown step '%s' in rule '%s'", name, r->name);
}

/* `bias: step.input`: the input must sit at the same position in every op
 * of the step that has it, and an op without it must have fewer inputs than
 * that position (so the node simply has no bias there, like an absent
 * optional input).  At least one op must have it. */
static void parse_bias(fg_context *ctx, const fg_rule *r, const fg_ynode *v, fg_epi_stage *e)
{
    const char *ref;
    if (!fg_yget_str(ctx, v, "bias", &ref))
        return;
    const char *dot = strchr(ref, '.');
    if (!dot || dot == ref || !dot[1]) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "bias must be written step.input (e.g. conv.bias), got '%s'", ref);
        return;
    }
    char *step = fg_xstrndup(ref, (size_t)(dot - ref));
    const char *input = dot + 1;
    e->step = find_step(r, step);
    if (e->step < 0) {
        unknown_step(ctx, r, v->loc, step);
        free(step);
        return;
    }
    free(step);
    const fg_rule_step *s = &r->steps[e->step];
    const fg_opdef **ops;
    int nops = step_ops(ctx, s, &ops), ok = 1, minlen = FG_MAX_INPUTS + 1;
    const fg_opdef *without = NULL;
    e->input = -1;
    for (int i = 0; i < nops && ok; i++) {
        int idx = -1;
        for (int j = 0; j < ops[i]->ninputs; j++)
            if (strcmp(ops[i]->inputs[j].name, input) == 0)
                idx = j;
        if (idx < 0) {
            if (ops[i]->ninputs < minlen)
                minlen = ops[i]->ninputs;
            if (!without || ops[i]->ninputs > without->ninputs)
                without = ops[i];
            continue;
        }
        if (e->input >= 0 && e->input != idx) {
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "input '%s' is not at the same position in every op of step '%s'",
                          input, s->name);
            ok = 0;
        }
        e->input = idx;
    }
    if (ok && e->input < 0) {
        const char *cands[FG_MAX_INPUTS];
        int nc = 0;
        for (int j = 0; without && j < without->ninputs; j++)
            cands[nc++] = without->inputs[j].name;
        const char *sug = fg_suggest(input, cands, nc);
        if (nops == 0)
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "step '%s' matches no loaded op", s->name);
        else if (nops == 1)
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "op '%s' of step '%s' has no input '%s'%s%s%s", ops[0]->name,
                          s->name, input, sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
        else
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "no op of step '%s' has an input '%s'%s%s%s", s->name, input,
                          sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
        ok = 0;
    }
    if (ok && without && without->ninputs > e->input) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc,
                      "op '%s' of step '%s' has no input '%s' but has another input at its position %d",
                      without->name, s->name, input, e->input);
        ok = 0;
    }
    if (!ok)
        e->input = -1;
    if (ops != (const fg_opdef **)s->ops)
        free(ops);
}

static void parse_epilogue(fg_context *ctx, fg_rule *r, const fg_ynode *epi)
{
    char d[96];
    if (!fg_yexpect(ctx, epi, FG_YNODE_SEQ, "epilogue"))
        return;
    for (int i = 0; i < epi->n; i++) {
        const fg_ynode *item = epi->items[i];
        if (item->kind != FG_YNODE_MAP || item->n != 1) {
            fg_diag_error(ctx, FG_ERR_INPUT, item->loc,
                          "an epilogue stage must be one of `bias: step.input`, `apply: step`, `hook: name`, got %s",
                          fg_ynode_describe(item, d, sizeof d));
            continue;
        }
        if (fg_ycheck_keys(ctx, item, "an epilogue stage", epi_keys, (int)FG_COUNTOF(epi_keys)))
            continue;
        if (r->nepilogue >= FG_MAX_EPILOGUE) {
            fg_diag_error(ctx, FG_ERR_INPUT, item->loc, "rule '%s' has more than %d epilogue stages", r->name,
                          FG_MAX_EPILOGUE);
            return;
        }
        const fg_ynode *k = FG_YKEY(item, 0), *v = FG_YVAL(item, 0);
        fg_epi_stage e = {0};
        e.loc = k->loc;
        e.step = -1;
        e.input = -1;
        if (strcmp(k->str, "bias") == 0) {
            e.kind = FG_EPI_BIAS;
            parse_bias(ctx, r, v, &e);
            if (e.input < 0)
                continue;
        } else if (strcmp(k->str, "apply") == 0) {
            const char *name;
            e.kind = FG_EPI_APPLY;
            if (!fg_yget_name(ctx, v, "apply", &name))
                continue;
            e.step = find_step(r, name);
            if (e.step < 0) {
                unknown_step(ctx, r, v->loc, name);
                continue;
            }
            unsigned stages = fg_kinds_of_role(FG_ROLE_ELEMENTWISE);
            if (!step_kinds_within(ctx, &r->steps[e.step], stages)) {
                char kt[160];
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "`apply: %s`: step '%s' must match only %s ops", name, name,
                              fg_kinds_text(stages, " or ", kt, sizeof kt));
                continue;
            }
        } else {
            e.kind = FG_EPI_HOOK;
            require_hook(ctx, v, "epilogue hook", &e.hook);
            if (!e.hook)
                continue;
        }
        r->epilogue[r->nepilogue++] = e;
    }
}

static void parse_folds(fg_context *ctx, fg_rule *r, const fg_ynode *v)
{
    const fg_ynode **items, *one[1];
    int cnt = scalar_list(ctx, v, "fold", one, &items);
    for (int i = 0; i < cnt; i++) {
        const char *name = items[i]->str;
        fg_fold f = {fg_intern(ctx, name), 0, items[i]->loc};
        if (!fg_fold_is_builtin(name)) {
            if (!fg_hooks_has(ctx, name)) {
                int nb = 0;
                const char *const *b = fg_fold_builtin_names(&nb);
                const char *s = fg_suggest(name, b, nb);
                if (s)
                    fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "unknown fold '%s' (did you mean '%s'?)", name, s);
                else
                    fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc,
                                  "unknown fold '%s' (neither a builtin fold nor a loaded hook)", name);
                continue;
            }
            f.is_hook = 1;
        }
        if (r->nfolds >= FG_MAX_FOLDS) {
            fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "rule '%s' has more than %d folds", r->name, FG_MAX_FOLDS);
            return;
        }
        r->folds[r->nfolds++] = f;
    }
}

static void parse_kernel(fg_context *ctx, fg_rule *r, const fg_ynode *kernel)
{
    if (!fg_yexpect(ctx, kernel, FG_YNODE_MAP, "kernel"))
        return;
    fg_ycheck_keys(ctx, kernel, "kernel", kernel_keys, (int)FG_COUNTOF(kernel_keys));
    const fg_ynode *t = fg_ymap_get(kernel, "template"), *params = fg_ymap_get(kernel, "params"),
                   *epi = fg_ymap_get(kernel, "epilogue"), *sel = fg_ymap_get(kernel, "select");
    const char *name;
    if (t && !fg_ynode_is_null(t) && fg_yget_name(ctx, t, "template", &name)) {
        /* a family or one template of the registry; absent: the planner chooses */
        if (fg_template_known(ctx, name)) {
            r->template_name = fg_intern(ctx, name);
        } else {
            int n;
            const char **cands = fg_template_names(ctx, &n);
            fg_diag_unknown(ctx, t->loc, "template", name, cands, n);
            free(cands);
        }
    }
    if (sel)
        require_hook(ctx, sel, "select", &r->select_hook);
    if (params)
        require_hook(ctx, params, "params", &r->tile_hook);
    if (epi && !fg_ynode_is_null(epi))
        parse_epilogue(ctx, r, epi);
}

/* `hooks: file.lua`: must exist beside the rule file; its bytes join the
 * rule's hash: the bytes the directory's hooks were loaded from when it is
 * one of its *.lua files, else the file opened once beneath the directory. */
static void parse_hook_file(fg_context *ctx, fg_rule *r, const fg_ynode *v, const fg_rules_src *src)
{
    const char *name;
    if (!fg_yget_str(ctx, v, "hooks", &name))
        return;
    if (!fg_rules_file_name_ok(name)) {
        char esc[300];
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "hooks must name a file in the rule's directory (letters, digits, "
                      "'.', '_', '-', '+'), got '%s'", fg_escape_name(name, esc, sizeof esc));
        return;
    }
    const char *dir = src && src->dir ? src->dir : ".";
    uint64_t fh = 0;
    for (int i = 0; src && i < src->nlua && !fh; i++)
        if (strcmp(src->lua_names[i], name) == 0)
            fh = src->lua_hashes[i];
    if (!fh) {
        size_t len;
        char why[160], *text = NULL;
        int fd = fg_open_beneath(src ? src->dirfd : AT_FDCWD, name, 0, NULL, why, sizeof why);
        if (fd >= 0) {
            text = fg_read_fd(fd, FG_RULES_FILE_MAX, &len, why, sizeof why);
            int e = errno;
            close(fd);
            errno = e;
        }
        if (!text) {
            if (errno == ENOENT)
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "hooks file '%s' not found in %s", name, dir);
            else
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "hooks file '%s' cannot be read in %s: %s", name, dir, why);
            return;
        }
        fh = fg_hash64(text, len);
        free(text);
    }
    uint64_t h[2] = {r->file_hash, fh};
    r->file_hash = fg_hash64(h, sizeof h);
    char *path = fg_path_join(dir, name);
    r->hook_file = fg_intern(ctx, path);
    free(path);
}

/* Leading `input_map:` steps (each checked in parse_step) need a step after
 * them that computes: a required step of anchor kinds (FG_ROLE_ANCHOR in
 * the op-kind table), which reads the map's output as its input 0. */
static void check_input_map(fg_context *ctx, fg_rule *r)
{
    int nmap = 0;
    while (nmap < r->nsteps && r->steps[nmap].input_map)
        nmap++;
    if (nmap == 0)
        return;
    if (nmap == r->nsteps) {
        fg_diag_error(ctx, FG_ERR_INPUT, r->steps[nmap - 1].loc, "rule '%s': every step is an `input_map` step; "
                      "a step that reads the map (a conv2d, say) must follow them", r->name);
        return;
    }
    const fg_rule_step *a = &r->steps[nmap];
    unsigned anchors = fg_kinds_of_role(FG_ROLE_ANCHOR);
    char kt[256];
    if (a->optional)
        fg_diag_error(ctx, FG_ERR_INPUT, a->loc, "rule '%s': step '%s' reads the input map and cannot be optional",
                      r->name, a->name);
    else if ((a->nops || a->kinds) && !step_kinds_within(ctx, a, anchors))
        fg_diag_error(ctx, FG_ERR_INPUT, a->loc, "rule '%s': step '%s' after the `input_map` steps must match "
                      "anchor ops only (%s): a kernel reads its input through the map", r->name, a->name,
                      fg_kinds_text(anchors, ", ", kt, sizeof kt));
}

fg_status fg_rule_load(fg_context *ctx, const fg_ynode *map, const fg_rules_src *src, uint64_t file_hash)
{
    int errs0 = ctx->nerrors;
    const char *name;
    fg_rule *r = fg_xcalloc(1, sizeof *r);
    const char **names = fg_ctx_op_names(ctx);

    fg_ycheck_keys(ctx, map, "a rule", rule_keys, (int)FG_COUNTOF(rule_keys));
    r->loc = fg_ymap_key(map, "rule")->loc;
    r->file_hash = file_hash;
    r->dtypes = (1u << FG_DTYPE_COUNT) - 1;
    r->layouts = (1u << FG_LAYOUT_COUNT) - 1;
    r->name = fg_yget_name(ctx, fg_ymap_get(map, "rule"), "rule name", &name) ? fg_intern(ctx, name) : "?";

    const fg_ynode *v;
    int64_t prio;
    if ((v = fg_ymap_get(map, "priority")) && fg_yget_int(ctx, v, "priority", &prio)) {
        if (prio < -1000000 || prio > 1000000)
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "priority %lld is out of range", (long long)prio);
        r->priority = (int)prio;
    }
    if ((v = fg_ymap_get(map, "dtypes"))) {
        const char *dn[FG_DTYPE_COUNT];
        for (int i = 0; i < FG_DTYPE_COUNT; i++)
            dn[i] = fg_dtype_name((fg_dtype)i);
        r->dtypes = parse_guard(ctx, v, "dtypes", dn, FG_DTYPE_COUNT);
    }
    if ((v = fg_ymap_get(map, "layouts"))) {
        const char *ln[FG_LAYOUT_COUNT];
        for (int i = 0; i < FG_LAYOUT_COUNT; i++)
            ln[i] = fg_layout_name((fg_layout)i);
        r->layouts = parse_guard(ctx, v, "layouts", ln, FG_LAYOUT_COUNT);
    }
    if ((v = fg_ymap_get(map, "hooks")))
        parse_hook_file(ctx, r, v, src);

    const fg_ynode *match = fg_ymap_get(map, "match");
    if (!match) {
        fg_diag_error(ctx, FG_ERR_INPUT, r->loc, "rule '%s' has no `match`", r->name);
    } else if (fg_yexpect(ctx, match, FG_YNODE_SEQ, "match")) {
        if (match->n == 0)
            fg_diag_error(ctx, FG_ERR_INPUT, match->loc, "rule '%s': `match` is empty", r->name);
        for (int i = 0; i < match->n; i++)
            parse_step(ctx, r, match->items[i], names);
    }
    check_input_map(ctx, r);
    if ((v = fg_ymap_get(map, "fold")) && !fg_ynode_is_null(v))
        parse_folds(ctx, r, v);
    const fg_ynode *kernel = fg_ymap_get(map, "kernel");
    if (!kernel)
        fg_diag_error(ctx, FG_ERR_INPUT, r->loc, "rule '%s' has no `kernel`", r->name);
    else
        parse_kernel(ctx, r, kernel);
    free(names);

    if (ctx->nerrors != errs0) {
        for (int s = 0; s < r->nsteps; s++)
            fg_expr_free(r->steps[s].where);
        free(r);
        return FG_ERR_INPUT;
    }
    return fg_ctx_add_rule(ctx, r);
}
