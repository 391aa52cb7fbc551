/*
 * test_pointwise_sass.c -- the machine code of the pointwise template's
 * vector path, read without a GPU.  Pointwise chains planned with the
 * shipped rules (a residual, a per-channel slope and broadcast weights in
 * fp32, fp16 and bf16, NCHW and NHWC, innermost axes that are and are not a
 * multiple of the vector width, shapes as constants and as parameters; rank
 * 1 with a tail) are compiled by NVRTC for sm_80 and sm_90 (no warnings),
 * and each cubin's SASS (nvdisasm) must hold 128-bit global loads and stores
 * (LDG.E.128, STG.E.128) and no local memory (no LDL / STL; cuobjdump
 * -res-usage: STACK:0, LOCAL:0).
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
 * the width suffix ".128" among its modifiers (LDG.E.128, STG.E.128.STRONG...);
 * the first one's mnemonic goes to first[0..64). */
static int count_128(const char *sass, const char *op, char first[64])
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
                if (!n++)
                    snprintf(first, 64, "%.*s", (int)(w < 63 ? w : 63), s);
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

/* The graphs: test_pointwise_vec's rank-4 chain y = (prelu(x + b, slope) +
 * r) * g in every dtype and layout, with an innermost axis that is and is
 * not a multiple of the vector width, specialized and not; and rank-1
 * chains with a tail. */
enum { NG = 3 * 2 * 2 + 2 + 3 };

static char *graph_text(int i, int *specialize)
{
    static const char *const dts[] = {"fp32", "fp16", "bf16"};
    char buf[1024];
    *specialize = 1;
    if (i < 12) {
        int dt = i / 4, nhwc = i / 2 % 2, odd = i % 2;
        int C = odd ? 7 : 16, W = odd ? 5 : 16;
        snprintf(buf, sizeof buf,
                 "graph: pw4\ndtype: %s\nlayout: %s\ninputs:\n"
                 "  - { name: x, shape: [2, %d, 3, %d] }\n  - { name: r, shape: [2, %d, 3, %d] }\n"
                 "weights:\n  - { name: b, shape: [1, %d, 1, 1] }\n  - { name: slope, shape: [%d] }\n"
                 "  - { name: g, shape: [%d] }\n"
                 "nodes:\n  - { name: a, op: add, inputs: [x, b] }\n  - { name: pr, op: prelu, inputs: [a, slope] }\n"
                 "  - { name: s, op: add, inputs: [pr, r] }\n  - { name: y, op: mul, inputs: [s, g] }\n"
                 "outputs: [y]\n",
                 dts[dt], nhwc ? "NHWC" : "NCHW", C, W, C, W, C, C, W);
    } else if (i < 14) {
        *specialize = 0;
        return graph_text(i == 12 ? 6 : 0, &i);   /* fp16 NHWC and fp32 NCHW, shapes as parameters */
    } else {
        snprintf(buf, sizeof buf,
                 "graph: pw1\ndtype: %s\ninputs:\n  - { name: x, shape: [4097] }\n  - { name: r, shape: [4097] }\n"
                 "nodes:\n  - { name: a, op: mul, inputs: [x, r] }\n  - { name: y, op: gelu, inputs: [a] }\n"
                 "outputs: [y]\n",
                 dts[i - 14]);
    }
    return fg_xstrdup(buf);
}

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
    fg_graph *g[NG];
    fg_plan *p[NG];
    fg_kernel ks[NG];
    for (int i = 0; i < NG; i++) {
        int spec;
        char *text = graph_text(i, &spec);
        fg_emit_opts o = {.specialize = spec};
        fg_status st = fg_graph_parse(ctx, "sass.yaml", text, strlen(text), &g[i]);
        if (st == FG_OK)
            st = fg_plan_build(ctx, g[i], &p[i]);
        if (st == FG_OK)
            st = fg_emit_group(ctx, p[i], 0, &o, &ks[i]);
        free(text);
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
        printf("%s: %-32s %4s %9s %9s %4s %4s\n", archs[a], "kernel (output)", "REG", "LDG.128", "STG.128", "LDL",
               "STL");
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
            char ldg_op[64] = "", stg_op[64] = "";
            int ldg = count_128(sass, "LDG", ldg_op), stg = count_128(sass, "STG", stg_op);
            int ldl = count_op(sass, "LDL"), stl = count_op(sass, "STL");
            long reg = res_field(res, "REG:"), stack = res_field(res, "STACK:"), local = res_field(res, "LOCAL:");
            const fg_tensor *y = &p[i]->graph->tensors[p[i]->groups[0].output];
            char what[64];
            snprintf(what, sizeof what, "%d: %s %s %lld el.%s", i, fg_dtype_name(y->dtype),
                     y->rank == 4 ? fg_layout_name(y->layout) : "rank 1", (long long)fg_tensor_numel(y),
                     i == 12 || i == 13 ? " unspec." : "");
            printf("%s: %-32s %4ld %9d %9d %4d %4d  %s %s\n", archs[a], what, reg, ldg, stg, ldl, stl, ldg_op,
                   stg_op);
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
