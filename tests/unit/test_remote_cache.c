/* test_remote_cache.c -- the remote tier without a Redis server: the URL and
 * the settings (strict), signed entries (every tampering refused: a flipped
 * byte anywhere, another secret, another key, other key material, bad
 * sizes), the fleet secret's file (owner-only), and the failure behaviour
 * against servers that refuse, stall or speak garbage (one warning, the
 * timeout at most once, then the breaker), hostile servers (a reply
 * dripped a byte at a time, a line that never ends, a 1 GiB bulk string, a
 * multi-bulk reply of 2^31-1 elements: each cut off within the timeout and
 * in bounded memory), the reply reader's bounds, and read-only mode (never
 * connects to write).  The cases with a real server are in
 * tests/cli/test_remote_cache.sh. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "remote_cache.h"
#include "resp.h"
#include "testutil.h"

static const char secret[] = "0123456789abcdef-fleet-secret";
static const char key1[] = "00112233445566778899aabbccddeeff";
static const char key2[] = "ffeeddccbbaa99887766554433221100";
static const char material[] = "fusegen-kernel-key 1\narch 5\nsm_90\nsource 7\nkernel!\n";

/* ---- URL ------------------------------------------------------------------ */

static void test_url_parse(void **state)
{
    (void)state;
    fg_remote_url u;
    assert_int_equal(fg_parse_remote_url("redis://127.0.0.1:6390/2", &u), 0);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 6390);
    assert_int_equal(u.db, 2);
    assert_string_equal(u.password, "");
    assert_int_equal(fg_parse_remote_url("redis://cache.example-1", &u), 0);
    assert_string_equal(u.host, "cache.example-1");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);
    assert_int_equal(fg_parse_remote_url("redis://[::1]:7000/", &u), 0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 7000);
    assert_int_equal(fg_parse_remote_url("redis://alice:s3cret@h:1/0", &u), 0);
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "s3cret");
    assert_int_equal(fg_parse_remote_url("redis://:pw@h", &u), 0);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "pw");

    static const char *const bad[] = {
        "", "127.0.0.1:6379", "http://h", "redis://", "redis://h:", "redis://h:0", "redis://h:65536",
        "redis://h:-1", "redis://h:1x", "redis://h/x", "redis://h/-1", "redis://h/1000001", "redis://h /0",
        "redis://h?db=1", "redis://[::1", "redis://[zz]", "redis://user@h", "redis://h:1/2/3", "redis://@h",
        "redis://a:@h", "redis://h\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (fg_parse_remote_url(bad[i], &u) == 0)
            fail_msg("accepted '%s'", bad[i]);
    }
}

/* Warnings given to a context (counted, the last kept). */
typedef struct seen {
    int n;
    char last[1024];
} seen;

static void count_log(void *user, fg_log_level level, const char *msg)
{
    seen *s = user;
    if (level == FG_LOG_WARNING) {
        s->n++;
        snprintf(s->last, sizeof s->last, "%s", msg);
    }
}

/* A context for the remote tier of url (NULL: none) with the key file kf. */
static fg_context *remote_ctx(const char *url, const char *kf, const char *mode, int timeout_ms, seen *s)
{
    fg_options o = {0};
    o.size = sizeof o;
    o.no_rules = 1;
    o.cache_off = 1;
    o.remote_cache = url;
    o.remote_cache_key_file = kf;
    o.remote_cache_mode = mode;
    o.remote_cache_timeout_ms = timeout_ms;
    o.log = count_log;
    o.log_user = s;
    fg_context *ctx = NULL;
    fg_status st = fg_context_init(&ctx, &o);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

static void test_options(void **state)
{
    (void)state;
    seen s = {0};
    fg_options o = {0};
    o.size = sizeof o;
    o.no_rules = 1;
    o.log = count_log;
    o.log_user = &s;
    o.remote_cache = "redis://h:99999";
    o.remote_cache_mode = "wr";
    o.remote_cache_timeout_ms = -5;
    o.remote_cache_ttl_s = 1LL << 40;
    fg_context *ctx = NULL;
    assert_int_equal(fg_context_init(&ctx, &o), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "fg_options.remote_cache is not a remote cache URL"));
    assert_true(tu_has_error(ctx, "fg_options.remote_cache_mode"));
    assert_true(tu_has_error(ctx, "fg_options.remote_cache_timeout_ms"));
    assert_true(tu_has_error(ctx, "fg_options.remote_cache_ttl_s"));
    fg_context_free(ctx);

    /* Size 0 (the 0.1 layout): the new fields are not read. */
    fg_options old = o;
    old.size = 0;
    ctx = NULL;
    assert_int_equal(fg_context_init(&ctx, &old), FG_OK);
    assert_null(ctx->opts.remote_cache);
    assert_string_equal(ctx->opts.remote_cache_mode, "ro");
    fg_context_free(ctx);

    /* Good fields are resolved into opts; "off" means none. */
    ctx = remote_ctx("redis://:pw@10.1.2.3:7000/4", "/k", "rw", 250, &s);
    assert_string_equal(ctx->env.remote_where, "redis://10.1.2.3:7000/4");   /* no password in messages */
    assert_int_equal(ctx->opts.remote_cache_timeout_ms, 250);
    assert_int_equal(ctx->opts.remote_cache_ttl_s, FG_DEFAULT_REMOTE_TTL_S);
    assert_true(ctx->env.remote_rw);
    fg_context_free(ctx);
    ctx = remote_ctx("off", NULL, NULL, 0, &s);
    assert_null(ctx->env.remote_url);
    assert_null(fg_remote_open(ctx));
    fg_context_free(ctx);
}

/* ---- entries ---------------------------------------------------------------- */

static unsigned char *sample(size_t *len)
{
    char why[256];
    unsigned char *e = fg_remote_entry_encode(secret, sizeof secret - 1, key1, material, sizeof material - 1,
                                              "name=k\nlog=\n", "PAYLOAD-BYTES", 13, len, why, sizeof why);
    assert_non_null(e);
    return e;
}

static int verifies(const unsigned char *e, size_t len, const char *sec, const char *key, const char *mat,
                    char *why)
{
    const unsigned char *pl;
    const char *meta;
    size_t ps, ml;
    return fg_remote_entry_verify(sec, strlen(sec), e, len, key, mat, strlen(mat), &pl, &ps, &meta, &ml, why, 256);
}

static void test_entry_roundtrip(void **state)
{
    (void)state;
    size_t len;
    unsigned char *e = sample(&len);
    assert_int_equal(len, fg_remote_entry_size(sizeof material - 1, "name=k\nlog=\n", 13));
    const unsigned char *pl;
    const char *meta;
    size_t ps, ml;
    char why[256];
    assert_true(fg_remote_entry_verify(secret, sizeof secret - 1, e, len, key1, material, sizeof material - 1, &pl,
                                       &ps, &meta, &ml, why, sizeof why));
    assert_int_equal(ps, 13);
    assert_memory_equal(pl, "PAYLOAD-BYTES", 13);
    assert_int_equal(ml, strlen("name=k\nlog=\n"));
    assert_memory_equal(meta, "name=k\nlog=\n", ml);
    free(e);
}

static void test_entry_tampering(void **state)
{
    (void)state;
    size_t len;
    unsigned char *e = sample(&len);
    char why[256];
    /* Every single flipped byte, header to signature, is refused. */
    for (size_t i = 0; i < len; i++) {
        e[i] ^= 0x20;
        if (verifies(e, len, secret, key1, material, why))
            fail_msg("byte %zu flipped and still verified", i);
        e[i] ^= 0x20;
    }
    assert_true(verifies(e, len, secret, key1, material, why));
    /* Another secret. */
    assert_false(verifies(e, len, "another-secret-of-the-fleet", key1, material, why));
    assert_non_null(strstr(why, "signature"));
    /* Stored under another key. */
    assert_false(verifies(e, len, secret, key2, material, why));
    assert_non_null(strstr(why, "another key"));
    /* Other key material (another arch), signed with the right secret. */
    assert_false(verifies(e, len, secret, key1, "fusegen-kernel-key 1\narch 5\nsm_80\nsource 7\nkernel!\n", why));
    assert_non_null(strstr(why, "key material"));
    /* Truncated, extended. */
    for (size_t cut = 0; cut < len; cut += 7)
        assert_false(verifies(e, cut, secret, key1, material, why));
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, e, len);
    longer[len] = 0;
    assert_false(verifies(longer, len + 1, secret, key1, material, why));
    free(longer);
    free(e);

    /* A payload over the limit is not encoded. */
    size_t big = FG_REMOTE_ENTRY_MAX;
    void *data = calloc(1, big);
    size_t n;
    assert_null(fg_remote_entry_encode(secret, sizeof secret - 1, key1, material, sizeof material - 1, NULL, data, big,
                                       &n, why, sizeof why));
    free(data);
}

/* ---- the fleet secret ----------------------------------------------------- */

static char *key_file(const char *dir, const char *text, mode_t mode)
{
    char *p = tu_write(dir, "fleet.key", text);
    assert_int_equal(chmod(p, mode), 0);
    return p;
}

static void test_key_file(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    seen s = {0};
    char *kf = key_file(dir, secret, 0600);
    fg_context *ctx = remote_ctx("redis://127.0.0.1:1/0", kf, NULL, 0, &s);
    fg_remote *r = fg_remote_open(ctx);
    assert_non_null(r);
    assert_int_equal(s.n, 0);
    assert_false(fg_remote_writable(r));   /* read-only by default */
    fg_remote_close(r);

    static const mode_t modes[] = {0640, 0604, 0620, 0644};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(kf, modes[i]), 0);
        s.n = 0;
        assert_null(fg_remote_open(ctx));
        assert_int_equal(s.n, 1);
        assert_non_null(strstr(s.last, "group or others"));
    }
    free(kf);
    kf = key_file(dir, "short", 0600);
    s.n = 0;
    assert_null(fg_remote_open(ctx));
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.last, "bytes"));
    fg_context_free(ctx);

    s.n = 0;
    ctx = remote_ctx("redis://127.0.0.1:1/0", "/nonexistent/fleet.key", NULL, 0, &s);
    assert_null(fg_remote_open(ctx));
    assert_int_equal(s.n, 1);
    fg_context_free(ctx);
    s.n = 0;
    ctx = remote_ctx("redis://127.0.0.1:1/0", NULL, NULL, 0, &s);
    assert_null(fg_remote_open(ctx));
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.last, "no fleet secret"));
    fg_context_free(ctx);
    free(kf);
    tu_rmtree(dir);
    free(dir);
}

/* ---- servers that fail ---------------------------------------------------- */

typedef enum fake_mode {
    FAKE_STALL,        /* reads nothing, answers nothing */
    FAKE_GARBAGE,      /* answers a line that is not Redis's protocol */
    FAKE_DRIP,         /* a status line, one byte every 10 ms, never ending */
    FAKE_LONG_LINE,    /* an integer line that never ends, as fast as it goes */
    FAKE_HUGE_BULK,    /* a 1 GiB bulk string header, then its bytes */
    FAKE_HUGE_ARRAY,   /* a multi-bulk header of 2^31-1 elements, then integers */
} fake_mode;

/* What a hostile fake sends on a connection, at most: then it closes it. */
#define HOSTILE_MAX_BYTES ((size_t)64 << 20)
#define HOSTILE_MAX_S 4.0

typedef struct fake {
    int fd;
    int port;
    fake_mode mode;
    int accepted;
    volatile int stop;
    pthread_t th;
} fake;

/* Sends the hostile stream of mode on connection c after the command
 * arrived, until the client goes away or the limits (HOSTILE_MAX_*). */
static void hostile(fake *f, int c)
{
    char cmd[512];
    struct pollfd q = {c, POLLIN, 0};
    if (poll(&q, 1, 1000) <= 0 || read(c, cmd, sizeof cmd) <= 0)
        return;
    static char chunk[65536];
    const char *head = "";
    char fill = '1';
    switch (f->mode) {
    case FAKE_DRIP: head = "+"; fill = 'x'; break;
    case FAKE_LONG_LINE: head = ":"; fill = '1'; break;
    case FAKE_HUGE_BULK: head = "$1073741824\r\n"; fill = 0; break;
    case FAKE_HUGE_ARRAY: head = "*2147483647\r\n"; break;
    default: return;
    }
    if (f->mode == FAKE_HUGE_ARRAY)
        for (size_t i = 0; i + 4 <= sizeof chunk; i += 4)
            memcpy(chunk + i, ":1\r\n", 4);
    else
        memset(chunk, fill, sizeof chunk);
    if (send(c, head, strlen(head), MSG_NOSIGNAL) < 0)
        return;
    double end = fg_now() + HOSTILE_MAX_S;
    size_t sent = 0;
    while (!f->stop && sent < HOSTILE_MAX_BYTES && fg_now() < end) {
        struct pollfd w = {c, POLLOUT, 0};
        if (poll(&w, 1, 10) <= 0)
            continue;
        size_t n = f->mode == FAKE_DRIP ? 1 : sizeof chunk;
        ssize_t k = send(c, chunk, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return;
        if (k > 0)
            sent += (size_t)k;
        if (f->mode == FAKE_DRIP)
            usleep(10000);
    }
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    int held[64], nheld = 0;
    while (!f->stop) {
        struct pollfd p = {f->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            continue;
        f->accepted++;
        if (f->mode >= FAKE_DRIP) {
            hostile(f, c);
            close(c);
        } else if (f->mode == FAKE_GARBAGE) {
            char buf[256];
            struct pollfd q = {c, POLLIN, 0};
            if (poll(&q, 1, 1000) > 0 && read(c, buf, sizeof buf) > 0) {
                static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
                ssize_t w = write(c, junk, sizeof junk - 1);
                (void)w;
            }
            close(c);
        } else if (nheld < 64) {
            held[nheld++] = c;   /* read nothing, answer nothing */
        } else {
            close(c);
        }
    }
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    return NULL;
}

static void fake_start(fake *f, fake_mode mode)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->fd, 16), 0);
    socklen_t n = sizeof a;
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &n), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->fd);
}

/* A loopback port nothing listens on. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t n = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Fetches key1 from a remote at port with a 200 ms timeout, twice, and checks
 * the outcome: both miss, one warning, the first bounded by the timeout and
 * the second immediate (the breaker), one failure and one skip. */
static void expect_degraded(int port, const char *mode, double max_first_s)
{
    char *dir = tu_tmpdir();
    char *kf = key_file(dir, secret, 0600);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
    seen s = {0};
    fg_context *ctx = remote_ctx(url, kf, mode, 200, &s);
    fg_remote *r = fg_remote_open(ctx);
    assert_non_null(r);
    void *data;
    size_t size;
    char *meta;
    double t0 = fg_now();
    assert_int_equal(fg_remote_fetch(r, key1, material, sizeof material - 1, &data, &size, &meta), 0);
    double first = fg_now() - t0;
    assert_null(data);
    t0 = fg_now();
    assert_int_equal(fg_remote_fetch(r, key1, material, sizeof material - 1, &data, &size, &meta), 0);
    fg_remote_store(r, key1, material, sizeof material - 1, "x", 1, NULL);
    double second = fg_now() - t0;
    print_message("first request %.3f s, then %.6f s\n", first, second);
    assert_true(first < max_first_s);
    assert_true(second < 0.05);
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.last, "compiling locally"));
    fg_remote_stats st;
    fg_remote_get_stats(r, &st);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.skipped, strcmp(mode, "rw") == 0 ? 2 : 1);
    fg_remote_close(r);
    fg_context_free(ctx);
    free(kf);
    tu_rmtree(dir);
    free(dir);
}

static void test_refused(void **state)
{
    (void)state;
    expect_degraded(closed_port(), "ro", 0.5);
}

static void test_stalled(void **state)
{
    (void)state;
    fake f;
    fake_start(&f, FAKE_STALL);
    double t0 = fg_now();
    expect_degraded(f.port, "rw", 1.5);
    assert_true(fg_now() - t0 >= 0.15);   /* it did wait for the timeout, once */
    fake_stop(&f);
}

static void test_garbage(void **state)
{
    (void)state;
    fake f;
    fake_start(&f, FAKE_GARBAGE);
    expect_degraded(f.port, "ro", 1.0);
    assert_int_equal(f.accepted, 1);
    fake_stop(&f);
}

/* Peak resident memory so far, in KiB. */
static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A hostile server (mode): the first request ends within the 200 ms
 * timeout plus a margin, one warning, the breaker opens, and the peak
 * resident memory grows by less than 16 MiB. */
static void expect_cut_off(fake_mode mode)
{
    fake f;
    fake_start(&f, mode);
    long before = peak_rss_kib();
    expect_degraded(f.port, "ro", 0.2 + 0.3);
    long grew = peak_rss_kib() - before;
    print_message("peak resident memory grew by %ld KiB\n", grew);
    assert_true(grew < 16 * 1024);
    assert_int_equal(f.accepted, 1);
    fake_stop(&f);
}

static void test_hostile_drip(void **state)
{
    (void)state;
    expect_cut_off(FAKE_DRIP);
}

static void test_hostile_long_line(void **state)
{
    (void)state;
    expect_cut_off(FAKE_LONG_LINE);
}

static void test_hostile_huge_bulk(void **state)
{
    (void)state;
    expect_cut_off(FAKE_HUGE_BULK);
}

static void test_hostile_huge_array(void **state)
{
    (void)state;
    expect_cut_off(FAKE_HUGE_ARRAY);
}

/* ---- the reply reader ------------------------------------------------------ */

/* A byte source over a string, step bytes at a time. */
typedef struct memsrc {
    const char *s;
    size_t len, at, step;
} memsrc;

static ssize_t mem_read(void *user, void *buf, size_t n, char *why, size_t why_size)
{
    memsrc *m = user;
    (void)why;
    (void)why_size;
    size_t k = m->len - m->at;
    if (k > n)
        k = n;
    if (k > m->step)
        k = m->step;
    memcpy(buf, m->s + m->at, k);
    m->at += k;
    return (ssize_t)k;
}

/* Reads one reply from text (len bytes) step bytes at a time; 0 or -1 (why). */
static int read_from(const char *text, size_t len, size_t step, size_t bulk_max, fg_resp_reply **out, char *why)
{
    memsrc m = {text, len, 0, step};
    fg_resp_reader rd;
    fg_resp_reader_init(&rd, mem_read, &m, bulk_max);
    return fg_resp_read(&rd, out, why, 256);
}

static void test_reader(void **state)
{
    (void)state;
    char why[256];
    fg_resp_reply *r;
    static const char ok[] = "*5\r\n+OK\r\n:-42\r\n$5\r\nab\r\nc\r\n$-1\r\n*1\r\n-ERR x\r\n";
    for (size_t step = 1; step <= sizeof ok; step += 7) {
        assert_int_equal(read_from(ok, sizeof ok - 1, step, 16, &r, why), 0);
        assert_int_equal(r->type, FG_RESP_ARRAY);
        assert_int_equal(r->n, 5);
        assert_int_equal(r->elem[0]->type, FG_RESP_STATUS);
        assert_string_equal(r->elem[0]->str, "OK");
        assert_int_equal(r->elem[1]->integer, -42);
        assert_int_equal(r->elem[2]->type, FG_RESP_BULK);
        assert_int_equal(r->elem[2]->len, 5);
        assert_memory_equal(r->elem[2]->str, "ab\r\nc", 5);
        assert_int_equal(r->elem[3]->type, FG_RESP_NIL);
        assert_int_equal(r->elem[4]->elem[0]->type, FG_RESP_ERROR);
        fg_resp_free(r);
    }
    /* A bulk string of exactly bulk_max bytes, one byte at a time. */
    static const char b8[] = "$8\r\n01234567\r\n";
    assert_int_equal(read_from(b8, sizeof b8 - 1, 1, 8, &r, why), 0);
    assert_int_equal(r->len, 8);
    fg_resp_free(r);

    /* Refused: each with the reason that names it. */
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"$9\r\n012345678\r\n", "bulk string of 9 bytes"},
        {"$1073741824\r\n", "bulk string of 1073741824"},
        {"*2147483647\r\n", "2147483647 elements"},
        {"*65\r\n", "65 elements"},
        {"*40\r\n*40\r\n", "40 elements"},
        {"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "nested deeper"},
        {":99999999999999999999\r\n", "not an integer"},
        {":12a\r\n", "not an integer"},
        {"$-2\r\n", "bulk string of -2"},
        {"$3\r\nabcd\r\n", "not followed by CRLF"},
        {"HTTP/1.1 400\r\n", "not Redis's protocol"},
        {"\r\n", "empty reply line"},
        {"$5\r\nab", "closed the connection"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (read_from(bad[i].text, strlen(bad[i].text), 3, 8, &r, why) == 0)
            fail_msg("accepted '%s'", bad[i].text);
        assert_null(r);
        if (!strstr(why, bad[i].why))
            fail_msg("'%s': '%s' does not say '%s'", bad[i].text, why, bad[i].why);
    }
    /* A line longer than the bound is refused at the bound, before its end. */
    size_t n = FG_RESP_LINE_MAX * 4;
    char *line = malloc(n);
    memset(line, '7', n);
    line[0] = ':';
    memsrc m = {line, n, 0, 100};
    fg_resp_reader rd;
    fg_resp_reader_init(&rd, mem_read, &m, 8);
    assert_int_equal(fg_resp_read(&rd, &r, why, sizeof why), -1);
    assert_non_null(strstr(why, "reply line longer than"));
    assert_true(m.at <= FG_RESP_LINE_MAX + sizeof rd.buf);
    free(line);
}

/* Read-only mode never connects to store. */
static void test_read_only_never_writes(void **state)
{
    (void)state;
    fake f;
    fake_start(&f, FAKE_STALL);
    char *dir = tu_tmpdir();
    char *kf = key_file(dir, secret, 0600);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", f.port);
    seen s = {0};
    fg_context *ctx = remote_ctx(url, kf, "ro", 200, &s);
    fg_remote *r = fg_remote_open(ctx);
    for (int i = 0; i < 5; i++)
        fg_remote_store(r, key1, material, sizeof material - 1, "bin", 3, "name=k\n");
    usleep(100000);
    assert_int_equal(f.accepted, 0);
    fg_remote_stats st;
    fg_remote_get_stats(r, &st);
    assert_int_equal(st.stores + st.errors + st.skipped, 0);
    assert_int_equal(s.n, 0);
    fg_remote_close(r);
    fg_context_free(ctx);
    free(kf);
    tu_rmtree(dir);
    free(dir);
    fake_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_parse),        cmocka_unit_test(test_options),
        cmocka_unit_test(test_entry_roundtrip),  cmocka_unit_test(test_entry_tampering),
        cmocka_unit_test(test_key_file),         cmocka_unit_test(test_refused),
        cmocka_unit_test(test_stalled),          cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_read_only_never_writes),
        cmocka_unit_test(test_hostile_drip),     cmocka_unit_test(test_hostile_long_line),
        cmocka_unit_test(test_hostile_huge_bulk), cmocka_unit_test(test_hostile_huge_array),
        cmocka_unit_test(test_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
