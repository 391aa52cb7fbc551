/* test_cache_own.c -- the cache touches only what it created: a foreign file
 * named `stats` is neither rewritten by a compile's counters nor removed by
 * `cache clear`; a regular file at an entry name without the entry magic,
 * and a file merely resembling a writer's temporary, survive clear and
 * eviction; a file-size limit (RLIMIT_FSIZE, whose SIGXFSZ would kill the
 * process) makes a cache write fail with a warning while the put succeeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "cache_stats.h"
#include "testutil.h"

static void make_key(int i, char out[33])
{
    char s[32];
    snprintf(s, sizeof s, "own-key-%d", i);
    fg_hash128_hex(fg_hash128_of(s, strlen(s)), out);
}

/* The whole content of path (malloc'd), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = calloc(1, 65536);
    size_t n = fread(b, 1, 65535, f);
    b[n] = 0;
    fclose(f);
    return b;
}

static void test_foreign_stats_untouched(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *p = tu_write(dir, "stats", "my notes: memory_hits is not a counter here\n");
    chmod(p, 0600);
    uint64_t add[FG_TC_COUNT] = {0}, v[FG_TC_COUNT];
    add[FG_TC_COMPILED] = 3;
    assert_int_equal(fg_cache_stats_add(dir, add), -1);
    assert_int_equal(fg_cache_stats_zero(dir), -1);
    assert_int_equal(fg_cache_stats_read(dir, v), -1);
    fg_cache_stats_remove(dir);   /* what `fusegen cache clear` calls */
    char *now = slurp(p);
    assert_non_null(now);
    assert_string_equal(now, "my notes: memory_hits is not a counter here\n");
    free(now);
    /* an empty file of that name is not the cache's either */
    free(tu_write(dir, "stats", ""));
    assert_int_equal(fg_cache_stats_add(dir, add), -1);
    fg_cache_stats_remove(dir);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    free(p);
    tu_rmtree(dir);
    free(dir);
}

static void test_own_stats(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    uint64_t add[FG_TC_COUNT] = {0}, v[FG_TC_COUNT];
    add[FG_TC_COMPILED] = 3;
    assert_int_equal(fg_cache_stats_add(dir, add), 0);
    assert_int_equal(fg_cache_stats_add(dir, add), 0);
    assert_int_equal(fg_cache_stats_read(dir, v), 0);
    assert_int_equal(v[FG_TC_COMPILED], 6);
    char *path = fg_path_join(dir, "stats");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text = slurp(path);
    assert_true(strncmp(text, "# fusegen cache counters", 24) == 0);
    free(text);
    fg_cache_stats_remove(dir);
    assert_int_not_equal(stat(path, &st), 0);
    /* a file an earlier version wrote (no header) is still the cache's */
    free(tu_write(dir, "stats", "memory_hits 5\ndisk_hits 1\n"));
    chmod(path, 0600);
    assert_int_equal(fg_cache_stats_add(dir, add), 0);
    assert_int_equal(fg_cache_stats_read(dir, v), 0);
    assert_int_equal(v[FG_TC_MEMORY_HITS], 5);
    assert_int_equal(v[FG_TC_COMPILED], 3);
    fg_cache_stats_remove(dir);
    assert_int_not_equal(stat(path, &st), 0);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_clear_spares_foreign_files(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    char k1[33], k2[33];
    make_key(1, k1);
    make_key(2, k2);
    assert_int_equal(fg_cache_put(c, k1, "payload", 7), FG_OK);
    /* a file the cache did not write, at the name an entry of k2 would have */
    char sub[3] = {k2[0], k2[1], 0}, name[64], tmpname[80];
    snprintf(name, sizeof name, "%s.fgk", k2);
    char *subdir = fg_path_join(dir, sub);
    mkdir(subdir, 0700);
    char *foreign = tu_write(subdir, name, "not an entry\n");
    chmod(foreign, 0600);
    /* and one resembling a temporary, old enough to be swept */
    snprintf(tmpname, sizeof tmpname, "notes.fgk.tmp.keep");
    char *tmplike = tu_write(subdir, tmpname, "mine\n");
    struct timeval tv[2] = {{1000000, 0}, {1000000, 0}};
    assert_int_equal(utimes(tmplike, tv), 0);
    char *stats = tu_write(dir, "stats", "foreign\n");
    chmod(stats, 0600);
    assert_int_equal(fg_cache_clear(c), 1);   /* k1's entry only */
    fg_cache_stats_remove(fg_cache_dir(c));
    struct stat st;
    assert_int_equal(stat(foreign, &st), 0);
    assert_int_equal(stat(tmplike, &st), 0);
    assert_int_equal(stat(stats, &st), 0);
    /* eviction spares it too */
    assert_int_equal(fg_cache_put(c, k1, "payload", 7), FG_OK);
    fg_cache_close(c);
    assert_int_equal(stat(foreign, &st), 0);
    free(foreign);
    free(tmplike);
    free(stats);
    free(subdir);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

/* In a child under RLIMIT_FSIZE 64 bytes: puts an entry of 4 KiB and adds
 * counters.  Exit 0 when the put succeeded from memory with one warning and
 * SIGXFSZ's default disposition is back afterwards. */
static int fsize_child(const char *dir)
{
    struct rlimit rl = {64, 64};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return 10;
    fg_context *ctx = tu_ctx_empty();
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    char key[33];
    make_key(3, key);
    static char payload[4096];
    if (fg_cache_put(c, key, payload, sizeof payload) != FG_OK)
        return 11;
    if (ctx->nwarnings != 1)
        return 12;
    void *d;
    size_t n;
    if (fg_cache_fetch(c, key, &d, &n, NULL) != FG_CACHE_MEMORY || n != sizeof payload)
        return 13;
    free(d);
    fg_cache_close(c);
    uint64_t add[FG_TC_COUNT] = {0};
    add[FG_TC_COMPILED] = 1;
    (void)fg_cache_stats_add(dir, add);   /* the header fits; the rewrite may not */
    struct sigaction sa;
    if (sigaction(SIGXFSZ, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL)
        return 14;
    fg_context_free(ctx);
    return 0;
}

static void test_file_size_limit(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(fsize_child(dir));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the child was killed by signal %d (SIGXFSZ is %d)", WTERMSIG(status), SIGXFSZ);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_stats_untouched),
        cmocka_unit_test(test_own_stats),
        cmocka_unit_test(test_clear_spares_foreign_files),
        cmocka_unit_test(test_file_size_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
