/*
 * fuzz_cache.c -- fuzz target for the kernel cache's disk entry loader
 * (runtime/cache.c).
 *
 * Input: one flags byte, then the bytes of an entry file.  The file is
 * planted where the cache keeps the entry of a fixed key
 * (<dir>/<key[0..2)>/<key>.fgk) in a private cache directory, and a freshly
 * opened cache (empty memory table) lists it and looks the key up.  Flags,
 * so that mutations get past the checks a random file never passes and
 * reach the trust checks:
 *   bit 0  store the correct XXH3-128 of bytes 0..64 and 80.. at offset 64
 *          (the checksum, applied after bit 1)
 *   bit 1  store the fixed key at offset 32
 *   bit 2  look up with fg_cache_fetch and metadata (else fg_cache_get)
 *   bit 3  make the file writable by group (bit 6 clear) or others (bit 6 set)
 *   bit 4  plant a symbolic link to a file holding the bytes (outside the
 *          cache) instead of the file itself
 *   bit 5  plant a FIFO instead (bits 3 and 4 ignored)
 * Checks: no crash, no hang, no over-read, no leak, and
 *   - a hit returns exactly what the file's header claims: the header is
 *     well-formed (magic, version 2, header size, key), 80 + meta + payload
 *     sizes add up to the file size, the checksum over the header fields,
 *     metadata and payload matches, and the returned payload (and metadata)
 *     are the file's bytes;
 *   - a planted symlink, FIFO or group/other-writable file is never a hit: it
 *     is removed (the symlink's target is left alone) and counted as refused;
 *   - any other miss removes the file and counts it as corrupt;
 *   - fg_cache_list saw the entry as valid exactly when the lookup hit;
 *   - a hit is then served from memory with the same bytes.
 */
#include "fuzz_common.h"

#include <xxhash.h>

#include "cache.h"
#include "context.h"
#include "util.h"

#define KEY "0123456789abcdef0123456789abcdef"
#define HDR 80u
#define SUM 64u      /* offset of the checksum */
#define KEYOFF 32u   /* offset of the key */
#define RENEW 1024   /* inputs per context (its warnings accumulate) */

static fg_context *g_ctx;
static int g_runs;
static char *g_dir;      /* the private cache directory */
static char *g_path;     /* where the entry of KEY lives */
static char *g_target;   /* outside the cache: what a planted symlink points at */

static void at_exit_free(void)
{
    fg_context_free(g_ctx);
    g_ctx = NULL;
}

static void new_context(void)
{
    fg_context_free(g_ctx);
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&g_ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    g_ctx->quiet = 1;
}

static void init_once(void)
{
    if (g_dir)
        return;
    unsetenv("FUSEGEN_CACHE");
    new_context();
    atexit(at_exit_free);
    g_dir = fz_tmpdir("cache");
    size_t n = strlen(g_dir) + 64;
    char *sub = malloc(n);
    snprintf(sub, n, "%s/%.2s", g_dir, KEY);
    if (mkdir(sub, 0700) != 0 && errno != EEXIST)
        FZ_FAIL("mkdir %s: %s", sub, strerror(errno));
    free(sub);
    g_path = malloc(n);
    snprintf(g_path, n, "%s/%.2s/%s.fgk", g_dir, KEY, KEY);
    char *outside = fz_tmpdir("outside");
    n = strlen(outside) + 16;
    g_target = malloc(n);
    snprintf(g_target, n, "%s/target", outside);
    free(outside);
}

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The format's checksum of an entry of n >= HDR bytes. */
static XXH128_hash_t entry_sum(const uint8_t *f, size_t n)
{
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, f, SUM);
    XXH3_128bits_update(st, f + HDR, n - HDR);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* Whether the file bytes f[0..n) are an entry of KEY the cache must accept. */
static int entry_is_valid(const uint8_t *f, size_t n)
{
    if (n < HDR || memcmp(f, "FGKC", 4) != 0 || le32(f + 4) != 2 || le32(f + 8) != HDR)
        return 0;
    if (memcmp(f + KEYOFF, KEY, 32) != 0)
        return 0;
    uint64_t ms = le32(f + 12), ps = le64(f + 16);
    if (ps > n || ms > n || HDR + ms + ps != n)
        return 0;
    XXH128_hash_t h = entry_sum(f, n);
    return h.low64 == le64(f + SUM) && h.high64 == le64(f + SUM + 8);
}

static int exists_nofollow(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    if (++g_runs % RENEW == 0)
        new_context();
    unsigned flags = size ? data[0] : 0;
    size_t n = size ? size - 1 : 0;
    uint8_t *f = malloc(n ? n : 1);
    if (n)
        memcpy(f, data + 1, n);
    if ((flags & 2) && n >= HDR)
        memcpy(f + KEYOFF, KEY, 32);
    if ((flags & 1) && n >= HDR) {
        XXH128_hash_t h = entry_sum(f, n);
        put64(f + SUM, h.low64);
        put64(f + SUM + 8, h.high64);
    }
    /* How the entry is planted: 0 a private file, 1 a group/other-writable
     * file, 2 a symlink to a private file outside the cache, 3 a FIFO. */
    int how = (flags & 32) ? 3 : (flags & 16) ? 2 : (flags & 8) ? 1 : 0;
    unlink(g_path);
    if (how == 3) {
        if (mkfifo(g_path, 0600) != 0)
            FZ_FAIL("mkfifo %s: %s", g_path, strerror(errno));
    } else if (how == 2) {
        fz_write_file(g_target, f, n);
        if (symlink(g_target, g_path) != 0)
            FZ_FAIL("symlink %s: %s", g_path, strerror(errno));
    } else {
        fz_write_file(g_path, f, n);
        if (how == 1 && chmod(g_path, (flags & 64) ? 0602 : 0620) != 0)
            FZ_FAIL("chmod %s: %s", g_path, strerror(errno));
    }
    int valid = how == 0 && entry_is_valid(f, n);

    fg_cache *c = fg_cache_open(g_ctx, g_dir, (uint64_t)1 << 40);
    if (!fg_cache_dir(c))
        FZ_FAIL("the cache did not open its directory %s", g_dir);

    fg_cache_entry *es;
    int ne = fg_cache_list(c, &es);
    if (ne != 1 || strcmp(es[0].key, KEY) != 0)
        FZ_FAIL("fg_cache_list found %d entries, expected the one of " KEY, ne);
    if (es[0].valid != valid)
        FZ_FAIL("fg_cache_list says valid=%d, expected %d (planted as %d)", es[0].valid, valid, how);
    if (how < 2 && es[0].file_size != n)
        FZ_FAIL("fg_cache_list file_size %llu, file has %zu bytes", (unsigned long long)es[0].file_size, n);
    if (valid && es[0].payload_size != le64(f + 16))
        FZ_FAIL("fg_cache_list payload_size %llu, header says %llu", (unsigned long long)es[0].payload_size,
                (unsigned long long)le64(f + 16));
    fg_cache_entries_free(es, ne);

    void *got = NULL;
    size_t gsize = 0;
    char *meta = NULL;
    int hit;
    if (flags & 4)
        hit = fg_cache_fetch(c, KEY, &got, &gsize, &meta) == FG_CACHE_DISK;
    else
        hit = fg_cache_get(c, KEY, &got, &gsize);

    fg_cache_stats st;
    fg_cache_get_stats(c, &st);
    if (hit != valid)
        FZ_FAIL("lookup %s an entry that is %s (planted as %d)", hit ? "hit" : "missed", valid ? "valid" : "invalid",
                how);
    if (hit) {
        uint32_t ms = le32(f + 12);
        uint64_t ps = le64(f + 16);
        if (gsize != ps)
            FZ_FAIL("hit returned %zu bytes, header says %llu", gsize, (unsigned long long)ps);
        if (ps && memcmp(got, f + HDR + ms, ps) != 0)
            FZ_FAIL("hit returned bytes that differ from the file's payload");
        if (flags & 4) {
            size_t ml = strnlen((const char *)f + HDR, ms);
            if (ms && !meta)
                FZ_FAIL("entry has %u bytes of metadata, fetch returned none", ms);
            if (meta && (strlen(meta) != ml || memcmp(meta, f + HDR, ml) != 0))
                FZ_FAIL("fetch returned metadata that differs from the file's");
        }
        if (st.disk_hits != 1 || st.corrupt != 0 || st.refused != 0)
            FZ_FAIL("hit counted as disk_hits=%llu corrupt=%llu refused=%llu", (unsigned long long)st.disk_hits,
                    (unsigned long long)st.corrupt, (unsigned long long)st.refused);
        void *again = NULL;
        size_t asize = 0;
        if (fg_cache_fetch(c, KEY, &again, &asize, NULL) != FG_CACHE_MEMORY)
            FZ_FAIL("a disk hit was not kept in memory");
        if (asize != gsize || (asize && memcmp(again, got, asize) != 0))
            FZ_FAIL("the memory hit differs from the disk hit");
        free(again);
    } else {
        if (got || gsize)
            FZ_FAIL("a miss returned data (%p, %zu bytes)", got, gsize);
        if (exists_nofollow(g_path))
            FZ_FAIL("a %s entry was not removed", how ? "planted" : "corrupt");
        if (st.misses != 1 || st.corrupt != (how == 0) || st.refused != (how != 0))
            FZ_FAIL("miss (planted as %d) counted as corrupt=%llu refused=%llu misses=%llu", how,
                    (unsigned long long)st.corrupt, (unsigned long long)st.refused, (unsigned long long)st.misses);
        if (how == 2) {
            size_t tn = 0;
            char *t = fg_read_file(g_target, &tn);
            if (!t || tn != n || (n && memcmp(t, f, n) != 0))
                FZ_FAIL("the target of a planted symlink was changed or removed");
            free(t);
        }
    }
    free(got);
    free(meta);
    fg_cache_close(c);
    unlink(g_path);
    unlink(g_target);
    free(f);
    return 0;
}

/* ---- seeds --------------------------------------------------------------
 * fz_make_seeds (driver.c --make-seeds DIR) writes seed inputs made by the
 * cache itself: entries stored with fg_cache_put / fg_cache_put_meta under
 * KEY, then truncated, bit-flipped, with a forged size and a wrong key,
 * planted with a wrong mode, as a symlink or as a FIFO, and one entry of the
 * old format 1; each with the flags byte in front. */

int fz_make_seeds(const char *out);

/* Stores payload (+ meta) under KEY in a scratch cache and returns the entry
 * file's bytes (malloc'd). */
static uint8_t *make_entry(const char *payload, size_t psize, const char *meta, size_t *n)
{
    char *dir = fz_tmpdir("seedcache");
    fg_cache *c = fg_cache_open(g_ctx, dir, (uint64_t)1 << 40);
    if (fg_cache_put_meta(c, KEY, payload, psize, meta) != FG_OK)
        FZ_FAIL("fg_cache_put_meta failed");
    fg_cache_close(c);
    size_t len = strlen(dir) + 64;
    char *path = malloc(len);
    snprintf(path, len, "%s/%.2s/%s.fgk", dir, KEY, KEY);
    char *text = fg_read_file(path, n);
    if (!text)
        FZ_FAIL("no entry file at %s", path);
    unlink(path);
    free(path);
    free(dir);
    return (uint8_t *)text;
}

static int write_seed(const char *out, const char *name, unsigned flags, const uint8_t *f, size_t n)
{
    size_t len = strlen(out) + strlen(name) + 2;
    char *path = malloc(len);
    snprintf(path, len, "%s/%s", out, name);
    uint8_t *b = malloc(n + 1);
    b[0] = (uint8_t)flags;
    memcpy(b + 1, f, n);
    fz_write_file(path, b, n + 1);
    free(b);
    free(path);
    return 1;
}

int fz_make_seeds(const char *out)
{
    init_once();
    static const char src[] = "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }\n";
    size_t n, nm;
    uint8_t *f = make_entry(src, sizeof src - 1, NULL, &n);
    uint8_t *fm = make_entry(src, sizeof src - 1, "name=k\narch=sm_90\nversion=0.1.0\nlog=\n", &nm);
    uint8_t *fe = NULL;
    size_t ne;
    fe = make_entry("", 0, NULL, &ne);
    int k = 0;
    k += write_seed(out, "valid", 0, f, n);
    k += write_seed(out, "valid_meta", 4, fm, nm);
    k += write_seed(out, "valid_empty_payload", 4, fe, ne);
    k += write_seed(out, "truncated_header", 0, f, 40);
    k += write_seed(out, "truncated_payload", 0, f, n - 5);
    k += write_seed(out, "truncated_payload_fixed_sum", 1, fm, nm - 5);
    k += write_seed(out, "empty_file", 0, f, 0);
    uint8_t *g = malloc(nm);
    memcpy(g, fm, nm);
    g[HDR + 3] ^= 0x20;   /* a flipped metadata byte */
    k += write_seed(out, "flipped_meta", 4, g, nm);
    memcpy(g, fm, nm);
    g[nm - 1] ^= 0x01;    /* a flipped payload byte */
    k += write_seed(out, "flipped_payload", 0, g, nm);
    memcpy(g, fm, nm);
    put64(g + 16, (uint64_t)-1);   /* payload size wraps the sum */
    k += write_seed(out, "huge_payload_size", 1, g, nm);
    memcpy(g, fm, nm);
    g[12] = 0xff, g[13] = 0xff, g[14] = 0xff, g[15] = 0xff;   /* metadata size 4 GiB */
    k += write_seed(out, "huge_meta_size", 1, g, nm);
    memcpy(g, fm, nm);
    g[KEYOFF] = 'f';      /* someone else's key, checksum fixed (a rekeyed entry) */
    k += write_seed(out, "wrong_key", 1, g, nm);
    memcpy(g, fm, nm);
    g[KEYOFF] = 'f';      /* a rekeyed entry whose checksum was left alone */
    k += write_seed(out, "rekeyed_stale_sum", 0, g, nm);
    memcpy(g, fm, nm);
    g[4] = 3;             /* a future format version */
    k += write_seed(out, "future_version", 1, g, nm);
    memcpy(g, fm, nm);
    g[8] = 96;            /* a larger header */
    k += write_seed(out, "header_size_96", 1, g, nm);
    memcpy(g, fm, nm);
    memcpy(g, "FGKX", 4);
    k += write_seed(out, "bad_magic", 3, g, nm);
    /* Valid entries planted the ways the trust checks refuse. */
    k += write_seed(out, "planted_group_writable", 4 | 8, fm, nm);
    k += write_seed(out, "planted_other_writable", 4 | 8 | 64, fm, nm);
    k += write_seed(out, "planted_symlink", 4 | 16, fm, nm);
    k += write_seed(out, "planted_fifo", 32, fm, nm);
    /* A valid entry of format 1 (the key outside the checksum): a miss. */
    uint8_t *v1 = calloc(1, nm);
    size_t ms1 = le32(fm + 12);
    memcpy(v1, "FGKC", 4);
    v1[4] = 1;
    put64(v1 + 8, le64(fm + 16));
    v1[32] = (uint8_t)ms1;
    v1[36] = HDR;
    memcpy(v1 + 40, KEY, 32);
    memcpy(v1 + HDR, fm + HDR, nm - HDR);
    fg_hash128 h1 = fg_hash128_of(v1 + HDR, nm - HDR);
    put64(v1 + 16, h1.lo);
    put64(v1 + 24, h1.hi);
    k += write_seed(out, "format_1", 4, v1, nm);
    free(v1);
    free(g);
    free(f);
    free(fm);
    free(fe);
    return k;
}
