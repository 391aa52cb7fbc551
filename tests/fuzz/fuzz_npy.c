/*
 * fuzz_npy.c -- fuzz target for the .npy reader and writer
 * (codegen/weights_file.c) and the bounded file reader that the loaders use
 * (codegen/input_file.c).
 *
 * Input: the bytes of an .npy file.  They are written to a private file,
 * which is then
 *   - read with fg_read_input_file (with a limit above and, for a non-empty
 *     input, one byte below the input's size);
 *   - read with fg_npy_read (at most MAX_NUMEL elements);
 *   - on success, written back with fg_npy_write as float32 and read again.
 * Checks: no crash, no sanitizer report, no leak, and
 *   - fg_read_input_file returns exactly the file's bytes, NUL-terminated,
 *     within its limit, and refuses the file (with a reason) above it;
 *   - fg_npy_read returns 0 or -1; -1 leaves a non-empty reason and no data;
 *   - a success agrees with this file's own reading of the format: magic,
 *     version 1, 2 or 3, the header length field, a header dict naming
 *     dtype '<f4' / '>f4' / '=f4' or the same for f2, rank 1..FG_MAX_RANK of
 *     positive dimensions with at most MAX_NUMEL elements, and exactly the
 *     data bytes the shape needs after the header; the values are those
 *     bytes converted here (byte order, fp16 bits) independently;
 *   - the float32 copy written by fg_npy_write reads back with the same shape
 *     and bit-identical values.
 */
#include "fuzz_common.h"

#include <math.h>

#include "input_file.h"
#include "weights_file.h"

#define MAX_NUMEL 4096

static char *g_dir, *g_in, *g_out;

static void init_once(void)
{
    if (g_dir)
        return;
    g_dir = fz_tmpdir("npy");
    size_t n = strlen(g_dir) + 16;
    g_in = malloc(n);
    g_out = malloc(n);
    snprintf(g_in, n, "%s/in.npy", g_dir);
    snprintf(g_out, n, "%s/out.npy", g_dir);
}

/* IEEE half bits to float, by arithmetic (not the library's bit assembly). */
static float half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Compares two floats bit for bit, except that any NaN matches any NaN when
 * nan_any (fp16 NaN payloads are not this file's business). */
static int same_float(float a, float b, int nan_any)
{
    if (nan_any && isnan(a) && isnan(b))
        return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Checks a successful read against the bytes. */
static void check_success(const uint8_t *d, size_t size, const fg_file_tensor *t)
{
    if (size < 10 || memcmp(d, "\x93NUMPY", 6) != 0)
        FZ_FAIL("fg_npy_read accepted a file without the magic string");
    size_t start, hlen;
    if (d[6] == 1) {
        start = 10;
        hlen = (size_t)d[8] | (size_t)d[9] << 8;
    } else if (d[6] == 2 || d[6] == 3) {
        if (size < 12)
            FZ_FAIL("fg_npy_read accepted a version %d file of %zu bytes", d[6], size);
        start = 12;
        hlen = (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
    } else {
        FZ_FAIL("fg_npy_read accepted format version %d", d[6]);
    }
    if (hlen > size - start)
        FZ_FAIL("fg_npy_read accepted a header of %zu bytes in a file of %zu", hlen, size);
    int isint = t->dtype == FG_DTYPE_I64 || t->dtype == FG_DTYPE_I32, isbool = t->dtype == FG_DTYPE_BOOL;
    if (t->dtype != FG_DTYPE_F32 && t->dtype != FG_DTYPE_F16 && !isint && !isbool)
        FZ_FAIL("fg_npy_read returned dtype %d", (int)t->dtype);
    if (t->rank < 1 || t->rank > FG_MAX_RANK)
        FZ_FAIL("fg_npy_read returned rank %d", t->rank);
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->shape[i] < 1 || t->shape[i] > MAX_NUMEL)
            FZ_FAIL("fg_npy_read returned dimension %d = %lld", i, (long long)t->shape[i]);
        numel *= t->shape[i];
        if (numel > MAX_NUMEL)
            FZ_FAIL("fg_npy_read returned more than %d elements", MAX_NUMEL);
    }
    size_t esz = fg_dtype_size(t->dtype);
    if (size - start - hlen != (size_t)numel * esz)
        FZ_FAIL("fg_npy_read accepted %zu data bytes for %lld elements of %zu bytes", size - start - hlen,
                (long long)numel, esz);
    /* The dtype string: the one place a header may hold '<f4', '>i8', '|b1', ... */
    int order = 0;
    char kind = isbool ? 'b' : isint ? 'i' : 'f', want = (char)('0' + (int)esz);
    for (size_t i = start; i + 2 < start + hlen; i++)
        if ((d[i] == '<' || d[i] == '>' || d[i] == '=' || (isbool && d[i] == '|')) && d[i + 1] == kind &&
            d[i + 2] == want)
            order = d[i];
    if (!order)
        FZ_FAIL("fg_npy_read returned dtype %s but the header names no such type", fg_dtype_name(t->dtype));
    int big = order == '>';   /* this harness runs on little-endian hosts ('=' is little) */
    const uint8_t *p = d + start + hlen;
    for (int64_t i = 0; i < numel; i++, p += esz) {
        uint8_t b[8];
        for (size_t k = 0; k < esz; k++)
            b[k] = big ? p[esz - 1 - k] : p[k];
        float want_v;
        if (isbool) {
            want_v = b[0] != 0;
        } else if (isint) {
            uint64_t u = 0;
            for (size_t k = 0; k < esz; k++)
                u |= (uint64_t)b[k] << (8 * k);
            int64_t v = esz == 8 ? (int64_t)u : (int64_t)(int32_t)(uint32_t)u;
            if (v > (1 << 24) || v < -(1 << 24))
                FZ_FAIL("element %lld: fg_npy_read accepted %lld, beyond 2^24", (long long)i, (long long)v);
            want_v = (float)v;
        } else if (esz == 4) {
            memcpy(&want_v, b, 4);
        } else {
            want_v = half_value((uint16_t)(b[0] | b[1] << 8));
        }
        if (!same_float(t->data[i], want_v, esz == 2))
            FZ_FAIL("element %lld: fg_npy_read gave %a, the bytes hold %a", (long long)i, (double)t->data[i],
                    (double)want_v);
    }
}

/* Writes t as float32 and reads it back. */
static void check_roundtrip(const fg_file_tensor *t)
{
    char why[300] = "";
    if (fg_npy_write(g_out, FG_NPY_F32, t->rank, t->shape, t->data, why, sizeof why) != 0)
        FZ_FAIL("fg_npy_write failed on a tensor just read: %s", why);
    fg_file_tensor b;
    if (fg_npy_read(g_out, MAX_NUMEL, &b, why, sizeof why) != 0)
        FZ_FAIL("the file fg_npy_write wrote does not read back: %s", why);
    if (b.dtype != FG_DTYPE_F32 || b.rank != t->rank || memcmp(b.shape, t->shape, sizeof(int64_t) * (size_t)t->rank))
        FZ_FAIL("the written file reads back with another dtype or shape");
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++)
        numel *= t->shape[i];
    if (memcmp(b.data, t->data, sizeof(float) * (size_t)numel) != 0)
        FZ_FAIL("the written file reads back with other values");
    free(b.data);
}

static void check_input_file(const uint8_t *data, size_t size)
{
    char why[300];
    size_t len = 12345;
    char *text = fg_read_input_file(g_in, size + 16, &len, why, sizeof why);
    if (!text)
        FZ_FAIL("fg_read_input_file refused a %zu-byte file under its limit: %s", size, why);
    if (len != size || memcmp(text, data, size) != 0 || text[size] != 0)
        FZ_FAIL("fg_read_input_file returned %zu bytes for a file of %zu, or other bytes", len, size);
    free(text);
    if (size == 0)
        return;
    why[0] = 0;
    text = fg_read_input_file(g_in, size - 1, &len, why, sizeof why);
    if (text || !why[0] || len != 0)
        FZ_FAIL("fg_read_input_file did not refuse a file over its limit (reason '%s', len %zu)", why, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    fz_write_file(g_in, data, size);
    check_input_file(data, size);

    fg_file_tensor t;
    memset(&t, 0x5a, sizeof t);
    char why[300];
    memset(why, 0, sizeof why);
    int rc = fg_npy_read(g_in, MAX_NUMEL, &t, why, sizeof why);
    if (rc != 0 && rc != -1)
        FZ_FAIL("fg_npy_read returned %d", rc);
    if (rc == -1) {
        if (!why[0])
            FZ_FAIL("fg_npy_read failed without a reason");
        if (t.data)
            FZ_FAIL("fg_npy_read failed but returned data");
        if (getenv("FUSEGEN_FUZZ_VERBOSE"))
            fprintf(stderr, "refused: %s\n", why);
        return 0;
    }
    check_success(data, size, &t);
    check_roundtrip(&t);
    if (getenv("FUSEGEN_FUZZ_VERBOSE"))
        fprintf(stderr, "read: rank %d, dtype %d\n", t.rank, (int)t.dtype);
    free(t.data);
    return 0;
}
