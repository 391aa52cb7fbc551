/* test_cache_trust.c -- the kernel cache trusts only what is the user's own:
 * modes of what it creates (under umask 0), refusal of group/other-writable
 * or foreign-owned directories (one warning, memory only), refusal and
 * removal of planted entries (wrong mode, foreign owner, symlink, FIFO,
 * oversized), rekeyed and old-format entries, fg_cache_write_private, and the
 * strict parsing of FUSEGEN_CACHE_MAX_MB.
 *
 * Run as root (as CI does), the foreign-owner cases chown to uid 12345.  Run
 * as another user, the foreign directory is "/" (owned by root) and the
 * foreign entry case is reported as skipped (it cannot be set up). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "testutil.h"

#define FOREIGN_UID 12345

static void make_key(int i, char out[33])
{
    char s[32];
    snprintf(s, sizeof s, "trust-key-%d", i);
    fg_hash128_hex(fg_hash128_of(s, strlen(s)), out);
}

static char *entry_file(const char *dir, const char *key)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s/%s.fgk", dir, key, key);
    return fg_buf_take(&b);
}

static char *sub_dir(const char *dir, const char *key)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s", dir, key);
    return fg_buf_take(&b);
}

static unsigned mode_of(const char *p)
{
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* A cache directory made by the cache itself, holding one valid entry of key
 * with payload text; returns the directory (malloc'd). */
static char *cache_with_entry(fg_context *ctx, const char *key, const char *text)
{
    char *tmp = tu_tmpdir();
    char *dir = fg_path_join(tmp, "cache");
    free(tmp);
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    assert_int_equal(fg_cache_put_meta(c, key, text, strlen(text), "name=k\n"), FG_OK);
    fg_cache_close(c);
    char *p = entry_file(dir, key);
    assert_true(exists(p));
    free(p);
    return dir;
}

static void rm_cache(char *dir)
{
    char *parent = fg_xstrdup(dir);
    *strrchr(parent, '/') = 0;
    tu_rmtree(parent);
    free(parent);
    free(dir);
}

/* Looks key up in a fresh cache object on dir and expects a miss from disk
 * with `refused` refused and `corrupt` corrupt entries, and the entry file
 * gone.  Then stores `text` and expects a fresh object to read it back. */
static void expect_refused_then_replaced(fg_context *ctx, const char *dir, const char *key, int refused, int corrupt,
                                         const char *text)
{
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    void *d = (void *)1;
    size_t n = 1;
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MISS);
    assert_null(d);
    assert_int_equal(n, 0);
    fg_cache_stats s;
    fg_cache_get_stats(c, &s);
    assert_int_equal(s.refused, refused);
    assert_int_equal(s.corrupt, corrupt);
    assert_int_equal(s.disk_hits, 0);
    char *p = entry_file(dir, key);
    assert_false(exists(p));   /* removed, not kept */
    assert_int_equal(fg_cache_put(c, key, text, strlen(text)), FG_OK);
    fg_cache_close(c);
    assert_int_equal(mode_of(p), 0600);
    free(p);
    c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_DISK);
    assert_int_equal(n, strlen(text));
    assert_memory_equal(d, text, n);
    free(d);
    fg_cache_close(c);
}

/* ---- what the cache creates ------------------------------------------- */

static void test_modes_under_umask_0(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *tmp = tu_tmpdir();
    char *dir = fg_path_join(tmp, "a/b/cache");
    char key[33];
    make_key(1, key);
    mode_t old = umask(0);
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    assert_int_equal(fg_cache_put(c, key, "payload", 7), FG_OK);
    fg_cache_close(c);
    umask(old);
    char *a = fg_path_join(tmp, "a"), *sub = sub_dir(dir, key), *p = entry_file(dir, key);
    assert_int_equal(mode_of(a), 0700);     /* a missing parent too */
    assert_int_equal(mode_of(dir), 0700);
    assert_int_equal(mode_of(sub), 0700);
    assert_int_equal(mode_of(p), 0600);
    assert_int_equal(ctx->nwarnings, 0);
    free(a);
    free(sub);
    free(p);
    free(dir);
    tu_rmtree(tmp);
    free(tmp);
    fg_context_free(ctx);
}

/* ---- directories that are not the user's own ------------------------- */

/* Opens dir (whose mode or owner was changed by the caller) and expects one
 * warning containing `why`, a memory-only cache that still works, and
 * nothing written into dir. */
static void expect_dir_refused(fg_context *ctx, const char *dir, const char *why)
{
    int w0 = ctx->nwarnings;
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(c);
    assert_null(fg_cache_dir(c));
    assert_int_equal(ctx->nwarnings, w0 + 1);
    const char *w = ctx->warnings[w0];
    if (!strstr(w, why) || !strstr(w, dir) || !strstr(w, "memory only"))
        fail_msg("unexpected warning: %s", w);
    char key[33];
    make_key(2, key);
    assert_int_equal(fg_cache_put(c, key, "abc", 3), FG_OK);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MEMORY);
    assert_memory_equal(d, "abc", 3);
    free(d);
    fg_cache_entry *es;
    assert_int_equal(fg_cache_list(c, &es), 0);
    fg_cache_entries_free(es, 0);
    fg_cache_close(c);
    assert_int_equal(ctx->nwarnings, w0 + 1);   /* one warning, not one per call */
    char *sub = sub_dir(dir, key);
    assert_false(exists(sub));                 /* nothing written there */
    free(sub);
}

static void test_group_or_world_writable_dir_refused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    static const struct {
        unsigned mode;
        const char *why;
    } cases[] = {
        {0770, "writable by group"},
        {0757, "writable by others"},
        {0777, "writable by group and others"},
        {01777, "writable by group and others"},   /* sticky like /tmp: still shared */
    };
    for (size_t i = 0; i < FG_COUNTOF(cases); i++) {
        assert_int_equal(chmod(dir, cases[i].mode), 0);
        expect_dir_refused(ctx, dir, cases[i].why);
    }
    /* Back to 0755 (readable, not writable, by others): accepted. */
    assert_int_equal(chmod(dir, 0755), 0);
    int w0 = ctx->nwarnings;
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    fg_cache_close(c);
    assert_int_equal(ctx->nwarnings, w0);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void test_foreign_dir_refused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    if (geteuid() == 0) {
        char *dir = tu_tmpdir();
        assert_int_equal(chown(dir, FOREIGN_UID, FOREIGN_UID), 0);
        expect_dir_refused(ctx, dir, "owned by uid 12345");
        tu_rmtree(dir);
        free(dir);
    } else {
        /* "/" belongs to root; opening it creates nothing. */
        expect_dir_refused(ctx, "/", "owned by uid 0");
    }
    fg_context_free(ctx);
}

static void test_writable_subdir_refused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(3, key);
    char *dir = cache_with_entry(ctx, key, "mine");
    char *sub = sub_dir(dir, key);
    assert_int_equal(chmod(sub, 0777), 0);
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    void *d;
    size_t n;
    int w0 = ctx->nwarnings;
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MISS);
    assert_null(fg_cache_dir(c));   /* memory only from now on */
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_non_null(strstr(ctx->warnings[w0], "writable by group and others"));
    assert_int_equal(fg_cache_put(c, key, "x", 1), FG_OK);
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MEMORY);
    free(d);
    fg_cache_close(c);
    assert_int_equal(ctx->nwarnings, w0 + 1);
    free(sub);
    rm_cache(dir);
    fg_context_free(ctx);
}

/* ---- planted entries -------------------------------------------------- */

static void test_entry_wrong_mode_refused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    static const unsigned modes[] = {0666, 0620, 0602};
    for (size_t i = 0; i < FG_COUNTOF(modes); i++) {
        char key[33];
        make_key(10 + (int)i, key);
        char *dir = cache_with_entry(ctx, key, "planted library");
        char *p = entry_file(dir, key);
        assert_int_equal(chmod(p, modes[i]), 0);
        free(p);
        int w0 = ctx->nwarnings;
        expect_refused_then_replaced(ctx, dir, key, 1, 0, "rebuilt");
        assert_int_equal(ctx->nwarnings, w0 + 1);
        assert_non_null(strstr(ctx->warnings[w0], "writable by"));
        rm_cache(dir);
    }
    fg_context_free(ctx);
}

static void test_entry_foreign_owner_refused(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("NOT RUN: a file owned by another user can only be made by root\n");
        skip();
    }
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(20, key);
    char *dir = cache_with_entry(ctx, key, "planted library");
    char *p = entry_file(dir, key);
    assert_int_equal(chown(p, FOREIGN_UID, FOREIGN_UID), 0);
    free(p);
    int w0 = ctx->nwarnings;
    expect_refused_then_replaced(ctx, dir, key, 1, 0, "rebuilt");
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_non_null(strstr(ctx->warnings[w0], "owned by uid 12345"));
    rm_cache(dir);
    fg_context_free(ctx);
}

/* Copies entry a's file to b's name; when rewrite, every copy of a's key in
 * the bytes is replaced by b's (the key field, wherever the format keeps it). */
static void rekey(const char *dir, const char *a, const char *b, int rewrite)
{
    char *pa = entry_file(dir, a), *pb = entry_file(dir, b), *sb = sub_dir(dir, b);
    size_t n;
    char *bytes = fg_read_file(pa, &n);
    assert_non_null(bytes);
    int found = 0;
    for (size_t i = 0; rewrite && i + 32 <= n; i++)
        if (memcmp(bytes + i, a, 32) == 0) {
            memcpy(bytes + i, b, 32);
            found++;
        }
    assert_true(!rewrite || found >= 1);
    mkdir(sb, 0700);
    int fd = open(pb, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, n), (ssize_t)n);
    close(fd);
    free(bytes);
    free(pa);
    free(pb);
    free(sb);
}

static void test_rekeyed_entry_refused(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    for (int rewrite = 0; rewrite < 2; rewrite++) {
        char a[33], b[33];
        make_key(30 + 2 * rewrite, a);
        make_key(31 + 2 * rewrite, b);
        char *dir = cache_with_entry(ctx, a, "kernel A");
        rekey(dir, a, b, rewrite);
        /* Never served as B: refused (corrupt), removed, then B's own
         * payload is stored and read back. */
        expect_refused_then_replaced(ctx, dir, b, 0, 1, "kernel B");
        /* A itself is untouched. */
        fg_cache *c = fg_cache_open(ctx, dir, 0);
        void *d;
        size_t n;
        assert_int_equal(fg_cache_fetch(c, a, &d, &n, NULL), FG_CACHE_DISK);
        assert_memory_equal(d, "kernel A", 8);
        free(d);
        fg_cache_close(c);
        rm_cache(dir);
    }
    assert_int_equal(ctx->nwarnings, 0);
    fg_context_free(ctx);
}

static void test_symlink_entry_not_followed(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(40, key);
    /* A valid entry of key in another directory of the user's... */
    char *elsewhere = cache_with_entry(ctx, key, "somewhere else");
    char *target = entry_file(elsewhere, key);
    /* ...linked from the cache as the entry of key. */
    char *tmp = tu_tmpdir();
    char *dir = fg_path_join(tmp, "cache");
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    fg_cache_close(c);
    char *sub = sub_dir(dir, key), *p = entry_file(dir, key);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(symlink(target, p), 0);
    c = fg_cache_open(ctx, dir, 0);
    fg_cache_entry *es;
    assert_int_equal(fg_cache_list(c, &es), 1);
    assert_false(es[0].valid);
    fg_cache_entries_free(es, 1);
    fg_cache_close(c);
    int w0 = ctx->nwarnings;
    expect_refused_then_replaced(ctx, dir, key, 1, 0, "rebuilt");
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_non_null(strstr(ctx->warnings[w0], "symbolic link"));
    /* The target was neither followed into nor removed nor overwritten. */
    size_t n;
    char *bytes = fg_read_file(target, &n);
    assert_non_null(bytes);
    assert_non_null(memmem(bytes, n, "somewhere else", 14));
    free(bytes);
    free(sub);
    free(p);
    free(dir);
    tu_rmtree(tmp);
    free(tmp);
    free(target);
    rm_cache(elsewhere);
    fg_context_free(ctx);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_cache_trust: a lookup blocked on a FIFO planted as an entry\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void test_fifo_entry_no_hang(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(50, key);
    char *tmp = tu_tmpdir();
    char *dir = fg_path_join(tmp, "cache");
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    fg_cache_close(c);
    char *sub = sub_dir(dir, key), *p = entry_file(dir, key);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    c = fg_cache_open(ctx, dir, 0);
    fg_cache_entry *es;
    assert_int_equal(fg_cache_list(c, &es), 1);   /* listed, as invalid */
    assert_false(es[0].valid);
    fg_cache_entries_free(es, 1);
    fg_cache_entry e;
    assert_int_equal(fg_cache_find_entry(c, key, &e), 1);
    assert_false(e.valid);
    fg_cache_entry_free(&e);
    fg_cache_close(c);
    int w0 = ctx->nwarnings;
    expect_refused_then_replaced(ctx, dir, key, 1, 0, "rebuilt");
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_non_null(strstr(ctx->warnings[w0], "FIFO"));
    free(sub);
    free(p);
    free(dir);
    tu_rmtree(tmp);
    free(tmp);
    fg_context_free(ctx);
}

static void test_oversized_entry_not_read(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(60, key);
    char *dir = cache_with_entry(ctx, key, "small");
    char *p = entry_file(dir, key);
    assert_int_equal(truncate(p, (off_t)FG_CACHE_ENTRY_MAX + 1), 0);   /* sparse */
    free(p);
    expect_refused_then_replaced(ctx, dir, key, 1, 0, "rebuilt");
    rm_cache(dir);
    fg_context_free(ctx);
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void test_old_format_entry_replaced(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char key[33];
    make_key(70, key);
    char *tmp = tu_tmpdir();
    char *dir = fg_path_join(tmp, "cache");
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    fg_cache_close(c);
    /* A well-formed entry of format 1 (its key outside the checksum). */
    static const char payload[] = "format one";
    unsigned char f[80 + sizeof payload - 1] = {0};
    memcpy(f, "FGKC", 4);
    put_le(f + 4, 1, 4);
    put_le(f + 8, sizeof payload - 1, 8);
    put_le(f + 36, 80, 4);
    memcpy(f + 40, key, 32);
    memcpy(f + 80, payload, sizeof payload - 1);
    fg_hash128 h = fg_hash128_of(f + 80, sizeof payload - 1);
    put_le(f + 16, h.lo, 8);
    put_le(f + 24, h.hi, 8);
    char *sub = sub_dir(dir, key), *p = entry_file(dir, key);
    assert_int_equal(mkdir(sub, 0700), 0);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f, sizeof f), (ssize_t)sizeof f);
    close(fd);
    expect_refused_then_replaced(ctx, dir, key, 0, 1, "format two");
    assert_int_equal(ctx->nwarnings, 0);
    free(sub);
    free(p);
    free(dir);
    tu_rmtree(tmp);
    free(tmp);
    fg_context_free(ctx);
}

/* One warning for several refused entries of one cache object. */
static void test_one_entry_warning(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char k1[33], k2[33];
    make_key(80, k1);
    make_key(81, k2);
    char *dir = cache_with_entry(ctx, k1, "one");
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_put(c, k2, "two", 3), FG_OK);
    fg_cache_close(c);
    char *p1 = entry_file(dir, k1), *p2 = entry_file(dir, k2);
    assert_int_equal(chmod(p1, 0666), 0);
    assert_int_equal(chmod(p2, 0666), 0);
    int w0 = ctx->nwarnings;
    c = fg_cache_open(ctx, dir, 0);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_fetch(c, k1, &d, &n, NULL), FG_CACHE_MISS);
    assert_int_equal(fg_cache_fetch(c, k2, &d, &n, NULL), FG_CACHE_MISS);
    fg_cache_stats s;
    fg_cache_get_stats(c, &s);
    assert_int_equal(s.refused, 2);
    assert_non_null(fg_cache_dir(c));   /* entries are refused, the directory stays in use */
    fg_cache_close(c);
    assert_int_equal(ctx->nwarnings, w0 + 1);
    assert_false(exists(p1));
    assert_false(exists(p2));
    free(p1);
    free(p2);
    rm_cache(dir);
    fg_context_free(ctx);
}

/* ---- handing verified bytes to a loader ------------------------------- */

static void test_write_private(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();   /* mkdtemp: 0700 */
    mode_t old = umask(0);
    char *path = NULL;
    assert_int_equal(fg_cache_write_private(dir, "k.so", "\x7f" "ELF", 4, &path), 0);
    umask(old);
    assert_non_null(path);
    assert_int_equal(mode_of(path), 0600);
    size_t n;
    char *bytes = fg_read_file(path, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(bytes, "\x7f" "ELF", 4);
    free(bytes);
    /* Never overwrites: an existing name (a file, or a planted symlink) fails. */
    errno = 0;
    assert_int_equal(fg_cache_write_private(dir, "k.so", "x", 1, NULL), -1);
    assert_int_equal(errno, EEXIST);
    char *victim = tu_write(dir, "victim", "keep");
    char *link = fg_path_join(dir, "l.so");
    assert_int_equal(symlink(victim, link), 0);
    errno = 0;
    assert_int_equal(fg_cache_write_private(dir, "l.so", "x", 1, NULL), -1);
    assert_int_equal(errno, EEXIST);
    bytes = fg_read_file(victim, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(bytes, "keep", 4);
    free(bytes);
    /* Bad names; a directory others can enter is not private. */
    assert_int_equal(fg_cache_write_private(dir, "a/b", "x", 1, NULL), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(fg_cache_write_private(dir, "..", "x", 1, NULL), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(fg_cache_write_private(dir, "m.so", "x", 1, NULL), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(chmod(dir, 0700), 0);
    free(link);
    free(victim);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* ---- FUSEGEN_CACHE_MAX_MB --------------------------------------------- */

/* The context reads the variable once, strictly; the cache takes its limit
 * from the context.  Garbage: one warning naming it, and the default. */
static void test_max_mb_parsed_strictly(void **state)
{
    (void)state;
    static const char *const bad[] = {"12abc", "abc", "-1", "1e400", "nan", "inf", "0x10", "1 2", "0",
                                      "99999999999999999999"};
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < FG_COUNTOF(bad); i++) {
        setenv("FUSEGEN_CACHE_MAX_MB", bad[i], 1);
        fg_context *ctx = tu_ctx_empty();
        int w0 = ctx->nwarnings;
        fg_cache *c = fg_cache_open(ctx, dir, 0);
        assert_int_equal(fg_cache_limit(c), (uint64_t)1024 << 20);
        fg_cache_close(c);
        int found = 0;
        for (int w = 0; w < ctx->nwarnings; w++)
            found += strstr(ctx->warnings[w], "FUSEGEN_CACHE_MAX_MB") != NULL;
        if (found != 1)
            fail_msg("FUSEGEN_CACHE_MAX_MB='%s': %d warnings name it (of %d, %d before the cache)", bad[i], found,
                     ctx->nwarnings, w0);
        fg_context_free(ctx);
    }
    setenv("FUSEGEN_CACHE_MAX_MB", "0.5", 1);
    fg_context *ctx = tu_ctx_empty();
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_limit(c), (uint64_t)1 << 19);
    assert_int_equal(ctx->nwarnings, 0);
    fg_cache_close(c);
    fg_context_free(ctx);
    unsetenv("FUSEGEN_CACHE_MAX_MB");
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_under_umask_0),
        cmocka_unit_test(test_group_or_world_writable_dir_refused),
        cmocka_unit_test(test_foreign_dir_refused),
        cmocka_unit_test(test_writable_subdir_refused),
        cmocka_unit_test(test_entry_wrong_mode_refused),
        cmocka_unit_test(test_entry_foreign_owner_refused),
        cmocka_unit_test(test_rekeyed_entry_refused),
        cmocka_unit_test(test_symlink_entry_not_followed),
        cmocka_unit_test(test_fifo_entry_no_hang),
        cmocka_unit_test(test_oversized_entry_not_read),
        cmocka_unit_test(test_old_format_entry_replaced),
        cmocka_unit_test(test_one_entry_warning),
        cmocka_unit_test(test_write_private),
        cmocka_unit_test(test_max_mb_parsed_strictly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
