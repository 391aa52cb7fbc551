/*
 * fuzz_resp.c -- fuzz target for the Redis reply reader (runtime/resp.c),
 * what the remote cache tier reads a server's answers with.
 *
 * Input: a settings byte, then the bytes a server sends.  Settings: bits
 * 0-2 the most bytes one read of the source returns (1, 2, 4, ... 128),
 * bit 3 vary it read by read (a generator seeded by the byte), bits 4-5 the
 * reader's bulk_max (0, 16, 1024 or 1 MiB), bit 6 the source fails (-1 with
 * a reason) at the end of the bytes instead of reporting their end.
 * Replies are read with fg_resp_read until one fails, at most 64.
 * Checks: no crash, no sanitizer report, no leak, and the reader agrees
 * with a reference parser over the whole input in memory (written here from
 * resp.h's contract): the same replies (type, integer, exact bytes of every
 * string, elements), the same bytes consumed (fg_resp_pending), and a
 * failure exactly where the reference fails, with *out NULL and a reason;
 * no string longer than bulk_max or FG_RESP_LINE_MAX, no reply of more than
 * FG_RESP_ELEMENTS_MAX elements in all or nested deeper than
 * FG_RESP_DEPTH_MAX.
 */
#include "fuzz_common.h"

#include "resp.h"

typedef struct source {
    const uint8_t *p;
    size_t n, at;
    unsigned chunk, vary, fail_at_end;
    uint32_t rng;
} source;

static ssize_t src_read(void *user, void *buf, size_t n, char *why, size_t why_size)
{
    source *s = user;
    if (s->at == s->n) {
        if (s->fail_at_end) {
            snprintf(why, why_size, "the source failed (as the fuzz input asked)");
            return -1;
        }
        return 0;
    }
    size_t k = s->chunk;
    if (s->vary) {
        s->rng = s->rng * 1103515245u + 12345u;
        k = 1 + (s->rng >> 16) % s->chunk;
    }
    if (k > n)
        k = n;
    if (k > s->n - s->at)
        k = s->n - s->at;
    memcpy(buf, s->p + s->at, k);
    s->at += k;
    return (ssize_t)k;
}

/* ---- the reference parser -------------------------------------------------- */

typedef struct ref {
    const uint8_t *p;
    size_t n, pos, elements, bulk_max;
} ref;

/* The next line (CRLF excluded) at r->pos: its start and length; -1 when
 * there is none within FG_RESP_LINE_MAX - 1 bytes (CRLF included). */
static long ref_line(ref *r, const uint8_t **start)
{
    for (size_t i = r->pos; i + 1 < r->n && i + 2 - r->pos <= FG_RESP_LINE_MAX - 1; i++)
        if (r->p[i] == '\r' && r->p[i + 1] == '\n') {
            *start = r->p + r->pos;
            long len = (long)(i - r->pos);
            r->pos = i + 2;
            return len;
        }
    return -1;
}

/* An integer as resp.h accepts it: the line read as a C string (up to a NUL)
 * is an optional '-' and 1 to 18 digits. */
static int ref_int(const uint8_t *s, long len, long long *v)
{
    long i = 0, digits = 0;
    int neg = len > 0 && s[0] == '-';
    i = neg;
    long long x = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9' && digits < 18; i++, digits++)
        x = x * 10 + (s[i] - '0');
    if (digits == 0 || (i < len && s[i] != 0))
        return -1;
    *v = neg ? -x : x;
    return 0;
}

/* Compares the reader's reply got with the reference's parse at r->pos;
 * returns 1 when the reference parses a reply (FZ_FAIL when they differ),
 * 0 when the reference fails (then got must be NULL: checked by the caller). */
static int ref_reply(ref *r, int depth, const fg_resp_reply *got)
{
    const uint8_t *line;
    long ll = ref_line(r, &line);
    if (ll <= 0)
        return 0;
    long long v = 0;
    fg_resp_type type;
    switch (line[0]) {
    case '+':
    case '-':
        type = line[0] == '+' ? FG_RESP_STATUS : FG_RESP_ERROR;
        if (!got)
            return 1;
        if (got->type != type || got->len != (size_t)ll - 1 || memcmp(got->str, line + 1, got->len) != 0 ||
            got->str[got->len] != 0)
            FZ_FAIL("a %s line differs from the reference", fg_resp_type_name(type));
        return 1;
    case ':':
        if (ref_int(line + 1, ll - 1, &v) != 0)
            return 0;
        if (got && (got->type != FG_RESP_INTEGER || got->integer != v))
            FZ_FAIL("integer %lld read as %s %lld", v, fg_resp_type_name(got->type), got->integer);
        return 1;
    case '$':
        if (ref_int(line + 1, ll - 1, &v) != 0)
            return 0;
        if (v == -1) {
            if (got && got->type != FG_RESP_NIL)
                FZ_FAIL("a nil bulk string read as %s", fg_resp_type_name(got->type));
            return 1;
        }
        if (v < 0 || (unsigned long long)v > r->bulk_max || r->n - r->pos < (size_t)v + 2 ||
            r->p[r->pos + (size_t)v] != '\r' || r->p[r->pos + (size_t)v + 1] != '\n')
            return 0;
        if (got && (got->type != FG_RESP_BULK || got->len != (size_t)v ||
                    memcmp(got->str, r->p + r->pos, (size_t)v) != 0 || got->str[v] != 0))
            FZ_FAIL("a bulk string of %lld bytes differs from the reference", v);
        r->pos += (size_t)v + 2;
        return 1;
    case '*':
        if (ref_int(line + 1, ll - 1, &v) != 0)
            return 0;
        if (v == -1) {
            if (got && got->type != FG_RESP_NIL)
                FZ_FAIL("a nil multi-bulk reply read as %s", fg_resp_type_name(got->type));
            return 1;
        }
        if (v < 0 || (unsigned long long)v > FG_RESP_ELEMENTS_MAX - r->elements || depth >= FG_RESP_DEPTH_MAX)
            return 0;
        r->elements += (size_t)v;
        if (got && (got->type != FG_RESP_ARRAY || got->n != (size_t)v))
            FZ_FAIL("a multi-bulk reply of %lld elements read as %s of %zu", v, fg_resp_type_name(got->type),
                    got->n);
        for (long long i = 0; i < v; i++)
            if (!ref_reply(r, depth + 1, got ? got->elem[i] : NULL))
                return 0;
        return 1;
    default:
        return 0;
    }
}

/* Bounds every reply must keep, whatever the input. */
static void check_bounds(const fg_resp_reply *rep, size_t bulk_max, int depth, size_t *elements)
{
    if ((unsigned)rep->type >= FG_RESP_TYPE_COUNT)
        FZ_FAIL("reply type %d", (int)rep->type);
    if (depth > FG_RESP_DEPTH_MAX)
        FZ_FAIL("a reply nested %d deep", depth);
    if (rep->type == FG_RESP_BULK && rep->len > bulk_max)
        FZ_FAIL("a bulk string of %zu bytes with bulk_max %zu", rep->len, bulk_max);
    if ((rep->type == FG_RESP_STATUS || rep->type == FG_RESP_ERROR) && rep->len >= FG_RESP_LINE_MAX)
        FZ_FAIL("a line of %zu bytes", rep->len);
    *elements += rep->n;
    if (*elements > FG_RESP_ELEMENTS_MAX)
        FZ_FAIL("a reply of more than %d elements", FG_RESP_ELEMENTS_MAX);
    for (size_t i = 0; i < rep->n; i++)
        check_bounds(rep->elem[i], bulk_max, depth + 1, elements);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const size_t bulk_maxes[4] = {0, 16, 1024, (size_t)1 << 20};
    unsigned set = data[0];
    source s = {.p = data + 1, .n = size - 1, .chunk = 1u << (set & 7), .vary = (set >> 3) & 1,
                .fail_at_end = (set >> 6) & 1, .rng = set};
    size_t bulk_max = bulk_maxes[(set >> 4) & 3];
    fg_resp_reader rd;
    fg_resp_reader_init(&rd, src_read, &s, bulk_max);
    ref r = {.p = data + 1, .n = size - 1, .bulk_max = bulk_max};
    for (int k = 0; k < 64; k++) {
        fg_resp_reply *rep = (fg_resp_reply *)1;
        char why[256] = "";
        int rc = fg_resp_read(&rd, &rep, why, sizeof why);
        r.elements = 0;
        size_t at = r.pos;
        if (rc != 0) {
            if (rc != -1 || rep != NULL || !why[0])
                FZ_FAIL("fg_resp_read failed with %d, out %p, reason '%s'", rc, (void *)rep, why);
            r.pos = at;
            if (ref_reply(&r, 0, NULL))
                FZ_FAIL("reply %d: the reader failed (%s) where the reference reads a reply", k, why);
            return 0;
        }
        if (!rep)
            FZ_FAIL("fg_resp_read returned 0 without a reply");
        size_t elements = 0;
        check_bounds(rep, bulk_max, 0, &elements);
        if (!ref_reply(&r, 0, rep))
            FZ_FAIL("reply %d: the reader read a %s where the reference fails", k, fg_resp_type_name(rep->type));
        fg_resp_free(rep);
        if (s.at - fg_resp_pending(&rd) != r.pos)
            FZ_FAIL("reply %d: the reader consumed %zu bytes, the reference %zu", k, s.at - fg_resp_pending(&rd),
                    r.pos);
    }
    return 0;
}
