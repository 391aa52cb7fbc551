/*
 * remote_cache.c -- the remote tier of the kernel cache (remote_cache.h):
 * signed entries in a Redis server (hiredis), HMAC-SHA256 (OpenSSL), a
 * connection pool, a circuit breaker; and the per-tier counters of a
 * context, added to the cache directory's (cache_stats.h) when it is freed.
 *
 * hiredis opens the connections; the commands are written and their
 * replies read here, on the socket, against one deadline per command (the
 * connection it may open first included, not per read), through the
 * bounded reply reader (resp.h).  Every command goes through one check
 * (cmd_at, the FG_CMD macro) that records the command, the file and line
 * here and the reason or the server's message; the connect call through
 * FG_REDIS_CONNECTED; every OpenSSL call through FG_OPENSSL_CHECK.  A
 * failure is never an error of the caller: it is counted, warned about
 * once, and the kernel is compiled locally.
 */
#define _GNU_SOURCE
#include "remote_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "cache_stats.h"
#include "context.h"
#include "diag.h"
#include "kcache.h"
#include "resp.h"
#include "runtime.h"

#define HDR_SIZE 64u
#define TAG_SIZE 32u
#define POOL_MAX 16
#define WHY_SIZE 320
#define FG_XSTR(x) FG_STR(x)
#define FG_STR(x) #x

_Static_assert(FG_REMOTE_ENTRY_MAX < (size_t)INT32_MAX, "an entry's sizes fit the 32-bit fields");

struct fg_remote {
    fg_context *ctx;
    fg_remote_url url;
    char *where;                    /* the URL without credentials */
    unsigned char *secret;
    size_t secret_len;
    int rw;
    long timeout_ms;                /* the deadline of each command */
    long long ttl_s;

    pthread_mutex_t lock;           /* guards everything below */
    redisContext *idle[POOL_MAX];   /* connections ready for the next request */
    int nidle;
    int failures;                   /* failed commands in a row (error replies) */
    double open_until;              /* the breaker is open until then (fg_now() seconds) */
    int warned;                     /* the one failure warning was given */
    int warned_entry;               /* the one refused-entry warning was given */
    fg_remote_stats st;
    char last[WHY_SIZE];            /* the last failure, for fg_remote_probe */
};

/* ---- small helpers ---------------------------------------------------- */

static void redis_key(const char *key, char out[64])
{
    snprintf(out, 64, "%s%s", FG_REMOTE_KEY_PREFIX, key);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- failures, the breaker, refused entries --------------------------- */

/* Records a failed connection or command: counts it, keeps its message,
 * warns once, and opens the breaker: at once when the server itself failed
 * (transport: no connection, a timeout, a closed connection, a reply that is
 * not Redis's), after FG_REMOTE_MAX_FAILURES failed commands in a row
 * otherwise. */
static void remote_failed(fg_remote *r, int transport, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void remote_failed(fg_remote *r, int transport, const char *fmt, ...)
{
    char msg[WHY_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->lock);
    r->st.errors++;
    snprintf(r->last, sizeof r->last, "%s", msg);
    int open = transport || ++r->failures >= FG_REMOTE_MAX_FAILURES;
    if (open) {
        r->open_until = fg_now() + FG_REMOTE_COOLDOWN_S;
        r->failures = 0;
    }
    int warn = !r->warned;
    r->warned = 1;
    pthread_mutex_unlock(&r->lock);
    if (warn)
        fg_diag_warn(r->ctx, FG_NOLOC, "remote kernel cache %s failed (%s); compiling locally%s", r->where, msg,
                     open ? "; no further requests for " FG_XSTR(FG_REMOTE_COOLDOWN_S) " s" : "");
}

/* A request went through: the failures in a row start again from 0. */
static void remote_ok(fg_remote *r)
{
    pthread_mutex_lock(&r->lock);
    r->failures = 0;
    pthread_mutex_unlock(&r->lock);
}

/* An entry that does not verify: counted, warned about once. */
static void remote_rejected(fg_remote *r, const char *key, const char *why)
{
    pthread_mutex_lock(&r->lock);
    r->st.rejected++;
    int warn = !r->warned_entry;
    r->warned_entry = 1;
    pthread_mutex_unlock(&r->lock);
    if (warn)
        fg_diag_warn(r->ctx, FG_NOLOC, "remote kernel cache %s: refused the entry of kernel key %s (%s); not using it%s",
                     r->where, key, why, r->rw ? ", compiling locally and replacing it" : ", compiling locally");
}

/* ---- commands: a deadline each, bounded replies ------------------------
 * A command is written with send(MSG_NOSIGNAL) (a server that closed the
 * connection cannot raise SIGPIPE) and its reply read through the bounded
 * reader, both waiting in poll for at most what is left until the command's
 * deadline.  A server that drips its reply, sends a line that never ends or
 * announces more than the bounds is cut off at the deadline or at the
 * bound, whichever comes first. */

/* The socket of one command and its deadline (fg_now() seconds). */
typedef struct cmd_io {
    int fd;
    double deadline;
    long timeout_ms;
} cmd_io;

/* Milliseconds left until deadline, rounded up; <= 0 when it has passed. */
static int ms_left(double deadline)
{
    double left = (deadline - fg_now()) * 1e3;
    return left <= 0 ? 0 : left >= 60e3 ? 60000 : (int)left + 1;
}

/* Waits until fd is ready for events before io's deadline: 0, or -1 with
 * why. */
static int io_wait(cmd_io *io, short events, const char *doing, char *why, size_t n)
{
    for (;;) {
        int left = ms_left(io->deadline);
        if (left <= 0) {
            snprintf(why, n, "%s did not finish within the %ld ms timeout", doing, io->timeout_ms);
            return -1;
        }
        struct pollfd p = {io->fd, events, 0};
        int k = poll(&p, 1, left);
        if (k > 0)
            return 0;
        if (k < 0 && errno != EINTR) {
            snprintf(why, n, "poll: %s", strerror(errno));
            return -1;
        }
    }
}

/* The reader's byte source (fg_resp_read_fn) on io. */
static ssize_t io_read(void *user, void *buf, size_t n, char *why, size_t why_size)
{
    cmd_io *io = user;
    for (;;) {
        if (io_wait(io, POLLIN, "the reply", why, why_size) != 0)
            return -1;
        ssize_t k = recv(io->fd, buf, n, MSG_DONTWAIT);
        if (k >= 0)
            return k;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            snprintf(why, why_size, "reading the reply: %s", strerror(errno));
            return -1;
        }
    }
}

/* Writes len bytes on io; 0, or -1 with why. */
static int io_send(cmd_io *io, const void *data, size_t len, char *why, size_t n)
{
    const char *p = data;
    while (len > 0) {
        if (io_wait(io, POLLOUT, "sending the command", why, n) != 0)
            return -1;
        ssize_t k = send(io->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            snprintf(why, n, "sending the command: %s", strerror(errno));
            return -1;
        }
        if (k > 0) {
            p += k;
            len -= (size_t)k;
        }
    }
    return 0;
}

/* Writes the command argv[0..argc) (lens[i] bytes each; NULL: strlen) in
 * Redis's protocol: the small parts gathered, a large argument (a stored
 * entry) sent from where it is.  0, or -1 with why. */
static int send_command(cmd_io *io, int argc, const char *const *argv, const size_t *lens, char *why, size_t n)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "*%d\r\n", argc);
    int rc = 0;
    for (int i = 0; rc == 0 && i < argc; i++) {
        size_t len = lens ? lens[i] : strlen(argv[i]);
        fg_buf_printf(&b, "$%zu\r\n", len);
        if (len > 65536) {
            rc = io_send(io, b.s, b.len, why, n) || io_send(io, argv[i], len, why, n) ? -1 : 0;
            b.len = 0;
        } else {
            fg_buf_putn(&b, argv[i], len);
        }
        fg_buf_put(&b, "\r\n");
    }
    if (rc == 0)
        rc = io_send(io, b.s, b.len, why, n);
    fg_buf_free(&b);
    return rc;
}

/* FG_CMD(r, c, transport, deadline, argc, argv, lens): sends the command
 * argv on connection c (a redisContext * variable) and reads its whole
 * reply, both before deadline.  Evaluates to the reply, or to NULL after
 * recording the failure with the command's name, the file and line and the
 * reason.  A reply that does not come in time, is not Redis's protocol or
 * is over a bound (resp.h; bulk strings up to FG_REMOTE_ENTRY_MAX + 1
 * bytes) fails the server: c is closed and set to NULL, the breaker opens.
 * An error reply (the server's message; freed) leaves c usable and fails
 * the command only (transport: it counts as the server failing, as for the
 * commands that set up a connection).  A server that answered more than one
 * reply is out of step: c is closed and set to NULL, the reply kept. */
#define FG_CMD(r, c, transport, deadline, argc, argv, lens)                                                          \
    cmd_at((r), &(c), (transport), (deadline), (argc), (argv), (lens), __FILE__, __LINE__)

static fg_resp_reply *cmd_at(fg_remote *r, redisContext **c, int transport, double deadline, int argc,
                             const char *const *argv, const size_t *lens, const char *file, int line)
{
    char why[WHY_SIZE];
    cmd_io io = {(*c)->fd, deadline, r->timeout_ms};
    fg_resp_reader rd;
    fg_resp_reader_init(&rd, io_read, &io, FG_REMOTE_ENTRY_MAX + 1);
    fg_resp_reply *rep = NULL;
    const char *what = argc > 1 && strncmp(argv[1], FG_REMOTE_KEY_PREFIX, strlen(FG_REMOTE_KEY_PREFIX)) == 0
                           ? argv[1] : "";
    if (send_command(&io, argc, argv, lens, why, sizeof why) != 0 || fg_resp_read(&rd, &rep, why, sizeof why) != 0) {
        remote_failed(r, 1, "%s %s at %s:%d: %s", argv[0], what, file, line, why);
        redisFree(*c);
        *c = NULL;
        return NULL;
    }
    if (fg_resp_pending(&rd)) {
        redisFree(*c);
        *c = NULL;
    }
    if (rep->type != FG_RESP_ERROR)
        return rep;
    remote_failed(r, transport, "%s %s at %s:%d: the server answered: %.120s", argv[0], what, file, line, rep->str);
    fg_resp_free(rep);
    return NULL;
}

/* FG_REDIS_CONNECTED(r, c, name): c is what the hiredis connect call `name`
 * returned; nonzero (the failure recorded with hiredis's message) when it
 * did not connect. */
#define FG_REDIS_CONNECTED(r, c, name) redis_connected_at((r), (c), (name), __FILE__, __LINE__)

static int redis_connected_at(fg_remote *r, redisContext *c, const char *call, const char *file, int line)
{
    if (c && !c->err)
        return 0;
    remote_failed(r, 1, "%.60s at %s:%d: %s", call, file, line, !c ? "out of memory" : c->errstr);
    return -1;
}

/* ---- the one check for OpenSSL ------------------------------------------ */

/* FG_OPENSSL_CHECK(call, why, n): call returns NULL or 0 on failure; then
 * "call failed at file:line: <OpenSSL's message>" goes into why and the
 * macro evaluates to nonzero. */
#define FG_OPENSSL_CHECK(call, why, n) openssl_check_at((call) != 0, #call, __FILE__, __LINE__, (why), (n))

static int openssl_check_at(int ok, const char *call, const char *file, int line, char *why, size_t n)
{
    if (ok)
        return 0;
    char msg[256];
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "no error reported");
    snprintf(why, n, "%.40s failed at %s:%d: %s", call, file, line, msg);
    ERR_clear_error();
    return 1;
}

/* ---- entries ------------------------------------------------------------ */

uint64_t fg_remote_entry_size(size_t material_len, const char *meta, size_t size)
{
    return (uint64_t)HDR_SIZE + material_len + (meta ? strlen(meta) : 0) + size + TAG_SIZE;
}

/* HMAC-SHA256 of buf[0..n) with the secret into tag. */
static int sign(const void *secret, size_t secret_len, const unsigned char *buf, size_t n, unsigned char tag[32],
                char *why, size_t why_size)
{
    unsigned int tlen = 0;
    if (FG_OPENSSL_CHECK(HMAC(EVP_sha256(), secret, (int)secret_len, buf, n, tag, &tlen), why, why_size))
        return -1;
    if (tlen != TAG_SIZE) {
        snprintf(why, why_size, "HMAC-SHA256 gave %u bytes", tlen);
        return -1;
    }
    return 0;
}

unsigned char *fg_remote_entry_encode(const void *secret, size_t secret_len, const char *key, const void *material,
                                      size_t material_len, const char *meta, const void *data, size_t size,
                                      size_t *len, char *why, size_t why_size)
{
    size_t ms = meta ? strlen(meta) : 0;
    uint64_t total = fg_remote_entry_size(material_len, meta, size);
    if (total > FG_REMOTE_ENTRY_MAX || !fg_cache_is_key(key) || secret_len > FG_REMOTE_SECRET_MAX) {
        snprintf(why, why_size, "%s", !fg_cache_is_key(key) ? "not a cache key" : "larger than the entry limit");
        return NULL;
    }
    unsigned char *buf = fg_xmalloc((size_t)total);
    memcpy(buf, "FGRC", 4);
    put_le32(buf + 4, FG_REMOTE_FORMAT);
    put_le32(buf + 8, (uint32_t)material_len);
    put_le32(buf + 12, (uint32_t)ms);
    put_le64(buf + 16, (uint64_t)size);
    put_le64(buf + 24, (uint64_t)time(NULL));
    memcpy(buf + 32, key, 32);
    unsigned char *p = buf + HDR_SIZE;
    if (material_len)
        memcpy(p, material, material_len);
    p += material_len;
    if (ms)
        memcpy(p, meta, ms);
    p += ms;
    if (size)
        memcpy(p, data, size);
    p += size;
    if (sign(secret, secret_len, buf, (size_t)total - TAG_SIZE, p, why, why_size) != 0) {
        free(buf);
        return NULL;
    }
    *len = (size_t)total;
    return buf;
}

int fg_remote_entry_verify(const void *secret, size_t secret_len, const unsigned char *buf, size_t len,
                           const char *key, const void *material, size_t material_len, const unsigned char **payload,
                           size_t *size, const char **meta, size_t *meta_len, char *why, size_t why_size)
{
    if (len < HDR_SIZE + TAG_SIZE || memcmp(buf, "FGRC", 4) != 0) {
        snprintf(why, why_size, "not a fusegen entry");
        return 0;
    }
    if (get_le32(buf + 4) != FG_REMOTE_FORMAT) {
        snprintf(why, why_size, "entry format %u, not %u", get_le32(buf + 4), FG_REMOTE_FORMAT);
        return 0;
    }
    uint64_t mat = get_le32(buf + 8), ms = get_le32(buf + 12), ps = get_le64(buf + 16);
    if (ps > FG_REMOTE_ENTRY_MAX || HDR_SIZE + mat + ms + ps + TAG_SIZE != len) {
        snprintf(why, why_size, "its sizes do not add up to its length (%zu bytes)", len);
        return 0;
    }
    unsigned char tag[TAG_SIZE];
    if (sign(secret, secret_len, buf, len - TAG_SIZE, tag, why, why_size) != 0)
        return 0;
    if (CRYPTO_memcmp(tag, buf + len - TAG_SIZE, TAG_SIZE) != 0) {
        snprintf(why, why_size, "its signature does not verify: altered, or signed with another secret");
        return 0;
    }
    if (!fg_cache_is_key(key) || memcmp(buf + 32, key, 32) != 0) {
        snprintf(why, why_size, "it is the entry of another key (%.32s)", (const char *)(buf + 32));
        for (char *q = why; *q; q++)
            if ((unsigned char)*q < ' ' || (unsigned char)*q >= 0x7f)
                *q = '?';
        return 0;
    }
    if (mat != material_len || (mat && memcmp(buf + HDR_SIZE, material, (size_t)mat) != 0)) {
        snprintf(why, why_size, "its key material is not this kernel's (another source, arch, toolkit or compiler)");
        return 0;
    }
    const char *m = (const char *)buf + HDR_SIZE + mat;
    if (ms && memchr(m, 0, (size_t)ms)) {
        snprintf(why, why_size, "its metadata is not text");
        return 0;
    }
    *meta = m;
    *meta_len = (size_t)ms;
    *payload = buf + HDR_SIZE + mat + ms;
    *size = (size_t)ps;
    return 1;
}

/* ---- the fleet secret --------------------------------------------------- */

/* Reads the key file into r->secret; 0, or -1 with the reason in why. */
static int load_secret(fg_remote *r, const char *path, char *why, size_t n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, n, "cannot be opened: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0)
        snprintf(why, n, "cannot be examined: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, n, "is not a regular file");
    else if (st.st_uid != geteuid())
        snprintf(why, n, "belongs to uid %u, not to the current user (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    else if (st.st_mode & 077)
        snprintf(why, n, "can be read or written by group or others (mode %04o); chmod 600 it",
                 (unsigned)(st.st_mode & 07777));
    else if (st.st_size < FG_REMOTE_SECRET_MIN || st.st_size > FG_REMOTE_SECRET_MAX)
        snprintf(why, n, "holds %lld bytes; a fleet secret has %d to %d", (long long)st.st_size,
                 FG_REMOTE_SECRET_MIN, FG_REMOTE_SECRET_MAX);
    else {
        r->secret = fg_xmalloc((size_t)st.st_size);
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t k = read(fd, r->secret + got, (size_t)st.st_size - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        if (got == (size_t)st.st_size) {
            r->secret_len = got;
            rc = 0;
        } else {
            snprintf(why, n, "could not be read whole");
            OPENSSL_cleanse(r->secret, (size_t)st.st_size);
            free(r->secret);
            r->secret = NULL;
        }
    }
    close(fd);
    return rc;
}

/* ---- open / close ------------------------------------------------------- */

fg_remote *fg_remote_open(fg_context *ctx)
{
    const fg_env *e = &ctx->env;
    if (!e->remote_url)
        return NULL;
    if (!e->remote_key_file) {
        fg_diag_warn(ctx, FG_NOLOC,
                     "remote kernel cache %s: no fleet secret (FUSEGEN_REMOTE_CACHE_KEY_FILE), so its entries can be "
                     "neither signed nor verified; not using it",
                     e->remote_where);
        return NULL;
    }
    fg_remote *r = fg_xcalloc(1, sizeof *r);
    char why[WHY_SIZE];
    if (load_secret(r, e->remote_key_file, why, sizeof why) != 0) {
        fg_diag_warn(ctx, FG_NOLOC, "remote kernel cache %s: the key file '%s' %s; not using the remote cache",
                     e->remote_where, e->remote_key_file, why);
        free(r);
        return NULL;
    }
    r->ctx = ctx;
    r->url = e->remote;
    r->where = fg_xstrdup(e->remote_where);
    r->rw = e->remote_rw;
    r->timeout_ms = e->remote_timeout_ms;
    r->ttl_s = e->remote_ttl_s;
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void fg_remote_close(fg_remote *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nidle; i++)
        redisFree(r->idle[i]);
    if (r->secret) {
        OPENSSL_cleanse(r->secret, r->secret_len);
        free(r->secret);
    }
    OPENSSL_cleanse(r->url.password, sizeof r->url.password);
    free(r->where);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

const char *fg_remote_where(const fg_remote *r) { return r ? r->where : ""; }

int fg_remote_writable(const fg_remote *r) { return r && r->rw; }

void fg_remote_get_stats(const fg_remote *r, fg_remote_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!r)
        return;
    pthread_mutex_lock((pthread_mutex_t *)&r->lock);
    *s = r->st;
    pthread_mutex_unlock((pthread_mutex_t *)&r->lock);
}

/* ---- connections -------------------------------------------------------- */

/* The deadline of a command that starts now. */
static double cmd_deadline(const fg_remote *r) { return fg_now() + r->timeout_ms / 1e3; }

/* A connection for a command with this deadline: an idle one, or a new one
 * (connected, authenticated, database selected, all before the deadline).
 * NULL when the breaker is open (unless force; counted as skipped) or the
 * connection fails (recorded). */
static redisContext *conn_get(fg_remote *r, int force, double deadline)
{
    pthread_mutex_lock(&r->lock);
    if (!force && fg_now() < r->open_until) {
        r->st.skipped++;
        pthread_mutex_unlock(&r->lock);
        return NULL;
    }
    redisContext *c = r->nidle ? r->idle[--r->nidle] : NULL;
    pthread_mutex_unlock(&r->lock);
    if (c)
        return c;

    int left = ms_left(deadline);
    if (left <= 0) {   /* hiredis would take a zero timeout for none */
        remote_failed(r, 1, "connecting: no time left of the %ld ms timeout", r->timeout_ms);
        return NULL;
    }
    struct timeval tv = {left / 1000, (left % 1000) * 1000};
    c = redisConnectWithTimeout(r->url.host, r->url.port, tv);
    if (FG_REDIS_CONNECTED(r, c, "redisConnectWithTimeout")) {
        if (c)
            redisFree(c);
        return NULL;
    }
    fg_resp_reply *rep;
    if (r->url.password[0]) {
        const char *argv[3] = {"AUTH", r->url.user, r->url.password};
        int argc = 3;
        if (!r->url.user[0]) {
            argv[1] = r->url.password;
            argc = 2;
        }
        if (!(rep = FG_CMD(r, c, 1, deadline, argc, argv, NULL))) {
            if (c)
                redisFree(c);
            return NULL;
        }
        fg_resp_free(rep);
    }
    if (c && r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        const char *argv[2] = {"SELECT", db};
        if (!(rep = FG_CMD(r, c, 1, deadline, 2, argv, NULL))) {
            if (c)
                redisFree(c);
            return NULL;
        }
        fg_resp_free(rep);
    }
    return c;
}

/* Gives a connection back (NULL: it was closed): kept for the next request
 * while the pool has room, else closed. */
static void conn_put(fg_remote *r, redisContext *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&r->lock);
    if (r->nidle < POOL_MAX) {
        r->idle[r->nidle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (c)
        redisFree(c);
}

/* A reply of a type the command does not give: the server is not Redis, or
 * out of step.  Recorded as the server failing; c closed and set to NULL;
 * the reply freed. */
static void wrong_type(fg_remote *r, redisContext **c, fg_resp_reply *rep, const char *cmd, const char *rkey)
{
    remote_failed(r, 1, "%s %s: a reply of type %s", cmd, rkey, fg_resp_type_name(rep->type));
    fg_resp_free(rep);
    if (*c)
        redisFree(*c);
    *c = NULL;
}

/* ---- fetch / store ------------------------------------------------------ */

int fg_remote_fetch(fg_remote *r, const char *key, const void *material, size_t material_len, void **data,
                    size_t *size, char **meta)
{
    *data = NULL;
    *size = 0;
    if (meta)
        *meta = NULL;
    if (!r || !fg_cache_is_key(key))
        return 0;
    double deadline = cmd_deadline(r);
    redisContext *c = conn_get(r, 0, deadline);
    if (!c)
        return 0;
    char rkey[64], end[32];
    redis_key(key, rkey);
    pthread_mutex_lock(&r->lock);
    r->st.lookups++;
    pthread_mutex_unlock(&r->lock);
    /* The length first, so that a value over the limit is refused unread;
     * then at most one byte over the limit (the value may have grown in
     * between). */
    const char *len_argv[2] = {"STRLEN", rkey};
    snprintf(end, sizeof end, "%zu", FG_REMOTE_ENTRY_MAX);
    const char *argv[4] = {"GETRANGE", rkey, "0", end};
    long long vlen = -1;
    fg_resp_reply *rep = FG_CMD(r, c, 0, deadline, 2, len_argv, NULL);
    if (rep) {
        if (rep->type == FG_RESP_INTEGER) {
            vlen = rep->integer;
            fg_resp_free(rep);
        } else {
            wrong_type(r, &c, rep, "STRLEN", rkey);
        }
        rep = NULL;
    }
    if (c && vlen > 0 && (unsigned long long)vlen <= FG_REMOTE_ENTRY_MAX) {
        rep = FG_CMD(r, c, 0, cmd_deadline(r), 4, argv, NULL);
        if (rep && rep->type != FG_RESP_BULK) {
            wrong_type(r, &c, rep, "GETRANGE", rkey);
            rep = NULL;
        }
    }
    conn_put(r, c);
    int hit = 0;
    if (vlen == 0) {
        remote_ok(r);
        pthread_mutex_lock(&r->lock);
        r->st.misses++;
        pthread_mutex_unlock(&r->lock);
    } else if (vlen > 0 && (unsigned long long)vlen > FG_REMOTE_ENTRY_MAX) {
        remote_ok(r);
        remote_rejected(r, key, "larger than the 64 MiB entry limit; not read");
    }
    if (rep) {
        remote_ok(r);
        char why[WHY_SIZE];
        const unsigned char *pl;
        const char *mt;
        size_t ps, ml;
        if (rep->len == 0) {
            pthread_mutex_lock(&r->lock);
            r->st.misses++;
            pthread_mutex_unlock(&r->lock);
        } else if (rep->len > FG_REMOTE_ENTRY_MAX) {
            remote_rejected(r, key, "larger than the 64 MiB entry limit");
        } else if (!fg_remote_entry_verify(r->secret, r->secret_len, (const unsigned char *)rep->str, rep->len, key,
                                           material, material_len, &pl, &ps, &mt, &ml, why, sizeof why)) {
            remote_rejected(r, key, why);
        } else {
            *data = fg_xmalloc(ps ? ps : 1);
            if (ps)
                memcpy(*data, pl, ps);
            *size = ps;
            if (meta)
                *meta = ml ? fg_xstrndup(mt, ml) : NULL;
            pthread_mutex_lock(&r->lock);
            r->st.hits++;
            pthread_mutex_unlock(&r->lock);
            hit = 1;
        }
        fg_resp_free(rep);
    }
    return hit;
}

void fg_remote_store(fg_remote *r, const char *key, const void *material, size_t material_len, const void *data,
                     size_t size, const char *meta)
{
    if (!r || !r->rw || !fg_cache_is_key(key))
        return;
    if (fg_remote_entry_size(material_len, meta, size) > FG_REMOTE_ENTRY_MAX) {
        pthread_mutex_lock(&r->lock);
        r->st.oversized++;
        pthread_mutex_unlock(&r->lock);
        return;
    }
    char why[WHY_SIZE];
    size_t len;
    unsigned char *buf = fg_remote_entry_encode(r->secret, r->secret_len, key, material, material_len, meta, data,
                                                size, &len, why, sizeof why);
    if (!buf) {
        remote_failed(r, 0, "signing an entry: %s", why);
        return;
    }
    double deadline = cmd_deadline(r);
    redisContext *c = conn_get(r, 0, deadline);
    if (c) {
        char rkey[64], ttl[32];
        redis_key(key, rkey);
        snprintf(ttl, sizeof ttl, "%lld", r->ttl_s);
        const char *argv[5] = {"SET", rkey, (const char *)buf, "EX", ttl};
        size_t lens[5] = {3, strlen(rkey), len, 2, strlen(ttl)};
        fg_resp_reply *rep = FG_CMD(r, c, 0, deadline, 5, argv, lens);
        if (rep && rep->type != FG_RESP_STATUS) {
            wrong_type(r, &c, rep, "SET", rkey);
            rep = NULL;
        }
        conn_put(r, c);
        if (rep) {
            remote_ok(r);
            pthread_mutex_lock(&r->lock);
            r->st.stores++;
            pthread_mutex_unlock(&r->lock);
            fg_resp_free(rep);
        }
    }
    free(buf);
}

int fg_remote_probe(fg_remote *r, double *ms, char *policy, size_t policy_size, char *why, size_t why_size)
{
    *ms = 0;
    if (policy_size)
        policy[0] = 0;
    if (!r) {
        snprintf(why, why_size, "no remote cache");
        return 0;
    }
    /* The probe reports its own failure: no warning. */
    pthread_mutex_lock(&r->lock);
    int warned = r->warned;
    r->warned = 1;
    pthread_mutex_unlock(&r->lock);
    int ok = 0;
    double t0 = fg_now();
    redisContext *c = conn_get(r, 1, cmd_deadline(r));
    if (c) {
        const char *ping[1] = {"PING"};
        fg_resp_reply *rep = FG_CMD(r, c, 1, cmd_deadline(r), 1, ping, NULL);
        *ms = (fg_now() - t0) * 1e3;
        if (rep && rep->type == FG_RESP_STATUS) {
            ok = 1;
            fg_resp_free(rep);
            rep = NULL;
            const char *info[2] = {"INFO", "memory"};
            if (c)
                rep = FG_CMD(r, c, 0, cmd_deadline(r), 2, info, NULL);
            const char *p = rep && rep->type == FG_RESP_BULK ? strstr(rep->str, "maxmemory_policy:") : NULL;
            if (p) {
                p += strlen("maxmemory_policy:");
                size_t n = strcspn(p, "\r\n");
                snprintf(policy, policy_size, "%.*s", (int)n, p);
            }
            fg_resp_free(rep);
        } else if (rep) {
            wrong_type(r, &c, rep, "PING", "");
        }
        conn_put(r, c);
    }
    pthread_mutex_lock(&r->lock);
    if (!ok)
        snprintf(why, why_size, "%s", r->last);
    r->warned = warned;
    pthread_mutex_unlock(&r->lock);
    return ok;
}

/* ---- the context's tiers ------------------------------------------------ */

struct fg_tiers {
    fg_remote *remote;
    uint64_t served[FG_JIT_SOURCE_COUNT];   /* kernels obtained from each tier (atomic) */
};

/* Adds ctx's counters to its cache directory's and closes the remote tier
 * (fg_ctx_on_free; registered after the runtime's own teardown, so it runs
 * first, while the cache is still open). */
static void tiers_teardown(fg_context *ctx)
{
    struct fg_runtime *rt = ctx->rt;
    struct fg_tiers *t = rt ? rt->tiers : NULL;
    if (!t)
        return;
    uint64_t add[FG_TC_COUNT] = {0};
    add[FG_TC_MEMORY_HITS] = t->served[FG_JIT_MEMORY];
    add[FG_TC_DISK_HITS] = t->served[FG_JIT_DISK];
    add[FG_TC_REMOTE_HITS] = t->served[FG_JIT_REMOTE];
    add[FG_TC_COMPILED] = t->served[FG_JIT_COMPILED];
    if (t->remote) {
        fg_remote_stats s;
        fg_remote_get_stats(t->remote, &s);
        add[FG_TC_REMOTE_LOOKUPS] = s.lookups;
        add[FG_TC_REMOTE_MISSES] = s.misses;
        add[FG_TC_REMOTE_REJECTED] = s.rejected;
        add[FG_TC_REMOTE_ERRORS] = s.errors;
        add[FG_TC_REMOTE_SKIPPED] = s.skipped;
        add[FG_TC_REMOTE_STORES] = s.stores;
        add[FG_TC_REMOTE_OVERSIZED] = s.oversized;
    }
    const char *dir = rt->cache ? fg_cache_dir(rt->cache) : NULL;
    if (dir)
        fg_cache_stats_add(dir, add);   /* counters only: a failure costs nothing */
    fg_remote_close(t->remote);
    free(t);
    rt->tiers = NULL;
}

/* ctx's tiers, created on first use. */
static struct fg_tiers *ctx_tiers(fg_context *ctx)
{
    struct fg_runtime *rt = fg_rt(ctx);
    struct fg_tiers *t = __atomic_load_n(&rt->tiers, __ATOMIC_ACQUIRE);
    if (t)
        return t;
    int created = 0;
    pthread_mutex_lock(&rt->lock);
    if (!rt->tiers) {
        t = fg_xcalloc(1, sizeof *t);
        t->remote = fg_remote_open(ctx);
        __atomic_store_n(&rt->tiers, t, __ATOMIC_RELEASE);
        created = 1;
    }
    t = rt->tiers;
    pthread_mutex_unlock(&rt->lock);
    if (created)
        fg_ctx_on_free(ctx, tiers_teardown);
    return t;
}

fg_remote *fg_ctx_remote(fg_context *ctx) { return ctx_tiers(ctx)->remote; }

void fg_ctx_count_tier(fg_context *ctx, int from)
{
    if ((unsigned)from < FG_JIT_SOURCE_COUNT)
        __atomic_add_fetch(&ctx_tiers(ctx)->served[from], 1, __ATOMIC_RELAXED);
}
