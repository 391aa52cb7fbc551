/*
 * exec.c -- the plan executor, written once for every backend (backend.h):
 * compiles a plan's kernels through the kernel cache, places its tensors
 * (bound inputs/outputs, a weight block, an intermediate arena reused by
 * liveness) and launches the kernels in order, optionally through a launch
 * graph captured once and replayed (backends that have them: CUDA graphs).
 * On backends whose memory is host memory (emulation) the guard zones behind
 * every buffer are checked after each kernel and host bindings are used
 * directly; elsewhere fg_exec_run_host stages them through device buffers.
 * Public entry points: fg_plan_compile, fg_exec_* (see fusegen.h, exec.h).
 */
#include "exec.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "concat_inplace.h"
#include "context.h"
#include "kcache.h"
#include "oom.h"
#include "tensor_convert.h"

#define GUARD_BYTE 0xA5

/* A kernel's tensor map as last encoded: the 128 bytes the backend made
 * over base (the tensor's address then).  A run whose tensor sits at the
 * same address takes the bytes as they are, so a map is encoded once per
 * plan and binding, not at every launch. */
typedef struct tmap_slot {
    unsigned char bytes[128];
    uint64_t base;
    int valid;
} tmap_slot;

struct fg_exec {
    fg_context *ctx;
    const fg_plan *plan;
    const fg_graph *g;              /* plan->graph */
    const fg_backend *be;
    fg_compile_options opts;
    pthread_mutex_t run_lock;

    int nkernels;
    fg_kernel *kernels;
    double *kernel_ms;
    double total_ms;

    /* per plan-graph tensor */
    fg_exec_place *place;
    size_t *offset;
    size_t *bytes;
    int *first, *last;              /* arena tensors: live from kernel first to kernel last */
    int *root;                      /* views (FG_PLACE_VIEW): the tensor whose storage holds them */
    int *inputs, ninputs;           /* graph inputs / outputs: plan-graph tensor indices */
    int *outputs, noutputs;
    uint64_t *bound;                /* per tensor: the address bound for this run */

    size_t weight_bytes, arena_bytes, inter_bytes;
    uint64_t weights, arena;        /* device addresses (host pointers in emulation); 0: none */
    size_t workspace_bytes;         /* the largest FG_KPARAM_WORKSPACE of the kernels (one at a time) */
    uint64_t workspace;             /* split-K partial sums; 0: none */
    size_t counters_bytes;          /* the largest FG_KPARAM_COUNTERS */
    uint64_t counters;              /* zeroed once; every kernel leaves its counters at zero; 0: none */

    void *stream;                   /* the exec's own stream (NULL in emulation) */
    void **events;                  /* nkernels + 1, for timing */
    void *graph;                    /* the captured launch graph, replayed while the bindings stay */
    uint64_t *graph_bound;          /* bound addresses the graph was captured with */
    void *graph_stream;
    uint64_t *io;                   /* run_host staging on device memory: per input, then output */
    tmap_slot (*tmapc)[FG_MAX_TMAPS]; /* per kernel: its tensor maps as last encoded */
    uint64_t tmap_encodes;          /* tensor maps the backend encoded, all runs together */
};

/* ---- arena -------------------------------------------------------------- */

static size_t align_up(size_t n) { return (n + FG_EXEC_ALIGN - 1) / FG_EXEC_ALIGN * FG_EXEC_ALIGN; }

/* First hole that fits, else the top.  Sizes are rounded to FG_EXEC_ALIGN. */
size_t fg_arena_alloc(fg_arena *a, size_t bytes)
{
    bytes = align_up(bytes ? bytes : 1);
    for (int i = 0; i < a->n; i++) {
        if (a->size[i] >= bytes) {
            size_t off = a->off[i];
            a->off[i] += bytes;
            a->size[i] -= bytes;
            if (!a->size[i]) {
                memmove(&a->off[i], &a->off[i + 1], (size_t)(a->n - i - 1) * sizeof *a->off);
                memmove(&a->size[i], &a->size[i + 1], (size_t)(a->n - i - 1) * sizeof *a->size);
                a->n--;
            }
            return off;
        }
    }
    /* A hole ending at the top grows instead of starting a new block. */
    if (a->n && a->off[a->n - 1] + a->size[a->n - 1] == a->top) {
        size_t off = a->off[--a->n];
        a->top = off + bytes;
        if (a->top > a->peak)
            a->peak = a->top;
        return off;
    }
    size_t off = a->top;
    a->top += bytes;
    if (a->top > a->peak)
        a->peak = a->top;
    return off;
}

/* Returns [off, off+bytes) to the free list, merging with neighbours; a hole
 * reaching the top lowers the top. */
void fg_arena_release(fg_arena *a, size_t off, size_t bytes)
{
    bytes = align_up(bytes ? bytes : 1);
    int i = 0;
    while (i < a->n && a->off[i] < off)
        i++;
    if (a->n + 1 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->off = fg_xrealloc(a->off, (size_t)a->cap * sizeof *a->off);
        a->size = fg_xrealloc(a->size, (size_t)a->cap * sizeof *a->size);
    }
    memmove(&a->off[i + 1], &a->off[i], (size_t)(a->n - i) * sizeof *a->off);
    memmove(&a->size[i + 1], &a->size[i], (size_t)(a->n - i) * sizeof *a->size);
    a->off[i] = off;
    a->size[i] = bytes;
    a->n++;
    if (i + 1 < a->n && a->off[i] + a->size[i] == a->off[i + 1]) {
        a->size[i] += a->size[i + 1];
        memmove(&a->off[i + 1], &a->off[i + 2], (size_t)(a->n - i - 2) * sizeof *a->off);
        memmove(&a->size[i + 1], &a->size[i + 2], (size_t)(a->n - i - 2) * sizeof *a->size);
        a->n--;
    }
    if (i > 0 && a->off[i - 1] + a->size[i - 1] == a->off[i]) {
        a->size[i - 1] += a->size[i];
        memmove(&a->off[i], &a->off[i + 1], (size_t)(a->n - i - 1) * sizeof *a->off);
        memmove(&a->size[i], &a->size[i + 1], (size_t)(a->n - i - 1) * sizeof *a->size);
        a->n--;
    }
    if (a->n && a->off[a->n - 1] + a->size[a->n - 1] == a->top) {
        a->top = a->off[a->n - 1];
        a->n--;
    }
}

void fg_arena_free(fg_arena *a)
{
    free(a->off);
    free(a->size);
    memset(a, 0, sizeof *a);
}

/* ---- placement ---------------------------------------------------------- */

/* Storage bytes of a tensor into *out; -1 when the size does not fit. */
static int tensor_bytes(const fg_tensor *t, size_t *out)
{
    int64_t n = fg_tensor_numel(t);
    size_t es = fg_dtype_size(t->dtype);
    if (n < 0 || !es || (uint64_t)n > (SIZE_MAX - 2 * FG_EXEC_ALIGN - FG_EXEC_GUARD) / es)
        return -1;
    *out = (size_t)n * es;
    return 0;
}

/* *acc += n, or -1 when the sum overflows. */
static int add_size(size_t *acc, size_t n)
{
    if (n > SIZE_MAX - *acc)
        return -1;
    *acc += n;
    return 0;
}

static fg_status too_large(fg_exec *e, const fg_tensor *t)
{
    return fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "tensor '%s' is too large to place in memory", t->name);
}

/* Layout a weight is stored in: the tensor's own.  Conv weights [K,C/g,R,S]
 * of an NHWC graph are thus stored K,R,S,C/g (channels innermost), which is
 * what the NHWC conv templates read. */
static fg_layout weight_layout(const fg_tensor *t) { return t->layout; }

/* Views: the concat inputs the plan writes in place (concat_inplace.h) are
 * FG_PLACE_VIEW, with their root (the tensor stored on its own that holds
 * them, through nested concats) and their byte offset in it.  A view never
 * has storage, a guard zone or a lifetime of its own: the root's covers it. */
static fg_status place_views(fg_exec *e)
{
    const fg_graph *g = e->g;
    for (int t = 0; t < g->ntensors; t++) {
        int64_t off = 0, step = 0;
        int root = t, parent, depth = 0;
        while ((parent = fg_concat_view_parent(e->plan, root, &step)) >= 0 && depth++ <= g->ntensors) {
            off += step;
            root = parent;
        }
        if (root == t)
            continue;
        if (parent >= 0)
            root = -1;   /* a cycle of views */
        if (root < 0 || root >= g->ntensors || e->place[t] != FG_PLACE_NONE || off < 0 ||
            e->place[root] == FG_PLACE_INPUT || e->place[root] == FG_PLACE_WEIGHT)
            return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC,
                                 "tensor '%s' is written in place inside a tensor that cannot hold it", g->tensors[t].name);
        e->place[t] = FG_PLACE_VIEW;
        e->root[t] = root;
        e->offset[t] = (size_t)off;
        if (tensor_bytes(&g->tensors[t], &e->bytes[t]) != 0 || tensor_bytes(&g->tensors[root], &e->bytes[root]) != 0)
            return too_large(e, &g->tensors[t]);
        if (e->offset[t] + e->bytes[t] > e->bytes[root])
            return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC, "view '%s' (%zu bytes at %zu) overruns '%s'",
                                 g->tensors[t].name, e->bytes[t], e->offset[t], g->tensors[root].name);
        if (e->place[root] == FG_PLACE_NONE)
            e->place[root] = FG_PLACE_ARENA;
    }
    return FG_OK;
}

/* Classifies every tensor the kernels touch and places weights and
 * intermediates.  Intermediates are live from their first write to their last
 * reference; a kernel's outputs are placed before its dead inputs are freed.
 * A view counts as its root: the root is live from the first write into it
 * to the last read of it or of any view inside it. */
static fg_status place_tensors(fg_exec *e)
{
    fg_context *ctx = e->ctx;
    const fg_graph *g = e->g;
    int nt = g->ntensors;
    int *first = e->first, *last = e->last;
    for (int t = 0; t < nt; t++)
        first[t] = last[t] = -1;
    fg_status st = FG_OK;

    for (int i = 0; i < g->ninputs; i++)
        e->place[g->inputs[i]] = FG_PLACE_INPUT;
    for (int i = 0; i < g->noutputs; i++)
        if (e->place[g->outputs[i]] == FG_PLACE_NONE)
            e->place[g->outputs[i]] = FG_PLACE_OUTPUT;
    st = place_views(e);
    for (int k = 0; k < e->nkernels && !st; k++) {
        const fg_kernel *K = &e->kernels[k];
        for (int j = 0; j < K->nparams; j++) {
            const fg_kparam *p = &K->params[j];
            if (p->kind == FG_KPARAM_WORKSPACE && p->value > 0 && (uint64_t)p->value > e->workspace_bytes)
                e->workspace_bytes = (size_t)p->value;
            if (p->kind == FG_KPARAM_COUNTERS && p->value > 0 && (uint64_t)p->value > e->counters_bytes)
                e->counters_bytes = (size_t)p->value;
            if (p->kind != FG_KPARAM_TENSOR)
                continue;
            if (p->tensor < 0 || p->tensor >= nt) {
                st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s: parameter %s names tensor %d of %d",
                                   K->name, p->name, p->tensor, nt);
                break;
            }
            const fg_tensor *t = &g->tensors[p->tensor];
            if (tensor_bytes(t, &e->bytes[p->tensor]) != 0) {
                st = too_large(e, t);
                break;
            }
            if (p->writes && (t->is_input || t->is_weight)) {
                st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s writes %s tensor '%s'", K->name,
                                   t->is_input ? "input" : "weight", t->name);
                break;
            }
            if (e->place[p->tensor] == FG_PLACE_NONE)
                e->place[p->tensor] = t->is_weight ? FG_PLACE_WEIGHT : FG_PLACE_ARENA;
            int lt = e->place[p->tensor] == FG_PLACE_VIEW ? e->root[p->tensor] : p->tensor;
            if (e->place[lt] == FG_PLACE_ARENA) {
                if (first[lt] < 0) {
                    if (!p->writes) {
                        st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                                           "kernel %s reads tensor '%s' before any kernel writes it", K->name, t->name);
                        break;
                    }
                    first[lt] = k;
                }
                last[lt] = k;
            }
        }
    }
    for (int i = 0; i < g->noutputs && !st; i++)
        if (tensor_bytes(&g->tensors[g->outputs[i]], &e->bytes[g->outputs[i]]) != 0)
            st = too_large(e, &g->tensors[g->outputs[i]]);
    for (int i = 0; i < g->ninputs && !st; i++)
        if (tensor_bytes(&g->tensors[g->inputs[i]], &e->bytes[g->inputs[i]]) != 0)
            st = too_large(e, &g->tensors[g->inputs[i]]);

    /* Weights: one block, each followed by a guard zone. */
    size_t wtop = 0;
    for (int t = 0; t < nt && !st; t++) {
        if (e->place[t] != FG_PLACE_WEIGHT)
            continue;
        if (!g->tensors[t].data) {
            st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "weight '%s' has no data", g->tensors[t].name);
            break;
        }
        e->offset[t] = wtop;
        if (add_size(&wtop, align_up(e->bytes[t] + FG_EXEC_GUARD)) != 0)
            st = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "the weights of the plan are too large to place in memory");
    }
    e->weight_bytes = wtop;

    /* Intermediates: first fit by liveness. */
    fg_arena a = {0};
    for (int k = 0; k < e->nkernels && !st; k++) {
        for (int t = 0; t < nt && !st; t++)
            if (e->place[t] == FG_PLACE_ARENA && first[t] == k) {
                e->offset[t] = fg_arena_alloc(&a, e->bytes[t] + FG_EXEC_GUARD);
                if (add_size(&e->inter_bytes, align_up(e->bytes[t] + FG_EXEC_GUARD)) != 0)
                    st = fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC,
                                       "the intermediates of the plan are too large to place in memory");
            }
        for (int t = 0; t < nt; t++)
            if (e->place[t] == FG_PLACE_ARENA && last[t] == k)
                fg_arena_release(&a, e->offset[t], e->bytes[t] + FG_EXEC_GUARD);
    }
    e->arena_bytes = a.peak;
    fg_arena_free(&a);
    return st;
}

/* ---- guard zones (host memory) -------------------------------------------- */

/* Base of tensor t's block when it has a guard zone live at kernel k: weights
 * always; arena tensors only from their first writer to their last reader
 * (outside that range their memory belongs to other tensors).  k = -1 asks
 * for weights only. */
static unsigned char *guarded_base(const fg_exec *e, int t, int k)
{
    if (e->place[t] == FG_PLACE_WEIGHT)
        return (unsigned char *)(uintptr_t)e->weights;
    if (e->place[t] == FG_PLACE_ARENA && e->first[t] <= k && k <= e->last[t])
        return (unsigned char *)(uintptr_t)e->arena;
    return NULL;
}

/* Fills the guard zones that become live at kernel k (k = -1: the weights'). */
static void guards_fill(fg_exec *e, int k)
{
    for (int t = 0; t < e->g->ntensors; t++) {
        unsigned char *base = guarded_base(e, t, k);
        if (base && (k < 0 ? e->place[t] == FG_PLACE_WEIGHT : e->first[t] == k))
            memset(base + e->offset[t] + e->bytes[t], GUARD_BYTE, FG_EXEC_GUARD);
    }
}

/* After kernel k: every guard zone live at k must be intact. */
static fg_status guards_check(fg_exec *e, int k)
{
    for (int t = 0; t < e->g->ntensors; t++) {
        const unsigned char *base = guarded_base(e, t, k);
        if (!base)
            continue;
        const unsigned char *z = base + e->offset[t] + e->bytes[t];
        for (int i = 0; i < FG_EXEC_GUARD; i++)
            if (z[i] != GUARD_BYTE)
                return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC,
                                     "kernel %s wrote past the end of tensor '%s' (%zu bytes; guard byte %d changed)",
                                     e->kernels[k].name, e->g->tensors[t].name, e->bytes[t], i);
    }
    return FG_OK;
}

/* ---- compile ------------------------------------------------------------ */

static pthread_mutex_t emit_lock = PTHREAD_MUTEX_INITIALIZER;

/* The largest tensor placed as place (FG_PLACE_WEIGHT, FG_PLACE_ARENA), or -1. */
static int largest(const fg_exec *e, fg_exec_place place)
{
    int big = -1;
    for (int t = 0; t < e->g->ntensors; t++)
        if (e->place[t] == place && (big < 0 || e->bytes[t] > e->bytes[big]))
            big = t;
    return big;
}

/* Where an out-of-memory error about tensor big (-1: none) is located: its
 * declaration, else the graph's file. */
static fg_loc big_loc(const fg_exec *e, int big)
{
    if (big >= 0 && e->g->tensors[big].loc.file)
        return e->g->tensors[big].loc;
    return (fg_loc){e->g->path, 0, 0};
}

/* be->alloc of one of the exec's blocks (what) holding tensor big (-1:
 * none) among others: an out-of-memory error is located at big and names
 * it and its size. */
static fg_status block_alloc(fg_exec *e, size_t bytes, const char *what, int big, uint64_t *addr)
{
    char desc[300];
    if (big >= 0)
        snprintf(desc, sizeof desc, "%s (the largest: tensor '%s', %zu bytes)", what,
                 fg_tensor_user_name(&e->g->tensors[big]), e->bytes[big]);
    else
        snprintf(desc, sizeof desc, "%s", what);
    return e->be->alloc(e->ctx, bytes, desc, big_loc(e, big), addr);
}

/* Zeroed host memory sized by the plan's tensors, checked: NULL after an
 * out-of-memory error located as block_alloc's.  Tracked under the guard
 * (fg_oom_adopt), so a call that unwinds later frees it. */
static void *host_block(fg_exec *e, size_t bytes, const char *what, int big)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fg_diag_error(e->ctx, FG_ERR_NOMEM, big_loc(e, big), "out of host memory: %zu bytes for %s%s%s%s", bytes,
                      what, big >= 0 ? " (the largest: tensor '" : "",
                      big >= 0 ? fg_tensor_user_name(&e->g->tensors[big]) : "", big >= 0 ? "')" : "");
        return NULL;
    }
    fg_oom_adopt(p);
    return p;
}

/* Converts the folded weights to their dtype and layout into the weight
 * block (packed in place when device memory is host memory), and allocates
 * the arena and the split-K buffers (checked: block_alloc, host_block). */
static fg_status load_weights(fg_exec *e)
{
    const fg_backend *be = e->be;
    fg_context *ctx = e->ctx;
    const fg_graph *g = e->g;
    fg_status st = FG_OK;
    if (e->weight_bytes)
        st = block_alloc(e, e->weight_bytes, "the weights", largest(e, FG_PLACE_WEIGHT), &e->weights);
    if (!st && e->arena_bytes)
        st = block_alloc(e, e->arena_bytes, "the intermediates", largest(e, FG_PLACE_ARENA), &e->arena);
    if (!st && e->workspace_bytes)   /* split-K partial sums: written before they are read */
        st = block_alloc(e, e->workspace_bytes, "the split-K workspace", -1, &e->workspace);
    if (!st && e->counters_bytes) {   /* split-K tile counters: zeroed once, left at zero by every kernel */
        st = block_alloc(e, e->counters_bytes, "the split-K counters", -1, &e->counters);
        void *zeros = st ? NULL : host_block(e, e->counters_bytes, "zeroing the split-K counters", -1);
        if (!st && !zeros)
            st = FG_ERR_NOMEM;
        if (!st)
            st = be->upload(ctx, e->counters, zeros, e->counters_bytes, NULL);
        free(zeros);
    }
    if (st || !e->weight_bytes)
        return st;
    char *host = be->host_memory ? (char *)(uintptr_t)e->weights
                                 : host_block(e, e->weight_bytes, "staging the weights", largest(e, FG_PLACE_WEIGHT));
    if (!host)
        return FG_ERR_NOMEM;
    float *vals = NULL;
    size_t cap = 0;
    for (int t = 0; t < g->ntensors && !st; t++) {
        if (e->place[t] != FG_PLACE_WEIGHT)
            continue;
        /* The values, with a fold's pending scale applied (BN folded into W). */
        const fg_tensor *w = &g->tensors[t];
        const float *v = w->data;
        if (w->scale) {
            size_t n = (size_t)fg_tensor_numel(w);
            if (n > cap) {
                float *nv = realloc(vals, n * sizeof *vals);   /* fg_realloc: tracked under the guard */
                if (!nv) {
                    st = fg_diag_error(ctx, FG_ERR_NOMEM, w->loc.file ? w->loc : (fg_loc){g->path, 0, 0},
                                       "out of host memory: %zu bytes scaling weight '%s'", n * sizeof *vals,
                                       fg_tensor_user_name(w));
                    break;
                }
                vals = nv;
                cap = n;
            }
            fg_tensor_values(w, vals);
            v = vals;
        }
        fg_tensor_pack_f32(w, weight_layout(w), v, host + e->offset[t]);
    }
    free(vals);
    if (!be->host_memory) {
        if (!st)
            st = be->upload(ctx, e->weights, host, e->weight_bytes, NULL);
        free(host);
    }
    return st;
}

/* Loads every kernel and makes the exec's stream and timing events.  Held
 * (codegen/oom.h): the backend's own state (the driver's modules, the
 * emulator's dlopen'ed copies and their locks) is never unwound through;
 * what it made hangs off the exec, which the unwinding call frees. */
static fg_status load_kernels(fg_exec *e)
{
    const fg_backend *be = e->be;
    fg_status st = FG_OK;
    fg_oom_hold();
    for (int k = 0; k < e->nkernels && !st; k++)
        st = be->load(e->ctx, &e->kernels[k]);
    if (!st)
        st = be->stream_new(e->ctx, &e->stream);
    for (int k = 0; k <= e->nkernels && !st; k++)
        st = be->event_new(e->ctx, &e->events[k]);
    fg_oom_release();
    return st;
}

/* Per-tensor and per-kernel arrays of a new exec. */
static void exec_arrays(fg_exec *e)
{
    const fg_graph *g = e->g;
    size_t nt = (size_t)g->ntensors + 1;
    e->place = fg_xcalloc(nt, sizeof *e->place);
    e->offset = fg_xcalloc(nt, sizeof *e->offset);
    e->bytes = fg_xcalloc(nt, sizeof *e->bytes);
    e->first = fg_xcalloc(nt, sizeof *e->first);
    e->last = fg_xcalloc(nt, sizeof *e->last);
    e->root = fg_xcalloc(nt, sizeof *e->root);
    e->bound = fg_xcalloc(nt, sizeof *e->bound);
    e->graph_bound = fg_xcalloc(nt, sizeof *e->graph_bound);
    e->ninputs = g->ninputs;
    e->inputs = fg_xcalloc((size_t)g->ninputs + 1, sizeof *e->inputs);
    if (g->ninputs)
        memcpy(e->inputs, g->inputs, (size_t)g->ninputs * sizeof *e->inputs);
    e->noutputs = g->noutputs;
    e->outputs = fg_xcalloc((size_t)g->noutputs + 1, sizeof *e->outputs);
    if (g->noutputs)
        memcpy(e->outputs, g->outputs, (size_t)g->noutputs * sizeof *e->outputs);
    e->nkernels = e->plan->ngroups;
    e->kernels = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->kernels);
    e->kernel_ms = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->kernel_ms);
    e->events = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->events);
    e->tmapc = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->tmapc);
    for (int k = 0; k < e->nkernels; k++)
        e->kernel_ms[k] = -1;
}

/* be->open, held (codegen/oom.h): the driver is loaded and its context made
 * under the backend's own locks. */
static fg_status backend_open(fg_exec *e)
{
    fg_oom_hold();
    fg_status st = e->be->open(e->ctx);
    fg_oom_release();
    return st;
}

/* fg_oom_defer's cleanups: the exec under construction, the emission lock. */
static void exec_unwind(void *e) { fg_exec_free(e); }
static void unlock_cb(void *m) { pthread_mutex_unlock(m); }

/* Emits every group of the plan into e->kernels.  Emission may run Lua
 * hooks, which share the context's one Lua state, hence the lock; it is
 * released by a deferred cleanup if emission unwinds.  Each kernel is
 * emitted into a staging record and only then moved into the exec, so that
 * the exec's kernels are whole whenever it is freed. */
static fg_status emit_all(fg_exec *e)
{
    fg_emit_opts eo = {.specialize = !e->opts.shape_params};
    fg_kernel *k1 = fg_xcalloc(1, sizeof *k1);
    fg_status st = FG_OK;
    pthread_mutex_lock(&emit_lock);
    fg_oom_defer(unlock_cb, &emit_lock);
    for (int k = 0; k < e->nkernels && !st; k++) {
        st = fg_emit_group(e->ctx, e->plan, k, &eo, k1);
        if (st)
            fg_kernel_free(k1);
        else
            e->kernels[k] = *k1;
        memset(k1, 0, sizeof *k1);
    }
    fg_oom_undefer(&emit_lock);
    pthread_mutex_unlock(&emit_lock);
    free(k1);
    return st;
}

typedef struct compile_call {
    fg_context *ctx;
    const fg_plan *p;
    const fg_backend *be;
    const fg_compile_options *co;
    fg_exec **out;
} compile_call;

/* fg_plan_compile's work, under the out-of-memory guard (codegen/oom.h).
 * The exec is registered for freeing (fg_exec_free, which also releases the
 * backend memory and loaded kernels that the guard does not track) from the
 * moment it exists until it is handed out.  Obtaining the binaries (the
 * kernel cache in memory and on disk, the remote tier, NVRTC or the host
 * compiler, the worker threads) and loading them run held. */
static fg_status compile_body(void *arg)
{
    compile_call *c = arg;
    const fg_backend *be = c->be;
    fg_exec *e = fg_xcalloc(1, sizeof *e);
    e->ctx = c->ctx;
    e->plan = c->p;
    e->g = c->p->graph;
    e->be = be;
    e->opts = *c->co;
    e->opts.device = be->device;
    e->total_ms = -1;
    pthread_mutex_init(&e->run_lock, NULL);
    fg_oom_defer(exec_unwind, e);
    exec_arrays(e);

    fg_status st = backend_open(e);
    if (!st)
        st = emit_all(e);
    if (!st) {
        fg_oom_hold();
        st = fg_kernel_obtain_all(c->ctx, be, e->kernels, e->nkernels, NULL, NULL);
        fg_oom_release();
    }
    if (!st)
        st = place_tensors(e);
    if (!st)
        st = load_weights(e);
    if (!st)
        st = load_kernels(e);
    fg_oom_undefer(e);
    if (st) {
        fg_exec_free(e);
        return st;
    }
    *c->out = e;
    return FG_OK;
}

FG_API fg_status fg_plan_compile(fg_context *ctx, const fg_plan *p, const fg_compile_options *o, fg_exec **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return FG_ERR_INPUT;
    if (!out)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_compile: no place for the result (out is NULL)");
    if (!p || !p->graph)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_compile: no plan");
    if (p->ngroups < 0)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_compile: the plan has %d groups", p->ngroups);
    fg_compile_options co;
    memset(&co, 0, sizeof co);
    const size_t v01 = offsetof(fg_compile_options, shape_params);   /* the layout of fusegen 0.1 */
    fg_status st = o ? fg_copy_sized(ctx, "fg_compile_options", &co, sizeof co, o, o->size, v01, v01) : FG_OK;
    if (st)
        return st;
    const fg_backend *be = fg_backend_choose(ctx, co.device);
    if (!be)
        return FG_ERR_INPUT;
    compile_call c = {ctx, p, be, &co, out};
    return fg_oom_guard(ctx, (fg_loc){p->graph->path, 0, 0}, "compiling the plan", compile_body, NULL, &c);
}

FG_API void fg_exec_free(fg_exec *e)
{
    if (!e)
        return;
    /* Teardown: failures are not actionable, so nothing is recorded.  The
     * stream goes first: freeing it waits for its work. */
    const fg_backend *be = e->be;
    if (e->stream)
        be->stream_free(e->stream);
    if (e->graph)
        be->graph_free(e->graph);
    for (int k = 0; e->events && k <= e->nkernels; k++)
        if (e->events[k])
            be->event_free(e->events[k]);
    for (int i = 0; e->io && i < e->ninputs + e->noutputs; i++)
        (be->free)(e->io[i]);
    (be->free)(e->weights);
    (be->free)(e->arena);
    (be->free)(e->workspace);
    (be->free)(e->counters);
    for (int k = 0; e->kernels && k < e->nkernels; k++)
        fg_kernel_free(&e->kernels[k]);   /* releases the loaded kernel too */
    free(e->kernels);
    free(e->kernel_ms);
    free(e->events);
    free(e->tmapc);
    free(e->io);
    free(e->place);
    free(e->offset);
    free(e->first);
    free(e->last);
    free(e->root);
    free(e->bytes);
    free(e->bound);
    free(e->graph_bound);
    free(e->inputs);
    free(e->outputs);
    pthread_mutex_destroy(&e->run_lock);
    free(e);
}

/* ---- run ---------------------------------------------------------------- */

/* Resolves bindings into e->bound; every input and output exactly once. */
static fg_status bind(fg_exec *e, const fg_binding *b, int n)
{
    const fg_graph *g = e->g;
    if (n < 0)
        return fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "negative binding count %d", n);
    if (n > 0 && !b)
        return fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "%d bindings but no binding array", n);
    int nio = e->ninputs + e->noutputs;
    int *seen = fg_xcalloc((size_t)nio + 1, sizeof *seen);
    fg_status st = FG_OK;
    for (int i = 0; i < n && !st; i++) {
        int slot = -1;
        for (int j = 0; j < nio && slot < 0; j++) {
            int t = j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs];
            if (b[i].name && strcmp(b[i].name, fg_tensor_user_name(&g->tensors[t])) == 0)
                slot = j;
        }
        for (int j = 0; j < nio && slot < 0; j++) {   /* the identifier of a renamed tensor also binds it */
            int t = j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs];
            if (b[i].name && strcmp(b[i].name, g->tensors[t].name) == 0)
                slot = j;
        }
        if (slot < 0) {
            const char **names = fg_xmalloc(((size_t)nio + 1) * sizeof *names);
            for (int j = 0; j < nio; j++)
                names[j] = fg_tensor_user_name(&g->tensors[j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs]]);
            const char *s = b[i].name ? fg_suggest(b[i].name, names, nio) : NULL;
            st = fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "binding '%s' is not a graph input or output%s%s%s",
                               b[i].name ? b[i].name : "(null)", s ? " (did you mean '" : "", s ? s : "",
                               s ? "'?)" : "");
            free(names);
        } else if (seen[slot]++) {
            st = fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "tensor '%s' is bound twice", b[i].name);
        } else if (!b[i].data) {
            st = fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "binding '%s' has no data pointer", b[i].name);
        } else {
            int t = slot < e->ninputs ? e->inputs[slot] : e->outputs[slot - e->ninputs];
            e->bound[t] = (uint64_t)(uintptr_t)b[i].data;
        }
    }
    for (int j = 0; j < nio && !st; j++)
        if (!seen[j])
            st = fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "graph %s '%s' is not bound",
                               j < e->ninputs ? "input" : "output",
                               g->tensors[j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs]].name);
    free(seen);
    return st;
}

/* Address of tensor t for this run. */
static uint64_t tensor_addr(const fg_exec *e, int t)
{
    switch (e->place[t]) {
    case FG_PLACE_INPUT:
    case FG_PLACE_OUTPUT: return e->bound[t];
    case FG_PLACE_WEIGHT: return e->weights + e->offset[t];
    case FG_PLACE_ARENA: return e->arena + e->offset[t];
    case FG_PLACE_VIEW: return tensor_addr(e, e->root[t]) + e->offset[t];
    default: return 0;
    }
}

/* Room for a kernel's argument bytes: every slot, and tensor maps of 128
 * bytes with their alignment padding. */
#define ARG_WORDS (FG_MAX_KPARAMS + FG_MAX_TMAPS * (FG_TMAP_PARAM_BYTES / 8 + 8) + 8)

fg_tmap_desc fg_exec_tmap_desc(const fg_kparam_tmap *m, uint64_t base)
{
    fg_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.base = base;
    d.elem_bytes = (unsigned)m->elem_bytes;
    d.rank = m->rank >= 1 && m->rank <= FG_KTMAP_MAX_RANK ? (unsigned)m->rank : 0;   /* 0: refused by the backend */
    for (unsigned i = 0; i < d.rank; i++) {
        d.dim[i] = (uint64_t)m->dim[i];
        d.box[i] = (unsigned)m->box[i];
        d.estride[i] = (unsigned)m->estride[i];
        if (i > 0)
            d.stride[i - 1] = (uint64_t)m->stride[i - 1];
    }
    d.swizzle = (fg_tmap_swizzle)m->swizzle;
    return d;
}

/* Lays out kernel k's argument bytes in slots as its params struct
 * (fg_kparam_layout): tensor addresses, the workspace, scalars, and each
 * tensor map over its tensor's address for this run -- the one encoded
 * before when the address is the same (e->tmapc), else encoded now by the
 * backend. */
static fg_status pack_slots(fg_exec *e, int k, uint64_t *slots)
{
    const fg_kernel *K = &e->kernels[k];
    size_t off[FG_MAX_KPARAMS];
    size_t total = fg_kparam_layout(K, off);
    if (total > ARG_WORDS * sizeof *slots || K->ntmaps < 0 || K->ntmaps > FG_MAX_TMAPS)
        return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s: %zu bytes of parameters", K->name, total);
    memset(slots, 0, total);
    for (int j = 0; j < K->nparams; j++) {
        const fg_kparam *p = &K->params[j];
        if (p->kind == FG_KPARAM_TMAP) {
            if (p->value < 0 || p->value >= K->ntmaps || !e->be->tensormap_encode)
                return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s: tensor map %s cannot be encoded "
                                     "on the %s backend", K->name, p->name, e->be->name);
            tmap_slot *ts = &e->tmapc[k][p->value];
            uint64_t base = tensor_addr(e, p->tensor);
            if (!ts->valid || ts->base != base) {
                fg_tmap_desc d = fg_exec_tmap_desc(&K->tmaps[p->value], base);
                _Alignas(64) unsigned char map[sizeof ts->bytes];   /* the backend's contract: 64-byte aligned */
                ts->valid = 0;
                fg_status st = e->be->tensormap_encode(e->ctx, &d, map);
                if (st)
                    return fg_diag_error(e->ctx, st, FG_NOLOC, "kernel %s: the tensor map %s of tensor '%s' (%s)",
                                         K->name, p->name, e->g->tensors[p->tensor].name,
                                         d.base % 16 ? "its address is not 16-byte aligned" : "see above");
                memcpy(ts->bytes, map, sizeof map);
                ts->base = base;
                ts->valid = 1;
                e->tmap_encodes++;
            }
            memcpy((char *)slots + off[j], ts->bytes, sizeof ts->bytes);
            continue;
        }
        uint64_t v = p->kind == FG_KPARAM_TENSOR      ? tensor_addr(e, p->tensor)
                     : p->kind == FG_KPARAM_WORKSPACE ? e->workspace
                     : p->kind == FG_KPARAM_COUNTERS  ? e->counters
                                                      : (uint64_t)p->value;
        memcpy((char *)slots + off[j], &v, sizeof v);
    }
    return FG_OK;
}

/* Launches every kernel on stream s, with an event before each and one at
 * the end when timing; on host memory, guard zones are filled before and
 * checked after each kernel. */
static fg_status launch_all(fg_exec *e, void *s, int timing)
{
    const fg_backend *be = e->be;
    int guards = be->host_memory;
    _Alignas(64) uint64_t slots[ARG_WORDS];
    fg_status st = FG_OK;
    if (guards)
        guards_fill(e, -1);
    for (int k = 0; k < e->nkernels && !st; k++) {
        const fg_kernel *K = &e->kernels[k];
        if (K->nparams < 0 || K->nparams > FG_MAX_KPARAMS)
            return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s has %d parameters (at most %d)", K->name,
                                 K->nparams, FG_MAX_KPARAMS);
        if ((st = pack_slots(e, k, slots)) != FG_OK)
            break;
        if (guards)
            guards_fill(e, k);
        if (timing)
            st = be->event_record(e->ctx, e->events[k], s);
        if (!st)
            st = be->launch(e->ctx, K, slots, s);
        if (!st && guards)
            st = guards_check(e, k);
    }
    if (!st && timing)
        st = be->event_record(e->ctx, e->events[e->nkernels], s);
    return st;
}

/* Launch-graph path: capture once per stream and set of bound addresses,
 * then replay.  A new binding or stream captures the launches again and
 * hands the backend the graph made before, which it updates in place where
 * it can (capture_end). */
static fg_status run_graph(fg_exec *e, void *s)
{
    const fg_backend *be = e->be;
    size_t nb = (size_t)e->g->ntensors * sizeof *e->bound;
    if (!e->graph || e->graph_stream != s || memcmp(e->graph_bound, e->bound, nb) != 0) {
        fg_status st = be->capture_begin(e->ctx, s);
        if (st) {
            be->graph_free(e->graph);
            e->graph = NULL;
            return st;
        }
        fg_status lst = launch_all(e, s, 0);
        st = be->capture_end(e->ctx, s, &e->graph);
        if (lst && !st) {
            be->graph_free(e->graph);
            e->graph = NULL;
        }
        if (lst || st)
            return lst ? lst : st;
        memcpy(e->graph_bound, e->bound, nb);
        e->graph_stream = s;
    }
    return be->graph_launch(e->ctx, e->graph, s);
}

/* One run on stream s, then the times when timing is on (which waits).
 * Held (codegen/oom.h): the launches run in the backend (the driver; the
 * emulator's scheduler, its threads and the dlopen'ed kernels), and a
 * captured launch graph is state of the exec. */
static fg_status run_on_held(fg_exec *e, void *s);

static fg_status run_on(fg_exec *e, void *s)
{
    fg_oom_hold();
    fg_status st = run_on_held(e, s);
    fg_oom_release();
    return st;
}

static fg_status run_on_held(fg_exec *e, void *s)
{
    const fg_backend *be = e->be;
    int timing = e->opts.timing != 0;
    int graph = e->opts.graph_replay && be->graph_launch;
    fg_status st;
    for (int k = 0; k < e->nkernels; k++)
        e->kernel_ms[k] = -1;
    e->total_ms = -1;
    if (graph) {
        st = timing ? be->event_record(e->ctx, e->events[0], s) : FG_OK;
        if (!st)
            st = run_graph(e, s);
        if (!st && timing)
            st = be->event_record(e->ctx, e->events[e->nkernels], s);
    } else {
        st = launch_all(e, s, timing);
    }
    if (st || !timing)
        return st;
    double ms = 0;
    for (int k = 0; k < e->nkernels && !graph && !st; k++) {
        st = be->event_elapsed(e->ctx, e->events[k], e->events[k + 1], &ms);
        e->kernel_ms[k] = ms;
    }
    if (!st)
        st = be->event_elapsed(e->ctx, e->events[0], e->events[e->nkernels], &ms);
    e->total_ms = st ? -1 : ms;
    return st;
}

/* Nonzero for an exec made by fg_plan_compile (the public calls' check). */
static int exec_ok(const fg_exec *e) { return e && e->ctx && e->be; }

typedef struct run_call {
    fg_exec *e;
    const fg_binding *b;
    int n;
    void *stream;
    int host;   /* fg_exec_run_host */
} run_call;

static fg_status run_host_staged(fg_exec *e);

/* One run, under the out-of-memory guard (codegen/oom.h): the run lock is
 * released by a deferred cleanup if the call unwinds; binding is guarded;
 * the launches run held (run_on). */
static fg_status run_body(void *arg)
{
    run_call *c = arg;
    fg_exec *e = c->e;
    pthread_mutex_lock(&e->run_lock);
    fg_oom_defer(unlock_cb, &e->run_lock);
    fg_status st = bind(e, c->b, c->n);
    if (!st)
        st = backend_open(e);
    if (!st)
        st = !c->host ? run_on(e, c->stream ? c->stream : e->stream)
             : e->be->host_memory ? run_on(e, e->stream)
                                  : run_host_staged(e);
    fg_oom_undefer(&e->run_lock);
    pthread_mutex_unlock(&e->run_lock);
    return st;
}

/* fg_exec_run and fg_exec_run_host. */
static fg_status run_guarded(fg_exec *e, const fg_binding *b, int n, void *stream, int host)
{
    if (!exec_ok(e))
        return FG_ERR_INPUT;
    run_call c = {e, b, n, stream, host};
    return fg_oom_guard(e->ctx, (fg_loc){e->g->path, 0, 0}, "running the plan", run_body, NULL, &c);
}

FG_API fg_status fg_exec_run(fg_exec *e, const fg_binding *b, int n, void *stream)
{
    return run_guarded(e, b, n, stream, 0);
}

/* Device memory that is not host memory: stages host data through buffers
 * the exec owns (made on first use), poisoning the outputs (all-ones bytes
 * are NaN in fp32, fp16 and bf16). */
static fg_status run_host_staged(fg_exec *e)
{
    const fg_backend *be = e->be;
    fg_context *ctx = e->ctx;
    int nio = e->ninputs + e->noutputs;
    if (!e->io) {
        fg_oom_hold();   /* the exec's, kept between runs */
        e->io = fg_xcalloc((size_t)nio + 1, sizeof *e->io);
        fg_oom_release();
    }
    void **host = fg_xcalloc((size_t)nio + 1, sizeof *host);
    fg_status st = FG_OK;
    for (int j = 0; j < nio && !st; j++) {
        int t = j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs];
        size_t bytes = e->bytes[t], padded = align_up(bytes);
        host[j] = (void *)(uintptr_t)e->bound[t];
        if (!e->io[j])
            st = block_alloc(e, padded, e->ninputs > j ? "staging an input" : "staging an output", t, &e->io[j]);
        if (!st && j < e->ninputs)
            st = be->upload(ctx, e->io[j], host[j], bytes, e->stream);
        else if (!st)
            st = be->fill(ctx, e->io[j], 0xFFFFFFFFu, padded / 4, e->stream);
        e->bound[t] = e->io[j];
    }
    if (!st)
        st = run_on(e, e->stream);
    for (int j = e->ninputs; j < nio && !st; j++) {
        int t = e->outputs[j - e->ninputs];
        st = be->download(ctx, host[j], e->io[j], e->bytes[t], e->stream);
    }
    if (!st)
        st = be->synchronize(ctx, e->stream);
    free(host);
    return st;
}

FG_API fg_status fg_exec_run_host(fg_exec *e, const fg_binding *b, int n)
{
    return run_guarded(e, b, n, NULL, 1);
}

/* ---- queries ------------------------------------------------------------ */

static fg_status tensor_info(const fg_exec *e, int t, fg_tensor_info *info)
{
    const fg_tensor *x = &e->g->tensors[t];
    memset(info, 0, sizeof *info);
    info->name = fg_tensor_user_name(x);
    info->dtype = x->dtype;
    info->layout = x->layout;
    info->rank = x->model_rank0 ? 0 : x->rank;
    for (int i = 0; i < info->rank && i < 6; i++)
        info->shape[i] = x->shape[i];
    info->float64 = x->model_float64;
    size_t bytes = 0;
    tensor_bytes(x, &bytes);
    info->bytes = bytes;
    return FG_OK;
}

/* Input or output i's info, with the argument checks of the public calls. */
static fg_status io_info(const fg_exec *e, int i, fg_tensor_info *info, int output)
{
    if (!exec_ok(e))
        return FG_ERR_INPUT;
    int n = output ? e->noutputs : e->ninputs;
    const char *what = output ? "output" : "input";
    if (!info)
        return fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "fg_exec_%s_info: info is NULL", what);
    if (i < 0 || i >= n)
        return fg_diag_error(e->ctx, FG_ERR_INPUT, FG_NOLOC, "fg_exec_%s_info: %s %d does not exist (the plan has %d)",
                             what, what, i, n);
    return tensor_info(e, output ? e->outputs[i] : e->inputs[i], info);
}

FG_API fg_device fg_exec_device(const fg_exec *e) { return e && e->be ? e->be->device : FG_DEVICE_AUTO; }
FG_API int fg_exec_input_count(const fg_exec *e) { return e ? e->ninputs : 0; }
FG_API int fg_exec_output_count(const fg_exec *e) { return e ? e->noutputs : 0; }

FG_API fg_status fg_exec_input_info(const fg_exec *e, int i, fg_tensor_info *info) { return io_info(e, i, info, 0); }
FG_API fg_status fg_exec_output_info(const fg_exec *e, int i, fg_tensor_info *info) { return io_info(e, i, info, 1); }

FG_API int fg_exec_kernel_count(const fg_exec *e) { return e ? e->nkernels : 0; }

FG_API const char *fg_exec_kernel_name(const fg_exec *e, int i)
{
    return e && i >= 0 && i < e->nkernels ? e->kernels[i].name : NULL;
}

FG_API const char *fg_exec_kernel_source(const fg_exec *e, int i)
{
    return e && i >= 0 && i < e->nkernels ? e->kernels[i].source : NULL;
}

FG_API const char *fg_exec_kernel_choices(const fg_exec *e, int i)
{
    return e && i >= 0 && i < e->nkernels ? e->kernels[i].choices : NULL;
}

FG_API double fg_exec_kernel_ms(const fg_exec *e, int i)
{
    return e && i >= 0 && i < e->nkernels ? e->kernel_ms[i] : -1;
}

FG_API size_t fg_exec_arena_bytes(const fg_exec *e) { return e ? e->arena_bytes : 0; }

int fg_exec_input_tensor(const fg_exec *e, int i) { return e && i >= 0 && i < e->ninputs ? e->inputs[i] : -1; }
int fg_exec_output_tensor(const fg_exec *e, int i) { return e && i >= 0 && i < e->noutputs ? e->outputs[i] : -1; }

fg_exec_place fg_exec_tensor_place(const fg_exec *e, int t, size_t *offset)
{
    if (!e || t < 0 || t >= e->g->ntensors)
        return FG_PLACE_NONE;
    if (offset)
        *offset = e->offset[t];
    return e->place[t];
}

size_t fg_exec_intermediate_bytes(const fg_exec *e) { return e ? e->inter_bytes : 0; }
double fg_exec_total_ms(const fg_exec *e) { return e ? e->total_ms : -1; }
uint64_t fg_exec_tmap_encodes(const fg_exec *e) { return e ? e->tmap_encodes : 0; }

const fg_kernel *fg_exec_kernel(const fg_exec *e, int i)
{
    return e && i >= 0 && i < e->nkernels ? &e->kernels[i] : NULL;
}
