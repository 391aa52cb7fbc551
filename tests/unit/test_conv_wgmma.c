/*
 * test_conv_wgmma.c -- the Hopper convolution template (conv2d_wgmma:
 * gemm_wgmma's wgmma + TMA + mbarrier kernel over the NHWC input viewed as
 * [N*H*W, C] -- shifted per tap for a stride-1 "same" kernel -- or as 4-D
 * TMA boxes of pixel tiles stepping by the stride, and the weights
 * [K, R*S*C]) in emulation, against the host reference of the unfused
 * graph, and its selection.
 *
 * Numerics: ResNet-50-style convolutions planned for arch sm_90 with the
 * shipped rules (conv_bn_act, conv_bn_add_act, conv_add_act: the folded
 * BatchNorm's bias, the residual add read at (n, k, oh, ow), relu) run
 * through the executor on the emulation backend, which runs the very source
 * NVRTC compiles for sm_90a.  The shapes are the smallest that pass the
 * template's tile-count condition (at least 66 tiles of 128 pixels x BN):
 * K 64 (BN 64) and K 256 / 136 (BN 128, the last column tile partial at
 * 136), C 256 (4 k stages), 64 (one) and 72 (a partial second stage), pixel
 * counts that leave the last row tile partial, and H != W so that a swapped
 * (oh, ow) in the epilogue reads the wrong residual.  1x1 kernels, taps
 * (3x3 with padding and dilation, asymmetric padding, 1x3) and pixel tiles
 * (stride 2 3x3 and 1x1, stride 2 with dilation, strides 2 x 1, a 2x2
 * patchify conv, an unpadded 3x3, a padded 1x1).  fp16 and bf16; inputs
 * are rounded to the dtype for the reference too; tolerances (relative L2):
 * fp16 5e-3, bf16 2e-2, tf32 (fp32 with precision tf32: wgmma k8, 32
 * channels per k stage; a 1x1, a 3x3 and a stride-2 3x3 case) 5e-3.
 *
 * Mutations of the taps' padding fix-up and of the pixel tiles' box
 * coordinates and pixel order must fail.
 *
 * Selection: the template takes 1x1, 3x3, strided, unpadded and padded-1x1
 * NHWC convs for sm_90 and wins over conv2d_tc; for sm_80, a 3x3 kernel
 * with C 32, stride 9, NCHW, C not a multiple of 8 or too few tiles it
 * refuses with the check's reason (what --explain prints) and the conv runs
 * as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "emit.h"
#include "plan.h"
#include "template.h"
#include "testutil.h"

/* A context planning for arch with the shipped rules. */
static fg_context *arch_ctx(const char *arch)
{
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    o.arch = arch;
    o.device = FG_DEVICE_EMU;
    unsetenv("FUSEGEN_ARCH");
    assert_int_equal(fg_context_init(&ctx, &o), FG_OK);
    ctx->quiet = 1;
    fg_status st = fg_rules_load(ctx, tu_src("rules"));
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return ctx;
}

/* The values of attribute `key: [a, b(, c, d)]` in attrs into v (n of
 * them), or def when absent. */
static void attr_ints(const char *attrs, const char *key, int *v, int n, int def)
{
    for (int i = 0; i < n; i++)
        v[i] = def;
    const char *s = strstr(attrs, key);
    if (!s)
        return;
    int got = sscanf(s + strlen(key), ": [%d, %d, %d, %d]", &v[0], &v[1], &v[2], &v[3]);
    if (got == 2 && n == 4)   /* padding [top, left]: the same at the ends */
        v[2] = v[0], v[3] = v[1];
}

/* The graph `name` of one dtype and layout, with a conv `conv` of C -> K
 * channels on an N x H x W input (attrs: the conv's extra attributes, R x S
 * its kernel) followed by a BatchNorm, optionally a residual add of input r,
 * and relu. */
static fg_graph *conv_graph(fg_context *ctx, const char *name, const char *dtype, const char *layout, int N, int H,
                            int W, int C, int K, int R, int S, const char *attrs, int bn, int residual)
{
    char text[4096];
    int sd[4], pad[4], dil[4];
    attr_ints(attrs, "stride", sd, 2, 1);
    attr_ints(attrs, "padding", pad, 4, 0);
    attr_ints(attrs, "dilation", dil, 2, 1);
    int OH = (H + pad[0] + pad[2] - dil[0] * (R - 1) - 1) / sd[0] + 1;
    int OW = (W + pad[1] + pad[3] - dil[1] * (S - 1) - 1) / sd[1] + 1;
    int tf32 = strcmp(dtype, "tf32") == 0;   /* fp32 planned with precision tf32 */
    int n = snprintf(text, sizeof text,
                     "graph: %s\nseed: 11\ndtype: %s\n%slayout: %s\n"
                     "inputs:\n  - { name: x, shape: [%d, %d, %d, %d] }\n",
                     name, tf32 ? "fp32" : dtype, tf32 ? "precision: tf32\n" : "", layout, N, C, H, W);
    if (residual)
        n += snprintf(text + n, sizeof text - (size_t)n, "  - { name: r, shape: [%d, %d, %d, %d] }\n", N, K, OH, OW);
    n += snprintf(text + n, sizeof text - (size_t)n, "weights:\n  - { name: w, shape: [%d, %d, %d, %d] }\n", K, C, R,
                  S);
    if (bn)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "  - { name: g, shape: [%d], init: positive }\n  - { name: be, shape: [%d] }\n"
                      "  - { name: mu, shape: [%d] }\n  - { name: var, shape: [%d], init: positive }\n",
                      K, K, K, K);
    else
        n += snprintf(text + n, sizeof text - (size_t)n, "  - { name: b, shape: [%d] }\n", K);
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "nodes:\n  - { name: conv, op: conv2d, inputs: [x, w%s], attrs: { %s } }\n", bn ? "" : ", b", attrs);
    const char *last = "conv";
    if (bn) {
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "  - { name: bn, op: batch_norm, inputs: [conv, g, be, mu, var] }\n");
        last = "bn";
    }
    if (residual) {
        n += snprintf(text + n, sizeof text - (size_t)n, "  - { name: add, op: add, inputs: [%s, r] }\n", last);
        last = "add";
    }
    n += snprintf(text + n, sizeof text - (size_t)n, "  - { name: y, op: relu, inputs: [%s] }\noutputs: [y]\n", last);
    assert_true(n < (int)sizeof text);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, name, text, strlen(text), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static fg_plan *plan(fg_context *ctx, const fg_graph *g)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return p;
}

/* The template of the plan's group that holds node `name`, and its index. */
static const char *template_of(const fg_plan *p, const char *name, int *group)
{
    for (int i = 0; i < p->ngroups; i++)
        for (int j = 0; j < p->groups[i].nnodes; j++)
            if (strcmp(p->graph->nodes[p->groups[i].nodes[j]].name, name) == 0) {
                if (group)
                    *group = i;
                return p->groups[i].template_name;
            }
    return "?";
}

typedef struct num_case {
    const char *name, *dtype, *rule;
    int N, H, W, C, K, bn, residual;
    const char *expect;   /* a line of the kernel's header comment */
    int R, S;             /* the kernel: 0 for 1x1 */
    const char *attrs;    /* the conv's attributes (NULL: stride 1, no padding) */
} num_case;

static const num_case num_cases[] = {
    /* 8450 pixels (66 full row tiles + 2 rows), K 64: BN 64; C 256: 4 k stages */
    {"bn_relu_f16_2x65x65_256to64", "fp16", "conv_bn_act", 2, 65, 65, 256, 64, 1, 0, "128 x 64 x 64"},
    /* the residual add: 4230 pixels (33 row tiles + 6 rows), K 256 (two column tiles), C 64: one k stage */
    {"bn_add_relu_bf16_2x47x45_64to256", "bf16", "conv_bn_add_act", 2, 47, 45, 64, 256, 1, 1, "128 x 128 x 64"},
    /* bf16 conv + BN + relu; K 136: the second column tile holds 8 channels; C 72: a partial second k stage */
    {"bn_relu_bf16_1x69x61_72to136", "bf16", "conv_bn_act", 1, 69, 61, 72, 136, 1, 0, "4209 pixels"},
    /* fp16 conv with its own bias + residual add + relu (conv_add_act) */
    {"add_relu_f16_2x46x47_64to256", "fp16", "conv_add_act", 2, 46, 47, 64, 256, 0, 1, "4324 pixels"},
    /* taps: 3x3, padding 1; W 65, so a tap's shifted rows wrap into the
     * neighbouring image row at every row's ends, and into the other image */
    {"k3x3_bn_relu_f16_2x65x65_64to64", "fp16", "conv_bn_act", 2, 65, 65, 64, 64, 1, 0, "by each of the 9 taps", 3, 3,
     "padding: [1, 1]"},
    /* dilation 2, padding 2, C 128: two channel blocks per tap; K 136; the residual add */
    {"k3x3_d2_bn_add_relu_bf16_1x70x61_128to136", "bf16", "conv_bn_add_act", 1, 70, 61, 128, 136, 1, 1,
     "implicit-GEMM conv", 3, 3, "padding: [2, 2], dilation: [2, 2]"},
    /* asymmetric padding (top 0, left 0, bottom 2, right 2) and a 1x3 kernel (left 1, right 1) */
    {"k3x3_pad_0022_add_relu_f16_2x47x45_64to256", "fp16", "conv_add_act", 2, 47, 45, 64, 256, 0, 1,
     "by each of the 9 taps", 3, 3, "padding: [0, 0, 2, 2]"},
    {"k1x3_bn_relu_bf16_2x66x64_64to64", "bf16", "conv_bn_act", 2, 66, 64, 64, 64, 1, 0, "by each of the 3 taps", 1,
     3, "padding: [0, 1]"},
    /* tf32 (32 channels per k stage): a 1x1 conv with C 72 (a partial third stage), the residual add */
    {"bn_add_relu_tf32_2x47x45_72to256", "tf32", "conv_bn_add_act", 2, 47, 45, 72, 256, 1, 1, "128 x 128 x 32"},
    /* tf32 3x3, padding 1, C 96: three channel blocks per tap */
    {"k3x3_bn_relu_tf32_2x65x65_96to64", "tf32", "conv_bn_act", 2, 65, 65, 96, 64, 1, 0, "by each of the 9 taps", 3,
     3, "padding: [1, 1]"},
    /* pixel tiles (4-D TMA boxes stepping by the stride): ResNet's strided 3x3, 66 x 66 outputs in tiles of 2 x 8
     * x 8 pixels, the last tile of each image's rows and columns partial */
    {"k3x3_s2_bn_relu_f16_2x131x131_64to64", "fp16", "conv_bn_act", 2, 131, 131, 64, 64, 1, 0,
     "tiles of 2 x 8 x 8 output pixels", 3, 3, "stride: [2, 2], padding: [1, 1]"},
    /* the strided 1x1 (ResNet's downsample) with the residual add; C 72: the second k tile past C reads zeros */
    {"k1x1_s2_bn_add_relu_bf16_2x93x91_72to136", "bf16", "conv_bn_add_act", 2, 93, 91, 72, 136, 1, 1,
     "stepping by the stride 2x2", 1, 1, "stride: [2, 2]"},
    /* stride 2 with dilation 2, padding 2, C 128 (two channel tiles per tap), the conv's own bias, residual add */
    {"k3x3_s2_d2_add_relu_bf16_1x129x127_128to136", "bf16", "conv_add_act", 1, 129, 127, 128, 136, 0, 1,
     "(9 taps)", 3, 3, "stride: [2, 2], padding: [2, 2], dilation: [2, 2]"},
    /* stride 1 without padding: the output is smaller than the input, so no shifted rows */
    {"k3x3_valid_bn_relu_f16_2x67x69_64to64", "fp16", "conv_bn_act", 2, 67, 69, 64, 64, 1, 0,
     "stepping by the stride 1x1", 3, 3, "padding: [0, 0]"},
    /* a padded 1x1 conv: its border pixels see only zeros (the bias alone) */
    {"k1x1_pad1_bn_relu_f16_2x65x63_64to64", "fp16", "conv_bn_act", 2, 65, 63, 64, 64, 1, 0, "(1 taps)", 1, 1,
     "padding: [1, 1]"},
    /* strides 2 x 1 with a 1x3 kernel: different steps along the two axes */
    {"k1x3_s2x1_bn_relu_bf16_2x131x66_64to64", "bf16", "conv_bn_act", 2, 131, 66, 64, 64, 1, 0,
     "stepping by the stride 2x1", 1, 3, "stride: [2, 1], padding: [0, 1]"},
    /* a 2x2 stride-2 patchify conv on 3 images, K 136 */
    {"k2x2_s2_bn_relu_f16_3x106x98_64to136", "fp16", "conv_bn_act", 3, 106, 98, 64, 136, 1, 0, "(4 taps)", 2, 2,
     "stride: [2, 2]"},
    /* tf32 strided 3x3: two channel tiles of 32 per tap */
    {"k3x3_s2_bn_relu_tf32_2x131x129_64to64", "tf32", "conv_bn_act", 2, 131, 129, 64, 64, 1, 0, "128 x 64 x 32", 3, 3,
     "stride: [2, 2], padding: [1, 1]"},
};

static void run_case(const num_case *c)
{
    fg_context *ctx = arch_ctx("sm_90");
    fg_graph *g = conv_graph(ctx, c->name, c->dtype, "NHWC", c->N, c->H, c->W, c->C, c->K, c->R ? c->R : 1,
                             c->S ? c->S : 1, c->attrs ? c->attrs : "stride: [1, 1], padding: [0, 0]", c->bn,
                             c->residual);
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(p->groups[0].template_name, "conv2d_wgmma");
    assert_true(p->groups[0].rule >= 0);
    assert_string_equal(ctx->rules[p->groups[0].rule]->name, c->rule);
    fg_kernel K;
    fg_status st = fg_emit_group(ctx, p, 0, NULL, &K);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_true(K.arch_specific);
    assert_int_equal(K.ntmaps, 2);
    if (!strstr(K.source, c->expect) || !strstr(K.source, c->R ? "an implicit-GEMM conv" : "a 1x1 conv"))
        fail_msg("%s: the kernel header lacks \"%s\":\n%.1500s", c->name, c->expect, K.source);
    const char *tl = strstr(K.source, "//   tile:");
    print_message("%s %s: %.*s\n", c->name, c->dtype, tl ? (int)strcspn(tl, "\n") : 0, tl ? tl : "");
    fg_kernel_free(&K);
    fg_compile_options co = {.device = FG_DEVICE_EMU};
    fg_exec *e = NULL;
    st = fg_plan_compile(ctx, p, &co, &e);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    tu_exec_vs_reference(ctx, g, e, 77, strcmp(c->dtype, "bf16") == 0 ? 2e-2 : 5e-3);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_numerics(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof num_cases / sizeof *num_cases; i++)
        run_case(&num_cases[i]);
}

/* ---- mutations: the taps' padding fix-up broken must fail ---------------- */

typedef struct mutation {
    const char *what, *from, *to;
} mutation;

static const mutation mutations[] = {
    {"unmutated", NULL, NULL},
    {"the padding rows are not zeroed", "if (fok && (ih < 0", "if (false && (ih < 0"},
    {"no proxy fence after the zeros", "fg_fence_proxy_async();   // the zeros are what wgmma reads", ""},
    {"the warpgroup does not wait for its fix-up", "fg_mbar_wait(&fixed[c], it & 1);", "(void)fixed;"},
    {"the tap's column shift ignores the padding", "tap % (int)S * (int)DW - (int)PL;\n        fg_tma_load_2d",
     "tap % (int)S * (int)DW;\n        fg_tma_load_2d"},
};

/* Pixel tiles: the box's start, the tile's pixel order or the stride
 * broken must fail. */
static const mutation pix_mutations[] = {
    {"unmutated", NULL, NULL},
    {"the box's column start ignores the padding", "ow0 * (int)SW - (int)PL + tap", "ow0 * (int)SW + tap"},
    {"the box's row start ignores the stride", "oh0 * (int)SH - (int)PT", "oh0 - (int)PT"},
    {"the box does not move to the tile's images", ", nb0, &full[s]);", ", 0, &full[s]);"},
    {"the epilogue's pixel rows misread", "oh = oh0 + r / TW % TH", "oh = oh0 + r % TH"},
    {"the tap's row and column swapped", "tap % (int)S * (int)DW,", "tap / (int)S * (int)DW,"},
};

/* Runs each mutation of table m (n entries, the first unmutated) on the
 * conv2d_wgmma plan of g: the unmutated source within 5e-3, every other a
 * launch error or rel L2 above 5e-2. */
static void run_mutations(fg_context *ctx, fg_graph *g, const mutation *m, size_t n)
{
    fg_plan *p = plan(ctx, g);
    assert_string_equal(p->groups[0].template_name, "conv2d_wgmma");
    for (size_t i = 0; i < n; i++) {
        double rel = tu_mutated_rel_l2(ctx, p, g, m[i].from, m[i].to, 99);
        print_message("%-46s %s %.3e\n", m[i].what, rel < 0 ? "launch failed" : "rel_l2", rel);
        if (i == 0 ? !(rel >= 0 && rel <= 5e-3) : rel >= 0 && rel <= 5e-2)
            fail_msg("%s: rel_l2 %.3e", m[i].what, rel);
    }
    fg_plan_free(p);
}

static void test_mutations(void **state)
{
    (void)state;
    fg_context *ctx = arch_ctx("sm_90");
    /* 8 images of 23 x 23 (a sixth of the pixels on the border), K 136: 68 tiles */
    fg_graph *g = conv_graph(ctx, "mut", "fp16", "NHWC", 8, 23, 23, 64, 136, 3, 3, "padding: [1, 1]", 1, 0);
    run_mutations(ctx, g, mutations, sizeof mutations / sizeof *mutations);
    fg_graph_free(g);
    /* pixel tiles: 8 images of 45 x 45, stride 2, padding 1 -> 23 x 23, K 136: 72 tiles */
    g = conv_graph(ctx, "mut_pix", "fp16", "NHWC", 8, 45, 45, 64, 136, 3, 3, "stride: [2, 2], padding: [1, 1]", 1, 0);
    run_mutations(ctx, g, pix_mutations, sizeof pix_mutations / sizeof *pix_mutations);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- selection ----------------------------------------------------------- */

typedef struct sel_case {
    const char *what, *arch, *layout;
    int N, H, W, C, K, R, S;
    const char *attrs;
    const char *want;   /* the template planned */
    const char *why;    /* a piece of conv2d_wgmma's refusal, or NULL: it accepts */
} sel_case;

#define ONE "stride: [1, 1], padding: [0, 0]"

static const sel_case sel_cases[] = {
    {"1x1 sm_90", "sm_90", "NHWC", 2, 65, 65, 256, 64, 1, 1, ONE, "conv2d_wgmma", NULL},
    {"1x1 sm_90a", "sm_90a", "NHWC", 2, 47, 45, 64, 256, 1, 1, ONE, "conv2d_wgmma", NULL},
    {"sm_80", "sm_80", "NHWC", 2, 65, 65, 256, 64, 1, 1, ONE, "conv2d_tc", "target arch sm_80"},
    {"3x3", "sm_90", "NHWC", 2, 65, 65, 64, 64, 3, 3, "stride: [1, 1], padding: [1, 1]", "conv2d_wgmma", NULL},
    {"3x3 C 32", "sm_90", "NHWC", 2, 65, 65, 32, 64, 3, 3, "stride: [1, 1], padding: [1, 1]", "conv2d_tc",
     "C 32 not a multiple of 64"},
    {"3x3 unpadded", "sm_90", "NHWC", 2, 67, 67, 64, 64, 3, 3, "stride: [1, 1], padding: [0, 0]", "conv2d_wgmma",
     NULL},
    {"3x3 stride 2", "sm_90", "NHWC", 2, 130, 130, 64, 64, 3, 3, "stride: [2, 2], padding: [1, 1]", "conv2d_wgmma",
     NULL},
    {"stride 2", "sm_90", "NHWC", 2, 130, 130, 256, 64, 1, 1, "stride: [2, 2], padding: [0, 0]", "conv2d_wgmma", NULL},
    {"padded 1x1", "sm_90", "NHWC", 2, 65, 65, 256, 64, 1, 1, "stride: [1, 1], padding: [1, 1]", "conv2d_wgmma",
     NULL},
    {"3x3 stride 2 C 32", "sm_90", "NHWC", 2, 130, 130, 32, 64, 3, 3, "stride: [2, 2], padding: [1, 1]", "conv2d_tc",
     "C 32 not a multiple of 64"},
    {"stride 9", "sm_90", "NHWC", 2, 580, 580, 64, 64, 1, 1, "stride: [9, 9]", "conv2d_tc",
     "stride 9x9 (TMA steps at most 8 elements)"},
    {"NCHW", "sm_90", "NCHW", 2, 65, 65, 256, 64, 1, 1, ONE, "conv2d", "is NCHW"},
    {"C 12", "sm_90", "NHWC", 2, 65, 65, 12, 64, 1, 1, ONE, "conv2d_tc", "not a multiple of 8"},
    {"too few tiles", "sm_90", "NHWC", 2, 14, 14, 256, 64, 1, 1, ONE, "conv2d_tc", "4 tiles of 128 x 64"},
};

static void test_selection(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof sel_cases / sizeof *sel_cases; i++) {
        const sel_case *s = &sel_cases[i];
        fg_context *ctx = arch_ctx(s->arch);
        fg_graph *g = conv_graph(ctx, "sel", "fp16", s->layout, s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->attrs, 1,
                                 0);
        fg_plan *p = plan(ctx, g);
        int grp = -1;
        const char *got = template_of(p, "conv", &grp);
        assert_true(grp >= 0);
        /* the check's verdict on the planned group, as --explain shows it */
        const fg_template *t = fg_template_find(ctx, "conv2d_wgmma");
        assert_non_null(t);
        const fg_group *G = &p->groups[grp];
        fg_tcand c = {.g = p->graph, .rule = G->rule >= 0 ? ctx->rules[G->rule] : NULL, .nnodes = G->nnodes, .nodes = G->nodes, .anchor = G->anchor,
                      .main_node = G->anchor, .arch = fg_target_arch(ctx)};
        char why[512] = "";
        int ok = fg_template_check(t, &c, why, sizeof why);
        print_message("%-14s %-6s -> %-13s %s\n", s->what, s->arch, got, ok ? "" : why);
        if (strcmp(got, s->want) != 0)
            fail_msg("%s: planned %s, want %s (%s)", s->what, got, s->want, why);
        if (s->why ? ok || !strstr(why, s->why) : !ok)
            fail_msg("%s: conv2d_wgmma %s: \"%s\" (want %s)", s->what, ok ? "accepts" : "refuses", why,
                     s->why ? s->why : "accepted");
        fg_plan_free(p);
        fg_graph_free(g);
        fg_context_free(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_numerics),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
