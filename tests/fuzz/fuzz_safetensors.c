/*
 * fuzz_safetensors.c -- fuzz target for the .safetensors reader
 * (codegen/weights_file.c).
 *
 * Input: the bytes of a .safetensors file (an 8-byte little-endian header
 * length, a JSON header, the data).  They are written to a private file,
 * which is opened with fg_safetensors_open; when it opens, every name of the
 * header (up to MAX_NAMES, read here with Jansson from the same bytes) is
 * read with fg_safetensors_read (at most MAX_NUMEL elements), and so are
 * "__metadata__", a name the file does not hold and the empty name.
 * Checks: no crash, no sanitizer report, no leak, and
 *   - a failed open or read leaves a non-empty reason (and a read no data);
 *   - an open succeeds only when the header length fits the file and its
 *     text is a JSON object whose every entry other than "__metadata__" has
 *     a string dtype, a shape list and data_offsets [begin, end] within the
 *     data;
 *   - a read succeeds only for a name of the header with dtype F32, F16 or
 *     BF16, 1..FG_MAX_RANK positive dimensions, at most MAX_NUMEL elements
 *     and end - begin exactly the bytes they need; it returns that dtype and
 *     shape and the values of those bytes, converted here independently;
 *   - "__metadata__", a missing name and "" are never read.
 */
#include "fuzz_common.h"

#include <jansson.h>
#include <math.h>

#include "weights_file.h"

#define MAX_NUMEL 4096
#define MAX_NAMES 64

static char *g_path;

static void init_once(void)
{
    if (g_path)
        return;
    char *dir = fz_tmpdir("safetensors");
    size_t n = strlen(dir) + 24;
    g_path = malloc(n);
    snprintf(g_path, n, "%s/in.safetensors", dir);
    free(dir);
}

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

static float element(const uint8_t *p, fg_dtype t)
{
    float f;
    if (t == FG_DTYPE_F32) {
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&f, &u, 4);
    } else if (t == FG_DTYPE_F16) {
        f = half_value((uint16_t)(p[0] | p[1] << 8));
    } else {
        uint32_t u = ((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16;
        memcpy(&f, &u, 4);
    }
    return f;
}

/* The header as this file reads it: NULL when the open must fail. */
static json_t *own_header(const uint8_t *d, size_t size, size_t *data_start)
{
    if (size < 8)
        return NULL;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | d[i];
    if (hlen > size - 8)
        return NULL;
    json_t *j = json_loadb((const char *)d + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    *data_start = 8 + (size_t)hlen;
    return j;
}

static int nonneg_int(const json_t *v) { return json_is_integer(v) && json_integer_value(v) >= 0; }

/* Whether an entry passes the open's checks (see the top comment). */
static int entry_ok(const json_t *e, size_t data_size)
{
    if (!json_is_object(e) || !json_is_string(json_object_get(e, "dtype")))
        return 0;
    const json_t *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    if (!json_is_array(sh) || json_array_size(sh) > 64)
        return 0;
    for (size_t i = 0; i < json_array_size(sh); i++)
        if (!nonneg_int(json_array_get(sh, i)))
            return 0;
    if (!json_is_array(off) || json_array_size(off) != 2 || !nonneg_int(json_array_get(off, 0)) ||
        !nonneg_int(json_array_get(off, 1)))
        return 0;
    json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
    return b <= en && (uint64_t)en <= data_size;
}

/* Checks one successful or failed read of an entry e of the header. */
static void check_read(const char *name, const json_t *e, int rc, const fg_file_tensor *t, const uint8_t *data,
                       size_t data_start)
{
    const char *dt = json_string_value(json_object_get(e, "dtype"));
    fg_dtype want = strcmp(dt, "F32") == 0 ? FG_DTYPE_F32 : strcmp(dt, "F16") == 0 ? FG_DTYPE_F16
                                           : strcmp(dt, "BF16") == 0              ? FG_DTYPE_BF16
                                                                                  : FG_DTYPE_COUNT;
    const json_t *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    size_t rank = json_array_size(sh);
    int ok = want != FG_DTYPE_COUNT && rank >= 1 && rank <= FG_MAX_RANK;
    int64_t numel = 1;
    for (size_t i = 0; ok && i < rank; i++) {
        json_int_t v = json_integer_value(json_array_get(sh, i));
        if (v < 1 || v > MAX_NUMEL || numel * v > MAX_NUMEL)
            ok = 0;
        else
            numel *= v;
    }
    size_t esz = want == FG_DTYPE_F32 ? 4 : 2;
    json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
    if (ok && (uint64_t)(en - b) != (uint64_t)numel * esz)
        ok = 0;
    if (ok != (rc == 0))
        FZ_FAIL("fg_safetensors_read of '%s' returned %d; this harness expected %s", name, rc,
                ok ? "success" : "failure");
    if (!ok)
        return;
    if (t->dtype != want || t->rank != (int)rank)
        FZ_FAIL("tensor '%s': dtype %d rank %d returned, header says %s rank %zu", name, (int)t->dtype, t->rank, dt,
                rank);
    for (size_t i = 0; i < rank; i++)
        if (t->shape[i] != (int64_t)json_integer_value(json_array_get(sh, i)))
            FZ_FAIL("tensor '%s': dimension %zu differs from the header", name, i);
    const uint8_t *p = data + data_start + (size_t)b;
    for (int64_t i = 0; i < numel; i++) {
        float w = element(p + (size_t)i * esz, want), g = t->data[i];
        int same = (isnan(w) && isnan(g) && want == FG_DTYPE_F16) || memcmp(&w, &g, 4) == 0;
        if (!same)
            FZ_FAIL("tensor '%s' element %lld: read %a, the bytes hold %a", name, (long long)i, (double)g, (double)w);
    }
}

/* Reads a name that must not be read. */
static void check_refused(fg_safetensors *s, const char *name)
{
    fg_file_tensor t;
    char why[300] = "";
    if (fg_safetensors_read(s, name, MAX_NUMEL, &t, why, sizeof why) != -1 || !why[0] || t.data)
        FZ_FAIL("fg_safetensors_read of '%s' did not fail with a reason", name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    fz_write_file(g_path, data, size);
    size_t data_start = 0;
    json_t *own = own_header(data, size, &data_start);
    int own_ok = own != NULL;
    if (own) {
        const char *key;
        json_t *val;
        json_object_foreach(own, key, val) {
            if (strcmp(key, "__metadata__") != 0 && !entry_ok(val, size - data_start))
                own_ok = 0;
        }
    }

    char why[300] = "";
    fg_safetensors *s = fg_safetensors_open(g_path, why, sizeof why);
    if (!s && !why[0])
        FZ_FAIL("fg_safetensors_open failed without a reason");
    if ((s != NULL) != own_ok)
        FZ_FAIL("fg_safetensors_open %s (%s); this harness expected the opposite", s ? "succeeded" : "failed", why);
    if (getenv("FUSEGEN_FUZZ_VERBOSE") && !s)
        fprintf(stderr, "refused: %s\n", why);
    if (s) {
        const char *key;
        json_t *val;
        int k = 0;
        json_object_foreach(own, key, val) {
            if (strcmp(key, "__metadata__") == 0 || k++ >= MAX_NAMES)
                continue;
            fg_file_tensor t;
            why[0] = 0;
            int rc = fg_safetensors_read(s, key, MAX_NUMEL, &t, why, sizeof why);
            if (rc != 0 && rc != -1)
                FZ_FAIL("fg_safetensors_read returned %d", rc);
            if (rc == -1 && (!why[0] || t.data))
                FZ_FAIL("fg_safetensors_read of '%s' failed without a reason or with data", key);
            check_read(key, val, rc, &t, data, data_start);
            if (getenv("FUSEGEN_FUZZ_VERBOSE"))
                fprintf(stderr, "%s: %s\n", key, rc ? why : "read");
            free(t.data);
        }
        check_refused(s, "__metadata__");
        if (!json_object_get(own, "fuzz.missing"))
            check_refused(s, "fuzz.missing");
        if (!json_object_get(own, ""))
            check_refused(s, "");
        fg_safetensors_close(s);
    }
    json_decref(own);
    return 0;
}
