/* context.c -- the fg_context record: its creation (settings from env.c)
 * and release (the teardown each subsystem registered, then the vocabulary
 * and the diagnostics of diag.c), the device arch the API layer records,
 * and the vocabulary's lookups.  It calls no loader and no pass: loading a
 * rules directory into a new context is the API layer's (runtime/api.c,
 * fg_context_init). */
#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "oom.h"

fg_status fg_ctx_new(fg_context **out, const fg_options *opts)
{
    fg_context *ctx = fg_xcalloc(1, sizeof *ctx);
    *out = ctx;
    pthread_mutex_init(&ctx->lock, NULL);
    return fg_env_resolve(ctx, opts);
}

void fg_ctx_set_device_arch(fg_context *ctx, const char *arch)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->device_asked) {
        snprintf(ctx->device_arch, sizeof ctx->device_arch, "%s", arch ? arch : "");
        __atomic_store_n(&ctx->device_asked, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ctx->lock);
}

int fg_ctx_device_asked(const fg_context *ctx) { return __atomic_load_n(&ctx->device_asked, __ATOMIC_ACQUIRE); }

void fg_ctx_on_free(fg_context *ctx, fg_ctx_teardown_fn fn)
{
    fg_oom_hold();   /* the context's, and under its lock (oom.h) */
    pthread_mutex_lock(&ctx->lock);
    int have = 0;
    for (int i = 0; i < ctx->nteardown; i++)
        have |= ctx->teardown[i] == fn;
    if (!have)
        *FG_PUSH(ctx->teardown, ctx->nteardown, ctx->teardown_cap) = fn;
    pthread_mutex_unlock(&ctx->lock);
    fg_oom_release();
}

FG_API void fg_context_free(fg_context *ctx)
{
    if (!ctx)
        return;
    for (int i = ctx->nteardown - 1; i >= 0; i--)
        ctx->teardown[i](ctx);
    free(ctx->teardown);
    fg_ctx_clear_vocabulary(ctx);
    fg_diag_free(ctx);
    fg_env_free(&ctx->env);
    free(ctx->rules_dir);
    free(ctx->cache_dir);
    free(ctx->arch);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

void fg_ctx_clear_vocabulary(fg_context *ctx)
{
    for (int i = 0; i < ctx->nops; i++) {
        fg_expr_free(ctx->ops[i]->expr);
        free(ctx->ops[i]);
    }
    free(ctx->ops);
    ctx->ops = NULL;
    ctx->nops = ctx->ops_cap = 0;
    for (int i = 0; i < ctx->nrules; i++) {
        for (int s = 0; s < ctx->rules[i]->nsteps; s++)
            fg_expr_free(ctx->rules[i]->steps[s].where);
        free(ctx->rules[i]);
    }
    free(ctx->rules);
    ctx->rules = NULL;
    ctx->nrules = ctx->rules_cap = 0;
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

const fg_opdef *fg_ctx_find_onnx_op(const fg_context *ctx, const char *type)
{
    for (int i = 0; i < ctx->nops; i++)
        if (ctx->ops[i]->onnx && strcmp(ctx->ops[i]->onnx, type) == 0)
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
    const fg_opdef *old = fg_ctx_find_op(ctx, op->name), *claim = op->onnx ? fg_ctx_find_onnx_op(ctx, op->onnx) : NULL;
    if (old || claim) {
        fg_status st = old ? fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "duplicate op '%s' (first defined at %s:%d)",
                                           op->name, old->loc.file ? old->loc.file : "?", old->loc.line)
                           : fg_diag_error(ctx, FG_ERR_INPUT, op->loc,
                                           "op '%s': ONNX operator '%s' is already imported onto op '%s' (defined at %s:%d)",
                                           op->name, op->onnx, claim->name, claim->loc.file ? claim->loc.file : "?",
                                           claim->loc.line);
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
