/* context.c -- fg_context life cycle (settings from env.c, diagnostics in
 * diag.c), teardown registration, and the vocabulary's lookups. */
#define _GNU_SOURCE /* dladdr */
#include "context.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "hook.h"
#include "rewrite.h"
#include "template.h"

/* Nonzero when dir/ops.yaml exists. */
static int has_rules(const char *dir)
{
    char *probe = fg_path_join(dir, "ops.yaml");
    FILE *f = fopen(probe, "r");
    free(probe);
    if (f)
        fclose(f);
    return f != NULL;
}

/* The shipped rules, first found of: <prefix>/share/fusegen/rules next to
 * the installed library that holds this code (wherever it was installed),
 * the source tree's rules/ (a build tree), the configured install prefix. */
static char *default_rules_dir(void)
{
    Dl_info info;
    if (dladdr((void *)default_rules_dir, &info) && info.dli_fname) {
        char *lib = fg_xstrdup(info.dli_fname);
        char *slash = strrchr(lib, '/');
        if (slash) {
            *slash = 0;
            char *dir = fg_path_join(lib, "../share/fusegen/rules");
            free(lib);
            char *real = has_rules(dir) ? realpath(dir, NULL) : NULL;
            free(dir);
            if (real)
                return real;
        } else {
            free(lib);
        }
    }
    const char *cands[] = {FG_SOURCE_DIR "/rules", FG_INSTALL_DATA_DIR "/rules"};
    for (size_t i = 0; i < FG_COUNTOF(cands); i++)
        if (has_rules(cands[i]))
            return fg_xstrdup(cands[i]);
    return fg_xstrdup(cands[0]);
}

FG_API fg_status fg_context_init(fg_context **out, const fg_options *opts)
{
    if (!out)
        return FG_ERR_INPUT;
    fg_context *ctx = fg_xcalloc(1, sizeof *ctx);
    *out = ctx;
    pthread_mutex_init(&ctx->lock, NULL);
    /* Every setting, once: options, then environment, then defaults.  The
     * hook budgets are in ctx->opts before any rule file is loaded. */
    fg_status st = fg_env_resolve(ctx, opts);
    if (!ctx->rules_dir)
        ctx->rules_dir = default_rules_dir();
    ctx->opts.rules_dir = ctx->rules_dir;
    if (st || ctx->opts.no_rules)
        return st;
    return fg_rules_load(ctx, ctx->rules_dir);
}

void fg_ctx_on_free(fg_context *ctx, fg_ctx_teardown_fn fn)
{
    pthread_mutex_lock(&ctx->lock);
    int have = 0;
    for (int i = 0; i < ctx->nteardown; i++)
        have |= ctx->teardown[i] == fn;
    if (!have)
        *FG_PUSH(ctx->teardown, ctx->nteardown, ctx->teardown_cap) = fn;
    pthread_mutex_unlock(&ctx->lock);
}

FG_API void fg_context_free(fg_context *ctx)
{
    if (!ctx)
        return;
    for (int i = ctx->nteardown - 1; i >= 0; i--)
        ctx->teardown[i](ctx);
    free(ctx->teardown);
    fg_hooks_free(ctx->hooks);
    fg_templates_free(ctx);
    for (int i = 0; i < ctx->nops; i++) {
        fg_expr_free(ctx->ops[i]->expr);
        free(ctx->ops[i]);
    }
    free(ctx->ops);
    for (int i = 0; i < ctx->nrules; i++) {
        for (int s = 0; s < ctx->rules[i]->nsteps; s++)
            fg_expr_free(ctx->rules[i]->steps[s].where);
        free(ctx->rules[i]);
    }
    free(ctx->rules);
    fg_rewrites_free(ctx);
    fg_diag_free(ctx);
    fg_env_free(&ctx->env);
    free(ctx->rules_dir);
    free(ctx->cache_dir);
    free(ctx->arch);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char **fg_ctx_op_names(const fg_context *ctx)
{
    const char **v = fg_xmalloc(sizeof *v * (size_t)(ctx->nops + 1));
    for (int i = 0; i < ctx->nops; i++)
        v[i] = ctx->ops[i]->name;
    return v;
}

const fg_opdef *fg_ctx_find_op(const fg_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nops; i++)
        if (strcmp(ctx->ops[i]->name, name) == 0)
            return ctx->ops[i];
    return NULL;
}

int fg_ctx_find_rule(const fg_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nrules; i++)
        if (strcmp(ctx->rules[i]->name, name) == 0)
            return i;
    return -1;
}

fg_status fg_ctx_add_op(fg_context *ctx, fg_opdef *op)
{
    const fg_opdef *old = fg_ctx_find_op(ctx, op->name);
    if (old) {
        fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "duplicate op '%s' (first defined at %s:%d)",
                                     op->name, old->loc.file ? old->loc.file : "?", old->loc.line);
        fg_expr_free(op->expr);
        free(op);
        return st;
    }
    *FG_PUSH(ctx->ops, ctx->nops, ctx->ops_cap) = op;
    return FG_OK;
}

fg_status fg_ctx_add_rule(fg_context *ctx, fg_rule *rule)
{
    int old = fg_ctx_find_rule(ctx, rule->name);
    if (old >= 0) {
        const fg_rule *o = ctx->rules[old];
        fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, rule->loc, "duplicate rule '%s' (first defined at %s:%d)",
                                     rule->name, o->loc.file ? o->loc.file : "?", o->loc.line);
        for (int s = 0; s < rule->nsteps; s++)
            fg_expr_free(rule->steps[s].where);
        free(rule);
        return st;
    }
    *FG_PUSH(ctx->rules, ctx->nrules, ctx->rules_cap) = rule;
    return FG_OK;
}
