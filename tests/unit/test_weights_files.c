/*
 * test_weights_files.c -- tensors from files (codegen/weights_file.h) and
 * graph weights that name them (`file:` in docs/graphs.md): .npy files of
 * every supported dtype and byte order, format versions 1 and 2, and the
 * refusals (Fortran order, other dtypes, bad magic, malformed header,
 * truncated data, trailing bytes, sizes past the limits); .safetensors files
 * (F32, F16, BF16 kept exactly; a missing tensor with a suggestion; bad
 * JSON; offsets outside the data or of the wrong size; a header length of
 * 2^60); and in graphs: shapes from the file or checked against it, dtype
 * mismatches, paths that leave the graph's directory, located errors, and
 * batch_norm in training mode refused at its node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "weights_file.h"

/* Writes len bytes to dir/name; returns the malloc'd path. */
static char *write_bin(const char *dir, const char *name, const void *data, size_t len)
{
    char *path = fg_path_join(dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

/* An .npy file: magic, version, header text (padded to 64 bytes with a
 * final newline), then len bytes of data. */
static char *write_npy(const char *dir, const char *name, int version, const char *header, const void *data,
                       size_t len)
{
    fg_buf h = {0};
    fg_buf_put(&h, header);
    size_t pre = version == 1 ? 10 : 12;
    while ((pre + h.len + 1) % 64)
        fg_buf_put(&h, " ");
    fg_buf_put(&h, "\n");
    size_t total = pre + h.len + len;
    unsigned char *b = malloc(total);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)version;
    b[7] = 0;
    b[8] = (unsigned char)(h.len & 0xff);
    b[9] = (unsigned char)(h.len >> 8);
    if (version != 1)
        b[10] = b[11] = 0;
    memcpy(b + pre, h.s, h.len);
    if (len)
        memcpy(b + pre + h.len, data, len);
    char *path = write_bin(dir, name, b, total);
    free(b);
    fg_buf_free(&h);
    return path;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* fg_npy_read expecting failure with needle in the reason. */
static void npy_refused(const char *path, int64_t max, const char *needle)
{
    char why[400];
    fg_file_tensor t;
    assert_int_equal(fg_npy_read(path, max, &t, why, sizeof why), -1);
    assert_null(t.data);
    if (!strstr(why, needle))
        fail_msg("%s: reason '%s' lacks '%s'", path, why, needle);
}

static void test_npy_dtypes(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), why[400];
    fg_file_tensor t;
    /* float32 through the writer, special values kept bit for bit */
    const float f32[6] = {1.5f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f};
    const int64_t shape[2] = {2, 3};
    char *p = fg_path_join(dir, "a.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F32, 2, shape, f32, why, sizeof why), 0);
    assert_int_equal(fg_npy_read(p, 100, &t, why, sizeof why), 0);
    assert_int_equal(t.dtype, FG_DTYPE_F32);
    assert_int_equal(t.rank, 2);
    assert_true(t.shape[0] == 2 && t.shape[1] == 3);
    for (int i = 0; i < 6; i++)
        assert_true(same_bits(t.data[i], f32[i]));
    free(t.data);
    free(p);
    /* float16 little- and big-endian: 1, -2, +inf, smallest subnormal, NaN, 65504 */
    const uint16_t h[6] = {0x3C00, 0xC000, 0x7C00, 0x0001, 0x7E00, 0x7BFF};
    const float hv[6] = {1, -2, INFINITY, 5.9604644775390625e-08f, NAN, 65504};
    unsigned char be[12];
    for (int i = 0; i < 6; i++)
        be[2 * i] = (unsigned char)(h[i] >> 8), be[2 * i + 1] = (unsigned char)h[i];
    char *ple = write_npy(dir, "h.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }", h, 12);
    char *pbe = write_npy(dir, "hb.npy", 1, "{'shape': (3, 2), 'descr': '>f2', 'fortran_order': False}", be, 12);
    const char *paths[2] = {ple, pbe};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(fg_npy_read(paths[k], 100, &t, why, sizeof why), 0);
        assert_int_equal(t.dtype, FG_DTYPE_F16);
        assert_int_equal(t.rank, k ? 2 : 1);
        for (int i = 0; i < 6; i++)
            assert_true(isnan(hv[i]) ? isnan(t.data[i]) : t.data[i] == hv[i]);
        free(t.data);
    }
    /* big-endian float32, format version 2.0 */
    const float fv[2] = {3.25f, -7.0f};
    unsigned char fb[8];
    for (int i = 0; i < 2; i++) {
        uint32_t u;
        memcpy(&u, &fv[i], 4);
        for (int b = 0; b < 4; b++)
            fb[4 * i + b] = (unsigned char)(u >> (24 - 8 * b));
    }
    char *pv2 = write_npy(dir, "v2.npy", 2, "{\"descr\": \">f4\", \"fortran_order\": False, \"shape\": (1, 2)}", fb, 8);
    assert_int_equal(fg_npy_read(pv2, 100, &t, why, sizeof why), 0);
    assert_true(t.data[0] == 3.25f && t.data[1] == -7.0f && t.rank == 2);
    free(t.data);
    /* the writer's float16 and float64 files read back (float64 is refused) */
    p = fg_path_join(dir, "w.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F16, 1, (int64_t[]){6}, h, why, sizeof why), 0);
    assert_int_equal(fg_npy_read(p, 100, &t, why, sizeof why), 0);
    assert_true(t.dtype == FG_DTYPE_F16 && t.data[1] == -2);
    free(t.data);
    const double dv[1] = {0.1};
    assert_int_equal(fg_npy_write(p, FG_NPY_F64, 1, (int64_t[]){1}, dv, why, sizeof why), 0);
    npy_refused(p, 100, "dtype '<f8' (float64) is not supported");
    free(p);
    /* integers and bools: read as their float values; beyond 2^24 refused */
    fg_file_tensor it;
    char *pi = write_npy(dir, "i.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                         "\xfd\xff\xff\xff\x07\0\0\0", 8);
    assert_int_equal(fg_npy_read(pi, 100, &it, why, sizeof why), 0);
    assert_int_equal(it.dtype, FG_DTYPE_I32);
    assert_true(it.data[0] == -3.0f && it.data[1] == 7.0f);
    free(it.data);
    char *pb = write_npy(dir, "b.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\1\0", 2);
    assert_int_equal(fg_npy_read(pb, 100, &it, why, sizeof why), 0);
    assert_int_equal(it.dtype, FG_DTYPE_BOOL);
    assert_true(it.data[0] == 1.0f && it.data[1] == 0.0f);
    free(it.data);
    char *pl = write_npy(dir, "l.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                         "\x01\0\0\x01\0\0\0\0", 8);
    npy_refused(pl, 100, "element 0 is beyond 2^24");
    free(pl);
    char *pu = write_npy(dir, "u.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "\1\0", 2);
    npy_refused(pu, 100, "'|u1' (uint8) is not supported");
    free(pu);
    char *pvv = write_npy(dir, "v.npy", 1, "{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }", "\0\0", 2);
    npy_refused(pvv, 100, "bfloat16");
    free(ple), free(pbe), free(pv2), free(pi), free(pb), free(pvv);
    tu_rmtree(dir);
    free(dir);
}

static void test_npy_refusals(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    const float z[8] = {0};
    char *p;
    p = write_npy(dir, "f.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", z, 16);
    npy_refused(p, 100, "Fortran order");
    free(p);
    p = write_bin(dir, "m.npy", "\x93NUMPX\x01\x00\x10\x00{}              ", 26);
    npy_refused(p, 100, "not an .npy file");
    free(p);
    p = write_bin(dir, "s.npy", "\x93NU", 3);
    npy_refused(p, 100, "too short");
    free(p);
    p = write_npy(dir, "t.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", z, 12);
    npy_refused(p, 100, "truncated: shape [2, 2] of float32 needs 16 bytes of data, the file has 12");
    free(p);
    p = write_npy(dir, "x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", z, 12);
    npy_refused(p, 100, "4 bytes follow the data");
    free(p);
    p = write_npy(dir, "sc.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", z, 4);
    npy_refused(p, 100, "scalar");
    free(p);
    p = write_npy(dir, "e.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", z, 0);
    npy_refused(p, 100, "empty dimension");
    free(p);
    p = write_npy(dir, "r7.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", z, 4);
    npy_refused(p, 100, "7 dimensions");
    free(p);
    p = write_npy(dir, "big.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536, 65536), }", z, 4);
    npy_refused(p, 100, "more than 100 elements");
    free(p);
    p = write_npy(dir, "lim.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", z, 32);
    npy_refused(p, 4, "more than 4 elements");
    free(p);
    static const char *const bad_headers[][2] = {
        {"{'descr': '<f4', 'shape': (2,), }", "no 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "expected '('"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing", "after the closing"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "twice"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", "malformed .npy header"},
        {"not a dict", "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "too large"},
    };
    for (size_t i = 0; i < FG_COUNTOF(bad_headers); i++) {
        p = write_npy(dir, "h.npy", 1, bad_headers[i][0], z, 8);
        npy_refused(p, 100, bad_headers[i][1]);
        free(p);
    }
    /* a version-2 header length of 4 GiB - 1: refused before any allocation */
    unsigned char v2[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0xff, '{', '}', ' ', '\n'};
    p = write_bin(dir, "hl.npy", v2, sizeof v2);
    npy_refused(p, 100, "more than the 65536-byte limit");
    free(p);
    unsigned char v1[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0x00, 0x10, '{', '}'};
    p = write_bin(dir, "hs.npy", v1, sizeof v1);
    npy_refused(p, 100, "truncated: the header announces 4096 bytes");
    free(p);
    /* not a regular file, no file */
    npy_refused(dir, 100, "not a regular file (a directory)");
    p = fg_path_join(dir, "none.npy");
    npy_refused(p, 100, "No such file");
    free(p);
    tu_rmtree(dir);
    free(dir);
}

/* A .safetensors file: the 8-byte length, the JSON header, then data. */
static char *write_st(const char *dir, const char *name, const char *json, const void *data, size_t len)
{
    size_t hl = strlen(json), total = 8 + hl + len;
    unsigned char *b = malloc(total);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    if (len)
        memcpy(b + 8 + hl, data, len);
    char *p = write_bin(dir, name, b, total);
    free(b);
    return p;
}

static void st_refused_open(const char *path, const char *needle)
{
    char why[400];
    assert_null(fg_safetensors_open(path, why, sizeof why));
    if (!strstr(why, needle))
        fail_msg("%s: reason '%s' lacks '%s'", path, why, needle);
}

static void st_refused_read(fg_safetensors *s, const char *name, const char *needle)
{
    char why[400];
    fg_file_tensor t;
    assert_int_equal(fg_safetensors_read(s, name, 1000, &t, why, sizeof why), -1);
    assert_null(t.data);
    if (!strstr(why, needle))
        fail_msg("%s: reason '%s' lacks '%s'", name, why, needle);
}

/* 16 data bytes: F32 [1.5, -2] at 0..8, F16 [1, inf] at 8..12, BF16 [-3, NaN] at 12..16 */
static void st_data(unsigned char d[16])
{
    const float f[2] = {1.5f, -2.0f};
    const uint16_t h[2] = {0x3C00, 0x7C00}, b[2] = {0xC040, 0x7FC0};
    memcpy(d, f, 8);
    memcpy(d + 8, h, 4);
    memcpy(d + 12, b, 4);
}

static void test_safetensors(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), why[400];
    unsigned char d[16];
    st_data(d);
    char *p = write_st(dir, "m.safetensors",
                       "{\"__metadata__\": {\"format\": \"pt\"}, "
                       "\"layer1.weight\": {\"dtype\": \"F32\", \"shape\": [2, 1], \"data_offsets\": [0, 8]}, "
                       "\"half\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [8, 12]}, "
                       "\"brain\": {\"dtype\": \"BF16\", \"shape\": [1, 2], \"data_offsets\": [12, 16]}, "
                       "\"long\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [0, 16]}, "
                       "\"bad_size\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}, "
                       "\"scalar\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}   ",
                       d, 16);
    fg_safetensors *s = fg_safetensors_open(p, why, sizeof why);
    if (!s)
        fail_msg("open: %s", why);
    fg_file_tensor t;
    assert_int_equal(fg_safetensors_read(s, "layer1.weight", 1000, &t, why, sizeof why), 0);
    assert_true(t.dtype == FG_DTYPE_F32 && t.rank == 2 && t.shape[0] == 2 && t.shape[1] == 1);
    assert_true(t.data[0] == 1.5f && t.data[1] == -2.0f);
    free(t.data);
    assert_int_equal(fg_safetensors_read(s, "half", 1000, &t, why, sizeof why), 0);
    assert_true(t.dtype == FG_DTYPE_F16 && t.data[0] == 1.0f && t.data[1] == INFINITY);
    free(t.data);
    assert_int_equal(fg_safetensors_read(s, "brain", 1000, &t, why, sizeof why), 0);
    assert_true(t.dtype == FG_DTYPE_BF16 && t.data[0] == -3.0f && isnan(t.data[1]));
    free(t.data);
    st_refused_read(s, "layer1.weigth", "no tensor 'layer1.weigth' in the file (did you mean 'layer1.weight'?)");
    st_refused_read(s, "zzzzzzzzzzzzzzzzzz", "it holds 6:");
    st_refused_read(s, "__metadata__", "no tensor '__metadata__'");
    st_refused_read(s, "long", "dtype I64; fusegen reads F32, F16 and BF16");
    st_refused_read(s, "bad_size", "hold 8 bytes but F32 [3] needs 12");
    st_refused_read(s, "scalar", "scalar");
    assert_int_equal(fg_safetensors_read(s, "layer1.weight", 1, &t, why, sizeof why), -1);
    assert_non_null(strstr(why, "more than 1 elements"));
    fg_safetensors_close(s);
    free(p);

    static const char *const bad[][2] = {
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]", "bad JSON header"},
        {"[1, 2]", "not an object"},
        {"{\"a\": 5}", "entry 'a' is not an object"},
        {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", "no string \"dtype\""},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", "not a non-negative integer"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", "no \"data_offsets\""},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", "outside the 8 bytes of data"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", "outside"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 99999999999999999999999]}}",
         "bad JSON header"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
         "bad JSON header: duplicate object key"},
    };
    for (size_t i = 0; i < FG_COUNTOF(bad); i++) {
        p = write_st(dir, "b.safetensors", bad[i][0], d, 8);
        st_refused_open(p, bad[i][1]);
        free(p);
    }
    /* a header length of 2^60: refused without allocating it */
    unsigned char huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x10, '{', '}'};
    p = write_bin(dir, "h.safetensors", huge, sizeof huge);
    st_refused_open(p, "header length 1152921504606846976 is more than the 104857600-byte limit");
    free(p);
    unsigned char past[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    p = write_bin(dir, "p.safetensors", past, sizeof past);
    st_refused_open(p, "truncated: header length 100 but only 4 bytes follow");
    free(p);
    p = write_bin(dir, "s.safetensors", "abc", 3);
    st_refused_open(p, "too short");
    free(p);
    tu_rmtree(dir);
    free(dir);
}

/* ---- graphs with `file:` weights ---- */

static fg_context *g_ctx;

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

/* Writes graph text to dir/g.yaml and loads it; NULL (errors recorded) on failure. */
static fg_graph *load_in(const char *dir, const char *text)
{
    char *p = tu_write(dir, "g.yaml", text);
    fg_graph *g = NULL;
    fg_context_clear_errors(g_ctx);
    fg_status st = fg_graph_load(g_ctx, p, &g);
    free(p);
    assert_true((st == FG_OK) == (g != NULL));
    return g;
}

/* Column (1-based) where `at` first occurs in line `line` of text. */
static int col_of(const char *text, int line, const char *at)
{
    const char *l = text;
    for (int i = 1; i < line; i++)
        l = strchr(l, '\n') + 1;
    const char *hit = strstr(l, at);
    assert_non_null(hit);
    return (int)(hit - l) + 1;
}

/* Loading must fail with an error containing needle at `line`, in the column
 * where the text `at` starts on that line. */
static void load_fails(const char *dir, const char *text, const char *needle, int line, const char *at)
{
    int col = col_of(text, line, at);
    fg_graph *g = load_in(dir, text);
    if (g || !tu_has_error(g_ctx, needle)) {
        tu_dump_errors(g_ctx);
        fail_msg("expected an error with '%s'", needle);
    }
    int found = 0;
    for (int i = 0; i < fg_context_error_count(g_ctx); i++) {
        const fg_error *e = fg_context_error(g_ctx, i);
        if (strstr(e->message, needle) && e->line == line && e->col == col && e->file && strstr(e->file, "g.yaml"))
            found = 1;
    }
    if (!found) {
        tu_dump_errors(g_ctx);
        fail_msg("'%s' is not at g.yaml:%d:%d", needle, line, col);
    }
}

#define HEAD "graph: w\ninputs: [ { name: x, shape: [2, 2] } ]\nweights:\n"

static void test_graph_file_weights(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), why[400];
    char *sub = fg_path_join(dir, "sub");
    mkdir(sub, 0755);
    free(sub);
    const float wv[4] = {1, 2, 3, 4};
    char *p = fg_path_join(dir, "sub/w.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F32, 2, (int64_t[]){2, 2}, wv, why, sizeof why), 0);
    free(p);
    const uint16_t hv[4] = {0x3C00, 0x4000, 0x4200, 0x4400};   /* 1 2 3 4 in fp16 */
    p = fg_path_join(dir, "h.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F16, 2, (int64_t[]){2, 2}, hv, why, sizeof why), 0);
    free(p);
    const float bv[2] = {1.00390625f, 3.0f};   /* 1 + 2^-8 is halfway between two bf16 values: rounds to 1 */
    p = fg_path_join(dir, "b.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F32, 1, (int64_t[]){2}, bv, why, sizeof why), 0);
    free(p);
    unsigned char d[16];
    st_data(d);
    free(write_st(dir, "m.safetensors",
                  "{\"layer1.weight\": {\"dtype\": \"F32\", \"shape\": [2, 1], \"data_offsets\": [0, 8]}, "
                  "\"b2\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                  "\"brain\": {\"dtype\": \"BF16\", \"shape\": [1, 2], \"data_offsets\": [12, 16]}}",
                  d, 16));

    fg_graph *g = load_in(dir, HEAD
                          "  - { name: w, shape: [2, 2], file: sub/w.npy }\n"
                          "  - { name: l1, file: m.safetensors, tensor: layer1.weight }\n"
                          "  - { name: b2, file: m.safetensors }\n"
                          "  - { name: bf, dtype: bf16, file: m.safetensors, tensor: brain }\n"
                          "  - { name: bn, dtype: bf16, file: b.npy }\n"
                          "  - { name: hh, dtype: fp16, file: h.npy }\n"
                          "nodes:\n  - { name: mm, op: matmul, inputs: [x, w] }\n"
                          "  - { name: m2, op: matmul, inputs: [mm, l1] }\n"
                          "  - { name: a, op: add, inputs: [m2, b2] }\n"
                          "  - { name: a2, op: add, inputs: [bf, bn] }\n"
                          "  - { name: a3, op: add, inputs: [hh, hh] }\n"
                          "outputs: [a, a2, a3]\n");
    if (!g)
        tu_dump_errors(g_ctx);
    assert_non_null(g);
    const fg_tensor *t = &g->tensors[fg_graph_find_tensor(g, "w")];
    assert_true(t->rank == 2 && t->data[0] == 1 && t->data[3] == 4 && t->dtype == FG_DTYPE_F32);
    t = &g->tensors[fg_graph_find_tensor(g, "l1")];
    assert_true(t->rank == 2 && t->shape[0] == 2 && t->shape[1] == 1 && t->data[0] == 1.5f && t->data[1] == -2.0f);
    t = &g->tensors[fg_graph_find_tensor(g, "b2")];   /* tensor: defaults to the weight's name */
    assert_true(t->rank == 1 && t->data[1] == -2.0f);
    t = &g->tensors[fg_graph_find_tensor(g, "bf")];
    assert_true(t->dtype == FG_DTYPE_BF16 && t->data[0] == -3.0f && isnan(t->data[1]));
    t = &g->tensors[fg_graph_find_tensor(g, "bn")];   /* float32 .npy rounded to bf16 */
    assert_true(t->dtype == FG_DTYPE_BF16 && t->data[0] == 1.0f && t->data[1] == 3.0f);
    t = &g->tensors[fg_graph_find_tensor(g, "hh")];
    assert_true(t->dtype == FG_DTYPE_F16 && t->data[2] == 3.0f);
    fg_graph_free(g);

    /* errors, each at its place */
    load_fails(dir, HEAD "  - { name: w, shape: [4], file: sub/w.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "weight 'w' has shape [4] but sub/w.npy holds [2, 2]", 4, "[4]");
    load_fails(dir, HEAD "  - { name: w, file: h.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "weight 'w' is fp32 (the graph's dtype) but h.npy holds float16 data; give the weight `dtype: fp16`", 4,
               "h.npy");
    load_fails(dir, HEAD "  - { name: w, dtype: fp16, file: sub/w.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "weight 'w' is fp16 but sub/w.npy holds float32 data", 4, "fp16");
    load_fails(dir, HEAD "  - { name: w, file: m.safetensors, tensor: layer1.wieght }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "no tensor 'layer1.wieght' in the file (did you mean 'layer1.weight'?)", 4, "layer1.wieght");
    load_fails(dir, HEAD "  - { name: w, file: ../outside.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "weight 'w': file '../outside.npy'", 4, "../");
    load_fails(dir, HEAD "  - { name: w, file: /etc/passwd.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "is an absolute path", 4, "/etc");
    /* a symbolic link that leads out of the graph's directory */
    char *outside = tu_tmpdir();
    p = fg_path_join(outside, "o.npy");
    assert_int_equal(fg_npy_write(p, FG_NPY_F32, 1, (int64_t[]){1}, wv, why, sizeof why), 0);
    char *link = fg_path_join(dir, "link.npy");
    assert_int_equal(symlink(p, link), 0);
    load_fails(dir, HEAD "  - { name: w, file: link.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "is a symbolic link (refused", 4, "link.npy");
    free(link);
    /* a directory link on the way: refused as well */
    link = fg_path_join(dir, "ldir");
    assert_int_equal(symlink(outside, link), 0);
    load_fails(dir, HEAD "  - { name: w, file: ldir/o.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "passes through the symbolic link 'ldir' (refused", 4, "ldir");
    free(link), free(p);
    tu_rmtree(outside);
    free(outside);
    load_fails(dir, HEAD "  - { name: w, file: sub/w.npy, init: zeros }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "gives `file` together with `init`", 4, "init");
    load_fails(dir, HEAD "  - { name: w, shape: [1], tensor: t }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "there is no `file`", 4, "tensor");
    load_fails(dir, HEAD "  - { name: w, file: sub/w.npy, tensor: t }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "`tensor` applies to .safetensors files", 4, "tensor");
    load_fails(dir, HEAD "  - { name: w, file: w.txt }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "neither .npy nor .safetensors", 4, "w.txt");
    load_fails(dir, HEAD "  - { name: w, file: missing.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "No such file or directory", 4, "missing.npy");
    free(write_bin(dir, "trunc.npy", "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 68));
    load_fails(dir, HEAD "  - { name: w, file: trunc.npy }\n"
               "nodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n",
               "trunc.npy: truncated", 4, "trunc.npy");
    /* from text there is no directory to resolve against */
    const char *text = HEAD "  - { name: w, file: sub/w.npy }\nnodes:\n  - { name: r, op: relu, inputs: [w] }\noutputs: [r]\n";
    fg_graph *tg = NULL;
    fg_context_clear_errors(g_ctx);
    assert_int_equal(fg_graph_parse(g_ctx, "t.yaml", text, strlen(text), &tg), FG_ERR_INPUT);
    assert_true(tu_has_error(g_ctx, "needs a graph read from a file"));
    tu_rmtree(dir);
    free(dir);
}

/* batch_norm in training mode is refused at its `training:` value (or at the
 * node when the op's default is training). */
static void test_training_refused(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    load_fails(dir, "graph: t\ninputs: [ { name: x, shape: [1, 2, 3, 3] } ]\nweights:\n"
               "  - { name: g, shape: [2] }\n  - { name: b, shape: [2] }\n"
               "  - { name: m, shape: [2] }\n  - { name: v, shape: [2], init: positive }\n"
               "nodes:\n  - { name: bn, op: batch_norm, inputs: [x, g, b, m, v], attrs: { training: true } }\n"
               "outputs: [bn]\n",
               "batch_norm 'bn': training mode (batch statistics) is not supported", 9, "true");
    fg_graph *g = load_in(dir, "graph: t\ninputs: [ { name: x, shape: [1, 2, 3, 3] } ]\nweights:\n"
                               "  - { name: g, shape: [2] }\n  - { name: b, shape: [2] }\n"
                               "  - { name: m, shape: [2] }\n  - { name: v, shape: [2], init: positive }\n"
                               "nodes:\n  - { name: bn, op: batch_norm, inputs: [x, g, b, m, v], attrs: { training: false } }\n"
                               "outputs: [bn]\n");
    assert_non_null(g);
    fg_graph_free(g);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_dtypes),
        cmocka_unit_test(test_npy_refusals),
        cmocka_unit_test(test_safetensors),
        cmocka_unit_test(test_graph_file_weights),
        cmocka_unit_test(test_training_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
