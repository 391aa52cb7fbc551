/*
 * emit_epilogue_vec.c -- the vector epilogue: fg_epilogue8(p, v, first
 * coordinates...) applies the epilogue to 8 consecutive output elements
 * along the output's innermost axis (a GEMM's columns, an NHWC output's
 * channels), reading each extra input that runs along that axis (a
 * residual of the output's shape, a per-channel bias) with one 16-byte
 * load (two for fp32) instead of 8 scalar ones, and each input constant
 * along it once.  The scalar stages are the ordinary epilogue's, emitted a
 * second time as fg_epilogue_pre with the preloaded values as parameters.
 * Templates that hold 8 consecutive columns per lane before their store
 * (gemm_wgmma / conv2d_wgmma after the quad transpose, conv2d_tc and
 * gemm_tc after theirs) ask for it through fg_emitter.epi_vec_axis.
 */
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "kind.h"
#include "template.h"

#define VEC 8

/* How an input is read over the 8 elements. */
typedef enum vaccess {
    VA_CONTIG,    /* stride 1 along the axis: one 16-byte load at the first element's offset */
    VA_UNIFORM,   /* constant along the axis: one scalar load */
    VA_ELEM       /* anything else: left to the scalar epilogue */
} vaccess;

/* The axis of tensor y that is innermost in memory. */
static int inner_axis(const fg_tensor *y) { return y->rank == 4 && y->layout == FG_LAYOUT_NHWC ? 1 : y->rank - 1; }

/* Stride in elements of logical axis a of x in memory (its own layout). */
static int64_t axis_stride(const fg_tensor *x, int a)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    int64_t s = 1;
    for (int k = x->rank - 1; k >= 0; k--) {
        int ax = x->rank == 4 && x->layout == FG_LAYOUT_NHWC ? nhwc[k] : k;
        if (ax == a)
            return s;
        s *= x->shape[ax];
    }
    return 0;
}

/* How tensor t, read at the output's coordinates as fg_em_offset reads it
 * (per_channel: a rank-1 tensor indexed by the channel), is read over 8
 * elements along output axis oi (whose size is a multiple of 8, so every
 * other stride of a contiguous tensor is a multiple of 8 too and the first
 * element's offset is 16-byte aligned with the tensor). */
static vaccess classify(const fg_emitter *em, int t, int per_channel, int oi)
{
    const fg_tensor *x = &em->g->tensors[t], *y = em->ot;
    int xa;   /* x's axis read with the output's coordinate oi, or -1 */
    if (per_channel && x->rank == 1)
        xa = fg_em_channel_axis(y->rank) == oi ? 0 : -1;
    else
        xa = oi - (y->rank - x->rank);
    if (xa < 0 || x->shape[xa] == 1)
        return VA_UNIFORM;
    if (x->shape[xa] != y->shape[oi])
        return VA_ELEM;
    return axis_stride(x, xa) == 1 ? VA_CONTIG : VA_ELEM;
}

/* Nonzero when tensor t is produced inside the group (the chain value). */
static int made_in_group(const fg_emitter *em, int t)
{
    int pr = em->g->tensors[t].producer;
    for (int i = 0; pr >= 0 && i < em->grp->nnodes; i++)
        if (em->grp->nodes[i] == pr)
            return 1;
    return 0;
}

/* Adds the read (t, per_channel) to em->pre unless there, full or read
 * element by element; acc[] keeps each entry's access. */
static void add_read(fg_emitter *em, int t, int pc, int oi, vaccess *acc)
{
    if (t < 0 || made_in_group(em, t))
        return;
    for (int k = 0; k < em->npre; k++)
        if (em->pre[k].t == t && em->pre[k].per_channel == pc)
            return;
    vaccess a = classify(em, t, pc, oi);
    if (a == VA_ELEM || em->npre == FG_EM_MAX_PRE)
        return;
    acc[em->npre] = a;
    em->pre[em->npre].t = t;
    em->pre[em->npre].per_channel = pc;
    em->npre++;
}

/* The inputs of the element-wise node nd that the epilogue loads. */
static void add_node_reads(fg_emitter *em, int nd, int oi, vaccess *acc)
{
    const fg_node *n = &em->g->nodes[nd];
    if (n->folded || !n->op->expr)
        return;
    for (int i = 0; i < n->ninputs; i++)
        add_read(em, n->inputs[i], n->op->inputs[i].per_channel, oi, acc);
}

/* Every extra input of the epilogue, in the stages' order (emit_epilogue.c's
 * epilogue_at: the anchor's bias, then the stages, or the chain's nodes). */
static void collect_reads(fg_emitter *em, int oi, vaccess *acc)
{
    const fg_group *grp = em->grp;
    int cols = grp->anchor >= 0 && (fg_kind(em->g->nodes[grp->anchor].op->kind)->traits & FG_KIND_BIAS_COLUMNS);
    if (grp->anchor >= 0) {
        const fg_node *an = &em->g->nodes[grp->anchor];
        int bi = fg_node_input(an, "bias");
        if (bi >= 0 && bi < an->ninputs)
            add_read(em, an->inputs[bi], !cols, oi, acc);
    }
    if (grp->nepi > 0) {
        for (int i = 0; i < grp->nepi; i++) {
            const fg_group_epi *e = &grp->epi[i];
            if (e->kind == FG_EPI_BIAS)
                add_read(em, e->tensor, !cols, oi, acc);
            else if (e->kind == FG_EPI_APPLY && !(e->node == em->main_node && grp->anchor < 0))
                add_node_reads(em, e->node, oi, acc);
        }
        return;
    }
    for (int i = 0; i < grp->nnodes; i++) {
        int nd = grp->nodes[i];
        if (nd == em->main_node || nd == grp->anchor || fg_kind(em->g->nodes[nd].op->kind)->role == FG_ROLE_RESHAPE)
            continue;
        if (em->tpl && i >= grp->nnodes - fg_template_base(em->tpl)->owns_last)
            continue;
        add_node_reads(em, nd, oi, acc);
    }
}

fg_status fg_em_epilogue_vec(fg_emitter *em)
{
    if (!em->epi_vec_axis)
        return FG_OK;
    const fg_tensor *y = em->ot;
    int oi = em->epi_vec_axis - 1;
    int ok = !em->epi_ot && y->rank > 0 && inner_axis(y) == oi && y->shape[oi] % VEC == 0 && em->npre == 0;
    fg_em_set(em, "VEC_EPI", "%d", ok);
    if (!ok)
        return FG_OK;
    vaccess acc[FG_EM_MAX_PRE];
    collect_reads(em, oi, acc);
    fg_status st = fg_em_epilogue_named(em, "fg_epilogue_pre");
    const char *const *coords = fg_em_coord_names(y->rank);
    fg_buf b = {0}, args = {0};
    fg_buf_printf(&b, "// epilogue of %d consecutive elements along %s's axis %d (%s), (", VEC, y->name, oi, coords[oi]);
    for (int a = 0; a < y->rank; a++)
        fg_buf_printf(&b, "%s%s", a ? ", " : "", coords[a]);
    fg_buf_printf(&b, ") the first one's coordinates\n// (%s a multiple of %d): inputs running along that axis are read "
                      "16 bytes at a time\n", coords[oi], VEC);
    fg_buf_printf(&b, "FG_DEVICE void fg_epilogue8(const fg_params_%s &p, float v[%d]", em->k->name, VEC);
    for (int a = 0; a < y->rank; a++)
        fg_buf_printf(&b, ", fg_i64 %s", coords[a]);
    fg_buf_put(&b, ")\n{\n");
    for (int k = 0; k < em->npre && st == FG_OK; k++) {
        int t = em->pre[k].t;
        const char *field = fg_em_tensor(em, t, 0);
        fg_buf off = {0};
        st = fg_em_offset(em, t, em->pre[k].per_channel, coords, y->rank, y->shape, &off);
        if (st != FG_OK) {
            fg_buf_free(&off);
            break;
        }
        if (acc[k] == VA_UNIFORM) {
            fg_buf_printf(&b, "    const float e%d = fg_load(p.%s + %s);  // %s: constant along %s\n", k, field, off.s,
                          em->g->tensors[t].name, coords[oi]);
            fg_buf_printf(&args, ", e%d", k);
        } else {
            fg_buf_printf(&b, "    float e%d[%d];  // %s: contiguous along %s\n", k, VEC, em->g->tensors[t].name,
                          coords[oi]);
            fg_buf_printf(&b, "    if (fg_aligned16(p.%s)) {\n        fg_load8(p.%s + %s, e%d);\n    } else {\n", field,
                          field, off.s, k);
            fg_buf_printf(&b, "        FG_UNROLL\n        for (int j = 0; j < %d; j++)\n", VEC);
            fg_buf_printf(&b, "            e%d[j] = fg_load(p.%s + %s + j);\n    }\n", k, field, off.s);
            fg_buf_printf(&args, ", e%d[j]", k);
        }
        fg_buf_free(&off);
    }
    fg_buf_printf(&b, "    FG_UNROLL\n    for (int j = 0; j < %d; j++)\n        v[j] = fg_epilogue_pre(p, v[j]%s", VEC,
                  args.s ? args.s : "");
    for (int a = 0; a < y->rank; a++)
        fg_buf_printf(&b, ", %s%s", coords[a], a == oi ? " + j" : "");
    fg_buf_put(&b, ");\n}\n\n");
    if (st == FG_OK)
        fg_buf_put(&em->helpers, b.s);
    fg_buf_free(&b);
    fg_buf_free(&args);
    em->npre = 0;
    return st;
}
