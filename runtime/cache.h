/*
 * cache.h -- the kernel cache: memory first, then a directory on disk.
 *
 * Disk entries are files <dir>/<key[0..2)>/<key>.fgk holding a header (magic,
 * format version, payload size, XXH3-128 checksum of the payload) and the
 * payload.  Entries are published atomically (temporary file + rename) so
 * several processes may share a directory; on load the header and checksum are
 * verified and a corrupt or truncated entry is deleted and reported as a miss.
 * The directory has a size limit (FUSEGEN_CACHE_MAX_MB, default 1024) and
 * evicts least-recently-used entries (file mtime, refreshed on hit).  A
 * missing or read-only directory degrades to memory-only with one warning.
 */
#ifndef FG_CACHE_H
#define FG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fusegen.h"

typedef struct fg_cache fg_cache;

typedef struct fg_cache_stats {
    uint64_t mem_hits, disk_hits, misses, stores, evictions, corrupt;
} fg_cache_stats;

/* dir NULL: the default directory ($FUSEGEN_CACHE_DIR, $XDG_CACHE_HOME/fusegen,
 * ~/.cache/fusegen).  FUSEGEN_CACHE=off (or 0) disables the disk cache. */
fg_cache *fg_cache_open(fg_context *ctx, const char *dir, uint64_t limit_bytes);
void fg_cache_close(fg_cache *c);
const char *fg_cache_dir(const fg_cache *c);   /* NULL when memory-only */

/* Looks key (32 hex digits) up: memory, then disk.  On a hit *data is a
 * malloc'd copy the caller frees.  Returns 1 on hit, 0 on miss. */
int fg_cache_get(fg_cache *c, const char *key, void **data, size_t *size);
/* Stores a payload in memory and on disk (then evicts to the limit). */
fg_status fg_cache_put(fg_cache *c, const char *key, const void *data, size_t size);
void fg_cache_get_stats(const fg_cache *c, fg_cache_stats *s);
/* Removes every entry; returns the number removed. */
int fg_cache_clear(fg_cache *c);

#endif /* FG_CACHE_H */
