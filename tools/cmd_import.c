/*
 * cmd_import.c -- `fusegen import MODEL.onnx -o GRAPH.yaml [--weights-dir
 * NAME] [--rules DIR] [--dim NAME=N]`: loads an ONNX model (onnx_load.c) and
 * writes the same graph as YAML (docs/graphs.md) with every weight in a
 * side file, one NumPy .npy file per weight (fp16 weights as '<f2', others
 * as '<f4'), referenced as `file:` relative to the YAML file.  The weights go
 * to the directory NAME beside the YAML file (default: GRAPH.weights).
 * Exit 0 ok, 1 on an I/O failure, 2 on bad input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "input_file.h"
#include "onnx_load.h"

#define IMPORT_USAGE "fusegen import MODEL.onnx -o GRAPH.yaml [--weights-dir NAME] [--rules DIR] [--dim NAME=N]"

/* Writes the values of weight t to path as a .npy file (format 1.0). */
static int write_npy(const fg_tensor *t, const char *path)
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
    int rc = fg_write_file_atomic(path, buf, bytes);
    free(vals);
    free(buf);
    return rc;
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
    default: fg_buf_printf(b, "%s", v->s ? v->s : "~"); break;
    }
}

static void put_shape(fg_buf *b, const fg_tensor *t)
{
    fg_buf_put(b, "[");
    for (int d = 0; d < t->rank; d++)
        fg_buf_printf(b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    fg_buf_put(b, "]");
}

/* The YAML text of g; weight files are wdir/<name>.npy. */
static char *graph_yaml(const fg_graph *g, const char *src, const char *wdir)
{
    fg_buf b = {0};
    fg_dtype dt = g->ninputs ? g->tensors[g->inputs[0]].dtype : FG_DTYPE_F32;
    fg_buf_printf(&b, "# Imported from %s by fusegen import; weights in %s/.\n", src, wdir);
    fg_buf_printf(&b, "graph: %s\ndtype: %s\ninputs:\n", g->name, fg_dtype_name(dt));
    for (int i = 0; i < g->ninputs; i++) {
        const fg_tensor *t = &g->tensors[g->inputs[i]];
        fg_buf_printf(&b, "  - { name: %s, shape: ", t->name);
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
        fg_buf_printf(&b, "%s  - { name: %s, shape: ", nw++ ? "" : "weights:\n", t->name);
        put_shape(&b, t);
        if (t->dtype != dt)
            fg_buf_printf(&b, ", dtype: %s", fg_dtype_name(t->dtype));
        fg_buf_printf(&b, ", file: %s/%s.npy }\n", wdir, t->name);
    }
    fg_buf_put(&b, "nodes:\n");
    for (int i = 0; i < g->nnodes; i++) {
        const fg_node *n = &g->nodes[i];
        fg_buf_printf(&b, "  - { name: %s, op: %s, inputs: [", n->name, n->op->name);
        int last = n->ninputs - 1;
        while (last > 0 && n->inputs[last] < 0)
            last--;
        for (int j = 0; j <= last; j++)
            fg_buf_printf(&b, "%s%s", j ? ", " : "", n->inputs[j] >= 0 ? g->tensors[n->inputs[j]].name : "~");
        fg_buf_put(&b, "]");
        if (n->op->nattrs) {
            fg_buf_put(&b, ", attrs: { ");
            for (int a = 0; a < n->op->nattrs; a++) {
                fg_buf_printf(&b, "%s%s: ", a ? ", " : "", n->op->attrs[a].name);
                put_attr(&b, &n->attrs[a]);
            }
            fg_buf_put(&b, " }");
        }
        if (strcmp(g->tensors[n->output].name, n->name) != 0)
            fg_buf_printf(&b, ", output: %s", g->tensors[n->output].name);
        fg_buf_put(&b, " }\n");
    }
    fg_buf_put(&b, "outputs: [");
    for (int i = 0; i < g->noutputs; i++)
        fg_buf_printf(&b, "%s%s", i ? ", " : "", g->tensors[g->outputs[i]].name);
    fg_buf_put(&b, "]\n");
    return fg_buf_take(&b);
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
    char *wpath = fg_path_join(ydir, wd.s);
    if (fg_mkdir_p(wpath, 0755) != 0) {
        fprintf(stderr, "fusegen: cannot create %s: %s\n", wpath, strerror(errno));
        rc = 1;
    }
    int nw = 0;
    for (int i = 0; rc == 0 && i < g->ntensors; i++) {
        const fg_tensor *t = &g->tensors[i];
        if (!t->is_weight)
            continue;
        char file[512];
        snprintf(file, sizeof file, "%s.npy", t->name);
        char *p = fg_path_join(wpath, file);
        if (write_npy(t, p) != 0) {
            fprintf(stderr, "fusegen: cannot write %s: %s\n", p, strerror(errno));
            rc = 1;
        }
        free(p);
        nw++;
    }
    if (rc == 0) {
        char *y = graph_yaml(g, model, wd.s);
        if (fg_write_file_atomic(out, y, strlen(y)) != 0) {
            fprintf(stderr, "fusegen: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        } else {
            printf("import %s: %d nodes, %d inputs, %d outputs, %d weights -> %s (weights in %s/)\n", model,
                   g->nnodes, g->ninputs, g->noutputs, nw, out, wpath);
        }
        free(y);
    }
    free(wpath);
done:
    fg_graph_free(g);
    fg_context_free(ctx);
    free(ydir);
    fg_buf_free(&wd);
    return rc;
}
