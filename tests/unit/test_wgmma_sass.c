/*
 * test_wgmma_sass.c -- the machine code of the Hopper gemm (gemm_wgmma),
 * read without a GPU.  Matmuls planned for arch sm_90 with the shipped rules
 * (and a tile hook for BN 256) -- fp16 and bf16, B stored [K, N] (N-major for
 * wgmma) and [N, K] (K-major), BN 64, 128 and 256, batched A with a shared
 * B, bias / GELU / residual epilogues -- are compiled by NVRTC, which the JIT
 * targets at sm_90a for these kernels (the kernel's arch_specific flag), with
 * no warnings; each cubin's SASS (nvdisasm) must show warpgroup MMA (HGMMA),
 * TMA loads (UTMALDG) and mbarrier operations (SYNCS), and cuobjdump
 * -res-usage no stack frame and no local memory (no spills; no LDL / STL).
 * A table of the instruction counts and resources is printed.  Two
 * convolutions (conv2d_wgmma, NHWC, ResNet-50's stage 2 at batch 32: the 1x1
 * conv3 with BN + residual add + relu, and the 3x3 conv2 with BN + relu,
 * whose warpgroups also zero padding rows) are compiled and
 * checked the same way, and in tf32 (fp32 with precision tf32) a [N, K] gemm
 * and the 3x3 conv, whose HGMMA must read TF32 operands.  Two strided
 * convolutions (stage 3's 3x3 stride-2 conv2, stage 4's 1x1 stride-2
 * downsample: pixel tiles) must load their input with 4-D TMA boxes
 * (UTMALDG.4D).  The stride-2 3x3 (98 tiles for 132 SMs) runs split-K: its
 * reduction must not spill either.  Every BN 64 and BN 128 kernel must fit
 * two blocks an SM: 256 threads, at most 128 registers, two blocks' shared
 * memory (dynamic, static and 1 KiB reserved each) within 228 KiB.
 *
 * nvdisasm and cuobjdump as in test_gemm_sass.c (the toolkit or pip);
 * without them the test is skipped and says so ("SASS check NOT RUN").
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

/* The directory holding executable `tool` ("" when none), in buf. */
static void find_tool(const char *tool, char *buf, size_t size)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "for d in \"$FUSEGEN_CUDA_TOOLS\" $(dirname \"$(command -v %s 2>/dev/null)\" 2>/dev/null) "
             "/usr/local/cuda/bin $(python3 -c 'import glob, os, site\n"
             "roots = site.getsitepackages() + [site.getusersitepackages()]\n"
             "print(\" \".join(os.path.dirname(p) for r in roots for p in "
             "sorted(glob.glob(os.path.join(r, \"nvidia\", \"*\", \"bin\", \"%s\")))))' 2>/dev/null); do "
             "if [ -n \"$d\" ] && [ -x \"$d/%s\" ]; then printf '%%s' \"$d\"; break; fi; done",
             tool, tool, tool);
    buf[0] = 0;
    if (tu_run(cmd, &out) == 0 && out)
        snprintf(buf, size, "%s", out);
    free(out);
}

/* Instructions with opcode op (op, op.MODIFIER) in SASS text. */
static int opcount(const char *sass, const char *op)
{
    int n = 0;
    size_t len = strlen(op);
    for (const char *s = strstr(sass, op); s; s = strstr(s + 1, op)) {
        char before = s > sass ? s[-1] : ' ';
        if ((before == ' ' || before == '\t' || before == ';' || before == '}') && (s[len] == '.' || s[len] == ' '))
            n++;
    }
    return n;
}

/* Occurrences of text in SASS text. */
static int textcount(const char *sass, const char *text)
{
    int n = 0;
    for (const char *s = strstr(sass, text); s; s = strstr(s + 1, text))
        n++;
    return n;
}

/* The number after "key" in cuobjdump -res-usage text, or -1. */
static long resource(const char *text, const char *key)
{
    const char *s = strstr(text, key);
    return s ? strtol(s + strlen(key), NULL, 10) : -1;
}

typedef struct sass_case {
    const char *name, *dtype;
    const char *body;      /* graph after the header */
    const char *tiles;     /* tile hook result ("tile_n = 256") or NULL: the shipped rules */
    const char *tmpl;      /* the template planned: NULL for gemm_wgmma */
    int unspecialized;     /* shapes as kernel parameters */
} sass_case;

#define MLP(M, K, N, ACT)                                                                                        \
    "inputs: [{ name: x, shape: [" #M ", " #K "] }]\n"                                                          \
    "weights: [{ name: w, shape: [" #K ", " #N "] }, { name: b, shape: [" #N "] }]\n"                         \
    "nodes:\n  - { name: mm, op: matmul, inputs: [x, w] }\n  - { name: s, op: add, inputs: [mm, b] }\n"       \
    "  - { name: y, op: " #ACT ", inputs: [s] }\noutputs: [y]\n"

/* ResNet-50 s3 conv2 at batch 32: a 3x3 stride-2 conv 256 -> 256 from 28 x 28, padding 1, folded BN, relu */
#define CONV3X3_S2                                                                                                  \
    "layout: NHWC\n"                                                                                                \
    "inputs: [{ name: x, shape: [32, 256, 28, 28] }]\n"                                                             \
    "weights: [{ name: w, shape: [256, 256, 3, 3] }, { name: g, shape: [256], init: positive },\n"                  \
    "          { name: be, shape: [256] }, { name: mu, shape: [256] }, { name: var, shape: [256], init: positive }]\n" \
    "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2], padding: [1, 1] } }\n"         \
    "  - { name: bn, op: batch_norm, inputs: [conv, g, be, mu, var] }\n"                                            \
    "  - { name: y, op: relu, inputs: [bn] }\noutputs: [y]\n"

static const sass_case cases[] = {
    {"mlp_4096x768x3072_gelu_kn", "fp16", MLP(4096, 768, 3072, gelu), NULL},
    {"mlp_4096x768x3072_gelu_kn_bf16", "bf16", MLP(4096, 768, 3072, gelu), NULL},
    {"gemm_nk_bias_2048x4096x11008", "bf16",
     "inputs: [{ name: a, shape: [2048, 4096] }]\n"
     "weights: [{ name: w, shape: [11008, 4096] }, { name: b, shape: [11008] }]\n"
     "nodes:\n  - { name: mm, op: gemm, inputs: [a, w, b], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"narrow_bn64_nk_8448x256x64", "fp16",
     "inputs: [{ name: a, shape: [8448, 256] }]\n"
     "weights: [{ name: w, shape: [64, 256] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, w], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"batched_residual_gelu_tanh", "bf16",
     "inputs: [{ name: a, shape: [4, 512, 768] }, { name: r, shape: [4, 512, 3072] }]\n"
     "weights: [{ name: w, shape: [768, 3072] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, w] }\n"
     "  - { name: s, op: add, inputs: [mm, r] }\n  - { name: y, op: gelu_tanh, inputs: [s] }\noutputs: [y]\n",
     NULL},
    {"bn256_kn_gelu", "fp16", MLP(4096, 768, 3072, gelu), "tile_n = 256"},
    {"bn256_nk_relu_bf16", "bf16",
     "inputs: [{ name: x, shape: [4096, 1024] }]\n"
     "weights: [{ name: w, shape: [4096, 1024] }, { name: b, shape: [4096] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [x, w], attrs: { trans_b: true } }\n"
     "  - { name: s, op: add, inputs: [mm, b] }\n  - { name: y, op: relu, inputs: [s] }\noutputs: [y]\n",
     "tile_n = 256"},
    /* ResNet-50 s2 conv3, batch 32: 1x1 conv 128 -> 512 on 28 x 28, folded BN, residual add, relu */
    {"conv1x1_bn_add_relu_32x28x28", "fp16",
     "layout: NHWC\n"
     "inputs: [{ name: x, shape: [32, 128, 28, 28] }, { name: r, shape: [32, 512, 28, 28] }]\n"
     "weights: [{ name: w, shape: [512, 128, 1, 1] }, { name: g, shape: [512], init: positive },\n"
     "          { name: be, shape: [512] }, { name: mu, shape: [512] }, { name: var, shape: [512], init: positive }]\n"
     "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w] }\n"
     "  - { name: bn, op: batch_norm, inputs: [conv, g, be, mu, var] }\n"
     "  - { name: add, op: add, inputs: [bn, r] }\n  - { name: y, op: relu, inputs: [add] }\noutputs: [y]\n",
     NULL, "conv2d_wgmma"},
    /* ResNet-50 s2 conv2, batch 32: 3x3 conv 128 -> 128 on 28 x 28, padding 1, folded BN, relu (taps) */
    {"conv3x3_bn_relu_32x28x28", "bf16",
     "layout: NHWC\n"
     "inputs: [{ name: x, shape: [32, 128, 28, 28] }]\n"
     "weights: [{ name: w, shape: [128, 128, 3, 3] }, { name: g, shape: [128], init: positive },\n"
     "          { name: be, shape: [128] }, { name: mu, shape: [128] }, { name: var, shape: [128], init: positive }]\n"
     "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [conv, g, be, mu, var] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\noutputs: [y]\n",
     NULL, "conv2d_wgmma"},
    /* ResNet-50 s3 conv2, batch 32: 3x3 stride 2 conv 256 -> 256 from 28 x 28, padding 1, folded BN, relu
     * (pixel tiles: 4-D TMA boxes stepping by the stride) */
    {"conv3x3_s2_bn_relu_32x28x28", "fp16",
     CONV3X3_S2,
     NULL, "conv2d_wgmma"},
    /* ResNet-50 s4 downsample, batch 32: 1x1 stride 2 conv 1024 -> 2048 from 14 x 14, folded BN (bf16) */
    {"conv1x1_s2_bn_32x14x14", "bf16",
     "layout: NHWC\n"
     "inputs: [{ name: x, shape: [32, 1024, 14, 14] }]\n"
     "weights: [{ name: w, shape: [2048, 1024, 1, 1] }, { name: g, shape: [2048], init: positive },\n"
     "          { name: be, shape: [2048] }, { name: mu, shape: [2048] }, { name: var, shape: [2048], init: positive }]\n"
     "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2] } }\n"
     "  - { name: y, op: batch_norm, inputs: [conv, g, be, mu, var] }\noutputs: [y]\n",
     NULL, "conv2d_wgmma"},
    /* the stride-2 3x3 with its shapes as kernel parameters (tile counts, strides, padding divided at run time) */
    {"conv3x3_s2_bn_relu_unspec", "bf16",
     CONV3X3_S2,
     NULL, "conv2d_wgmma", 1},
    /* tf32 (fp32 planned with precision tf32): a [N, K] gemm and the 3x3 conv */
    {"tf32_gemm_nk_bias_2048x4096x4096", "fp32",
     "precision: tf32\n"
     "inputs: [{ name: a, shape: [2048, 4096] }]\n"
     "weights: [{ name: w, shape: [4096, 4096] }, { name: b, shape: [4096] }]\n"
     "nodes:\n  - { name: mm, op: gemm, inputs: [a, w, b], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"tf32_conv3x3_bn_relu_32x28x28", "fp32",
     "precision: tf32\nlayout: NHWC\n"
     "inputs: [{ name: x, shape: [32, 128, 28, 28] }]\n"
     "weights: [{ name: w, shape: [128, 128, 3, 3] }, { name: g, shape: [128], init: positive },\n"
     "          { name: be, shape: [128] }, { name: mu, shape: [128] }, { name: var, shape: [128], init: positive }]\n"
     "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [conv, g, be, mu, var] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\noutputs: [y]\n",
     NULL, "conv2d_wgmma"},
};

/* A context planning for arch: shipped rules, or (tiles) a rule with a tile hook. */
static fg_context *arch_ctx(const char *arch, const char *tiles, char **dir)
{
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.arch = arch;
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    ctx->quiet = 1;
    *dir = NULL;
    if (tiles) {
        char lua[200];
        *dir = tu_vocab_dir();
        free(tu_write(*dir, "rules.yaml",
                      "rule: mlp\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n  - add: { op: add }\n"
                      "  - act: { op: [relu, gelu, gelu_tanh] }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  epilogue:\n    - apply: add\n"
                      "    - apply: act\n"));
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { %s }\nend\n", tiles);
        free(tu_write(*dir, "tiles.lua", lua));
        assert_int_equal(fg_rules_load(ctx, *dir), FG_OK);
    } else {
        fg_status st = fg_rules_load(ctx, tu_src("rules"));
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
    }
    return ctx;
}

/* Plans case c for sm_90 to one kernel and emits it into *k. */
static void emit_case(const sass_case *c, fg_kernel *k)
{
    char *dir;
    fg_context *ctx = arch_ctx("sm_90", c->tiles, &dir);
    char text[2048];
    snprintf(text, sizeof text, "graph: %s\nseed: 1\ndtype: %s\n%s", c->name, c->dtype, c->body);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, c->name, text, strlen(text), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_plan *p = NULL;
    st = fg_plan_build(ctx, g, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(p->ngroups, 1);
    fg_emit_opts eo = {.specialize = !c->unspecialized};
    st = fg_emit_group(ctx, p, 0, &eo, k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
    if (dir) {
        tu_rmtree(dir);
        free(dir);
    }
}

static void test_wgmma_sass(void **state)
{
    (void)state;
    char disasm[1100], objdump[1100];
    find_tool("nvdisasm", disasm, sizeof disasm);
    find_tool("cuobjdump", objdump, sizeof objdump);
    if (!disasm[0] || !objdump[0]) {
        printf("SASS check NOT RUN: nvdisasm or cuobjdump not found (pip install nvidia-cuda-nvdisasm "
               "nvidia-cuda-cuobjdump, or set FUSEGEN_CUDA_TOOLS)\n");
        fflush(stdout);
        skip();
    }
    printf("tools: %s/nvdisasm, %s/cuobjdump\n", disasm, objdump);
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile for real */

    enum { NK = sizeof cases / sizeof *cases };
    fg_kernel ks[NK];
    for (int i = 0; i < NK; i++) {
        emit_case(&cases[i], &ks[i]);
        char want[80];
        snprintf(want, sizeof want, "template:  %s (gemm_wgmma.cuh)", cases[i].tmpl ? cases[i].tmpl : "gemm_wgmma");
        if (!strstr(ks[i].source, want))
            fail_msg("%s: the kernel header lacks \"%s\"", cases[i].name, want);
        assert_true(ks[i].arch_specific);
        /* ResNet-50's stride-2 3x3 at batch 32: 98 tiles for 132 SMs, so its 36 k tiles are split */
        if (strcmp(cases[i].name, "conv3x3_s2_bn_relu_32x28x28") == 0 && !strstr(ks[i].source, "split-K 2 (18 of 36"))
            fail_msg("%s: no split-K in the kernel header", cases[i].name);
    }

    fg_context *ctx = tu_ctx_empty();
    char *dir = tu_tmpdir();
    fg_jit_info infos[NK];
    int failures = 0;
    memset(infos, 0, sizeof infos);
    fg_status st = fg_jit_compile_all(ctx, ks, NK, "sm_90", infos);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    printf("%-32s %-5s %4s %6s %5s %7s %5s %4s %4s %5s %5s  %s\n", "case (sm_90a)", "dtype", "REG", "SHARED", "HGMMA",
           "UTMALDG", "SYNCS", "LDL", "STL", "STACK", "LOCAL", "tile");
    for (int i = 0; i < NK; i++) {
        if (infos[i].log[0]) {
            fprintf(stderr, "%s: NVRTC log:\n%s\n", cases[i].name, infos[i].log);
            failures++;
        }
        char path[1200], cmd[4000], *sass = NULL, *res = NULL;
        snprintf(path, sizeof path, "%s/k%d.cubin", dir, i);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(ks[i].binary, 1, ks[i].binary_size, f), ks[i].binary_size);
        fclose(f);
        snprintf(cmd, sizeof cmd, "'%s/nvdisasm' -c '%s'", disasm, path);
        assert_int_equal(tu_run(cmd, &sass), 0);
        snprintf(cmd, sizeof cmd, "'%s/cuobjdump' -res-usage '%s'", objdump, path);
        assert_int_equal(tu_run(cmd, &res), 0);
        int hgmma = opcount(sass, "HGMMA"), utmaldg = opcount(sass, "UTMALDG"), syncs = opcount(sass, "SYNCS");
        int ldl = opcount(sass, "LDL"), stl = opcount(sass, "STL");
        long reg = resource(res, "REG:"), shared = resource(res, "SHARED:");
        long stack = resource(res, "STACK:"), local = resource(res, "LOCAL:");
        const char *tl = strstr(ks[i].source, "//   tile:");
        char tile[48] = "?";
        if (tl) {
            tl += strlen("//   tile:");
            tl += strspn(tl, " ");
            snprintf(tile, sizeof tile, "%.*s", (int)strcspn(tl, ",\n"), tl);
        }
        printf("%-32s %-5s %4ld %6ld %5d %7d %5d %4d %4d %5ld %5ld  %s, %u bytes dynamic shared, %d LDG.E.128\n",
               cases[i].name, cases[i].dtype, reg, shared, hgmma, utmaldg, syncs, ldl, stl, stack, local, tile,
               ks[i].smem, textcount(sass, "LDG.E.128"));
        /* fp32 cases run wgmma on tf32: HGMMA.64xNx8.F32.TF32 */
        int tf32_ok = strcmp(cases[i].dtype, "fp32") != 0 || textcount(sass, ".TF32") > 0;
        if (!tf32_ok)
            fprintf(stderr, "%s: no HGMMA on TF32 operands in the SASS\n", cases[i].name);
        /* strided convs (pixel tiles) load A as 4-D boxes: UTMALDG.4D */
        int pix_ok = !strstr(cases[i].name, "_s2_") || textcount(sass, "UTMALDG.4D") > 0;
        if (!pix_ok)
            fprintf(stderr, "%s: no 4-D TMA load (UTMALDG.4D) in the SASS\n", cases[i].name);
        /* the epilogue stores 16 bytes a lane (STG.E.128) */
        int stg128 = textcount(sass, "STG.E.128");
        if (!stg128)
            fprintf(stderr, "%s: no 16-byte global store (STG.E.128) in the SASS\n%s\n", cases[i].name, sass);
        /* an epilogue input along the columns (a bias, a residual) is read 16
         * bytes a lane (LDG.E.128) by fg_epilogue8 */
        int ldg128 = textcount(sass, "LDG.E.128") || !strstr(ks[i].source, "fg_load8(");
        if (strstr(cases[i].name, "_add_") && textcount(ks[i].source, "fg_load8(") < 2) {   /* bias and residual */
            fprintf(stderr, "%s: the residual is not read by a 16-byte load\n", cases[i].name);
            ldg128 = 0;
        }
        if (!ldg128)
            fprintf(stderr, "%s: no 16-byte global load (LDG.E.128) of the epilogue's inputs in the SASS\n",
                    cases[i].name);
        /* BN 64 and 128: two blocks of 256 threads an SM, so at most 128
         * registers a thread and two blocks' shared memory (dynamic, static
         * and 1 KiB reserved each) within 228 KiB */
        int two = !strstr(tile, "x 256 x");
        int fit_ok = !two || (ks[i].persistent == 2 && ks[i].block[0] == 256 && reg > 0 && reg <= 128 &&
                              2 * ((long)ks[i].smem + shared + 1024) <= 228 * 1024);
        if (!fit_ok)
            fprintf(stderr, "%s: not two blocks an SM (%u blocks, %u threads, %ld registers, %u + %ld bytes of "
                    "shared memory)\n", cases[i].name, ks[i].persistent, ks[i].block[0], reg, ks[i].smem, shared);
        if (!hgmma || !utmaldg || !syncs || ldl || stl || stack != 0 || local != 0 || !tf32_ok || !pix_ok || !stg128 ||
            !ldg128 || !fit_ok) {
            fprintf(stderr, "%s: HGMMA %d, UTMALDG %d, SYNCS %d, LDL %d, STL %d, STACK %ld, LOCAL %ld\n%s\n",
                    cases[i].name, hgmma, utmaldg, syncs, ldl, stl, stack, local, res);
            failures++;
        }
        free(sass);
        free(res);
    }
    assert_int_equal(failures, 0);

    /* the same kernel cannot be built for sm_80: a clear error, no cubin */
    fg_kernel one = {0};
    emit_case(&cases[0], &one);
    fg_jit_info info = {0};
    assert_int_not_equal(fg_jit_compile_all(ctx, &one, 1, "sm_80", &info), FG_OK);
    assert_true(tu_has_error(ctx, "needs the sm_90a target"));
    fg_kernel_free(&one);

    for (int i = 0; i < NK; i++)
        fg_kernel_free(&ks[i]);
    tu_rmtree(dir);
    free(dir);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wgmma_sass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
