/*
 * emit_pointwise.c -- the pointwise family (templates/pointwise.cuh): a
 * group whose main node is an element-wise op (pointwise kind or an
 * unfolded batch_norm) or a flatten (a copy with re-indexing), followed by
 * the epilogue.  Element-wise groups get a 16-byte vector path: which
 * tensors it reads with vector loads is decided here from shapes and
 * layouts, pointer alignment by the kernel at launch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emit_impl.h"
#include "template.h"

/* flatten: out (row, col) reads x at (row, col decomposed over x's axes 1..). */
static fg_status emit_flatten(fg_emitter *em, const fg_node *nd, fg_buf *loads, fg_buf *expr)
{
    int t = nd->inputs[0];
    const fg_tensor *x = &em->g->tensors[t];
    if (em->ot->rank != 2 || x->rank < 2)
        return fg_em_error(em, FG_ERR_UNSUPPORTED, "flatten of rank %d to rank %d", x->rank, em->ot->rank);
    static const char *const names[] = {"row", "x1", "x2", "x3", "x4", "x5"};
    const char *xc[FG_MAX_RANK];
    for (int a = 0; a < x->rank; a++)
        xc[a] = a > 0 && x->shape[a] == 1 ? "0" : names[a];   /* size-1 axes read index 0 */
    for (int a = 1; a < x->rank; a++) {
        if (x->shape[a] == 1)
            continue;
        fg_buf_iprintf(loads, 2, "const fg_i64 %s = col", xc[a]);
        if (a < x->rank - 1) {
            fg_buf_put(loads, " / (");
            int first = 1;
            for (int q = a + 1; q < x->rank; q++) {
                if (x->shape[q] == 1)
                    continue;
                if (!first)
                    fg_buf_put(loads, " * ");
                first = 0;
                fg_em_dim(em, t, q, loads);
            }
            if (first)
                fg_buf_put(loads, "1");
            fg_buf_put(loads, ")");
        }
        if (a > 1) {
            fg_buf_put(loads, " % ");
            fg_em_dim(em, t, a, loads);
        }
        fg_buf_printf(loads, ";  // %s axis %d\n", x->name, a);
    }
    fg_buf off = {0};
    fg_status st = fg_em_offset(em, t, 0, xc, x->rank, x->shape, &off);
    if (st == FG_OK) {
        fg_buf_iprintf(loads, 2, "const float in_x = fg_load(p.%s + %s);  // %s\n", fg_em_tensor(em, t, 0), off.s,
                       x->name);
        fg_buf_put(expr, "in_x");
    }
    fg_buf_free(&off);
    return st;
}

/* ---- the 16-byte vector path ------------------------------------------------
 * A vector is VEC = 16 / sizeof(output element) consecutive output elements
 * starting at a multiple of VEC (memory order).  Each tensor the kernel reads
 * (the main node's inputs and the epilogue's extra inputs) is read over a
 * vector in one of four ways, decided here from the shapes and layouts: */
typedef enum access {
    ACC_SAME = 0,   /* the output's shape and layout: elements base .. base + VEC - 1 */
    ACC_CONTIG,     /* runs along the output's innermost axis with stride 1: VEC elements from
                       its offset at the vector's first coordinates */
    ACC_UNIFORM,    /* constant along the output's innermost axis: one element per vector */
    ACC_ELEM        /* anything else: one load per element */
} access;

/* Contiguity of the last two needs the innermost axis's size to be a
 * multiple of VEC (a vector never straddles two rows); then the first
 * coordinates of a vector have an innermost coordinate that is a multiple of
 * VEC, so a contiguous read starts at a multiple of VEC elements as well
 * (every other stride of the tensor is a multiple of its innermost size). */

/* The axis of the output that is innermost in memory. */
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

/* How tensor t, read at the output's coordinates (per_channel: a rank-1
 * tensor indexed by the channel, as fg_em_offset reads it), is read over a
 * vector of vec elements. */
static access classify(const fg_emitter *em, int t, int per_channel, int vec)
{
    const fg_tensor *x = &em->g->tensors[t], *y = em->ot;
    int same = x->rank == y->rank && (x->rank != 4 || x->layout == y->layout);
    for (int a = 0; same && a < x->rank; a++)
        same = x->shape[a] == y->shape[a];
    if (same)
        return ACC_SAME;
    int oi = inner_axis(y);
    if (y->shape[oi] % vec != 0)
        return ACC_ELEM;
    int xa;   /* x's axis read with the output's innermost coordinate, or -1 */
    if (per_channel && x->rank == 1)
        xa = fg_em_channel_axis(y->rank) == oi ? 0 : -1;
    else
        xa = oi - (y->rank - x->rank);
    if (xa < 0 || x->shape[xa] == 1)
        return ACC_UNIFORM;
    return axis_stride(x, xa) == 1 ? ACC_CONTIG : ACC_ELEM;
}

/* One tensor read, with its access. */
typedef struct pw_read {
    int t, per_channel;
    access acc;
} pw_read;

/* Nonzero when tensor t is produced inside the group (the chain value). */
static int made_in_group(const fg_emitter *em, int t)
{
    int pr = em->g->tensors[t].producer;
    for (int i = 0; pr >= 0 && i < em->grp->nnodes; i++)
        if (em->grp->nodes[i] == pr)
            return 1;
    return 0;
}

/* Adds node nd's extra inputs (not produced in the group) to the epilogue's
 * preloads em->pre, once per (tensor, per_channel); reads the preload table
 * cannot hold stay with the epilogue (it loads them itself). */
static void add_epilogue_reads(fg_emitter *em, int nd, int vec, pw_read *reads)
{
    const fg_node *n = &em->g->nodes[nd];
    if (n->folded || !n->op->expr)
        return;
    for (int i = 0; i < n->ninputs; i++) {
        int t = n->inputs[i], pc = n->op->inputs[i].per_channel;
        if (t < 0 || made_in_group(em, t))
            continue;
        int dup = 0;
        for (int k = 0; k < em->npre && !dup; k++)
            dup = em->pre[k].t == t && em->pre[k].per_channel == pc;
        access acc = classify(em, t, pc, vec);
        if (dup || acc == ACC_ELEM || em->npre == FG_EM_MAX_PRE)
            continue;
        reads[em->npre] = (pw_read){t, pc, acc};
        em->pre[em->npre].t = t;
        em->pre[em->npre].per_channel = pc;
        em->npre++;
    }
}

/* The nodes the epilogue applies (fg_em_epilogue's order and rules). */
static void collect_epilogue_reads(fg_emitter *em, int vec, pw_read *reads)
{
    const fg_group *grp = em->grp;
    if (grp->nepi > 0) {
        for (int i = 0; i < grp->nepi; i++)
            if (grp->epi[i].kind == FG_EPI_APPLY && !(grp->epi[i].node == em->main_node && grp->anchor < 0))
                add_epilogue_reads(em, grp->epi[i].node, vec, reads);
    } else {
        for (int i = 0; i < grp->nnodes; i++)
            if (grp->nodes[i] != em->main_node && grp->nodes[i] != grp->anchor)
                add_epilogue_reads(em, grp->nodes[i], vec, reads);
    }
}

/* Appends the offset of tensor t (per_channel as read) at coordinates
 * coords of the output. */
static fg_status offset_at(fg_emitter *em, int t, int per_channel, const char *const *coords, fg_buf *out)
{
    return fg_em_offset(em, t, per_channel, coords, em->ot->rank, em->ot->shape, out);
}

/* Emits the vector loads of one read into vl (before the element loop) and,
 * for ACC_ELEM, the per-element load into el; name is the local array (or,
 * for a uniform epilogue read, scalar) the values land in.  An array is
 * declared for every main-node input (the expression reads name[j]). */
static fg_status emit_vector_read(fg_emitter *em, const pw_read *r, const char *name, int is_main, int vec,
                                  const char *const *bcoords, const char *const *coords, fg_buf *vl, fg_buf *el,
                                  fg_buf *align)
{
    const char *field = fg_em_tensor(em, r->t, 0);
    const char *tname = em->g->tensors[r->t].name;
    fg_buf off = {0};
    fg_status st = FG_OK;
    switch (r->acc) {
    case ACC_SAME:
        fg_buf_iprintf(vl, 2, "float %s[%d];\n", name, vec);
        fg_buf_iprintf(vl, 2, "fg_load%d(p.%s + base, %s);  // %s: the output's shape and layout\n", vec, field,
                       name, tname);
        fg_buf_printf(align, " && fg_aligned16(p.%s)", field);
        break;
    case ACC_CONTIG:
        if ((st = offset_at(em, r->t, r->per_channel, bcoords, &off)) != FG_OK)
            break;
        fg_buf_iprintf(vl, 2, "float %s[%d];\n", name, vec);
        fg_buf_iprintf(vl, 2, "fg_load%d(p.%s + %s, %s);  // %s: contiguous along the innermost axis\n", vec, field,
                       off.s, name, tname);
        fg_buf_printf(align, " && fg_aligned16(p.%s)", field);
        break;
    case ACC_UNIFORM:
        if ((st = offset_at(em, r->t, r->per_channel, bcoords, &off)) != FG_OK)
            break;
        if (is_main) {
            fg_buf_iprintf(vl, 2, "float %s[%d];\n", name, vec);
            fg_buf_iprintf(vl, 2, "%s[0] = fg_load(p.%s + %s);  // %s: one value per vector\n", name, field, off.s,
                           tname);
            fg_buf_iprintf(vl, 2, "FG_UNROLL\n");
            fg_buf_iprintf(vl, 2, "for (int j = 1; j < %d; j++)\n", vec);
            fg_buf_iprintf(vl, 3, "%s[j] = %s[0];\n", name, name);
        } else {
            fg_buf_iprintf(vl, 2, "const float %s = fg_load(p.%s + %s);  // %s: one value per vector\n", name, field,
                           off.s, tname);
        }
        break;
    case ACC_ELEM:
        if ((st = offset_at(em, r->t, r->per_channel, coords, &off)) != FG_OK)
            break;
        fg_buf_iprintf(vl, 2, "float %s[%d];\n", name, vec);
        fg_buf_iprintf(el, 3, "%s[j] = fg_load(p.%s + %s);  // %s\n", name, field, off.s, tname);
        break;
    }
    fg_buf_free(&off);
    return st;
}

/* Names of the first coordinates of a vector: b_<coordinate>. */
static const char *const *base_coord_names(int rank, char store[FG_MAX_RANK][16])
{
    static const char *ptrs[FG_MAX_RANK];
    const char *const *c = fg_em_coord_names(rank);
    for (int a = 0; a < rank; a++) {
        snprintf(store[a], 16, "b_%s", c[a]);
        ptrs[a] = store[a];
    }
    return ptrs;
}

static fg_status emit_pointwise(fg_emitter *em)
{
    const fg_node *nd = &em->g->nodes[em->main_node];
    int rank = em->ot->rank;
    const char *const *coords = fg_em_coord_names(rank);
    int64_t numel = fg_em_numel(em, em->out);
    fg_status st;

    int64_t threads;
    if ((st = fg_em_threads(em, 256, &threads)) != FG_OK)
        return st;
    em->template_file = "pointwise.cuh";
    em->threads = (unsigned)threads;

    int is_flatten = nd->op->kind == FG_OPK_FLATTEN;
    /* 16 bytes of output per vector; outputs shorter than one vector stay scalar */
    int vec = (int)(16 / fg_dtype_size(em->ot->dtype));
    if (is_flatten || numel < vec || !fg_em_all_float(em))
        vec = 0;

    fg_buf loads = {0}, expr = {0}, coord = {0}, args = {0}, pre = {0};
    fg_buf vloads = {0}, velem = {0}, vexpr = {0}, vpre = {0}, align = {0};
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&args, "%s%s", i ? ", " : "", coords[i]);
    fg_em_decompose(em, em->out, "i", coords, 2, &coord);
    fg_em_tensor(em, em->out, 1);
    pw_read ereads[FG_EM_MAX_PRE];
    em->npre = 0;
    if (vec)
        collect_epilogue_reads(em, vec, ereads);

    if (is_flatten) {
        st = emit_flatten(em, nd, &loads, &expr);
    } else {
        st = fg_em_apply(em, em->main_node, NULL, coords, 2, &loads, &expr);
    }
    /* the epilogue's preloaded inputs, read by the scalar loop one by one */
    for (int k = 0; k < em->npre && st == FG_OK; k++) {
        fg_buf off = {0};
        st = offset_at(em, ereads[k].t, ereads[k].per_channel, coords, &off);
        if (st == FG_OK)
            fg_buf_iprintf(&loads, 2, "const float e%d = fg_load(p.%s + %s);  // %s\n", k,
                           fg_em_tensor(em, ereads[k].t, 0), off.s, em->g->tensors[ereads[k].t].name);
        fg_buf_printf(&pre, ", e%d", k);
        fg_buf_free(&off);
    }

    int oi = rank ? inner_axis(em->ot) : 0, rows = 0;
    if (vec && st == FG_OK) {
        char bstore[FG_MAX_RANK][16];
        const char *const *bcoords = base_coord_names(rank, bstore);
        /* every read, to know whether the vector's first coordinates are needed */
        pw_read mreads[FG_MAX_INPUTS];
        for (int i = 0; i < nd->ninputs; i++)
            mreads[i] = (pw_read){nd->inputs[i], nd->op->inputs[i].per_channel,
                                  nd->inputs[i] >= 0 ? classify(em, nd->inputs[i], nd->op->inputs[i].per_channel, vec)
                                                     : ACC_SAME};
        /* rows: the innermost axis is a multiple of vec (a vector lies in one
         * row), so an element's coordinates are the vector's first ones plus j
         * on that axis; contiguous and uniform reads exist only then */
        rows = em->ot->shape[oi] % vec == 0;
        if (rows) {
            fg_em_decompose(em, em->out, "base", bcoords, 2, &vloads);
            for (int a = 0; a < rank; a++)
                fg_buf_iprintf(&velem, 3, "const fg_i64 %s = %s%s;\n", coords[a], bcoords[a], a == oi ? " + j" : "");
        } else {
            /* the vector's first coordinates, then a carry step per element
             * (no division per element: with shapes as parameters eight
             * 64-bit divisions each were calls that spilled) */
            char sstore[FG_MAX_RANK][16];
            const char *sc[FG_MAX_RANK];
            for (int a = 0; a < rank; a++) {
                snprintf(sstore[a], sizeof sstore[a], "s_%s", coords[a]);
                sc[a] = sstore[a];
            }
            fg_em_decompose(em, em->out, "base", bcoords, 2, &vloads);
            for (int a = 0; a < rank; a++)
                fg_buf_iprintf(&vloads, 2, "fg_i64 %s = %s;   // stepped along the vector\n", sc[a], bcoords[a]);
            if (rank > 1) {
                fg_buf_iprintf(&velem, 3, "if (j > 0) {\n");
                fg_em_step_coords(em, em->out, sc, 4, &velem);
                fg_buf_iprintf(&velem, 3, "}\n");
            } else {
                fg_buf_iprintf(&velem, 3, "%s = %s + j;\n", sc[0], bcoords[0]);
            }
            for (int a = 0; a < rank; a++)
                fg_buf_iprintf(&velem, 3, "const fg_i64 %s = %s;\n", coords[a], sc[a]);
        }
        fg_buf_printf(&align, "fg_aligned16(p.%s)", fg_em_tensor(em, em->out, 1));
        if (rows && !em->opts->specialize) {   /* the shapes are parameters: check what was assumed */
            fg_em_shape(em, "INNER", em->ot->shape[oi]);
            fg_buf_printf(&align, " && INNER %% %d == 0", vec);
        }
        for (int i = 0; i < nd->ninputs && st == FG_OK; i++) {
            if (nd->inputs[i] < 0)
                continue;
            char local[48], name[64];
            fg_em_identifier(nd->op->inputs[i].name, local, sizeof local);
            snprintf(name, sizeof name, "in_%s", local);
            st = emit_vector_read(em, &mreads[i], name, 1, vec, bcoords, coords, &vloads, &velem, &align);
        }
        for (int k = 0; k < em->npre && st == FG_OK; k++) {
            char name[16];
            snprintf(name, sizeof name, "e%d", k);
            st = emit_vector_read(em, &ereads[k], name, 0, vec, bcoords, coords, &vloads, &velem, &align);
            fg_buf_printf(&vpre, ereads[k].acc == ACC_UNIFORM ? ", e%d" : ", e%d[j]", k);
        }
        if (st == FG_OK) {
            em->vec_names = 1;
            st = fg_em_apply(em, em->main_node, NULL, coords, 3, NULL, &vexpr);
            em->vec_names = 0;
        }
    }

    if (st == FG_OK) {
        fg_em_shape(em, "NUMEL", numel);
        fg_em_set(em, "OUT", "%s", fg_em_tensor(em, em->out, 1));
        fg_em_set(em, "VEC", "%d", vec);
        fg_em_set(em, "COORD_ARGS", "%s", args.s);
        /* strip trailing newlines: the template line supplies them */
        fg_buf *text[] = {&loads, &coord, &vloads, &velem};
        for (size_t b = 0; b < FG_COUNTOF(text); b++)
            if (text[b]->len && text[b]->s[text[b]->len - 1] == '\n')
                text[b]->s[--text[b]->len] = 0;
        fg_em_set(em, "COORDS", "%s", coord.s ? coord.s : "");
        fg_em_set(em, "LOADS", "%s", loads.s ? loads.s : "");
        fg_em_set(em, "COMPUTE", "%s", expr.s ? expr.s : "0.0f");
        fg_em_set(em, "PRE", "%s", pre.s ? pre.s : "");
        fg_em_set(em, "VEC_OK", "%s", align.s ? align.s : "false");
        fg_em_set(em, "VLOADS", "%s", vloads.s ? vloads.s : "");
        fg_em_set(em, "VELEM", "%s", velem.s ? velem.s : "");
        fg_em_set(em, "VCOMPUTE", "%s", vexpr.s ? vexpr.s : "0.0f");
        fg_em_set(em, "VPRE", "%s", vpre.s ? vpre.s : "");
        int64_t work = vec ? numel / vec : numel;
        int64_t blocks = (work + threads - 1) / threads;
        if (blocks > 8192)
            blocks = 8192;
        if (blocks < 1)
            blocks = 1;
        em->k->grid[0] = (unsigned)blocks;
        em->k->grid[1] = em->k->grid[2] = 1;
        em->k->block[0] = (unsigned)threads;
        em->k->block[1] = em->k->block[2] = 1;
    }
    fg_buf *all[] = {&loads, &expr, &coord, &args, &pre, &vloads, &velem, &vexpr, &vpre, &align};
    for (size_t b = 0; b < FG_COUNTOF(all); b++)
        fg_buf_free(all[b]);
    return st;
}

/* Capability check (fg_template.check): a flatten main node maps rank >= 2 to rank 2. */
static int check_pointwise(const fg_tcand *c, char *why, size_t whysz)
{
    const fg_node *nd = &c->g->nodes[c->main_node];
    if (nd->op->kind == FG_OPK_FLATTEN) {
        const fg_tensor *x = &c->g->tensors[nd->inputs[0]], *y = &c->g->tensors[nd->output];
        if (x->rank < 2 || y->rank != 2) {
            snprintf(why, whysz, "flatten of rank %d to rank %d", x->rank, y->rank);
            return 0;
        }
    }
    return 1;
}

static const fg_template rows[] = {
    {.name = "pointwise", .family = "pointwise", .order = 10, FG_TEMPLATE_LIMITS,
     .kinds = (1u << FG_OPK_POINTWISE) | (1u << FG_OPK_BATCH_NORM) | (1u << FG_OPK_FLATTEN), .dtypes = FG_DTYPES_ANY,
     .tiles = fg_tile_threads, .check = check_pointwise, .emit = emit_pointwise,
     .summary = "element-wise chain (or flatten), one thread per element, 4-wide when inputs align"},
};
FG_TEMPLATE_FAMILY(pointwise, rows);
