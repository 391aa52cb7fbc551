/*
 * driver.c -- a standalone main for the fuzz targets, for builds without
 * libFuzzer: runs LLVMFuzzerTestOneInput once on every file named on the
 * command line and on every regular file directly inside a directory named
 * there (sorted by name; subdirectories such as crashes-<target>/ are not
 * entered).  Each input is passed in a buffer of exactly its size, so
 * sanitizers catch reads past its end.  Exits 0 when every input ran (a
 * failed check aborts), 1 when an input could not be read, 2 when none ran.
 *
 * `--make-seeds DIR` instead asks the target to write its generated seed
 * inputs into DIR (targets whose seeds are binary define fz_make_seeds).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: writes generated seeds into dir; returns how many. */
__attribute__((weak)) int fz_make_seeds(const char *dir);

/* Runs the target on one file; returns 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += r;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    fprintf(stderr, "running %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int ran = 0, bad = 0;
    if (argc == 3 && strcmp(argv[1], "--make-seeds") == 0) {
        if (!fz_make_seeds) {
            fprintf(stderr, "this target has no generated seeds\n");
            return 2;
        }
        int n = fz_make_seeds(argv[2]);
        fprintf(stderr, "%d seed(s) written to %s\n", n, argv[2]);
        return n > 0 ? 0 : 1;
    }
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "%s: %s\n", argv[a], strerror(errno));
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[a]) != 0;
            ran++;
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "%s: %s\n", argv[a], strerror(errno));
            bad = 1;
            continue;
        }
        char **names = NULL;
        int nn = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            if (nn == cap)
                names = realloc(names, sizeof *names * (size_t)(cap = cap ? 2 * cap : 64));
            names[nn++] = strdup(e->d_name);
        }
        closedir(d);
        if (nn)
            qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int i = 0; i < nn; i++) {
            size_t len = strlen(argv[a]) + strlen(names[i]) + 2;
            char *path = malloc(len);
            snprintf(path, len, "%s/%s", argv[a], names[i]);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                bad |= run_file(path) != 0;
                ran++;
            }
            free(path);
            free(names[i]);
        }
        free(names);
    }
    fprintf(stderr, "%d input(s) run\n", ran);
    if (bad)
        return 1;
    return ran ? 0 : 2;
}
