/*
 * rules_dir.c -- fg_rules_load: loads a rules directory.  Order: the op
 * definitions and template variants of every *.yaml (sorted by name), then every *.lua hook file
 * (sorted), then the rules and rewrites of every *.yaml, so a rule may use any op or hook
 * of the directory.  Every error of every file is reported; loading goes on.
 * Only regular files of at most 16 MiB whose names are plain (letters,
 * digits, '.', '_', '-', '+': names reach generated source as provenance) are
 * read; a FIFO, a device, a directory named *.yaml or an oversized file is
 * an error naming it, never a hang.  The directory is opened once and each
 * file once, by name beneath it (safe_open.h; a file of the directory may be
 * a symbolic link: the directory's owner put it there), and read from that
 * descriptor: a `hooks:` file's hash is that of the bytes its hooks were
 * loaded from.  Loading runs under the out-of-memory guard (oom.h): running
 * out unloads the context's whole vocabulary.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "hook.h"
#include "input_file.h"
#include "load.h"
#include "oom.h"
#include "rewrite.h"
#include "safe_open.h"
#include "template.h"

typedef struct yaml_file {
    char *path;
    fg_ydoc *doc;      /* NULL when it did not parse */
    uint64_t hash;
} yaml_file;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && strcmp(s + n - m, suf) == 0;
}

typedef enum pass { PASS_OPS, PASS_RULES } pass;

/* Loads the op definitions (PASS_OPS) or rules (PASS_RULES) of one file:
 * each document is a mapping or a sequence of mappings.  A mapping that is
 * neither kind is reported once, in PASS_OPS. */
static void load_docs(fg_context *ctx, const yaml_file *f, const fg_rules_src *src, pass p)
{
    for (int d = 0; d < f->doc->ndocs; d++) {
        const fg_ynode *doc = f->doc->docs[d];
        const fg_ynode *const *items = &doc;
        int n = 1;
        if (doc->kind == FG_YNODE_SEQ) {
            items = (const fg_ynode *const *)doc->items;
            n = doc->n;
        } else if (fg_ynode_is_null(doc)) {
            continue; /* an empty document */
        }
        for (int i = 0; i < n; i++) {
            const fg_ynode *m = items[i];
            int is_op = fg_ymap_key(m, "op") != NULL, is_rule = fg_ymap_key(m, "rule") != NULL;
            int is_tpl = m->kind == FG_YNODE_MAP && fg_ymap_key(m, "template") != NULL && !is_op && !is_rule;
            if (is_tpl) {
                /* a registered template variant (template.h): before the rules that name it */
                if (p == PASS_OPS)
                    fg_template_load(ctx, m, f->hash);
                continue;
            }
            if (m->kind == FG_YNODE_MAP && fg_ymap_key(m, "rewrite") != NULL && !is_op && !is_rule) {
                /* a rewrite rule (rewrite.h): with the rules, after every op */
                if (p == PASS_RULES)
                    fg_rewrite_load(ctx, m, f->hash);
                continue;
            }
            if (m->kind != FG_YNODE_MAP || is_op == is_rule) {
                if (p != PASS_OPS)
                    continue;
                if (m->kind != FG_YNODE_MAP) {
                    char desc[96];
                    fg_diag_error(ctx, FG_ERR_INPUT, m->loc,
                                  "expected an op definition (`op:`) or a rule (`rule:`) mapping, got %s",
                                  fg_ynode_describe(m, desc, sizeof desc));
                } else if (is_op) {
                    fg_diag_error(ctx, FG_ERR_INPUT, m->loc, "a mapping cannot have both `op:` and `rule:`");
                } else {
                    fg_diag_error(ctx, FG_ERR_INPUT, m->loc,
                                  "expected an op definition (`op:`) or a rule (`rule:`), found neither key");
                }
                continue;
            }
            if (p == PASS_OPS && is_op)
                fg_opdef_load(ctx, m, f->hash);
            else if (p == PASS_RULES && is_rule)
                fg_rule_load(ctx, m, src, f->hash);
        }
    }
}

/* Reads the file name of the directory open as dirfd, opened once (links
 * followed) and read from its descriptor; NULL with a reason. */
static char *read_beneath(int dirfd, const char *name, size_t *len, char *why, size_t whysz)
{
    int fd = fg_open_beneath(dirfd, name, 0, NULL, why, whysz);
    if (fd < 0)
        return NULL;
    fg_oom_defer_close(fd);   /* closed if reading unwinds (oom.h) */
    char *text = fg_read_fd(fd, FG_RULES_FILE_MAX, len, why, whysz);
    fg_oom_close(fd);
    return text;
}

/* A file the directory would load: its name must be safe to put into
 * generated source (provenance comments) and messages; anything else is an
 * error at the directory, naming the file escaped.  Returns nonzero when the
 * file may be loaded. */
static int file_name_ok(fg_context *ctx, const char *dir, const char *name)
{
    if (fg_rules_file_name_ok(name))
        return 1;
    char esc[300];
    fg_diag_error(ctx, FG_ERR_INPUT, (fg_loc){fg_intern(ctx, dir), 0, 0},
                  "refusing rules file '%s': a file name may hold only letters, digits, '.', '_', '-' and '+'",
                  fg_escape_name(name, esc, sizeof esc));
    return 0;
}

static void closedir_cb(void *dh) { closedir(dh); }

/* fg_rules_load's work, under the guard. */
static fg_status load_dir(fg_context *ctx, const char *dir)
{
    int errs0 = ctx->nerrors;
    fg_status worst = FG_OK;
    if (fg_has_control_chars(dir)) {
        char esc[600];
        return fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "refusing rules directory '%s': its path holds control "
                             "characters", fg_escape_name(dir, esc, sizeof esc));
    }
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), lfd = dirfd >= 0 ? fcntl(dirfd, F_DUPFD_CLOEXEC, 0) : -1;
    DIR *dh = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!dh) {
        int e = errno;
        if (lfd >= 0)
            close(lfd);
        if (dirfd >= 0)
            close(dirfd);
        return fg_diag_error(ctx, FG_ERR_IO, FG_NOLOC, "cannot open rules directory %s: %s", dir, strerror(e));
    }
    fg_oom_defer_close(dirfd);       /* both closed if loading unwinds (oom.h) */
    fg_oom_defer(closedir_cb, dh);
    char **yamls = NULL, **luas = NULL;
    int ny = 0, ycap = 0, nl = 0, lcap = 0;
    struct dirent *e;
    while ((e = readdir(dh))) {
        if (e->d_name[0] == '.')
            continue;
        int is_yaml = has_suffix(e->d_name, ".yaml"), is_lua = has_suffix(e->d_name, ".lua");
        if ((is_yaml || is_lua) && !file_name_ok(ctx, dir, e->d_name))
            continue;
        if (is_yaml)
            *FG_PUSH(yamls, ny, ycap) = fg_xstrdup(e->d_name);
        else if (is_lua)
            *FG_PUSH(luas, nl, lcap) = fg_xstrdup(e->d_name);
    }
    fg_oom_undefer(dh);
    closedir(dh);
    if (ny)
        qsort(yamls, (size_t)ny, sizeof *yamls, cmp_str);
    if (nl)
        qsort(luas, (size_t)nl, sizeof *luas, cmp_str);

    yaml_file *files = fg_xcalloc((size_t)ny + 1, sizeof *files);
    for (int i = 0; i < ny; i++) {
        size_t len;
        files[i].path = fg_path_join(dir, yamls[i]);
        char why[160];
        char *text = read_beneath(dirfd, yamls[i], &len, why, sizeof why);
        if (!text) {
            fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, files[i].path), 0, 0}, "cannot read: %s", why);
            if (!worst)
                worst = FG_ERR_IO;
            continue;
        }
        files[i].hash = fg_hash64(text, len);
        fg_ydoc_parse(ctx, files[i].path, text, len, &files[i].doc);
        free(text);
    }
    fg_rules_src src = {.dir = dir, .dirfd = dirfd, .nlua = nl, .lua_names = luas};
    uint64_t *lua_hashes = fg_xcalloc((size_t)nl + 1, sizeof *lua_hashes);
    src.lua_hashes = lua_hashes;
    for (int i = 0; i < ny; i++)
        if (files[i].doc)
            load_docs(ctx, &files[i], &src, PASS_OPS);
    for (int i = 0; i < nl; i++) {
        char *path = fg_path_join(dir, luas[i]), why[160];
        size_t len;
        char *text = read_beneath(dirfd, luas[i], &len, why, sizeof why);
        fg_status st = text ? fg_hooks_load_text(ctx, path, text, len)
                            : fg_diag_error(ctx, FG_ERR_IO, (fg_loc){fg_intern(ctx, path), 0, 0},
                                            "cannot read hook file: %s", why);
        if (text)
            lua_hashes[i] = fg_hash64(text, len);
        if (st && !worst)
            worst = st;
        free(text);
        free(path);
    }
    for (int i = 0; i < ny; i++)
        if (files[i].doc)
            load_docs(ctx, &files[i], &src, PASS_RULES);
    free(lua_hashes);
    fg_oom_close(dirfd);

    for (int i = 0; i < ny; i++) {
        fg_ydoc_free(files[i].doc);
        free(files[i].path);
        free(yamls[i]);
    }
    for (int i = 0; i < nl; i++)
        free(luas[i]);
    free(files);
    free(yamls);
    free(luas);
    if (!worst && ctx->nerrors != errs0)
        worst = FG_ERR_INPUT;
    return worst;
}

typedef struct rules_call {
    fg_context *ctx;
    const char *dir;
} rules_call;

static fg_status rules_body(void *arg)
{
    rules_call *c = arg;
    return load_dir(c->ctx, c->dir);
}

/* After running out of memory: what this load attached to the context is
 * not told apart from what earlier loads did, so the context's whole
 * vocabulary is unloaded (ops, rules, rewrites, templates, hooks); the guard
 * then frees what the load still held. */
static void rules_undo(void *arg)
{
    fg_context *ctx = ((rules_call *)arg)->ctx;
    fg_rewrites_free(ctx);
    fg_templates_free(ctx);
    fg_hooks_free(ctx->hooks);
    ctx->hooks = NULL;
    fg_ctx_clear_vocabulary(ctx);
}

FG_API fg_status fg_rules_load(fg_context *ctx, const char *dir)
{
    if (!ctx || !dir)
        return ctx ? fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_rules_load: no directory given") : FG_ERR_INPUT;
    rules_call c = {ctx, dir};
    return fg_oom_guard(ctx, (fg_loc){fg_intern(ctx, dir), 0, 0},
                        "loading the rules directory (the context's rules are unloaded)", rules_body, rules_undo, &c);
}
