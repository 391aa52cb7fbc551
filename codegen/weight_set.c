/*
 * weight_set.c -- fg_graph_set_weight: a graph weight's values from memory
 * (contract in fusegen.h).  The weight keeps its name, shape and dtype;
 * fp16 / bf16 data is stored exactly (every such value is a float).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "oom.h"
#include "shape.h"
#include "weights_file.h"

#define BAD(...) fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_graph_set_weight: " __VA_ARGS__)

/* fg_graph_set_weight's work: the one allocation that attaches to the graph
 * (the weight's buffer) is the last. */
static fg_status set_weight(fg_context *ctx, fg_graph *g, const char *name, fg_dtype dtype, const int64_t *shape,
                            int rank, const void *data)
{
    if (!g)
        return BAD("graph is NULL");
    if (!name)
        return BAD("name is NULL");
    if ((unsigned)dtype >= FG_DTYPE_COUNT)
        return BAD("dtype %d is not an fg_dtype", (int)dtype);
    if (rank < 1 || rank > FG_MAX_RANK)
        return BAD("rank %d is out of range (1 to %d)", rank, FG_MAX_RANK);
    if (!shape)
        return BAD("shape is NULL");
    if (!data)
        return BAD("data is NULL");
    int t = fg_graph_find_tensor(g, name);
    if (t < 0 || !g->tensors[t].is_weight) {
        if (t >= 0)
            return BAD("'%s' is %s, not a weight", name,
                       g->tensors[t].is_input ? "a graph input" : "the output of a node");
        const char **names = fg_xcalloc((size_t)g->ntensors + 1, sizeof *names);
        int n = 0;
        for (int i = 0; i < g->ntensors; i++)
            if (g->tensors[i].is_weight)
                names[n++] = g->tensors[i].name;
        const char *sug = strlen(name) <= 256 ? fg_suggest(name, names, n) : NULL;
        fg_status st = sug ? BAD("graph '%s' has no weight '%s' (did you mean '%s'?)", g->name, name, sug)
                           : BAD("graph '%s' has no weight '%s'", g->name, name);
        free(names);
        return st;
    }
    fg_tensor *w = &g->tensors[t];
    int same = rank == w->rank;
    for (int i = 0; same && i < rank; i++)
        same = shape[i] == w->shape[i];
    if (!same) {
        char a[128], b[128];
        for (int i = 0; i < rank; i++)
            if (shape[i] < 1)
                return BAD("dimension %d of the shape is %lld; dimensions are positive", i, (long long)shape[i]);
        return BAD("weight '%s' has shape %s, the data is %s", name, fg_shape_str(w->shape, w->rank, a, sizeof a),
                   fg_shape_str(shape, rank, b, sizeof b));
    }
    if (dtype != w->dtype)
        return BAD("weight '%s' is %s, the data is %s", name, fg_dtype_name(w->dtype), fg_dtype_name(dtype));
    float *d = fg_tensor_own(w);
    fg_file_decode(dtype, data, d, fg_tensor_numel(w));
    return FG_OK;
}

typedef struct weight_call {
    fg_context *ctx;
    fg_graph *g;
    const char *name;
    fg_dtype dtype;
    const int64_t *shape;
    int rank;
    const void *data;
} weight_call;

static fg_status weight_body(void *arg)
{
    weight_call *c = arg;
    return set_weight(c->ctx, c->g, c->name, c->dtype, c->shape, c->rank, c->data);
}

FG_API fg_status fg_graph_set_weight(fg_context *ctx, fg_graph *g, const char *name, fg_dtype dtype,
                                     const int64_t *shape, int rank, const void *data)
{
    if (!ctx)
        return FG_ERR_INPUT;
    weight_call c = {ctx, g, name, dtype, shape, rank, data};
    return fg_oom_guard(ctx, (fg_loc){g ? g->path : NULL, 0, 0}, "setting a weight", weight_body, NULL, &c);
}
