/*
 * test_security_rules.c -- a rules directory is data: what it can do to the
 * loaders is bounded.  File names that would break out of the provenance
 * comment of generated source (a newline, control characters, anything
 * outside the safe set) are refused with an error naming the file escaped;
 * a FIFO, a directory or an oversized file under a loaded name is an error,
 * never a hang or an unbounded read (rules directory, `hooks:` files, hook
 * files, graphs); YAML nested 100000 deep is refused at once; an alias may
 * not contain itself, and aliases may not blow the tree up ("billion
 * laughs"); an op's expression text quoted in a comment of generated source
 * stays on one line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emit.h"
#include "hook.h"
#include "input_file.h"
#include "testutil.h"
#include "yaml_doc.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char RULE[] = "rule: fine\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n";

/* Loads dir into a fresh context with the shipped rules already there;
 * returns the context (the status in *st). */
static fg_context *load_dir(const char *dir, fg_status *st)
{
    fg_context *ctx = tu_ctx_shipped();
    double t0 = now_s();
    *st = fg_rules_load(ctx, dir);
    assert_true(now_s() - t0 < 10.0);
    return ctx;
}

/* No recorded error message holds a raw newline or control character. */
static void messages_clean(const fg_context *ctx)
{
    for (int i = 0; i < fg_context_error_count(ctx); i++) {
        const fg_error *e = fg_context_error(ctx, i);
        for (const unsigned char *c = (const unsigned char *)e->message; *c; c++)
            if (*c < 0x20 && *c != '\n')
                fail_msg("control character in: %s", e->message);
        if (!strstr(e->message, "stack traceback"))
            assert_null(strchr(e->message, '\n'));
        if (e->file)
            assert_int_equal(fg_has_control_chars(e->file), 0);
    }
}

/* A rules file whose name holds a newline (or other unsafe characters) is
 * refused, named escaped, and not loaded; the directory's other files are. */
static void test_unsafe_file_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *escaped;
    } bad[] = {
        {"a\nb.yaml", "refusing rules file 'a\\nb.yaml'"},
        {"x\n} int pwn;\n.yaml", "refusing rules file 'x\\n} int pwn;\\n.yaml'"},
        {"tab\t.lua", "refusing rules file 'tab\\t.lua'"},
        {"esc\x1b[31m.yaml", "refusing rules file 'esc\\x1b[31m.yaml'"},
        {"sp ace.yaml", "refusing rules file 'sp ace.yaml'"},
        {"quote'.yaml", "refusing rules file 'quote\\'.yaml'"},
        {"star*.yaml", "refusing rules file 'star*.yaml'"},
        {"caf\xc3\xa9.yaml", "refusing rules file 'caf\\xc3\\xa9.yaml'"},
        {"-opt.yaml", "refusing rules file '-opt.yaml'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *dir = tu_tmpdir();
        free(tu_write(dir, "good-1_v2+x.yaml", RULE));
        free(tu_write(dir, bad[i].name, "rule: evil\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n"));
        fg_status st;
        fg_context *ctx = load_dir(dir, &st);
        assert_int_equal(st, FG_ERR_INPUT);
        if (!tu_has_error(ctx, bad[i].escaped)) {
            tu_dump_errors(ctx);
            fail_msg("file %zu: no error '%s'", i, bad[i].escaped);
        }
        assert_true(tu_has_error(ctx, "a file name may hold only letters, digits, '.', '_', '-' and '+'"));
        messages_clean(ctx);
        assert_true(fg_ctx_find_rule(ctx, "fine") >= 0);   /* the good file loaded */
        assert_true(fg_ctx_find_rule(ctx, "evil") < 0);    /* the bad one did not */
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
    /* `hooks:` naming an unsafe file is refused in the rule */
    char *dir = tu_tmpdir();
    free(tu_write(dir, "h\nx.lua", "function p(n) return true end\n"));
    free(tu_write(dir, "r.yaml", "rule: r\nhooks: \"h\\nx.lua\"\nmatch:\n  - c: { op: conv2d }\n"
                                 "kernel: { template: conv2d }\n"));
    fg_status st;
    fg_context *ctx = load_dir(dir, &st);
    assert_int_equal(st, FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "r.yaml:2:8: error: hooks must name a file in the rule's directory"));
    assert_true(tu_has_error(ctx, "got 'h\\nx.lua'"));
    messages_clean(ctx);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
    /* a directory path with a control character is refused as a whole */
    ctx = tu_ctx_empty();
    assert_int_equal(fg_rules_load(ctx, "/tmp/no\nsuch"), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "refusing rules directory '/tmp/no\\nsuch'"));
    messages_clean(ctx);
    fg_context_free(ctx);
}

/* A FIFO named like a rules file: an error naming it, at once.  (Reading it
 * used to block forever: nobody writes to it.) */
static void test_fifo_and_special_files(void **state)
{
    (void)state;
    static const char *const names[] = {"pipe.yaml", "pipe.lua"};
    for (size_t i = 0; i < 2; i++) {
        char *dir = tu_tmpdir();
        free(tu_write(dir, "good.yaml", RULE));
        char *fifo = fg_path_join(dir, names[i]);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        fg_status st;
        fg_context *ctx = load_dir(dir, &st);
        assert_int_equal(st, FG_ERR_IO);
        char want[512];
        snprintf(want, sizeof want, "%s: error: %s: not a regular file (a FIFO)", fifo,
                 i == 0 ? "cannot read" : "cannot read hook file");
        if (!tu_has_error(ctx, want)) {
            tu_dump_errors(ctx);
            fail_msg("expected: %s", want);
        }
        assert_true(fg_ctx_find_rule(ctx, "fine") >= 0);
        fg_context_free(ctx);
        free(fifo);
        tu_rmtree(dir);
        free(dir);
    }
    /* a directory named *.yaml, a device, an oversized (sparse) file */
    char *dir = tu_tmpdir();
    char *sub = fg_path_join(dir, "sub.yaml");
    assert_int_equal(mkdir(sub, 0700), 0);
    char *zero = fg_path_join(dir, "zero.yaml");
    assert_int_equal(symlink("/dev/zero", zero), 0);
    free(zero);
    char *big = fg_path_join(dir, "big.lua");
    int fd = open(big, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)FG_RULES_FILE_MAX + 1), 0);
    close(fd);
    fg_status st;
    fg_context *ctx = load_dir(dir, &st);
    assert_int_equal(st, FG_ERR_IO);
    assert_true(tu_has_error(ctx, "sub.yaml: error: cannot read: not a regular file (a directory)"));
    assert_true(tu_has_error(ctx, "zero.yaml: error: cannot read: not a regular file (a character device)"));
    assert_true(tu_has_error(ctx, "big.lua: error: cannot read hook file: the file is 16.0 MiB, more than the 16 "
                                  "MiB limit"));
    fg_context_free(ctx);
    free(sub);
    free(big);
    tu_rmtree(dir);
    free(dir);
    /* `hooks:` naming a FIFO beside the rule */
    dir = tu_tmpdir();
    char *fifo = fg_path_join(dir, "h.lua");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    free(tu_write(dir, "r.yaml", "rule: r\nhooks: h.lua\nmatch:\n  - c: { op: conv2d }\nkernel: { template: conv2d }\n"));
    ctx = load_dir(dir, &st);
    assert_int_equal(st, FG_ERR_IO);
    assert_true(tu_has_error(ctx, "r.yaml:2:8: error: hooks file 'h.lua' cannot be read in "));
    assert_true(tu_has_error(ctx, ": not a regular file (a FIFO)"));
    fg_context_free(ctx);
    free(fifo);
    tu_rmtree(dir);
    free(dir);
}

/* Graphs and hook files loaded by path are bounded the same way. */
static void test_graph_and_hook_paths(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *fifo = fg_path_join(dir, "g.yaml");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = (fg_graph *)&g;
    double t0 = now_s();
    assert_int_equal(fg_graph_load(ctx, fifo, &g), FG_ERR_IO);
    assert_null(g);
    assert_true(tu_has_error(ctx, "g.yaml: error: cannot read graph: not a regular file (a FIFO)"));
    assert_int_equal(fg_graph_load(ctx, dir, &g), FG_ERR_IO);
    assert_true(tu_has_error(ctx, "cannot read graph: not a regular file (a directory)"));
    assert_int_equal(fg_hooks_load(ctx, fifo), FG_ERR_IO);
    assert_true(tu_has_error(ctx, "g.yaml: error: cannot read hook file: not a regular file (a FIFO)"));
    assert_true(now_s() - t0 < 5.0);
    fg_context_free(ctx);
    free(fifo);
    tu_rmtree(dir);
    free(dir);
}

/* YAML nested 100000 levels deep, flow and block: refused at once (libyaml
 * takes time quadratic in the depth of flow collections: 40000 levels took
 * 18 s before the cap). */
static void test_deep_yaml(void **state)
{
    (void)state;
    const int depth = 100000;
    fg_buf b = {0};
    fg_buf_put(&b, "rule: deep\nmatch: ");
    for (int i = 0; i < depth; i++)
        fg_buf_put(&b, "{a: ");
    fg_buf_put(&b, "1");
    for (int i = 0; i < depth; i++)
        fg_buf_put(&b, "}");
    fg_buf_put(&b, "\n");
    char *dir = tu_tmpdir();
    free(tu_write(dir, "deep.yaml", b.s));
    fg_status st;
    double t0 = now_s();
    fg_context *ctx = load_dir(dir, &st);
    double dt = now_s() - t0;
    assert_int_equal(st, FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "deep.yaml:2:"));
    assert_true(tu_has_error(ctx, "nested too deeply (more than 64 levels of sequences and mappings)"));
    if (dt > 2.0)
        fail_msg("100000 levels took %.1f s", dt);
    fg_context_free(ctx);
    fg_buf_free(&b);

    /* sequences, in a graph */
    fg_buf_put(&b, "graph: deep\ninputs: ");
    for (int i = 0; i < depth; i++)
        fg_buf_put(&b, "[");
    for (int i = 0; i < depth; i++)
        fg_buf_put(&b, "]");
    ctx = tu_ctx_shipped();
    fg_graph *g;
    t0 = now_s();
    assert_int_equal(fg_graph_parse(ctx, "deep_graph.yaml", b.s, b.len, &g), FG_ERR_INPUT);
    assert_true(now_s() - t0 < 2.0);
    assert_true(tu_has_error(ctx, "deep_graph.yaml:2:"));
    assert_true(tu_has_error(ctx, "nested too deeply"));
    fg_context_free(ctx);
    fg_buf_free(&b);

    /* block style, 100 levels: over the cap too; 60 levels are fine */
    for (int levels = 60; levels <= 100; levels += 40) {
        fg_buf_put(&b, "x:\n");
        for (int i = 1; i < levels; i++) {
            for (int k = 0; k < i; k++)
                fg_buf_put(&b, " ");
            fg_buf_put(&b, "x:\n");
        }
        ctx = tu_ctx_empty();
        fg_ydoc *d = NULL;
        st = fg_ydoc_parse(ctx, "block.yaml", b.s, b.len, &d);
        assert_int_equal(st, levels > FG_YAML_MAX_DEPTH ? FG_ERR_INPUT : FG_OK);
        fg_ydoc_free(d);
        fg_context_free(ctx);
        fg_buf_free(&b);
    }
    tu_rmtree(dir);
    free(dir);
}

/* An alias naming a collection that contains it would make the tree contain
 * itself (a walker would loop); it is refused. */
static void test_self_alias(void **state)
{
    (void)state;
    static const char *const docs[] = {"a: &x [1, *x]\n", "&m {k: *m}\n", "- &s\n  - *s\n"};
    for (size_t i = 0; i < 3; i++) {
        fg_context *ctx = tu_ctx_empty();
        fg_ydoc *d = NULL;
        assert_int_equal(fg_ydoc_parse(ctx, "alias.yaml", docs[i], strlen(docs[i]), &d), FG_ERR_INPUT);
        assert_null(d);
        assert_true(tu_has_error(ctx, "alias.yaml:"));
        assert_true(tu_has_error(ctx, "refers to a collection that contains it"));
        fg_context_free(ctx);
    }
    /* an alias of a finished collection is fine */
    fg_context *ctx = tu_ctx_empty();
    fg_ydoc *d = NULL;
    const char *ok = "a: &x [1, 2]\nb: *x\n";
    assert_int_equal(fg_ydoc_parse(ctx, "alias.yaml", ok, strlen(ok), &d), FG_OK);
    fg_ydoc_free(d);
    fg_context_free(ctx);
}

/* "Billion laughs": each level names the previous one ten times, so nine
 * levels would be a tree of a billion nodes for a loader to walk (and a
 * graph loader would allocate each expanded weight).  Refused at the alias
 * that crosses the limit; a few reuses are fine. */
static void test_alias_expansion(void **state)
{
    (void)state;
    fg_buf b = {0};
    fg_buf_put(&b, "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 10; i++) {
        fg_buf_printf(&b, "l%d: &l%d [", i, i);
        for (int k = 0; k < 10; k++)
            fg_buf_printf(&b, "%s*l%d", k ? ", " : "", i - 1);
        fg_buf_put(&b, "]\n");
    }
    fg_context *ctx = tu_ctx_empty();
    fg_ydoc *d = NULL;
    double t0 = now_s();
    assert_int_equal(fg_ydoc_parse(ctx, "laughs.yaml", b.s, b.len, &d), FG_ERR_INPUT);
    assert_true(now_s() - t0 < 2.0);
    assert_null(d);
    /* l4 stands for 111111 nodes: the eighth of them in l5 crosses the limit */
    assert_true(tu_has_error(ctx, "laughs.yaml:6:45: error: aliases expand the document by more than 1000000 "
                                  "nodes (alias '*l4')"));
    fg_context_free(ctx);
    fg_buf_free(&b);

    /* the same anchor name twice: the later one wins; three levels are fine */
    const char *ok = "a: &x [1, 2]\nb: &x [3]\nc: *x\nd: &y [*x, *x, *x]\ne: [*y, *y]\n";
    ctx = tu_ctx_empty();
    assert_int_equal(fg_ydoc_parse(ctx, "ok.yaml", ok, strlen(ok), &d), FG_OK);
    const fg_ynode *c = fg_ymap_get(d->docs[0], "c");
    assert_int_equal(c->n, 1);
    assert_string_equal(c->items[0]->str, "3");
    assert_int_equal(fg_ymap_get(d->docs[0], "e")->items[1]->n, 3);
    fg_ydoc_free(d);
    fg_context_free(ctx);
}

/* An op's expression text is quoted in a comment of the generated source:
 * written over several lines in the YAML, it stays on the comment's line
 * (a newline would end the comment and make the rest of the text code). */
static void test_comment_text_one_line(void **state)
{
    (void)state;
    char *dir = tu_vocab_dir();
    free(tu_write(dir, "mine.yaml",
                  "op: twoline\nkind: pointwise\nexpr: \"x > 0\\n  ? x\\r\\n  : 0\"\n---\n"
                  "rule: conv_twoline\npriority: 99\nmatch:\n  - conv: { op: conv2d }\n  - act: { op: twoline }\n"
                  "kernel:\n  template: conv2d\n  epilogue:\n    - apply: act\n"));
    fg_context *ctx = tu_ctx_empty();
    fg_status st = fg_rules_load(ctx, dir);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    static const char graph[] =
        "graph: g\ninputs: [ { name: x, shape: [1, 4, 6, 6] } ]\nweights: [ { name: w, shape: [4, 4, 3, 3] } ]\n"
        "nodes:\n  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
        "  - { name: t, op: twoline, inputs: [c] }\noutputs: [t]\n";
    fg_graph *g;
    fg_plan *p;
    assert_int_equal(fg_graph_parse(ctx, "g.yaml", graph, strlen(graph), &g), FG_OK);
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    assert_int_equal(p->ngroups, 1);
    fg_kernel K;
    memset(&K, 0, sizeof K);
    fg_emit_opts eo = {.specialize = 1};
    st = fg_emit_group(ctx, p, 0, &eo, &K);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const char *line = strstr(K.source, "// epilogue: apply t: ");
    assert_non_null(line);
    const char *eol = strchr(line, '\n');
    assert_non_null(eol);
    assert_true(eol - line == (ptrdiff_t)strlen("// epilogue: apply t: x > 0   ? x    : 0"));
    fg_kernel_free(&K);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

/* fg_escape_name and the file-name check themselves. */
static void test_name_helpers(void **state)
{
    (void)state;
    char out[32];
    assert_string_equal(fg_escape_name("a\nb\t\\'\x01\x7f", out, sizeof out), "a\\nb\\t\\\\\\'\\x01\\x7f");
    assert_string_equal(fg_escape_name("0123456789012345678901234567890123456789", out, sizeof out),
                        "0123456789012345678901234567...");
    assert_true(fg_rules_file_name_ok("conv_bn-2+x.yaml"));
    assert_false(fg_rules_file_name_ok(""));
    assert_false(fg_rules_file_name_ok("a/b.yaml"));
    assert_false(fg_rules_file_name_ok("a b.yaml"));
    assert_false(fg_rules_file_name_ok("-x.yaml"));
    assert_true(fg_has_control_chars("a\x7f"));
    assert_false(fg_has_control_chars("/tmp/r\xc3\xa9gles"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unsafe_file_names), cmocka_unit_test(test_fifo_and_special_files),
        cmocka_unit_test(test_graph_and_hook_paths), cmocka_unit_test(test_deep_yaml),
        cmocka_unit_test(test_self_alias), cmocka_unit_test(test_alias_expansion),
        cmocka_unit_test(test_comment_text_one_line), cmocka_unit_test(test_name_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
