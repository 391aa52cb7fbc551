/*
 * test_open_race.c -- files beside a model or graph are opened once
 * (codegen/safe_open.c): while a graph with a `file:` weight, and an ONNX
 * model with external data, are loaded again and again, a second thread
 * swaps the weight file for a symbolic link to a file outside the directory
 * and back (atomic renames, so the name always exists).  Each load must
 * either succeed with the bytes of the file inside the directory or fail
 * with a clear error; the outside file's bytes must never be loaded.
 * FUSEGEN_RACE_ITERS sets the number of loads (default 5000 each; the old
 * check-then-open code loaded the outside bytes in 0 to 52 of 10000 loads,
 * 4 and 18 of 2000, on a busy 2-core machine: it depends on how often the
 * swapping thread gets to run).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx/onnx.pb-c.h>

#include "testutil.h"
#include "weights_file.h"

#define INSIDE 1.0f
#define OUTSIDE 7.0f

static fg_context *g_ctx;

/* The swapping thread: name alternates between a hard link of keep (the
 * inside file) and a symbolic link to outside, until stop is set. */
typedef struct swapper {
    const char *dir, *name, *keep, *outside;
    volatile int stop;
    long swaps;
} swapper;

static void *swap_loop(void *arg)
{
    swapper *s = arg;
    char *target = fg_path_join(s->dir, s->name), *keep = fg_path_join(s->dir, s->keep);
    char *tl = fg_path_join(s->dir, "swap.lnk"), *tr = fg_path_join(s->dir, "swap.reg");
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
        unlink(tl);
        if (symlink(s->outside, tl) == 0 && rename(tl, target) == 0)
            s->swaps++;
        unlink(tr);
        if (link(keep, tr) == 0 && rename(tr, target) == 0)
            s->swaps++;
    }
    free(target), free(keep), free(tl), free(tr);
    return NULL;
}

static int iterations(void)
{
    const char *e = getenv("FUSEGEN_RACE_ITERS");
    int n = e ? atoi(e) : 0;
    return n > 0 ? n : 5000;
}

/* Loads path n times while s swaps; weight names the tensor to check.
 * Fails the test when a load returns the outside bytes or fails without
 * saying why. */
static void race(const char *path, const char *weight, swapper *s)
{
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, swap_loop, s), 0);
    int n = iterations(), ok = 0, refused = 0, outside = 0;
    for (int i = 0; i < n; i++) {
        fg_graph *g = NULL;
        fg_context_clear_errors(g_ctx);
        fg_status st = fg_graph_load(g_ctx, path, &g);
        if (st == FG_OK) {
            const fg_tensor *t = &g->tensors[fg_graph_find_tensor(g, weight)];
            if (t->data[0] == OUTSIDE)
                outside++;
            else if (t->data[0] == INSIDE)
                ok++;
            else
                fail_msg("load %d: weight '%s' holds %g, neither file's value", i, weight, (double)t->data[0]);
            fg_graph_free(g);
        } else {
            assert_null(g);
            if (!tu_has_error(g_ctx, "is a symbolic link (refused")) {
                tu_dump_errors(g_ctx);
                fail_msg("load %d failed without the expected reason", i);
            }
            refused++;
        }
    }
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    fprintf(stderr, "%s: %d loads: %d with the inside bytes, %d refused, %d with the OUTSIDE bytes (%ld swaps)\n",
            path, n, ok, refused, outside, s->swaps);
    assert_int_equal(outside, 0);
    assert_int_equal(ok + refused, n);
}

/* An .npy file of 4 float32 values v. */
static void write_npy4(const char *path, float v)
{
    float d[4] = {v, v, v, v};
    char why[200];
    assert_int_equal(fg_npy_write(path, FG_NPY_F32, 1, (int64_t[]){4}, d, why, sizeof why), 0);
}

static void test_yaml_weight_race(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *out = tu_tmpdir();
    char *keep = fg_path_join(dir, "keep.npy"), *w = fg_path_join(dir, "w.npy"), *o = fg_path_join(out, "o.npy");
    write_npy4(keep, INSIDE);
    write_npy4(o, OUTSIDE);
    assert_int_equal(link(keep, w), 0);
    char *g = tu_write(dir, "g.yaml", "graph: race\ninputs: [ { name: x, shape: [4] } ]\n"
                                      "weights:\n  - { name: w, file: w.npy }\n"
                                      "nodes:\n  - { name: a, op: add, inputs: [x, w] }\noutputs: [a]\n");
    swapper s = {.dir = dir, .name = "w.npy", .keep = "keep.npy", .outside = o};
    race(g, "w", &s);
    free(keep), free(w), free(o), free(g);
    tu_rmtree(dir), tu_rmtree(out);
    free(dir), free(out);
}

/* A model: y = x + W, x and W float [4], W external in w.bin. */
static uint8_t *external_model(size_t *len)
{
    static int64_t dim4[1] = {4};
    Onnx__TensorShapeProto__Dimension d = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, *dp[1] = {&d};
    d.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    d.dim_value = 4;
    Onnx__TensorShapeProto shp = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shp.n_dim = 1;
    shp.dim = dp;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1;
    tt.shape = &shp;
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    Onnx__ValueInfoProto vin = ONNX__VALUE_INFO_PROTO__INIT, vout = ONNX__VALUE_INFO_PROTO__INIT;
    vin.name = "x";
    vin.type = &ty;
    vout.name = "y";
    vout.type = &ty;
    Onnx__ValueInfoProto *vinp[1] = {&vin}, *voutp[1] = {&vout};
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locp[1] = {&loc};
    loc.key = "location";
    loc.value = "w.bin";
    Onnx__TensorProto w = ONNX__TENSOR_PROTO__INIT, *wp[1] = {&w};
    w.name = "W";
    w.has_data_type = 1;
    w.data_type = 1;
    w.n_dims = 1;
    w.dims = dim4;
    w.n_external_data = 1;
    w.external_data = locp;
    w.has_data_location = 1;
    w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__NodeProto n = ONNX__NODE_PROTO__INIT, *np[1] = {&n};
    char *nin[2] = {"x", "W"}, *nout[1] = {"y"};
    n.name = "add";
    n.op_type = "Add";
    n.n_input = 2;
    n.input = nin;
    n.n_output = 1;
    n.output = nout;
    Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    gp.name = "race";
    gp.n_node = 1;
    gp.node = np;
    gp.n_initializer = 1;
    gp.initializer = wp;
    gp.n_input = 1;
    gp.input = vinp;
    gp.n_output = 1;
    gp.output = voutp;
    Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsp[1] = {&ops};
    ops.domain = "";
    ops.has_version = 1;
    ops.version = 13;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = opsp;
    m.graph = &gp;
    *len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(*len);
    onnx__model_proto__pack(&m, buf);
    return buf;
}

/* 4 float32 values v, raw, at path. */
static void write_raw4(const char *path, float v)
{
    float d[4] = {v, v, v, v};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, sizeof d, 1, f), 1);
    fclose(f);
}

static void test_onnx_external_race(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *out = tu_tmpdir();
    char *keep = fg_path_join(dir, "keep.bin"), *w = fg_path_join(dir, "w.bin"), *o = fg_path_join(out, "o.bin");
    write_raw4(keep, INSIDE);
    write_raw4(o, OUTSIDE);
    assert_int_equal(link(keep, w), 0);
    size_t len;
    uint8_t *model = external_model(&len);
    char *m = fg_path_join(dir, "m.onnx");
    FILE *f = fopen(m, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(model, 1, len, f), len);
    fclose(f);
    free(model);
    swapper s = {.dir = dir, .name = "w.bin", .keep = "keep.bin", .outside = o};
    race(m, "W", &s);
    free(keep), free(w), free(o), free(m);
    tu_rmtree(dir), tu_rmtree(out);
    free(dir), free(out);
}

static int setup(void **state)
{
    (void)state;
    g_ctx = tu_ctx_shipped();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fg_context_free(g_ctx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_weight_race),
        cmocka_unit_test(test_onnx_external_race),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
