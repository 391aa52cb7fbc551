/*
 * util.h -- small helpers shared by every module: checked allocation, a
 * growable text buffer, file reading, string helpers and content hashing
 * (xxHash's XXH3).
 *
 * Allocation (oom.c, oom.h): fg_xmalloc and kin never return NULL.  Inside
 * an out-of-memory guard (the public entry points that input can reach) a
 * failed allocation unwinds to the guard, which frees what the call
 * allocated and returns FG_ERR_NOMEM; elsewhere it aborts with a message.
 * So that the guard knows what is still live, every file that includes this
 * header calls free() and realloc() through fg_free and fg_realloc (the
 * macros below; the same functions, and tracking only while a guard runs).
 * A struct member named free or realloc must be called as (s->free)(p).
 * uthash's tables are allocated with fg_xmalloc as well.
 */
#ifndef FG_UTIL_H
#define FG_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define FG_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))
#define FG_STATIC_ASSERT(c, msg) _Static_assert(c, msg)

void *fg_xmalloc(size_t n);
void *fg_xcalloc(size_t n, size_t size);
void *fg_xrealloc(void *p, size_t n);
char *fg_xstrdup(const char *s);
char *fg_xstrndup(const char *s, size_t n);
/* free() and realloc() as the guard sees them: a NULL from fg_realloc is a
 * failure to handle, as realloc's. */
void fg_free(void *p);
void *fg_realloc(void *p, size_t n);
#define free(p) fg_free(p)
#define realloc(p, n) fg_realloc((p), (n))
/* uthash's tables too (its macros expand where they are used, so the order
 * of including <uthash.h> and this header does not matter). */
#undef uthash_malloc
#undef uthash_free
#define uthash_malloc(sz) fg_xmalloc(sz)
#define uthash_free(ptr, sz) fg_free(ptr)
/* Grows *v (element size esz) so that it holds at least need elements. */
void fg_grow(void **v, int *cap, int need, size_t esz);
#define FG_PUSH(v, n, cap) (fg_grow((void **)&(v), &(cap), (n) + 1, sizeof(*(v))), &(v)[(n)++])

/* A growable NUL-terminated text buffer.  Zero-initialised is empty. */
typedef struct fg_buf {
    char *s;
    size_t len;
    size_t cap;
} fg_buf;

void fg_buf_put(fg_buf *b, const char *s);
void fg_buf_putn(fg_buf *b, const char *s, size_t n);
void fg_buf_printf(fg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fg_buf_vprintf(fg_buf *b, const char *fmt, va_list ap);
/* Appends indent*4 spaces then the formatted text. */
void fg_buf_iprintf(fg_buf *b, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fg_buf_free(fg_buf *b);
/* Hands the string to the caller (never NULL) and empties the buffer. */
char *fg_buf_take(fg_buf *b);

/* Reads a whole file; returns malloc'd NUL-terminated text or NULL with errno. */
char *fg_read_file(const char *path, size_t *len);
/* Writes data to path atomically (temporary file in the same directory, then
 * rename); the file has mode 0666 less the umask.  Returns 0 or -1 with
 * errno. */
int fg_write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p; returns 0 or -1 with errno. */
int fg_mkdir_p(const char *path, int mode);
/* path join into a malloc'd string. */
char *fg_path_join(const char *a, const char *b);

/* Levenshtein distance, for "did you mean" suggestions. */
int fg_edit_distance(const char *a, const char *b);

/* Content hashes (XXH3).  128-bit values print as 32 hex digits. */
typedef struct fg_hash128 {
    uint64_t lo, hi;
} fg_hash128;
uint64_t fg_hash64(const void *data, size_t len);
fg_hash128 fg_hash128_of(const void *data, size_t len);
void fg_hash128_hex(fg_hash128 h, char out[33]);

/* A cache key: XXH3-128 over a stream of parts, each written as
 * "<name> <length>\n<bytes>\n" so that no two part lists hash the same
 * bytes.  Streaming: nothing is copied.  fg_key_end frees the state. */
typedef struct fg_key {
    void *state;
} fg_key;
void fg_key_begin(fg_key *k, const char *format);   /* format: a first line naming the scheme */
void fg_key_part(fg_key *k, const char *name, const void *val, size_t len);
void fg_key_end(fg_key *k, char out[33]);
/* While b is set on the calling thread (fg_key_record(b), compute a key,
 * fg_key_record(NULL)), fg_key_begin and fg_key_part also append to b
 * exactly the bytes they hash: the key material, which the remote cache
 * keeps with an entry and compares (runtime/remote_cache.h). */
void fg_key_record(fg_buf *b);

/* Sorts v[0..n) ascending in place and returns its median (0 when n <= 0);
 * v[0] is then the minimum.  For timings. */
double fg_median(double *v, int n);

/* Monotonic clock in seconds. */
double fg_now(void);

#endif /* FG_UTIL_H */
