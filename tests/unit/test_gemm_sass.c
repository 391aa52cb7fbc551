/*
 * test_gemm_sass.c -- the machine code of the gemm kernels, read without a
 * GPU.  Transformer-MLP shaped matmuls (bias + GELU, both forms, residual),
 * batched and transposed ones, every gemm_tc block tile and pipeline depth,
 * and the fp32 SIMT gemm are planned with the shipped rules (tiles by a hook
 * for the tile sweep), compiled by NVRTC for sm_80 and sm_90 with no
 * warnings, and each cubin's SASS (nvdisasm) must show:
 *   - gemm_tc and gemm_tc_splitk: tensor-core mma (HMMA), ldmatrix (LDSM;
 *     not required of tf32, whose [K, N] B is read element by element), and
 *     cp.async (LDGSTS) when the operands are copied as 16-byte chunks;
 *   - fp16 / bf16 and tf32 matmuls on tensor cores, exact fp32 not; the
 *     M = 1 classifier and M = 16 shapes on split-K;
 *   - gemv (exact fp32, M <= 16): no HMMA, 128-bit global loads
 *     (LDG.E.128) where the contiguous axis of B is a multiple of 4;
 *   - every gemm kernel: no local memory -- no LDL / STL, and cuobjdump
 *     -res-usage reports STACK:0 and LOCAL:0 (the GELU epilogue included).
 * A table of the instruction counts and resources is printed.
 *
 * nvdisasm and cuobjdump come from the toolkit or from pip
 * (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump), found as
 * runtime/cuda_tools.h says.  Without them the test is skipped and says so
 * ("SASS check NOT RUN").
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

typedef struct sass_case {
    const char *name, *dtype;
    const char *body;      /* graph after the header */
    const char *tiles;     /* tile hook result ("tile_m = 64, ...") or NULL: the shipped rules */
} sass_case;

#define MLP(M, K, N, ACT)                                                                                        \
    "inputs: [{ name: x, shape: [" #M ", " #K "] }]\n"                                                          \
    "weights: [{ name: w, shape: [" #K ", " #N "] }, { name: b, shape: [" #N "] }]\n"                         \
    "nodes:\n  - { name: mm, op: matmul, inputs: [x, w] }\n  - { name: s, op: add, inputs: [mm, b] }\n"       \
    "  - { name: y, op: " #ACT ", inputs: [s] }\noutputs: [y]\n"

static const sass_case cases[] = {
    {"mlp_4096x768x3072_gelu", "fp16", MLP(4096, 768, 3072, gelu), NULL},
    {"mlp_64x768x3072_gelu_tanh", "bf16", MLP(64, 768, 3072, gelu_tanh), NULL},
    {"mlp_16x3072x768_gelu", "fp16", MLP(16, 3072, 768, gelu), NULL},
    {"mlp_512x768x3072_relu_fp32", "fp32", MLP(512, 768, 3072, relu), NULL},
    {"mlp_64x768x3072_gelu_fp32", "fp32", MLP(64, 768, 3072, gelu), NULL},
    {"attn_batched_transposed", "fp16",
     "inputs: [{ name: q, shape: [2, 12, 64, 64] }, { name: k, shape: [2, 12, 64, 64] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"ta_kn_residual_gelu", "bf16",
     "inputs: [{ name: a, shape: [256, 128] }, { name: r, shape: [128, 512] }]\n"
     "weights: [{ name: w, shape: [256, 512] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, w], attrs: { trans_a: true } }\n"
     "  - { name: s, op: add, inputs: [mm, r] }\n  - { name: y, op: gelu, inputs: [s] }\noutputs: [y]\n",
     NULL},
    {"odd_element_loads", "fp16", MLP(100, 77, 33, gelu), NULL},
    {"tf32_mlp_512x768x3072_gelu", "tf32", MLP(512, 768, 3072, gelu), NULL},
    {"tf32_attn_batched_transposed", "tf32",
     "inputs: [{ name: q, shape: [2, 12, 64, 64] }, { name: k, shape: [2, 12, 64, 64] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"splitk_classifier_1x2048x1000", "fp16", MLP(1, 2048, 1000, relu), NULL},
    {"splitk_16x3072x768_gelu_bf16", "bf16", MLP(16, 3072, 768, gelu), NULL},
    {"splitk_tf32_1x2048x1000", "tf32", MLP(1, 2048, 1000, relu), NULL},
    {"gemv_fc_1x2048x1000", "fp32", MLP(1, 2048, 1000, relu), NULL},
    {"gemv_16x1280x1000_gelu", "fp32", MLP(16, 1280, 1000, gelu), NULL},
    {"gemv_tb_1x2048x1000", "fp32",
     "inputs: [{ name: a, shape: [1, 2048] }]\n"
     "weights: [{ name: w, shape: [1000, 2048] }, { name: b, shape: [1000] }]\n"
     "nodes:\n  - { name: mm, op: gemm, inputs: [a, w, b], attrs: { trans_b: true } }\noutputs: [mm]\n",
     NULL},
    {"gemv_tb_7x2048x1000_ta", "fp32",
     "inputs: [{ name: a, shape: [2048, 7] }]\n"
     "weights: [{ name: w, shape: [1000, 2048] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, w], attrs: { trans_a: true, trans_b: true } }\n"
     "outputs: [mm]\n",
     NULL},
    {"gemv_odd_7x13x7", "fp32", MLP(7, 13, 7, relu), NULL},
    {"gemv_odd_tb_ta_batched", "fp32",
     "inputs: [{ name: a, shape: [2, 13, 3] }, { name: r, shape: [2, 3, 7] }]\n"
     "weights: [{ name: w, shape: [7, 13] }]\n"
     "nodes:\n  - { name: mm, op: matmul, inputs: [a, w], attrs: { trans_a: true, trans_b: true } }\n"
     "  - { name: s, op: add, inputs: [mm, r] }\n  - { name: y, op: gelu_tanh, inputs: [s] }\noutputs: [y]\n",
     NULL},
    {"tile_128x128_3", "fp16", MLP(512, 256, 512, gelu), "tile_m = 128, tile_n = 128, stages = 3"},
    {"tile_128x64_4", "fp16", MLP(512, 256, 512, gelu), "tile_m = 128, tile_n = 64, stages = 4"},
    {"tile_64x128_4", "fp16", MLP(512, 256, 512, gelu), "tile_m = 64, tile_n = 128, stages = 4"},
    {"tile_64x64_3", "fp16", MLP(512, 256, 512, gelu), "tile_m = 64, tile_n = 64, stages = 3"},
    {"tile_32x64_4", "bf16", MLP(512, 256, 512, gelu), "tile_m = 32, tile_n = 64, stages = 4"},
    {"tile_32x32_4", "bf16", MLP(512, 256, 512, gelu), "tile_m = 32, tile_n = 32, stages = 4"},
};

/* Plans case c to one kernel and emits it into *k. */
static void emit_case(const sass_case *c, fg_kernel *k)
{
    fg_context *ctx;
    char *dir = NULL;
    if (c->tiles) {
        char lua[200];
        dir = tu_vocab_dir();
        free(tu_write(dir, "rules.yaml",
                      "rule: mlp\nhooks: tiles.lua\nmatch:\n  - mm: { kind: matmul }\n  - add: { op: add }\n"
                      "  - act: { op: [relu, gelu, gelu_tanh] }\n"
                      "kernel:\n  template: gemm\n  params: tiles\n  epilogue:\n    - apply: add\n"
                      "    - apply: act\n"));
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { %s }\nend\n", c->tiles);
        free(tu_write(dir, "tiles.lua", lua));
        ctx = tu_ctx_empty();
        assert_int_equal(fg_rules_load(ctx, dir), FG_OK);
    } else {
        ctx = tu_ctx_shipped();
    }
    char text[2048];
    int tf32 = strcmp(c->dtype, "tf32") == 0;
    snprintf(text, sizeof text, "graph: %s\nseed: 1\ndtype: %s\n%s%s", c->name, tf32 ? "fp32" : c->dtype,
             tf32 ? "precision: tf32\n" : "", c->body);
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
    st = fg_emit_group(ctx, p, 0, NULL, k);
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

static void test_gemm_sass(void **state)
{
    (void)state;
    if (!tu_cuda_tools_found("SASS check"))
        skip();
    setenv("FUSEGEN_CACHE", "off", 1);   /* compile for real */

    enum { NK = sizeof cases / sizeof *cases };
    fg_kernel ks[NK];
    for (int i = 0; i < NK; i++)
        emit_case(&cases[i], &ks[i]);

    fg_context *ctx = tu_ctx_empty();
    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info infos[NK];
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        memset(infos, 0, sizeof infos);
        fg_status st = fg_jit_compile_all(ctx, ks, NK, archs[a], infos);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        printf("%s: %-28s %-8s %4s %6s %5s %5s %6s %4s %4s  %s\n", archs[a], "case", "template", "REG", "SHARED",
               "HMMA", "LDSM", "LDGSTS", "LDL", "STL", "tile");
        printf("%s: (gemv rows add LDG.E.128: the 128-bit global loads)\n", archs[a]);
        for (int i = 0; i < NK; i++) {
            if (infos[i].log[0]) {
                fprintf(stderr, "%s (%s): NVRTC log:\n%s\n", cases[i].name, archs[a], infos[i].log);
                failures++;
            }
            fg_res_usage ru;
            fg_sass_mix mx;
            tu_cubin_read(&ks[i], &ru, &mx, NULL);
            int tc = strstr(ks[i].source, "template:  gemm_tc") != NULL;   /* gemm_tc, gemm_tc_splitk */
            int gv = strstr(ks[i].source, "template:  gemv") != NULL;
            int vec = strstr(ks[i].source, "16-byte cp.async loads") != NULL;
            const int hmma = mx.hmma, ldsm = mx.ldsm, ldgsts = mx.ldgsts, ldl = mx.ldl, stl = mx.stl;
            const int reg = ru.registers, shared = ru.shared, stack = ru.stack, local = ru.local;
            const char *tl = strstr(ks[i].source, "//   tile:");
            char tile[48] = "?";
            if (tl) {
                tl += strlen("//   tile:");
                tl += strspn(tl, " ");
                snprintf(tile, sizeof tile, "%.*s", (int)strcspn(tl, ",\n"), tl);
            }
            const int ldg128 = mx.ldg128;
            printf("%s: %-28s %-8s %4d %6d %5d %5d %6d %4d %4d  %s", archs[a], cases[i].name,
                   tc ? "gemm_tc" : gv ? "gemv" : "gemm", reg, shared, hmma, ldsm, ldgsts, ldl, stl, tile);
            if (gv)
                printf(" LDG.E.128 %d", ldg128);
            printf("\n");
            int bad = ldl || stl || stack != 0 || local != 0;
            int tf32 = strcmp(cases[i].dtype, "tf32") == 0;
            if (tc)   /* tf32 reads [K, N] B element by element (ldmatrix .trans moves 16-bit halves) */
                bad |= !hmma || (!tf32 && !ldsm) || (vec && !ldgsts);
            else
                bad |= hmma != 0;
            if (strcmp(cases[i].dtype, "fp32") != 0)
                bad |= !tc;
            if (strncmp(cases[i].name, "gemv", 4) == 0)   /* the aligned ones load 16 bytes of B at once */
                bad |= !gv || (strstr(ks[i].source, "16-byte loads of B") != NULL) != (ldg128 > 0) ||
                       (strstr(cases[i].name, "odd") == NULL && ldg128 == 0);
            if (strncmp(cases[i].name, "splitk", 6) == 0)
                bad |= !strstr(ks[i].source, "template:  gemm_tc_splitk");
            if (bad) {
                fprintf(stderr, "%s (%s): HMMA %d, LDSM %d, LDGSTS %d, LDL %d, STL %d, STACK %d, LOCAL %d\n",
                        cases[i].name, archs[a], hmma, ldsm, ldgsts, ldl, stl, stack, local);
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < NK; i++)
        fg_kernel_free(&ks[i]);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_sass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
