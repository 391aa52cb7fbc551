/*
 * graph_load.c -- model graphs from YAML (format in docs/graphs.md):
 * inputs, weights (given or generated deterministically from the seed),
 * nodes in any order (sorted topologically, stable in file order), outputs.
 * Every problem is reported with its location; shapes are inferred in
 * topological order (shape.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "context.h"
#include "input_file.h"
#include "kind.h"
#include "load.h"
#include "onnx_load.h"
#include "oom.h"
#include "safe_open.h"
#include "shape.h"
#include "weights_file.h"

static const char *const graph_keys[] = {"graph", "seed", "dtype", "layout", "precision", "inputs", "weights", "nodes",
                                         "outputs"};
static const char *const input_keys[] = {"name", "shape", "dtype", "layout"};
static const char *const weight_keys[] = {"name", "shape", "dtype", "layout", "init", "uniform", "values", "file", "tensor"};
static const char *const node_keys[] = {"name", "op", "inputs", "attrs", "output"};
static const char *const init_names[] = {"fan_in", "positive", "uniform", "zeros", "ones"};

/* Weights are held in memory as fp32: 2^28 elements is 1 GiB. */
#define FG_MAX_WEIGHT_NUMEL (1ll << 28)

typedef enum init_kind { INIT_FAN_IN = 0, INIT_POSITIVE, INIT_UNIFORM, INIT_ZEROS, INIT_ONES, INIT_VALUES, INIT_FILE } init_kind;

typedef struct name_ent {
    UT_hash_handle hh;
    const char *name;   /* interned */
    int idx;
} name_ent;

typedef struct weight_init {
    int tensor;
    init_kind kind;
    double lo, hi;
    const fg_ynode *values;
} weight_init;

/* A node as written, before sorting. */
typedef struct raw_node {
    fg_node node;
    const fg_ynode *map;
    int bad;            /* an error already reported for this node */
} raw_node;

typedef struct loader {
    fg_context *ctx;
    fg_graph *g;
    fg_dtype dtype;
    fg_layout layout;
    name_ent *tensors;  /* tensor name -> index */
    name_ent *nodes;    /* node name -> raw index */
    weight_init *winit;
    int nwinit, winit_cap;
    raw_node *raw;
    int nraw, raw_cap;
    struct open_wfile *wfiles;   /* .safetensors files opened for `file:` weights */
    int dirfd;                   /* the graph file's directory, opened once; -1 for text */
} loader;

static int table_find(name_ent *t, const char *name)
{
    name_ent *e;
    HASH_FIND_STR(t, name, e);
    return e ? e->idx : -1;
}

static void table_add(name_ent **t, const char *name, int idx)
{
    name_ent *e = fg_xcalloc(1, sizeof *e);
    e->name = name;
    e->idx = idx;
    HASH_ADD_KEYPTR(hh, *t, e->name, strlen(e->name), e);
}

static void table_free(name_ent **t)
{
    name_ent *e, *tmp;
    HASH_ITER(hh, *t, e, tmp) {
        HASH_DEL(*t, e);
        free(e);
    }
}

/* Looks a name up in a table of names, reporting it with a suggestion. */
static int parse_enum(fg_context *ctx, const fg_ynode *v, const char *what, const char *(*name_of)(int), int n)
{
    const char *s, *names[8];
    if (!fg_yget_str(ctx, v, what, &s))
        return -1;
    for (int i = 0; i < n; i++) {
        names[i] = name_of(i);
        if (strcmp(s, names[i]) == 0)
            return i;
    }
    fg_diag_unknown(ctx, v->loc, what, s, names, n);
    return -1;
}

static const char *dtype_name_i(int i) { return fg_dtype_name((fg_dtype)i); }
static const char *precision_name_i(int i) { return fg_precision_name((fg_precision)i); }
static const char *layout_name_i(int i) { return fg_layout_name((fg_layout)i); }
static const char *init_name_i(int i) { return init_names[i]; }

/* Adds a tensor name; reports a duplicate.  Returns the index or -1. */
static int add_tensor(loader *L, fg_tensor *t, const fg_ynode *at)
{
    int old = table_find(L->tensors, t->name);
    if (old >= 0) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, at->loc, "duplicate tensor name '%s' (first at line %d)", t->name,
                      L->g->tensors[old].loc.line);
        return -1;
    }
    int idx = fg_graph_add_tensor(L->g, t);
    table_add(&L->tensors, L->g->tensors[idx].name, idx);
    return idx;
}

/* `shape: [..]`: 1..FG_MAX_RANK positive integers. */
static int parse_shape(loader *L, const fg_ynode *v, fg_tensor *t)
{
    if (!fg_yexpect(L->ctx, v, FG_YNODE_SEQ, "shape"))
        return 0;
    if (v->n < 1 || v->n > FG_MAX_RANK) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "shape must have 1 to %d dimensions, got %d", FG_MAX_RANK, v->n);
        return 0;
    }
    for (int i = 0; i < v->n; i++) {
        if (!fg_yget_int(L->ctx, v->items[i], "a dimension", &t->shape[i]))
            return 0;
        if (t->shape[i] < 1 || t->shape[i] > (1ll << 31)) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, v->items[i]->loc, "dimension must be positive, got %lld",
                          (long long)t->shape[i]);
            return 0;
        }
    }
    t->rank = v->n;
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        numel *= t->shape[i];
        if (numel > (1ll << 31)) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "tensor '%s' is too large (more than 2^31 elements)",
                          t->name);
            return 0;
        }
    }
    return 1;
}

/* Common part of `inputs:` and `weights:` entries: name, shape, dtype, layout. */
static int parse_tensor(loader *L, const fg_ynode *m, fg_tensor *t, const char *what)
{
    const char *name;
    const fg_ynode *v;
    int ok = 1;
    memset(t, 0, sizeof *t);
    t->producer = -1;
    t->dtype = L->dtype;
    t->layout = L->layout;
    t->loc = m->loc;
    if (!(v = fg_ymap_get(m, "name"))) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, m->loc, "%s has no `name`", what);
        return 0;
    }
    if (!fg_yget_name(L->ctx, v, "tensor name", &name))
        return 0;
    t->name = fg_intern(L->ctx, name);
    if (!(v = fg_ymap_get(m, "shape"))) {
        if (!(strcmp(what, "weight") == 0 && fg_ymap_get(m, "file"))) {   /* a file gives the shape */
            fg_diag_error(L->ctx, FG_ERR_INPUT, m->loc, "%s '%s' has no `shape`", what, t->name);
            ok = 0;
        }
    } else {
        ok = parse_shape(L, v, t);
    }
    int e;
    if ((v = fg_ymap_get(m, "dtype")) && (e = parse_enum(L->ctx, v, "dtype", dtype_name_i, FG_DTYPE_COUNT)) >= 0)
        t->dtype = (fg_dtype)e;
    if ((v = fg_ymap_get(m, "layout")) && (e = parse_enum(L->ctx, v, "layout", layout_name_i, FG_LAYOUT_COUNT)) >= 0)
        t->layout = (fg_layout)e;
    return ok;
}

static void parse_inputs(loader *L, const fg_ynode *seq)
{
    int cap = 0;
    if (!fg_yexpect(L->ctx, seq, FG_YNODE_SEQ, "inputs"))
        return;
    for (int i = 0; i < seq->n; i++) {
        const fg_ynode *m = seq->items[i];
        fg_tensor t;
        if (!fg_yexpect(L->ctx, m, FG_YNODE_MAP, "a graph input"))
            continue;
        fg_ycheck_keys(L->ctx, m, "a graph input", input_keys, (int)FG_COUNTOF(input_keys));
        if (!parse_tensor(L, m, &t, "input"))
            continue;
        t.is_input = 1;
        int idx = add_tensor(L, &t, fg_ymap_get(m, "name"));
        if (idx >= 0)
            *FG_PUSH(L->g->inputs, L->g->ninputs, cap) = idx;
    }
}

/* ---- weights from files (`file:`, docs/graphs.md) -------------------------- */

/* A .safetensors file opened for this graph (weights may share one). */
typedef struct open_wfile {
    struct open_wfile *next;
    char *rel;                  /* as the graph names it */
    fg_safetensors *st;
} open_wfile;

static void close_weight_files(loader *L)
{
    while (L->wfiles) {
        open_wfile *f = L->wfiles;
        L->wfiles = f->next;
        fg_safetensors_close(f->st);
        free(f->rel);
        free(f);
    }
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Reads the tensor that m's `file:` (and, for .safetensors, `tensor:`, by
 * default the weight's name) names into t->data, exactly as stored.  The
 * shape comes from the file unless `shape:` is given, which must then agree;
 * the file's dtype must be the weight's (its `dtype:`, else the graph's),
 * except that a bf16 weight reads a float32 .npy (NumPy has no bfloat16),
 * rounded to bf16.  Returns 1, or 0 after reporting a located error. */
static int load_weight_file(loader *L, const fg_ynode *m, fg_tensor *t)
{
    const fg_ynode *f = fg_ymap_get(m, "file"), *tv = fg_ymap_get(m, "tensor"), *sv = fg_ymap_get(m, "shape"),
                   *dv = fg_ymap_get(m, "dtype");
    const char *rel, *tname = t->name;
    char why[400], shown[300];
    if (!f) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, fg_ymap_key(m, "tensor")->loc,
                      "weight '%s': `tensor` names a tensor of a .safetensors `file`, and there is no `file`", t->name);
        return 0;
    }
    if (!fg_yget_str(L->ctx, f, "file", &rel))
        return 0;
    int npy = ends_with(rel, ".npy"), st = ends_with(rel, ".safetensors");
    if (!npy && !st) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, f->loc, "weight '%s': file '%s' is neither .npy nor .safetensors", t->name,
                      rel);
        return 0;
    }
    if (tv && npy) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, fg_ymap_key(m, "tensor")->loc,
                      "weight '%s': `tensor` applies to .safetensors files; an .npy file holds one tensor", t->name);
        return 0;
    }
    if (tv && !fg_yget_str(L->ctx, tv, "tensor", &tname))
        return 0;
    if (L->dirfd < 0) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, f->loc,
                      "weight '%s': `file:` needs a graph read from a file (fg_graph_load), not from text", t->name);
        return 0;
    }
    fg_file_tensor ft;
    int rc, fd = -1;
    open_wfile *o = st ? L->wfiles : NULL;
    while (o && strcmp(o->rel, rel) != 0)
        o = o->next;
    /* Opened once, beneath the graph's directory: no '..', no links. */
    if (!o && (fd = fg_open_beneath(L->dirfd, rel, FG_OPEN_NOFOLLOW, NULL, why, sizeof why)) < 0) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, f->loc, "weight '%s': file '%s'%s%s", t->name, rel, fg_reason_sep(why),
                      why);
        return 0;
    }
    if (npy) {
        fg_oom_defer_close(fd);   /* closed if reading unwinds (oom.h) */
        rc = fg_npy_read_fd(fd, FG_MAX_WEIGHT_NUMEL, &ft, why, sizeof why);
        fg_oom_close(fd);
    } else {
        if (!o) {
            fg_safetensors *sf = fg_safetensors_open_fd(fd, why, sizeof why);
            if (sf) {
                o = fg_xcalloc(1, sizeof *o);
                o->rel = fg_xstrdup(rel);
                o->st = sf;
                o->next = L->wfiles;
                L->wfiles = o;
            }
        }
        rc = o ? fg_safetensors_read(o->st, tname, FG_MAX_WEIGHT_NUMEL, &ft, why, sizeof why) : -1;
        if (!o || !tv)
            tv = f;   /* where a failure is reported */
    }
    if (rc) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, npy ? f->loc : tv->loc, "weight '%s': %s: %s", t->name, rel, why);
        return 0;
    }
    snprintf(shown, sizeof shown, "%s%s%s%s", rel, st ? " (tensor '" : "", st ? tname : "", st ? "')" : "");
    int ok = 1;
    if (sv && t->rank > 0) {
        int same = t->rank == ft.rank;
        for (int i = 0; same && i < ft.rank; i++)
            same = t->shape[i] == ft.shape[i];
        if (!same) {
            char a[128], b[128];
            fg_diag_error(L->ctx, FG_ERR_INPUT, sv->loc, "weight '%s' has shape %s but %s holds %s", t->name,
                          fg_shape_str(t->shape, t->rank, a, sizeof a), shown, fg_shape_str(ft.shape, ft.rank, b, sizeof b));
            ok = 0;
        }
    } else if (!sv) {
        t->rank = ft.rank;
        memcpy(t->shape, ft.shape, sizeof t->shape);
    }
    if (ok && ft.dtype != t->dtype) {
        if (npy && t->dtype == FG_DTYPE_BF16 && ft.dtype == FG_DTYPE_F32) {
            int64_t n = fg_tensor_numel(t);
            for (int64_t i = 0; i < n; i++)
                ft.data[i] = fg_file_round_bf16(ft.data[i]);
        } else {
            static const char *const npy_names[] = {"float32", "float16", "bfloat16"};
            static const char *const st_names[] = {"F32", "F16", "BF16"};
            fg_diag_error(L->ctx, FG_ERR_INPUT, dv ? dv->loc : f->loc,
                          "weight '%s' is %s%s but %s holds %s data; give the weight `dtype: %s` or convert the file",
                          t->name, fg_dtype_name(t->dtype), dv ? "" : " (the graph's dtype)", shown,
                          (npy ? npy_names : st_names)[ft.dtype], fg_dtype_name(ft.dtype));
            ok = 0;
        }
    }
    if (!ok) {
        free(ft.data);
        return 0;
    }
    t->data = ft.data;
    return 1;
}

static void parse_weights(loader *L, const fg_ynode *seq)
{
    if (!fg_yexpect(L->ctx, seq, FG_YNODE_SEQ, "weights"))
        return;
    for (int i = 0; i < seq->n; i++) {
        const fg_ynode *m = seq->items[i], *v;
        fg_tensor t;
        weight_init w = {0};
        int ok = 1, e;
        if (!fg_yexpect(L->ctx, m, FG_YNODE_MAP, "a weight"))
            continue;
        fg_ycheck_keys(L->ctx, m, "a weight", weight_keys, (int)FG_COUNTOF(weight_keys));
        ok = parse_tensor(L, m, &t, "weight");
        const fg_ynode *init = fg_ymap_get(m, "init"), *uni = fg_ymap_get(m, "uniform"),
                       *vals = fg_ymap_get(m, "values");
        w.kind = INIT_FAN_IN;
        if (fg_ymap_get(m, "file") || fg_ymap_get(m, "tensor")) {
            if (init || uni || vals)
                fg_diag_error(L->ctx, FG_ERR_INPUT, fg_ymap_key(m, init ? "init" : uni ? "uniform" : "values")->loc,
                              "weight '%s' gives `file` together with `%s`; use one", t.name ? t.name : "?",
                              init ? "init" : uni ? "uniform" : "values");
            else if (ok && load_weight_file(L, m, &t))
                w.kind = INIT_FILE;
            if (w.kind != INIT_FILE)
                continue;
        } else if (init) {
            if ((e = parse_enum(L->ctx, init, "init", init_name_i, (int)FG_COUNTOF(init_names))) < 0)
                ok = 0;
            else
                w.kind = (init_kind)e;
        }
        if (vals && (init || uni)) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, fg_ymap_key(m, "values")->loc,
                          "weight '%s' gives `values` together with `init`/`uniform`; use one",
                          t.name ? t.name : "?");
            ok = 0;
        } else if (vals) {
            w.kind = INIT_VALUES;
            w.values = vals;
            if (!fg_yexpect(L->ctx, vals, FG_YNODE_SEQ, "values")) {
                ok = 0;
            } else {
                for (int j = 0; j < vals->n; j++) {
                    double d;
                    if (!fg_yget_float(L->ctx, vals->items[j], "a weight value", &d)) {
                        ok = 0;
                        break;
                    }
                }
                if (ok && t.rank > 0 && vals->n != fg_tensor_numel(&t)) {
                    char b[128];
                    fg_diag_error(L->ctx, FG_ERR_INPUT, vals->loc, "weight '%s' of shape %s needs %lld values, got %d",
                                  t.name, fg_shape_str(t.shape, t.rank, b, sizeof b), (long long)fg_tensor_numel(&t),
                                  vals->n);
                    ok = 0;
                }
            }
        } else if (uni) {
            if (init && w.kind != INIT_UNIFORM) {
                fg_diag_error(L->ctx, FG_ERR_INPUT, fg_ymap_key(m, "uniform")->loc,
                              "`uniform: [lo, hi]` conflicts with `init: %s`", init->str);
                ok = 0;
            } else if (uni->kind != FG_YNODE_SEQ || uni->n != 2) {
                char d[96];
                fg_diag_error(L->ctx, FG_ERR_INPUT, uni->loc, "uniform must be [lo, hi], got %s",
                              fg_ynode_describe(uni, d, sizeof d));
                ok = 0;
            } else if (!fg_yget_float(L->ctx, uni->items[0], "lo", &w.lo) ||
                       !fg_yget_float(L->ctx, uni->items[1], "hi", &w.hi)) {
                ok = 0;
            } else if (!(w.lo <= w.hi)) {
                fg_diag_error(L->ctx, FG_ERR_INPUT, uni->loc, "uniform needs lo <= hi");
                ok = 0;
            }
            w.kind = INIT_UNIFORM;
        } else if (w.kind == INIT_UNIFORM) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, init->loc, "`init: uniform` needs `uniform: [lo, hi]`");
            ok = 0;
        }
        if (ok && fg_tensor_numel(&t) > FG_MAX_WEIGHT_NUMEL) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, (v = fg_ymap_get(m, "shape")) ? v->loc : m->loc,
                          "weight '%s' has %lld elements; a weight may have at most %lld", t.name,
                          (long long)fg_tensor_numel(&t), (long long)FG_MAX_WEIGHT_NUMEL);
            ok = 0;
        }
        if (!ok) {
            free(t.data);
            continue;
        }
        t.is_weight = 1;
        w.tensor = add_tensor(L, &t, (v = fg_ymap_get(m, "name")) ? v : m);
        if (w.tensor >= 0)
            *FG_PUSH(L->winit, L->nwinit, L->winit_cap) = w;
        else
            free(t.data);
    }
}

/* splitmix64: one step of the weight generator's stream. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double unit(uint64_t *s) { return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Fills a weight's data from its init spec.  The stream of a tensor depends
 * only on the graph seed and the tensor's name. */
static void generate(loader *L, const weight_init *w)
{
    fg_tensor *t = &L->g->tensors[w->tensor];
    if (w->kind == INIT_FILE)   /* read while parsing (load_weight_file) */
        return;
    int64_t n = fg_tensor_numel(t);
    uint64_t s = L->g->seed ^ fg_hash64(t->name, strlen(t->name));
    double lo = w->lo, hi = w->hi;
    t->data = fg_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    switch (w->kind) {
    case INIT_FAN_IN:
        if (t->rank == 1) {
            lo = -1, hi = 1;
        } else {
            double fan_in = (double)n / (double)t->shape[0];
            hi = 1.0 / sqrt(fan_in);
            lo = -hi;
        }
        break;
    case INIT_POSITIVE: lo = 0.5, hi = 1.5; break;
    case INIT_ZEROS: lo = hi = 0; break;
    case INIT_ONES: lo = hi = 1; break;
    default: break;
    }
    if (w->kind == INIT_VALUES) {
        for (int64_t i = 0; i < n; i++) {
            double d = 0;
            fg_yscalar_float(w->values->items[i], &d);
            t->data[i] = (float)d;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(lo + (hi - lo) * unit(&s));
        t->data[i] = v > hi ? (float)hi : v; /* rounding to float never leaves [lo, hi] */
    }
}

/* Pass 1 over `nodes:`: name, op, output tensor; inputs and attrs later. */
static void parse_node_heads(loader *L, const fg_ynode *seq)
{
    if (!fg_yexpect(L->ctx, seq, FG_YNODE_SEQ, "nodes"))
        return;
    const char **opnames = fg_xmalloc(sizeof *opnames * (size_t)(L->ctx->nops + 1));
    for (int i = 0; i < L->ctx->nops; i++)
        opnames[i] = L->ctx->ops[i]->name;
    for (int i = 0; i < seq->n; i++) {
        const fg_ynode *m = seq->items[i], *v;
        const char *name;
        if (!fg_yexpect(L->ctx, m, FG_YNODE_MAP, "a node"))
            continue;
        fg_ycheck_keys(L->ctx, m, "a node", node_keys, (int)FG_COUNTOF(node_keys));
        raw_node r = {0};
        r.map = m;
        r.node.loc = m->loc;
        r.node.output = -1;
        if (!(v = fg_ymap_get(m, "name"))) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, m->loc, "node has no `name`");
            continue;
        }
        if (!fg_yget_name(L->ctx, v, "node name", &name))
            continue;
        r.node.name = fg_intern(L->ctx, name);
        int old = table_find(L->nodes, r.node.name);
        if (old >= 0) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "duplicate node name '%s' (first at line %d)", r.node.name,
                          L->raw[old].node.loc.line);
            continue;
        }
        if (!(v = fg_ymap_get(m, "op"))) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, m->loc, "node '%s' has no `op`", r.node.name);
            r.bad = 1;
        } else if (fg_yget_name(L->ctx, v, "op", &name)) {
            r.node.op = fg_ctx_find_op(L->ctx, name);
            if (!r.node.op) {
                const char *sug = fg_suggest(name, opnames, L->ctx->nops);
                if (sug)
                    fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "unknown op '%s' (did you mean '%s'?)", name, sug);
                else
                    fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "unknown op '%s'", name);
                r.bad = 1;
            }
        } else {
            r.bad = 1;
        }
        fg_tensor t = {0};
        t.name = r.node.name;
        t.producer = -1;
        t.dtype = L->dtype;
        t.layout = L->layout;
        t.rank = -1;
        t.loc = m->loc;
        const fg_ynode *at = fg_ymap_get(m, "name");
        if ((v = fg_ymap_get(m, "output"))) {
            if (fg_yget_name(L->ctx, v, "output", &name))
                t.name = fg_intern(L->ctx, name), at = v;
            else
                r.bad = 1;
        }
        r.node.output = add_tensor(L, &t, at);
        if (r.node.output < 0)
            r.bad = 1;
        table_add(&L->nodes, r.node.name, L->nraw);
        *FG_PUSH(L->raw, L->nraw, L->raw_cap) = r;
    }
    free(opnames);
}

/* Reports an unknown tensor name with a suggestion among known tensors. */
static void unknown_tensor(loader *L, const fg_ynode *v, const char *what)
{
    const char **names = fg_xmalloc(sizeof *names * (size_t)(L->g->ntensors + 1));
    for (int i = 0; i < L->g->ntensors; i++)
        names[i] = L->g->tensors[i].name;
    const char *sug = fg_suggest(v->str, names, L->g->ntensors);
    if (sug)
        fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "unknown tensor '%s'%s (did you mean '%s'?)", v->str, what, sug);
    else
        fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "unknown tensor '%s'%s", v->str, what);
    free(names);
}

/* Pass 2: a node's inputs (by tensor name) and attributes. */
static void parse_node_body(loader *L, raw_node *r)
{
    fg_node *n = &r->node;
    const fg_opdef *op = n->op;
    const fg_ynode *ins = fg_ymap_get(r->map, "inputs"), *attrs = fg_ymap_get(r->map, "attrs");
    char what[200];
    if (!op)
        return;
    n->ninputs = op->ninputs;
    for (int i = 0; i < FG_MAX_INPUTS; i++)
        n->inputs[i] = -1;
    int given = 0;
    if (!ins) {
        fg_diag_error(L->ctx, FG_ERR_INPUT, n->loc, "node '%s' has no `inputs`", n->name);
        r->bad = 1;
    } else if (!fg_yexpect(L->ctx, ins, FG_YNODE_SEQ, "inputs")) {
        r->bad = 1;
    } else {
        given = ins->n;
        if (ins->n > op->ninputs) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, ins->items[op->ninputs]->loc,
                          "too many inputs for %s '%s': it takes at most %d, got %d", op->name, n->name, op->ninputs,
                          ins->n);
            r->bad = 1;
            given = op->ninputs;
        }
        for (int i = 0; i < given; i++) {
            const fg_ynode *v = ins->items[i];
            if (fg_ynode_is_null(v))
                continue;
            if (v->kind != FG_YNODE_SCALAR) {
                char d[96];
                fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "an input must be a tensor name or ~, got %s",
                              fg_ynode_describe(v, d, sizeof d));
                r->bad = 1;
                continue;
            }
            int t = table_find(L->tensors, v->str);
            if (t < 0) {
                snprintf(what, sizeof what, " (input '%s' of node '%s')", op->inputs[i].name, n->name);
                unknown_tensor(L, v, what);
                r->bad = 1;
                continue;
            }
            n->inputs[i] = t;
        }
        for (int i = 0; i < op->ninputs; i++)
            if (!op->inputs[i].optional && n->inputs[i] < 0 && !(i < given && !fg_ynode_is_null(ins->items[i]))) {
                fg_diag_error(L->ctx, FG_ERR_INPUT, i < given ? ins->items[i]->loc : ins->loc,
                              "%s '%s' needs input '%s' (input %d)%s", op->name, n->name, op->inputs[i].name, i,
                              i < given ? "" : ": too few inputs");
                r->bad = 1;
            }
    }

    int set[FG_MAX_ATTRS] = {0};
    for (int a = 0; a < op->nattrs; a++)
        n->attrs[a] = op->attrs[a].def;
    if (attrs && !fg_ynode_is_null(attrs) && fg_yexpect(L->ctx, attrs, FG_YNODE_MAP, "attrs")) {
        const char *names[FG_MAX_ATTRS];
        for (int a = 0; a < op->nattrs; a++)
            names[a] = op->attrs[a].name;
        for (int i = 0; i < attrs->n; i++) {
            const fg_ynode *k = FG_YKEY(attrs, i), *v = FG_YVAL(attrs, i);
            int a = -1;
            for (int j = 0; j < op->nattrs && a < 0 && k->kind == FG_YNODE_SCALAR; j++)
                if (strcmp(k->str, names[j]) == 0)
                    a = j;
            if (a < 0) {
                const char *sug = k->kind == FG_YNODE_SCALAR ? fg_suggest(k->str, names, op->nattrs) : NULL;
                fg_diag_error(L->ctx, FG_ERR_INPUT, k->loc, "unknown attribute '%s' for %s%s%s%s",
                              k->kind == FG_YNODE_SCALAR ? k->str : "?", op->name, sug ? " (did you mean '" : "",
                              sug ? sug : "", sug ? "'?)" : "");
                r->bad = 1;
                continue;
            }
            if (set[a]) {
                fg_diag_error(L->ctx, FG_ERR_INPUT, k->loc, "attribute '%s' given twice", k->str);
                r->bad = 1;
                continue;
            }
            set[a] = 1;
            snprintf(what, sizeof what, "attribute '%s' of %s", names[a], op->name);
            if (!fg_attr_parse(L->ctx, v, op->attrs[a].type, op->attrs[a].lens, what, &n->attrs[a])) {
                r->bad = 1;
                continue;
            }
            if (op->attrs[a].type == FG_ATTR_FLOAT && n->attrs[a].type == FG_ATTR_FLOAT)
                n->attrs[a].i = (int64_t)n->attrs[a].f;
        }
    }
    for (int a = 0; a < op->nattrs; a++)
        if (op->attrs[a].required && !set[a]) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, n->loc, "%s '%s' needs attribute '%s' (%s, no default)", op->name,
                          n->name, op->attrs[a].name, fg_attr_type_name(op->attrs[a].type));
            r->bad = 1;
        }
}

/* A node whose kind has a mode no kernel computes (batch_norm's `training`:
 * batch statistics) is refused at the node (or its attribute's value)
 * instead of running in the mode kernels do compute. */
static void check_mode(loader *L, raw_node *r)
{
    const fg_node *n = &r->node;
    const char *mode = n->op ? fg_kind(n->op->kind)->mode_attr : NULL;
    if (!mode)
        return;
    for (int a = 0; a < n->op->nattrs; a++) {
        if (strcmp(n->op->attrs[a].name, mode) != 0 || fg_attr_number(&n->attrs[a]) == 0)
            continue;
        const fg_ynode *am = fg_ymap_get(r->map, "attrs"), *v = NULL;
        if (am && am->kind == FG_YNODE_MAP)
            v = fg_ymap_get(am, mode);
        fg_diag_error(L->ctx, FG_ERR_INPUT, v ? v->loc : n->loc, "%s '%s': %s", n->op->name, n->name,
                      fg_kind(n->op->kind)->mode_refused);
        r->bad = 1;
    }
}

/* A binary min-heap of raw node indices (file order among ready nodes). */
static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n)
{
    int top = h[0];
    h[0] = h[--(*n)];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m])
            m = l;
        if (r < *n && h[r] < h[m])
            m = r;
        if (m == i)
            break;
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* Sorts L->raw topologically (Kahn; ties by file order) into order[];
 * returns the count sorted.  Nodes on or behind a cycle are left out and
 * one cycle is reported. */
static int topo_sort(loader *L, int *order)
{
    int n = L->nraw, nt = L->g->ntensors, cnt = 0, nheap = 0;
    int *prod = fg_xmalloc(sizeof(int) * (size_t)(nt + 1));
    int *indeg = fg_xcalloc((size_t)n + 1, sizeof(int));
    int *start = fg_xcalloc((size_t)nt + 2, sizeof(int));
    int *heap = fg_xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int t = 0; t < nt; t++)
        prod[t] = -1;
    for (int i = 0; i < n; i++)
        if (L->raw[i].node.output >= 0)
            prod[L->raw[i].node.output] = i;
    /* Consumer lists (CSR by tensor). */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < L->raw[i].node.ninputs; j++) {
            int t = L->raw[i].node.inputs[j];
            if (t >= 0 && prod[t] >= 0) {
                indeg[i]++;
                start[t + 1]++;
            }
        }
    for (int t = 0; t < nt; t++)
        start[t + 1] += start[t];
    int *cons = fg_xmalloc(sizeof(int) * (size_t)(start[nt] + 1));
    int *fill = fg_xcalloc((size_t)nt + 1, sizeof(int));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < L->raw[i].node.ninputs; j++) {
            int t = L->raw[i].node.inputs[j];
            if (t >= 0 && prod[t] >= 0)
                cons[start[t] + fill[t]++] = i;
        }
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0)
            heap_push(heap, &nheap, i);
    while (nheap) {
        int v = heap_pop(heap, &nheap);
        order[cnt++] = v;
        int t = L->raw[v].node.output;
        if (t < 0)
            continue;
        for (int k = start[t]; k < start[t + 1]; k++)
            if (--indeg[cons[k]] == 0)
                heap_push(heap, &nheap, cons[k]);
    }
    if (cnt < n) {
        /* Walk producers among unsorted nodes from the first one until a
         * node repeats: the repeated stretch is a cycle. */
        int *seen = fg_xcalloc((size_t)n + 1, sizeof(int)); /* position in walk + 1 */
        int *walk = fg_xmalloc(sizeof(int) * (size_t)(n + 1));
        int nw = 0, v = 0;
        while (indeg[v] == 0)
            v++;
        while (!seen[v]) {
            seen[v] = ++nw;
            walk[nw - 1] = v;
            int next = -1;
            for (int j = 0; j < L->raw[v].node.ninputs && next < 0; j++) {
                int t = L->raw[v].node.inputs[j];
                if (t >= 0 && prod[t] >= 0 && indeg[prod[t]] > 0)
                    next = prod[t];
            }
            v = next;
        }
        /* walk[seen[v]-1 .. nw) is the cycle, consumers before producers;
         * print it in data-flow order starting at its earliest node. */
        int first = seen[v] - 1, len = nw - first, *cyc = fg_xmalloc(sizeof(int) * (size_t)len), lo = 0;
        for (int k = 0; k < len; k++) {
            cyc[k] = walk[nw - 1 - k];
            if (cyc[k] < cyc[lo])
                lo = k;
        }
        fg_buf b = {0};
        for (int k = 0; k <= len; k++)
            fg_buf_printf(&b, "%s%s", k ? " -> " : "", L->raw[cyc[(lo + k) % len]].node.name);
        fg_diag_error(L->ctx, FG_ERR_INPUT, L->raw[cyc[lo]].node.loc, "cycle in graph: %s", b.s);
        fg_buf_free(&b);
        free(cyc);
        free(seen);
        free(walk);
    }
    free(prod);
    free(indeg);
    free(start);
    free(heap);
    free(cons);
    free(fill);
    return cnt;
}

static void parse_outputs(loader *L, const fg_ynode *seq)
{
    int cap = 0;
    if (!fg_yexpect(L->ctx, seq, FG_YNODE_SEQ, "outputs"))
        return;
    for (int i = 0; i < seq->n; i++) {
        const fg_ynode *v = seq->items[i];
        const char *name;
        if (!fg_yget_name(L->ctx, v, "output", &name))
            continue;
        int t = table_find(L->tensors, name);
        if (t < 0) {
            unknown_tensor(L, v, " in outputs");
            continue;
        }
        if (L->g->tensors[t].is_output) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "output '%s' listed twice", name);
            continue;
        }
        if (L->g->tensors[t].is_input || L->g->tensors[t].is_weight) {
            fg_diag_error(L->ctx, FG_ERR_INPUT, v->loc, "output '%s' is a graph %s; outputs are produced by nodes",
                          name, L->g->tensors[t].is_input ? "input" : "weight");
            continue;
        }
        L->g->tensors[t].is_output = 1;
        *FG_PUSH(L->g->outputs, L->g->noutputs, cap) = t;
    }
}

static fg_status load(fg_context *ctx, const char *file, const char *text, size_t len, const char *path, int dirfd,
                      fg_graph **out)
{
    int errs0 = ctx->nerrors;
    fg_ydoc *doc;
    *out = NULL;
    fg_status st = fg_ydoc_parse(ctx, file, text, len, &doc);
    if (st)
        return st;
    loader L = {0};
    L.ctx = ctx;
    L.dirfd = dirfd;
    L.g = fg_xcalloc(1, sizeof *L.g);
    L.g->path = path ? fg_intern(ctx, path) : NULL;
    const fg_ynode *m = doc->ndocs > 0 ? doc->docs[0] : NULL, *v;
    fg_loc start = {doc->file, 1, 1};
    if (doc->ndocs != 1) {
        fg_diag_error(ctx, FG_ERR_INPUT, doc->ndocs ? doc->docs[1]->loc : start,
                      "a graph file holds exactly one document, found %d", doc->ndocs);
        goto done;
    }
    if (m->kind != FG_YNODE_MAP || !fg_ymap_key(m, "graph")) {
        fg_diag_error(ctx, FG_ERR_INPUT, m->loc, "a graph file must be a mapping with a `graph:` key");
        goto done;
    }
    fg_ycheck_keys(ctx, m, "a graph", graph_keys, (int)FG_COUNTOF(graph_keys));
    const char *name;
    L.g->name = fg_yget_name(ctx, fg_ymap_get(m, "graph"), "graph name", &name) ? fg_intern(ctx, name) : "?";
    int64_t seed;
    if ((v = fg_ymap_get(m, "seed")) && fg_yget_int(ctx, v, "seed", &seed))
        L.g->seed = (uint64_t)seed;
    int e;
    if ((v = fg_ymap_get(m, "dtype")) && (e = parse_enum(ctx, v, "dtype", dtype_name_i, FG_DTYPE_COUNT)) >= 0)
        L.dtype = (fg_dtype)e;
    if ((v = fg_ymap_get(m, "layout")) && (e = parse_enum(ctx, v, "layout", layout_name_i, FG_LAYOUT_COUNT)) >= 0)
        L.layout = (fg_layout)e;
    if ((v = fg_ymap_get(m, "precision")) &&
        (e = parse_enum(ctx, v, "precision", precision_name_i, FG_PRECISION_COUNT)) >= 0)
        L.g->precision = (fg_precision)e;

    if ((v = fg_ymap_get(m, "inputs")))
        parse_inputs(&L, v);
    if ((v = fg_ymap_get(m, "weights")) && !fg_ynode_is_null(v))
        parse_weights(&L, v);
    if (!(v = fg_ymap_get(m, "nodes")))
        fg_diag_error(ctx, FG_ERR_INPUT, fg_ymap_key(m, "graph")->loc, "graph '%s' has no `nodes`", L.g->name);
    else
        parse_node_heads(&L, v);
    for (int i = 0; i < L.nraw; i++) {
        parse_node_body(&L, &L.raw[i]);
        check_mode(&L, &L.raw[i]);
    }
    if (!(v = fg_ymap_get(m, "outputs")))
        fg_diag_error(ctx, FG_ERR_INPUT, fg_ymap_key(m, "graph")->loc, "graph '%s' has no `outputs`", L.g->name);
    else
        parse_outputs(&L, v);

    int *order = fg_xmalloc(sizeof(int) * (size_t)(L.nraw + 1));
    int nsorted = topo_sort(&L, order);
    L.g->nodes = fg_xcalloc((size_t)L.nraw + 1, sizeof *L.g->nodes);
    L.g->nodes_cap = L.nraw + 1;
    for (int i = 0; i < nsorted; i++)
        L.g->nodes[L.g->nnodes++] = L.raw[order[i]].node;
    if (nsorted == L.nraw) {
        /* Shape inference in topological order; a bad node makes its output
         * unknown so that nothing downstream reports a follow-on error. */
        for (int i = 0; i < nsorted; i++) {
            const raw_node *r = &L.raw[order[i]];
            fg_tensor *t = &L.g->tensors[r->node.output >= 0 ? r->node.output : 0];
            if (r->bad || !r->node.op) {
                if (r->node.output >= 0)
                    t->rank = -1;
                continue;
            }
            fg_kind_infer_shape(ctx, L.g, i);
            t->loc = r->node.loc;
        }
    }
    free(order);
    for (int i = 0; i < L.nwinit; i++)
        generate(&L, &L.winit[i]);
    fg_graph_recount(L.g);
    for (int i = 0; i < L.g->ntensors; i++) {
        const fg_tensor *t = &L.g->tensors[i];
        if (t->is_weight && t->nconsumers == 0)
            fg_diag_warn(ctx, t->loc, "weight '%s' is not used by any node", t->name);
    }

done:
    close_weight_files(&L);
    table_free(&L.tensors);
    table_free(&L.nodes);
    free(L.winit);
    free(L.raw);
    fg_ydoc_free(doc);
    if (ctx->nerrors != errs0) {
        fg_graph_free(L.g);
        return FG_ERR_INPUT;
    }
    *out = L.g;
    return FG_OK;
}

/* A load's arguments, for the guard (oom.h). */
typedef struct graph_call {
    fg_context *ctx;
    const char *name, *text;
    size_t len;
    fg_graph **out;
} graph_call;

static fg_status parse_body(void *arg)
{
    graph_call *c = arg;
    return load(c->ctx, c->name, c->text, c->len, NULL, -1, c->out);
}

/* fg_graph_load's work, under the guard: the graph's directory and then the
 * file in it are opened once; the file is recognised and read from its
 * descriptor, and weight files are opened beneath the directory's.  The
 * descriptors are closed if loading unwinds. */
static fg_status file_body(void *arg)
{
    graph_call *c = arg;
    fg_context *ctx = c->ctx;
    const char *path = c->name;
    size_t len;
    char why[300];
    int dirfd, fd = fg_open_beside(path, &dirfd, NULL, why, sizeof why);
    if (fd < 0)
        return fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, path), 0, 0}, "cannot read graph: %s", why);
    fg_oom_defer_close(dirfd);
    fg_oom_defer_close(fd);
    unsigned char head[2];
    int onnx = ends_with(path, ".onnx") || (pread(fd, head, 2, 0) == 2 && fg_onnx_is_model_data(head, 2));
    char *text = fg_read_fd(fd, onnx ? FG_ONNX_FILE_MAX : FG_GRAPH_FILE_MAX, &len, why, sizeof why);
    fg_oom_close(fd);
    fg_status st;
    if (!text)
        st = fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, path), 0, 0}, "cannot read %s: %s",
                           onnx ? "model" : "graph", why);
    else if (onnx)   /* .onnx, or ONNX content (onnx_decode.c) */
        st = fg_onnx_load_at(ctx, path, text, len, dirfd, NULL, c->out);
    else
        st = load(ctx, path, text, len, path, dirfd, c->out);
    free(text);
    fg_oom_close(dirfd);
    return st;
}

/* Runs a body under the guard; a graph that ran out of memory is not handed out. */
static fg_status guarded(graph_call *c, fg_oom_body_fn body)
{
    fg_status st = fg_oom_guard(c->ctx, (fg_loc){fg_intern(c->ctx, c->name), 0, 0}, "loading the graph", body, NULL, c);
    if (st == FG_ERR_NOMEM)
        *c->out = NULL;
    return st;
}

FG_API fg_status fg_graph_parse(fg_context *ctx, const char *name, const char *text, size_t len, fg_graph **out)
{
    if (text && fg_onnx_is_model_data(text, len))   /* a serialized ONNX model (onnx_decode.c) */
        return fg_graph_load_onnx_memory(ctx, name, text, len, NULL, out);
    graph_call c = {ctx, name ? name : "<graph>", text, len, out};
    return guarded(&c, parse_body);
}

FG_API fg_status fg_graph_load(fg_context *ctx, const char *path, fg_graph **out)
{
    *out = NULL;
    if (!ctx || !path)
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_graph_load: NULL argument") : FG_ERR_INPUT;
    graph_call c = {ctx, path, NULL, 0, out};
    return guarded(&c, file_body);
}
