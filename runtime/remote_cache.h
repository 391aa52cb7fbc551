/*
 * remote_cache.h -- the remote tier of the kernel cache: a Redis server that
 * a fleet of machines shares, so that a kernel is compiled once per fleet.
 * The lookup order (kcache.c) is memory -> disk -> remote -> compile; a
 * binary fetched from the remote tier is written back to memory and disk,
 * and one compiled here is written to all three (the remote tier only in
 * read-write mode).
 *
 * Trust.  A remote entry becomes code on every machine that loads it, and the
 * server is shared, so an entry is used only when it proves where it came
 * from and what it is for: each entry carries the full key material (the
 * exact bytes the cache key hashes: generator, rule files, toolkit or
 * compiler version, arch, options, prelude, source) and an HMAC-SHA256 over
 * its header, key material, metadata and payload with the fleet secret (a
 * key file that only its owner may read).  A fetched entry is used only when
 * the HMAC verifies, its key is the key asked for and its key material is
 * byte for byte the material this process hashed; anything else (tampered,
 * signed with another secret, stored under another key, built for another
 * arch or toolkit, malformed, over FG_REMOTE_ENTRY_MAX) is refused, counted
 * (stats.rejected) and never loaded.
 *
 * Failure.  The remote tier can only save time.  Each command, with the
 * connection it opens first, has one deadline (ctx->env.remote_timeout_ms
 * from its start) for sending it and reading its whole reply, and replies
 * are read with bounds on line length, bulk length and element counts
 * checked before buffering (resp.h).  A failing server (refused, timed out,
 * closed, speaking something else, over a bound) gives one warning per
 * fg_remote and opens a circuit breaker: for FG_REMOTE_COOLDOWN_S seconds no
 * further request is made and every kernel is compiled locally.  Error
 * replies (a full server refusing writes, a key of another type) open it
 * after FG_REMOTE_MAX_FAILURES in a row.  Nothing here returns an error.
 *
 * Thread-safe: connections come from a small pool (one per concurrent
 * caller), the counters and the breaker are under one mutex.
 */
#ifndef FG_REMOTE_CACHE_H
#define FG_REMOTE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fusegen.h"

/* The largest remote entry, header to signature; larger binaries are not
 * stored, and a larger value under an entry's name is refused unread. */
#define FG_REMOTE_ENTRY_MAX ((size_t)64 << 20)
/* Entry format version (the value layout, remote_cache.c). */
#define FG_REMOTE_FORMAT 1u
/* Redis key of an entry: this prefix, then the 32 hex digits of the cache key. */
#define FG_REMOTE_KEY_PREFIX "fusegen:kernel:"
/* Fleet secrets: at least 16 bytes (say, `head -c 32 /dev/urandom`), at most 4 KiB. */
#define FG_REMOTE_SECRET_MIN 16
#define FG_REMOTE_SECRET_MAX 4096
/* The circuit breaker. */
#define FG_REMOTE_MAX_FAILURES 3
#define FG_REMOTE_COOLDOWN_S 30

typedef struct fg_remote fg_remote;

/* What a fg_remote did; also what a context adds to the cache directory's
 * counters (cache_stats.h). */
typedef struct fg_remote_stats {
    uint64_t lookups;     /* fetches sent to the server */
    uint64_t hits;        /* verified entries used */
    uint64_t misses;      /* no entry under the key */
    uint64_t rejected;    /* entries refused: signature, key, key material, format, size */
    uint64_t errors;      /* failed connections and commands */
    uint64_t skipped;     /* fetches and stores not attempted while the breaker was open */
    uint64_t stores;      /* entries written (read-write mode) */
    uint64_t oversized;   /* binaries too large to store (over FG_REMOTE_ENTRY_MAX) */
} fg_remote_stats;

/* The remote tier of ctx's settings (ctx->env.remote_*), or NULL when there
 * is none: no URL, or no usable fleet secret.  A key file that is missing,
 * unreadable, not a regular file, not owned by the effective user, readable
 * or writable by group or others, or of a size outside
 * FG_REMOTE_SECRET_MIN..MAX gives one warning on ctx and NULL.  Connects
 * lazily: opening never touches the network. */
fg_remote *fg_remote_open(fg_context *ctx);
void fg_remote_close(fg_remote *r);
/* "redis://host:port/db" (no credentials); "" for NULL. */
const char *fg_remote_where(const fg_remote *r);
/* Nonzero in read-write mode. */
int fg_remote_writable(const fg_remote *r);

/* Looks key (32 hex digits) up.  material: the key material this process
 * hashed into key (fg_key_record).  On a verified hit returns 1 with *data
 * (the payload) and *meta (its metadata text, or NULL) malloc'd for the
 * caller; otherwise 0 (miss, refused entry, failure, breaker open, r NULL). */
int fg_remote_fetch(fg_remote *r, const char *key, const void *material, size_t material_len, void **data,
                    size_t *size, char **meta);
/* Stores a binary under key with its key material and metadata, signed, with
 * the configured TTL (SET ... EX).  Does nothing in read-only mode, for r
 * NULL, or for an entry over FG_REMOTE_ENTRY_MAX (counted as oversized). */
void fg_remote_store(fg_remote *r, const char *key, const void *material, size_t material_len, const void *data,
                     size_t size, const char *meta);
void fg_remote_get_stats(const fg_remote *r, fg_remote_stats *s);

/* Asks the server whether it answers (PING), bypassing the breaker, for
 * `fusegen cache stats`.  Returns 1 with the round trip in *ms and the
 * server's maxmemory-policy (from INFO memory, "" when it does not say) in
 * policy; 0 with the reason in why. */
int fg_remote_probe(fg_remote *r, double *ms, char *policy, size_t policy_size, char *why, size_t why_size);

/* ---- entries (exposed for the tests) ----
 * Value layout, integers little endian:
 *
 *   offset  size  field
 *        0     4  magic "FGRC"
 *        4     4  format version (FG_REMOTE_FORMAT)
 *        8     4  key material size
 *       12     4  metadata size
 *       16     8  payload size
 *       24     8  creation time, seconds since the epoch
 *       32    32  the key (32 hex digits)
 *       64     -  key material, metadata, payload
 *  len - 32   32  HMAC-SHA256(secret, bytes 0 .. len - 32)
 */

/* The size of the entry fg_remote_entry_encode would make. */
uint64_t fg_remote_entry_size(size_t material_len, const char *meta, size_t size);
/* A signed entry (malloc'd, *len bytes), or NULL with the reason in why
 * (over FG_REMOTE_ENTRY_MAX, a field too large, the HMAC failed). */
unsigned char *fg_remote_entry_encode(const void *secret, size_t secret_len, const char *key, const void *material,
                                      size_t material_len, const char *meta, const void *data, size_t size,
                                      size_t *len, char *why, size_t why_size);
/* Verifies buf (len bytes) as the entry of key with exactly this key
 * material.  Returns 1 with *payload / *size and *meta / *meta_len pointing
 * into buf; 0 with the reason in why. */
int fg_remote_entry_verify(const void *secret, size_t secret_len, const unsigned char *buf, size_t len,
                           const char *key, const void *material, size_t material_len, const unsigned char **payload,
                           size_t *size, const char **meta, size_t *meta_len, char *why, size_t why_size);

/* ---- the context's tiers ----
 * fg_ctx_remote gives ctx's remote tier (opened on first use with ctx's
 * settings; NULL when there is none) and, on first use, registers the
 * teardown that adds ctx's per-tier counters (fg_remote_count) and remote
 * statistics to the cache directory's counters (cache_stats.h) and closes
 * the remote tier.  Thread-safe. */
fg_remote *fg_ctx_remote(fg_context *ctx);
/* Counts one kernel obtained by ctx from tier `from` (an fg_jit_source:
 * memory, disk, remote, compiled). */
void fg_ctx_count_tier(fg_context *ctx, int from);

#endif /* FG_REMOTE_CACHE_H */
