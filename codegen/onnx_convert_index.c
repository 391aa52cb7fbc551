/*
 * onnx_convert_index.c -- the ONNX data-movement operators of computed
 * tensors (rows of onnx_convert.c's operator table, contract in
 * onnx_impl.h): Slice, Split and Gather with constant indices become slice
 * nodes (a Gather of one index also a reshape dropping the axis; indices in
 * runs of arithmetic progression a concat of slices), Gather with computed
 * indices and GatherND with constant ones gather nodes (gather.h), Expand
 * and Tile expand / tile nodes, Pad a pad node (codegen/index_kinds.h).
 * Constant inputs fold before (onnx_fold.c); what a kernel cannot take
 * (computed starts, GatherND's computed indices) is refused with the
 * reason.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"
#include "index_kinds.h"
#include "shape.h"

typedef fg_onnx_nctx nctx;

static fg_attr_value ints_val(const int64_t *v, int n)
{
    fg_attr_value a = {.type = FG_ATTR_INTS, .n = n};
    memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
    return a;
}

/* Input 0 as a tensor of known shape, or -1 (reported). */
static int data_in(nctx *nc)
{
    int x = fg_onnx_nc_tensor(nc, 0);
    if (x < 0)
        fg_onnx_nerr(nc, "input 0 is missing");
    return x;
}

/* A slice node of x (starts, steps, output extents per axis) named after
 * ONNX output slot (suffix: an intermediate); its tensor or -1. */
static int emit_slice(nctx *nc, int x, const int64_t *st, const int64_t *sp, const int64_t *sh, int slot,
                      const char *suffix)
{
    int r = fg_onnx_nc_T(nc, x)->rank;
    static const char *const names[] = {"starts", "steps", "shape"};
    fg_attr_value v[3] = {ints_val(st, r), ints_val(sp, r), ints_val(sh, r)};
    return fg_onnx_nc_emit(nc, "slice", &x, 1, names, v, 3, slot, suffix);
}

/* Whether starts / steps / extents select the whole of x (no node needed). */
static int whole(const fg_tensor *t, const int64_t *st, const int64_t *sp, const int64_t *sh)
{
    for (int d = 0; d < t->rank; d++)
        if (st[d] != 0 || sp[d] != 1 || sh[d] != t->shape[d])
            return 0;
    return 1;
}

/* An int64 list input that must be constant: name it in the refusal. */
static int const_ints(nctx *nc, int i, const char *name, int64_t *out, int max)
{
    if (fg_onnx_nc_has_in(nc, i) && !fg_onnx_nc_const(nc, i))
        return fg_onnx_nerr(nc, "input '%s' is computed; only constant %s are supported (output shapes are "
                            "fixed at load time)", name, name), -1;
    return fg_onnx_nc_ints_in(nc, i, name, 0, out, max);
}

int fg_onnx_op_slice(nctx *nc)
{
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int r = t->rank, old = fg_onnx_nc_opset(nc) < 10;
    int64_t starts[FG_MAX_RANK], ends[FG_MAX_RANK], axes[FG_MAX_RANK], steps[FG_MAX_RANK];
    int ns, ne, na, nk = -2;
    if (old) {
        ns = fg_onnx_nc_attr_ints(nc, "starts", 0, FG_MAX_RANK, starts);
        ne = fg_onnx_nc_attr_ints(nc, "ends", 0, FG_MAX_RANK, ends);
        na = fg_onnx_nc_attr_ints(nc, "axes", 0, FG_MAX_RANK, axes);
        if (ns < 0 || ne < 0 || na < 0)
            return -1;
        if (ns == 0 || ne == 0)
            return fg_onnx_nerr(nc, "needs attributes 'starts' and 'ends'"), -1;
        na = na == 0 ? -2 : na;
    } else {
        if ((ns = const_ints(nc, 1, "starts", starts, FG_MAX_RANK)) == -1 ||
            (ne = const_ints(nc, 2, "ends", ends, FG_MAX_RANK)) == -1 ||
            (na = const_ints(nc, 3, "axes", axes, FG_MAX_RANK)) == -1 ||
            (nk = const_ints(nc, 4, "steps", steps, FG_MAX_RANK)) == -1)
            return -1;
        if (ns == -2 || ne == -2)
            return fg_onnx_nerr(nc, "needs inputs 'starts' and 'ends'"), -1;
    }
    if (ns != ne || (na != -2 && na != ns) || (nk != -2 && nk != ns))
        return fg_onnx_nerr(nc, "starts, ends, axes and steps must have as many values (%d, %d, %d, %d)", ns, ne,
                            na == -2 ? ns : na, nk == -2 ? ns : nk), -1;
    int64_t st[FG_MAX_RANK], sp[FG_MAX_RANK], sh[FG_MAX_RANK];
    int seen[FG_MAX_RANK] = {0};
    for (int d = 0; d < r; d++)
        st[d] = 0, sp[d] = 1, sh[d] = t->shape[d];
    for (int j = 0; j < ns; j++) {
        int64_t a = na == -2 ? j : axes[j];
        if (a < 0)
            a += r;
        if (a < 0 || a >= r || seen[a])
            return fg_onnx_nerr(nc, "axis %lld is out of range for rank %d or repeated",
                                (long long)(na == -2 ? j : axes[j]), r), -1;
        seen[a] = 1;
        int64_t n = t->shape[a], s = starts[j], e = ends[j], k = nk == -2 ? 1 : steps[j], cnt;
        if (k == 0)
            return fg_onnx_nerr(nc, "steps[%d] is 0", j), -1;
        /* negative indices count from the end; then clamped (ONNX Slice) */
        s = s < 0 ? (s < -n ? -1 : s + n) : s;
        e = e < 0 ? (e < -n ? -1 : e + n) : e;
        if (k > 0) {
            s = s < 0 ? 0 : s > n ? n : s;
            e = e < 0 ? 0 : e > n ? n : e;
            cnt = e > s ? (e - s + k - 1) / k : 0;
        } else {
            s = s < 0 ? -1 : s > n - 1 ? n - 1 : s;   /* -1: before the first element, nothing to read */
            e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
            cnt = s > e ? (s - e + (-k) - 1) / (-k) : 0;
        }
        if (cnt < 1)
            return fg_onnx_nerr(nc, "the slice of axis %lld is empty (fusegen tensors have no empty axis)",
                                (long long)a), -1;
        st[a] = s, sp[a] = cnt == 1 ? 1 : k, sh[a] = cnt;
    }
    if (whole(t, st, sp, sh)) {
        fg_onnx_nc_alias(nc, 0);
        return x;
    }
    int y = emit_slice(nc, x, st, sp, sh, 0, NULL);
    if (y >= 0)
        fg_onnx_nc_def_output(nc, 0, y);
    return y;
}

int fg_onnx_op_split(nctx *nc)
{
    const Onnx__NodeProto *n = fg_onnx_nc_node(nc);
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int r = t->rank, nout = (int)n->n_output;
    int64_t axis, sizes[64];
    if (fg_onnx_nc_axis(nc, r, 0, &axis) < 0)
        return -1;
    if (nout < 1 || nout > 64)
        return fg_onnx_nerr(nc, "has %d outputs; 1 to 64 are supported", nout), -1;
    int ns = fg_onnx_nc_opset(nc) < 13 ? fg_onnx_nc_attr_ints(nc, "split", 0, 64, sizes)
                                       : const_ints(nc, 1, "split", sizes, 64);
    if (ns == -1)
        return -1;
    int64_t dim = t->shape[axis];
    if (ns > 0 && ns != -2) {
        int64_t sum = 0;
        if (ns != nout)
            return fg_onnx_nerr(nc, "'split' has %d values for %d outputs", ns, nout), -1;
        for (int i = 0; i < ns; i++) {
            if (sizes[i] < 1)
                return fg_onnx_nerr(nc, "split[%d] = %lld: parts have at least one element (fusegen tensors have "
                                    "no empty axis)", i, (long long)sizes[i]), -1;
            sum += sizes[i];
        }
        if (sum != dim)
            return fg_onnx_nerr(nc, "'split' sums to %lld, axis %lld has size %lld", (long long)sum, (long long)axis,
                                (long long)dim), -1;
    } else {
        int64_t parts = fg_onnx_nc_attr_int(nc, "num_outputs", nout);
        if (parts != nout)
            return fg_onnx_nerr(nc, "num_outputs is %lld but the node has %d outputs", (long long)parts, nout), -1;
        int64_t chunk = (dim + nout - 1) / nout;   /* equal parts, the last one smaller (opset 18) */
        for (int i = 0; i < nout; i++) {
            sizes[i] = dim - i * chunk < chunk ? dim - i * chunk : chunk;
            if (sizes[i] < 1)
                return fg_onnx_nerr(nc, "axis %lld of size %lld cannot be split into %d non-empty parts",
                                    (long long)axis, (long long)dim, nout), -1;
        }
    }
    int64_t st[FG_MAX_RANK], sp[FG_MAX_RANK], sh[FG_MAX_RANK], at = 0;
    for (int d = 0; d < r; d++)
        st[d] = 0, sp[d] = 1, sh[d] = t->shape[d];
    for (int i = 0; i < nout; i++) {
        st[axis] = at, sh[axis] = sizes[i];
        at += sizes[i];
        if (!fg_onnx_nc_out_used(nc, i))
            continue;
        if (whole(t, st, sp, sh)) {
            fg_onnx_nc_def_output(nc, i, x);
            continue;
        }
        int y = emit_slice(nc, x, st, sp, sh, i, NULL);
        if (y < 0)
            return -1;
        fg_onnx_nc_def_output(nc, i, y);
    }
    return 0;
}

/* One maximal run of indices in arithmetic progression from idx[at]: its
 * length (steps 0 cannot be sliced: runs of one). */
static int64_t run_len(const int64_t *idx, int64_t n, int64_t at)
{
    if (at + 1 >= n || idx[at + 1] == idx[at])
        return 1;
    int64_t k = idx[at + 1] - idx[at], len = 2;
    while (at + len < n && idx[at + len] - idx[at + len - 1] == k)
        len++;
    return len;
}

/* A `gather` node (gather.h) of data input 0 by index tensor it. */
static int gather_node(nctx *nc, int it)
{
    int x = data_in(nc);
    if (x < 0 || it < 0)
        return -1;
    fg_dtype dt = fg_onnx_nc_T(nc, it)->dtype;
    if (dt != FG_DTYPE_I64 && dt != FG_DTYPE_I32)
        return fg_onnx_nerr(nc, "input 'indices' is %s; int64 or int32 expected", fg_dtype_name(dt)), -1;
    int ins[2] = {x, it};
    static const char *const names[] = {"axis"};
    int64_t axis = fg_onnx_nc_attr_int(nc, "axis", 0);
    fg_attr_value av = {.type = FG_ATTR_INT, .i = axis, .f = (double)axis};
    return fg_onnx_nc_emit_out(nc, "gather", ins, 2, names, &av, 1);
}

/* Gather: computed indices (an integer tensor) make a `gather` node;
 * constant ones slices of the data (runs of arithmetic progression joined
 * by a concat, a reshape for the index's shape), or a `gather` by the
 * indices as a weight when they form more runs than a concat joins. */
int fg_onnx_op_gather(nctx *nc)
{
    const konst *ik = fg_onnx_nc_const(nc, 1);
    if (!ik)
        return gather_node(nc, fg_onnx_nc_tensor(nc, 1));
    if (!ik->i)
        return fg_onnx_nerr(nc, "input 'indices' must be int32 or int64"), -1;
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int r = t->rank, q = ik->rank;
    int64_t axis;
    if (fg_onnx_nc_axis(nc, r, 0, &axis) < 0)
        return -1;
    if (r - 1 + q > FG_MAX_RANK)
        return fg_onnx_nerr(nc, "the output would have rank %d; at most %d is supported", r - 1 + q, FG_MAX_RANK), -1;
    int64_t n = ik->numel, dim = t->shape[axis], idx[4096];
    if (n < 1)
        return fg_onnx_nerr(nc, "'indices' is empty (fusegen tensors have no empty axis)"), -1;
    if (n > (int64_t)(sizeof idx / sizeof idx[0]))
        return fg_onnx_nerr(nc, "'indices' has %lld values; at most %zu are supported", (long long)n,
                            sizeof idx / sizeof idx[0]), -1;
    for (int64_t j = 0; j < n; j++) {
        idx[j] = ik->i[j] < 0 ? ik->i[j] + dim : ik->i[j];
        if (idx[j] < 0 || idx[j] >= dim)
            return fg_onnx_nerr(nc, "index %lld is out of range for axis %lld of size %lld", (long long)ik->i[j],
                                (long long)axis, (long long)dim), -1;
    }
    /* the output's shape: data[:axis] + indices' shape + data[axis + 1:] */
    int64_t oshape[FG_MAX_RANK + 1];
    int orank = 0;
    for (int d = 0; d < axis; d++)
        oshape[orank++] = t->shape[d];
    for (int d = 0; d < q; d++)
        oshape[orank++] = ik->shape[d];
    for (int d = (int)axis + 1; d < r; d++)
        oshape[orank++] = t->shape[d];
    /* runs of arithmetic progression, one slice each, joined by a concat */
    int64_t st[FG_MAX_RANK], sp[FG_MAX_RANK], sh[FG_MAX_RANK];
    for (int d = 0; d < r; d++)
        st[d] = 0, sp[d] = 1, sh[d] = t->shape[d];
    int parts[FG_MAX_INPUTS], np = 0, same = q == 1;
    for (int64_t at = 0; at < n; np++) {
        int64_t len = run_len(idx, n, at);
        if (np == FG_MAX_INPUTS)
            return gather_node(nc, fg_onnx_nc_tensor(nc, 1));
        st[axis] = idx[at], sp[axis] = len > 1 ? idx[at + 1] - idx[at] : 1, sh[axis] = len;
        char sfx[24];
        snprintf(sfx, sizeof sfx, "_run%d", np);
        int last = at + len == n && np == 0;   /* one run: its slice may be the output itself */
        if (last && same && whole(t, st, sp, sh)) {
            fg_onnx_nc_alias(nc, 0);
            return x;
        }
        parts[np] = emit_slice(nc, x, st, sp, sh, 0, last && same ? NULL : sfx);
        if (parts[np] < 0)
            return -1;
        at += len;
    }
    int y = parts[0];
    if (np > 1) {
        static const char *const names[] = {"axis"};
        fg_attr_value av = {.type = FG_ATTR_INT, .i = axis, .f = (double)axis};
        y = fg_onnx_nc_emit(nc, "concat", parts, np, names, &av, 1, 0, same ? NULL : "_cat");
        if (y < 0)
            return -1;
    }
    if (same) {
        fg_onnx_nc_def_output(nc, 0, y);
        return y;
    }
    /* a scalar index drops the axis, indices of rank above 1 split it: a reshape (a view of the same order) */
    const fg_tensor *yt = fg_onnx_nc_T(nc, y);
    int64_t one = 1;
    int64_t s2[FG_MAX_RANK];
    memcpy(s2, orank ? oshape : &one, sizeof(int64_t) * (size_t)(orank ? orank : 1));
    static const char *const names[] = {"shape"};
    fg_attr_value av = ints_val(s2, orank ? orank : 1);
    int same_shape = yt->rank == (orank ? orank : 1) && !memcmp(yt->shape, s2, sizeof(int64_t) * (size_t)yt->rank);
    int z = same_shape ? y : fg_onnx_nc_emit(nc, "reshape", &y, 1, names, &av, 1, 0, NULL);
    if (z >= 0)
        fg_onnx_nc_def_output(nc, 0, z);
    return z;
}

/* GatherND(data, indices) with constant indices and batch_dims 0: each
 * index tuple of length k names one slice data[i0, .., ik-1, ...]; data
 * viewed as [prod(shape[:k]), shape[k:]...] is gathered along axis 0 by
 * the tuples' linear indices (a weight of indices' shape without its last
 * axis). */
int fg_onnx_op_gather_nd(nctx *nc)
{
    const konst *ik = fg_onnx_nc_const(nc, 1);
    if (fg_onnx_nc_attr_int(nc, "batch_dims", 0) != 0)
        return fg_onnx_nerr(nc, "batch_dims other than 0 is not supported"), -1;
    if (!ik || !ik->i)
        return fg_onnx_nerr(nc, "input 'indices' must be a constant int64 or int32 tensor (computed indices are not "
                            "supported)"), -1;
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int r = t->rank, k = ik->rank ? (int)ik->shape[ik->rank - 1] : 0;
    if (ik->rank < 1 || k < 1 || k > r)
        return fg_onnx_nerr(nc, "indices of shape rank %d with tuples of %d for data of rank %d", ik->rank, k, r), -1;
    int64_t n = ik->numel / k, rows = 1;
    for (int d = 0; d < k; d++)
        rows *= t->shape[d];
    float *lin = fg_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t j = 0; j < n; j++) {
        int64_t v = 0;
        for (int d = 0; d < k; d++) {
            int64_t e = ik->i[j * k + d];
            if (e < 0)
                e += t->shape[d];
            if (e < 0 || e >= t->shape[d]) {
                free(lin);
                return fg_onnx_nerr(nc, "index %lld is out of range for axis %d of size %lld",
                                    (long long)ik->i[j * k + d], d, (long long)t->shape[d]), -1;
            }
            v = v * t->shape[d] + e;
        }
        lin[j] = (float)v;
    }
    if (rows > (1 << 24)) {
        free(lin);
        return fg_onnx_nerr(nc, "the gathered rows number %lld, beyond 2^24", (long long)rows), -1;
    }
    int64_t ishape[FG_MAX_RANK], one = 1;
    int irank = ik->rank - 1;
    memcpy(ishape, ik->shape, sizeof(int64_t) * (size_t)irank);
    char hint[200];
    snprintf(hint, sizeof hint, "%s_idx", fg_onnx_nc_node(nc)->name ? fg_onnx_nc_node(nc)->name : "gather_nd");
    int it = fg_onnx_new_weight(fg_onnx_nc_loader(nc), NULL, hint, FG_DTYPE_I64, irank ? irank : 1,
                                irank ? ishape : &one, lin);
    free(lin);
    /* data as [rows, rest...] */
    int64_t fshape[FG_MAX_RANK];
    int fr = 0;
    fshape[fr++] = rows;
    for (int d = k; d < r; d++)
        fshape[fr++] = t->shape[d];
    int flat = x;
    if (k > 1) {
        static const char *const names[] = {"shape"};
        fg_attr_value av = ints_val(fshape, fr);
        flat = fg_onnx_nc_emit(nc, "reshape", &x, 1, names, &av, 1, 0, "_rows");
        if (flat < 0)
            return -1;
    }
    int ins[2] = {flat, it};
    static const char *const names[] = {"axis"};
    fg_attr_value av = {.type = FG_ATTR_INT, .i = 0, .f = 0};
    return fg_onnx_nc_emit_out(nc, "gather", ins, 2, names, &av, 1);
}

int fg_onnx_op_expand(nctx *nc)
{
    int x = data_in(nc);
    if (x < 0)
        return -1;
    int64_t shape[FG_MAX_RANK];
    int ns = const_ints(nc, 1, "shape", shape, FG_MAX_RANK);
    if (ns == -1)
        return -1;
    if (ns == -2)
        return fg_onnx_nerr(nc, "needs input 'shape'"), -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int64_t out[FG_MAX_RANK];
    char b1[128], b2[128];
    memcpy(out, t->shape, sizeof(int64_t) * (size_t)t->rank);
    int r = ns ? fg_broadcast_shape(out, t->rank, shape, ns) : t->rank;
    if (r < 0)
        return fg_onnx_nerr(nc, "input %s does not broadcast to shape %s",
                            fg_shape_str(t->shape, t->rank, b1, sizeof b1), fg_shape_str(shape, ns, b2, sizeof b2)), -1;
    if (r == t->rank && !memcmp(out, t->shape, sizeof(int64_t) * (size_t)r)) {
        fg_onnx_nc_alias(nc, 0);
        return x;
    }
    static const char *const names[] = {"shape"};
    fg_attr_value av = ints_val(out, r);
    int y = fg_onnx_nc_emit(nc, "expand", &x, 1, names, &av, 1, 0, NULL);
    if (y >= 0)
        fg_onnx_nc_def_output(nc, 0, y);
    return y;
}

int fg_onnx_op_tile(nctx *nc)
{
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int64_t reps[FG_MAX_RANK];
    int n = const_ints(nc, 1, "repeats", reps, FG_MAX_RANK);
    if (n == -1)
        return -1;
    if (n != t->rank)
        return fg_onnx_nerr(nc, "'repeats' has %d values; the input has rank %d", n < 0 ? 0 : n, t->rank), -1;
    int all1 = 1;
    for (int d = 0; d < n; d++) {
        if (reps[d] < 1)
            return fg_onnx_nerr(nc, "repeats[%d] is %lld (fusegen tensors have no empty axis)", d,
                                (long long)reps[d]), -1;
        all1 &= reps[d] == 1;
    }
    if (all1) {
        fg_onnx_nc_alias(nc, 0);
        return x;
    }
    static const char *const names[] = {"reps"};
    fg_attr_value av = ints_val(reps, n);
    int y = fg_onnx_nc_emit(nc, "tile", &x, 1, names, &av, 1, 0, NULL);
    if (y >= 0)
        fg_onnx_nc_def_output(nc, 0, y);
    return y;
}

int fg_onnx_op_pad(nctx *nc)
{
    int x = data_in(nc);
    if (x < 0)
        return -1;
    const fg_tensor *t = fg_onnx_nc_T(nc, x);
    int r = t->rank, old = fg_onnx_nc_opset(nc) < 11;
    int64_t pads[2 * FG_MAX_RANK], axes[FG_MAX_RANK];
    char mb[32];
    const char *mode = fg_onnx_nc_attr_str(nc, "mode", "constant", mb, sizeof mb);
    int m;
    for (m = 0; m < FG_PAD_MODE_COUNT && strcmp(fg_pad_mode_names[m], mode) != 0; m++)
        ;
    if (m == FG_PAD_MODE_COUNT)
        return fg_onnx_nerr(nc, "mode '%s' is not constant, reflect, edge or wrap", mode), -1;
    double pval = 0;
    int np, na = -2;
    if (old) {
        np = fg_onnx_nc_attr_ints(nc, "pads", 0, 2 * FG_MAX_RANK, pads);
        pval = fg_onnx_nc_attr_float(nc, "value", 0.0);
        if (np < 0)
            return -1;
        np = np == 0 ? -2 : np;
    } else {
        if ((np = const_ints(nc, 1, "pads", pads, 2 * FG_MAX_RANK)) == -1 ||
            (na = const_ints(nc, 3, "axes", axes, FG_MAX_RANK)) == -1)
            return -1;
        if (fg_onnx_nc_has_in(nc, 2)) {
            const konst *cv = fg_onnx_nc_const(nc, 2);
            if (!cv)
                return fg_onnx_nerr(nc, "input 'constant_value' is computed; only a constant pad value is "
                                    "supported"), -1;
            if (cv->numel != 1)
                return fg_onnx_nerr(nc, "'constant_value' has %lld values, not one", (long long)cv->numel), -1;
            pval = cv->f ? cv->f[0] : (double)cv->i[0];
        }
    }
    if (np == -2)
        return fg_onnx_nerr(nc, "needs 'pads'"), -1;
    int naxes = na == -2 ? r : na;
    if (np != 2 * naxes)
        return fg_onnx_nerr(nc, "'pads' has %d values; %d axes take %d", np, naxes, 2 * naxes), -1;
    int64_t full[2 * FG_MAX_RANK] = {0};
    int seen[FG_MAX_RANK] = {0}, any = 0;
    for (int j = 0; j < naxes; j++) {
        int64_t a = na == -2 ? j : axes[j];
        if (a < 0)
            a += r;
        if (a < 0 || a >= r || seen[a])
            return fg_onnx_nerr(nc, "axis %lld is out of range for rank %d or repeated",
                                (long long)(na == -2 ? j : axes[j]), r), -1;
        seen[a] = 1;
        full[a] = pads[j];
        full[a + r] = pads[j + naxes];
        any |= pads[j] != 0 || pads[j + naxes] != 0;
    }
    if (!any) {
        fg_onnx_nc_alias(nc, 0);
        return x;
    }
    if (2 * r > FG_MAX_INTS)
        return fg_onnx_nerr(nc, "input of rank %d: Pad of a computed tensor takes at most rank %d", r,
                            FG_MAX_INTS / 2), -1;
    static const char *const names[] = {"pads", "mode", "value"};
    fg_attr_value av[3] = {ints_val(full, 2 * r), {.type = FG_ATTR_STRING, .s = fg_pad_mode_names[m]},
                           {.type = FG_ATTR_FLOAT, .f = pval}};
    int y = fg_onnx_nc_emit(nc, "pad", &x, 1, names, av, 3, 0, NULL);
    if (y >= 0)
        fg_onnx_nc_def_output(nc, 0, y);
    return y;
}
