/*
 * test_pointwise_sass.c -- the machine code of the pointwise template's
 * vector path, read without a GPU.  Pointwise chains planned with the
 * shipped rules (fp16 NHWC with a per-channel slope and a residual, fp32
 * NCHW with a broadcast bias, bf16 rank 1 with a tail) are compiled by NVRTC
 * for sm_80 and sm_90 (no warnings), and each cubin's SASS (nvdisasm) must
 * hold 128-bit global loads and stores (LDG.E.128, STG.E.128) and no local
 * memory (no LDL / STL; cuobjdump -res-usage: STACK:0, LOCAL:0).
 *
 * nvdisasm and cuobjdump are looked for as test_conv_tc_sass.c does:
 * $FUSEGEN_CUDA_TOOLS, PATH, /usr/local/cuda/bin, Python's site-packages
 * (pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump).  Without them the
 * test is skipped and says so ("SASS check NOT RUN").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "jit.h"
#include "plan.h"
#include "testutil.h"

/* Directory holding an executable `tool`, or "" (static buffer). */
static const char *tool_dir(const char *tool)
{
    static char dir[2][1024];
    static int slot;
    char *d = dir[slot++ & 1];
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "for d in \"$FUSEGEN_CUDA_TOOLS\" \"$(dirname \"$(command -v %s 2>/dev/null || echo /nonexistent/x)\")\" "
             "/usr/local/cuda/bin $(python3 -c 'import site, glob, os\n"
             "ds = site.getsitepackages() + [site.getusersitepackages()]\n"
             "print(\" \".join(sorted(set(os.path.dirname(p) for s in ds for p in "
             "glob.glob(os.path.join(s, \"nvidia\", \"*\", \"bin\", \"%s\"))))))' 2>/dev/null); do "
             "[ -n \"$d\" ] && [ -x \"$d/%s\" ] && { printf '%%s' \"$d\"; break; }; done",
             tool, tool, tool);
    d[0] = 0;
    if (tu_run(cmd, &out) == 0 && out)
        snprintf(d, sizeof dir[0], "%s", out);
    free(out);
    return d;
}

/* Lines of SASS text holding an instruction that starts with op and has
 * the width suffix ".128" among its modifiers (LDG.E.128, STG.E.128.STRONG...). */
static int count_128(const char *sass, const char *op)
{
    int n = 0;
    size_t len = strlen(op);
    for (const char *s = strstr(sass, op); s; s = strstr(s + len, op)) {
        char before = s > sass ? s[-1] : ' ';
        if (before != ' ' && before != '\t' && before != '}' && before != ';')
            continue;
        size_t w = strcspn(s, " \t;\n");
        for (const char *m = s + len; m < s + w; m++)
            if (strncmp(m, ".128", 4) == 0 && (m + 4 == s + w || m[4] == '.')) {
                n++;
                break;
            }
    }
    return n;
}

/* Occurrences of opcode op (followed by '.' or a space). */
static int count_op(const char *sass, const char *op)
{
    int n = 0;
    size_t len = strlen(op);
    for (const char *s = strstr(sass, op); s; s = strstr(s + len, op)) {
        char before = s > sass ? s[-1] : ' ';
        if ((before == ' ' || before == '\t' || before == '}' || before == ';') && (s[len] == '.' || s[len] == ' '))
            n++;
    }
    return n;
}

static long res_field(const char *text, const char *key)
{
    const char *s = strstr(text, key);
    return s ? strtol(s + strlen(key), NULL, 10) : -1;
}

static const char *const graphs[] = {
    "graph: nhwc_f16\ndtype: fp16\nlayout: NHWC\ninputs:\n"
    "  - { name: x, shape: [1, 64, 14, 14] }\n  - { name: r, shape: [1, 64, 14, 14] }\n"
    "weights:\n  - { name: slope, shape: [64] }\n"
    "nodes:\n  - { name: a, op: add, inputs: [x, r] }\n  - { name: y, op: prelu, inputs: [a, slope] }\n"
    "outputs: [y]\n",
    "graph: nchw_f32\ndtype: fp32\ninputs:\n  - { name: x, shape: [2, 32, 16, 16] }\n"
    "weights:\n  - { name: b, shape: [16] }\n"
    "nodes:\n  - { name: a, op: add, inputs: [x, b] }\n  - { name: y, op: silu, inputs: [a] }\n"
    "outputs: [y]\n",
    "graph: rank1_bf16\ndtype: bf16\ninputs:\n  - { name: x, shape: [4097] }\n  - { name: r, shape: [4097] }\n"
    "nodes:\n  - { name: a, op: mul, inputs: [x, r] }\n  - { name: y, op: gelu, inputs: [a] }\n"
    "outputs: [y]\n",
};

static void test_pointwise_sass(void **state)
{
    (void)state;
    char disasm[1100], objdump[1100];
    snprintf(disasm, sizeof disasm, "%s", tool_dir("nvdisasm"));
    snprintf(objdump, sizeof objdump, "%s", tool_dir("cuobjdump"));
    if (!disasm[0] || !objdump[0]) {
        printf("SASS check NOT RUN: %s%s%s not found (pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump, or "
               "set FUSEGEN_CUDA_TOOLS)\n", disasm[0] ? "" : "nvdisasm", !disasm[0] && !objdump[0] ? " and " : "",
               objdump[0] ? "" : "cuobjdump");
        fflush(stdout);
        skip();
    }
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile for real */
    fg_context *ctx = tu_ctx_shipped();
    enum { NG = sizeof graphs / sizeof graphs[0] };
    fg_graph *g[NG];
    fg_plan *p[NG];
    fg_kernel ks[NG];
    for (int i = 0; i < NG; i++) {
        fg_status st = fg_graph_parse(ctx, "sass.yaml", graphs[i], strlen(graphs[i]), &g[i]);
        if (st == FG_OK)
            st = fg_plan_build(ctx, g[i], &p[i]);
        if (st == FG_OK)
            st = fg_emit_group(ctx, p[i], 0, NULL, &ks[i]);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        assert_int_equal(p[i]->ngroups, 1);
        assert_string_equal(ks[i].template_name, "pointwise");
    }
    char *dir = tu_tmpdir();
    static const char *const archs[] = {"sm_80", "sm_90"};
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        fg_jit_info infos[NG];
        memset(infos, 0, sizeof infos);
        fg_status st = fg_jit_compile_all(ctx, ks, NG, archs[a], infos);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        printf("%s: %-24s %4s %9s %9s %4s %4s\n", archs[a], "kernel", "REG", "LDG.128", "STG.128", "LDL", "STL");
        for (int i = 0; i < NG; i++) {
            if (infos[i].log[0]) {
                fprintf(stderr, "%s (%s): NVRTC log:\n%s\n", ks[i].name, archs[a], infos[i].log);
                failures++;
            }
            char path[1200], cmd[4000], *sass = NULL, *res = NULL;
            snprintf(path, sizeof path, "%s/k%d_%s.cubin", dir, i, archs[a]);
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(ks[i].binary, 1, ks[i].binary_size, f), ks[i].binary_size);
            fclose(f);
            snprintf(cmd, sizeof cmd, "'%s/nvdisasm' -c '%s'", disasm, path);
            assert_int_equal(tu_run(cmd, &sass), 0);
            snprintf(cmd, sizeof cmd, "'%s/cuobjdump' -res-usage '%s'", objdump, path);
            assert_int_equal(tu_run(cmd, &res), 0);
            int ldg = count_128(sass, "LDG"), stg = count_128(sass, "STG");
            int ldl = count_op(sass, "LDL"), stl = count_op(sass, "STL");
            long reg = res_field(res, "REG:"), stack = res_field(res, "STACK:"), local = res_field(res, "LOCAL:");
            printf("%s: %-24s %4ld %9d %9d %4d %4d\n", archs[a], ks[i].name, reg, ldg, stg, ldl, stl);
            if (!ldg || !stg || ldl || stl || stack != 0 || local != 0) {
                fprintf(stderr, "%s (%s): LDG.128 %d, STG.128 %d, LDL %d, STL %d, STACK %ld, LOCAL %ld\n%s\n",
                        ks[i].name, archs[a], ldg, stg, ldl, stl, stack, local, sass);
                failures++;
            }
            free(sass);
            free(res);
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < NG; i++) {
        fg_kernel_free(&ks[i]);
        fg_plan_free(p[i]);
        fg_graph_free(g[i]);
    }
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointwise_sass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
