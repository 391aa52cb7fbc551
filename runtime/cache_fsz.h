/*
 * cache_fsz.h -- a file-size limit never kills a process over a cache write:
 * between fg_cache_fsz_begin and fg_cache_fsz_end, SIGXFSZ is ignored (when
 * its disposition is the default, which terminates), so a write past
 * RLIMIT_FSIZE fails with EFBIG instead and is handled as any failed cache
 * write (a warning; the compile goes on without the disk tier).  Nested and
 * concurrent spans share one saved disposition, restored when the last ends.
 */
#ifndef FG_CACHE_FSZ_H
#define FG_CACHE_FSZ_H

/* Starts a span of cache writes: SIGXFSZ ignored if it was the default. */
void fg_cache_fsz_begin(void);
/* Ends a span; the last one open restores SIGXFSZ's disposition. */
void fg_cache_fsz_end(void);

#endif /* FG_CACHE_FSZ_H */
