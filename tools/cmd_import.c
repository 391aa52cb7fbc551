/*
 * cmd_import.c -- `fusegen import MODEL.onnx -o GRAPH.yaml [--weights-dir
 * NAME] [--rules DIR] [--dim NAME=N]`: loads an ONNX model (onnx_graph.c) and
 * writes the same graph as YAML (docs/graphs.md) with every weight in a
 * side file, one NumPy .npy file per weight (fp16 weights as '<f2', others
 * as '<f4'), referenced as `file:` relative to the YAML file.
 *
 * Every string in the YAML (names, paths, the comment naming the model) is
 * written by one emitter, put_str: a double-quoted scalar with escapes, so
 * that no name or path can be read as a keyword, a number, a comment or a
 * key.
 *
 * Publishing.  The weights of one import go to a fresh directory NAME.vXXXXXX
 * beside the YAML file (NAME: --weights-dir, default GRAPH.weights) that the
 * YAML names; the YAML is written to a temporary name and renamed over
 * GRAPH.yaml, which is the one step that publishes: an import that stops
 * before it (killed, disk full, a file-size limit) leaves the previous YAML
 * and its weights as they were, one that stops after it the new ones.  Then
 * NAME becomes a symbolic link to the new directory (for people and tools
 * that look for NAME/w.npy; the YAML does not use it) and the directories
 * NAME.vXXXXXX of earlier imports are removed.  On a failure the import
 * removes what it wrote.  Files are created with mode 0666 and directories
 * 0777, less the umask.  One import at a time per output.
 * Exit 0 ok, 1 on an I/O failure, 2 on bad input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "input_file.h"
#include "onnx_load.h"

#define IMPORT_USAGE "fusegen import MODEL.onnx -o GRAPH.yaml [--weights-dir NAME] [--rules DIR] [--dim NAME=N]"

/* Creates path, which must not exist, with mode 0666 less the umask, and
 * writes len bytes of data to it, synced to disk.  0, or -1 with errno (and
 * nothing left at path). */
static int write_new(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto fail;
        p += w;
        len -= (size_t)w;
    }
    if (fsync(fd) != 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    return 0;
fail:;
    int e = errno;
    if (fd >= 0)
        close(fd);
    unlink(path);
    errno = e;
    return -1;
}

/* Six letters or digits, different on each call. */
static void random_tag(char out[7])
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static unsigned long long state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    state ^= (unsigned long long)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (unsigned long long)getpid() << 32 ^
             (unsigned long long)ts.tv_sec;
    for (int i = 0; i < 6; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = abc[(state >> 33) % (sizeof abc - 1)];
    }
    out[6] = 0;
}

/* Whether name is base ".v" and six letters or digits (a weights
 * directory of one import). */
static int is_generation(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".v", 2) != 0 || strlen(name + n + 2) != 6)
        return 0;
    for (const char *p = name + n + 2; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return 0;
    return 1;
}

/* Removes a weights directory of an import: its .npy files, then the
 * directory (left when it holds anything else). */
static void remove_generation(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".npy")) {
            char *p = fg_path_join(dir, e->d_name);
            unlink(p);
            free(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* The .npy file (format 1.0) of weight t: malloc'd, *len bytes. */
static unsigned char *npy_bytes(const fg_tensor *t, size_t *len)
{
    int64_t n = fg_tensor_numel(t);
    int half = t->dtype == FG_DTYPE_F16;
    char shape[160] = "";
    size_t at = 0;
    for (int d = 0; d < t->rank; d++)   /* (a, b), and (a,) for one dimension */
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld%s", d ? ", " : "", (long long)t->shape[d],
                               t->rank == 1 ? "," : "");
    char head[256];
    int hl = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                      half ? "<f2" : "<f4", shape);
    int total = 10 + hl + 1, pad = (64 - total % 64) % 64;
    size_t esz = half ? 2 : 4, bytes = 10 + (size_t)hl + (size_t)pad + 1 + (size_t)n * esz;
    unsigned char *buf = fg_xmalloc(bytes);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    int hlen = hl + pad + 1;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, head, (size_t)hl);
    memset(buf + 10 + hl, ' ', (size_t)pad);
    buf[10 + hl + pad] = '\n';
    float *vals = fg_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    fg_tensor_values(t, vals);
    unsigned char *data = buf + 10 + hl + pad + 1;
    if (half) {
        fg_convert_dtype(vals, FG_DTYPE_F32, data, FG_DTYPE_F16, (size_t)n);
    } else {
        for (int64_t i = 0; i < n; i++) {   /* little-endian whatever the host */
            uint32_t u;
            memcpy(&u, &vals[i], 4);
            for (int b = 0; b < 4; b++)
                data[i * 4 + b] = (unsigned char)(u >> (8 * b));
        }
    }
    free(vals);
    *len = bytes;
    return buf;
}

/* Writes s as a double-quoted YAML scalar: '"' and '\\' escaped, control
 * bytes as \xHH, valid UTF-8 as it is.  Returns 0, or -1 when s is not
 * valid UTF-8 (each stray byte was written as \xHH, which YAML reads as
 * another character: right for a comment, not for a path). */
static int put_str(fg_buf *b, const char *s)
{
    int exact = 0;
    fg_buf_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c = *p;
        int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 2 : (c & 0xf0) == 0xe0 ? 3
              : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 4 : 0;
        for (int k = 1; k < n; k++)
            if ((p[k] & 0xc0) != 0x80)
                n = 0;
        if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
            n = 0;   /* overlong, or a UTF-16 surrogate */
        if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
            n = 0;
        if (c == '"' || c == '\\') {
            fg_buf_printf(b, "\\%c", (char)c);
        } else if (n == 1 && c >= 0x20 && c != 0x7f) {
            fg_buf_putn(b, (const char *)p, 1);
        } else if (n > 1) {
            fg_buf_putn(b, (const char *)p, (size_t)n);
            p += n;
            continue;
        } else {
            fg_buf_printf(b, "\\x%02x", c);
            if (n == 0)
                exact = -1;
        }
        p++;
    }
    fg_buf_put(b, "\"");
    return exact;
}

static void put_attr(fg_buf *b, const fg_attr_value *v)
{
    switch (v->type) {
    case FG_ATTR_INT: fg_buf_printf(b, "%lld", (long long)v->i); break;
    case FG_ATTR_BOOL: fg_buf_put(b, v->i ? "true" : "false"); break;
    case FG_ATTR_FLOAT: {
        char num[40];
        snprintf(num, sizeof num, "%.17g", v->f);
        if (!strpbrk(num, ".eEn"))
            strcat(num, ".0");
        fg_buf_put(b, num);
        break;
    }
    case FG_ATTR_INTS:
        fg_buf_put(b, "[");
        for (int i = 0; i < v->n; i++)
            fg_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v->ints[i]);
        fg_buf_put(b, "]");
        break;
    default:
        if (v->s)
            put_str(b, v->s);
        else
            fg_buf_put(b, "~");
        break;
    }
}

static void put_shape(fg_buf *b, const fg_tensor *t)
{
    fg_buf_put(b, "[");
    for (int d = 0; d < t->rank; d++)
        fg_buf_printf(b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    fg_buf_put(b, "]");
}

/* The YAML text of g, imported from src; weight files are gdir/<name>.npy.
 * Every name and path through put_str.  NULL when gdir is not valid UTF-8
 * (it could not be written exactly). */
static char *graph_yaml(const fg_graph *g, const char *src, const char *gdir)
{
    fg_buf b = {0};
    fg_dtype dt = g->ninputs ? g->tensors[g->inputs[0]].dtype : FG_DTYPE_F32;
    fg_buf_put(&b, "# Imported from ");
    put_str(&b, src);
    fg_buf_put(&b, " by fusegen import; weights in ");
    int exact = put_str(&b, gdir);
    fg_buf_put(&b, ".\ngraph: ");
    put_str(&b, g->name);
    fg_buf_printf(&b, "\ndtype: %s\ninputs:\n", fg_dtype_name(dt));
    for (int i = 0; i < g->ninputs; i++) {
        const fg_tensor *t = &g->tensors[g->inputs[i]];
        fg_buf_put(&b, "  - { name: ");
        put_str(&b, t->name);
        fg_buf_put(&b, ", shape: ");
        put_shape(&b, t);
        if (t->dtype != dt)
            fg_buf_printf(&b, ", dtype: %s", fg_dtype_name(t->dtype));
        fg_buf_put(&b, " }\n");
    }
    int nw = 0;
    for (int i = 0; i < g->ntensors; i++) {
        const fg_tensor *t = &g->tensors[i];
        if (!t->is_weight)
            continue;
        fg_buf_printf(&b, "%s  - { name: ", nw++ ? "" : "weights:\n");
        put_str(&b, t->name);
        fg_buf_put(&b, ", shape: ");
        put_shape(&b, t);
        if (t->dtype != dt)
            fg_buf_printf(&b, ", dtype: %s", fg_dtype_name(t->dtype));
        fg_buf_put(&b, ", file: ");
        char *f = fg_xmalloc(strlen(gdir) + strlen(t->name) + 6);
        sprintf(f, "%s/%s.npy", gdir, t->name);
        put_str(&b, f);
        free(f);
        fg_buf_put(&b, " }\n");
    }
    fg_buf_put(&b, "nodes:\n");
    for (int i = 0; i < g->nnodes; i++) {
        const fg_node *n = &g->nodes[i];
        fg_buf_put(&b, "  - { name: ");
        put_str(&b, n->name);
        fg_buf_put(&b, ", op: ");
        put_str(&b, n->op->name);
        fg_buf_put(&b, ", inputs: [");
        int last = n->ninputs - 1;
        while (last > 0 && n->inputs[last] < 0)
            last--;
        for (int j = 0; j <= last; j++) {
            if (j)
                fg_buf_put(&b, ", ");
            if (n->inputs[j] >= 0)
                put_str(&b, g->tensors[n->inputs[j]].name);
            else
                fg_buf_put(&b, "~");
        }
        fg_buf_put(&b, "]");
        if (n->op->nattrs) {
            fg_buf_put(&b, ", attrs: { ");
            for (int a = 0; a < n->op->nattrs; a++) {   /* keys: the op's attribute names, identifiers */
                fg_buf_printf(&b, "%s%s: ", a ? ", " : "", n->op->attrs[a].name);
                put_attr(&b, &n->attrs[a]);
            }
            fg_buf_put(&b, " }");
        }
        if (strcmp(g->tensors[n->output].name, n->name) != 0) {
            fg_buf_put(&b, ", output: ");
            put_str(&b, g->tensors[n->output].name);
        }
        fg_buf_put(&b, " }\n");
    }
    fg_buf_put(&b, "outputs: [");
    for (int i = 0; i < g->noutputs; i++) {
        if (i)
            fg_buf_put(&b, ", ");
        put_str(&b, g->tensors[g->outputs[i]].name);
    }
    fg_buf_put(&b, "]\n");
    if (exact != 0) {
        fg_buf_free(&b);
        return NULL;
    }
    return fg_buf_take(&b);
}

/* fsync of a directory, so that the names made in it last (best effort:
 * some file systems refuse). */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Writes g's weights into a fresh directory wname.vXXXXXX (relative to
 * ydir) and its YAML to out, then points wname at that directory and
 * removes the directories of earlier imports (the file-top comment).
 * Returns the exit code: 0, 1 after an I/O failure (what it wrote
 * removed), 2 for a name that YAML cannot hold. */
static int publish(const fg_graph *g, const char *model, const char *out, const char *ydir, const char *wname)
{
    char *wpath = fg_path_join(ydir, wname), *wslash = strrchr(wpath, '/');
    char *wparent = fg_xstrndup(wpath, wslash ? (size_t)(wslash - wpath) : 0);
    const char *wbase = wslash ? wslash + 1 : wpath;
    int rc = 0;
    if (*wparent && fg_mkdir_p(wparent, 0777) != 0) {
        fprintf(stderr, "fusegen: cannot create %s: %s\n", wparent, strerror(errno));
        free(wpath);
        free(wparent);
        return 1;
    }
    /* the fresh weights directory */
    char tag[7];
    fg_buf gname = {0};
    char *gpath = NULL;
    for (int tries = 0; !gpath && tries < 100; tries++) {
        random_tag(tag);
        gname.len = 0;
        fg_buf_printf(&gname, "%s.v%s", wname, tag);
        gpath = fg_path_join(ydir, gname.s);
        if (mkdir(gpath, 0777) != 0) {
            int e = errno;
            free(gpath);
            gpath = NULL;
            if (e != EEXIST) {
                fprintf(stderr, "fusegen: cannot create a directory beside %s: %s\n", wpath, strerror(e));
                break;
            }
        }
    }
    if (!gpath) {
        free(wpath);
        free(wparent);
        fg_buf_free(&gname);
        return 1;
    }
    int nw = 0;
    for (int i = 0; rc == 0 && i < g->ntensors; i++) {
        const fg_tensor *t = &g->tensors[i];
        if (!t->is_weight)
            continue;
        char *file = fg_xmalloc(strlen(t->name) + 5);
        sprintf(file, "%s.npy", t->name);
        char *p = fg_path_join(gpath, file);
        size_t len;
        unsigned char *buf = npy_bytes(t, &len);
        if (write_new(p, buf, len) != 0) {
            fprintf(stderr, "fusegen: cannot write %s: %s\n", p, strerror(errno));
            rc = 1;
        }
        free(buf);
        free(p);
        free(file);
        nw++;
    }
    char *ytmp = NULL;
    if (rc == 0) {
        sync_dir(gpath);
        char *y = graph_yaml(g, model, gname.s);
        if (!y) {
            fprintf(stderr, "fusegen: the weights directory name of %s is not valid UTF-8, which YAML cannot hold; "
                            "give --weights-dir\n", out);
            rc = 2;
        }
        ytmp = fg_xmalloc(strlen(out) + 16);
        sprintf(ytmp, "%s.tmp.%s", out, tag);
        if (rc == 0 && write_new(ytmp, y, strlen(y)) != 0) {
            fprintf(stderr, "fusegen: cannot write %s: %s\n", ytmp, strerror(errno));
            rc = 1;
        } else if (rc == 0 && rename(ytmp, out) != 0) {   /* the step that publishes */
            fprintf(stderr, "fusegen: cannot write %s: %s\n", out, strerror(errno));
            unlink(ytmp);
            rc = 1;
        }
        free(y);
    }
    if (rc != 0) {
        remove_generation(gpath);
    } else {
        sync_dir(ydir);
        /* wname -> the new directory, for people; then earlier imports' directories go */
        char *ltmp = fg_xmalloc(strlen(wpath) + 16), *target = fg_xmalloc(strlen(wbase) + 16);
        sprintf(ltmp, "%s.tmp.%s", wpath, tag);
        sprintf(target, "%s.v%s", wbase, tag);
        if (symlink(target, ltmp) != 0 || rename(ltmp, wpath) != 0) {
            int e = errno;
            unlink(ltmp);
            fprintf(stderr, "fusegen: note: %s was not made a link to %s (%s); the graph does not need it\n", wpath,
                    gpath, strerror(e));
        }
        free(ltmp);
        DIR *d = opendir(*wparent ? wparent : ".");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (is_generation(e->d_name, wbase) && strcmp(e->d_name, target) != 0) {
                char *old = *wparent ? fg_path_join(wparent, e->d_name) : fg_xstrdup(e->d_name);
                remove_generation(old);
                free(old);
            }
        }
        if (d)
            closedir(d);
        free(target);
        printf("import %s: %d nodes, %d inputs, %d outputs, %d weights -> %s (weights in %s/)\n", model, g->nnodes,
               g->ninputs, g->noutputs, nw, out, gpath);
    }
    free(ytmp);
    free(gpath);
    free(wpath);
    free(wparent);
    fg_buf_free(&gname);
    return rc;
}

/* NAME for --weights-dir: a plain relative directory name below the YAML's. */
static int weights_dir_ok(const char *s)
{
    if (!*s || s[0] == '/' || fg_has_control_chars(s))
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '.' || *p == '-' || *p == '/'))
            return 0;
    return strstr(s, "..") == NULL;
}

int cmd_import(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *rules = NULL, *wname = NULL;
    for (int i = 1; i < argc; i++) {
        int m;
        if ((m = cli_opt(argc, argv, &i, "-o", &out)) || (m = cli_opt(argc, argv, &i, "--rules", &rules)) ||
            (m = cli_opt(argc, argv, &i, "--weights-dir", &wname))) {
            if (m < 0)
                return 2;
        } else if (argv[i][0] == '-' || model) {
            return cli_usage(IMPORT_USAGE);
        } else {
            model = argv[i];
        }
    }
    if (!model || !out)
        return cli_usage(IMPORT_USAGE);
    /* weights directory: beside the YAML file */
    char *ydir = fg_xstrdup(out), *slash = strrchr(ydir, '/');
    const char *base = slash ? slash + 1 : out;
    if (slash)
        slash[slash == ydir ? 1 : 0] = 0;
    else
        strcpy(ydir, ".");
    fg_buf wd = {0};
    if (wname) {
        if (!weights_dir_ok(wname)) {
            free(ydir);
            return cli_usage("--weights-dir takes a relative directory name without '..' (letters, digits, "
                             "'_', '.', '-', '/'), not '%s'", wname);
        }
        fg_buf_put(&wd, wname);
    } else {
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".yaml"))
            n -= 5;
        else if (n > 4 && !strcmp(base + n - 4, ".yml"))
            n -= 4;
        fg_buf_printf(&wd, "%.*s.weights", (int)n, base);
    }
    int rc;
    fg_context *ctx = cli_context(rules, NULL, &rc);
    if (!ctx) {
        free(ydir);
        fg_buf_free(&wd);
        return rc;
    }
    fg_graph *g = NULL;
    fg_status st = fg_graph_load_onnx(ctx, model, cli_onnx_options(), &g);
    if (st != FG_OK) {
        rc = cli_report(ctx, st);
        goto done;
    }
    rc = publish(g, model, out, ydir, wd.s);
done:
    fg_graph_free(g);
    fg_context_free(ctx);
    free(ydir);
    fg_buf_free(&wd);
    return rc;
}
