/*
 * exec.c -- the plan executor: compiles a plan's kernels, places its tensors
 * (bound inputs/outputs, a weight block, an intermediate arena reused by
 * liveness) and launches the kernels in order on the GPU (CUDA driver, with
 * optional CUDA-graph capture and replay) or on the CPU (emulation).
 * Public entry points: fg_plan_compile, fg_exec_* (see fusegen.h, exec.h).
 */
#include "exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "cuda_driver.h"
#include "emu.h"
#include "jit.h"
#include "tensor_convert.h"

#define GUARD_BYTE 0xA5

struct fg_exec {
    fg_context *ctx;
    const fg_plan *plan;
    const fg_graph *g;              /* plan->graph */
    fg_device device;               /* CUDA or EMU */
    int cuda_ready;                 /* fg_cuda_init succeeded: teardown may call the driver */
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
    int *inputs, ninputs;           /* graph inputs / outputs: plan-graph tensor indices */
    int *outputs, noutputs;
    uint64_t *bound;                /* per tensor: the address bound for this run */

    size_t weight_bytes, arena_bytes, inter_bytes;
    void *weights_host, *arena_host;    /* emulation */
    CUdeviceptr weights_dev, arena_dev; /* CUDA */

    /* CUDA */
    CUmodule *mods;
    CUfunction *funcs;
    CUstream stream;
    CUevent *events;                /* nkernels + 1 */
    CUgraphExec gexec;
    uint64_t *gexec_bound;          /* bound addresses the graph was captured with */
    CUstream gexec_stream;
    CUdeviceptr *io_dev;            /* run_host staging, per input then output */
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

static size_t tensor_bytes(const fg_tensor *t) { return (size_t)fg_tensor_numel(t) * fg_dtype_size(t->dtype); }

/* Layout a weight is stored in: the tensor's own.  Conv weights [K,C/g,R,S]
 * of an NHWC graph are thus stored K,R,S,C/g (channels innermost), which is
 * what the NHWC conv templates read. */
static fg_layout weight_layout(const fg_tensor *t) { return t->layout; }

/* Classifies every tensor the kernels touch and places weights and
 * intermediates.  Intermediates are live from their first write to their last
 * reference; a kernel's outputs are placed before its dead inputs are freed. */
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
    for (int k = 0; k < e->nkernels && !st; k++) {
        const fg_kernel *K = &e->kernels[k];
        for (int j = 0; j < K->nparams; j++) {
            const fg_kparam *p = &K->params[j];
            if (p->kind != FG_KPARAM_TENSOR)
                continue;
            if (p->tensor < 0 || p->tensor >= nt) {
                st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s: parameter %s names tensor %d of %d",
                                   K->name, p->name, p->tensor, nt);
                break;
            }
            const fg_tensor *t = &g->tensors[p->tensor];
            e->bytes[p->tensor] = tensor_bytes(t);
            if (p->writes && (t->is_input || t->is_weight)) {
                st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s writes %s tensor '%s'", K->name,
                                   t->is_input ? "input" : "weight", t->name);
                break;
            }
            if (e->place[p->tensor] == FG_PLACE_NONE)
                e->place[p->tensor] = t->is_weight ? FG_PLACE_WEIGHT : FG_PLACE_ARENA;
            if (e->place[p->tensor] == FG_PLACE_ARENA) {
                if (first[p->tensor] < 0) {
                    if (!p->writes) {
                        st = fg_diag_error(ctx, FG_ERR_INTERNAL, FG_NOLOC,
                                           "kernel %s reads tensor '%s' before any kernel writes it", K->name, t->name);
                        break;
                    }
                    first[p->tensor] = k;
                }
                last[p->tensor] = k;
            }
        }
    }
    for (int i = 0; i < g->noutputs && !st; i++)
        e->bytes[g->outputs[i]] = tensor_bytes(&g->tensors[g->outputs[i]]);
    for (int i = 0; i < g->ninputs && !st; i++)
        e->bytes[g->inputs[i]] = tensor_bytes(&g->tensors[g->inputs[i]]);

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
        wtop += align_up(e->bytes[t] + FG_EXEC_GUARD);
    }
    e->weight_bytes = wtop;

    /* Intermediates: first fit by liveness. */
    fg_arena a = {0};
    for (int k = 0; k < e->nkernels && !st; k++) {
        for (int t = 0; t < nt; t++)
            if (e->place[t] == FG_PLACE_ARENA && first[t] == k) {
                e->offset[t] = fg_arena_alloc(&a, e->bytes[t] + FG_EXEC_GUARD);
                e->inter_bytes += align_up(e->bytes[t] + FG_EXEC_GUARD);
            }
        for (int t = 0; t < nt; t++)
            if (e->place[t] == FG_PLACE_ARENA && last[t] == k)
                fg_arena_release(&a, e->offset[t], e->bytes[t] + FG_EXEC_GUARD);
    }
    e->arena_bytes = a.peak;
    fg_arena_free(&a);
    return st;
}

/* ---- guard zones (emulation) --------------------------------------------- */

/* Base of tensor t's block when it has a guard zone live at kernel k: weights
 * always; arena tensors only from their first writer to their last reader
 * (outside that range their memory belongs to other tensors).  k = -1 asks
 * for weights only. */
static unsigned char *guarded_base(const fg_exec *e, int t, int k)
{
    if (e->place[t] == FG_PLACE_WEIGHT)
        return e->weights_host;
    if (e->place[t] == FG_PLACE_ARENA && e->first[t] <= k && k <= e->last[t])
        return e->arena_host;
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

static fg_device resolve_device(fg_context *ctx, fg_device d)
{
    if (d == FG_DEVICE_AUTO)
        d = ctx->opts.device;
    if (d == FG_DEVICE_AUTO) {
        char arch[16];
        d = fg_cuda_device_arch(ctx, arch) == 0 ? FG_DEVICE_CUDA : FG_DEVICE_EMU;
    }
    return d;
}

/* Uploads the weights converted to their dtype and layout. */
static fg_status load_weights(fg_exec *e)
{
    const fg_graph *g = e->g;
    char *host = fg_xcalloc(1, e->weight_bytes ? e->weight_bytes : 1);
    float *vals = NULL;
    size_t cap = 0;
    for (int t = 0; t < g->ntensors; t++) {
        if (e->place[t] != FG_PLACE_WEIGHT)
            continue;
        /* The values, with a fold's pending scale applied (BN folded into W). */
        const fg_tensor *w = &g->tensors[t];
        const float *v = w->data;
        if (w->scale) {
            size_t n = (size_t)fg_tensor_numel(w);
            if (n > cap)
                vals = fg_xrealloc(vals, (cap = n) * sizeof *vals);
            fg_tensor_values(w, vals);
            v = vals;
        }
        fg_tensor_pack_f32(w, weight_layout(w), v, host + e->offset[t]);
    }
    free(vals);
    if (e->device == FG_DEVICE_EMU) {
        e->weights_host = host;
        e->arena_host = fg_xcalloc(1, e->arena_bytes ? e->arena_bytes : 1);
        return FG_OK;
    }
    const fg_cu_api *cu = fg_cu();
    fg_status st = FG_OK;
    if (e->weight_bytes && !(st = CU_CHECK(e->ctx, cu->MemAlloc(&e->weights_dev, e->weight_bytes))))
        st = CU_CHECK(e->ctx, cu->MemcpyHtoD(e->weights_dev, host, e->weight_bytes));
    if (!st && e->arena_bytes)
        st = CU_CHECK(e->ctx, cu->MemAlloc(&e->arena_dev, e->arena_bytes));
    free(host);
    return st;
}

/* Loads each kernel's cubin and resolves its entry point. */
static fg_status load_modules(fg_exec *e)
{
    const fg_cu_api *cu = fg_cu();
    fg_status st = FG_OK;
    e->mods = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->mods);
    e->funcs = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->funcs);
    for (int k = 0; k < e->nkernels && !st; k++) {
        fg_kernel *K = &e->kernels[k];
        if (!K->binary)
            return fg_diag_error(e->ctx, FG_ERR_INTERNAL, FG_NOLOC, "kernel %s has no cubin", K->name);
        st = CU_CHECK_K(e->ctx, cu->ModuleLoadData(&e->mods[k], K->binary), K->name);
        if (!st)
            st = CU_CHECK_K(e->ctx, cu->ModuleGetFunction(&e->funcs[k], e->mods[k], K->name), K->name);
        if (!st && K->smem > 48 * 1024)
            st = CU_CHECK_K(e->ctx,
                            cu->FuncSetAttribute(e->funcs[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 (int)K->smem),
                            K->name);
    }
    if (!st)
        st = CU_CHECK(e->ctx, cu->StreamCreate(&e->stream, CU_STREAM_NON_BLOCKING));
    e->events = fg_xcalloc((size_t)e->nkernels + 1, sizeof *e->events);
    for (int k = 0; k <= e->nkernels && !st; k++)
        st = CU_CHECK(e->ctx, cu->EventCreate(&e->events[k], CU_EVENT_DEFAULT));
    return st;
}

FG_API fg_status fg_plan_compile(fg_context *ctx, const fg_plan *p, const fg_compile_options *o, fg_exec **out)
{
    *out = NULL;
    if (!p || !p->graph)
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_compile: no plan");
    fg_exec *e = fg_xcalloc(1, sizeof *e);
    e->ctx = ctx;
    e->plan = p;
    e->g = p->graph;
    if (o)
        e->opts = *o;
    e->device = resolve_device(ctx, e->opts.device);
    e->total_ms = -1;
    pthread_mutex_init(&e->run_lock, NULL);
    const fg_graph *g = e->g;
    int nt = g->ntensors;
    e->place = fg_xcalloc((size_t)nt + 1, sizeof *e->place);
    e->offset = fg_xcalloc((size_t)nt + 1, sizeof *e->offset);
    e->bytes = fg_xcalloc((size_t)nt + 1, sizeof *e->bytes);
    e->first = fg_xcalloc((size_t)nt + 1, sizeof *e->first);
    e->last = fg_xcalloc((size_t)nt + 1, sizeof *e->last);
    e->bound = fg_xcalloc((size_t)nt + 1, sizeof *e->bound);
    e->gexec_bound = fg_xcalloc((size_t)nt + 1, sizeof *e->gexec_bound);
    e->ninputs = g->ninputs;
    e->inputs = fg_xmalloc(((size_t)g->ninputs + 1) * sizeof *e->inputs);
    memcpy(e->inputs, g->inputs, (size_t)g->ninputs * sizeof *e->inputs);
    e->noutputs = g->noutputs;
    e->outputs = fg_xmalloc(((size_t)g->noutputs + 1) * sizeof *e->outputs);
    memcpy(e->outputs, g->outputs, (size_t)g->noutputs * sizeof *e->outputs);
    e->nkernels = p->ngroups;
    e->kernels = fg_xcalloc((size_t)p->ngroups + 1, sizeof *e->kernels);
    e->kernel_ms = fg_xcalloc((size_t)p->ngroups + 1, sizeof *e->kernel_ms);
    for (int k = 0; k < e->nkernels; k++)
        e->kernel_ms[k] = -1;

    fg_status st = FG_OK;
    if (e->device == FG_DEVICE_CUDA)
        e->cuda_ready = (st = fg_cuda_init(ctx)) == FG_OK;
    if (!st) {
        /* Emission may run Lua hooks, which share the context's one Lua state. */
        fg_emit_opts eo = {.specialize = 1};
        pthread_mutex_lock(&emit_lock);
        for (int k = 0; k < e->nkernels && !st; k++)
            st = fg_emit_group(ctx, p, k, &eo, &e->kernels[k]);
        pthread_mutex_unlock(&emit_lock);
    }
    if (!st && e->device == FG_DEVICE_CUDA) {
        st = fg_jit_compile_all(ctx, e->kernels, e->nkernels, fg_jit_arch(ctx), NULL);
    } else if (!st) {
        for (int k = 0; k < e->nkernels && !st; k++)
            st = fg_emu_build(ctx, &e->kernels[k]);
    }
    if (!st)
        st = place_tensors(e);
    if (!st)
        st = load_weights(e);
    if (!st && e->device == FG_DEVICE_CUDA)
        st = load_modules(e);
    if (st) {
        fg_exec_free(e);
        return st;
    }
    *out = e;
    return FG_OK;
}

FG_API void fg_exec_free(fg_exec *e)
{
    if (!e)
        return;
    if (e->device == FG_DEVICE_CUDA && e->cuda_ready && fg_cuda_init(e->ctx) == FG_OK) {
        /* Teardown: failures here are not actionable, so results are ignored. */
        const fg_cu_api *cu = fg_cu();
        if (e->stream)
            cu->StreamSynchronize(e->stream);
        if (e->gexec)
            cu->GraphExecDestroy(e->gexec);
        for (int k = 0; e->events && k <= e->nkernels; k++)
            if (e->events[k])
                cu->EventDestroy(e->events[k]);
        for (int k = 0; e->mods && k < e->nkernels; k++)
            if (e->mods[k])
                cu->ModuleUnload(e->mods[k]);
        for (int i = 0; e->io_dev && i < e->ninputs + e->noutputs; i++)
            if (e->io_dev[i])
                cu->MemFree(e->io_dev[i]);
        if (e->weights_dev)
            cu->MemFree(e->weights_dev);
        if (e->arena_dev)
            cu->MemFree(e->arena_dev);
        if (e->stream)
            cu->StreamDestroy(e->stream);
    }
    for (int k = 0; e->kernels && k < e->nkernels; k++)
        fg_kernel_free(&e->kernels[k]);   /* releases the emulation handle too */
    free(e->kernels);
    free(e->kernel_ms);
    free(e->mods);
    free(e->funcs);
    free(e->events);
    free(e->io_dev);
    free(e->place);
    free(e->offset);
    free(e->first);
    free(e->last);
    free(e->bytes);
    free(e->bound);
    free(e->gexec_bound);
    free(e->inputs);
    free(e->outputs);
    free(e->weights_host);
    free(e->arena_host);
    pthread_mutex_destroy(&e->run_lock);
    free(e);
}

/* ---- run ---------------------------------------------------------------- */

/* Resolves bindings into e->bound; every input and output exactly once. */
static fg_status bind(fg_exec *e, const fg_binding *b, int n)
{
    const fg_graph *g = e->g;
    int nio = e->ninputs + e->noutputs;
    int *seen = fg_xcalloc((size_t)nio + 1, sizeof *seen);
    fg_status st = FG_OK;
    for (int i = 0; i < n && !st; i++) {
        int slot = -1;
        for (int j = 0; j < nio && slot < 0; j++) {
            int t = j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs];
            if (b[i].name && strcmp(b[i].name, g->tensors[t].name) == 0)
                slot = j;
        }
        if (slot < 0) {
            const char **names = fg_xmalloc(((size_t)nio + 1) * sizeof *names);
            for (int j = 0; j < nio; j++)
                names[j] = g->tensors[j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs]].name;
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
    case FG_PLACE_WEIGHT:
        return e->device == FG_DEVICE_CUDA ? e->weights_dev + e->offset[t]
                                           : (uint64_t)(uintptr_t)((char *)e->weights_host + e->offset[t]);
    case FG_PLACE_ARENA:
        return e->device == FG_DEVICE_CUDA ? e->arena_dev + e->offset[t]
                                           : (uint64_t)(uintptr_t)((char *)e->arena_host + e->offset[t]);
    default: return 0;
    }
}

static void pack_slots(const fg_exec *e, const fg_kernel *K, uint64_t *slots)
{
    for (int j = 0; j < K->nparams; j++)
        slots[j] = K->params[j].kind == FG_KPARAM_TENSOR ? tensor_addr(e, K->params[j].tensor)
                                                          : (uint64_t)K->params[j].value;
}

static fg_status run_emu(fg_exec *e)
{
    uint64_t slots[FG_MAX_KPARAMS];
    fg_status st = FG_OK;
    guards_fill(e, -1);
    double t0 = fg_now();
    for (int k = 0; k < e->nkernels && !st; k++) {
        const fg_kernel *K = &e->kernels[k];
        pack_slots(e, K, slots);
        guards_fill(e, k);
        double t = fg_now();
        st = fg_emu_launch(e->ctx, K, slots);
        e->kernel_ms[k] = (fg_now() - t) * 1e3;
        if (!st)
            st = guards_check(e, k);
    }
    e->total_ms = (fg_now() - t0) * 1e3;
    return st;
}

/* Queues every kernel on s (events around each when timing). */
static fg_status launch_all(fg_exec *e, CUstream s, int timing)
{
    const fg_cu_api *cu = fg_cu();
    uint64_t slots[FG_MAX_KPARAMS];
    fg_status st = FG_OK;
    for (int k = 0; k < e->nkernels && !st; k++) {
        const fg_kernel *K = &e->kernels[k];
        pack_slots(e, K, slots);
        void *params[1] = {slots};   /* one struct argument made of 8-byte slots */
        if (timing)
            st = CU_CHECK(e->ctx, cu->EventRecord(e->events[k], s));
        if (!st)
            st = CU_CHECK_K(e->ctx,
                            cu->LaunchKernel(e->funcs[k], K->grid[0], K->grid[1], K->grid[2], K->block[0], K->block[1],
                                             K->block[2], K->smem, s, params, NULL),
                            K->name);
    }
    if (!st && timing)
        st = CU_CHECK(e->ctx, cu->EventRecord(e->events[e->nkernels], s));
    return st;
}

/* CUDA-graph path: capture once per set of bound addresses, then replay. */
static fg_status run_graph(fg_exec *e, CUstream s)
{
    const fg_cu_api *cu = fg_cu();
    fg_context *ctx = e->ctx;
    size_t nb = (size_t)e->g->ntensors * sizeof *e->bound;
    fg_status st = FG_OK;
    if (!e->gexec || e->gexec_stream != s || memcmp(e->gexec_bound, e->bound, nb) != 0) {
        if (e->gexec) {
            cu->GraphExecDestroy(e->gexec);
            e->gexec = NULL;
        }
        CUgraph graph = NULL;
        st = CU_CHECK(ctx, cu->StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        if (st)
            return st;
        fg_status lst = launch_all(e, s, 0);
        st = CU_CHECK(ctx, cu->StreamEndCapture(s, &graph));
        if (lst)
            st = lst;
        if (!st)
            st = CU_CHECK(ctx, cu->GraphInstantiate(&e->gexec, graph, 0));
        if (graph)
            cu->GraphDestroy(graph);
        if (st)
            return st;
        memcpy(e->gexec_bound, e->bound, nb);
        e->gexec_stream = s;
    }
    return CU_CHECK(ctx, cu->GraphLaunch(e->gexec, s));
}

static fg_status run_cuda(fg_exec *e, CUstream s)
{
    const fg_cu_api *cu = fg_cu();
    fg_status st;
    int timing = e->opts.timing;
    if (e->opts.graph_replay) {
        if (timing && (st = CU_CHECK(e->ctx, cu->EventRecord(e->events[0], s))))
            return st;
        st = run_graph(e, s);
        if (!st && timing)
            st = CU_CHECK(e->ctx, cu->EventRecord(e->events[e->nkernels], s));
    } else {
        st = launch_all(e, s, timing);
    }
    if (st || !timing)
        return st;
    if ((st = CU_CHECK(e->ctx, cu->EventSynchronize(e->events[e->nkernels]))))
        return st;
    float ms = 0;
    for (int k = 0; k < e->nkernels && !e->opts.graph_replay; k++) {
        if ((st = CU_CHECK(e->ctx, cu->EventElapsedTime(&ms, e->events[k], e->events[k + 1]))))
            return st;
        e->kernel_ms[k] = ms;
    }
    st = CU_CHECK(e->ctx, cu->EventElapsedTime(&ms, e->events[0], e->events[e->nkernels]));
    e->total_ms = ms;
    return st;
}

static fg_status run_locked(fg_exec *e, void *stream)
{
    for (int k = 0; k < e->nkernels; k++)
        e->kernel_ms[k] = -1;
    e->total_ms = -1;
    if (e->device == FG_DEVICE_EMU)
        return run_emu(e);
    fg_status st = fg_cuda_init(e->ctx);
    if (st)
        return st;
    return run_cuda(e, stream ? (CUstream)stream : e->stream);
}

FG_API fg_status fg_exec_run(fg_exec *e, const fg_binding *b, int n, void *stream)
{
    pthread_mutex_lock(&e->run_lock);
    fg_status st = bind(e, b, n);
    if (!st)
        st = run_locked(e, stream);
    pthread_mutex_unlock(&e->run_lock);
    return st;
}

/* CUDA: stage host data through device buffers owned by the exec. */
static fg_status run_host_cuda(fg_exec *e, const fg_binding *b, int n)
{
    const fg_cu_api *cu = fg_cu();
    fg_context *ctx = e->ctx;
    fg_status st = bind(e, b, n);
    if (!st)
        st = fg_cuda_init(ctx);
    if (st)
        return st;
    int nio = e->ninputs + e->noutputs;
    if (!e->io_dev)
        e->io_dev = fg_xcalloc((size_t)nio + 1, sizeof *e->io_dev);
    void **host = fg_xcalloc((size_t)nio + 1, sizeof *host);
    for (int j = 0; j < nio && !st; j++) {
        int t = j < e->ninputs ? e->inputs[j] : e->outputs[j - e->ninputs];
        size_t bytes = align_up(tensor_bytes(&e->g->tensors[t]));
        host[j] = (void *)(uintptr_t)e->bound[t];
        if (!e->io_dev[j])
            st = CU_CHECK(ctx, cu->MemAlloc(&e->io_dev[j], bytes));
        if (!st && j < e->ninputs)
            st = CU_CHECK(ctx, cu->MemcpyHtoDAsync(e->io_dev[j], host[j], tensor_bytes(&e->g->tensors[t]), e->stream));
        else if (!st)   /* poison: all-ones bytes are NaN in fp32, fp16 and bf16 */
            st = CU_CHECK(ctx, cu->MemsetD32(e->io_dev[j], 0xFFFFFFFFu, bytes / 4));
        e->bound[t] = e->io_dev[j];
    }
    if (!st)
        st = run_cuda(e, e->stream);
    for (int j = e->ninputs; j < nio && !st; j++) {
        int t = e->outputs[j - e->ninputs];
        st = CU_CHECK(ctx, cu->MemcpyDtoHAsync(host[j], e->io_dev[j], tensor_bytes(&e->g->tensors[t]), e->stream));
    }
    if (!st)
        st = CU_CHECK(ctx, cu->StreamSynchronize(e->stream));
    free(host);
    return st;
}

FG_API fg_status fg_exec_run_host(fg_exec *e, const fg_binding *b, int n)
{
    pthread_mutex_lock(&e->run_lock);
    fg_status st;
    if (e->device == FG_DEVICE_EMU) {
        st = bind(e, b, n);
        if (!st)
            st = run_locked(e, NULL);
    } else {
        for (int k = 0; k < e->nkernels; k++)
            e->kernel_ms[k] = -1;
        e->total_ms = -1;
        st = run_host_cuda(e, b, n);
    }
    pthread_mutex_unlock(&e->run_lock);
    return st;
}

/* ---- queries ------------------------------------------------------------ */

static fg_status tensor_info(const fg_exec *e, int t, fg_tensor_info *info)
{
    const fg_tensor *x = &e->g->tensors[t];
    memset(info, 0, sizeof *info);
    info->name = x->name;
    info->dtype = x->dtype;
    info->layout = x->layout;
    info->rank = x->rank;
    for (int i = 0; i < x->rank && i < 6; i++)
        info->shape[i] = x->shape[i];
    info->bytes = tensor_bytes(x);
    return FG_OK;
}

FG_API fg_device fg_exec_device(const fg_exec *e) { return e->device; }
FG_API int fg_exec_input_count(const fg_exec *e) { return e->ninputs; }
FG_API int fg_exec_output_count(const fg_exec *e) { return e->noutputs; }

FG_API fg_status fg_exec_input_info(const fg_exec *e, int i, fg_tensor_info *info)
{
    if (i < 0 || i >= e->ninputs)
        return FG_ERR_INPUT;
    return tensor_info(e, e->inputs[i], info);
}

FG_API fg_status fg_exec_output_info(const fg_exec *e, int i, fg_tensor_info *info)
{
    if (i < 0 || i >= e->noutputs)
        return FG_ERR_INPUT;
    return tensor_info(e, e->outputs[i], info);
}

FG_API int fg_exec_kernel_count(const fg_exec *e) { return e->nkernels; }

FG_API const char *fg_exec_kernel_name(const fg_exec *e, int i)
{
    return i >= 0 && i < e->nkernels ? e->kernels[i].name : NULL;
}

FG_API const char *fg_exec_kernel_source(const fg_exec *e, int i)
{
    return i >= 0 && i < e->nkernels ? e->kernels[i].source : NULL;
}

FG_API double fg_exec_kernel_ms(const fg_exec *e, int i) { return i >= 0 && i < e->nkernels ? e->kernel_ms[i] : -1; }
FG_API size_t fg_exec_arena_bytes(const fg_exec *e) { return e->arena_bytes; }

int fg_exec_input_tensor(const fg_exec *e, int i) { return i >= 0 && i < e->ninputs ? e->inputs[i] : -1; }
int fg_exec_output_tensor(const fg_exec *e, int i) { return i >= 0 && i < e->noutputs ? e->outputs[i] : -1; }

fg_exec_place fg_exec_tensor_place(const fg_exec *e, int t, size_t *offset)
{
    if (t < 0 || t >= e->g->ntensors)
        return FG_PLACE_NONE;
    if (offset)
        *offset = e->offset[t];
    return e->place[t];
}

size_t fg_exec_intermediate_bytes(const fg_exec *e) { return e->inter_bytes; }
double fg_exec_total_ms(const fg_exec *e) { return e->total_ms; }
const fg_kernel *fg_exec_kernel(const fg_exec *e, int i) { return i >= 0 && i < e->nkernels ? &e->kernels[i] : NULL; }
