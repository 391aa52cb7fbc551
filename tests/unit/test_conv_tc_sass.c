/*
 * test_conv_tc_sass.c -- the machine code of the tensor-core convolution,
 * read without a GPU.  ResNet-50 (examples/resnet50.yaml) in fp16 NHWC, and
 * in fp32 NHWC with precision tf32, is planned with the shipped rules (batch
 * 1: most layers take split-K); every dense convolution must run on
 * conv2d_tc, the 7x7 stem (C = 3) included, gathered element by element.
 * In fp32 the mma must be the tf32 one (HMMA.1688.F32.TF32).  Those kernels
 * are compiled by NVRTC for sm_80 and sm_90 (no warnings), and each cubin's
 * SASS (nvdisasm) must hold tensor-core mma (HMMA), ldmatrix (LDSM) and
 * cp.async (LDGSTS; not the gathered stem, whose element loads of a tile
 * must all be in flight together -- one run of LDG with no branch or shared
 * store between them -- and land in 16-byte shared stores), and no local memory: no
 * LDL / STL, and cuobjdump -res-usage reports STACK:0 and LOCAL:0.  A table
 * of the instruction counts and resources is printed.
 *
 * The tools are not part of every CUDA toolkit; pip installs them
 * (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump; .ci/run does), found as
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

/* The longest run of global loads (LDG) in SASS text with no branch, shared
 * store or barrier between them: the loads a thread has in flight together
 * before it waits for any of them. */
static int longest_load_run(const char *sass)
{
    int run = 0, best = 0;
    for (const char *l = sass; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        size_t n = strcspn(l, "\n");
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
        if (strstr(line, " LDG.") || strstr(line, "\tLDG."))
            best = ++run > best ? run : best;
        else if (strstr(line, "BRA") || strstr(line, "STS") || strstr(line, "BAR.") || strstr(line, "EXIT"))
            run = 0;
    }
    return best;
}

/* Occurrences of opcode op in SASS text. */
static int count_op(const char *sass, const char *op)
{
    int n = 0;
    for (const char *t = sass ? strstr(sass, op) : NULL; t; t = strstr(t + 1, op))
        n++;
    return n;
}

/* A gathered kernel's loads of one reduction tile: (BM + BN) rows of 4 chunks
 * over the block's threads, EPC elements each (the tile line's numbers). */
static int gather_loads_per_tile(const fg_kernel *k, int epc)
{
    const char *tl = strstr(k->source, "//   tile:");
    int bm = 0, bn = 0, bk = 0, stages = 0, threads = 0;
    if (!tl || sscanf(tl + strlen("//   tile:"), " %d x %d x %d, %d stages, %d threads", &bm, &bn, &bk, &stages,
                      &threads) != 5 || threads <= 0)
        return -1;
    return (bm + bn) * 4 / threads * epc;
}

/* ResNet-50 in dtype dt, NHWC, with precision prec: the SASS of its conv2d_tc kernels. */
static void check_resnet50_sass(fg_dtype dt, fg_precision prec)
{
    if (!tu_cuda_tools_found("SASS check"))
        skip();

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
    assert_int_equal(on_tc, 53);

    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info *infos = fg_xcalloc((size_t)nk, sizeof *infos);
    int failures = 0;
    for (int a = 0; a < 2; a++) {
        st = fg_jit_compile_all(ctx, ks, nk, archs[a], infos);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        printf("%s: %-28s %-20s %4s %6s %5s %5s %6s %4s %4s %5s %5s\n", archs[a], "kernel", "tile", "REG", "SHARED",
               "HMMA", "LDSM", "LDGSTS", "LDL", "STL", "LDG16", "STG16");
        for (int i = 0; i < nk; i++) {
            if (infos[i].log[0]) {
                fprintf(stderr, "%s (%s): NVRTC log:\n%s\n", ks[i].name, archs[a], infos[i].log);
                failures++;
            }
            fg_res_usage ru;
            fg_sass_mix mx;
            char *sass = NULL;
            tu_cubin_read(&ks[i], &ru, &mx, &sass);
            const char *tl = strstr(ks[i].source, "//   tile:");
            char tile[40] = "?";
            if (tl)
                sscanf(tl + strlen("//   tile:"), " %31[0-9 x]", tile);
            const char *sk = tl ? strstr(tl, "split-K ") : NULL;
            if (sk)
                snprintf(tile + strlen(tile), sizeof tile - strlen(tile), "/%d", atoi(sk + 8));
            /* fp32: the tf32 mma and nothing else */
            int tf32_ok = dt != FG_DTYPE_F32 || (strstr(sass, "HMMA.1688.F32.TF32") && !strstr(sass, "HMMA.16816"));
            printf("%s: %-28s %-20s %4d %6d %5d %5d %6d %4d %4d %5d %5d\n", archs[a], ks[i].name, tile, ru.registers,
                   ru.shared, mx.hmma, mx.ldsm, mx.ldgsts, mx.ldl, mx.stl, mx.ldg128, mx.stg128);
            /* cp.async moves 16 bytes: a gathered stem (C = 3) has none; its gather
             * issues all of a tile's element loads together (no loop of dependent
             * loads and stores) and stores each chunk with one 16-byte shared store */
            int gather = strstr(ks[i].source, "element gather") != NULL;
            if (gather) {
                int want = gather_loads_per_tile(&ks[i], dt == FG_DTYPE_F32 ? 4 : 8);
                int run = longest_load_run(sass), sts128 = count_op(sass, "STS.128"), sts16 = count_op(sass, "STS.U16");
                printf("%s: %s gathers: %d loads in flight together (a tile's %d), %d STS.128, %d STS.U16\n", archs[a],
                       ks[i].name, run, want, sts128, sts16);
                if (want <= 0 || run < want || sts128 == 0 || sts16 != 0) {
                    fprintf(stderr, "%s (%s): serial gather (load run %d < %d, STS.128 %d, STS.U16 %d)\n", ks[i].name,
                            archs[a], run, want, sts128, sts16);
                    failures++;
                }
            }
            /* every convolution here has K a multiple of 8 and an epilogue input (the
             * folded BN's bias; the residual of conv_bn_add_act): the quad-transposed
             * epilogue reads them with 16-byte loads and stores 16 bytes a lane */
            int vec_ok = strstr(ks[i].source, "fg_epilogue8(p, a, ") && mx.ldg128 > 0 && mx.stg128 > 0;
            if (!vec_ok)
                fprintf(stderr, "%s (%s): epilogue not vectorized (LDG.E.128 %d, STG.E.128 %d)\n", ks[i].name,
                        archs[a], mx.ldg128, mx.stg128);
            if (!mx.hmma || !mx.ldsm || (!mx.ldgsts && !gather) || mx.ldl || mx.stl || ru.stack != 0 || ru.local != 0 || !tf32_ok ||
                !vec_ok) {
                fprintf(stderr, "%s (%s): HMMA %d, LDSM %d, LDGSTS %d, LDL %d, STL %d, STACK %d, LOCAL %d\n",
                        ks[i].name, archs[a], mx.hmma, mx.ldsm, mx.ldgsts, mx.ldl, mx.stl, ru.stack, ru.local);
                failures++;
            }
            free(sass);
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < nk; i++) {
        fg_kernel_free(&ks[i]);
        free(sigs[i]);
    }
    free(infos);
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
