/* test_num.c -- the numeric leaf (codegen/num.h): the 16-bit float
 * conversions bit for bit against numpy's float16 and ml_dtypes' bfloat16
 * (every one of the 65536 16-bit patterns each way, every tie between two
 * neighbours and the floats beside it, and a million pseudo-random fp32
 * patterns), little-endian byte order, whole writes and captured child
 * processes.  Without python3, numpy and ml_dtypes the test is not run
 * (exit 77, reported as skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "num.h"
#include "testutil.h"
#include "util.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Writes n bytes of data to dir/name; returns the path (malloc'd). */
static char *write_bin(const char *dir, const char *name, const void *data, size_t n)
{
    char *path = fg_path_join(dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(fg_write_all(fd, data, n), 0);
    close(fd);
    return path;
}

/* Runs the python expression expr on the array x read from in (dtype
 * in_dtype) and returns its bytes, which must be n elements of esz. */
static void *numpy_map(const char *dir, const char *in, const char *in_dtype, const char *expr, size_t n, size_t esz)
{
    char *out = fg_path_join(dir, "out.bin"), cmd[2048], *log = NULL;
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import numpy as np, ml_dtypes; x = np.fromfile(\"%s\", dtype=np.%s); "
             "(%s).tofile(\"%s\")'",
             in, in_dtype, expr, out);
    int rc = tu_run(cmd, &log);
    if (rc != 0)
        fprintf(stderr, "%s\n%s\n", cmd, log);
    assert_int_equal(rc, 0);
    free(log);
    size_t len = 0;
    void *data = fg_read_file(out, &len);
    assert_non_null(data);
    assert_int_equal(len, n * esz);
    free(out);
    return data;
}

/* fp32 results of 16-bit patterns agree: the same bits, or both NaN of the
 * same sign (a signalling NaN's quiet bit may be set by hardware casts). */
static int same_f32(uint32_t a, uint32_t b)
{
    int an = (a & 0x7fffffffu) > 0x7f800000u, bn = (b & 0x7fffffffu) > 0x7f800000u;
    if (an || bn)
        return an && bn && (a >> 31) == (b >> 31) && ((a | 0x400000u) == (b | 0x400000u));
    return a == b;
}

/* 16-bit results agree: the same bits, or both NaN of the same sign. */
static int same_16(uint16_t a, uint16_t b, int f16)
{
    uint16_t em = f16 ? 0x7c00 : 0x7f80, mm = f16 ? 0x03ff : 0x007f;
    int an = (a & em) == em && (a & mm), bn = (b & em) == em && (b & mm);
    if (an || bn)
        return an && bn && (a >> 15) == (b >> 15);
    return a == b;
}

/* 16-bit pattern -> fp32 for all 65536 patterns. */
static void widen_all(int f16)
{
    char *dir = tu_tmpdir();
    uint16_t *h = malloc(65536 * sizeof *h);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    char *in = write_bin(dir, "in.bin", h, 65536 * sizeof *h);
    uint32_t *want = numpy_map(dir, in, "uint16",
                               f16 ? "x.view(np.float16).astype(np.float32)"
                                   : "x.view(ml_dtypes.bfloat16).astype(np.float32)",
                               65536, 4);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t got = bits(f16 ? fg_f16_to_f32(h[i]) : fg_bf16_to_f32(h[i]));
        if (!same_f32(got, want[i]) && bad++ < 8)
            fprintf(stderr, "%s 0x%04x: got 0x%08x, numpy 0x%08x\n", f16 ? "f16" : "bf16", i, got, want[i]);
        /* non-NaN values are kept exactly, NaN payloads too */
        if ((h[i] & (f16 ? 0x7c00 : 0x7f80)) != (f16 ? 0x7c00 : 0x7f80) || !(h[i] & (f16 ? 0x3ff : 0x7f)))
            bad += got != want[i];
    }
    assert_int_equal(bad, 0);
    free(want);
    free(h);
    free(in);
    tu_rmtree(dir);
    free(dir);
}

/* fp32 -> 16 bits on every 16-bit value, every tie between neighbours and
 * the floats on either side of it, and pseudo-random fp32 patterns. */
static void narrow_all(int f16)
{
    size_t cap = 65536 * 5 + (1u << 20), n = 0;
    float *x = malloc(cap * sizeof *x);
    for (uint32_t i = 0; i < 65536; i++) {
        float a = f16 ? fg_f16_to_f32((uint16_t)i) : fg_bf16_to_f32((uint16_t)i);
        float b = f16 ? fg_f16_to_f32((uint16_t)(i + 1)) : fg_bf16_to_f32((uint16_t)(i + 1));
        x[n++] = a;
        if (i == 0x7fff || i == 0xffff || a != a || b != b || (bits(a) >> 31) != (bits(b) >> 31))
            continue;
        float mid = (float)(((double)a + (double)b) / 2);   /* exact: one bit more than the 16-bit format */
        x[n++] = mid;
        x[n++] = from_bits(bits(mid) - 1);
        x[n++] = from_bits(bits(mid) + 1);
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < (1u << 20); i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[n++] = from_bits((uint32_t)(s >> 16));
    }
    char *dir = tu_tmpdir();
    char *in = write_bin(dir, "in.bin", x, n * sizeof *x);
    uint16_t *want = numpy_map(dir, in, "float32",
                               f16 ? "x.astype(np.float16).view(np.uint16)"
                                   : "x.astype(ml_dtypes.bfloat16).view(np.uint16)",
                               n, 2);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t got = f16 ? fg_f32_to_f16(x[i]) : fg_f32_to_bf16(x[i]);
        if (!same_16(got, want[i], f16) && bad++ < 8)
            fprintf(stderr, "%s of 0x%08x: got 0x%04x, numpy 0x%04x\n", f16 ? "f16" : "bf16", bits(x[i]), got,
                    want[i]);
    }
    assert_int_equal(bad, 0);
    free(want);
    free(x);
    free(in);
    tu_rmtree(dir);
    free(dir);
}

static void test_f16_to_f32(void **state) { widen_all(1); }
static void test_bf16_to_f32(void **state) { widen_all(0); }
static void test_f32_to_f16(void **state) { narrow_all(1); }
static void test_f32_to_bf16(void **state) { narrow_all(0); }

/* The NaN forms num.h promises (numpy and ml_dtypes only promise a NaN). */
static void test_nan_forms(void **state)
{
    assert_int_equal(fg_f32_to_f16(from_bits(0x7fc00000u)), 0x7e00);
    assert_int_equal(fg_f32_to_f16(from_bits(0xff800001u)), 0xfe00);
    assert_int_equal(fg_f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
    assert_int_equal(fg_f32_to_bf16(from_bits(0xffc12345u)), 0xffc1);
    assert_int_equal(bits(fg_f16_to_f32(0x7c01)), 0x7f802000u);
    assert_int_equal(bits(fg_bf16_to_f32(0xff81)), 0xff810000u);
}

static void test_le(void **state)
{
    unsigned char b[8];
    fg_le_put(b, 0x0102030405060708ull, 8);
    assert_int_equal(b[0], 0x08);
    assert_int_equal(b[7], 0x01);
    assert_true(fg_le_get(b, 8) == 0x0102030405060708ull);
    assert_int_equal(fg_le_get(b, 2), 0x0708);
    fg_le_put(b, 0xdeadbeefu, 4);
    assert_int_equal(fg_le_get(b, 4), 0xdeadbeefu);
    assert_int_equal(b[4], 0x04);   /* bytes past n untouched */
}

static void test_write_all(void **state)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(fg_write_all(fds[1], "x", 1), -1);   /* no reader */
    assert_int_equal(errno, EPIPE);
    close(fds[1]);
    assert_int_equal(fg_write_all(-1, "x", 1), -1);
    assert_int_equal(errno, EBADF);
    assert_int_equal(fg_write_all(-1, "", 0), 0);
}

static void test_run_capture(void **state)
{
    char *out = NULL;
    const char *echo[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    assert_int_equal(fg_run_capture(echo, NULL, &out), 3);
    assert_string_equal(out, "out\nerr\n");
    free(out);
    const char *quiet[] = {"true", NULL};
    assert_int_equal(fg_run_capture(quiet, NULL, &out), 0);
    assert_string_equal(out, "");
    free(out);
    const char *pwd[] = {"pwd", NULL};
    assert_int_equal(fg_run_capture(pwd, "/", &out), 0);
    assert_string_equal(out, "/\n");
    free(out);
    const char *killed[] = {"sh", "-c", "kill -9 $$", NULL};
    assert_int_equal(fg_run_capture(killed, NULL, &out), 128 + 9);
    free(out);
    const char *missing[] = {"/nonexistent/fusegen-no-such-program", NULL};
    assert_int_equal(fg_run_capture(missing, NULL, &out), -1);
    assert_int_equal(errno, ENOENT);
    assert_null(out);
}

int main(void)
{
    if (tu_run("python3 -c 'import numpy, ml_dtypes'", NULL) != 0) {
        printf("test_num: not run (needs python3 with numpy and ml_dtypes)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_to_f32), cmocka_unit_test(test_bf16_to_f32), cmocka_unit_test(test_f32_to_f16),
        cmocka_unit_test(test_f32_to_bf16), cmocka_unit_test(test_nan_forms),   cmocka_unit_test(test_le),
        cmocka_unit_test(test_write_all),   cmocka_unit_test(test_run_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
