/*
 * onnx_convert_1d.c -- 1-D window operators (Conv, ConvTranspose, MaxPool,
 * AveragePool, GlobalAveragePool, GlobalMaxPool on [N, C, L]) imported as
 * their 2-D forms with H = 1: the input is viewed as [N, C, 1, L], a weight
 * [M, C/g, K] as [M, C/g, 1, K] (a constant is re-shaped at load time), the
 * window attributes get an H entry that leaves H alone (kernel, stride and
 * dilation 1, no padding), the node is converted by its 2-D converter, and
 * its [N, M, 1, L'] result is viewed as [N, M, L'].  The two views are
 * `reshape` nodes of the same element order, which the planner reads
 * through as input maps where a convolution consumes them (rules/shuffle.yaml)
 * and otherwise fuses into the neighbouring copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"
#include "diag.h"

/* The value name standing for the 2-D view of ONNX name name (interned). */
static const char *view_name(loader *L, const char *name, const char *sfx)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s", name, sfx);
    return fg_intern(L->ctx, buf);
}

/* Tensor (or constant) of ONNX input i of rank 3 viewed with a 1 inserted
 * before its last axis, recorded under a new value name returned in *name;
 * 0 on an error (reported). */
static int lift_input(struct nctx *nc, int i, const char **name)
{
    loader *L = fg_onnx_nc_loader(nc);
    const Onnx__NodeProto *n = fg_onnx_nc_node(nc);
    const char *iname = n->input[i];
    *name = view_name(L, iname, ".h1");
    fg_onnx_const *k = fg_onnx_nc_in_const(nc, i);
    if (k) {
        if (k->rank != 3)
            return fg_onnx_nc_err(nc, "input %d has rank %d; a 1-D window operator reads rank 3", i, k->rank), 0;
        int64_t shape[4] = {k->shape[0], k->shape[1], 1, k->shape[2]};
        size_t cnt = (size_t)k->numel + 1;
        float *f = k->f ? memcpy(fg_xmalloc(sizeof(float) * cnt), k->f, sizeof(float) * (size_t)k->numel) : NULL;
        int64_t *iv = k->i ? memcpy(fg_xmalloc(sizeof(int64_t) * cnt), k->i, sizeof(int64_t) * (size_t)k->numel) : NULL;
        int c = fg_onnx_new_const(L, *name, k->dtype, 4, shape, f, iv);
        fg_onnx_vset(&L->values, *name, V_CONST, c);
        return 1;
    }
    int t = fg_onnx_nc_in_tensor(nc, i);
    if (t < 0)
        return fg_onnx_nc_failed(nc) ? 0 : (fg_onnx_nc_err(nc, "input %d is missing", i), 0);
    const fg_tensor *tt = fg_onnx_nc_T(nc, t);
    if (tt->rank != 3)
        return fg_onnx_nc_err(nc, "input %d has rank %d; a 1-D window operator reads rank 3", i, tt->rank), 0;
    const char *names[1] = {"shape"};
    fg_attr_value v = {.type = FG_ATTR_INTS, .n = 4, .ints = {tt->shape[0], tt->shape[1], 1, tt->shape[2]}};
    int r = fg_onnx_nc_emit(nc, "reshape", &t, 1, names, &v, 1, 0, i == 0 ? ".h1" : ".w_h1");
    if (r < 0)
        return 0;
    fg_onnx_vset(&L->values, *name, V_TENSOR, r);
    return 1;
}

/* The 2-D form of a window attribute a of the 1-D node in *out (its ints
 * in ints, which the caller frees): an H entry of `fill` before each
 * spatial value (pads [b, e] -> [0, b, 0, e]; output_shape [L] -> [1, L],
 * [N, C, L] -> [N, C, 1, L]).  Attributes of another count are left as
 * they are (the 2-D converter reports them). */
static void lift_attr(const Onnx__AttributeProto *a, Onnx__AttributeProto *out, int64_t **ints)
{
    *out = *a;
    *ints = NULL;
    if (!a->name || !a->has_type || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return;
    int64_t v[8];
    size_t m = 0;
    const int64_t *x = a->ints;
    if (strcmp(a->name, "pads") == 0 && a->n_ints == 2) {
        v[0] = 0, v[1] = x[0], v[2] = 0, v[3] = x[1], m = 4;
    } else if (strcmp(a->name, "output_shape") == 0 && (a->n_ints == 1 || a->n_ints == 3)) {
        for (size_t j = 0; j + 1 < a->n_ints; j++)
            v[m++] = x[j];
        v[m++] = 1;
        v[m++] = x[a->n_ints - 1];
    } else if (a->n_ints == 1 && (strcmp(a->name, "kernel_shape") == 0 || strcmp(a->name, "strides") == 0 ||
                                  strcmp(a->name, "dilations") == 0 || strcmp(a->name, "output_padding") == 0)) {
        v[0] = strcmp(a->name, "output_padding") == 0 ? 0 : 1, v[1] = x[0], m = 2;
    } else {
        return;
    }
    *ints = fg_xmalloc(sizeof(int64_t) * m);
    memcpy(*ints, v, sizeof(int64_t) * m);
    out->ints = *ints;
    out->n_ints = m;
}

int fg_onnx_lift_1d(struct nctx *nc, int (*conv2d)(struct nctx *), int weighted)
{
    loader *L = fg_onnx_nc_loader(nc);
    const Onnx__NodeProto *n = fg_onnx_nc_node(nc);
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        return fg_onnx_nc_err(nc, "output 0 is missing"), -1;
    char *ins[3] = {NULL, NULL, NULL};
    size_t nins = n->n_input < 3 ? n->n_input : 3;
    for (size_t i = 0; i < nins; i++)
        ins[i] = n->input[i];
    const char *xv, *wv;
    if (!lift_input(nc, 0, &xv))
        return -1;
    ins[0] = (char *)xv;
    if (weighted && nins > 1 && fg_onnx_nc_has_in(nc, 1)) {
        if (!lift_input(nc, 1, &wv))
            return -1;
        ins[1] = (char *)wv;
    }
    char *outs[1] = {(char *)view_name(L, n->output[0], ".h1")};
    Onnx__AttributeProto *attrs = fg_xcalloc(n->n_attribute + 1, sizeof *attrs);
    Onnx__AttributeProto **aptr = fg_xcalloc(n->n_attribute + 1, sizeof *aptr);
    int64_t **owned = fg_xcalloc(n->n_attribute + 1, sizeof *owned);
    for (size_t j = 0; j < n->n_attribute; j++) {
        lift_attr(n->attribute[j], &attrs[j], &owned[j]);
        aptr[j] = &attrs[j];
    }
    Onnx__NodeProto n2 = *n;
    n2.input = ins;
    n2.n_input = nins;
    n2.output = outs;
    n2.n_output = 1;
    n2.attribute = aptr;
    fg_onnx_nc_set_node(nc, &n2);
    int y4 = conv2d(nc);
    fg_onnx_nc_set_node(nc, n);
    for (size_t j = 0; j < n->n_attribute; j++)
        free(owned[j]);
    free(owned);
    free(aptr);
    free(attrs);
    if (y4 < 0 || fg_onnx_nc_failed(nc))
        return -1;
    value *v = fg_onnx_vfind(L->values, outs[0]);
    if (!v || v->kind != V_TENSOR)
        return fg_onnx_nc_err(nc, "the 2-D form gave no tensor"), -1;
    const fg_tensor *yt = fg_onnx_nc_T(nc, v->idx);
    if (yt->rank != 4 || yt->shape[2] != 1)
        return fg_onnx_nc_err(nc, "the 2-D form's result is not [N, C, 1, L]"), -1;
    const char *names[1] = {"shape"};
    fg_attr_value sv = {.type = FG_ATTR_INTS, .n = 3, .ints = {yt->shape[0], yt->shape[1], yt->shape[3]}};
    int y = v->idx;
    return fg_onnx_nc_emit_out(nc, "reshape", &y, 1, names, &sv, 1);
}
