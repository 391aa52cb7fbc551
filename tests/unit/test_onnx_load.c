/* test_onnx_load.c -- the ONNX loader (codegen/onnx_*.c) on models built here
 * with the generated protobuf-c code: the graph it makes for a small model,
 * symbolic dimensions, the encodings of initializers, and its error paths
 * (corrupt and truncated protobuf, deep nesting, the one error listing
 * every unsupported operator, external data that leaves the model's
 * directory or runs past its file, truncated raw_data, unknown inputs,
 * opsets out of range).  Numerics against onnxruntime are in
 * tests/onnx/test_onnx_models.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx/onnx.pb-c.h>

#include "onnx_load.h"
#include "testutil.h"

/* ---- building models -------------------------------------------------------- */

#define MAXN 8

typedef struct mb {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto ops, *opsp[1];
    Onnx__NodeProto nodes[MAXN], *nodep[MAXN];
    char *nin[MAXN][4], *nout[MAXN][2];
    Onnx__AttributeProto attrs[MAXN], *attrp[MAXN][1];
    Onnx__TensorProto inits[MAXN], *initp[MAXN];
    Onnx__StringStringEntryProto ext[MAXN][3], *extp[MAXN][3];
    Onnx__ValueInfoProto vin, vout, *vinp[1], *voutp[1];
    Onnx__TypeProto tin, tout;
    Onnx__TypeProto__Tensor ttin, ttout;
    Onnx__TensorShapeProto shp;
    Onnx__TensorShapeProto__Dimension dims[4], *dimp[4];
    int64_t wdims[MAXN][4];
} mb;

/* A model: input x [batch, 4, 6, 6] (dim 0 symbolic "batch"), output y, no
 * nodes yet, opset 13. */
static void mb_init(mb *b)
{
    memset(b, 0, sizeof *b);
    b->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->ops = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    b->ops.domain = "";
    b->ops.has_version = 1;
    b->ops.version = 13;
    b->opsp[0] = &b->ops;
    b->m.n_opset_import = 1;
    b->m.opset_import = b->opsp;
    b->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    b->g.name = "test";
    b->m.graph = &b->g;
    b->g.node = b->nodep;
    b->g.initializer = b->initp;
    int64_t shape[4] = {0, 4, 6, 6};
    for (int d = 0; d < 4; d++) {
        b->dims[d] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (d == 0) {
            b->dims[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            b->dims[d].dim_param = "batch";
        } else {
            b->dims[d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            b->dims[d].dim_value = shape[d];
        }
        b->dimp[d] = &b->dims[d];
    }
    b->shp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    b->shp.n_dim = 4;
    b->shp.dim = b->dimp;
    b->ttin = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    b->ttin.has_elem_type = 1;
    b->ttin.elem_type = 1;
    b->ttin.shape = &b->shp;
    b->tin = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    b->tin.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->tin.tensor_type = &b->ttin;
    b->vin = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->vin.name = "x";
    b->vin.type = &b->tin;
    b->vinp[0] = &b->vin;
    b->g.n_input = 1;
    b->g.input = b->vinp;
    b->ttout = b->ttin;
    b->ttout.shape = NULL;
    b->tout = b->tin;
    b->tout.tensor_type = &b->ttout;
    b->vout = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->vout.name = "y";
    b->vout.type = &b->tout;
    b->voutp[0] = &b->vout;
    b->g.n_output = 1;
    b->g.output = b->voutp;
}

/* Adds a node op(in...) -> out; returns it. */
static Onnx__NodeProto *mb_node(mb *b, const char *name, const char *op, const char *in0, const char *in1,
                                const char *out)
{
    int i = (int)b->g.n_node++;
    Onnx__NodeProto *n = &b->nodes[i];
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->name = (char *)name;
    n->op_type = (char *)op;
    b->nin[i][0] = (char *)in0;
    b->nin[i][1] = (char *)in1;
    n->n_input = in1 ? 2 : 1;
    n->input = b->nin[i];
    b->nout[i][0] = (char *)out;
    n->n_output = 1;
    n->output = b->nout[i];
    b->nodep[i] = n;
    return n;
}

static void mb_int_attr(mb *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    int i = (int)(n - b->nodes);
    Onnx__AttributeProto *a = &b->attrs[i];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    b->attrp[i][0] = a;
    n->n_attribute = 1;
    n->attribute = b->attrp[i];
}

/* Adds a float initializer of the given dims with raw_data (bytes may be
 * fewer than the shape needs: truncation tests). */
static Onnx__TensorProto *mb_init_raw(mb *b, const char *name, int rank, const int64_t *dims, const void *raw,
                                      size_t bytes)
{
    int i = (int)b->g.n_initializer++;
    Onnx__TensorProto *t = &b->inits[i];
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = 1;
    memcpy(b->wdims[i], dims, sizeof(int64_t) * (size_t)rank);
    t->n_dims = (size_t)rank;
    t->dims = b->wdims[i];
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.data = (uint8_t *)raw;
        t->raw_data.len = bytes;
    }
    b->initp[i] = t;
    return t;
}

/* Marks initializer t as external: location, offset, length (-1: absent). */
static void mb_external(mb *b, Onnx__TensorProto *t, const char *location, const char *offset, const char *length)
{
    int i = (int)(t - b->inits), k = 0;
    const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {location, offset, length};
    for (int j = 0; j < 3; j++) {
        if (!vals[j])
            continue;
        b->ext[i][k] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        b->ext[i][k].key = (char *)keys[j];
        b->ext[i][k].value = (char *)vals[j];
        b->extp[i][k] = &b->ext[i][k];
        k++;
    }
    t->n_external_data = (size_t)k;
    t->external_data = b->extp[i];
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->has_raw_data = 0;
}

static uint8_t *mb_pack(mb *b, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = malloc(*len + 1);
    onnx__model_proto__pack(&b->m, buf);
    return buf;
}

/* Loads b from memory (base_dir may be NULL). */
static fg_status mb_load(fg_context *ctx, mb *b, const char *base_dir, const fg_onnx_options *o0, fg_graph **g)
{
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    fg_onnx_options o = o0 ? *o0 : (fg_onnx_options){0};
    o.base_dir = base_dir;
    fg_status st = fg_graph_load_onnx_memory(ctx, "m.onnx", buf, len, &o, g);
    free(buf);
    return st;
}

static float wvals[6 * 4 * 3 * 3];

/* conv (W [6,4,3,3], pads 1) -> relu: the basic model. */
static void mb_conv_relu(mb *b)
{
    mb_init(b);
    static const int64_t wd[4] = {6, 4, 3, 3};
    for (size_t i = 0; i < sizeof wvals / sizeof wvals[0]; i++)
        wvals[i] = (float)i * 0.01f;
    mb_init_raw(b, "W", 4, wd, wvals, sizeof wvals);
    mb_node(b, "conv0", "Conv", "x", "W", "c");
    mb_node(b, "relu0", "Relu", "c", NULL, "y");
}

static fg_context *g_ctx;

static int setup(void **state)
{
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int teardown(void **state)
{
    fg_context_free(g_ctx);
    return 0;
}

/* ---- tests -------------------------------------------------------------------- */

static void test_basic_graph(void **state)
{
    mb b;
    mb_conv_relu(&b);
    fg_graph *g = NULL;
    fg_context_clear_errors(g_ctx);
    fg_status st = mb_load(g_ctx, &b, NULL, NULL, &g);
    if (st)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(g->nnodes, 2);
    assert_string_equal(g->nodes[0].op->name, "conv2d");
    assert_string_equal(g->nodes[1].op->name, "relu");
    int x = fg_graph_find_tensor(g, "x"), w = fg_graph_find_tensor(g, "W"), y = fg_graph_find_tensor(g, "y");
    assert_true(x >= 0 && w >= 0 && y >= 0);
    assert_true(g->tensors[x].is_input && g->tensors[w].is_weight && g->tensors[y].is_output);
    assert_int_equal(g->tensors[x].shape[0], 1);   /* dim_param default */
    assert_int_equal(g->tensors[y].shape[2], 4);   /* no pads: 6 - 3 + 1 */
    assert_float_equal(g->tensors[w].data[7], 0.07f, 1e-7);
    fg_graph_free(g);

    /* --dim batch=3, and padding from the attribute */
    mb_int_attr(&b, &b.nodes[0], "group", 1);
    fg_onnx_dim d = {"batch", 3};
    fg_onnx_options o = {.ndims = 1, .dims = &d};
    assert_int_equal(mb_load(g_ctx, &b, NULL, &o, &g), FG_OK);
    assert_int_equal(g->tensors[fg_graph_find_tensor(g, "y")].shape[0], 3);
    fg_graph_free(g);

    /* initializers listed as graph inputs (IR < 4 style), used or not, are weights, not inputs */
    mb_conv_relu(&b);
    static const int64_t ud[1] = {2};
    static const float uv[2] = {1, 2};
    mb_init_raw(&b, "U", 1, ud, uv, sizeof uv);
    Onnx__ValueInfoProto vw = b.vin, vu = b.vin, *ins3[3] = {&b.vin, &vw, &vu};
    vw.name = "W";
    vu.name = "U";
    b.g.n_input = 3;
    b.g.input = ins3;
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_OK);
    assert_int_equal(g->ninputs, 1);
    assert_true(g->tensors[fg_graph_find_tensor(g, "W")].is_weight);
    assert_int_equal(fg_graph_find_tensor(g, "U"), -1);
    fg_graph_free(g);

    /* fg_graph_parse recognises serialized ONNX */
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    assert_int_equal(fg_graph_parse(g_ctx, "p.onnx", (const char *)buf, len, &g), FG_OK);
    fg_graph_free(g);
    assert_true(fg_onnx_is_model_data(buf, len));
    free(buf);
}

static void test_corrupt_protobuf(void **state)
{
    fg_graph *g = (fg_graph *)1;
    fg_context_clear_errors(g_ctx);
    /* field 7 (graph), length-delimited, length far past the end */
    static const uint8_t bad[] = {0x08, 0x08, 0x3a, 0xff, 0xff, 0x03, 0x0a};
    assert_int_equal(fg_graph_load_onnx_memory(g_ctx, "bad.onnx", bad, sizeof bad, NULL, &g), FG_ERR_INPUT);
    assert_null(g);
    assert_true(tu_has_error(g_ctx, "bad.onnx: error: not a valid ONNX model"));

    /* a valid model cut short */
    mb b;
    mb_conv_relu(&b);
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    fg_context_clear_errors(g_ctx);
    assert_int_equal(fg_graph_load_onnx_memory(g_ctx, "cut.onnx", buf, len - 7, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "cut.onnx: error: not a valid ONNX model"));
    free(buf);

    /* messages nested far deeper than any model: refused before decoding.
     * Inside model.graph: GraphProto.node (field 1) -> NodeProto.attribute
     * (5) -> AttributeProto.g (6) -> GraphProto.node ..., built inside out. */
    fg_buf wire = {0};
    /* nest 200 levels: model.graph(7) -> node(1) -> attribute(5) -> g(6) -> node ... */
    char *msg = NULL;
    size_t mlen = 0;
    for (int k = 0; k < 200; k++) {
        static const uint8_t t[3] = {0x0a, 0x2a, 0x32}; /* node, attribute, g (outside in) */
        uint8_t tag = t[(199 - k) % 3];
        uint8_t hdr[12];
        int h = 0;
        hdr[h++] = tag;
        size_t v = mlen;
        do {
            hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            v >>= 7;
        } while (v);
        char *nm = malloc(mlen + (size_t)h + 1);
        memcpy(nm, hdr, (size_t)h);
        if (mlen)
            memcpy(nm + h, msg, mlen);
        free(msg);
        msg = nm;
        mlen += (size_t)h;
    }
    /* model: ir_version 8, then graph (field 7) holding the chain */
    fg_buf_putn(&wire, "\x08\x08\x3a", 3);
    {
        uint8_t hdr[12];
        int h = 0;
        size_t v = mlen;
        do {
            hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            v >>= 7;
        } while (v);
        fg_buf_putn(&wire, (const char *)hdr, (size_t)h);
    }
    fg_buf_putn(&wire, msg, mlen);
    free(msg);
    fg_context_clear_errors(g_ctx);
    assert_int_equal(fg_graph_load_onnx_memory(g_ctx, "deep.onnx", wire.s, wire.len, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "nest more than 64 deep"));
    fg_buf_free(&wire);
    fg_context_clear_errors(g_ctx);
}

static void test_unsupported_ops(void **state)
{
    mb b;
    mb_init(&b);
    mb_node(&b, "sm1", "Hardmax", "x", NULL, "s");
    mb_node(&b, "tr", "LpNormalization", "s", NULL, "t");
    mb_node(&b, "sm2", "Hardmax", "t", NULL, "u");
    Onnx__NodeProto *c = mb_node(&b, "custom", "FusedConv", "u", NULL, "y");
    c->domain = "com.microsoft";
    fg_graph *g = NULL;
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_int_equal(fg_context_error_count(g_ctx), 1);
    assert_true(tu_has_error(g_ctx, "m.onnx: error: unsupported operators: Hardmax (node 0 'sm1', node 2 'sm2'); "
                                    "LpNormalization (node 1 'tr'); com.microsoft.FusedConv (node 3 'custom')"));

    /* an unsupported attribute and an unsupported value: both reported, located by node */
    mb_init(&b);
    Onnx__NodeProto *r = mb_node(&b, "r", "Relu", "x", NULL, "r1");
    mb_int_attr(&b, r, "bogus", 1);
    Onnx__NodeProto *bn = mb_node(&b, "p", "MaxPool", "x", NULL, "y");
    mb_int_attr(&b, bn, "storage_order", 1);
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "node 0 'r' (Relu): attribute 'bogus' is not supported"));
    assert_true(tu_has_error(g_ctx, "node 1 'p' (MaxPool): needs attribute 'kernel_shape'"));
    fg_context_clear_errors(g_ctx);
}

static void test_truncated_data(void **state)
{
    mb b;
    mb_init(&b);
    static const int64_t d[4] = {6, 4, 3, 3};
    static float few[10];
    mb_init_raw(&b, "W", 4, d, few, sizeof few);
    mb_node(&b, "conv0", "Conv", "x", "W", "y");
    fg_graph *g = NULL;
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "initializer 'W': raw_data holds 40 bytes but 216 elements of FLOAT need 864"));

    /* typed field with too few values */
    mb_init(&b);
    Onnx__TensorProto *t = mb_init_raw(&b, "W", 4, d, NULL, 0);
    t->n_float_data = 10;
    t->float_data = few;
    mb_node(&b, "conv0", "Conv", "x", "W", "y");
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "initializer 'W': holds 10 values but its shape needs 216"));

    /* negative dimension */
    static const int64_t neg[2] = {4, -1};
    mb_init(&b);
    mb_init_raw(&b, "k", 2, neg, few, 0);
    mb_node(&b, "a", "Add", "x", "k", "y");
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "initializer 'k': dimensions out of range"));
    fg_context_clear_errors(g_ctx);
}

static void test_external_data(void **state)
{
    char *dir = tu_tmpdir(), *outside = tu_tmpdir();
    char *sub = fg_path_join(dir, "model");
    fg_mkdir_p(sub, 0755);
    /* the weights: 6*4*3*3 floats at offset 16 */
    size_t bytes = 16 + sizeof wvals;
    char *blob = calloc(1, bytes);
    for (size_t i = 0; i < sizeof wvals / sizeof wvals[0]; i++)
        wvals[i] = (float)i * 0.5f;
    memcpy(blob + 16, wvals, sizeof wvals);
    char *wpath = fg_path_join(sub, "w.bin"), *opath = fg_path_join(outside, "secret.bin");
    FILE *f = fopen(wpath, "wb");
    fwrite(blob, 1, bytes, f);
    fclose(f);
    f = fopen(opath, "wb");
    fwrite(blob, 1, bytes, f);
    fclose(f);
    char *link = fg_path_join(sub, "link.bin");
    assert_int_equal(symlink(opath, link), 0);

    mb b;
    mb_init(&b);
    static const int64_t d[4] = {6, 4, 3, 3};
    Onnx__TensorProto *t = mb_init_raw(&b, "W", 4, d, NULL, 0);
    mb_node(&b, "conv0", "Conv", "x", "W", "y");
    fg_graph *g = NULL;
    char len_s[32];
    snprintf(len_s, sizeof len_s, "%zu", sizeof wvals);

    mb_external(&b, t, "w.bin", "16", len_s);
    fg_context_clear_errors(g_ctx);
    fg_status st = mb_load(g_ctx, &b, sub, NULL, &g);
    if (st)
        tu_dump_errors(g_ctx);
    assert_int_equal(st, FG_OK);
    assert_float_equal(g->tensors[fg_graph_find_tensor(g, "W")].data[5], 2.5f, 0);
    fg_graph_free(g);

    /* also through a file: resolved beside the model */
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    char *mpath = fg_path_join(sub, "m.onnx");
    f = fopen(mpath, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    free(buf);
    assert_int_equal(fg_graph_load(g_ctx, mpath, &g), FG_OK);
    fg_graph_free(g);
    assert_true(fg_onnx_is_model_file(mpath));

    struct {
        const char *loc, *off, *len, *msg;
    } bad[] = {
        {"../secret.bin", "16", len_s, "has a '..' component (refused"},
        {"link.bin", "16", len_s, "is a symbolic link (refused"},
        {opath, "16", len_s, "is an absolute path"},
        {"w.bin", "16", "12", "external data length 12 does not match 216 elements"},
        {"w.bin", "100", len_s, "the tensor needs 864 at offset 100"},
        {"w.bin", "-4", len_s, "external data offset '-4' is not a non-negative integer"},
        {"missing.bin", NULL, NULL, "No such file or directory"},
        {"", NULL, NULL, "external data without a location"},
    };
    char escaped[300];
    snprintf(escaped, sizeof escaped, "../../%s/secret.bin", strrchr(outside, '/') + 1);
    bad[0].loc = escaped;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mb_external(&b, t, bad[i].loc, bad[i].off, bad[i].len);
        fg_context_clear_errors(g_ctx);
        st = mb_load(g_ctx, &b, sub, NULL, &g);
        if (st != FG_ERR_INPUT || !tu_has_error(g_ctx, bad[i].msg)) {
            fprintf(stderr, "case %zu (%s): want '%s'\n", i, bad[i].loc, bad[i].msg);
            tu_dump_errors(g_ctx);
        }
        assert_int_equal(st, FG_ERR_INPUT);
        assert_true(tu_has_error(g_ctx, bad[i].msg));
    }
    /* from memory without a base directory */
    mb_external(&b, t, "w.bin", "16", len_s);
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "without a base directory"));
    fg_context_clear_errors(g_ctx);
    free(blob);
    free(wpath);
    free(opath);
    free(link);
    free(mpath);
    free(sub);
    tu_rmtree(dir);
    tu_rmtree(outside);
    free(dir);
    free(outside);
}

static void test_model_errors(void **state)
{
    mb b;
    fg_graph *g = NULL;
    /* opset out of range */
    mb_conv_relu(&b);
    b.ops.version = 6;
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "opset 6 is not supported: this importer knows opsets 7 to"));
    /* an input nobody produces */
    mb_init(&b);
    mb_node(&b, "r", "Relu", "nothing", NULL, "y");
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "node 0 'r' (Relu): input 'nothing' is not a graph input, an initializer"));
    /* a --dim the model does not have */
    mb_conv_relu(&b);
    fg_onnx_dim d = {"seq", 4};
    fg_onnx_options o = {.ndims = 1, .dims = &d};
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, &o, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "dimension 'seq' is not a symbolic dimension of the model's inputs (it has 'batch')"));
    /* a uint8 input */
    mb_conv_relu(&b);
    b.ttin.elem_type = 2;
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "graph input 'x' has element type UINT8"));
    /* shape errors from inference name the node */
    mb_init(&b);
    static const int64_t d2[4] = {6, 5, 3, 3};
    static float w[6 * 5 * 9];
    mb_init_raw(&b, "W", 4, d2, w, sizeof w);
    mb_node(&b, "conv0", "Conv", "x", "W", "y");
    fg_context_clear_errors(g_ctx);
    assert_int_equal(mb_load(g_ctx, &b, NULL, NULL, &g), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "conv2d 'conv0': input has 4 channels but weight expects 5"));
    /* API arguments */
    fg_context_clear_errors(g_ctx);
    assert_int_equal(fg_graph_load_onnx(g_ctx, NULL, NULL, &g), FG_ERR_INPUT);
    assert_int_equal(fg_graph_load_onnx(g_ctx, "/nonexistent/m.onnx", NULL, &g), FG_ERR_IO);
    fg_onnx_options bad = {.ndims = 2, .dims = NULL};
    assert_int_equal(fg_graph_load_onnx_memory(g_ctx, "x", "\x08\x01", 2, &bad, &g), FG_ERR_INPUT);
    fg_context_clear_errors(g_ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_graph),       cmocka_unit_test(test_corrupt_protobuf),
        cmocka_unit_test(test_unsupported_ops),   cmocka_unit_test(test_truncated_data),
        cmocka_unit_test(test_external_data),     cmocka_unit_test(test_model_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
