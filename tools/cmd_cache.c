/* cmd_cache.c -- `fusegen cache [--dir DIR] stats [--zero]|ls|clear|explain
 * KEY`: inspect or empty the kernel cache directory and show the per-tier
 * counters; `fusegen cache warm GRAPH...`: compile models ahead of time into
 * the remote cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cache.h"
#include "cache_stats.h"
#include "cli.h"
#include "emit.h"
#include "kcache.h"
#include "remote_cache.h"

#define USAGE                                                                                                          \
    "fusegen cache [--dir DIR] stats [--zero] | ls | clear | explain KEY\n"                                            \
    "       fusegen cache warm GRAPH... [--rules DIR] [--arch sm_XX] [--device cuda|emu] [--jobs N]"

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

/* The remote tier's line of `stats`: where, mode, whether it answers. */
static void remote_stats(fg_context *ctx)
{
    if (!ctx->env.remote_url) {
        printf("remote:       none configured (FUSEGEN_REMOTE_CACHE)\n");
        return;
    }
    fg_remote *r = fg_remote_open(ctx);   /* not the context's: the probe is not counted */
    if (!r) {
        printf("remote:       %s, not used (see the warning above)\n", ctx->env.remote_where);
        return;
    }
    double ms;
    char policy[64], why[320];
    printf("remote:       %s (%s), ", fg_remote_where(r), fg_remote_writable(r) ? "read-write" : "read-only");
    if (fg_remote_probe(r, &ms, policy, sizeof policy, why, sizeof why))
        printf("answers in %.2f ms, maxmemory-policy %s\n", ms, policy[0] ? policy : "not reported");
    else
        printf("not reachable: %s\n", why);
    fg_remote_close(r);
}

/* The directory's per-tier counters (cache_stats.h). */
static void tier_stats(fg_context *ctx, const char *dir)
{
    uint64_t v[FG_TC_COUNT];
    if (fg_cache_stats_read(dir, v) != 0) {
        printf("counters:     unreadable (%s/stats is not the user's own regular file)\n", dir);
        return;
    }
    unsigned long long mem = v[FG_TC_MEMORY_HITS], disk = v[FG_TC_DISK_HITS], rem = v[FG_TC_REMOTE_HITS],
                       comp = v[FG_TC_COMPILED];
    printf("kernels obtained by every process using this directory (fusegen cache stats --zero resets):\n");
    printf("  %-10s %10s %10s\n", "tier", "hits", "misses");
    printf("  %-10s %10llu %10llu\n", "memory", mem, disk + rem + comp);
    printf("  %-10s %10llu %10llu\n", "disk", disk, rem + comp);
    printf("  %-10s %10llu %10llu\n", "remote", rem,
           (unsigned long long)(v[FG_TC_REMOTE_MISSES] + v[FG_TC_REMOTE_REJECTED]));
    printf("  %-10s %10llu\n", "compiled", comp);
    printf("  remote lookups %llu, errors %llu, rejected entries %llu, skipped (breaker open) %llu, stores %llu, "
           "too large to store %llu\n",
           (unsigned long long)v[FG_TC_REMOTE_LOOKUPS], (unsigned long long)v[FG_TC_REMOTE_ERRORS],
           (unsigned long long)v[FG_TC_REMOTE_REJECTED], (unsigned long long)v[FG_TC_REMOTE_SKIPPED],
           (unsigned long long)v[FG_TC_REMOTE_STORES], (unsigned long long)v[FG_TC_REMOTE_OVERSIZED]);
    remote_stats(ctx);
}

static int do_stats(fg_context *ctx, fg_cache *c)
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
    tier_stats(ctx, fg_cache_dir(c));
    return 0;
}

/* ---- warm ------------------------------------------------------------------ */

/* Compiles every kernel of each graph into the remote cache: the context is
 * read-write and has no disk cache, so each kernel is looked up in the remote
 * tier and compiled and stored there when it is absent (or refused). */
static int do_warm(int ngraphs, char **graphs, const char *rules, const char *arch, const char *device,
                   const char *jobs)
{
    fg_options o = {0};
    o.size = sizeof o;
    o.cache_off = 1;
    o.remote_cache_mode = "rw";
    o.arch = arch;
    fg_device dev = FG_DEVICE_CUDA;
    if (device && !strcmp(device, "emu"))
        dev = FG_DEVICE_EMU;
    else if (device && strcmp(device, "cuda"))
        return cli_usage("--device takes cuda or emu, not '%s'", device);
    o.device = dev;
    if (jobs) {
        char *end;
        long j = strtol(jobs, &end, 10);
        if (*end || j < 0 || j > 1024)
            return cli_usage("--jobs takes a number of threads (0: all cores), not '%s'", jobs);
        o.jobs = (int)j;
    }
    int rc;
    fg_context *ctx = cli_context(rules, &o, &rc);
    if (!ctx)
        return rc;
    fg_remote *r = fg_ctx_remote(ctx);
    if (!r) {
        fprintf(stderr, "fusegen: error: cache warm needs a remote cache: set FUSEGEN_REMOTE_CACHE=redis://HOST:PORT/DB "
                        "and FUSEGEN_REMOTE_CACHE_KEY_FILE (a file only you can read)\n");
        fg_context_free(ctx);
        return 1;
    }
    const fg_backend *be = fg_backend_get(dev);
    printf("warming %s for %s (%s)\n", fg_remote_where(r), be->name, arch ? arch : "default target");
    fg_status st = FG_OK;
    int total[FG_JIT_SOURCE_COUNT] = {0};
    for (int gi = 0; gi < ngraphs && rc == 0; gi++) {
        fg_graph *g;
        fg_plan *p;
        rc = cli_load_plan(ctx, graphs[gi], &g, &p);
        if (rc)
            break;
        int n = fg_plan_group_count(p);
        fg_kernel *ks = fg_xcalloc((size_t)(n ? n : 1), sizeof *ks);
        fg_jit_info *infos = fg_xcalloc((size_t)(n ? n : 1), sizeof *infos);
        fg_emit_opts eo = {.specialize = !cli_shape_params};   /* as fg_plan_compile emits them */
        for (int i = 0; i < n && st == FG_OK; i++)
            st = fg_emit_group_guarded(ctx, p, i, &eo, &ks[i]);
        double t0 = fg_now();
        if (st == FG_OK)
            st = fg_kernel_obtain_all(ctx, be, ks, n, arch, infos);
        int count[FG_JIT_SOURCE_COUNT] = {0};
        for (int i = 0; i < n; i++)
            if (ks[i].binary) {
                count[infos[i].from]++;
                total[infos[i].from]++;
            }
        printf("%s: %d kernels: %d compiled, %d already in the remote cache, %d shared with an earlier graph "
               "(%.2f s)\n",
               graphs[gi], n, count[FG_JIT_COMPILED], count[FG_JIT_REMOTE], count[FG_JIT_MEMORY], fg_now() - t0);
        for (int i = 0; i < n; i++)
            fg_kernel_free(&ks[i]);
        free(ks);
        free(infos);
        fg_plan_free(p);
        fg_graph_free(g);
        if (st)
            rc = cli_report(ctx, st);
    }
    fg_remote_stats s;
    fg_remote_get_stats(r, &s);
    if (rc == 0 && (s.errors || s.stores + s.oversized < (uint64_t)total[FG_JIT_COMPILED])) {
        fprintf(stderr, "fusegen: error: the remote cache failed: %llu of %d compiled kernels stored (%llu errors)\n",
                (unsigned long long)s.stores, total[FG_JIT_COMPILED], (unsigned long long)s.errors);
        rc = 1;
    }
    if (rc == 0)
        printf("stored %llu entr%s (%llu too large), %d already there, %llu refused entries replaced\n",
               (unsigned long long)s.stores, s.stores == 1 ? "y" : "ies", (unsigned long long)s.oversized,
               total[FG_JIT_REMOTE], (unsigned long long)s.rejected);
    fg_context_free(ctx);
    return rc;
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
    const char *dir = NULL, *verb = NULL, *key = NULL, *rules = NULL, *arch = NULL, *device = NULL, *jobs = NULL;
    int zero = 0, ngraphs = 0;
    char **graphs = fg_xcalloc((size_t)argc + 1, sizeof *graphs);
    for (int i = 1; i < argc; i++) {
        int m, warm = verb && !strcmp(verb, "warm");
        if ((m = cli_opt(argc, argv, &i, "--dir", &dir)) ||
            (warm && ((m = cli_opt(argc, argv, &i, "--rules", &rules)) || (m = cli_opt(argc, argv, &i, "--arch", &arch)) ||
                      (m = cli_opt(argc, argv, &i, "--device", &device)) ||
                      (m = cli_opt(argc, argv, &i, "--jobs", &jobs))))) {
            if (m < 0) {
                free(graphs);
                return 2;
            }
        } else if (verb && !strcmp(verb, "stats") && !strcmp(argv[i], "--zero")) {
            zero = 1;
        } else if (argv[i][0] == '-') {
            free(graphs);
            return cli_usage(USAGE);
        } else if (!verb) {
            verb = argv[i];
        } else if (warm) {
            graphs[ngraphs++] = argv[i];
        } else if (!key && !strcmp(verb, "explain")) {
            key = argv[i];
        } else {
            free(graphs);
            return cli_usage(USAGE);
        }
    }
    if (verb && !strcmp(verb, "warm")) {
        int rc = ngraphs && !dir ? do_warm(ngraphs, graphs, rules, arch, device, jobs) : cli_usage(USAGE);
        free(graphs);
        return rc;
    }
    free(graphs);
    static const char *const verbs[] = {"stats", "ls", "clear", "explain", "warm"};
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
    } else if (v == 0 && zero) {
        rc = fg_cache_stats_zero(fg_cache_dir(c)) == 0 ? 0 : 1;
        printf(rc ? "cannot reset the counters of %s\n" : "counters of %s reset\n", fg_cache_dir(c));
    } else if (v == 0) {
        rc = do_stats(ctx, c);
    } else if (v == 1) {
        rc = do_ls(c);
    } else if (v == 2) {
        int n = fg_cache_clear(c);
        fg_cache_stats_remove(fg_cache_dir(c));
        printf("removed %d entr%s and the counters from %s\n", n, n == 1 ? "y" : "ies", fg_cache_dir(c));
    } else {
        rc = do_explain(c, key);
    }
    fg_cache_close(c);
    fg_context_free(ctx);
    return rc;
}
