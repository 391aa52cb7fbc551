/*
 * cache_stats.h -- counters of the kernel cache's tiers, kept in the cache
 * directory (<dir>/stats) and added to by every process that uses it, so
 * that `fusegen cache stats` shows how kernels were obtained over time:
 * from memory, disk, the remote tier, or compiled, and what the remote tier
 * met (misses, refused entries, failures, stores).
 *
 * The file is text: a header line "# fusegen cache counters 1", then one
 * "name value" line per counter; a file named stats without that header (or
 * the first counter line of earlier versions) is not the cache's and is
 * never rewritten or removed.  It is read and
 * rewritten under an exclusive flock, so concurrent processes add up
 * correctly; it is created 0600 and used only when it is a regular file
 * owned by the effective user and not writable by group or others (opened
 * O_NOFOLLOW | O_NONBLOCK), like the cache's entries.  Unknown names are
 * kept out, malformed values read as 0: the counters are information, never
 * a reason to fail.
 */
#ifndef FG_CACHE_STATS_H
#define FG_CACHE_STATS_H

#include <stdint.h>

typedef enum fg_tier_counter {
    FG_TC_MEMORY_HITS = 0,
    FG_TC_DISK_HITS,
    FG_TC_REMOTE_HITS,
    FG_TC_COMPILED,
    FG_TC_REMOTE_LOOKUPS,
    FG_TC_REMOTE_MISSES,
    FG_TC_REMOTE_REJECTED,
    FG_TC_REMOTE_ERRORS,
    FG_TC_REMOTE_SKIPPED,
    FG_TC_REMOTE_STORES,
    FG_TC_REMOTE_OVERSIZED,
    FG_TC_COUNT
} fg_tier_counter;

/* The counter's name in the file ("memory_hits", ...). */
const char *fg_tier_counter_name(fg_tier_counter c);

/* Adds add[] to the counters of directory dir.  Returns 0, or -1 (nothing
 * added: no directory, a file that is not the user's own, I/O). */
int fg_cache_stats_add(const char *dir, const uint64_t add[FG_TC_COUNT]);
/* Reads the counters of dir into out (all 0 when there is no file yet).
 * Returns 0, or -1 when the file exists but cannot be used. */
int fg_cache_stats_read(const char *dir, uint64_t out[FG_TC_COUNT]);
/* Sets every counter of dir to 0.  Returns 0 or -1. */
int fg_cache_stats_zero(const char *dir);
/* Removes the counters file of dir (`fusegen cache clear`). */
void fg_cache_stats_remove(const char *dir);

#endif /* FG_CACHE_STATS_H */
