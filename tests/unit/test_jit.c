/* test_jit.c -- NVRTC compilation through the cache: key composition, hits
 * after misses, recompiling corrupt entries, compile errors, several
 * processes sharing one directory.  Uses small self-contained kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "jit.h"
#include "runtime.h"
#include "testutil.h"

static const char *const src_add =
    "// fusegen test kernel: rule add_one (rules/test.yaml:3)\n"
    "extern \"C\" __global__ void k_add(float *x, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        x[i] += 1.0f;\n"
    "}\n";

static const char *const src_bad =
    "// fusegen test kernel: rule broken_rule (rules/broken.yaml:7)\n"
    "// template: pointwise\n"
    "extern \"C\" __global__ void k_bad(float *x, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    x[i] = undefined_function_xyz(x[i]);\n"
    "}\n";

static const char *const src_warn =
    "extern \"C\" __global__ void k_warn(float *x)\n"
    "{\n"
    "    int unused_variable_here;\n"
    "    x[0] = 1.0f;\n"
    "}\n";

static void kernel_init(fg_kernel *k, const char *name, const char *src, uint64_t deps)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->source = fg_xstrdup(src);
    k->deps_hash.lo = deps;
}

static void kernel_release(fg_kernel *k)
{
    free(k->source);
    free(k->binary);
    k->source = NULL;
    k->binary = NULL;
}

static fg_context *ctx_with_cache(const char *dir)
{
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.cache_dir = dir;
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    ctx->quiet = 1;
    return ctx;
}

static int is_elf(const void *p, size_t n) { return n > 4 && memcmp(p, "\x7f" "ELF", 4) == 0; }

static void test_hits_after_miss(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    fg_context *ctx = ctx_with_cache(dir);
    fg_kernel k;
    fg_jit_info info;
    kernel_init(&k, "k_add", src_add, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_COMPILED);
    assert_int_equal(strlen(k.key), 32);
    assert_true(is_elf(k.binary, k.binary_size));
    assert_int_equal(info.size, k.binary_size);
    void *first = fg_xmalloc(k.binary_size);
    size_t first_size = k.binary_size;
    memcpy(first, k.binary, first_size);
    char key[33];
    memcpy(key, k.key, 33);

    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_MEMORY);
    assert_string_equal(k.key, key);
    assert_int_equal(k.binary_size, first_size);
    assert_memory_equal(k.binary, first, first_size);
    kernel_release(&k);
    fg_context_free(ctx);

    /* A fresh context (fresh cache object) finds the entry on disk. */
    ctx = ctx_with_cache(dir);
    kernel_init(&k, "k_add", src_add, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_DISK);
    assert_string_equal(k.key, key);
    assert_int_equal(k.binary_size, first_size);
    assert_memory_equal(k.binary, first, first_size);
    fg_cache_entry e;
    assert_int_equal(fg_cache_find_entry(fg_ctx_cache(ctx), key, &e), 1);
    char v[64];
    assert_string_equal(fg_cache_meta_get(e.meta, "name", v, sizeof v), "k_add");
    assert_string_equal(fg_cache_meta_get(e.meta, "arch", v, sizeof v), "sm_90");
    fg_cache_entry_free(&e);
    kernel_release(&k);
    free(first);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_key_parts(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = ctx_with_cache(NULL);
    fg_kernel k;
    char base[33], other[33];
    kernel_init(&k, "k_add", src_add, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", NULL), FG_OK);
    memcpy(base, k.key, 33);
    /* Same inputs: same key. */
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", NULL), FG_OK);
    assert_string_equal(k.key, base);
    /* A different rule-file hash. */
    k.deps_hash.hi = 42;
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", NULL), FG_OK);
    assert_string_not_equal(k.key, base);
    memcpy(other, k.key, 33);
    k.deps_hash.hi = 0;
    /* A different arch. */
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_80", NULL), FG_OK);
    assert_string_not_equal(k.key, base);
    assert_string_not_equal(k.key, other);
    /* A different compile option (the environment is read when a context is made). */
    setenv("FUSEGEN_NVRTC_OPTIONS", "-lineinfo", 1);
    fg_context *ctx2 = ctx_with_cache(NULL);
    unsetenv("FUSEGEN_NVRTC_OPTIONS");
    assert_int_equal(fg_jit_compile(ctx2, &k, "sm_90", NULL), FG_OK);
    fg_context_free(ctx2);
    assert_string_not_equal(k.key, base);
    /* One changed character of source. */
    free(k.source);
    k.source = fg_xstrdup(src_add);
    strstr(k.source, "1.0f")[0] = '2';
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", NULL), FG_OK);
    assert_string_not_equal(k.key, base);
    kernel_release(&k);
    fg_context_free(ctx);
    unsetenv("FUSEGEN_CACHE");
}

static void corrupt_and_recompile(int truncate_it)
{
    char *dir = tu_tmpdir();
    fg_context *ctx = ctx_with_cache(dir);
    fg_kernel k;
    fg_jit_info info;
    kernel_init(&k, "k_add", src_add, 7);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    fg_context_free(ctx);
    fg_buf b = {0};
    fg_buf_printf(&b, "%s/%.2s/%s.fgk", dir, k.key, k.key);
    struct stat st;
    assert_int_equal(stat(b.s, &st), 0);
    if (truncate_it) {
        assert_int_equal(truncate(b.s, st.st_size / 2), 0);
    } else {
        FILE *f = fopen(b.s, "r+b");
        assert_non_null(f);
        fseek(f, st.st_size - 100, SEEK_SET);
        int c = fgetc(f);
        fseek(f, st.st_size - 100, SEEK_SET);
        fputc(c ^ 1, f);
        fclose(f);
    }

    ctx = ctx_with_cache(dir);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_COMPILED);
    assert_true(is_elf(k.binary, k.binary_size));
    fg_cache_stats s;
    fg_cache_get_stats(fg_ctx_cache(ctx), &s);
    assert_int_equal(s.corrupt, 1);
    fg_context_free(ctx);
    /* The replacement is valid and served from disk. */
    ctx = ctx_with_cache(dir);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_DISK);
    fg_cache_get_stats(fg_ctx_cache(ctx), &s);
    assert_int_equal(s.corrupt, 0);
    fg_context_free(ctx);
    fg_buf_free(&b);
    kernel_release(&k);
    tu_rmtree(dir);
    free(dir);
}

/* fg_context_kernel_counts: NVRTC compiles, then memory and disk hits, per
 * context; a size that covers no counter, or a NULL context, is an input
 * error. */
static void test_kernel_counts(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    fg_context *ctx = ctx_with_cache(dir);
    fg_kernel k;
    fg_jit_info info;
    fg_kernel_counts c = {sizeof c};
    assert_int_equal(fg_context_kernel_counts(ctx, &c), FG_OK);
    assert_true(c.nvrtc_compiled == 0 && c.host_compiled == 0 && c.memory_hits == 0 && c.disk_hits == 0);
    kernel_init(&k, "k_add", src_add, 3);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(fg_context_kernel_counts(ctx, &c), FG_OK);
    assert_true(c.size == sizeof c && c.nvrtc_compiled == 1 && c.host_compiled == 0 && c.memory_hits == 1);
    fg_kernel_counts bad = {0};
    assert_int_equal(fg_context_kernel_counts(ctx, &bad), FG_ERR_INPUT);
    assert_int_equal(fg_context_kernel_counts(NULL, &c), FG_ERR_INPUT);
    fg_context_free(ctx);
    ctx = ctx_with_cache(dir);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    fg_kernel_counts part = {offsetof(fg_kernel_counts, host_compiled)};   /* an older, shorter struct */
    part.host_compiled = 77;
    assert_int_equal(fg_context_kernel_counts(ctx, &part), FG_OK);
    assert_true(part.nvrtc_compiled == 0 && part.host_compiled == 77);     /* beyond its size: untouched */
    assert_int_equal(fg_context_kernel_counts(ctx, &c), FG_OK);
    assert_true(c.nvrtc_compiled == 0 && c.disk_hits == 1);
    fg_context_free(ctx);
    kernel_release(&k);
    tu_rmtree(dir);
    free(dir);
}

static void test_truncated_recompiled(void **state) { (void)state; corrupt_and_recompile(1); }
static void test_flipped_recompiled(void **state) { (void)state; corrupt_and_recompile(0); }

static void test_compile_error(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = ctx_with_cache(NULL);
    fg_kernel k;
    kernel_init(&k, "k_bad", src_bad, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", NULL), FG_ERR_COMPILE);
    assert_null(k.binary);
    if (!tu_has_error(ctx, "undefined_function_xyz"))
        tu_dump_errors(ctx);
    /* The NVRTC log, the quoted offending line, the rule's location and name. */
    assert_true(tu_has_error(ctx, "kernel.cu(6): error"));
    assert_true(tu_has_error(ctx, "> kernel.cu:6 |     x[i] = undefined_function_xyz(x[i]);"));
    assert_true(tu_has_error(ctx, "rules/broken.yaml:7:"));
    assert_true(tu_has_error(ctx, "rule broken_rule"));
    assert_true(tu_has_error(ctx, "k_bad"));
    assert_int_equal(fg_context_error(ctx, 0)->status, FG_ERR_COMPILE);
    kernel_release(&k);
    fg_context_free(ctx);
    unsetenv("FUSEGEN_CACHE");
}

static void test_bad_arch(void **state)
{
    (void)state;
    fg_context *ctx = ctx_with_cache(NULL);
    fg_kernel k;
    kernel_init(&k, "k_add", src_add, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_9", NULL), FG_ERR_INPUT);
    assert_true(tu_has_error(ctx, "unknown arch 'sm_9'"));
    assert_int_equal(fg_jit_check_arch(ctx, "gfx90a"), FG_ERR_INPUT);
    assert_int_equal(fg_jit_check_arch(ctx, "sm_80"), FG_OK);
    assert_int_equal(fg_jit_check_arch(ctx, "compute_90"), FG_OK);
    assert_int_equal(fg_jit_check_arch(ctx, "sm_90a"), FG_OK);
    assert_null(k.binary);
    kernel_release(&k);
    fg_context_free(ctx);
}

static void test_arch_resolution(void **state)
{
    (void)state;
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.arch = "sm_80";
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    assert_string_equal(fg_jit_arch(ctx), "sm_80");
    fg_context_free(ctx);
    setenv("FUSEGEN_ARCH", "sm_86", 1);
    ctx = ctx_with_cache(NULL);
    /* The GPU's arch wins over the environment; without a GPU the environment decides. */
    char gpu[16] = "";
    if (fg_cuda_device_arch(ctx, gpu) == 0)
        assert_string_equal(fg_jit_arch(ctx), gpu);
    else
        assert_string_equal(fg_jit_arch(ctx), "sm_86");
    fg_context_free(ctx);
    unsetenv("FUSEGEN_ARCH");
}

static void test_warning_log_and_ptx(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    char *dump = fg_path_join(dir, "dump");
    setenv("FUSEGEN_DUMP_SOURCE", dump, 1);
    fg_context *ctx = ctx_with_cache(dir);
    fg_kernel k;
    fg_jit_info info;
    kernel_init(&k, "k_warn", src_warn, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_COMPILED);
    assert_non_null(strstr(info.log, "unused_variable_here"));
    /* The warning is remembered with the entry. */
    assert_int_equal(fg_jit_compile(ctx, &k, "sm_90", &info), FG_OK);
    assert_int_equal(info.from, FG_JIT_MEMORY);
    assert_non_null(strstr(info.log, "unused_variable_here"));
    char path[4200];
    snprintf(path, sizeof path, "%s/k_warn-%s.cu", dump, k.key);
    size_t n;
    char *text = fg_read_file(path, &n);
    assert_non_null(text);
    assert_string_equal(text, src_warn);
    free(text);
    unsetenv("FUSEGEN_DUMP_SOURCE");
    /* compute_XX gives PTX text. */
    kernel_release(&k);
    kernel_init(&k, "k_add", src_add, 1);
    assert_int_equal(fg_jit_compile(ctx, &k, "compute_80", &info), FG_OK);
    assert_non_null(strstr((const char *)k.binary, ".entry k_add"));
    assert_int_equal(info.log[0], 0);
    kernel_release(&k);
    fg_context_free(ctx);
    free(dump);
    tu_rmtree(dir);
    free(dir);
}

#define NKERN 3

static void make_kernels(fg_kernel *ks)
{
    for (int i = 0; i < NKERN; i++) {
        char name[32], *src;
        snprintf(name, sizeof name, "k_add%d", i);
        fg_buf b = {0};
        fg_buf_printf(&b, "extern \"C\" __global__ void %s(float *x, int n)\n{\n"
                          "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                          "    if (i < n) x[i] = x[i] * %d.0f + 1.0f;\n}\n", name, i + 2);
        src = fg_buf_take(&b);
        kernel_init(&ks[i], name, src, 3);
        free(src);
    }
}

/* Kernels whose sources differ only in comments, white space and parameter
 * names are one program: one key, one compile, the others share its binary
 * (FG_JIT_SHARED).  A different constant or entry point is another kernel. */
static void test_compile_all_shares_equal_sources(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    fg_context *ctx = ctx_with_cache(dir);
    static const char *const srcs[4] = {
        "// group 0: reads a\nextern \"C\" __global__ void k_same(float *a, int n)\n"
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] = a[i] * 2.0f;\n}\n",
        "// group 5: reads b, another comment\nextern \"C\" __global__ void k_same(float *b,   int n)\n"
        "{ /* scaled */\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) b[i] = b[i] * 2.0f;\n}\n",
        "extern \"C\" __global__ void k_same(float *a, int n)\n"
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] = a[i] * 3.0f;\n}\n",
        "extern \"C\" __global__ void k_other(float *a, int n)\n"
        "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] = a[i] * 2.0f;\n}\n",
    };
    static const char *const pnames[4] = {"a", "b", "a", "a"};
    fg_kernel ks[4];
    fg_jit_info infos[4];
    for (int i = 0; i < 4; i++) {
        kernel_init(&ks[i], i == 3 ? "k_other" : "k_same", srcs[i], 3);
        ks[i].nparams = 1;
        ks[i].params[0].kind = FG_KPARAM_TENSOR;
        snprintf(ks[i].params[0].name, sizeof ks[i].params[0].name, "%s", pnames[i]);
    }
    assert_int_equal(fg_jit_compile_all(ctx, ks, 4, "sm_90", infos), FG_OK);
    assert_int_equal(infos[0].from, FG_JIT_COMPILED);
    assert_int_equal(infos[1].from, FG_JIT_SHARED);
    assert_string_equal(ks[1].key, ks[0].key);
    assert_int_equal(ks[1].binary_size, ks[0].binary_size);
    assert_memory_equal(ks[1].binary, ks[0].binary, ks[0].binary_size);
    assert_int_equal(infos[2].from, FG_JIT_COMPILED);
    assert_int_equal(infos[3].from, FG_JIT_COMPILED);
    assert_string_not_equal(ks[2].key, ks[0].key);
    assert_string_not_equal(ks[3].key, ks[0].key);
    for (int i = 0; i < 4; i++)
        kernel_release(&ks[i]);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_compile_all(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    fg_context *ctx = ctx_with_cache(dir);
    ctx->opts.jobs = 2;
    fg_kernel ks[NKERN];
    fg_jit_info infos[NKERN];
    make_kernels(ks);
    assert_int_equal(fg_jit_compile_all(ctx, ks, NKERN, "sm_90", infos), FG_OK);
    for (int i = 0; i < NKERN; i++) {
        assert_int_equal(infos[i].from, FG_JIT_COMPILED);
        assert_true(is_elf(ks[i].binary, ks[i].binary_size));
        for (int j = 0; j < i; j++)
            assert_string_not_equal(ks[i].key, ks[j].key);
    }
    assert_int_equal(fg_jit_compile_all(ctx, ks, NKERN, "sm_90", infos), FG_OK);
    for (int i = 0; i < NKERN; i++)
        assert_int_equal(infos[i].from, FG_JIT_MEMORY);
    /* One failing kernel: its status is returned, the others still compile. */
    free(ks[1].source);
    ks[1].source = fg_xstrdup(src_bad);
    free(ks[2].source);
    ks[2].source = fg_xstrdup(src_warn);
    assert_int_equal(fg_jit_compile_all(ctx, ks, NKERN, "sm_90", infos), FG_ERR_COMPILE);
    assert_true(is_elf(ks[2].binary, ks[2].binary_size));
    assert_int_equal(infos[2].from, FG_JIT_COMPILED);
    for (int i = 0; i < NKERN; i++)
        kernel_release(&ks[i]);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

static void test_two_processes_share_dir(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            fg_context *ctx = ctx_with_cache(dir);
            ctx->opts.jobs = 1;
            fg_kernel ks[NKERN];
            make_kernels(ks);
            fg_status st = fg_jit_compile_all(ctx, ks, NKERN, "sm_90", NULL);
            for (int i = 0; i < NKERN; i++)
                st = st ? st : (is_elf(ks[i].binary, ks[i].binary_size) ? FG_OK : FG_ERR_INTERNAL);
            _exit(st == FG_OK ? 0 : 1);
        }
    }
    for (int p = 0; p < 2; p++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[p], &ws, 0), pids[p]);
        assert_true(WIFEXITED(ws));
        assert_int_equal(WEXITSTATUS(ws), 0);
    }
    /* Exactly one valid entry per kernel, no leftovers. */
    fg_context *ctx = ctx_with_cache(dir);
    fg_cache_entry *es;
    int n = fg_cache_list(fg_ctx_cache(ctx), &es);
    assert_int_equal(n, NKERN);
    for (int i = 0; i < n; i++)
        assert_true(es[i].valid);
    fg_cache_entries_free(es, n);
    char *out = NULL;
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "find '%s' -type f | wc -l", dir);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_int_equal(atoi(out), NKERN);
    free(out);
    fg_context_free(ctx);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_after_miss),
        cmocka_unit_test(test_key_parts),
        cmocka_unit_test(test_truncated_recompiled),
        cmocka_unit_test(test_flipped_recompiled),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_bad_arch),
        cmocka_unit_test(test_arch_resolution),
        cmocka_unit_test(test_warning_log_and_ptx),
        cmocka_unit_test(test_compile_all),
        cmocka_unit_test(test_kernel_counts),
        cmocka_unit_test(test_compile_all_shares_equal_sources),
        cmocka_unit_test(test_two_processes_share_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
