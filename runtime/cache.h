/*
 * cache.h -- the kernel cache: memory first, then a directory on disk.
 *
 * Disk entries are files <dir>/<key[0..2)>/<key>.fgk holding a header (magic,
 * format version, sizes, creation time, the key, and an XXH3-128 checksum
 * over every other header field, the metadata and the payload), then the
 * metadata and the payload.  Entries are published atomically (temporary
 * file + rename) so several processes may share a directory; on load the
 * header and checksum are verified and a corrupt, truncated, old-format or
 * foreign-keyed entry is deleted and reported as a miss.
 *
 * Trust: the cache is used only when it is the current user's own.  The
 * directory, its subdirectories and its entries must be owned by the
 * effective user and not writable by group or others; directories are
 * created 0700 and entries 0600 whatever the umask.  A directory that fails
 * is not used: the cache falls back to memory only, with one warning.  An
 * entry file that fails (owner, mode, not a regular file, over
 * FG_CACHE_ENTRY_MAX bytes) is never read, is removed, counted in
 * stats.refused and reported as a miss (one warning per cache).  Symlinks
 * planted as entries are not followed and FIFOs are not waited on.
 *
 * The directory has a size limit (FUSEGEN_CACHE_MAX_MB MiB, default 1024) and
 * evicts least-recently-used entries (file mtime, refreshed on hit).  A
 * missing or read-only directory degrades to memory-only with one warning.
 */
#ifndef FG_CACHE_H
#define FG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fusegen.h"

typedef struct fg_cache fg_cache;

/* The largest entry file read or written (header + metadata + payload); a
 * larger payload is kept in memory only. */
#define FG_CACHE_ENTRY_MAX ((uint64_t)256 << 20)

typedef struct fg_cache_stats {
    uint64_t mem_hits, disk_hits, misses, stores, evictions;
    uint64_t corrupt;   /* entries that failed verification (incl. old formats, other keys), removed */
    uint64_t refused;   /* entry files that are not the user's own or not regular files, not read */
} fg_cache_stats;

/* dir NULL: the context's directory (ctx->cache_dir, resolved at context
 * init: the cache_dir option, $FUSEGEN_CACHE_DIR, $XDG_CACHE_HOME/fusegen,
 * ~/.cache/fusegen).  The context's cache_off option (FUSEGEN_CACHE=off)
 * disables the disk cache.  A missing directory is created (0700, parents
 * too); one that cannot be created or opened, or is not the user's own,
 * gives a memory-only cache and one warning on ctx.  limit_bytes 0: the
 * context's limit (cache_max_mb, $FUSEGEN_CACHE_MAX_MB), else 1024 MiB.
 * ctx may be NULL (no warnings, no default directory). */
fg_cache *fg_cache_open(fg_context *ctx, const char *dir, uint64_t limit_bytes);
void fg_cache_close(fg_cache *c);
/* Nonzero when k is a cache key: 32 lowercase hex digits (every tier's
 * entry names and remote keys are built from one). */
int fg_cache_is_key(const char *k);
const char *fg_cache_dir(const fg_cache *c);   /* NULL when memory-only */

/* Looks key (32 hex digits) up: memory, then disk.  On a hit *data is a
 * malloc'd copy the caller frees.  Returns 1 on hit, 0 on miss. */
int fg_cache_get(fg_cache *c, const char *key, void **data, size_t *size);
/* Stores a payload in memory and on disk (then evicts to the limit). */
fg_status fg_cache_put(fg_cache *c, const char *key, const void *data, size_t size);
void fg_cache_get_stats(const fg_cache *c, fg_cache_stats *s);
/* Removes every entry; returns the number removed. */
int fg_cache_clear(fg_cache *c);

/* ---- entry metadata, lookup with origin, listing ----
 * Each disk entry's header carries a short metadata text ("name=...\n"
 * lines: kernel name, arch, generator version, NVRTC log) beside the payload;
 * the checksum covers both. */

typedef enum fg_cache_where {
    FG_CACHE_MISS = 0,
    FG_CACHE_MEMORY,
    FG_CACHE_DISK,
    FG_CACHE_WHERE_COUNT
} fg_cache_where;

/* Like fg_cache_get, but says where the hit came from; when meta is not NULL
 * *meta receives a malloc'd copy of the entry's metadata (NULL if it has none).
 * The payload returned is exactly what was stored: a disk entry is verified
 * (ownership, mode, type, size, header, key and checksum) before a byte of it
 * is returned. */
fg_cache_where fg_cache_fetch(fg_cache *c, const char *key, void **data, size_t *size, char **meta);
/* Like fg_cache_put, with a metadata text stored beside the payload (meta may be NULL). */
fg_status fg_cache_put_meta(fg_cache *c, const char *key, const void *data, size_t size, const char *meta);
/* The directory's size limit in bytes. */
uint64_t fg_cache_limit(const fg_cache *c);

/* What is known about one disk entry. */
typedef struct fg_cache_entry {
    char key[33];
    char *path;               /* malloc'd */
    uint64_t file_size;       /* bytes on disk */
    uint64_t payload_size;    /* from the header (0 when unreadable) */
    int64_t mtime;            /* last use, seconds since the epoch */
    int64_t created;          /* from the header, seconds since the epoch */
    int valid;                /* header and checksum verified */
    char *meta;               /* malloc'd metadata text, or NULL */
} fg_cache_entry;

/* Lists the disk entries (verifying each) into a malloc'd array, oldest use
 * first; returns the count (0 for a memory-only cache). */
int fg_cache_list(fg_cache *c, fg_cache_entry **out);
/* Finds the disk entry whose key starts with prefix (at least 4 hex digits).
 * Returns 1 and fills *e when exactly one matches, 0 when none, -1 when the
 * prefix is ambiguous. */
int fg_cache_find_entry(fg_cache *c, const char *prefix, fg_cache_entry *e);
void fg_cache_entry_free(fg_cache_entry *e);
void fg_cache_entries_free(fg_cache_entry *es, int n);
/* One value of a metadata text ("name" -> the text after "name=" on its
 * line), copied into out; returns out, or NULL when absent. */
char *fg_cache_meta_get(const char *meta, const char *name, char *out, size_t size);

/* ---- handing a verified payload to a loader ----
 * A loader that needs a file (dlopen of an emulation library) must never be
 * given a path inside the cache directory: the file there can be replaced
 * between verification and loading.  Instead it takes the bytes
 * fg_cache_fetch returned (verified) and writes them with
 * fg_cache_write_private into a private directory of its own (mkdtemp), then
 * loads that file. */

/* Writes data to a new file dir/name, created with O_CREAT | O_EXCL |
 * O_NOFOLLOW and mode exactly 0600 whatever the umask.  dir must be a real
 * directory (not a symlink) owned by the effective user with no access for
 * group or others (mode 0700, as mkdtemp makes it); name a plain file name.
 * On success returns 0 and, when path is not NULL, *path = "dir/name"
 * (malloc'd).  Returns -1 with errno otherwise: EINVAL (bad name), EPERM (dir
 * not private), EEXIST (the name exists: nothing is overwritten), or the
 * error of the failing call; a partly written file is removed. */
int fg_cache_write_private(const char *dir, const char *name, const void *data, size_t size, char **path);

#endif /* FG_CACHE_H */
