/*
 * emit.c -- assembly of a kernel's source: fg_emit_group runs the family of
 * the group's template (template.h), the epilogue (emit_epilogue.c), renders
 * the template (emit_render.c) and puts together the header comment, the
 * #include, the params struct, helper functions and the kernel.  Index and
 * offset code is in emit_index.c.  See docs/codegen.md.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_impl.h"
#include "oom.h"
#include "template.h"

fg_status fg_em_error(fg_emitter *em, fg_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *who = em->rule ? em->rule->name : "single op";
    if (!em->g)
        return fg_diag_error(em->ctx, st, em->loc, "%s", msg);
    return fg_diag_error(em->ctx, st, em->loc, "%s (kernel for %s, rule '%s')", msg,
                         em->g->nodes[em->main_node].name, who);
}

void fg_em_fail(fg_emitter *em, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (em->st == FG_OK)
        em->st = fg_em_error(em, FG_ERR_INTERNAL, "%s", msg);
}

/* Nonzero when identifier id occurs as a whole word in text outside // comments. */
static int mentions(const char *text, const char *id)
{
    size_t n = strlen(id);
    for (const char *s = strstr(text, id); s; s = strstr(s + 1, id)) {
        const char *bol = s;
        while (bol > text && bol[-1] != '\n')
            bol--;
        const char *cm = strstr(bol, "//");
        if (cm && cm < s)
            continue;
        int before = s > text && (isalnum((unsigned char)s[-1]) || s[-1] == '_' || s[-1] == '.');
        int after = isalnum((unsigned char)s[n]) || s[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

/* ---- assembly ------------------------------------------------------------------ */

static const char *short_path(const char *path)
{
    if (!path)
        return "?";
    const char *last = strrchr(path, '/');
    if (!last)
        return path;
    const char *prev = last;
    while (prev > path && prev[-1] != '/')
        prev--;
    return prev;
}

static void header_comment(fg_emitter *em, fg_buf *b)
{
    const fg_group *grp = em->grp;
    fg_buf_printf(b, "// fusegen kernel %s (group %d)\n", em->k->name, em->k->group);
    if (em->rule)
        fg_buf_printf(b, "//   rule:      %s (%s:%d)\n", em->rule->name, short_path(em->rule->loc.file),
                      em->rule->loc.line);
    else
        fg_buf_printf(b, "//   rule:      single op\n");
    fg_buf_put(b, "//   nodes:     ");
    for (int i = 0; i < grp->nnodes; i++) {
        const fg_node *nd = &em->g->nodes[grp->nodes[i]];
        fg_buf_printf(b, "%s%s (%s%s)", i ? ", " : "", nd->name, nd->op->name, nd->folded ? ", folded" : "");
    }
    fg_buf_printf(b, "\n//   template:  %s (%s)\n", grp->template_name, em->template_file);
    fg_buf_printf(b, "//   output:    %s [", em->ot->name);
    for (int i = 0; i < em->ot->rank; i++)
        fg_buf_printf(b, "%s%" PRId64, i ? ", " : "", em->ot->shape[i]);
    fg_buf_printf(b, "] %s %s\n", fg_dtype_name(em->ot->dtype), fg_layout_name(em->ot->layout));
    fg_buf_printf(b, "//   precision: %s\n", fg_precision_name(em->g->precision));
    if (em->notes.len)
        fg_buf_put(b, em->notes.s);
    fg_buf_printf(b, "//   generator: fusegen %s\n", fg_version());
    char hex[33];
    fg_hash128_hex(em->k->deps_hash, hex);
    fg_buf_printf(b, "//   deps:      %s (cache key: `fusegen compile` prints it)\n", hex);
}

static void params_struct(fg_emitter *em, fg_buf *b)
{
    fg_buf_printf(b, "struct fg_params_%s {\n", em->k->name);
    for (int i = 0; i < em->k->nparams; i++) {
        const fg_kparam *kp = &em->k->params[i];
        if (kp->kind == FG_KPARAM_TENSOR) {
            const fg_tensor *t = &em->g->tensors[kp->tensor];
            char decl[128];
            snprintf(decl, sizeof decl, "%s%s *%s;", kp->writes ? "" : "const ", fg_em_ctype(t->dtype), kp->name);
            fg_buf_printf(b, "    %-36s // %s %s [", decl, kp->writes ? "out" : "in ", t->name);
            for (int j = 0; j < t->rank; j++)
                fg_buf_printf(b, "%s%" PRId64, j ? ", " : "", t->shape[j]);
            fg_buf_printf(b, "] %s", fg_dtype_name(t->dtype));
            if (t->rank == 4)
                fg_buf_printf(b, " %s", fg_layout_name(t->layout));
            fg_buf_put(b, "\n");
        } else if (kp->kind == FG_KPARAM_WORKSPACE) {
            char decl[128];
            snprintf(decl, sizeof decl, "void *%s;", kp->name);
            fg_buf_printf(b, "    %-36s // workspace, %" PRId64 " bytes (split-K partial sums)\n", decl, kp->value);
        } else if (kp->kind == FG_KPARAM_COUNTERS) {
            char decl[128];
            snprintf(decl, sizeof decl, "int *%s;", kp->name);
            fg_buf_printf(b, "    %-36s // %" PRId64 " counters (zeroed; left at zero)\n", decl, kp->value / 4);
        } else if (kp->kind == FG_KPARAM_TMAP) {
            char decl[128], dims[160] = "", box[160] = "", steps[160] = "";
            const fg_kparam_tmap *m = &em->k->tmaps[kp->value];
            int strided = 0;
            for (int x = 0; x < m->rank; x++) {
                size_t n = strlen(dims), nb = strlen(box), ns = strlen(steps);
                snprintf(dims + n, sizeof dims - n, "%s%" PRId64, x ? " x " : "", m->dim[x]);
                snprintf(box + nb, sizeof box - nb, "%s%d", x ? " x " : "", m->box[x]);
                snprintf(steps + ns, sizeof steps - ns, "%s%d", x ? " x " : "", m->estride[x]);
                strided |= m->estride[x] != 1;
            }
            snprintf(decl, sizeof decl, "fg_tmap %s;", kp->name);
            fg_buf_printf(b, "    %-36s // tensor map of %s: %s, box %s%s%s, swizzle %d\n", decl,
                          em->g->tensors[kp->tensor].name, dims, box, strided ? ", element steps " : "",
                          strided ? steps : "", m->swizzle);
        } else {
            char decl[128];
            snprintf(decl, sizeof decl, "fg_i64 %s;", kp->name);
            fg_buf_printf(b, "    %-36s // = %" PRId64 " here\n", decl, kp->value);
        }
    }
    fg_buf_put(b, "};\n\n");
}

static void deps_hash(fg_emitter *em)
{
    uint64_t words[FG_MAX_GROUP_NODES + 1];
    int n = 0;
    words[n++] = em->rule ? em->rule->file_hash : 0;
    for (int i = 0; i < em->grp->nnodes; i++)
        words[n++] = em->g->nodes[em->grp->nodes[i]].op->file_hash;
    em->k->deps_hash = fg_hash128_of(words, (size_t)n * sizeof words[0]);
}

/* k->choices: the placeholders whose values are integers (the template's
 * choices; the text placeholders are code). */
static void record_choices(fg_emitter *em)
{
    fg_kernel *k = em->k;
    size_t n = 0, cap = sizeof k->choices;
    k->choices[0] = 0;
    for (int i = 0; i < em->nvars; i++) {
        const char *v = em->vars[i].value, *digits = v && *v == '-' ? v + 1 : v;
        if (!digits || !*digits || strspn(digits, "0123456789") != strlen(digits))
            continue;
        int w = snprintf(k->choices + n, cap - n, "%s%s=%s", n ? " " : "", em->vars[i].name, v);
        if (w < 0 || (size_t)w >= cap - n) {
            snprintf(k->choices + (n < cap - 5 ? n : cap - 5), 5, " ...");
            return;
        }
        n += (size_t)w;
    }
}

static fg_status assemble(fg_emitter *em)
{
    const char *text = fg_template_source_text(em->tpl, em->template_file);
    if (!text)
        return fg_em_error(em, FG_ERR_INTERNAL, "template file %s is neither the template's own nor embedded",
                           em->template_file);
    fg_em_set(em, "KERNEL", "%s", em->k->name);
    fg_em_set(em, "PARAMS", "fg_params_%s", em->k->name);
    fg_em_set(em, "THREADS", "%u", em->threads);
    fg_em_set(em, "SHAPES", "@@SHAPES@@");
    fg_buf kernel = {0};
    fg_status st = fg_em_render(em, em->template_file, text, &kernel);
    if (st != FG_OK) {
        fg_buf_free(&kernel);
        return st;
    }
    /* shape constants the kernel mentions */
    fg_buf shapes = {0};
    for (int i = 0; i < em->nshapes; i++) {
        if (!mentions(kernel.s, em->shapes[i].name))
            continue;
        if (em->opts->specialize) {
            fg_buf_printf(&shapes, "    const fg_i64 %s = %" PRId64 ";\n", em->shapes[i].name, em->shapes[i].value);
        } else {
            char base[48];
            snprintf(base, sizeof base, "dim_%s", em->shapes[i].name);
            fg_buf_printf(&shapes, "    const fg_i64 %s = p.%s;\n", em->shapes[i].name,
                          fg_em_i64_param(em, base, em->shapes[i].value));
        }
    }
    char *mark = strstr(kernel.s, "@@SHAPES@@\n");
    fg_buf src = {0};
    header_comment(em, &src);
    fg_buf_put(&src, "#include \"fusegen_prelude.cuh\"\n\n");
    params_struct(em, &src);
    fg_buf_put(&src, em->helpers.s ? em->helpers.s : "");
    if (mark) {
        fg_buf_putn(&src, kernel.s, (size_t)(mark - kernel.s));
        fg_buf_put(&src, shapes.s ? shapes.s : "");
        fg_buf_put(&src, mark + strlen("@@SHAPES@@\n"));
    } else {
        fg_buf_put(&src, kernel.s);
    }
    em->k->source = fg_buf_take(&src);
    fg_buf_free(&kernel);
    fg_buf_free(&shapes);
    return FG_OK;
}

fg_status fg_emit_group(fg_context *ctx, const fg_plan *p, int group, const fg_emit_opts *o, fg_kernel *k)
{
    static const fg_emit_opts defaults = {.specialize = 1};
    memset(k, 0, sizeof *k);
    k->group = group;
    if (!p || group < 0 || group >= p->ngroups)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "no group %d in the plan", group);
    double t0 = fg_now();
    fg_emitter em = {0};
    em.ctx = ctx;
    em.plan = p;
    em.g = p->graph;
    em.grp = &p->groups[group];
    em.opts = o ? o : &defaults;
    em.k = k;
    em.rule = em.grp->rule >= 0 && em.grp->rule < ctx->nrules ? ctx->rules[em.grp->rule] : NULL;
    em.out = em.grp->output;
    em.ot = &em.g->tensors[em.out];
    em.main_node = em.grp->anchor;
    for (int i = 0; i < em.grp->nnodes && em.main_node < 0; i++)
        if (!em.g->nodes[em.grp->nodes[i]].folded)
            em.main_node = em.grp->nodes[i];
    if (em.main_node < 0)
        em.main_node = em.grp->nodes[0];
    em.loc = em.rule ? em.rule->loc : em.g->nodes[em.main_node].loc;
    k->dtype = em.ot->dtype;
    k->layout = em.ot->layout;
    k->template_name = em.grp->template_name;
    char base[48];
    fg_em_identifier(em.rule ? em.rule->name : em.g->nodes[em.main_node].op->name, base, 40);
    snprintf(k->name, sizeof k->name, "fg_k%d_%s", group, base);
    deps_hash(&em);

    em.tpl = fg_template_find(ctx, em.grp->template_name);
    fg_status st;
    const fg_node *mn = &em.g->nodes[em.main_node];
    if (!em.tpl) {
        st = fg_em_error(&em, FG_ERR_INTERNAL, "group %d has no known template ('%s')", group,
                         em.grp->template_name ? em.grp->template_name : "");
    } else if (!(em.tpl->kinds & (1u << mn->op->kind))) {
        /* the planner checked it; only a plan changed by hand gets here */
        st = fg_em_error(&em, FG_ERR_INPUT, "template %s does not compute %s nodes (%s is one)", em.tpl->name,
                         fg_op_kind_name(mn->op->kind), mn->name);
    } else {
        em.threads = 128;
        st = em.tpl->emit(&em);
        if (st == FG_OK)
            st = fg_em_epilogue(&em);
        if (st == FG_OK) {
            /* the output is the last tensor parameter written */
            fg_em_tensor(&em, em.out, 1);
            st = assemble(&em);
        }
        if (st == FG_OK && em.st == FG_OK)
            fg_kernel_name_by_content(k, base);
        if (st == FG_OK)
            st = em.st;
    }
    if (st == FG_OK)
        record_choices(&em);
    for (int i = 0; i < em.nvars; i++)
        free(em.vars[i].value);
    fg_buf_free(&em.helpers);
    fg_buf_free(&em.notes);
    if (st != FG_OK) {
        free(k->source);
        k->source = NULL;
        return st;
    }
    k->emit_seconds = fg_now() - t0;
    return FG_OK;
}

typedef struct emit_call {
    fg_context *ctx;
    const fg_plan *p;
    int group;
    const fg_emit_opts *o;
    fg_kernel *k;
} emit_call;

static fg_status emit_body(void *arg)
{
    emit_call *c = arg;
    return fg_emit_group(c->ctx, c->p, c->group, c->o, c->k);
}

/* After unwinding: the kernel's memory is about to be freed with the rest. */
static void emit_undo(void *arg)
{
    emit_call *c = arg;
    memset(c->k, 0, sizeof *c->k);
}

fg_status fg_emit_group_guarded(fg_context *ctx, const fg_plan *p, int group, const fg_emit_opts *o, fg_kernel *k)
{
    if (!k)
        return fg_emit_group(ctx, p, group, o, k);
    char what[48];
    snprintf(what, sizeof what, "emitting group %d", group);
    emit_call c = {ctx, p, group, o, k};
    return fg_oom_guard(ctx, (fg_loc){p && p->graph ? p->graph->path : NULL, 0, 0}, what, emit_body, emit_undo, &c);
}
