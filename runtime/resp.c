/*
 * resp.c -- the bounded Redis reply reader (resp.h): a pull parser over a
 * byte source with a read-ahead buffer.  Lines are read byte by byte up to
 * FG_RESP_LINE_MAX; a bulk string's buffer starts small and doubles as its
 * bytes arrive, up to the length it announced, which was checked against
 * bulk_max first; multi-bulk replies count their elements (all levels)
 * against FG_RESP_ELEMENTS_MAX before allocating them.
 */
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const type_names[] = {
    [FG_RESP_STATUS] = "status", [FG_RESP_ERROR] = "error", [FG_RESP_INTEGER] = "integer",
    [FG_RESP_BULK] = "bulk string", [FG_RESP_NIL] = "nil", [FG_RESP_ARRAY] = "multi-bulk",
};
_Static_assert(sizeof type_names / sizeof type_names[0] == FG_RESP_TYPE_COUNT, "a name per reply type");

const char *fg_resp_type_name(fg_resp_type t)
{
    return (unsigned)t < FG_RESP_TYPE_COUNT ? type_names[t] : "unknown";
}

void fg_resp_reader_init(fg_resp_reader *rd, fg_resp_read_fn read, void *user, size_t bulk_max)
{
    memset(rd, 0, sizeof *rd);
    rd->read = read;
    rd->user = user;
    rd->bulk_max = bulk_max;
}

size_t fg_resp_pending(const fg_resp_reader *rd) { return rd->len - rd->pos; }

void fg_resp_free(fg_resp_reply *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        fg_resp_free(r->elem[i]);
    free(r->elem);
    free(r->str);
    free(r);
}

/* Refills the read-ahead buffer when it is empty; 0, or -1 with why. */
static int fill(fg_resp_reader *rd, char *why, size_t n)
{
    if (rd->pos < rd->len)
        return 0;
    ssize_t k = rd->read(rd->user, rd->buf, sizeof rd->buf, why, n);
    if (k == 0)
        snprintf(why, n, "the server closed the connection in the middle of a reply");
    if (k <= 0)
        return -1;
    rd->pos = 0;
    rd->len = (size_t)k;
    return 0;
}

/* Reads one line (without its CRLF) into line[FG_RESP_LINE_MAX]; its
 * length, or -1 with why. */
static long read_line(fg_resp_reader *rd, char *line, char *why, size_t n)
{
    size_t at = 0;
    for (;;) {
        if (fill(rd, why, n) != 0)
            return -1;
        char c = (char)rd->buf[rd->pos++];
        if (at + 1 >= FG_RESP_LINE_MAX) {
            snprintf(why, n, "a reply line longer than %d bytes", FG_RESP_LINE_MAX);
            return -1;
        }
        line[at++] = c;
        if (at >= 2 && line[at - 2] == '\r' && c == '\n') {
            line[at - 2] = 0;
            return (long)(at - 2);
        }
    }
}

/* The integer of s (optional '-', 1 to 18 digits, nothing else); 0, or -1
 * with why. */
static int parse_int(const char *s, long long *v, char *why, size_t n)
{
    int neg = *s == '-';
    const char *p = s + neg;
    long long x = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
        x = x * 10 + (*p - '0');
    if (*p || digits == 0) {
        snprintf(why, n, "'%.40s' is not an integer of Redis's protocol", s);
        return -1;
    }
    *v = neg ? -x : x;
    return 0;
}

/* Reads exactly len bytes of a bulk string and its CRLF into a malloc'd,
 * NUL-terminated buffer that grows with what arrives; 0, or -1 with why. */
static int read_bulk(fg_resp_reader *rd, size_t len, char **out, char *why, size_t n)
{
    size_t cap = len + 3 < 65536 ? len + 3 : 65536, at = 0;
    char *s = fg_xmalloc(cap);
    while (at < len + 2) {
        if (fill(rd, why, n) != 0) {
            free(s);
            return -1;
        }
        size_t k = rd->len - rd->pos;
        if (k > len + 2 - at)
            k = len + 2 - at;
        if (at + k + 1 > cap) {
            while (at + k + 1 > cap)
                cap = cap * 2 < len + 3 ? cap * 2 : len + 3;
            s = fg_xrealloc(s, cap);
        }
        memcpy(s + at, rd->buf + rd->pos, k);
        rd->pos += k;
        at += k;
    }
    if (s[len] != '\r' || s[len + 1] != '\n') {
        free(s);
        snprintf(why, n, "a bulk string not followed by CRLF");
        return -1;
    }
    s[len] = 0;
    *out = s;
    return 0;
}

static int read_reply(fg_resp_reader *rd, int depth, fg_resp_reply **out, char *why, size_t n)
{
    char line[FG_RESP_LINE_MAX];
    long ll = read_line(rd, line, why, n);
    if (ll < 0)
        return -1;
    if (ll == 0) {
        snprintf(why, n, "an empty reply line");
        return -1;
    }
    fg_resp_reply *r = fg_xcalloc(1, sizeof *r);
    long long v = 0;
    switch (line[0]) {
    case '+':
    case '-':
        r->type = line[0] == '+' ? FG_RESP_STATUS : FG_RESP_ERROR;
        r->len = (size_t)ll - 1;
        r->str = fg_xstrndup(line + 1, r->len);
        break;
    case ':':
        r->type = FG_RESP_INTEGER;
        if (parse_int(line + 1, &r->integer, why, n) != 0)
            goto fail;
        break;
    case '$':
        if (parse_int(line + 1, &v, why, n) != 0)
            goto fail;
        if (v == -1) {
            r->type = FG_RESP_NIL;
            break;
        }
        if (v < 0 || (unsigned long long)v > rd->bulk_max) {
            snprintf(why, n, "a bulk string of %lld bytes (at most %zu accepted)", v, rd->bulk_max);
            goto fail;
        }
        r->type = FG_RESP_BULK;
        r->len = (size_t)v;
        if (read_bulk(rd, r->len, &r->str, why, n) != 0)
            goto fail;
        break;
    case '*':
        if (parse_int(line + 1, &v, why, n) != 0)
            goto fail;
        if (v == -1) {
            r->type = FG_RESP_NIL;
            break;
        }
        if (v < 0 || (unsigned long long)v > FG_RESP_ELEMENTS_MAX - rd->elements) {
            snprintf(why, n, "a multi-bulk reply of %lld elements (at most %d accepted)", v, FG_RESP_ELEMENTS_MAX);
            goto fail;
        }
        if (depth >= FG_RESP_DEPTH_MAX) {
            snprintf(why, n, "multi-bulk replies nested deeper than %d", FG_RESP_DEPTH_MAX);
            goto fail;
        }
        rd->elements += (size_t)v;
        r->type = FG_RESP_ARRAY;
        r->elem = fg_xcalloc(v ? (size_t)v : 1, sizeof *r->elem);
        for (; r->n < (size_t)v; r->n++)
            if (read_reply(rd, depth + 1, &r->elem[r->n], why, n) != 0)
                goto fail;
        break;
    default:
        snprintf(why, n, "a reply starting with byte 0x%02x, not Redis's protocol", (unsigned char)line[0]);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    fg_resp_free(r);
    return -1;
}

int fg_resp_read(fg_resp_reader *rd, fg_resp_reply **out, char *why, size_t why_size)
{
    *out = NULL;
    rd->elements = 0;
    return read_reply(rd, 0, out, why, why_size);
}
