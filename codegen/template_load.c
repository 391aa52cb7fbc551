/*
 * template_load.c -- the `template:` documents of a rules directory
 * (contract in template.h, fg_template_load): a registered variant of a
 * template, its base, priority, dtypes, layouts and `where` constraint over
 * the base's capability variables.  A loader: it reads YAML and fills the
 * registry's records.
 */
#include "template.h"

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "expr.h"
#include "kind.h"
#include "load.h"
#include "yaml_doc.h"

static const char *dtype_i(int i) { return fg_dtype_name((fg_dtype)i); }
static const char *layout_i(int i) { return fg_layout_name((fg_layout)i); }

static const char *const template_keys[] = {"template", "base", "where", "priority", "dtypes", "layouts"};

static unsigned parse_mask(fg_context *ctx, const fg_ynode *v, const char *what, const char *(*name)(int), int count)
{
    const fg_ynode *one[1] = {v};
    const fg_ynode *const *items = one;
    int n = 1;
    if (v->kind == FG_YNODE_SEQ) {
        items = (const fg_ynode *const *)v->items;
        n = v->n;
    }
    unsigned bits = 0;
    for (int i = 0; i < n; i++) {
        const char *s;
        if (!fg_yget_str(ctx, items[i], what, &s))
            continue;
        int found = -1;
        for (int k = 0; k < count && found < 0; k++)
            if (strcmp(s, name(k)) == 0)
                found = k;
        if (found < 0)
            fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "unknown %s '%s'", what, s);
        else
            bits |= 1u << found;
    }
    return bits;
}

static int first_kind(unsigned kinds)
{
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (kinds & (1u << k))
            return k;
    return 0;
}

fg_status fg_template_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash)
{
    int errs0 = ctx->nerrors;
    fg_ycheck_keys(ctx, map, "a template", template_keys, (int)FG_COUNTOF(template_keys));
    fg_template *t = fg_xcalloc(1, sizeof *t);
    const char *name = NULL, *base = NULL;
    t->loc = fg_ymap_key(map, "template")->loc;
    t->file_hash = file_hash;
    if (fg_yget_name(ctx, fg_ymap_get(map, "template"), "template name", &name)) {
        if (fg_template_known(ctx, name))
            fg_diag_error(ctx, FG_ERR_INPUT, t->loc, "template '%s' is already defined", name);
        t->name = fg_intern(ctx, name);
    }
    const fg_ynode *v = fg_ymap_get(map, "base");
    const fg_template *b = NULL;
    if (!v) {
        fg_diag_error(ctx, FG_ERR_INPUT, t->loc, "template '%s' has no `base` (the built-in template it renders)",
                      name ? name : "?");
    } else if (fg_yget_name(ctx, v, "base", &base)) {
        const fg_template *f = fg_template_find(ctx, base);
        b = f && !f->base ? f : NULL;
        if (!b) {
            int n = fg_template_count(ctx), nc = 0;
            const char **cands = fg_xmalloc(sizeof *cands * (size_t)n);
            for (int i = 0; i < n; i++)
                if (!fg_template_at(ctx, i)->base)
                    cands[nc++] = fg_template_at(ctx, i)->name;
            const char *sug = fg_suggest(base, cands, nc);
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown base template '%s'%s%s%s", base,
                          sug ? " (did you mean '" : " (a base is one of the built-in templates)", sug ? sug : "",
                          sug ? "'?)" : "");
            free(cands);
        }
    }
    if (b) {
        const char *tname = t->name;
        *t = *b;
        t->name = tname;
        t->check = NULL;
        t->describe = NULL;
        t->base = b;
        t->loc = fg_ymap_key(map, "template")->loc;
        t->file_hash = file_hash;
        int64_t prio;
        if ((v = fg_ymap_get(map, "priority")) && fg_yget_int(ctx, v, "priority", &prio)) {
            if (prio < -1000000 || prio > 1000000)
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "priority %lld is out of range", (long long)prio);
            t->priority = (int)prio;
        }
        if ((v = fg_ymap_get(map, "dtypes")))
            t->dtypes &= parse_mask(ctx, v, "dtype", dtype_i, FG_DTYPE_COUNT);
        if ((v = fg_ymap_get(map, "layouts")))
            t->layouts &= parse_mask(ctx, v, "layout", layout_i, FG_LAYOUT_COUNT);
        const char *src;
        if ((v = fg_ymap_get(map, "where")) && fg_yget_str(ctx, v, "where", &src)) {
            const fg_kind_info *ki = fg_kind((fg_op_kind)first_kind(b->kinds));
            int nv = 0;
            while (ki->var_names[nv])
                nv++;
            t->where = fg_expr_parse(ctx, src, fg_ynode_text_loc(v), ki->var_names, nv);
            t->where_src = fg_intern(ctx, src);
        }
    }
    if (ctx->nerrors != errs0 || !t->name) {
        fg_expr_free(t->where);
        free(t);
        return FG_ERR_INPUT;
    }
    fg_ctx_on_free(ctx, fg_templates_free);
    *FG_PUSH(ctx->templates, ctx->ntemplates, ctx->templates_cap) = t;
    return FG_OK;
}

