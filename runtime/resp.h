/*
 * resp.h -- a bounded reader of Redis replies (RESP2) for the remote tier
 * of the kernel cache (remote_cache.c).  The server is not trusted: every
 * size a reply announces is checked against a bound before a byte of it is
 * buffered, so a reply costs at most FG_RESP_LINE_MAX for a line, the
 * reader's bulk_max for a bulk string (grown as its bytes arrive, never
 * allocated from the announced length) and FG_RESP_ELEMENTS_MAX elements in
 * all, however the server lies.  Time is the byte source's business (the
 * remote tier's source fails at its command's deadline).
 */
#ifndef FG_RESP_H
#define FG_RESP_H

#include <stddef.h>
#include <sys/types.h>

/* The longest status, error or integer line and the longest header of a
 * bulk string or multi-bulk reply, CRLF included. */
#define FG_RESP_LINE_MAX 4096
/* The most elements of one multi-bulk reply, nested ones included, and the
 * deepest nesting. */
#define FG_RESP_ELEMENTS_MAX 64
#define FG_RESP_DEPTH_MAX 4

typedef enum fg_resp_type {
    FG_RESP_STATUS,    /* +OK */
    FG_RESP_ERROR,     /* -ERR ... */
    FG_RESP_INTEGER,   /* :12 */
    FG_RESP_BULK,      /* $3 abc */
    FG_RESP_NIL,       /* $-1 or *-1 */
    FG_RESP_ARRAY,     /* *2 ... */
    FG_RESP_TYPE_COUNT
} fg_resp_type;

typedef struct fg_resp_reply {
    fg_resp_type type;
    long long integer;               /* FG_RESP_INTEGER */
    char *str;                       /* STATUS, ERROR, BULK: len bytes and a NUL */
    size_t len;
    struct fg_resp_reply **elem;     /* FG_RESP_ARRAY: n elements */
    size_t n;
} fg_resp_reply;

/* A byte source: reads at most n bytes into buf and returns how many (> 0),
 * 0 at the end of the stream, or -1 with the reason in why. */
typedef ssize_t (*fg_resp_read_fn)(void *user, void *buf, size_t n, char *why, size_t why_size);

typedef struct fg_resp_reader {
    fg_resp_read_fn read;
    void *user;
    size_t bulk_max;                 /* the longest bulk string accepted */
    unsigned char buf[4096];         /* bytes read ahead: buf[pos .. len) */
    size_t pos, len;
    size_t elements;                 /* elements of the reply being read */
} fg_resp_reader;

/* A reader of replies from read(user, ...) that accepts bulk strings of at
 * most bulk_max bytes. */
void fg_resp_reader_init(fg_resp_reader *rd, fg_resp_read_fn read, void *user, size_t bulk_max);
/* Reads one whole reply into *out (malloc'd; fg_resp_free).  Returns 0, or
 * -1 with *out NULL and the reason in why: the source failed or ended, the
 * bytes are not RESP2, or the reply is over a bound.  After -1 the stream is
 * out of step: the connection must not be used again. */
int fg_resp_read(fg_resp_reader *rd, fg_resp_reply **out, char *why, size_t why_size);
/* Bytes read past the last reply (a server that answered more than it was
 * asked: out of step too). */
size_t fg_resp_pending(const fg_resp_reader *rd);
/* "status", "error", ... for messages. */
const char *fg_resp_type_name(fg_resp_type t);
void fg_resp_free(fg_resp_reply *r);

#endif /* FG_RESP_H */
