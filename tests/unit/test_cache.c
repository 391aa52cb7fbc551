/* test_cache.c -- the kernel cache: memory and disk hits, verification of
 * entries, eviction, degradation to memory-only, listing and clearing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "cache.h"
#include "testutil.h"

/* A deterministic 32-hex key for index i. */
static void make_key(int i, char out[33])
{
    char s[32];
    snprintf(s, sizeof s, "test-key-%d", i);
    fg_hash128_hex(fg_hash128_of(s, strlen(s)), out);
}

static char *entry_file(const char *dir, const char *key)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s/%s.fgk", dir, key, key);
    return fg_buf_take(&b);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void set_mtime(const char *p, time_t t)
{
    struct timeval tv[2] = {{t, 0}, {t, 0}};
    assert_int_equal(utimes(p, tv), 0);
}

static void test_memory_then_disk_hit(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    char key[33];
    make_key(1, key);
    const char payload[] = "cubin bytes \x01\x02\x03";

    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_string_equal(fg_cache_dir(c), dir);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_get(c, key, &d, &n), 0);
    assert_int_equal(fg_cache_put_meta(c, key, payload, sizeof payload, "name=k1\narch=sm_90\n"), FG_OK);
    char *meta = NULL;
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, &meta), FG_CACHE_MEMORY);
    assert_int_equal(n, sizeof payload);
    assert_memory_equal(d, payload, n);
    assert_non_null(meta);
    assert_non_null(strstr(meta, "arch=sm_90"));
    free(d);
    free(meta);
    fg_cache_stats s;
    fg_cache_get_stats(c, &s);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.mem_hits, 1);
    assert_int_equal(s.stores, 1);
    fg_cache_close(c);

    /* A fresh cache object on the same directory finds it on disk, then in memory. */
    c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, &meta), FG_CACHE_DISK);
    assert_int_equal(n, sizeof payload);
    assert_memory_equal(d, payload, n);
    char v[32];
    assert_non_null(fg_cache_meta_get(meta, "name", v, sizeof v));
    assert_string_equal(v, "k1");
    assert_null(fg_cache_meta_get(meta, "nothing", v, sizeof v));
    free(d);
    free(meta);
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MEMORY);
    free(d);
    fg_cache_get_stats(c, &s);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.mem_hits, 1);
    /* Bad keys are never looked up or stored. */
    assert_int_equal(fg_cache_get(c, "not-a-key", &d, &n), 0);
    assert_int_not_equal(fg_cache_put(c, "ABC", payload, 3), FG_OK);
    fg_cache_close(c);
    assert_int_equal(ctx->nwarnings, 0);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

/* Damages a stored entry with `damage`, then checks a fresh cache object
 * rejects it (miss, corrupt counted, file deleted) and a new put is valid. */
static void check_corruption(void (*damage)(const char *path))
{
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    char key[33];
    make_key(2, key);
    char payload[4096];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (char)(i * 7);
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_put(c, key, payload, sizeof payload), FG_OK);
    fg_cache_close(c);
    char *path = entry_file(dir, key);
    damage(path);

    c = fg_cache_open(ctx, dir, 0);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_get(c, key, &d, &n), 0);
    assert_null(d);
    fg_cache_stats s;
    fg_cache_get_stats(c, &s);
    assert_int_equal(s.corrupt, 1);
    assert_int_equal(s.misses, 1);
    assert_int_equal(access(path, F_OK), -1);   /* deleted, never served */
    assert_int_equal(fg_cache_put(c, key, payload, sizeof payload), FG_OK);
    fg_cache_close(c);

    c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_DISK);
    assert_int_equal(n, sizeof payload);
    assert_memory_equal(d, payload, n);
    free(d);
    fg_cache_close(c);
    free(path);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void truncate_file(const char *path)
{
    long n = file_size(path);
    assert_true(n > 100);
    assert_int_equal(truncate(path, n - 10), 0);
}

static void flip_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    long n = file_size(path);
    fseek(f, n / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, n / 2, SEEK_SET);
    fputc(ch ^ 0x20, f);
    fclose(f);
}

static void flip_header(const char *path)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fputc('X', f);   /* the magic */
    fclose(f);
}

static void empty_file(const char *path)
{
    assert_int_equal(truncate(path, 0), 0);
}

static void test_truncated_entry(void **state) { (void)state; check_corruption(truncate_file); }
static void test_flipped_byte(void **state) { (void)state; check_corruption(flip_byte); }
static void test_bad_magic(void **state) { (void)state; check_corruption(flip_header); }
static void test_empty_entry(void **state) { (void)state; check_corruption(empty_file); }

/* Total bytes of the entry files under dir. */
static long dir_bytes(fg_cache *c)
{
    fg_cache_entry *es;
    int n = fg_cache_list(c, &es);
    long total = 0;
    for (int i = 0; i < n; i++)
        total += (long)es[i].file_size;
    fg_cache_entries_free(es, n);
    return total;
}

static void test_eviction_lru(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE_MAX_MB", "0.02", 1);   /* 20971 bytes, read by the context */
    fg_context *ctx = tu_ctx_empty();
    unsetenv("FUSEGEN_CACHE_MAX_MB");
    char *dir = tu_tmpdir();
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_int_equal(fg_cache_limit(c), (uint64_t)(0.02 * 1024 * 1024));
    char payload[3000] = {1};
    char keys[12][33];
    time_t now = time(NULL);
    for (int i = 0; i < 12; i++) {
        make_key(100 + i, keys[i]);
        assert_int_equal(fg_cache_put(c, keys[i], payload, sizeof payload), FG_OK);
        /* Age the entries so that the order of use is unambiguous. */
        char *p = entry_file(dir, keys[i]);
        if (access(p, F_OK) == 0)
            set_mtime(p, now - 1000 + i * 10);
        free(p);
        assert_true(dir_bytes(c) <= (long)fg_cache_limit(c));
    }
    fg_cache_stats s;
    fg_cache_get_stats(c, &s);
    assert_true(s.evictions >= 5);
    /* The newest entry survives, the oldest is gone. */
    char *newest = entry_file(dir, keys[11]), *oldest = entry_file(dir, keys[0]);
    assert_int_equal(access(newest, F_OK), 0);
    assert_int_equal(access(oldest, F_OK), -1);
    free(newest);
    free(oldest);
    fg_cache_close(c);

    /* A hit refreshes the entry's mtime, so it outlives newer unused ones. */
    fg_cache_entry *es;
    int n = fg_cache_list(c = fg_cache_open(ctx, dir, 0), &es);
    assert_true(n >= 2);
    char lru[33];
    memcpy(lru, es[0].key, 33);   /* oldest use first */
    fg_cache_entries_free(es, n);
    void *d;
    size_t sz;
    assert_int_equal(fg_cache_fetch(c, lru, &d, &sz, NULL), FG_CACHE_DISK);
    free(d);
    fg_cache_close(c);
    c = fg_cache_open(ctx, dir, 20000);
    for (int i = 0; i < 4; i++) {
        char k[33];
        make_key(200 + i, k);
        assert_int_equal(fg_cache_put(c, k, payload, sizeof payload), FG_OK);
    }
    char *p = entry_file(dir, lru);
    assert_int_equal(access(p, F_OK), 0);
    free(p);
    assert_true(dir_bytes(c) <= 20000);
    fg_cache_close(c);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void test_unwritable_dir_degrades(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    /* /dev/null is a file, so nothing below it can ever be created (even by root). */
    fg_cache *c = fg_cache_open(ctx, "/dev/null/fusegen-cache", 0);
    assert_non_null(c);
    assert_null(fg_cache_dir(c));
    assert_int_equal(ctx->nwarnings, 1);
    assert_non_null(strstr(ctx->warnings[0], "/dev/null/fusegen-cache"));
    assert_non_null(strstr(ctx->warnings[0], "memory only"));
    char key[33];
    make_key(3, key);
    assert_int_equal(fg_cache_put(c, key, "abc", 3), FG_OK);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_fetch(c, key, &d, &n, NULL), FG_CACHE_MEMORY);
    assert_memory_equal(d, "abc", 3);
    free(d);
    assert_int_equal(ctx->nwarnings, 1);
    assert_int_equal(fg_context_error_count(ctx), 0);
    fg_cache_close(c);
    fg_context_free(ctx);
}

static void test_write_failure_warns_once(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    char k1[33], k2[33];
    make_key(4, k1);
    make_key(5, k2);
    /* Block the entries' subdirectories with regular files. */
    char sub[3] = {k1[0], k1[1], 0};
    free(tu_write(dir, sub, "blocker"));
    sub[0] = k2[0];
    sub[1] = k2[1];
    free(tu_write(dir, sub, "blocker"));
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    assert_non_null(fg_cache_dir(c));
    assert_int_equal(fg_cache_put(c, k1, "x", 1), FG_OK);
    assert_int_equal(fg_cache_put(c, k2, "y", 1), FG_OK);
    assert_null(fg_cache_dir(c));
    assert_int_equal(ctx->nwarnings, 1);
    void *d;
    size_t n;
    assert_int_equal(fg_cache_fetch(c, k2, &d, &n, NULL), FG_CACHE_MEMORY);
    free(d);
    fg_cache_close(c);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void test_missing_dir_created_and_env(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    char *deep = fg_path_join(dir, "a/b/c");
    fg_cache *c = fg_cache_open(ctx, deep, 0);
    assert_string_equal(fg_cache_dir(c), deep);
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    fg_cache_close(c);

    /* FUSEGEN_CACHE_DIR is the default directory; FUSEGEN_CACHE=off disables
     * disk.  The context reads the environment when it is created. */
    setenv("FUSEGEN_CACHE_DIR", deep, 1);
    fg_context *ectx = tu_ctx_empty();
    c = fg_cache_open(ectx, NULL, 0);
    assert_string_equal(fg_cache_dir(c), deep);
    fg_cache_close(c);
    fg_context_free(ectx);
    setenv("FUSEGEN_CACHE", "off", 1);
    ectx = tu_ctx_empty();
    c = fg_cache_open(ectx, NULL, 0);
    assert_null(fg_cache_dir(c));
    fg_cache_close(c);
    fg_context_free(ectx);
    unsetenv("FUSEGEN_CACHE");
    unsetenv("FUSEGEN_CACHE_DIR");
    char *xdg = fg_path_join(dir, "xdg");
    setenv("XDG_CACHE_HOME", xdg, 1);
    ectx = tu_ctx_empty();
    c = fg_cache_open(ectx, NULL, 0);
    char *want = fg_path_join(xdg, "fusegen");
    assert_string_equal(fg_cache_dir(c), want);
    fg_cache_close(c);
    assert_int_equal(ectx->nwarnings, 0);
    fg_context_free(ectx);
    unsetenv("XDG_CACHE_HOME");
    assert_int_equal(ctx->nwarnings, 0);
    free(want);
    free(xdg);
    free(deep);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

static void test_list_find_clear(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    fg_cache *c = fg_cache_open(ctx, dir, 0);
    char keys[3][33];
    for (int i = 0; i < 3; i++) {
        make_key(300 + i, keys[i]);
        assert_int_equal(fg_cache_put_meta(c, keys[i], "payload", 7, "name=kern\n"), FG_OK);
    }
    fg_cache_entry *es;
    int n = fg_cache_list(c, &es);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) {
        assert_true(es[i].valid);
        assert_int_equal(es[i].payload_size, 7);
        assert_non_null(es[i].meta);
    }
    fg_cache_entries_free(es, n);
    fg_cache_entry e;
    char prefix[9];
    memcpy(prefix, keys[1], 8);
    prefix[8] = 0;
    assert_int_equal(fg_cache_find_entry(c, prefix, &e), 1);
    assert_string_equal(e.key, keys[1]);
    assert_true(e.valid);
    fg_cache_entry_free(&e);
    assert_int_equal(fg_cache_find_entry(c, "0000000000", &e), 0);
    assert_int_equal(fg_cache_find_entry(c, "xyz", &e), 0);
    assert_int_equal(fg_cache_clear(c), 3);
    assert_int_equal(fg_cache_list(c, &es), 0);
    fg_cache_entries_free(es, 0);
    void *d;
    size_t sz;
    assert_int_equal(fg_cache_get(c, keys[0], &d, &sz), 0);
    fg_cache_close(c);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_then_disk_hit),
        cmocka_unit_test(test_truncated_entry),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_empty_entry),
        cmocka_unit_test(test_eviction_lru),
        cmocka_unit_test(test_unwritable_dir_degrades),
        cmocka_unit_test(test_write_failure_warns_once),
        cmocka_unit_test(test_missing_dir_created_and_env),
        cmocka_unit_test(test_list_find_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
