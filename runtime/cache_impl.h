/*
 * cache_impl.h -- internals of the kernel cache shared by its two tiers
 * (contract in cache.h): cache.c (the object, the memory tier, the order of
 * the tiers) and cache_disk.c (the directory of entry files).  Nothing
 * outside these two files includes this header.
 */
#ifndef FG_CACHE_IMPL_H
#define FG_CACHE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "cache.h"

typedef struct mem_entry {
    UT_hash_handle hh;
    char key[33];
    void *data;
    size_t size;
    char *meta;
} mem_entry;

struct fg_cache {
    fg_context *ctx;
    char *path;                 /* the directory as named (NULL: none could be named) */
    int dfd;                    /* the directory, opened once; -1 when memory-only from the start */
    uint64_t limit;
    pthread_mutex_t lock;       /* guards everything below */
    int use_disk;               /* 0 after falling back to memory only */
    mem_entry *mem;
    fg_cache_stats st;
    int64_t disk_bytes;         /* estimate of the directory's size */
    int scanned;                /* disk_bytes has been measured once */
    int warned;                 /* the one "memory only" warning was given */
    int warned_entry;           /* the one "refused an entry" warning was given */
};

/* ---- cache.c ---------------------------------------------------------- */

/* Whether the disk is in use (snapshot). */
int fg_cache_disk_on(fg_cache *c);
/* Inserts or replaces key in the memory table.  c->lock held. */
void fg_cache_mem_store_locked(fg_cache *c, const char *key, const void *data, size_t size, const char *meta);

/* ---- cache_disk.c ----------------------------------------------------- */

/* Opens (creating it 0700) the directory c->path, or falls back to memory
 * only with one warning (fg_cache_open, c not yet shared). */
void fg_cache_disk_open(fg_cache *c);
/* The disk half of fg_cache_fetch: a verified entry is copied out (and into
 * the memory table); a refused or corrupt one is removed and counted.  Never
 * returns FG_CACHE_MEMORY. */
fg_cache_where fg_cache_disk_fetch(fg_cache *c, const char *key, void **data, size_t *size, char **meta);
/* The disk half of fg_cache_put_meta: publishes the entry file (an entry
 * too large for the disk stays in memory only), then keeps the directory
 * within its limit; failures fall back to memory only. */
void fg_cache_disk_store(fg_cache *c, const char *key, const void *data, size_t size, const char *meta);
/* Removes every entry file and the emptied subdirectories; returns how many
 * entries were removed. */
int fg_cache_disk_clear(fg_cache *c);

#endif /* FG_CACHE_IMPL_H */
