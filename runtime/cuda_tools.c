/*
 * cuda_tools.c -- finding and running cuobjdump and nvdisasm (cuda_tools.h).
 * Commands are started with posix_spawn and an argument vector (no shell),
 * so no path or option is ever parsed as shell text.
 */
#define _GNU_SOURCE
#include "cuda_tools.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "num.h"
#include "util.h"

static const char *const tool_names[] = {"cuobjdump", "nvdisasm"};
FG_STATIC_ASSERT(FG_COUNTOF(tool_names) == FG_TOOL_COUNT, "tool_names out of sync");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *tool_paths[FG_TOOL_COUNT];

const char *fg_cuda_tool_name(fg_cuda_tool t)
{
    return (unsigned)t < FG_TOOL_COUNT ? tool_names[t] : "?";
}

/* "dir/name" when that is an executable regular file, else NULL (malloc'd). */
static char *exe_in(const char *dir, size_t len, const char *name)
{
    if (!dir || len == 0)
        return NULL;
    char path[4096];
    int n = snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return NULL;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || access(path, X_OK) != 0)
        return NULL;
    return fg_xstrdup(path);
}

/* The first directory of a ':'- or newline-separated list holding name. */
static char *search_list(const char *list, const char *seps, const char *name)
{
    for (const char *s = list; s && *s;) {
        size_t len = strcspn(s, seps);
        char *p = exe_in(s, len, name);
        if (p)
            return p;
        s += len;
        s += *s != 0;
    }
    return NULL;
}

/* Python's nvidia/<cuXX>/bin directories (where pip puts the tools), one a
 * line, or NULL. */
static char *python_tool_dirs(void)
{
    static const char script[] =
        "import glob, os, site\n"
        "ds = list(site.getsitepackages()) + [site.getusersitepackages()]\n"
        "for d in sorted(set(p for s in ds for p in glob.glob(os.path.join(s, 'nvidia', '*', 'bin')))):\n"
        "    print(d)\n";
    const char *argv[] = {"python3", "-c", script, NULL};
    char *out = NULL;
    if (fg_run_capture(argv, NULL, &out) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void find_tools(void)
{
    char *py = NULL;
    int py_done = 0;
    const char *env = getenv("FUSEGEN_CUDA_TOOLS");
    if (env && strcmp(env, "off") == 0)
        return;   /* as if none were installed */
    for (int t = 0; t < FG_TOOL_COUNT; t++) {
        const char *name = tool_names[t];
        char *p = env && *env ? search_list(env, ":", name) : NULL;
        if (!p)
            p = search_list(getenv("PATH"), ":", name);
        const char *home = getenv("CUDA_HOME");
        if (!p && home && *home) {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/bin", home);
            p = exe_in(dir, strlen(dir), name);
        }
        if (!p)
            p = exe_in("/usr/local/cuda/bin", strlen("/usr/local/cuda/bin"), name);
        if (!p) {
            if (!py_done) {
                py = python_tool_dirs();
                py_done = 1;
            }
            p = search_list(py, "\n", name);
        }
        tool_paths[t] = p;
    }
    free(py);
}

const char *fg_cuda_tool_path(fg_cuda_tool t)
{
    if ((unsigned)t >= FG_TOOL_COUNT)
        return NULL;
    pthread_once(&once, find_tools);
    return tool_paths[t];
}

int fg_cuda_tool_run(fg_cuda_tool t, const char *const *args, int nargs, const void *cubin, size_t size, char **out)
{
    *out = NULL;
    const char *tool = fg_cuda_tool_path(t);
    if (!tool || nargs < 0 || nargs > 8 || (!cubin && size))
        return -1;
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/fusegen-cubin-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    int written = fg_write_all(fd, cubin, size) == 0;
    close(fd);
    int rc = -1;
    if (written) {
        const char *argv[12];
        int n = 0;
        argv[n++] = tool;
        for (int i = 0; i < nargs; i++)
            argv[n++] = args[i];
        argv[n++] = path;
        argv[n] = NULL;
        rc = fg_run_capture(argv, NULL, out);
    }
    unlink(path);
    return rc;
}
