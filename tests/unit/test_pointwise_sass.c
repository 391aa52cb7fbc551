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
 * nvdisasm and cuobjdump are found as runtime/cuda_tools.h says (pip
 * install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump where the toolkit lacks
 * them).  Without them the test is skipped and says so ("SASS check NOT RUN").
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
    if (!tu_cuda_tools_found("SASS check"))
        skip();
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
            fg_res_usage ru;
            fg_sass_mix mx;
            char *sass = NULL;
            tu_cubin_read(&ks[i], &ru, &mx, &sass);
            const fg_tensor *y = &p[i]->graph->tensors[p[i]->groups[0].output];
            char what[64];
            snprintf(what, sizeof what, "%d: %s %s %lld el.%s", i, fg_dtype_name(y->dtype),
                     y->rank == 4 ? fg_layout_name(y->layout) : "rank 1", (long long)fg_tensor_numel(y),
                     i == 12 || i == 13 ? " unspec." : "");
            printf("%s: %-32s %4d %9d %9d %4d %4d\n", archs[a], what, ru.registers, mx.ldg128, mx.stg128, mx.ldl,
                   mx.stl);
            if (!mx.ldg128 || !mx.stg128 || mx.ldl || mx.stl || ru.stack != 0 || ru.local != 0) {
                fprintf(stderr, "%s (%s): LDG.128 %d, STG.128 %d, LDL %d, STL %d, STACK %d, LOCAL %d\n%s\n",
                        ks[i].name, archs[a], mx.ldg128, mx.stg128, mx.ldl, mx.stl, ru.stack, ru.local, sass);
                failures++;
            }
            free(sass);
        }
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < NG; i++) {
        fg_kernel_free(&ks[i]);
        fg_plan_free(p[i]);
        fg_graph_free(g[i]);
    }
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointwise_sass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
