/* util.c -- text buffers, files, hashing (see util.h; checked allocation
 * itself is oom.c's). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "num.h"
#include "oom.h"

char *fg_xstrdup(const char *s)
{
    return s ? fg_xstrndup(s, strlen(s)) : NULL;
}

char *fg_xstrndup(const char *s, size_t n)
{
    char *d = fg_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void fg_grow(void **v, int *cap, int need, size_t esz)
{
    if (need <= *cap)
        return;
    int c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    *v = fg_xrealloc(*v, (size_t)c * esz);
    memset((char *)*v + (size_t)*cap * esz, 0, (size_t)(c - *cap) * esz);
    *cap = c;
}

static void buf_reserve(fg_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t c = b->cap ? b->cap * 2 : 256;
    while (c < b->len + extra + 1)
        c *= 2;
    b->s = fg_xrealloc(b->s, c);
    b->cap = c;
}

void fg_buf_putn(fg_buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void fg_buf_put(fg_buf *b, const char *s)
{
    fg_buf_putn(b, s, strlen(s));
}

void fg_buf_vprintf(fg_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    buf_reserve(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void fg_buf_printf(fg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void fg_buf_iprintf(fg_buf *b, int indent, const char *fmt, ...)
{
    for (int i = 0; i < indent; i++)
        fg_buf_put(b, "    ");
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void fg_buf_free(fg_buf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

char *fg_buf_take(fg_buf *b)
{
    char *s = b->s ? b->s : fg_xstrdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

char *fg_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fg_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fg_buf_putn(&b, chunk, n);
    int err = ferror(f);
    fclose(f);
    if (err) {
        fg_buf_free(&b);
        errno = EIO;
        return NULL;
    }
    if (len)
        *len = b.len;
    return fg_buf_take(&b);
}

int fg_write_file_atomic(const char *path, const void *data, size_t len)
{
    /* A fresh temporary name, created with 0666 less the umask (mkstemp's
     * 0600 would need a umask lookup to widen, which is not thread-safe). */
    static unsigned counter;
    size_t n = strlen(path);
    char *tmp = fg_xmalloc(n + 48);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(tmp, n + 48, "%s.tmp.%ld.%u.%ld", path, (long)getpid(),
                 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), (long)ts.tv_nsec);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    if (fg_write_all(fd, data, len) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        fd = -1;
        goto fail;
    }
    free(tmp);
    return 0;
fail:;
    int e = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    errno = e;
    return -1;
}

int fg_mkdir_p(const char *path, int mode)
{
    char *p = fg_xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int r = mkdir(p, (mode_t)mode);
    free(p);
    if (r != 0 && errno != EEXIST)
        return -1;
    return 0;
}

char *fg_path_join(const char *a, const char *b)
{
    fg_buf buf = {0};
    fg_buf_put(&buf, a);
    if (buf.len && buf.s[buf.len - 1] != '/')
        fg_buf_put(&buf, "/");
    fg_buf_put(&buf, b);
    return fg_buf_take(&buf);
}

int fg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1 << 20;
    int row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = diag + cost;
            if (row[j] + 1 < v)
                v = row[j] + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
        }
    }
    return row[lb];
}

uint64_t fg_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

fg_hash128 fg_hash128_of(const void *data, size_t len)
{
    XXH128_hash_t h = XXH3_128bits(data, len);
    fg_hash128 r = {h.low64, h.high64};
    return r;
}

void fg_hash128_hex(fg_hash128 h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

/* fg_key_record's buffer, per thread (NULL: not recording). */
static _Thread_local fg_buf *key_record;

void fg_key_record(fg_buf *b) { key_record = b; }

void fg_key_begin(fg_key *k, const char *format)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        fg_oom_raise(1024);
    XXH3_128bits_reset(st);
    k->state = st;
    if (format) {
        XXH3_128bits_update(st, format, strlen(format));
        XXH3_128bits_update(st, "\n", 1);
        if (key_record) {
            fg_buf_put(key_record, format);
            fg_buf_putn(key_record, "\n", 1);
        }
    }
}

void fg_key_part(fg_key *k, const char *name, const void *val, size_t len)
{
    char head[160];
    int n = snprintf(head, sizeof head, "%s %zu\n", name, len);
    size_t hn = (size_t)n < sizeof head ? (size_t)n : sizeof head - 1;
    XXH3_128bits_update(k->state, head, hn);
    XXH3_128bits_update(k->state, val, len);
    XXH3_128bits_update(k->state, "\n", 1);
    if (key_record) {
        fg_buf_putn(key_record, head, hn);
        fg_buf_putn(key_record, (const char *)val, len);
        fg_buf_putn(key_record, "\n", 1);
    }
}

void fg_key_end(fg_key *k, char out[33])
{
    XXH128_hash_t h = XXH3_128bits_digest(k->state);
    XXH3_freeState(k->state);
    k->state = NULL;
    fg_hash128 r = {h.low64, h.high64};
    fg_hash128_hex(r, out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double fg_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double fg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
