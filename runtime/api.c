/*
 * api.c -- the API layer: the public entry points that run more than one
 * stage.  fg_context_init makes the context record (codegen/context.c) and
 * loads its rules directory (the loaders, through fg_rules_load);
 * fg_plan_build resolves the device target (runtime.c: the attached GPU's
 * arch, asked of the CUDA driver) onto the context, then runs the planner
 * (codegen/plan.c, fg_plan_make), so codegen plans for the device the JIT
 * compiles for without asking any device itself.
 *
 * And the kernel-by-specification API (fg_kernel_*): a chain of ops is
 * written out as a small graph in the ordinary YAML graph format, parsed with
 * fg_graph_parse, planned with the context's rules, and must come out as one
 * fused kernel, which is then compiled like any plan (fg_plan_compile).  The
 * generated graph text is kept so that errors point into it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "diag.h"
#include "emit.h"
#include "exec.h"
#include "oom.h"
#include "plan.h"
#include "runtime.h"

FG_API fg_status fg_context_init(fg_context **out, const fg_options *opts)
{
    if (!out)
        return FG_ERR_INPUT;
    fg_context *ctx;
    fg_status st = fg_ctx_new(&ctx, opts);
    *out = ctx;
    if (st || ctx->opts.no_rules)
        return st;
    return fg_rules_load(ctx, ctx->rules_dir);
}

/* The plan's promise is that what fg_plan_build returns emits.  Tile values
 * a rule's `params:` hook chose are checked against their declared ranges
 * while planning; whether the shape can take them (a tile pair, the stages
 * in shared memory, a split against the reduction) is the emitter's own
 * judgement, so each group whose tiles a hook chose is emitted once here and
 * a refusal becomes an error of planning, located at the rule. */
static fg_status check_hook_tiles(fg_context *ctx, const fg_plan *p)
{
    for (int i = 0; i < p->ngroups; i++) {
        const fg_group *grp = &p->groups[i];
        const fg_rule *r = grp->rule >= 0 ? ctx->rules[grp->rule] : NULL;
        if (!r || !r->tile_hook)
            continue;
        fg_kernel k;
        fg_emit_opts eo = {.specialize = 1};
        if (fg_emit_group(ctx, p, i, &eo, &k) != FG_OK)
            return fg_diag_error(ctx, FG_ERR_HOOK, r->loc,
                                 "rule '%s': the values its params hook '%s' chose cannot run group %d (%s, "
                                 "template %s; the emitter's reason is above)",
                                 r->name, r->tile_hook, i, p->graph->nodes[grp->nodes[0]].name, grp->template_name);
        fg_kernel_free(&k);
    }
    return FG_OK;
}

typedef struct plan_call {
    fg_context *ctx;
    const fg_graph *g;
    fg_plan **out;
} plan_call;

/* Planning proper (rewrites, grouping, folds, the tile check), under the
 * out-of-memory guard (codegen/oom.h): the plan is the call's own, so
 * unwinding frees it with everything else the call allocated. */
static fg_status plan_body(void *arg)
{
    plan_call *c = arg;
    fg_status st = fg_plan_make(c->ctx, c->g, c->out);
    if (st == FG_OK && (st = check_hook_tiles(c->ctx, *c->out)) != FG_OK) {
        fg_plan_free(*c->out);
        *c->out = NULL;
    }
    return st;
}

FG_API fg_status fg_plan_build(fg_context *ctx, const fg_graph *g, fg_plan **out)
{
    if (ctx)
        fg_rt_resolve_target(ctx);
    if (!ctx || !out)
        return fg_plan_make(ctx, g, out);   /* reports the missing argument */
    plan_call c = {ctx, g, out};
    fg_status st = fg_oom_guard(ctx, (fg_loc){g ? g->path : NULL, 0, 0}, "planning", plan_body, NULL, &c);
    if (st == FG_ERR_NOMEM)
        *out = NULL;
    return st;
}

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

#define MAX_SPEC_OPS 64
#define MAX_SPEC_WEIGHTS 256
#define MAX_SPEC_NAME 64

/* Nonzero when s is a name that can be written into the graph text as is:
 * a letter or '_', then letters, digits, '_' (and '.' when dots). */
static int name_ok(const char *s, int dots)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    size_t n = 0;
    for (; s[n]; n++)
        if (!(isalnum((unsigned char)s[n]) || s[n] == '_' || (dots && s[n] == '.')) || n >= MAX_SPEC_NAME)
            return 0;
    return 1;
}

/* Nonzero when s is exactly one YAML flow mapping on one line: it opens with
 * '{', its brackets balance outside quotes, and the first '{' closes at the
 * last character (so nothing can be appended to the node around it). */
static int attrs_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 2 || s[0] != '{' || s[n - 1] != '}')
        return 0;
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
        if (quote) {
            if (c == '\\' && quote == '"' && i + 1 < n)
                i++;
            else if (c == (unsigned char)quote)
                quote = 0;
            continue;
        }
        if (c == '"' || c == '\'')
            quote = (char)c;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth <= 0 && i + 1 < n)
            return 0;
        else if (c == '#' || c == '&' || c == '*' || c == '!')
            return 0;   /* comments, anchors, aliases, tags */
    }
    return depth == 0 && !quote;
}

/* A logical shape of 1..6 positive dimensions and at most 2^31 elements. */
static int shape_ok(int rank, const int64_t *shape)
{
    if (rank < 1 || rank > 6)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1 || shape[i] > (1ll << 31))
            return 0;
        n *= shape[i];
        if (n > (1ll << 31))
            return 0;
    }
    return 1;
}

/* Checks every field of the spec; records each problem. */
static fg_status spec_check(fg_context *ctx, const fg_kernel_spec *s)
{
    fg_status st = FG_OK;
#define BAD(...) (st = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "kernel spec: " __VA_ARGS__))
    if (s->nops < 1 || s->nops > MAX_SPEC_OPS)
        BAD("nops is %d: a chain has 1 to %d ops", s->nops, MAX_SPEC_OPS);
    else if (!s->ops)
        BAD("ops is NULL");
    if (s->nweights < 0 || s->nweights > MAX_SPEC_WEIGHTS)
        BAD("nweights is %d: expected 0 to %d", s->nweights, MAX_SPEC_WEIGHTS);
    else if (s->nweights > 0 && !s->weights)
        BAD("%d weights but weights is NULL", s->nweights);
    if ((unsigned)s->dtype >= FG_DTYPE_COUNT)
        BAD("dtype %d is not an fg_dtype", (int)s->dtype);
    if ((unsigned)s->layout >= FG_LAYOUT_COUNT)
        BAD("layout %d is not an fg_layout", (int)s->layout);
    if (s->rank < 1 || s->rank > 6)
        BAD("input rank %d (1..6)", s->rank);
    else if (!shape_ok(s->rank, s->input_shape))
        BAD("the input shape needs positive dimensions and at most 2^31 elements");
    if ((unsigned)s->compile.device >= FG_DEVICE_COUNT)
        BAD("compile.device %d is not an fg_device", (int)s->compile.device);
    for (int i = 0; s->ops && i < s->nops && i < MAX_SPEC_OPS; i++) {
        const fg_spec_op *o = &s->ops[i];
        if (!name_ok(o->name, 0))
            BAD("op %d: the step name must be a letter or '_', then letters, digits or '_' (at most %d)", i,
                MAX_SPEC_NAME);
        if (!name_ok(o->op, 0))
            BAD("op %d: no op name", i);
        if (o->attrs && *o->attrs && !attrs_ok(o->attrs))
            BAD("op %d ('%.64s'): attrs must be one YAML flow mapping on one line, \"{ key: value, ... }\"", i,
                o->name && name_ok(o->name, 0) ? o->name : "?");
    }
    for (int i = 0; s->weights && i < s->nweights && i < MAX_SPEC_WEIGHTS; i++) {
        const fg_spec_weight *w = &s->weights[i];
        if (!name_ok(w->name, 1))
            BAD("weight %d has no name of the form '<step>.<input>'", i);
        else if (!shape_ok(w->rank, w->shape))
            BAD("weight '%s': rank 1..6, positive dimensions and at most 2^31 elements", w->name);
    }
#undef BAD
    return st;
}

/* Writes the spec (checked) as graph YAML into b; returns FG_OK or an input error. */
static fg_status spec_yaml(fg_context *ctx, const fg_kernel_spec *s, fg_buf *b)
{
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
    if (out)
        *out = NULL;
    if (!ctx)
        return FG_ERR_INPUT;
    if (!out || !s)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_kernel_create: %s is NULL", !s ? "the spec" : "out");
    fg_status st = spec_check(ctx, s);
    if (st)
        return st;
    fg_buf y = {0};
    st = spec_yaml(ctx, s, &y);
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
    const char *chosen = !st ? h->p->groups[0].template_name : NULL;
    if (!st && s->template_name && (!chosen || strcmp(s->template_name, chosen) != 0))
        st = fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC,
                           "kernel spec: asked for template '%s' but the rules chose '%s' (rule %s)", s->template_name,
                           chosen ? chosen : "none",
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

FG_API const char *fg_kernel_source(const fg_kernel_handle *h) { return h ? fg_exec_kernel_source(h->e, 0) : NULL; }

FG_API fg_exec *fg_kernel_exec(fg_kernel_handle *h) { return h ? h->e : NULL; }

FG_API fg_status fg_kernel_launch(fg_kernel_handle *h, const fg_binding *b, int n, void *stream)
{
    return h ? fg_exec_run(h->e, b, n, stream) : FG_ERR_INPUT;
}
