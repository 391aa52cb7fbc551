/* step_fault.c -- an LD_PRELOAD library for tests/cli/test_import_safety.sh:
 * counts the calls that change files (write, fsync, mkdir, rename, symlink,
 * unlink, rmdir) and, at the Nth, kills the process (FG_STEP_KILL=N: as a
 * kill or a power cut would stop it there) or makes the call fail with ENOSPC
 * (FG_STEP_FAIL=N: a full disk).  FG_STEP_COUNT=FILE writes the number of
 * calls made to FILE at exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static long calls;

/* Counts one call; nonzero when it must fail (errno set); never returns
 * when it must be killed. */
static int step(void)
{
    static long kill_at = -1, fail_at = -1;
    if (kill_at < 0) {
        const char *k = getenv("FG_STEP_KILL"), *f = getenv("FG_STEP_FAIL");
        kill_at = k ? atol(k) : 0;
        fail_at = f ? atol(f) : 0;
    }
    calls++;
    if (calls == kill_at)
        raise(SIGKILL);
    if (calls == fail_at) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

/* next_NAME: the real NAME (of type NAME_fn), looked up on first use. */
#define NEXT(name)                                                                                                   \
    static name##_fn next_##name;                                                                                  \
    if (!next_##name)                                                                                              \
    next_##name = (name##_fn)dlsym(RTLD_NEXT, #name)

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*fsync_fn)(int);
typedef int (*mkdir_fn)(const char *, mode_t);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*symlink_fn)(const char *, const char *);
typedef int (*unlink_fn)(const char *);
typedef int (*rmdir_fn)(const char *);

ssize_t write(int fd, const void *buf, size_t n)
{
    NEXT(write);
    if (fd > 2 && step())
        return -1;
    return next_write(fd, buf, n);
}

int fsync(int fd)
{
    NEXT(fsync);
    return step() ? -1 : next_fsync(fd);
}

int mkdir(const char *p, mode_t m)
{
    NEXT(mkdir);
    return step() ? -1 : next_mkdir(p, m);
}

int rename(const char *a, const char *b)
{
    NEXT(rename);
    return step() ? -1 : next_rename(a, b);
}

int symlink(const char *a, const char *b)
{
    NEXT(symlink);
    return step() ? -1 : next_symlink(a, b);
}

int unlink(const char *p)
{
    NEXT(unlink);
    return step() ? -1 : next_unlink(p);
}

int rmdir(const char *p)
{
    NEXT(rmdir);
    return step() ? -1 : next_rmdir(p);
}

__attribute__((destructor)) static void report(void)
{
    const char *f = getenv("FG_STEP_COUNT");
    FILE *o = f ? fopen(f, "w") : NULL;
    if (o) {
        fprintf(o, "%ld\n", calls);
        fclose(o);
    }
}
