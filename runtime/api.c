/*
 * api.c -- the kernel-by-specification API (fg_kernel_*): a chain of ops is
 * written out as a small graph in the ordinary YAML graph format, parsed with
 * fg_graph_parse, planned with the context's rules, and must come out as one
 * fused kernel, which is then compiled like any plan (fg_plan_compile).  The
 * generated graph text is kept so that errors point into it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "exec.h"

struct fg_kernel_handle {
    fg_context *ctx;
    fg_graph *g;
    fg_plan *p;
    fg_exec *e;
};

static void put_shape(fg_buf *b, int rank, const int64_t *shape)
{
    fg_buf_put(b, "[");
    for (int i = 0; i < rank; i++)
        fg_buf_printf(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fg_buf_put(b, "]");
}

static const fg_spec_weight *find_weight(const fg_kernel_spec *s, const char *name)
{
    for (int i = 0; i < s->nweights; i++)
        if (s->weights[i].name && strcmp(s->weights[i].name, name) == 0)
            return &s->weights[i];
    return NULL;
}

/* Writes the spec as graph YAML into b; returns FG_OK or an input error. */
static fg_status spec_yaml(fg_context *ctx, const fg_kernel_spec *s, fg_buf *b)
{
    if (s->nops < 1 || !s->ops)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: no ops");
    if (s->rank < 1 || s->rank > 6)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: input rank %d (1..6)", s->rank);
    if ((unsigned)s->dtype >= FG_DTYPE_COUNT || (unsigned)s->layout >= FG_LAYOUT_COUNT)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: bad dtype or layout");
    for (int i = 0; i < s->nweights; i++)
        if (!s->weights[i].name || s->weights[i].rank < 1 || s->weights[i].rank > 6)
            return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: weight %d has no name or a bad rank", i);

    fg_buf_printf(b, "graph: kernel_spec\nseed: 1\ndtype: %s\nlayout: %s\ninputs:\n  - { name: x, shape: ",
                  fg_dtype_name(s->dtype), fg_layout_name(s->layout));
    put_shape(b, s->rank, s->input_shape);
    fg_buf_put(b, " }\n");
    if (s->nweights) {
        fg_buf_put(b, "weights:\n");
        for (int i = 0; i < s->nweights; i++) {
            fg_buf_printf(b, "  - { name: %s, shape: ", s->weights[i].name);
            put_shape(b, s->weights[i].rank, s->weights[i].shape);
            fg_buf_put(b, " }\n");
        }
    }
    fg_buf_put(b, "nodes:\n");
    const char *prev = "x";
    int used = 0;
    for (int i = 0; i < s->nops; i++) {
        const fg_spec_op *o = &s->ops[i];
        if (!o->name || !o->op)
            return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: op %d has no name or op", i);
        const fg_opdef *od = fg_ctx_find_op(ctx, o->op);
        if (!od) {
            const char **names = fg_xmalloc(((size_t)ctx->nops + 1) * sizeof *names);
            for (int j = 0; j < ctx->nops; j++)
                names[j] = ctx->ops[j]->name;
            const char *sug = fg_suggest(o->op, names, ctx->nops);
            fg_status st = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: unknown op '%s'%s%s%s", o->op,
                                         sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
            free(names);
            return st;
        }
        fg_buf_printf(b, "  - { name: %s, op: %s, inputs: [%s", o->name, o->op, prev);
        for (int j = 1; j < od->ninputs; j++) {
            char wname[256];
            snprintf(wname, sizeof wname, "%s.%s", o->name, od->inputs[j].name);
            if (find_weight(s, wname)) {
                fg_buf_printf(b, ", %s", wname);
                used++;
            } else if (od->inputs[j].optional) {
                fg_buf_put(b, ", ~");
            } else {
                return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                                     "kernel spec: %s step '%s' needs a weight named '%s'", o->op, o->name, wname);
            }
        }
        fg_buf_put(b, "]");
        if (o->attrs && *o->attrs)
            fg_buf_printf(b, ", attrs: %s", o->attrs);
        if (i == s->nops - 1)
            fg_buf_put(b, ", output: y");
        fg_buf_put(b, " }\n");
        prev = o->name;
    }
    if (used != s->nweights)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                             "kernel spec: %d weight(s) name no input of the chain (names are '<step>.<input>')",
                             s->nweights - used);
    fg_buf_put(b, "outputs: [y]\n");
    return FG_OK;
}

FG_API fg_status fg_kernel_create(fg_context *ctx, const fg_kernel_spec *s, fg_kernel_handle **out)
{
    *out = NULL;
    fg_buf y = {0};
    fg_status st = spec_yaml(ctx, s, &y);
    fg_kernel_handle *h = fg_xcalloc(1, sizeof *h);
    h->ctx = ctx;
    if (!st)
        st = fg_graph_parse(ctx, "<kernel spec>", y.s, y.len, &h->g);
    for (int i = 0; i < s->nweights && !st; i++) {
        const fg_spec_weight *w = &s->weights[i];
        if (!w->data)
            continue;
        int t = fg_graph_find_tensor(h->g, w->name);
        if (t < 0 || !h->g->tensors[t].data) {
            st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel spec: weight '%s' missing from its graph",
                               w->name);
            break;
        }
        memcpy(h->g->tensors[t].data, w->data, (size_t)fg_tensor_numel(&h->g->tensors[t]) * sizeof(float));
    }
    if (!st)
        st = fg_plan_build(ctx, h->g, &h->p);
    if (!st && h->p->ngroups != 1) {
        fg_buf nodes = {0};
        for (int i = 0; i < h->p->ngroups; i++) {
            const fg_group *gr = &h->p->groups[i];
            fg_buf_printf(&nodes, "%s[", i ? ", " : "");
            for (int j = 0; j < gr->nnodes; j++)
                fg_buf_printf(&nodes, "%s%s", j ? " " : "", h->p->graph->nodes[gr->nodes[j]].name);
            fg_buf_put(&nodes, "]");
        }
        st = fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC,
                           "kernel spec: the loaded rules make %d kernels of this chain, not one: %s "
                           "(`fusegen plan --explain` on the same chain says why)",
                           h->p->ngroups, nodes.s ? nodes.s : "");
        fg_buf_free(&nodes);
    }
    if (!st && s->template_name && strcmp(s->template_name, h->p->groups[0].template_name) != 0)
        st = fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC,
                           "kernel spec: asked for template '%s' but the rules chose '%s' (rule %s)", s->template_name,
                           h->p->groups[0].template_name,
                           h->p->groups[0].rule >= 0 ? ctx->rules[h->p->groups[0].rule]->name : "none");
    if (!st)
        st = fg_plan_compile(ctx, h->p, &s->compile, &h->e);
    fg_buf_free(&y);
    if (st) {
        fg_kernel_handle_free(h);
        return st;
    }
    *out = h;
    return FG_OK;
}

FG_API void fg_kernel_handle_free(fg_kernel_handle *h)
{
    if (!h)
        return;
    fg_exec_free(h->e);
    fg_plan_free(h->p);
    fg_graph_free(h->g);
    free(h);
}

FG_API const char *fg_kernel_source(const fg_kernel_handle *h) { return fg_exec_kernel_source(h->e, 0); }

FG_API fg_exec *fg_kernel_exec(fg_kernel_handle *h) { return h->e; }

FG_API fg_status fg_kernel_launch(fg_kernel_handle *h, const fg_binding *b, int n, void *stream)
{
    return fg_exec_run(h->e, b, n, stream);
}
