/*
 * weights_file.c -- tensors in .npy and .safetensors files (contract in
 * weights_file.h): a reader and a writer for NumPy's format, a reader for
 * safetensors whose JSON header Jansson parses, and the exact conversions of
 * float16 / bfloat16 data to float.  Sizes stated by a file are checked
 * against the file's size and fixed limits before any allocation.
 */
#include "weights_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "num.h"
#include "oom.h"
#include "safe_open.h"
#include "util.h"

static int fail(char *why, size_t whysz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Writes the reason and returns -1. */
static int fail(char *why, size_t whysz, const char *fmt, ...)
{
    if (why && whysz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whysz, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* A name from a file, for messages: printable ASCII kept, other bytes as
 * \xHH, cut at 64 characters. */
static const char *shown(const char *s, char out[300])
{
    size_t o = 0;
    for (size_t i = 0; s[i] && o < 280; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 64) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, 300 - o, "\\x%02x", c);
    }
    out[o] = 0;
    return out;
}

/* ---- element conversions -------------------------------------------------- */

void fg_file_decode(fg_dtype t, const void *src, float *dst, int64_t n)
{
    if (t == FG_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    if (!fg_dtype_is_float(t)) {   /* integers, checked exact in a float by int_range_bad */
        for (int64_t i = 0; i < n; i++) {
            int64_t v = t == FG_DTYPE_I64 ? ((const int64_t *)src)[i]
                        : t == FG_DTYPE_I32 ? ((const int32_t *)src)[i] : ((const uint8_t *)src)[i] != 0;
            dst[i] = (float)v;
        }
        return;
    }
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = t == FG_DTYPE_F16 ? fg_f16_to_f32(h[i]) : fg_bf16_to_f32(h[i]);
}

float fg_file_round_bf16(float v)
{
    return v != v ? v : fg_bf16_to_f32(fg_f32_to_bf16(v));   /* a NaN is kept as it is */
}

/* Converts n little- or big-endian elements of esz bytes (4: float32, 2:
 * fp16/bf16 bits) at raw, in place, to host order. */
static void to_host_order(unsigned char *raw, int64_t n, int esz, int file_le)
{
    if (file_le == host_is_le())
        return;
    for (int64_t i = 0; i < n; i++) {
        unsigned char *p = raw + i * esz;
        for (int a = 0, b = esz - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
}

/* ---- files ---------------------------------------------------------------- */

/* Opens the regular file path as named, once (never blocks on a FIFO or
 * device); its size from the descriptor. */
static int open_regular(const char *path, uint64_t *size, char *why, size_t whysz)
{
    return fg_open_beneath(AT_FDCWD, path, 0, size, why, whysz);
}

/* The size of the regular file open as fd. */
static int fd_size(int fd, uint64_t *size, char *why, size_t whysz)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fail(why, whysz, "%s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(why, whysz, "not a regular file (%s)", fg_file_kind(st.st_mode));
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Reads exactly n bytes at offset off. */
static int read_at(int fd, uint64_t off, void *buf, size_t n, char *why, size_t whysz)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(why, whysz, "read error: %s", strerror(errno));
        if (r == 0)
            return fail(why, whysz, "truncated: the file ended while it was read");
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

static size_t dtype_bytes(fg_dtype t) { return fg_dtype_size(t); }

/* The NumPy name of the element type an .npy file of dtype t holds. */
static const char *npy_type_name(fg_dtype t)
{
    switch (t) {
    case FG_DTYPE_F16: return "float16";
    case FG_DTYPE_I64: return "int64";
    case FG_DTYPE_I32: return "int32";
    case FG_DTYPE_BOOL: return "bool";
    default: return "float32";
    }
}

/* Index of the first of n integers of type t at raw beyond 2^24 in
 * magnitude (not exact in the float a tensor holds), or -1. */
static int64_t int_range_bad(fg_dtype t, const unsigned char *raw, int64_t n)
{
    for (int64_t i = 0; t == FG_DTYPE_I64 || t == FG_DTYPE_I32 ? i < n : 0; i++) {
        int64_t v = t == FG_DTYPE_I64 ? ((const int64_t *)raw)[i] : ((const int32_t *)raw)[i];
        if (v > (1 << 24) || v < -(1 << 24))
            return i;
    }
    return -1;
}

static const char *shape_text(const int64_t *shape, int rank, char *buf, size_t size)
{
    size_t o = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
    return buf;
}

/* Checks rank and dimensions (1..FG_MAX_RANK, each positive; rank 0 too
 * with scalar_ok) and that the element count is at most max_numel; sets
 * *numel. */
static int check_shape(const int64_t *shape, int rank, int64_t max_numel, int scalar_ok, int64_t *numel, char *why,
                       size_t whysz)
{
    if (rank == 0 && !scalar_ok)
        return fail(why, whysz, "is a scalar (shape []); a tensor has 1 to %d dimensions", FG_MAX_RANK);
    if (rank > FG_MAX_RANK)
        return fail(why, whysz, "has %d dimensions; a tensor has 1 to %d", rank, FG_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1) {
            char b[160];
            return fail(why, whysz, "shape %s has an empty dimension", shape_text(shape, rank, b, sizeof b));
        }
        if (shape[i] > max_numel || n > max_numel / shape[i]) {
            char b[160];
            return fail(why, whysz, "shape %s has more than %lld elements (the limit)",
                        shape_text(shape, rank, b, sizeof b), (long long)max_numel);
        }
        n *= shape[i];
    }
    *numel = n;
    return 0;
}

/* ---- .npy ------------------------------------------------------------------- */

/* The header is a Python dict literal:
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed by a small scanner over those three keys. */
typedef struct npy_hdr {
    const char *s;
    size_t n, i;
    char err[160];
} npy_hdr;

static int hdr_bad(npy_hdr *h, const char *what)
{
    if (!h->err[0])
        snprintf(h->err, sizeof h->err, "malformed .npy header: %s (at byte %zu of the header)", what, h->i);
    return 0;
}

static void hdr_ws(npy_hdr *h)
{
    while (h->i < h->n && (h->s[h->i] == ' ' || h->s[h->i] == '\t' || h->s[h->i] == '\n' || h->s[h->i] == '\r'))
        h->i++;
}

static int hdr_ch(npy_hdr *h, char c)
{
    hdr_ws(h);
    if (h->i < h->n && h->s[h->i] == c) {
        h->i++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes into out[0..size). */
static int hdr_str(npy_hdr *h, char *out, size_t size)
{
    hdr_ws(h);
    if (h->i >= h->n || (h->s[h->i] != '\'' && h->s[h->i] != '"'))
        return hdr_bad(h, "expected a quoted string");
    char q = h->s[h->i++];
    size_t o = 0;
    while (h->i < h->n && h->s[h->i] != q) {
        char c = h->s[h->i++];
        if (c == '\\' || (unsigned char)c < 0x20 || o + 1 >= size)
            return hdr_bad(h, "unexpected text in a string");
        out[o++] = c;
    }
    if (h->i >= h->n)
        return hdr_bad(h, "unterminated string");
    h->i++;
    out[o] = 0;
    return 1;
}

static int hdr_word(npy_hdr *h, const char *w)
{
    hdr_ws(h);
    size_t n = strlen(w);
    if (h->n - h->i >= n && memcmp(h->s + h->i, w, n) == 0) {
        h->i += n;
        return 1;
    }
    return 0;
}

/* A tuple of non-negative integers: (), (5,), (2, 3). */
static int hdr_shape(npy_hdr *h, int64_t *shape, int *rank)
{
    *rank = 0;
    if (!hdr_ch(h, '('))
        return hdr_bad(h, "expected '(' for the shape");
    for (;;) {
        if (hdr_ch(h, ')'))
            return 1;
        hdr_ws(h);
        if (h->i >= h->n || h->s[h->i] < '0' || h->s[h->i] > '9')
            return hdr_bad(h, "expected a dimension");
        int64_t v = 0;
        while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return hdr_bad(h, "dimension too large");
            v = v * 10 + (h->s[h->i++] - '0');
        }
        if (h->i < h->n && h->s[h->i] == 'L')   /* Python 2 long */
            h->i++;
        if (*rank >= 64)
            return hdr_bad(h, "more than 64 dimensions");
        if (*rank < FG_MAX_RANK + 1)
            shape[*rank] = v;
        (*rank)++;
        if (hdr_ch(h, ','))
            continue;
        if (hdr_ch(h, ')'))
            return 1;
        return hdr_bad(h, "expected ',' or ')' in the shape");
    }
}

/* Parses the dict: descr, fortran_order and shape, each exactly once. */
static int hdr_parse(npy_hdr *h, char descr[32], int *fortran, int64_t *shape, int *rank)
{
    int seen = 0;
    if (!hdr_ch(h, '{'))
        return hdr_bad(h, "expected '{'");
    while (!hdr_ch(h, '}')) {
        char key[32];
        if (!hdr_str(h, key, sizeof key))
            return 0;
        if (!hdr_ch(h, ':'))
            return hdr_bad(h, "expected ':' after a key");
        int bit;
        if (strcmp(key, "descr") == 0) {
            bit = 1;
            if (!hdr_str(h, descr, 32))
                return 0;
        } else if (strcmp(key, "fortran_order") == 0) {
            bit = 2;
            if (hdr_word(h, "True"))
                *fortran = 1;
            else if (hdr_word(h, "False"))
                *fortran = 0;
            else
                return hdr_bad(h, "fortran_order must be True or False");
        } else if (strcmp(key, "shape") == 0) {
            bit = 4;
            if (!hdr_shape(h, shape, rank))
                return 0;
        } else {
            char b[300];
            snprintf(h->err, sizeof h->err, "malformed .npy header: unexpected key '%s'", shown(key, b));
            return 0;
        }
        if (seen & bit)
            return hdr_bad(h, "a key given twice");
        seen |= bit;
        if (!hdr_ch(h, ',')) {
            if (!hdr_ch(h, '}'))
                return hdr_bad(h, "expected ',' or '}'");
            break;
        }
    }
    hdr_ws(h);
    if (h->i != h->n)
        return hdr_bad(h, "text after the closing '}'");
    if (seen != 7)
        return hdr_bad(h, !(seen & 1) ? "no 'descr'" : !(seen & 2) ? "no 'fortran_order'" : "no 'shape'");
    return 1;
}

/* A NumPy type string as words, for messages. */
static const char *descr_words(const char *d)
{
    static const struct { const char *code, *name; } names[] = {
        {"f8", "float64"}, {"f16", "float128"}, {"f4", "float32"}, {"f2", "float16"}, {"i1", "int8"},
        {"i2", "int16"},   {"i4", "int32"},     {"i8", "int64"},   {"u1", "uint8"},   {"u2", "uint16"},
        {"u4", "uint32"},  {"u8", "uint64"},    {"b1", "bool"},    {"c8", "complex64"}, {"c16", "complex128"},
        {"V2", "2-byte raw records, as bfloat16 arrays are saved"},
    };
    const char *c = d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=' ? d + 1 : d;
    for (size_t i = 0; i < FG_COUNTOF(names); i++)
        if (strcmp(c, names[i].code) == 0)
            return names[i].name;
    return "an unknown type";
}

enum { NPY_INPUT = 1 };
static int npy_read_fd(int fd, int64_t max_numel, int flags, fg_file_tensor *out, char *why, size_t whysz);

/* Opens path once and reads it with npy_read_fd(flags). */
static int npy_read_path(const char *path, int64_t max_numel, int flags, fg_file_tensor *out, char *why,
                         size_t whysz)
{
    memset(out, 0, sizeof *out);
    uint64_t size;
    int fd = open_regular(path, &size, why, whysz);
    if (fd < 0)
        return -1;
    fg_oom_defer_close(fd);   /* closed if reading unwinds (oom.h) */
    int rc = npy_read_fd(fd, max_numel, flags, out, why, whysz);
    fg_oom_close(fd);
    return rc;
}

int fg_npy_read(const char *path, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz)
{
    return npy_read_path(path, max_numel, 0, out, why, whysz);
}

int fg_npy_read_fd(int fd, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz)
{
    return npy_read_fd(fd, max_numel, 0, out, why, whysz);
}

int fg_npy_read_input(const char *path, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz)
{
    return npy_read_path(path, max_numel, NPY_INPUT, out, why, whysz);
}

/* fg_npy_read_fd, with flags NPY_INPUT for fg_npy_read_input's scalars and
 * float64 files. */
static int npy_read_fd(int fd, int64_t max_numel, int flags, fg_file_tensor *out, char *why, size_t whysz)
{
    memset(out, 0, sizeof *out);
    uint64_t size;
    if (fd_size(fd, &size, why, whysz))
        return -1;
    int rc = -1;
    char *hdr = NULL;
    unsigned char *raw = NULL;
    unsigned char pre[12];
    if (size < 10) {
        fail(why, whysz, "not an .npy file (%llu bytes, too short for the header)", (unsigned long long)size);
        goto done;
    }
    if (read_at(fd, 0, pre, size >= 12 ? 12 : 10, why, whysz))
        goto done;
    if (memcmp(pre, "\x93NUMPY", 6) != 0) {
        fail(why, whysz, "not an .npy file (no \\x93NUMPY magic string)");
        goto done;
    }
    uint64_t hlen, start;
    if (pre[6] == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        start = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (size < 12) {
            fail(why, whysz, "truncated: %llu bytes, too short for the header", (unsigned long long)size);
            goto done;
        }
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
        start = 12;
    } else {
        fail(why, whysz, "unsupported .npy format version %d.%d", pre[6], pre[7]);
        goto done;
    }
    if (hlen > FG_NPY_HEADER_MAX) {
        fail(why, whysz, "the .npy header is %llu bytes, more than the %zu-byte limit", (unsigned long long)hlen,
             FG_NPY_HEADER_MAX);
        goto done;
    }
    if (start + hlen > size) {
        fail(why, whysz, "truncated: the header announces %llu bytes but the file has %llu", (unsigned long long)hlen,
             (unsigned long long)(size - start));
        goto done;
    }
    hdr = fg_xmalloc((size_t)hlen + 1);
    if (read_at(fd, start, hdr, (size_t)hlen, why, whysz))
        goto done;
    hdr[hlen] = 0;
    npy_hdr h = {.s = hdr, .n = (size_t)hlen};
    char descr[32] = "";
    int fortran = 0;
    int64_t shape[FG_MAX_RANK + 1];
    int rank = 0;
    if (!hdr_parse(&h, descr, &fortran, shape, &rank)) {
        fail(why, whysz, "%s", h.err);
        goto done;
    }
    char sd[300];
    int file_le = descr[0] == '<' || (descr[0] == '=' && host_is_le());
    int ordered = descr[0] == '<' || descr[0] == '>' || descr[0] == '=';   /* then descr + 1 is inside the string */
    if (ordered && !strcmp(descr + 1, "f4")) {
        out->dtype = FG_DTYPE_F32;
    } else if (ordered && !strcmp(descr + 1, "f2")) {
        out->dtype = FG_DTYPE_F16;
    } else if (ordered && !strcmp(descr + 1, "i8")) {
        out->dtype = FG_DTYPE_I64;
    } else if (ordered && !strcmp(descr + 1, "i4")) {
        out->dtype = FG_DTYPE_I32;
    } else if (!strcmp(descr, "|b1")) {
        out->dtype = FG_DTYPE_BOOL;
    } else if (ordered && !strcmp(descr + 1, "f8") && (flags & NPY_INPUT)) {
        out->dtype = FG_DTYPE_F32;   /* decoded from float64 below */
        out->from_f64 = 1;
    } else {
        fail(why, whysz, "dtype '%s' (%s) is not supported: an .npy tensor must be float32, float16, int64, int32 or "
             "bool (bfloat16 tensors read float32 files)", shown(descr, sd), descr_words(descr));
        goto done;
    }
    if (fortran) {
        fail(why, whysz, "the array is in Fortran order; save a C-order array (numpy.ascontiguousarray)");
        goto done;
    }
    int64_t numel;
    if (rank > FG_MAX_RANK) {
        fail(why, whysz, "has %d dimensions; a tensor has 1 to %d", rank, FG_MAX_RANK);
        goto done;
    }
    if (check_shape(shape, rank, max_numel, flags & NPY_INPUT, &numel, why, whysz))
        goto done;
    size_t esz = out->from_f64 ? 8 : dtype_bytes(out->dtype);
    uint64_t need = (uint64_t)numel * esz, have = size - start - hlen;
    char sb[160];
    if (have < need) {
        fail(why, whysz, "truncated: shape %s of %s needs %llu bytes of data, the file has %llu",
             shape_text(shape, rank, sb, sizeof sb), npy_type_name(out->dtype),
             (unsigned long long)need, (unsigned long long)have);
        goto done;
    }
    if (have > need) {
        fail(why, whysz, "%llu bytes follow the data of shape %s", (unsigned long long)(have - need),
             shape_text(shape, rank, sb, sizeof sb));
        goto done;
    }
    raw = fg_xmalloc((size_t)need ? (size_t)need : 1);
    if (read_at(fd, start + hlen, raw, (size_t)need, why, whysz))
        goto done;
    to_host_order(raw, numel, (int)esz, file_le);
    int64_t bad = int_range_bad(out->dtype, raw, numel);
    if (bad >= 0) {
        fail(why, whysz, "element %lld is beyond 2^24 in magnitude: integer tensors are exact only up to 2^24",
             (long long)bad);
        goto done;
    }
    out->data = fg_xmalloc((size_t)numel * sizeof(float));
    if (out->from_f64)
        for (int64_t i = 0; i < numel; i++)
            out->data[i] = (float)((const double *)raw)[i];
    else
        fg_file_decode(out->dtype, raw, out->data, numel);
    out->rank = rank;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)rank);
    rc = 0;
done:
    free(hdr);
    free(raw);
    return rc;
}

int fg_npy_write(const char *path, fg_npy_type type, int rank, const int64_t *shape, const void *data, char *why,
                 size_t whysz)
{
    static const char *const descr[] = {"<f4", "<f2", "<f8", "<i8", "<i4", "|b1"};
    static const int esz[] = {4, 2, 8, 8, 4, 1};
    if ((unsigned)type > FG_NPY_BOOL || rank < 0 || rank > FG_MAX_RANK || (rank && !shape) || !data)
        return fail(why, whysz, "invalid arguments");
    int64_t numel;
    if (check_shape(shape, rank, INT64_MAX / 8, 1, &numel, why, whysz))
        return -1;
    fg_buf h = {0};
    fg_buf_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr[type]);
    for (int i = 0; i < rank; i++)
        fg_buf_printf(&h, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fg_buf_put(&h, rank == 1 ? ",), }" : "), }");
    while ((10 + h.len + 1) % 64)   /* data aligned to 64 bytes, header ends in '\n' */
        fg_buf_put(&h, " ");
    fg_buf_put(&h, "\n");
    size_t dbytes = (size_t)numel * (size_t)esz[type], total = 10 + h.len + dbytes;
    unsigned char *buf = fg_xmalloc(total);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(h.len & 0xff);
    buf[9] = (unsigned char)(h.len >> 8);
    memcpy(buf + 10, h.s, h.len);
    memcpy(buf + 10 + h.len, data, dbytes);
    to_host_order(buf + 10 + h.len, numel, esz[type], 1);
    fg_buf_free(&h);
    int rc = fg_write_file_atomic(path, buf, total);
    free(buf);
    return rc ? fail(why, whysz, "%s", strerror(errno)) : 0;
}

/* ---- .safetensors ------------------------------------------------------------ */

struct fg_safetensors {
    int fd;
    uint64_t data_start, data_size;
    json_t *hdr;
};

void fg_safetensors_close(fg_safetensors *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        fg_oom_close(s->fd);
    fg_oom_undefer(s->hdr);
    json_decref(s->hdr);
    free(s);
}

/* A JSON integer at least 0 and at most max, into *v. */
static int json_count(const json_t *j, uint64_t max, uint64_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0 || (uint64_t)json_integer_value(j) > max)
        return 0;
    *v = (uint64_t)json_integer_value(j);
    return 1;
}

/* Checks one header entry's fields (see fg_safetensors_open). */
static int check_entry(const fg_safetensors *s, const char *name, const json_t *e, char *why, size_t whysz)
{
    char sn[300];
    if (!json_is_object(e))
        return fail(why, whysz, "bad header: entry '%s' is not an object", shown(name, sn));
    const json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
                 *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return fail(why, whysz, "bad header: tensor '%s' has no string \"dtype\"", shown(name, sn));
    if (!json_is_array(sh) || json_array_size(sh) > 64)
        return fail(why, whysz, "bad header: tensor '%s' has no \"shape\" list (of at most 64 dimensions)",
                    shown(name, sn));
    for (size_t i = 0; i < json_array_size(sh); i++) {
        uint64_t d;
        if (!json_count(json_array_get(sh, i), INT64_MAX, &d))
            return fail(why, whysz, "bad header: tensor '%s' has a shape entry that is not a non-negative integer",
                        shown(name, sn));
    }
    uint64_t b, en;
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_count(json_array_get(off, 0), INT64_MAX, &b) ||
        !json_count(json_array_get(off, 1), INT64_MAX, &en))
        return fail(why, whysz, "bad header: tensor '%s' has no \"data_offsets\" [begin, end] of non-negative integers",
                    shown(name, sn));
    if (b > en || en > s->data_size)
        return fail(why, whysz, "bad header: tensor '%s' has data_offsets [%llu, %llu] outside the %llu bytes of data",
                    shown(name, sn), (unsigned long long)b, (unsigned long long)en,
                    (unsigned long long)s->data_size);
    return 0;
}

/* A parsed header is Jansson's memory (its allocator is the process's to
 * set, not ours): released by the guard if loading unwinds (oom.h). */
static void hdr_release(void *hdr) { json_decref(hdr); }

fg_safetensors *fg_safetensors_open(const char *path, char *why, size_t whysz)
{
    uint64_t size;
    int fd = open_regular(path, &size, why, whysz);
    return fd < 0 ? NULL : fg_safetensors_open_fd(fd, why, whysz);
}

fg_safetensors *fg_safetensors_open_fd(int fd, char *why, size_t whysz)
{
    uint64_t size;
    if (fd_size(fd, &size, why, whysz)) {
        close(fd);
        return NULL;
    }
    fg_safetensors *s = NULL;
    fg_oom_defer_close(fd);   /* the file's from here: closed if loading unwinds (oom.h) */
    s = fg_xcalloc(1, sizeof *s);
    s->fd = fd;
    unsigned char pre[8];
    char *text = NULL;
    if (size < 8) {
        fail(why, whysz, "not a .safetensors file (%llu bytes, too short for the header length)",
             (unsigned long long)size);
        goto bad;
    }
    if (read_at(fd, 0, pre, 8, why, whysz))
        goto bad;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | pre[i];
    if (hlen > FG_SAFETENSORS_HEADER_MAX) {
        fail(why, whysz, "header length %llu is more than the %llu-byte limit", (unsigned long long)hlen,
             (unsigned long long)FG_SAFETENSORS_HEADER_MAX);
        goto bad;
    }
    if (hlen > size - 8) {
        fail(why, whysz, "truncated: header length %llu but only %llu bytes follow", (unsigned long long)hlen,
             (unsigned long long)(size - 8));
        goto bad;
    }
    text = fg_xmalloc((size_t)hlen + 1);
    if (read_at(fd, 8, text, (size_t)hlen, why, whysz))
        goto bad;
    json_error_t err;
    s->hdr = json_loadb(text, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!s->hdr && json_error_code(&err) == json_error_out_of_memory)
        fg_oom_raise((size_t)hlen);   /* out of memory, not a bad header */
    if (s->hdr)
        fg_oom_defer(hdr_release, s->hdr);
    if (!s->hdr) {
        fail(why, whysz, "bad JSON header: %s (header line %d, column %d)", err.text, err.line, err.column);
        goto bad;
    }
    if (!json_is_object(s->hdr)) {
        fail(why, whysz, "bad header: the JSON header is not an object");
        goto bad;
    }
    s->data_start = 8 + hlen;
    s->data_size = size - 8 - hlen;
    const char *key;
    json_t *val;
    json_object_foreach(s->hdr, key, val) {
        if (strcmp(key, "__metadata__") != 0 && check_entry(s, key, val, why, whysz))
            goto bad;
    }
    free(text);
    return s;
bad:
    free(text);
    fg_safetensors_close(s);
    return NULL;
}

/* Reports a missing tensor, with the closest name or a few names. */
static int missing(const fg_safetensors *s, const char *name, char *why, size_t whysz)
{
    size_t n = json_object_size(s->hdr), k = 0;
    const char **names = fg_xmalloc(sizeof *names * (n + 1));
    const char *key;
    json_t *val;
    json_object_foreach(s->hdr, key, val) {
        (void)val;
        if (strcmp(key, "__metadata__") != 0)
            names[k++] = key;
    }
    char sn[300], sg[300];
    const char *sug = k <= 10000 && strlen(name) <= 256 ? fg_suggest(name, names, (int)k) : NULL;
    if (sug) {
        fail(why, whysz, "no tensor '%s' in the file (did you mean '%s'?)", shown(name, sn), shown(sug, sg));
    } else if (k == 0) {
        fail(why, whysz, "no tensor '%s' in the file (it holds no tensors)", shown(name, sn));
    } else {
        fg_buf b = {0};
        for (size_t i = 0; i < k && i < 4; i++)
            fg_buf_printf(&b, "%s'%s'", i ? ", " : "", shown(names[i], sg));
        fail(why, whysz, "no tensor '%s' in the file (it holds %zu: %s%s)", shown(name, sn), k, b.s,
             k > 4 ? ", ..." : "");
        fg_buf_free(&b);
    }
    free(names);
    return -1;
}

int fg_safetensors_read(fg_safetensors *s, const char *name, int64_t max_numel, fg_file_tensor *out, char *why,
                        size_t whysz)
{
    memset(out, 0, sizeof *out);
    char sn[300], w2[300];
    const json_t *e = strcmp(name, "__metadata__") != 0 ? json_object_get(s->hdr, name) : NULL;
    if (!e)
        return missing(s, name, why, whysz);
    const char *dt = json_string_value(json_object_get(e, "dtype"));
    if (!strcmp(dt, "F32"))
        out->dtype = FG_DTYPE_F32;
    else if (!strcmp(dt, "F16"))
        out->dtype = FG_DTYPE_F16;
    else if (!strcmp(dt, "BF16"))
        out->dtype = FG_DTYPE_BF16;
    else
        return fail(why, whysz, "tensor '%s' has dtype %s; fusegen reads F32, F16 and BF16", shown(name, sn),
                    shown(dt, w2));
    const json_t *sh = json_object_get(e, "shape");
    int rank = (int)json_array_size(sh);
    int64_t shape[FG_MAX_RANK];
    if (rank > FG_MAX_RANK)
        return fail(why, whysz, "tensor '%s' has %d dimensions; a tensor has 1 to %d", shown(name, sn), rank,
                    FG_MAX_RANK);
    for (int i = 0; i < rank; i++)
        shape[i] = (int64_t)json_integer_value(json_array_get(sh, (size_t)i));
    int64_t numel;
    if (check_shape(shape, rank, max_numel, 0, &numel, w2, sizeof w2))
        return fail(why, whysz, "tensor '%s' %s", shown(name, sn), w2);
    const json_t *off = json_object_get(e, "data_offsets");
    uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 0)),
             en = (uint64_t)json_integer_value(json_array_get(off, 1));
    uint64_t need = (uint64_t)numel * dtype_bytes(out->dtype);
    if (en - b != need) {
        char sb[160];
        return fail(why, whysz, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu",
                    shown(name, sn), (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), dt,
                    shape_text(shape, rank, sb, sizeof sb), (unsigned long long)need);
    }
    unsigned char *raw = fg_xmalloc((size_t)need ? (size_t)need : 1);
    if (read_at(s->fd, s->data_start + b, raw, (size_t)need, why, whysz)) {
        free(raw);
        return -1;
    }
    to_host_order(raw, numel, (int)dtype_bytes(out->dtype), 1);
    out->data = fg_xmalloc((size_t)numel * sizeof(float));
    fg_file_decode(out->dtype, raw, out->data, numel);
    free(raw);
    out->rank = rank;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)rank);
    return 0;
}
