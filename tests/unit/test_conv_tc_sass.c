/*
 * test_conv_tc_sass.c -- the machine code of the tensor-core convolution,
 * read without a GPU.  ResNet-50 (examples/resnet50.yaml) in fp16 NHWC, and
 * in fp32 NHWC with precision tf32, is planned with the shipped rules (batch
 * 1: most layers take split-K); every dense convolution whose channels are a
 * multiple of 8 (fp16) or 4 (fp32) must run on conv2d_tc (the 7x7 stem,
 * C = 3, on the direct conv2d).  In fp32 the mma must be the tf32 one
 * (HMMA.1688.F32.TF32).  Those kernels are compiled by NVRTC for sm_80 and sm_90 (no
 * warnings), and each cubin's SASS (nvdisasm) must hold tensor-core mma
 * (HMMA), ldmatrix (LDSM) and cp.async (LDGSTS), and no local memory: no
 * LDL / STL, and cuobjdump -res-usage reports STACK:0 and LOCAL:0.  A table
 * of the instruction counts and resources is printed.
 *
 * The tools are not part of every CUDA toolkit; pip installs them
 * (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump; .ci/run does).  They are
 * looked for in $FUSEGEN_CUDA_TOOLS, on PATH, in /usr/local/cuda/bin and in
 * Python's site-packages (nvidia/<cuXX>/bin).  Without them the test is
 * skipped and says so ("SASS check NOT RUN").
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

/* Occurrences of opcode `op` (followed by '.' or a space) in SASS text. */
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

/* Value of "KEY:<n>" in cuobjdump -res-usage output, or -1. */
static long res_field(const char *text, const char *key)
{
    const char *s = strstr(text, key);
    return s ? strtol(s + strlen(key), NULL, 10) : -1;
}

/* The rule, the tile line and the shape constants of a kernel: what its
 * code depends on besides names (malloc'd). */
static char *signature(const fg_kernel *k, const char *rule)
{
    fg_buf b = {0};
    fg_buf_printf(&b, "%s\n", rule);
    const char *tl = strstr(k->source, "//   tile:");
    if (tl)
        fg_buf_putn(&b, tl, strcspn(tl, "\n"));
    for (const char *s = strstr(k->source, "\n    const fg_i64 "); s; s = strstr(s + 1, "\n    const fg_i64 "))
        fg_buf_putn(&b, s, strcspn(s + 1, "\n") + 1);
    return fg_buf_take(&b);
}

/* ResNet-50 in dtype dt, NHWC, with precision prec: the SASS of its conv2d_tc kernels. */
static void check_resnet50_sass(fg_dtype dt, fg_precision prec)
{
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
    printf("tools: %s/nvdisasm, %s/cuobjdump\n", disasm, objdump);

    setenv("FUSEGEN_CACHE", "off", 1);   /* compile for real */
    fg_context *ctx = tu_ctx_shipped();
    fg_graph *g = NULL;
    fg_status st = fg_graph_load(ctx, tu_src("examples/resnet50.yaml"), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    for (int t = 0; t < g->ntensors; t++) {
        g->tensors[t].dtype = dt;
        g->tensors[t].layout = FG_LAYOUT_NHWC;
    }
    assert_int_equal(fg_graph_set_precision(ctx, g, prec), FG_OK);
    const int epc = dt == FG_DTYPE_F32 ? 4 : 8;
    fg_plan *p = NULL;
    st = fg_plan_build(ctx, g, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);

    /* the dense convolutions and their kernels (identical sources once) */
    fg_kernel ks[128];
    char *sigs[128];
    int nk = 0, dense = 0, on_tc = 0;
    const fg_graph *pg = p->graph;
    for (int i = 0; i < p->ngroups; i++) {
        const fg_group *grp = &p->groups[i];
        if (grp->anchor < 0 || pg->nodes[grp->anchor].op->kind != FG_OPK_CONV2D)
            continue;
        const fg_node *nd = &pg->nodes[grp->anchor];
        if (fg_node_attr(nd, "groups") && fg_node_attr_int(nd, "groups", 0) != 1)
            continue;
        dense++;
        int64_t C = pg->tensors[nd->inputs[0]].shape[1];
        if (C % epc) {
            assert_string_equal(grp->template_name, "conv2d");
            printf("%s: C = %lld, direct conv2d\n", nd->name, (long long)C);
            continue;
        }
        assert_string_equal(grp->template_name, "conv2d_tc");
        on_tc++;
        fg_kernel k;
        st = fg_emit_group(ctx, p, i, NULL, &k);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        /* kernels of the same rule, tile and shapes differ only in names: compile one */
        char *sig = signature(&k, ctx->rules[grp->rule]->name);
        int dup = 0;
        for (int j = 0; j < nk && !dup; j++)
            dup = strcmp(sigs[j], sig) == 0;
        if (dup || nk == 128) {
            assert_true(dup);
            fg_kernel_free(&k);
            free(sig);
            continue;
        }
        sigs[nk] = sig;
        ks[nk++] = k;
    }
    printf("resnet50 %s NHWC precision %s: %d dense convolutions, %d on conv2d_tc, %d distinct (rule, tile, shapes)\n",
           fg_dtype_name(dt), fg_precision_name(prec), dense, on_tc, nk);
    assert_int_equal(dense, 53);
    assert_int_equal(on_tc, 52);

    char *dir = tu_tmpdir();
    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info *infos = fg_xcalloc((size_t)nk, sizeof *infos);
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        st = fg_jit_compile_all(ctx, ks, nk, archs[a], infos);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        printf("%s: %-28s %-20s %4s %6s %5s %5s %6s %4s %4s\n", archs[a], "kernel", "tile", "REG", "SHARED", "HMMA",
               "LDSM", "LDGSTS", "LDL", "STL");
        for (int i = 0; i < nk; i++) {
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
            int hmma = count_op(sass, "HMMA"), ldsm = count_op(sass, "LDSM"), ldgsts = count_op(sass, "LDGSTS");
            int ldl = count_op(sass, "LDL"), stl = count_op(sass, "STL");
            long reg = res_field(res, "REG:"), stack = res_field(res, "STACK:"), shared = res_field(res, "SHARED:");
            long local = res_field(res, "LOCAL:");
            const char *tl = strstr(ks[i].source, "//   tile:");
            char tile[40] = "?";
            if (tl)
                sscanf(tl + strlen("//   tile:"), " %31[0-9 x]", tile);
            const char *sk = tl ? strstr(tl, "split-K ") : NULL;
            if (sk)
                snprintf(tile + strlen(tile), sizeof tile - strlen(tile), "/%d", atoi(sk + 8));
            /* fp32: the tf32 mma and nothing else */
            int tf32_ok = dt != FG_DTYPE_F32 || (strstr(sass, "HMMA.1688.F32.TF32") && !strstr(sass, "HMMA.16816"));
            printf("%s: %-28s %-20s %4ld %6ld %5d %5d %6d %4d %4d\n", archs[a], ks[i].name, tile, reg, shared, hmma,
                   ldsm, ldgsts, ldl, stl);
            if (!hmma || !ldsm || !ldgsts || ldl || stl || stack != 0 || local != 0 || !tf32_ok) {
                fprintf(stderr, "%s (%s): HMMA %d, LDSM %d, LDGSTS %d, LDL %d, STL %d, STACK %ld, LOCAL %ld\n%s\n",
                        ks[i].name, archs[a], hmma, ldsm, ldgsts, ldl, stl, stack, local, res);
                failures++;
            }
            free(sass);
            free(res);
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < nk; i++) {
        fg_kernel_free(&ks[i]);
        free(sigs[i]);
    }
    free(infos);
    tu_rmtree(dir);
    free(dir);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_resnet50_fp16_nhwc_sass(void **state)
{
    (void)state;
    check_resnet50_sass(FG_DTYPE_F16, FG_PRECISION_EXACT);
}

static void test_resnet50_fp32_tf32_nhwc_sass(void **state)
{
    (void)state;
    check_resnet50_sass(FG_DTYPE_F32, FG_PRECISION_TF32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_fp16_nhwc_sass),
        cmocka_unit_test(test_resnet50_fp32_tf32_nhwc_sass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
