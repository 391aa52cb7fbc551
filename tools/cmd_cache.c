/* cmd_cache.c -- `fusegen cache [--dir DIR] stats|ls|clear|explain KEY`:
 * inspect or empty the kernel cache directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "cli.h"

#define USAGE "fusegen cache [--dir DIR] stats|ls|clear|explain KEY"

/* "42s", "7m", "3h", "12d" */
static const char *age(int64_t t, char *buf, size_t n)
{
    int64_t s = (int64_t)time(NULL) - t;
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, n, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(buf, n, "%lldm", (long long)(s / 60));
    else if (s < 172800)
        snprintf(buf, n, "%lldh", (long long)(s / 3600));
    else
        snprintf(buf, n, "%lldd", (long long)(s / 86400));
    return buf;
}

static const char *when(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

static int do_stats(fg_cache *c)
{
    fg_cache_entry *es;
    int n = fg_cache_list(c, &es), bad = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        bytes += es[i].file_size;
        bad += !es[i].valid;
    }
    char b1[32], b2[32];
    printf("directory:  %s\n", fg_cache_dir(c));
    printf("entries:    %d (%d invalid)\n", n, bad);
    printf("size:         %.2f MiB of %.2f MiB (%.1f%%)\n", bytes / 1048576.0, fg_cache_limit(c) / 1048576.0,
           fg_cache_limit(c) ? 100.0 * (double)bytes / (double)fg_cache_limit(c) : 0.0);
    if (n)
        printf("last used:    oldest %s ago, newest %s ago\n", age(es[0].mtime, b1, sizeof b1),
               age(es[n - 1].mtime, b2, sizeof b2));
    fg_cache_entries_free(es, n);
    return 0;
}

static int do_ls(fg_cache *c)
{
    fg_cache_entry *es;
    int n = fg_cache_list(c, &es);
    printf("%-32s %10s %6s %-8s %-14s %s\n", "key", "bytes", "used", "format", "arch", "kernel");
    for (int i = 0; i < n; i++) {
        char name[64] = "?", arch[32] = "?", fmt[16] = "?", b[32];
        fg_cache_meta_get(es[i].meta, "name", name, sizeof name);
        fg_cache_meta_get(es[i].meta, "arch", arch, sizeof arch);
        fg_cache_meta_get(es[i].meta, "format", fmt, sizeof fmt);
        if (!es[i].valid)
            snprintf(fmt, sizeof fmt, "INVALID");
        printf("%-32s %10llu %6s %-8s %-14s %s\n", es[i].key, (unsigned long long)es[i].file_size,
               age(es[i].mtime, b, sizeof b), fmt, arch, name);
    }
    printf("%d entr%s\n", n, n == 1 ? "y" : "ies");
    fg_cache_entries_free(es, n);
    return 0;
}

static int do_explain(fg_cache *c, const char *key)
{
    fg_cache_entry e;
    int r = fg_cache_find_entry(c, key, &e);
    if (r < 0) {
        fprintf(stderr, "fusegen: error: key prefix '%s' matches several entries; give more digits\n", key);
        return 2;
    }
    if (r == 0) {
        fprintf(stderr, "fusegen: error: no cache entry '%s' in %s\n", key, fg_cache_dir(c));
        return 1;
    }
    char b1[32], b2[32];
    printf("key:          %s\n", e.key);
    printf("file:         %s\n", e.path);
    printf("size:         %llu bytes on disk, %llu bytes of payload\n", (unsigned long long)e.file_size,
           (unsigned long long)e.payload_size);
    printf("valid:        %s\n", e.valid ? "yes (header and checksum verified)" : "NO (corrupt or truncated; "
                                                                              "it will be recompiled on next use)");
    if (e.valid)
        printf("created:      %s (%s ago)\n", when(e.created, b1, sizeof b1), age(e.created, b2, sizeof b2));
    printf("last used:    %s (%s ago)\n", when(e.mtime, b1, sizeof b1), age(e.mtime, b2, sizeof b2));
    /* The metadata lines ("name=value"); the NVRTC log is stored escaped. */
    for (const char *p = e.meta; p && *p;) {
        const char *eol = strchr(p, '\n');
        int len = eol ? (int)(eol - p) : (int)strlen(p);
        const char *eq = memchr(p, '=', (size_t)len);
        if (eq && eq - p == 3 && !strncmp(p, "log", 3)) {
            if (eq + 1 < p + len) {
                printf("nvrtc log:\n    ");
                for (const char *q = eq + 1; q < p + len; q++) {
                    if (*q == '\\' && q + 1 < p + len) {
                        q++;
                        fputs(*q == 'n' ? "\n    " : (char[]){*q, 0}, stdout);
                    } else {
                        putchar(*q);
                    }
                }
                putchar('\n');
            }
        } else if (eq) {
            char label[32];
            snprintf(label, sizeof label, "%.*s:", (int)(eq - p), p);
            printf("%-13s %.*s\n", label, (int)(p + len - eq - 1), eq + 1);
        }
        p = eol ? eol + 1 : p + len;
    }
    fg_cache_entry_free(&e);
    return 0;
}

int cmd_cache(int argc, char **argv)
{
    const char *dir = NULL, *verb = NULL, *key = NULL;
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "--dir", &dir))) {
            if (m < 0)
                return 2;
        } else if (argv[i][0] == '-') {
            return cli_usage(USAGE);
        } else if (!verb) {
            verb = argv[i];
        } else if (!key && !strcmp(verb, "explain")) {
            key = argv[i];
        } else {
            return cli_usage(USAGE);
        }
    }
    static const char *const verbs[] = {"stats", "ls", "clear", "explain"};
    int v = -1;
    for (int i = 0; verb && i < (int)FG_COUNTOF(verbs); i++)
        if (!strcmp(verb, verbs[i]))
            v = i;
    if (v < 0) {
        const char *s = verb ? fg_suggest(verb, verbs, (int)FG_COUNTOF(verbs)) : NULL;
        if (verb)
            fprintf(stderr, "fusegen: unknown cache command '%s'%s%s%s\n", verb, s ? " (did you mean '" : "",
                    s ? s : "", s ? "'?)" : "");
        return cli_usage(USAGE);
    }
    if (v == 3 && !key)
        return cli_usage(USAGE);
    fg_options o = {0};
    o.no_rules = 1;
    int rc;
    fg_context *ctx = cli_context(NULL, &o, &rc);
    if (!ctx)
        return rc;
    fg_cache *c = fg_cache_open(ctx, dir ? dir : ctx->cache_dir, 0);
    if (!fg_cache_dir(c)) {
        fprintf(stderr, "fusegen: the disk cache is disabled (FUSEGEN_CACHE=off or no usable directory)\n");
        rc = 1;
    } else if (v == 0) {
        rc = do_stats(c);
    } else if (v == 1) {
        rc = do_ls(c);
    } else if (v == 2) {
        int n = fg_cache_clear(c);
        printf("removed %d entr%s from %s\n", n, n == 1 ? "y" : "ies", fg_cache_dir(c));
    } else {
        rc = do_explain(c, key);
    }
    fg_cache_close(c);
    fg_context_free(ctx);
    return rc;
}
