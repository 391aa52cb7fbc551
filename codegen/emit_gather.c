/*
 * emit_gather.c -- the gather family (templates/gather.cuh): a gather along
 * one axis by integer indices (gather.h), one thread per output element,
 * then the group's element-wise epilogue.  Data, indices and output are
 * addressed in logical order, so none may be an NHWC tensor.
 */
#include <stdio.h>

#include "emit_impl.h"
#include "expr.h"
#include "gather.h"
#include "template.h"

/* Whether tensor t is stored in logical order. */
static int logical(const fg_tensor *t) { return t->rank != 4 || t->layout == FG_LAYOUT_NCHW; }

static fg_status emit_gather(fg_emitter *em)
{
    const fg_node *nd = &em->g->nodes[em->grp->anchor];
    int xt = nd->inputs[0], it = nd->inputs[1];
    fg_gather_geom d;
    char why[200];
    if (fg_gather_geom_of(nd, &em->g->tensors[xt], &em->g->tensors[it], &d, why, sizeof why) != 0)
        return fg_em_error(em, FG_ERR_INPUT, "gather '%s': %s", nd->name, why);
    int64_t threads;
    fg_status st = fg_em_threads(em, 256, &threads);
    if (st != FG_OK)
        return st;
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    fg_buf coord = {0}, args = {0};
    fg_em_decompose(em, em->out, "i", coords, 2, &coord);
    if (coord.len && coord.s[coord.len - 1] == '\n')
        coord.s[--coord.len] = 0;
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&args, "%s%s", i ? ", " : "", coords[i]);
    fg_em_shape(em, "NUMEL", fg_em_numel(em, em->out));
    fg_em_shape(em, "D", d.dim);
    fg_em_shape(em, "NIDX", d.nidx);
    fg_em_shape(em, "INNER", d.inner);
    fg_em_set(em, "X", "%s", fg_em_tensor(em, xt, 0));
    fg_em_set(em, "IDX", "%s", fg_em_tensor(em, it, 0));
    fg_em_set(em, "OUT", "%s", fg_em_tensor(em, em->out, 1));
    fg_em_set(em, "COORDS", "%s", coord.s ? coord.s : "");
    fg_em_set(em, "COORD_ARGS", "%s", args.s);
    fg_em_set(em, "OOB", "%s", fg_dtype_is_float(em->g->tensors[xt].dtype) ? "(0.0f/0.0f)" : "0.0f");
    fg_buf_printf(&em->notes, "//   gather:    axis %d, %lld indices into %lld, outer %lld, inner %lld\n", d.axis,
                  (long long)d.nidx, (long long)d.dim, (long long)d.outer, (long long)d.inner);
    fg_buf_free(&coord);
    fg_buf_free(&args);
    em->template_file = "gather.cuh";
    fg_em_launch_1d(em, fg_em_numel(em, em->out), threads);
    return FG_OK;
}

/* Capability check (fg_template.check): a valid geometry over tensors in
 * logical order. */
static int check_gather(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    const fg_tensor *x = &c->g->tensors[nd->inputs[0]], *ix = &c->g->tensors[nd->inputs[1]];
    const fg_tensor *y = &c->g->tensors[c->g->nodes[c->nodes[c->nnodes - 1]].output];
    fg_gather_geom d;
    if (fg_gather_geom_of(nd, x, ix, &d, why, whysz) != 0)
        return 0;
    if (!logical(x) || !logical(ix) || !logical(y)) {
        snprintf(why, whysz, "gather addresses its tensors in logical order; an NHWC tensor takes a transpose");
        return 0;
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "gather", .family = "gather", .order = 98, FG_TEMPLATE_LIMITS, .kinds = 1u << FG_OPK_GATHER,
     .dtypes = FG_DTYPES_ANY, .tiles = fg_tile_threads, .check = check_gather, .emit = emit_gather,
     .map_refusal = "gather reads its data through its indices",
     .summary = "gather along one axis by integer indices, one thread per output element"},
};
FG_TEMPLATE_FAMILY(gather, rows);
