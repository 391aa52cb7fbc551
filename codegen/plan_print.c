/*
 * plan_print.c -- how a plan is shown: the group table of `fusegen plan`
 * (with the near-miss notes of --explain and what became of each concat
 * input), the Graphviz view with one cluster per group, and the summary
 * numbers.
 */
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "context.h"
#include "plan.h"
#include "util.h"

void fg_plan_get_stats(const fg_plan *p, fg_plan_stats *s)
{
    memset(s, 0, sizeof *s);
    s->ops = p->source ? p->source->nnodes : p->graph->nnodes;
    s->kernels = p->ngroups;
    for (int i = 0; i < p->graph->nnodes; i++)
        s->folded += p->graph->nodes[i].folded != 0;
    for (int i = 0; i < p->ngroups; i++)
        s->saved_bytes += p->groups[i].saved_bytes;
}

/* The model's declarations that the graph's inputs and outputs keep only at
 * the boundary: float64 (fp32 inside, converted by the bindings) and rank 0
 * (one element stored as [1], reported as rank 0). */
static void print_boundary(const fg_graph *g, FILE *out)
{
    for (int k = 0; k < 2; k++) {
        const int *io = k ? g->outputs : g->inputs;
        for (int i = 0; i < (k ? g->noutputs : g->ninputs); i++) {
            const fg_tensor *t = &g->tensors[io[i]];
            if (t->model_float64)
                fprintf(out, "boundary: %s '%s' is float64 in the model, fp32 here (the bindings convert %s)\n",
                        k ? "output" : "input", fg_tensor_user_name(t), k ? "the result to float64" : "its data");
            if (t->model_rank0)
                fprintf(out, "boundary: %s '%s' is rank 0 in the model (stored as [1], reported as rank 0)\n",
                        k ? "output" : "input", fg_tensor_user_name(t));
        }
    }
}

/* "12.3 MiB", "4.0 KiB", "512 B". */
static void format_bytes(int64_t n, char out[32])
{
    if (n >= 1024 * 1024)
        snprintf(out, 32, "%.1f MiB", (double)n / (1024.0 * 1024.0));
    else if (n >= 1024)
        snprintf(out, 32, "%.1f KiB", (double)n / 1024.0);
    else
        snprintf(out, 32, "%lld B", (long long)n);
}

static void rule_cell(const fg_context *ctx, const fg_group *grp, fg_buf *b)
{
    if (grp->rule < 0 || grp->rule >= ctx->nrules) {
        fg_buf_put(b, "-");
        return;
    }
    const fg_rule *r = ctx->rules[grp->rule];
    fg_buf_printf(b, "%s (%s:%d)", r->name, fg_short_path(r->loc.file), r->loc.line);
}

static void nodes_cell(const fg_plan *p, const fg_group *grp, fg_buf *b)
{
    for (int i = 0; i < grp->nnodes; i++) {
        const fg_node *nd = &p->graph->nodes[grp->nodes[i]];
        fg_buf_printf(b, "%s%s%s", i ? ", " : "", nd->name, nd->folded ? " (folded)" : "");
    }
}

static void epilogue_cell(const fg_plan *p, const fg_group *grp, fg_buf *b)
{
    if (grp->nepi == 0) {
        fg_buf_put(b, "-");
        return;
    }
    for (int i = 0; i < grp->nepi; i++) {
        const fg_group_epi *e = &grp->epi[i];
        if (i)
            fg_buf_put(b, ", ");
        switch (e->kind) {
        case FG_EPI_BIAS: fg_buf_put(b, "bias"); break;
        case FG_EPI_APPLY: fg_buf_printf(b, "apply(%s)", p->graph->nodes[e->node].op->name); break;
        default: fg_buf_printf(b, "hook(%s)", e->hook ? e->hook : "?"); break;
        }
    }
}

#define NCOLS 5

/* Prints the group table, the summary line and, with o->explain, the notes. */
void fg_plan_print(const fg_context *ctx, const fg_plan *p, const fg_plan_print_opts *o, FILE *out)
{
    static const char *const head[NCOLS] = {"group", "rule", "nodes", "template", "epilogue"};
    int nrows = p->ngroups + 1;
    char **cells = fg_xcalloc((size_t)nrows * NCOLS, sizeof *cells);
    size_t width[NCOLS] = {0};
    for (int c = 0; c < NCOLS; c++)
        cells[c] = fg_xstrdup(head[c]);
    for (int gi = 0; gi < p->ngroups; gi++) {
        const fg_group *grp = &p->groups[gi];
        fg_buf b[NCOLS];
        memset(b, 0, sizeof b);
        fg_buf_printf(&b[0], "%d", gi);
        rule_cell(ctx, grp, &b[1]);
        nodes_cell(p, grp, &b[2]);
        fg_buf_put(&b[3], grp->template_name ? grp->template_name : "?");
        epilogue_cell(p, grp, &b[4]);
        for (int c = 0; c < NCOLS; c++)
            cells[(gi + 1) * NCOLS + c] = fg_buf_take(&b[c]);
    }
    for (int i = 0; i < nrows * NCOLS; i++) {
        size_t len = strlen(cells[i]);
        if (len > width[i % NCOLS])
            width[i % NCOLS] = len;
    }
    for (int r = 0; r < nrows; r++) {
        for (int c = 0; c < NCOLS; c++) {
            if (c == NCOLS - 1)
                fprintf(out, "%s\n", cells[r * NCOLS + c]);
            else
                fprintf(out, "%-*s  ", (int)width[c], cells[r * NCOLS + c]);
        }
    }
    for (int i = 0; i < nrows * NCOLS; i++)
        free(cells[i]);
    free(cells);

    fg_plan_stats s;
    char bytes[32];
    fg_plan_get_stats(p, &s);
    format_bytes(s.saved_bytes, bytes);
    fprintf(out, "ops: %d -> kernels: %d (folded: %d), intermediate bytes not written: %s\n", s.ops, s.kernels,
            s.folded, bytes);
    if (o && o->explain) {
        fprintf(out, "precision: %s%s\n", fg_precision_name(p->graph->precision),
                p->graph->precision == FG_PRECISION_TF32 ? " (fp32 conv and matmul may round operands to tf32)" : "");
        if (p->nhwc_acts || p->nhwc_weights)
            fprintf(out, "layout: %d intermediate tensors and %d weights stored NHWC for tensor-core convolutions "
                    "(inputs and outputs keep theirs; FUSEGEN_KEEP_LAYOUT=1 keeps every layout)\n", p->nhwc_acts,
                    p->nhwc_weights);
        if (p->kmajor_b)
            fprintf(out, "layout: %d matmul weights stored [N, K] (trans_b) for tf32 wgmma, which reads B K-major "
                    "(FUSEGEN_KEEP_LAYOUT=1 keeps them [K, N])\n", p->kmajor_b);
        print_boundary(p->graph, out);
        /* rewrites applied (notes "rewrite NAME (...): ..."), then near misses */
        int nrw = 0;
        for (int i = 0; i < p->nnotes; i++)
            if (strncmp(p->notes[i], "rewrite ", 8) == 0 && nrw++ == 0)
                fprintf(out, "rewrites:\n");
        for (int i = 0; i < p->nnotes && nrw; i++)
            if (strncmp(p->notes[i], "rewrite ", 8) == 0)
                fprintf(out, "  %s\n", p->notes[i]);
        if (p->nnotes == nrw)
            fprintf(out, "near misses: none\n");
        else
            fprintf(out, "near misses:\n");
        for (int i = 0; i < p->nnotes; i++)
            if (strncmp(p->notes[i], "rewrite ", 8) != 0)
                fprintf(out, "  %s\n", p->notes[i]);
        /* concat elimination: what each concat input became (concat_inplace.h) */
        if (p->views && p->views->nlines) {
            fprintf(out, "concats: %d input%s written in place, %d concat%s without a kernel\n", p->views->nviews,
                    p->views->nviews == 1 ? "" : "s", p->views->eliminated, p->views->eliminated == 1 ? "" : "s");
            for (int i = 0; i < p->views->nlines; i++)
                fprintf(out, "  %s\n", p->views->lines[i]);
        }
        /* flatten / reshape without a kernel (reshape_alias.h) */
        if (p->views && p->views->nalias_lines) {
            fprintf(out, "reshapes: %d without a kernel\n", p->views->naliases);
            for (int i = 0; i < p->views->nalias_lines; i++)
                fprintf(out, "  %s\n", p->views->alias_lines[i]);
        }
        /* template choices where there was a choice: one considered alone
         * and accepted needs no line */
        int header = 0;
        for (int i = 0; i < p->ngroups; i++) {
            const char *c = p->groups[i].choice;
            if (!c || !strchr(c, ';'))
                continue;
            if (!header++)
                fprintf(out, "templates:\n");
            fprintf(out, "  group %d (%s): %s\n", i, p->graph->nodes[p->groups[i].nodes[0]].name, c);
        }
    }
}

/* Writes s as the inside of a double-quoted Graphviz string. */
static void dot_str(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
}

/* Graphviz: one cluster per group labelled with its rule and template; edges
 * follow the tensors between nodes; graph inputs and outputs are ellipses. */
void fg_plan_dot(const fg_context *ctx, const fg_plan *p, FILE *out)
{
    const fg_graph *g = p->graph;
    fprintf(out, "digraph \"");
    dot_str(out, g->name ? g->name : "plan");
    fprintf(out, "\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int gi = 0; gi < p->ngroups; gi++) {
        const fg_group *grp = &p->groups[gi];
        fg_buf b = {0};
        fg_buf_printf(&b, "g%d: ", gi);
        rule_cell(ctx, grp, &b);
        fg_buf_printf(&b, " -> %s", grp->template_name ? grp->template_name : "?");
        fprintf(out, "  subgraph cluster_g%d {\n    label=\"", gi);
        dot_str(out, b.s);
        fprintf(out, "\";\n    style=rounded;\n");
        fg_buf_free(&b);
        for (int i = 0; i < grp->nnodes; i++) {
            const fg_node *nd = &g->nodes[grp->nodes[i]];
            fprintf(out, "    n%d [label=\"", grp->nodes[i]);
            dot_str(out, nd->name);
            fprintf(out, "\\n");
            dot_str(out, nd->op->name);
            fprintf(out, "%s\"%s];\n", nd->folded ? " (folded)" : "", nd->folded ? ", style=dashed" : "");
        }
        fprintf(out, "  }\n");
    }
    /* concats whose inputs are all written in place: no kernel, no cluster */
    for (int n = 0; p->node_group && n < g->nnodes; n++)
        if (p->node_group[n] < 0 && !g->nodes[n].folded) {
            fprintf(out, "  n%d [label=\"", n);
            dot_str(out, g->nodes[n].name);
            fprintf(out, "\\n");
            dot_str(out, g->nodes[n].op->name);
            fprintf(out, " (in place)\", style=dotted];\n");
        }
    for (int i = 0; i < g->ninputs; i++) {
        fprintf(out, "  t%d [shape=ellipse, label=\"", g->inputs[i]);
        dot_str(out, g->tensors[g->inputs[i]].name);
        fprintf(out, "\"];\n");
    }
    for (int i = 0; i < g->noutputs; i++) {
        fprintf(out, "  t%d [shape=ellipse, label=\"", g->outputs[i]);
        dot_str(out, g->tensors[g->outputs[i]].name);
        fprintf(out, "\"];\n");
    }
    for (int n = 0; n < g->nnodes; n++) {
        const fg_node *nd = &g->nodes[n];
        for (int j = 0; j < nd->ninputs; j++) {
            int t = nd->inputs[j];
            if (t < 0)
                continue;
            const fg_tensor *tt = &g->tensors[t];
            if (tt->producer >= 0)
                fprintf(out, "  n%d -> n%d;\n", tt->producer, n);
            else if (tt->is_input)
                fprintf(out, "  t%d -> n%d;\n", t, n);
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        int prod = g->tensors[g->outputs[i]].producer;
        if (prod >= 0)
            fprintf(out, "  n%d -> t%d;\n", prod, g->outputs[i]);
    }
    fprintf(out, "}\n");
}
