/*
 * emit.c -- the framework of source emission: template lookup and
 * placeholder substitution, kernel parameters, memory offsets with
 * broadcasting, the epilogue (one code path for every template), the header
 * comment, and assembly of the final source.  The template families
 * (emit_<family>.c) decide the template file, its placeholders and the launch
 * geometry.  See docs/codegen.md.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "emit_impl.h"
#include "expr.h"
#include "hook.h"

/* ---- family table ---------------------------------------------------------- */

typedef struct family {
    const char *name;      /* template name a rule gives */
    fg_em_family_fn fn;
} family;

static const family families[] = {
    {"pointwise", fg_emit_pointwise},
    {"conv2d", fg_emit_conv2d},
    {"conv2d_depthwise", fg_emit_conv2d},
    {"gemm", fg_emit_gemm},
    {"gemm_tc", fg_emit_gemm},
    {"pool2d", fg_emit_pool2d},
};

/* ---- template files and their placeholders -------------------------------- */

static const char *const ph_pointwise[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "OUT", "COORDS",
                                           "LOADS", "COMPUTE", "COORD_ARGS", "VEC4", "LOADS4", "COMPUTE4",
                                           NULL};
static const char *const ph_conv2d[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "TILE_K", "CHUNK_C", "WTILE",
                                        "X", "WGT", "Y", NULL};
static const char *const ph_conv2d_dw[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "COORDS", "X", "WGT", "Y", NULL};
static const char *const ph_gemm[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "TILE_M", "TILE_N", "TILE_K",
                                      "A", "B", "Y", "EPI_ARGS", NULL};
static const char *const ph_gemm_tc[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "T", "PACK", "MMA",
                                         "A", "B", "Y", "EPI_ARGS", NULL};
static const char *const ph_pool2d[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "COORDS", "X", "Y", "INIT",
                                        "REDUCE", "FINISH", NULL};
static const char *const ph_global_pool[] = {"KERNEL", "PARAMS", "THREADS", "SHAPES", "X", "Y", "EPI_ARGS", NULL};

static const struct {
    const char *file;
    const char *const *names;
} template_files[] = {
    {"pointwise.cuh", ph_pointwise},   {"conv2d.cuh", ph_conv2d}, {"conv2d_depthwise.cuh", ph_conv2d_dw},
    {"gemm.cuh", ph_gemm},             {"gemm_tc.cuh", ph_gemm_tc}, {"pool2d.cuh", ph_pool2d},
    {"global_pool.cuh", ph_global_pool},
};

const char *const *fg_template_placeholders(const char *file)
{
    for (size_t i = 0; i < FG_COUNTOF(template_files); i++)
        if (strcmp(template_files[i].file, file) == 0)
            return template_files[i].names;
    return NULL;
}

const char *const *fg_template_files(void)
{
    static const char *names[FG_COUNTOF(template_files) + 1];
    for (size_t i = 0; i < FG_COUNTOF(template_files); i++)
        names[i] = template_files[i].file;
    return names;
}

const char *fg_template_text(const char *name)
{
    const fg_embedded_file *f = fg_embedded_find(name);
    return f ? f->text : NULL;
}

/* ---- small services ----------------------------------------------------------- */

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

void fg_em_set(fg_emitter *em, const char *name, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    for (int i = 0; i < em->nvars; i++)
        if (strcmp(em->vars[i].name, name) == 0) {
            free(em->vars[i].value);
            em->vars[i].value = fg_buf_take(&b);
            return;
        }
    if (em->nvars == FG_EM_MAX_VARS) {
        fprintf(stderr, "fusegen: internal: too many placeholders\n");
        abort();
    }
    em->vars[em->nvars].name = name;
    em->vars[em->nvars].value = fg_buf_take(&b);
    em->nvars++;
}

static const char *em_get(const fg_emitter *em, const char *name, size_t len)
{
    for (int i = 0; i < em->nvars; i++)
        if (strlen(em->vars[i].name) == len && memcmp(em->vars[i].name, name, len) == 0)
            return em->vars[i].value;
    return NULL;
}

void fg_em_shape(fg_emitter *em, const char *name, int64_t value)
{
    for (int i = 0; i < em->nshapes; i++)
        if (strcmp(em->shapes[i].name, name) == 0) {
            em->shapes[i].value = value;
            return;
        }
    if (em->nshapes == FG_EM_MAX_SHAPES) {
        fprintf(stderr, "fusegen: internal: too many shape constants\n");
        abort();
    }
    snprintf(em->shapes[em->nshapes].name, sizeof em->shapes[0].name, "%s", name);
    em->shapes[em->nshapes].value = value;
    em->nshapes++;
}

const char *fg_em_ctype(fg_dtype d)
{
    switch (d) {
    case FG_DTYPE_F16: return "fg_half";
    case FG_DTYPE_BF16: return "fg_bf16";
    default: return "float";
    }
}

int64_t fg_em_numel(const fg_emitter *em, int t)
{
    const fg_tensor *x = &em->g->tensors[t];
    int64_t n = 1;
    for (int i = 0; i < x->rank; i++)
        n *= x->shape[i];
    return n;
}

int fg_em_channel_axis(int rank) { return rank >= 2 ? 1 : 0; }

/* Axis a BIAS stage (and a hook's `c`) indexes: the gemm column for a matmul
 * anchor, else the channel axis. */
static int bias_axis(const fg_emitter *em)
{
    if (em->grp->anchor >= 0 && em->g->nodes[em->grp->anchor].op->kind == FG_OPK_MATMUL)
        return em->ot->rank - 1;
    return fg_em_channel_axis(em->ot->rank);
}

const char *const *fg_em_coord_names(int rank)
{
    static const char *const r1[] = {"i0"};
    static const char *const r2[] = {"row", "col"};
    static const char *const r3[] = {"b", "row", "col"};
    static const char *const r4[] = {"n", "c", "h", "w"};
    static const char *const r5[] = {"i0", "i1", "i2", "i3", "i4"};
    static const char *const r6[] = {"i0", "i1", "i2", "i3", "i4", "i5"};
    switch (rank) {
    case 1: return r1;
    case 2: return r2;
    case 3: return r3;
    case 4: return r4;
    case 5: return r5;
    default: return r6;
    }
}

/* A C identifier from a tensor name: non-alphanumerics become '_'. */
static void sanitize(const char *s, char *out, size_t size)
{
    size_t j = 0;
    if (!isalpha((unsigned char)s[0]) && s[0] != '_' && j + 1 < size)
        out[j++] = 't';
    for (; *s && j + 1 < size; s++)
        out[j++] = isalnum((unsigned char)*s) ? *s : '_';
    out[j] = 0;
}

static int param_name_taken(const fg_kernel *k, const char *name)
{
    for (int i = 0; i < k->nparams; i++)
        if (strcmp(k->params[i].name, name) == 0)
            return 1;
    return 0;
}

static fg_kparam *add_param(fg_emitter *em, const char *base)
{
    fg_kernel *k = em->k;
    if (k->nparams == FG_MAX_KPARAMS) {
        fprintf(stderr, "fusegen: internal: more than %d kernel parameters\n", FG_MAX_KPARAMS);
        abort();
    }
    fg_kparam *kp = &k->params[k->nparams];
    memset(kp, 0, sizeof *kp);
    kp->tensor = -1;
    snprintf(kp->name, sizeof kp->name, "%s", base);
    for (int i = 2; param_name_taken(k, kp->name); i++)
        snprintf(kp->name, sizeof kp->name, "%.36s_%d", base, i);
    k->nparams++;
    return kp;
}

const char *fg_em_tensor(fg_emitter *em, int t, int writes)
{
    for (int i = 0; i < em->k->nparams; i++)
        if (em->k->params[i].kind == FG_KPARAM_TENSOR && em->k->params[i].tensor == t) {
            em->k->params[i].writes |= writes;
            return em->k->params[i].name;
        }
    char base[48];
    sanitize(em->g->tensors[t].name, base, 40);
    fg_kparam *kp = add_param(em, base);
    kp->kind = FG_KPARAM_TENSOR;
    kp->tensor = t;
    kp->writes = writes;
    return kp->name;
}

/* Field name of an I64 parameter named base with that value (added once). */
static const char *i64_param(fg_emitter *em, const char *base, int64_t value)
{
    for (int i = 0; i < em->k->nparams; i++)
        if (em->k->params[i].kind == FG_KPARAM_I64 && strcmp(em->k->params[i].name, base) == 0)
            return em->k->params[i].name;
    fg_kparam *kp = add_param(em, base);
    kp->kind = FG_KPARAM_I64;
    kp->value = value;
    return kp->name;
}

void fg_em_dim(fg_emitter *em, int t, int axis, fg_buf *out)
{
    int64_t v = em->g->tensors[t].shape[axis];
    if (em->opts->specialize) {
        fg_buf_printf(out, "%" PRId64, v);
        return;
    }
    char base[48];
    const char *field = fg_em_tensor(em, t, 0);
    snprintf(base, sizeof base, "dim_%.30s_%d", field, axis);
    fg_buf_printf(out, "p.%s", i64_param(em, base, v));
}

/* Physical axis order of a tensor: NHWC rank-4 tensors store N, H, W, C. */
static void physical_order(const fg_tensor *t, int *order)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    for (int i = 0; i < t->rank; i++)
        order[i] = (t->rank == 4 && t->layout == FG_LAYOUT_NHWC) ? nhwc[i] : i;
}

fg_status fg_em_offset(fg_emitter *em, int t, int per_channel, const char *const *coords, int crank,
                       const int64_t *cshape, fg_buf *out)
{
    const fg_tensor *x = &em->g->tensors[t];
    const char *idx[FG_MAX_RANK];
    if (per_channel && x->rank == 1) {
        int ca = fg_em_channel_axis(crank);
        if (x->shape[0] != cshape[ca] && x->shape[0] != 1)
            return fg_em_error(em, FG_ERR_INPUT, "per-channel tensor '%s' has %" PRId64 " elements, expected %" PRId64,
                               x->name, x->shape[0], cshape[ca]);
        fg_buf_put(out, x->shape[0] == 1 ? "0" : coords[ca]);
        return FG_OK;
    }
    if (x->rank > crank)
        return fg_em_error(em, FG_ERR_INPUT, "tensor '%s' (rank %d) does not broadcast to rank %d", x->name,
                           x->rank, crank);
    for (int j = 0; j < x->rank; j++) {
        int oa = j + crank - x->rank;
        if (x->shape[j] == cshape[oa])
            idx[j] = x->shape[j] == 1 ? NULL : coords[oa];
        else if (x->shape[j] == 1)
            idx[j] = NULL;
        else
            return fg_em_error(em, FG_ERR_INPUT, "tensor '%s' axis %d has size %" PRId64
                               ", does not broadcast to %" PRId64, x->name, j, x->shape[j], cshape[oa]);
    }
    int order[FG_MAX_RANK];
    physical_order(x, order);
    int terms = 0;
    for (int pi = 0; pi < x->rank; pi++) {
        int a = order[pi];
        if (!idx[a])
            continue;
        if (terms++)
            fg_buf_put(out, " + ");
        fg_buf_put(out, idx[a]);
        if (em->opts->specialize) {
            int64_t stride = 1;
            for (int q = pi + 1; q < x->rank; q++)
                stride *= x->shape[order[q]];
            if (stride != 1)
                fg_buf_printf(out, " * %" PRId64, stride);
        } else {
            for (int q = pi + 1; q < x->rank; q++) {
                if (x->shape[order[q]] == 1)
                    continue;
                fg_buf_put(out, " * ");
                fg_em_dim(em, t, order[q], out);
            }
        }
    }
    if (!terms)
        fg_buf_put(out, "0");
    return FG_OK;
}

fg_status fg_em_offset_fn(fg_emitter *em, const char *fname, int t, const char *const *coords)
{
    const fg_tensor *x = &em->g->tensors[t];
    fg_buf body = {0};
    fg_status st = fg_em_offset(em, t, 0, coords, x->rank, x->shape, &body);
    if (st != FG_OK) {
        fg_buf_free(&body);
        return st;
    }
    fg_buf_printf(&em->helpers, "// offset of %s %s at logical coordinates (", x->name, fg_layout_name(x->layout));
    for (int i = 0; i < x->rank; i++)
        fg_buf_printf(&em->helpers, "%s%s", i ? ", " : "", coords[i]);
    fg_buf_printf(&em->helpers, ")\nFG_DEVICE fg_i64 %s(const fg_params_%s &p", fname, em->k->name);
    for (int i = 0; i < x->rank; i++)
        fg_buf_printf(&em->helpers, ", fg_i64 %s", coords[i]);
    fg_buf_printf(&em->helpers, ")\n{\n    return %s;\n}\n\n", body.s);
    fg_buf_free(&body);
    return FG_OK;
}

int64_t fg_em_attr_int(const fg_emitter *em, int nd, const char *name, int index)
{
    const fg_node *n = &em->g->nodes[nd];
    for (int i = 0; i < n->op->nattrs; i++)
        if (strcmp(n->op->attrs[i].name, name) == 0) {
            const fg_attr_value *v = &n->attrs[i];
            if (v->type == FG_ATTR_INTS)
                return index < v->n ? v->ints[index] : 0;
            if (v->type == FG_ATTR_FLOAT)
                return (int64_t)v->f;
            return v->i;
        }
    return 0;
}

void fg_em_decompose(fg_emitter *em, int t, const char *lin, const char *const *coords, int ind, fg_buf *out)
{
    const fg_tensor *x = &em->g->tensors[t];
    int order[FG_MAX_RANK];
    physical_order(x, order);
    if (x->rank == 1) {
        fg_buf_iprintf(out, ind, "const fg_i64 %s = %s;\n", coords[0], lin);
        return;
    }
    /* innermost axis: lin % D; middle axes: lin / (inner) % D; outermost: lin / (inner) */
    for (int pi = x->rank - 1; pi >= 0; pi--) {
        int a = order[pi];
        fg_buf_iprintf(out, ind, "const fg_i64 %s = %s", coords[a], lin);
        if (pi < x->rank - 1) {
            fg_buf_put(out, " / ");
            if (pi < x->rank - 2)
                fg_buf_put(out, "(");
            for (int q = pi + 1; q < x->rank; q++) {
                if (q > pi + 1)
                    fg_buf_put(out, " * ");
                fg_em_dim(em, t, order[q], out);
            }
            if (pi < x->rank - 2)
                fg_buf_put(out, ")");
        }
        if (pi > 0) {
            fg_buf_put(out, " % ");
            fg_em_dim(em, t, a, out);
        }
        fg_buf_put(out, ";\n");
    }
}

/* Nonzero when node index nd belongs to the group. */
static int in_group(const fg_emitter *em, int nd)
{
    for (int i = 0; i < em->grp->nnodes; i++)
        if (em->grp->nodes[i] == nd)
            return 1;
    return 0;
}

int fg_em_chain_input(const fg_emitter *em, int node)
{
    const fg_node *nd = &em->g->nodes[node];
    for (int i = 0; i < nd->ninputs; i++) {
        int t = nd->inputs[i];
        if (t >= 0 && em->g->tensors[t].producer >= 0 && in_group(em, em->g->tensors[t].producer))
            return i;
    }
    return -1;
}

fg_status fg_em_apply(fg_emitter *em, int node, const char *chain, const char *const *coords, int ind,
                      fg_buf *code, fg_buf *expr)
{
    const fg_node *nd = &em->g->nodes[node];
    const fg_opdef *op = nd->op;
    if (!op->expr)
        return fg_em_error(em, FG_ERR_INPUT, "node '%s' (op %s, kind %s) cannot be applied element-wise", nd->name,
                           op->name, fg_op_kind_name(op->kind));
    const char *names[FG_MAX_INPUTS + FG_MAX_ATTRS];
    char store[FG_MAX_INPUTS + FG_MAX_ATTRS][64];
    for (int i = 0; i < op->ninputs; i++) {
        int t = i < nd->ninputs ? nd->inputs[i] : -1;
        names[i] = store[i];
        if (t < 0) {
            snprintf(store[i], sizeof store[i], "0.0f");
            continue;
        }
        const fg_tensor *x = &em->g->tensors[t];
        if (chain && x->producer >= 0 && in_group(em, x->producer)) {
            names[i] = chain;
            continue;
        }
        if (!chain && x->producer >= 0 && in_group(em, x->producer))
            return fg_em_error(em, FG_ERR_INTERNAL, "node '%s' reads '%s' produced inside its own kernel", nd->name,
                               x->name);
        char local[48];
        sanitize(op->inputs[i].name, local, sizeof local);
        snprintf(store[i], sizeof store[i], "in_%s%s", local, em->vec_names ? "[j]" : "");
        if (em->vec_names)
            continue;
        const char *field = fg_em_tensor(em, t, 0);
        fg_buf off = {0};
        fg_status st = fg_em_offset(em, t, op->inputs[i].per_channel, coords, em->ot->rank, em->ot->shape, &off);
        if (st != FG_OK) {
            fg_buf_free(&off);
            return st;
        }
        fg_buf_iprintf(code, ind, "const float %s = fg_load(p.%s + %s);  // %s\n", store[i], field, off.s, x->name);
        fg_buf_free(&off);
    }
    for (int a = 0; a < op->nattrs; a++) {
        int s = op->ninputs + a;
        const fg_attr_value *v = &nd->attrs[a];
        names[s] = store[s];
        switch (op->attrs[a].type) {
        case FG_ATTR_FLOAT: fg_expr_float_literal(v->f, store[s]); break;
        case FG_ATTR_INT:
        case FG_ATTR_BOOL: fg_expr_float_literal((double)v->i, store[s]); break;
        default: snprintf(store[s], sizeof store[s], "0.0f"); break;
        }
    }
    fg_expr_emit_c(op->expr, names, expr);
    return FG_OK;
}

fg_status fg_em_tile_params(fg_emitter *em, const char *const *keys, int n, int64_t *vals)
{
    if (!em->rule || !em->rule->tile_hook)
        return FG_OK;
    return fg_hook_params(em->ctx, em->rule->tile_hook, em->rule->loc, em->g, em->grp, keys, n, vals);
}

/* ---- the epilogue ---------------------------------------------------------- */

static fg_loc hook_site(const fg_emitter *em, const char *hook)
{
    if (em->rule)
        for (int i = 0; i < em->rule->nepilogue; i++)
            if (em->rule->epilogue[i].kind == FG_EPI_HOOK && em->rule->epilogue[i].hook &&
                strcmp(em->rule->epilogue[i].hook, hook) == 0)
                return em->rule->epilogue[i].loc;
    return em->loc;
}

/* Input slot of the anchor's `bias` input, or -1. */
static int anchor_bias(const fg_emitter *em)
{
    if (em->grp->anchor < 0)
        return -1;
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    for (int i = 0; i < nd->op->ninputs && i < nd->ninputs; i++)
        if (strcmp(nd->op->inputs[i].name, "bias") == 0)
            return nd->inputs[i] >= 0 ? i : -1;
    return -1;
}

static fg_status emit_bias(fg_emitter *em, int t, const char *const *coords, fg_buf *b)
{
    const fg_tensor *x = &em->g->tensors[t];
    int ca = bias_axis(em);
    if (x->rank != 1 || x->shape[0] != em->ot->shape[ca])
        return fg_em_error(em, FG_ERR_INPUT, "bias '%s' must be a vector of %" PRId64 " elements", x->name,
                           em->ot->shape[ca]);
    fg_buf_iprintf(b, 1, "// epilogue: bias (%s)\n", x->name);
    fg_buf_iprintf(b, 1, "v = v + fg_load(p.%s + %s);\n", fg_em_tensor(em, t, 0), coords[ca]);
    return FG_OK;
}

static fg_status emit_apply(fg_emitter *em, int node, const char *const *coords, fg_buf *b)
{
    const fg_node *nd = &em->g->nodes[node];
    if (nd->folded) {
        fg_buf_iprintf(b, 1, "// epilogue: %s (%s) folded into the weights\n", nd->name, nd->op->name);
        return FG_OK;
    }
    fg_buf loads = {0}, expr = {0};
    fg_status st = fg_em_apply(em, node, "v", coords, 2, &loads, &expr);
    if (st == FG_OK) {
        fg_buf_iprintf(b, 1, "// epilogue: apply %s: %s\n", nd->name, nd->op->expr_src ? nd->op->expr_src : "");
        if (loads.len) {
            fg_buf_iprintf(b, 1, "{\n%s", loads.s);
            fg_buf_iprintf(b, 2, "v = %s;\n", expr.s);
            fg_buf_iprintf(b, 1, "}\n");
        } else {
            fg_buf_iprintf(b, 1, "v = %s;\n", expr.s);
        }
    }
    fg_buf_free(&loads);
    fg_buf_free(&expr);
    return st;
}

/* Emits fg_epilogue(p, v, coordinates...) into the helpers: the group's
 * stages in order, preceded by the anchor's own bias when no stage adds it;
 * with no stages, every node after the main one is applied in chain order. */
static fg_status emit_epilogue(fg_emitter *em)
{
    const fg_group *grp = em->grp;
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    fg_buf b = {0};
    fg_status st = FG_OK;
    int has_hook = 0;
    for (int i = 0; i < grp->nepi; i++)
        has_hook |= grp->epi[i].kind == FG_EPI_HOOK;

    fg_buf_printf(&b, "// epilogue: applied to each accumulator before the one store;\n// (");
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&b, "%s%s", i ? ", " : "", coords[i]);
    fg_buf_printf(&b, ") are the logical coordinates of %s\n", em->ot->name);
    fg_buf_printf(&b, "FG_DEVICE float fg_epilogue(const fg_params_%s &p, float v", em->k->name);
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&b, ", fg_i64 %s", coords[i]);
    fg_buf_put(&b, ")\n{\n");
    if (has_hook && strcmp(coords[bias_axis(em)], "c") != 0)
        fg_buf_printf(&b, "    const fg_i64 c = %s;  // channel, for hook text\n    (void)c;\n", coords[bias_axis(em)]);

    int bias_slot = anchor_bias(em);
    int bias_t = bias_slot >= 0 ? em->g->nodes[grp->anchor].inputs[bias_slot] : -1;
    int bias_done = 0;
    for (int i = 0; i < grp->nepi; i++)
        if (grp->epi[i].kind == FG_EPI_BIAS && grp->epi[i].tensor == bias_t)
            bias_done = 1;
    int nstages = 0;
    if (bias_t >= 0 && !bias_done) {
        st = emit_bias(em, bias_t, coords, &b);
        nstages++;
    }
    if (grp->nepi > 0) {
        for (int i = 0; i < grp->nepi && st == FG_OK; i++) {
            const fg_group_epi *e = &grp->epi[i];
            nstages++;
            switch (e->kind) {
            case FG_EPI_BIAS:
                if (e->tensor >= 0)
                    st = emit_bias(em, e->tensor, coords, &b);
                else
                    fg_buf_printf(&b, "    // epilogue: bias (absent)\n");
                break;
            case FG_EPI_APPLY:
                if (e->node == em->main_node && grp->anchor < 0)
                    break;   /* the pointwise template computes it */
                st = emit_apply(em, e->node, coords, &b);
                break;
            case FG_EPI_HOOK: {
                char *text = NULL;
                st = fg_hook_epilogue(em->ctx, e->hook, hook_site(em, e->hook), em->g, grp, &text);
                if (st == FG_OK) {
                    fg_buf_printf(&b, "    // epilogue: hook %s\n    {\n", e->hook);
                    /* indent the hook's lines */
                    const char *s = text;
                    while (*s) {
                        const char *nl = strchr(s, '\n');
                        size_t n = nl ? (size_t)(nl - s) : strlen(s);
                        fg_buf_put(&b, "        ");
                        fg_buf_putn(&b, s, n);
                        fg_buf_put(&b, "\n");
                        s += n + (nl ? 1 : 0);
                    }
                    fg_buf_put(&b, "    }\n");
                }
                free(text);
                break;
            }
            default: st = fg_em_error(em, FG_ERR_INTERNAL, "unknown epilogue stage %d", (int)e->kind); break;
            }
        }
    } else {
        for (int i = 0; i < grp->nnodes && st == FG_OK; i++) {
            int nd = grp->nodes[i];
            if (nd == em->main_node || nd == grp->anchor)
                continue;
            nstages++;
            st = emit_apply(em, nd, coords, &b);
        }
    }
    if (!nstages)
        fg_buf_put(&b, "    // epilogue: none\n");
    fg_buf_put(&b, "    return v;\n}\n\n");
    if (st == FG_OK)
        fg_buf_put(&em->helpers, b.s);
    fg_buf_free(&b);
    return st;
}

/* ---- rendering -------------------------------------------------------------- */

static int is_name_char(int ch) { return isupper(ch) || isdigit(ch) || ch == '_'; }

/* Parses a tag `{{X}}` at s (s points at "{{"): sets kind ('#', '^', '/', or
 * 0), the name, and returns the tag length, or 0 when malformed. */
static size_t parse_tag(const char *s, char *kind, const char **name, size_t *nlen)
{
    const char *q = s + 2;
    *kind = 0;
    if (*q == '#' || *q == '^' || *q == '/')
        *kind = *q++;
    *name = q;
    while (is_name_char((unsigned char)*q))
        q++;
    *nlen = (size_t)(q - *name);
    if (*nlen == 0 || q[0] != '}' || q[1] != '}')
        return 0;
    return (size_t)(q + 2 - s);
}

fg_status fg_em_render(fg_emitter *em, const char *tname, const char *text, fg_buf *out)
{
    int keep[16], depth = 0, line = 1;
    const char *opened[16];
    size_t openlen[16];
    keep[0] = 1;
    const char *s = text;
    while (*s) {
        const char *eol = strchr(s, '\n');
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        /* a section tag alone on its line */
        const char *t = s;
        while (t < s + len && (*t == ' ' || *t == '\t'))
            t++;
        char kind;
        const char *name;
        size_t nlen, tl = 0;
        if (t + 2 < s + len && t[0] == '{' && t[1] == '{')
            tl = parse_tag(t, &kind, &name, &nlen);
        if (tl && kind) {
            const char *rest = t + tl;
            while (rest < s + len && (*rest == ' ' || *rest == '\t'))
                rest++;
            if (rest != s + len)
                return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: section tag must stand alone", tname, line);
            if (kind == '/') {
                if (depth == 0 || openlen[depth] != nlen || memcmp(opened[depth], name, nlen) != 0)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: unmatched {{/%.*s}}", tname, line,
                                       (int)nlen, name);
                depth--;
            } else {
                if (depth == 15)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: sections nested too deep", tname, line);
                const char *v = em_get(em, name, nlen);
                if (!v)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: no value for placeholder {{%.*s}}",
                                       tname, line, (int)nlen, name);
                int truthy = v[0] && strcmp(v, "0") != 0;
                depth++;
                opened[depth] = name;
                openlen[depth] = nlen;
                keep[depth] = keep[depth - 1] && (kind == '#' ? truthy : !truthy);
            }
        } else if (keep[depth] && tl && !kind && t + tl == s + len && em_get(em, name, nlen) &&
                   !*em_get(em, name, nlen)) {
            /* a line holding only an empty placeholder disappears */
        } else if (keep[depth]) {
            const char *q = s;
            while (q < s + len) {
                const char *o = strstr(q, "{{");
                if (!o || o >= s + len) {
                    fg_buf_putn(out, q, (size_t)(s + len - q));
                    break;
                }
                fg_buf_putn(out, q, (size_t)(o - q));
                size_t l = parse_tag(o, &kind, &name, &nlen);
                if (!l || kind)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: malformed placeholder", tname, line);
                const char *v = em_get(em, name, nlen);
                if (!v)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: no value for placeholder {{%.*s}}",
                                       tname, line, (int)nlen, name);
                fg_buf_put(out, v);
                q = o + l;
            }
            if (eol)
                fg_buf_put(out, "\n");
        }
        s += len + (eol ? 1 : 0);
        line++;
    }
    if (depth)
        return fg_em_error(em, FG_ERR_INTERNAL, "template %s: section {{%.*s}} not closed", tname, (int)openlen[depth],
                           opened[depth]);
    return FG_OK;
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

static const family *find_family(fg_emitter *em, const char *name)
{
    for (size_t i = 0; i < FG_COUNTOF(families); i++)
        if (name && strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

static fg_status unknown_template(fg_emitter *em, const char *name)
{
    const char *cands[FG_COUNTOF(families)];
    for (size_t i = 0; i < FG_COUNTOF(families); i++)
        cands[i] = families[i].name;
    const char *sug = name ? fg_suggest(name, cands, (int)FG_COUNTOF(families)) : NULL;
    if (sug)
        return fg_diag_error(em->ctx, FG_ERR_INPUT, em->loc, "unknown template '%s' (did you mean '%s'?)", name, sug);
    return fg_diag_error(em->ctx, FG_ERR_INPUT, em->loc,
                         "unknown template '%s' (known: pointwise, conv2d, conv2d_depthwise, gemm, gemm_tc, pool2d)",
                         name ? name : "(none)");
}

static fg_status assemble(fg_emitter *em)
{
    const char *text = fg_template_text(em->template_file);
    if (!text)
        return fg_em_error(em, FG_ERR_INTERNAL, "template file %s is not embedded", em->template_file);
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
                          i64_param(em, base, em->shapes[i].value));
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
    sanitize(em.rule ? em.rule->name : em.g->nodes[em.main_node].op->name, base, 40);
    snprintf(k->name, sizeof k->name, "fg_k%d_%s", group, base);
    deps_hash(&em);

    const family *fam = find_family(&em, em.grp->template_name);
    fg_status st;
    if (!fam) {
        st = unknown_template(&em, em.grp->template_name);
    } else {
        em.threads = 128;
        st = fam->fn(&em);
        if (st == FG_OK)
            st = emit_epilogue(&em);
        if (st == FG_OK) {
            /* the output is the last tensor parameter written */
            fg_em_tensor(&em, em.out, 1);
            st = assemble(&em);
        }
    }
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
