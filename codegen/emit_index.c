/*
 * emit_index.c -- index and offset code: kernel parameters (tensor pointers
 * and int64 dimensions), shape constants, element offsets in each tensor's
 * layout with numpy broadcasting, and the decomposition of a linear index
 * into logical coordinates.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_impl.h"
#include "shape.h"

void fg_em_shape(fg_emitter *em, const char *name, int64_t value)
{
    for (int i = 0; i < em->nshapes; i++)
        if (strcmp(em->shapes[i].name, name) == 0) {
            em->shapes[i].value = value;
            return;
        }
    if (em->nshapes == FG_EM_MAX_SHAPES) {
        fg_em_fail(em, "more than %d shape constants", FG_EM_MAX_SHAPES);
        return;
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
    case FG_DTYPE_I64: return "fg_i64";
    case FG_DTYPE_I32: return "fg_i32";
    case FG_DTYPE_BOOL: return "fg_bool";
    default: return "float";
    }
}

int fg_em_all_float(const fg_emitter *em)
{
    const fg_graph *g = em->g;
    if (!fg_dtype_is_float(em->ot->dtype))
        return 0;
    for (int i = 0; i < em->grp->nnodes; i++) {
        const fg_node *n = &g->nodes[em->grp->nodes[i]];
        if (!fg_dtype_is_float(g->tensors[n->output].dtype))
            return 0;
        for (int j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0 && !fg_dtype_is_float(g->tensors[n->inputs[j]].dtype))
                return 0;
    }
    return 1;
}

int64_t fg_em_numel(const fg_emitter *em, int t) { return fg_tensor_numel(&em->g->tensors[t]); }

int fg_em_channel_axis(int rank) { return rank >= 2 ? 1 : 0; }

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

void fg_em_identifier(const char *s, char *out, size_t size)
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

/* Whether s is a C++ keyword or alternative token (`and`, `not`, ...): a
 * tensor so named cannot name a field of the parameter struct. */
static int cxx_reserved(const char *s)
{
    static const char *const words[] = {
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
        "char", "char16_t", "char32_t", "char8_t", "class", "co_await", "co_return", "co_yield", "compl", "concept",
        "const", "const_cast", "consteval", "constexpr", "constinit", "continue", "decltype", "default", "delete",
        "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
        "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
        "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
        "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
        "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
        "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(s, words[i]) == 0)
            return 1;
    return 0;
}

static fg_kparam *add_param(fg_emitter *em, const char *base)
{
    fg_kernel *k = em->k;
    if (k->nparams == FG_MAX_KPARAMS) {
        /* the template's tensor limit keeps planned groups far below this */
        fg_em_fail(em, "more than %d kernel parameters", FG_MAX_KPARAMS);
        return NULL;
    }
    fg_kparam *kp = &k->params[k->nparams];
    memset(kp, 0, sizeof *kp);
    kp->tensor = -1;
    snprintf(kp->name, sizeof kp->name, cxx_reserved(base) ? "%s_" : "%s", base);
    for (int i = 2; param_name_taken(k, kp->name) || cxx_reserved(kp->name); i++)
        snprintf(kp->name, sizeof kp->name, "%.36s_%d", base, i);
    k->nparams++;
    return kp;
}

void fg_em_split_buffers(fg_emitter *em, int64_t slot_bytes, int64_t counters)
{
    if (slot_bytes <= 0) {
        fg_em_set(em, "WS", "%s", "fg_no_workspace");
        fg_em_set(em, "WSC", "%s", "fg_no_counters");
        return;
    }
    fg_kparam *ws = add_param(em, "fg_workspace");
    fg_kparam *wc = ws ? add_param(em, "fg_counters") : NULL;
    if (!wc)
        return;
    ws->kind = FG_KPARAM_WORKSPACE;
    ws->value = slot_bytes;
    wc->kind = FG_KPARAM_COUNTERS;
    wc->value = counters * 4;
    fg_em_set(em, "WS", "%s", ws->name);
    fg_em_set(em, "WSC", "%s", wc->name);
}

const char *fg_em_tensor(fg_emitter *em, int t, int writes)
{
    for (int i = 0; i < em->k->nparams; i++)
        if (em->k->params[i].kind == FG_KPARAM_TENSOR && em->k->params[i].tensor == t) {
            em->k->params[i].writes |= writes;
            return em->k->params[i].name;
        }
    char base[48];
    fg_em_identifier(em->g->tensors[t].name, base, 40);
    fg_kparam *kp = add_param(em, base);
    if (!kp)
        return "fg_overflow";
    kp->kind = FG_KPARAM_TENSOR;
    kp->tensor = t;
    kp->writes = writes;
    return kp->name;
}

const char *fg_em_i64_param(fg_emitter *em, const char *base, int64_t value)
{
    for (int i = 0; i < em->k->nparams; i++)
        if (em->k->params[i].kind == FG_KPARAM_I64 && strcmp(em->k->params[i].name, base) == 0)
            return em->k->params[i].name;
    fg_kparam *kp = add_param(em, base);
    if (!kp)
        return "fg_overflow";
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
    fg_buf_printf(out, "p.%s", fg_em_i64_param(em, base, v));
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
    return fg_node_attr_int(&em->g->nodes[nd], name, index);
}

void fg_em_step_coords(fg_emitter *em, int t, const char *const *coords, int ind, fg_buf *out)
{
    const fg_tensor *x = &em->g->tensors[t];
    int order[FG_MAX_RANK];
    physical_order(x, order);
    /* if (++w == W) { w = 0; if (++h == H) { h = 0; ... ++n; } } */
    for (int pi = x->rank - 1; pi >= 0; pi--) {
        const char *c = coords[order[pi]];
        if (pi == 0) {
            fg_buf_iprintf(out, ind + (x->rank - 1 - pi), "++%s;\n", c);
            break;
        }
        fg_buf_iprintf(out, ind + (x->rank - 1 - pi), "if (++%s == ", c);
        fg_em_dim(em, t, order[pi], out);
        fg_buf_printf(out, ") {\n");
        fg_buf_iprintf(out, ind + (x->rank - pi), "%s = 0;\n", c);
    }
    for (int k = x->rank - 2; k >= 0; k--)
        fg_buf_iprintf(out, ind + k, "}\n");
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

/* ---- helpers of the row and re-indexing families ------------------------------ */

/* Nonzero when tensor t is made inside em's group and is not its output:
 * never stored, so it has no kernel parameter. */
static int inside(const fg_emitter *em, int t)
{
    if (t == em->out)
        return 0;
    for (int i = 0; i < em->grp->nnodes; i++)
        if (em->g->nodes[em->grp->nodes[i]].output == t)
            return 1;
    return 0;
}

void fg_em_group_dim(fg_emitter *em, int t, int axis, fg_buf *out)
{
    if (!inside(em, t)) {
        fg_em_dim(em, t, axis, out);
    } else if (em->opts->specialize) {
        fg_buf_printf(out, "%" PRId64, em->g->tensors[t].shape[axis]);
    } else {
        char base[48];
        snprintf(base, sizeof base, "dim_t%d_%d", t, axis);
        fg_buf_printf(out, "p.%s", fg_em_i64_param(em, base, em->g->tensors[t].shape[axis]));
    }
}

int fg_em_row_major(const fg_emitter *em, int t)
{
    const fg_tensor *x = &em->g->tensors[t];
    return x->rank != 4 || x->layout != FG_LAYOUT_NHWC || x->shape[1] == 1 || x->shape[2] * x->shape[3] == 1;
}

void fg_em_lin_coords(fg_emitter *em, int t, const char *lin, const char *base, char names[][16], int ind,
                      fg_buf *out)
{
    const fg_tensor *x = &em->g->tensors[t];
    const char *const *cn = fg_em_coord_names(x->rank);
    int first = -1, last = -1;
    for (int d = 0; d < x->rank; d++) {
        if (x->shape[d] == 1) {
            snprintf(names[d], 16, "0");
            continue;
        }
        if (base)
            snprintf(names[d], 16, "%s%d", base, d);
        else
            snprintf(names[d], 16, "%s", cn[d]);
        if (first < 0)
            first = d;
        last = d;
    }
    for (int d = 0; d < x->rank; d++) {
        if (x->shape[d] == 1)
            continue;
        fg_buf_iprintf(out, ind, "const fg_i64 %s = ", names[d]);
        if (d < last) {
            fg_buf_printf(out, "%s / (", lin);
            int terms = 0;
            for (int q = d + 1; q < x->rank; q++) {
                if (x->shape[q] == 1)
                    continue;
                if (terms++)
                    fg_buf_put(out, " * ");
                fg_em_group_dim(em, t, q, out);
            }
            fg_buf_put(out, ")");
        } else {
            fg_buf_put(out, lin);
        }
        if (d > first) {
            fg_buf_put(out, " % ");
            fg_em_group_dim(em, t, d, out);
        }
        fg_buf_printf(out, ";  // %s axis %d\n", x->name, d);
    }
}

void fg_em_launch_1d(fg_emitter *em, int64_t work, int64_t threads)
{
    int64_t blocks = (work + threads - 1) / threads;
    em->k->grid[0] = (unsigned)(blocks > 8192 ? 8192 : blocks < 1 ? 1 : blocks);
    em->k->grid[1] = em->k->grid[2] = 1;
    em->k->block[0] = (unsigned)threads;
    em->k->block[1] = em->k->block[2] = 1;
    em->threads = (unsigned)threads;
}

/* Body of a helper returning tensor t's element at logical index lin
 * (emit_impl.h). */
fg_status fg_em_lin_load_body(fg_emitter *em, int t, fg_buf *b)
{
    const fg_tensor *x = &em->g->tensors[t];
    if (fg_em_row_major(em, t)) {
        fg_buf_iprintf(b, 1, "return fg_load(p.%s + lin);  // %s, row-major", fg_em_tensor(em, t, 0), x->name);
        return FG_OK;
    }
    char names[FG_MAX_RANK][16];
    const char *xc[FG_MAX_RANK];
    fg_em_lin_coords(em, t, "lin", "x", names, 1, b);
    for (int d = 0; d < x->rank; d++)
        xc[d] = names[d];
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, t, 0, xc, x->rank, x->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "return fg_load(p.%s + %s);  // %s", fg_em_tensor(em, t, 0), off.s, x->name);
    fg_buf_free(&off);
    return st;
}

/* Body of a helper storing v at the output's logical index lin: the
 * coordinates, the epilogue, the store (emit_impl.h). */
fg_status fg_em_lin_store_body(fg_emitter *em, fg_buf *b)
{
    const fg_tensor *y = em->ot;
    char names[FG_MAX_RANK][16];
    const char *yc[FG_MAX_RANK];
    fg_em_lin_coords(em, em->out, "lin", NULL, names, 1, b);
    fg_buf off = {0}, args = {0};
    for (int d = 0; d < y->rank; d++) {
        yc[d] = names[d];
        fg_buf_printf(&args, "%s%s", d ? ", " : "", names[d]);
    }
    fg_status st = FG_OK;
    if (fg_em_row_major(em, em->out))
        fg_buf_put(&off, "lin");
    else
        st = fg_em_offset(em, em->out, 0, yc, y->rank, y->shape, &off);
    if (st == FG_OK)
        fg_buf_iprintf(b, 1, "fg_store(p.%s + %s, fg_epilogue(p, v, %s));", fg_em_tensor(em, em->out, 1), off.s,
                       args.s);
    fg_buf_free(&off);
    fg_buf_free(&args);
    return st;
}

fg_status fg_em_threads(fg_emitter *em, int64_t def, int64_t *threads)
{
    const char *keys[] = {"threads"};
    *threads = def;
    return fg_em_tile_params(em, keys, 1, threads);
}

/* ---- batched matmuls ------------------------------------------------------------ */

void fg_em_batch_coords(fg_emitter *em, const fg_matmul_geom_t *d, int ind, fg_buf *b)
{
    char name[16];
    for (int i = d->nbatch - 1; i >= 0; i--) {
        fg_buf_iprintf(b, ind, "const fg_i64 yb%d = bt", i);
        for (int j = d->nbatch - 1; j > i; j--) {
            snprintf(name, sizeof name, "YB%d", j);
            fg_em_shape(em, name, d->bshape[j]);
            fg_buf_printf(b, " / %s", name);
        }
        if (i > 0) {
            snprintf(name, sizeof name, "YB%d", i);
            fg_em_shape(em, name, d->bshape[i]);
            fg_buf_printf(b, " %% %s", name);
        }
        fg_buf_put(b, ";\n");
    }
}

void fg_em_batch_text(fg_emitter *em, const fg_matmul_geom_t *d, fg_buf *b)
{
    char name[16];
    if (d->nbatch == 0) {
        fg_buf_put(b, "    const fg_i64 a_base = 0, b_base = 0, y_base = 0;   // one matrix\n");
        return;
    }
    fg_buf_printf(b, "    // batch bt of [");
    for (int i = 0; i < d->nbatch; i++)
        fg_buf_printf(b, "%s%" PRId64, i ? ", " : "", d->bshape[i]);
    fg_buf_put(b, "]: its coordinates, the operands' matrices (broadcast axes add 0)\n");
    fg_em_batch_coords(em, d, 1, b);
    const int64_t *strides[2] = {d->astride, d->bstride};
    for (int o = 0; o < 2; o++) {
        fg_buf_printf(b, "    const fg_i64 %s_base = ", o ? "b" : "a");
        int terms = 0;
        for (int i = 0; i < d->nbatch; i++)
            if (strides[o][i]) {
                snprintf(name, sizeof name, "S%c%d", o ? 'B' : 'A', i);
                fg_em_shape(em, name, strides[o][i]);
                fg_buf_printf(b, "%syb%d * %s", terms++ ? " + " : "", i, name);
            }
        fg_buf_put(b, terms ? ";\n" : "0;\n");
    }
    fg_buf_put(b, "    const fg_i64 y_base = bt * M * N;\n");
}
