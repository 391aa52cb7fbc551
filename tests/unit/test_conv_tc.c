/*
 * test_conv_tc.c -- the tensor-core implicit-GEMM convolution (template
 * conv2d_tc): which convolutions it takes and why it refuses the others, and
 * its numerics in emulation against the host reference of the unfused graph
 * on odd shapes (N 1, 2 and 3; C 8, 16, 24, 32, 40, and gathered C 1, 3, 5,
 * 6; K 8, 13, 24, 72, 136; H, W 1, 7, 11, 13, 14, 19; 1x1, 3x3, 5x5, 7x7;
 * stride 1 and 2; padding 0, 1, 2; dilation 2)
 * with the shipped epilogues (bias + relu / silu / hardswish, BN folded,
 * residual add), fp16, bf16 and fp32 with precision tf32, every block tile
 * and split-K (the default choice at batch 1 and a batch-32-like shape, and
 * forced ones), specialized and not.  Then the pipeline's synchronization:
 * the same kernel with its cp.async wait weakened by one group, or removed,
 * or without its barrier, must fail the numerics (the emulator lands a copy
 * only at its wait); split-K's reduction must add every slot and leave its
 * counters at zero (a second launch on the same workspace is checked).
 *
 * The runner is small and self-contained: each case plans to one kernel,
 * which is emitted (optionally mutated), built for the emulator and launched
 * on buffers of its own (inputs and weights rounded to the dtype for the
 * reference too, so the comparison measures the kernel; output poisoned with
 * NaN).  Seed: FUSEGEN_SEED, else fixed; printed.  Tolerances (relative L2):
 * fp16 5e-3, bf16 2e-2 -- fp32 accumulation, so the error is about the
 * output's own rounding (2^-11, 2^-8) and a BN fold's rounded weights.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emu.h"
#include "plan.h"
#include "reference.h"
#include "tensor_convert.h"
#include "testutil.h"

static uint64_t seed = 20240901;
static int fp32_exact;   /* parse_case: fp32 graphs keep precision exact (refusal test) */
static char *cache_dir;

/* tf32: operands rounded to 11 significant bits (2^-11 relative each), fp32
 * accumulation and output: 1e-2 as for PyTorch's allow_tf32 comparisons. */
static double tol_of(fg_dtype d) { return d == FG_DTYPE_F16 ? 5e-3 : d == FG_DTYPE_BF16 ? 2e-2 : 1e-2; }

/* ---- cases ---------------------------------------------------------------- */

typedef struct tc_case {
    const char *name;
    const char *rule;     /* the rule the one group must come from ("-": a lone conv) */
    const char *body;     /* the graph after its header */
} tc_case;

#define BN_WEIGHTS(K)                                                                                  \
    "  - { name: g, shape: [" #K "], init: positive }\n  - { name: be, shape: [" #K "] }\n"         \
    "  - { name: mu, shape: [" #K "], uniform: [-0.2, 0.2] }\n  - { name: v, shape: [" #K "], init: positive }\n"

static const tc_case cases[] = {
    {"n1_c8_k8_7x7_3x3_p1_bias_relu", "conv_act",
     "inputs: [{ name: x, shape: [1, 8, 7, 7] }]\n"
     "weights: [{ name: w, shape: [8, 8, 3, 3] }, { name: b, shape: [8] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"n2_c16_k24_13x13_1x1_s2_bn", "conv_bn",
     "inputs: [{ name: x, shape: [2, 16, 13, 13] }]\n"
     "weights:\n  - { name: w, shape: [24, 16, 1, 1] }\n" BN_WEIGHTS(24)
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2] } }\n"
     "  - { name: y, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
     "outputs: [y]\n"},
    {"n2_c40_k72_14x14_3x3_s2_p1_bn_relu", "conv_bn_act",
     "inputs: [{ name: x, shape: [2, 40, 14, 14] }]\n"
     "weights:\n  - { name: w, shape: [72, 40, 3, 3] }\n  - { name: b, shape: [72] }\n" BN_WEIGHTS(72)
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    {"n1_c40_k24_13x7_3x3_d2_p2_residual_relu", "conv_add_act",
     "inputs: [{ name: x, shape: [1, 40, 13, 7] }, { name: res, shape: [1, 24, 13, 7] }]\n"
     "weights: [{ name: w, shape: [24, 40, 3, 3] }, { name: b, shape: [24] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [2, 2], dilation: [2, 2] } }\n"
     "  - { name: a, op: add, inputs: [c, res] }\n"
     "  - { name: y, op: relu, inputs: [a] }\n"
     "outputs: [y]\n"},
    {"n2_c16_k72_7x7_3x3_p1_bn_residual_relu", "conv_bn_add_act",
     "inputs: [{ name: x, shape: [2, 16, 7, 7] }, { name: res, shape: [2, 72, 7, 7] }]\n"
     "weights:\n  - { name: w, shape: [72, 16, 3, 3] }\n" BN_WEIGHTS(72)
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
     "  - { name: a, op: add, inputs: [bn, res] }\n"
     "  - { name: y, op: relu, inputs: [a] }\n"
     "outputs: [y]\n"},
    /* C not a multiple of a 16-byte chunk: gathered element by element */
    {"n2_c3_k16_19x19_7x7_s2_p3_bn_relu_stem", "conv_bn_act",
     "inputs: [{ name: x, shape: [2, 3, 19, 19] }]\n"
     "weights:\n  - { name: w, shape: [16, 3, 7, 7] }\n" BN_WEIGHTS(16)
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2], padding: [3, 3] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    /* C = 5, odd H and W, 4 k tiles: the gather's loads issued a tile ahead wrap the 3 stages */
    {"n3_c5_k24_11x13_5x5_s2_p2_bias_relu", "conv_act",
     "inputs: [{ name: x, shape: [3, 5, 11, 13] }]\n"
     "weights: [{ name: w, shape: [24, 5, 5, 5] }, { name: b, shape: [24] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { stride: [2, 2], padding: [2, 2] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"n1_c6_k13_9x11_3x3_p2_d2_bias_relu", "conv_act",
     "inputs: [{ name: x, shape: [1, 6, 9, 11] }]\n"
     "weights: [{ name: w, shape: [13, 6, 3, 3] }, { name: b, shape: [13] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [2, 2], dilation: [2, 2] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"n2_c1_k8_7x7_3x3_s2", "-",
     "inputs: [{ name: x, shape: [2, 1, 7, 7] }]\n"
     "weights: [{ name: w, shape: [8, 1, 3, 3] }]\n"
     "nodes:\n"
     "  - { name: y, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2] } }\n"
     "outputs: [y]\n"},
    {"n1_c8_k13_13x1_1x1_odd_k", "conv_act",
     "inputs: [{ name: x, shape: [1, 8, 13, 1] }]\n"
     "weights: [{ name: w, shape: [13, 8, 1, 1] }, { name: b, shape: [13] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b] }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"n2_c8_k8_1x1_pixel_3x3_p1", "-",
     "inputs: [{ name: x, shape: [2, 8, 1, 1] }]\n"
     "weights: [{ name: w, shape: [8, 8, 3, 3] }]\n"
     "nodes:\n"
     "  - { name: y, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "outputs: [y]\n"},
    {"n1_c24_k8_14x14_3x3_s2_d2_p0", "conv_act",
     "inputs: [{ name: x, shape: [1, 24, 14, 14] }]\n"
     "weights: [{ name: w, shape: [8, 24, 3, 3] }, { name: b, shape: [8] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { stride: [2, 2], dilation: [2, 2] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"n2_c32_k136_14x14_3x3_p1_bias_relu", "conv_act",
     "inputs: [{ name: x, shape: [2, 32, 14, 14] }]\n"
     "weights: [{ name: w, shape: [136, 32, 3, 3] }, { name: b, shape: [136] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    /* batch 1, 7x7: four 32 x 32 tiles, so the reduction is split (fp16 4 ways, fp32 9) */
    {"n1_c64_k64_7x7_3x3_p1_bias_silu_splitk", "conv_act",
     "inputs: [{ name: x, shape: [1, 64, 7, 7] }]\n"
     "weights: [{ name: w, shape: [64, 64, 3, 3] }, { name: b, shape: [64] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: silu, inputs: [c] }\n"
     "outputs: [y]\n"},
    /* batch 1, 13x13: 6 tiles, 9 k tiles split 2 ways (5 + 4) */
    {"n1_c32_k24_13x13_3x3_hardswish_splitk", "conv_act",
     "inputs: [{ name: x, shape: [1, 32, 13, 13] }]\n"
     "weights: [{ name: w, shape: [24, 32, 3, 3] }, { name: b, shape: [24] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: hardswish, inputs: [c] }\n"
     "outputs: [y]\n"},
    /* batch 32 at 3x3 pixels: 288 output pixels, no split */
    {"n32_c16_k24_3x3_3x3_p1_bn_relu", "conv_bn_act",
     "inputs: [{ name: x, shape: [32, 16, 3, 3] }]\n"
     "weights:\n  - { name: w, shape: [24, 16, 3, 3] }\n" BN_WEIGHTS(24)
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    /* asymmetric padding [top, left, bottom, right]: begin pads in the index arithmetic */
    {"n1_c8_k16_7x6_3x3_pads_1_0_2_1", "conv_act",
     "inputs: [{ name: x, shape: [1, 8, 7, 6] }]\n"
     "weights: [{ name: w, shape: [16, 8, 3, 3] }, { name: b, shape: [16] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 0, 2, 1] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
};

static const tc_case *find_case(const char *name)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    fail_msg("no case %s", name);
    return NULL;
}

/* ---- the runner ----------------------------------------------------------- */

/* A source mutation: replace the first `from` by `to` (must be found). */
typedef struct mutation {
    const char *from, *to;
} mutation;

typedef struct tc_result {
    double rel;           /* relative L2 error, NaN included as +inf */
    int64_t nan_left;     /* output elements still NaN */
    char tile[160];       /* the "tile:" header line of the kernel */
} tc_result;

static fg_graph *parse_case(fg_context *ctx, const tc_case *c, fg_dtype dt, fg_layout lay)
{
    char *text = NULL;
    fg_buf b = {0};
    /* fp32 cases run with precision tf32 (exact fp32 never uses tensor cores) */
    fg_buf_printf(&b, "graph: %s\nseed: %" PRIu64 "\ndtype: %s\nlayout: %s\n%s%s", c->name, seed,
                  fg_dtype_name(dt), fg_layout_name(lay), dt == FG_DTYPE_F32 && !fp32_exact ? "precision: tf32\n" : "", c->body);
    text = fg_buf_take(&b);
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, c->name, text, strlen(text), &g);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    free(text);
    return g;
}

/* Plans case c (fp16, bf16 or fp32 with tf32, NHWC) to one conv2d_tc
 * kernel, runs it in emulation (launches times on the same buffers and
 * workspace, the output poisoned before each) and compares the last output
 * with the reference. */
static void run_case_n(fg_context *ctx, const tc_case *c, fg_dtype dt, int specialize, const mutation *mut,
                       int launches, tc_result *res)
{
    memset(res, 0, sizeof *res);
    fg_graph *src = parse_case(ctx, c, dt, FG_LAYOUT_NHWC);
    /* weights rounded to the dtype for the reference as well */
    for (int t = 0; t < src->ntensors; t++)
        if (src->tensors[t].is_weight && src->tensors[t].data) {
            float *d = fg_tensor_own(&src->tensors[t]);
            for (int64_t i = 0; i < fg_tensor_numel(&src->tensors[t]); i++)
                d[i] = (float)fg_round_to_dtype(d[i], dt);
        }
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, src, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(p->ngroups, 1);
    const fg_group *grp = &p->groups[0];
    assert_string_equal(grp->template_name, "conv2d_tc");
    const char *rule = grp->rule >= 0 ? ctx->rules[grp->rule]->name : "-";
    assert_string_equal(rule, c->rule);
    const fg_graph *pg = p->graph;

    double **ref = fg_xcalloc((size_t)src->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(src, seed ^ fg_hash64(c->name, strlen(c->name)), ref);
    for (int t = 0; t < src->ntensors; t++)
        if (src->tensors[t].is_input)
            for (int64_t i = 0; i < fg_tensor_numel(&src->tensors[t]); i++)
                ref[t][i] = fg_round_to_dtype(ref[t][i], dt);

    fg_kernel k;
    fg_emit_opts eo = {.specialize = specialize};
    st = fg_emit_group(ctx, p, 0, &eo, &k);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const char *tl = strstr(k.source, "//   tile:");
    assert_non_null(tl);
    tl += strlen("//   tile:");
    tl += strspn(tl, " ");
    snprintf(res->tile, sizeof res->tile, "%.*s", (int)strcspn(tl, "\n"), tl);
    if (mut) {
        char *at = strstr(k.source, mut->from);
        assert_non_null(at);
        fg_buf b = {0};
        fg_buf_putn(&b, k.source, (size_t)(at - k.source));
        fg_buf_put(&b, mut->to);
        fg_buf_put(&b, at + strlen(mut->from));
        free(k.source);
        k.source = fg_buf_take(&b);
    }
    st = fg_emu_build(ctx, &k);
    if (st) {
        tu_dump_errors(ctx);
        fprintf(stderr, "%s\n", k.source);
    }
    assert_int_equal(st, FG_OK);

    tu_kargs ka;
    tu_kargs_init(&ka, &k, pg, src, ref);
    for (int l = 0; l < launches; l++) {
        tu_kargs_poison(&ka, &k, pg);
        st = fg_emu_launch(ctx, &k, ka.args);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
    }

    assert_int_equal(fg_reference_run(ctx, src, ref), FG_OK);
    const fg_tensor *ot = &pg->tensors[k.params[ka.out_slot].tensor];
    int so = fg_graph_find_tensor(src, ot->name);
    int64_t n = fg_tensor_numel(ot);
    double *got = fg_xmalloc((size_t)n * sizeof *got), max_abs;
    fg_tensor_unpack(ot, ot->layout, ka.bufs[ka.out_slot], got);
    for (int64_t i = 0; i < n; i++)
        res->nan_left += isnan(got[i]);
    res->rel = fg_rel_l2(got, ref[so], n, &max_abs);
    if (isnan(res->rel))
        res->rel = INFINITY;
    free(got);
    tu_kargs_free(&ka);
    fg_kernel_free(&k);
    fg_reference_free(src, ref);
    free(ref);
    fg_plan_free(p);
    fg_graph_free(src);
}

static void run_case(fg_context *ctx, const tc_case *c, fg_dtype dt, int specialize, const mutation *mut,
                     tc_result *res)
{
    run_case_n(ctx, c, dt, specialize, mut, 1, res);
}

/* Runs one case in fp16, bf16 and fp32 (tf32) and checks the tolerance. */
static void check_case(fg_context *ctx, const tc_case *c, int specialize)
{
    static const fg_dtype dts[] = {FG_DTYPE_F16, FG_DTYPE_BF16, FG_DTYPE_F32};
    for (int i = 0; i < 3; i++) {
        fg_dtype d = dts[i];
        tc_result r;
        run_case(ctx, c, (fg_dtype)d, specialize, NULL, &r);
        print_message("  %-44s %s%s  rel_l2 %.2e (tolerance %.0e)  tile %s\n", c->name, fg_dtype_name((fg_dtype)d),
                      specialize ? "" : " unspecialized", r.rel, tol_of((fg_dtype)d), r.tile);
        assert_int_equal(r.nan_left, 0);
        assert_true(r.rel <= tol_of((fg_dtype)d));
    }
}

/* ---- tests ------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    const char *s = getenv("FUSEGEN_SEED");
    if (s && *s)
        seed = strtoull(s, NULL, 0);
    printf("test_conv_tc: seed %" PRIu64 " (FUSEGEN_SEED overrides)\n", seed);
    cache_dir = tu_tmpdir();
    setenv("FUSEGEN_CACHE_DIR", cache_dir, 1);
    unsetenv("FUSEGEN_EMU_ASAN");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(cache_dir);
    free(cache_dir);
    return 0;
}

static void test_numerics(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(ctx, &cases[i], 1);
    fg_context_free(ctx);
}

static void test_numerics_unspecialized(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    check_case(ctx, find_case("n2_c40_k72_14x14_3x3_s2_p1_bn_relu"), 0);
    check_case(ctx, find_case("n1_c8_k13_13x1_1x1_odd_k"), 0);
    check_case(ctx, find_case("n2_c3_k16_19x19_7x7_s2_p3_bn_relu_stem"), 0);
    fg_context_free(ctx);
}

/* Every block tile, chosen by a tile hook, on a case with 9 reduction tiles,
 * 392 pixels and 136 channels (partial tiles along both M and N). */
static void test_every_tile(void **state)
{
    (void)state;
    static const int tiles[][3] = {{64, 64, 1},  {64, 128, 1}, {128, 64, 1}, {128, 128, 1},
                                   {32, 64, 1},  {64, 64, 3},  {32, 64, 2},  {128, 128, 9},
                                   {32, 32, 1},  {32, 32, 3}};
    for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) {
        char *dir = tu_vocab_dir();
        char rules[512], lua[160];
        snprintf(rules, sizeof rules,
                 "rule: conv_act\nhooks: tiles.lua\nmatch:\n  - conv: { op: conv2d }\n  - act: { op: relu }\n"
                 "kernel:\n  template: conv2d\n  params: tiles\n  epilogue:\n    - bias: conv.bias\n"
                 "    - apply: act\n");
        snprintf(lua, sizeof lua, "function tiles(group)\n  return { tile_m = %d, tile_n = %d, split_k = %d }\nend\n",
                 tiles[i][0], tiles[i][1], tiles[i][2]);
        free(tu_write(dir, "rules.yaml", rules));
        free(tu_write(dir, "tiles.lua", lua));
        fg_context *ctx = tu_ctx_empty();
        fg_status st = fg_rules_load(ctx, dir);
        if (st)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        const tc_case *c = find_case("n2_c32_k136_14x14_3x3_p1_bias_relu");
        check_case(ctx, c, 1);
        if (tiles[i][2] <= 3)   /* the gathered C = 5 case has 4 k tiles (fp16) */
            check_case(ctx, find_case("n3_c5_k24_11x13_5x5_s2_p2_bias_relu"), 1);
        tc_result r;
        run_case(ctx, c, FG_DTYPE_F16, 1, NULL, &r);
        char want[64];
        snprintf(want, sizeof want, "%d x %d x 32,", tiles[i][0], tiles[i][1]);
        assert_non_null(strstr(r.tile, want));
        snprintf(want, sizeof want, "split-K %d (", tiles[i][2]);
        assert_non_null(strstr(r.tile, want));
        fg_context_free(ctx);
        tu_rmtree(dir);
        free(dir);
    }
}

/* A weakened or missing wait, or a missing barrier, reads tiles that have not
 * landed: the emulator turns that into wrong numbers (NaN from the poisoned
 * shared memory, or a stale stage).  The unmutated kernel passes. */
static void test_missing_wait_fails(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    const tc_case *c = find_case("n2_c40_k72_14x14_3x3_s2_p1_bn_relu");
    static const char wait[] = "fg_cp_async_wait_group<STAGES - 2>();";
    static const mutation muts[] = {
        {wait, "fg_cp_async_wait_group<STAGES - 1>();"},   /* one group too weak */
        {wait, ";"},                                       /* no wait at all */
        {"        fg_sync();                              // everyone's", "        // everyone's"},
    };
    static const char *const what[] = {"wait_group<STAGES - 1>", "no wait", "no barrier"};
    tc_result r;
    run_case(ctx, c, FG_DTYPE_F16, 1, NULL, &r);
    assert_true(r.rel <= tol_of(FG_DTYPE_F16));
    for (size_t i = 0; i < sizeof muts / sizeof *muts; i++) {
        run_case(ctx, c, FG_DTYPE_F16, 1, &muts[i], &r);
        print_message("  mutation %-24s rel_l2 %.2e, %" PRId64 " NaN outputs\n", what[i], r.rel, r.nan_left);
        assert_true(r.rel > 100 * tol_of(FG_DTYPE_F16));
    }
    fg_context_free(ctx);
}

/* The --explain text of case c's plan (malloc'd). */
static char *explain_text(fg_context *ctx, const tc_case *c, fg_dtype dt)
{
    fg_graph *g = parse_case(ctx, c, dt, FG_LAYOUT_NHWC);
    fg_plan *p = NULL;
    assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
    char *text = NULL;
    assert_int_equal(fg_plan_text(ctx, p, 1, &text), FG_OK);
    fg_plan_free(p);
    fg_graph_free(g);
    return text;
}

/* Split-K: the default choice per shape (shown by --explain and in the
 * kernel), the reduction of every slot in order, the counters left at zero
 * for the next launch. */
static void test_split_k(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    const tc_case *c7 = find_case("n1_c64_k64_7x7_3x3_p1_bias_silu_splitk");
    tc_result r;
    run_case(ctx, c7, FG_DTYPE_F16, 1, NULL, &r);
    print_message("  default at 7x7 fp16: %s\n", r.tile);
    assert_non_null(strstr(r.tile, "32 x 32 x 32, 3 stages, 64 threads (2 x 1 warps), split-K 4 (5 of 18 k tiles"));
    run_case(ctx, c7, FG_DTYPE_F32, 1, NULL, &r);
    print_message("  default at 7x7 fp32 tf32: %s\n", r.tile);
    assert_non_null(strstr(r.tile, "32 x 32 x 16, 3 stages, 64 threads (2 x 1 warps), split-K 9 (4 of 36 k tiles"));
    assert_non_null(strstr(r.tile, "mma m16n8k8 tf32"));
    char *text = explain_text(ctx, c7, FG_DTYPE_F16);
    if (!strstr(text, "conv2d_tc: tile 32 x 32, split-K 4 (M 49, N 64, K 576: 4 tiles x 4 = 16 blocks for 132 SMs)"))
        fail_msg("no tile choice in:\n%s", text);
    free(text);
    run_case(ctx, find_case("n32_c16_k24_3x3_3x3_p1_bn_relu"), FG_DTYPE_F16, 1, NULL, &r);
    assert_non_null(strstr(r.tile, "split-K 1 ("));
    run_case(ctx, find_case("n1_c32_k24_13x13_3x3_hardswish_splitk"), FG_DTYPE_F16, 1, NULL, &r);
    assert_non_null(strstr(r.tile, "split-K 2 (5 of 9 k tiles"));

    /* a second launch on the same workspace: the counters were reset */
    run_case_n(ctx, c7, FG_DTYPE_F16, 1, NULL, 2, &r);
    assert_int_equal(r.nan_left, 0);
    assert_true(r.rel <= tol_of(FG_DTYPE_F16));
    static const mutation no_reset = {"*count = 0;", ";"};
    run_case_n(ctx, c7, FG_DTYPE_F16, 1, &no_reset, 2, &r);
    print_message("  counter not reset: rel_l2 %.2e, %" PRId64 " NaN outputs on the second launch\n", r.rel, r.nan_left);
    assert_true(r.nan_left > 0);
    /* the reduction must start from slot 0 */
    static const mutation skip0 = {"float sum = base[at];", "float sum = 0.0f;"};
    run_case(ctx, c7, FG_DTYPE_F16, 1, &skip0, &r);
    print_message("  slot 0 skipped: rel_l2 %.2e\n", r.rel);
    assert_true(r.rel > 10 * tol_of(FG_DTYPE_F16));
    fg_context_free(ctx);
}

/* Refusals: the direct conv2d runs these, and --explain says why. */
static void check_refused(const char *body, fg_dtype dt, fg_layout lay, const char *reason)
{
    fg_context *ctx = tu_ctx_shipped();
    tc_case c = {"refused", "-", body};
    fg_graph *g = parse_case(ctx, &c, dt, lay);
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    assert_int_equal(p->ngroups, 1);
    assert_string_equal(p->groups[0].template_name, "conv2d");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fg_plan_print_opts o = {1};
    fg_plan_print(ctx, p, &o, f);
    fclose(f);
    if (!strstr(text, reason))
        fail_msg("expected \"%s\" in:\n%s", reason, text);
    free(text);
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char conv_c16[] =
        "inputs: [{ name: x, shape: [1, 16, 7, 7] }]\n"
        "weights: [{ name: w, shape: [8, 16, 3, 3] }, { name: b, shape: [8] }]\n"
        "nodes:\n  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
        "  - { name: y, op: relu, inputs: [c] }\noutputs: [y]\n";
    static const char conv_g2[] =
        "inputs: [{ name: x, shape: [1, 16, 7, 7] }]\n"
        "weights: [{ name: w, shape: [8, 8, 3, 3] }, { name: b, shape: [8] }]\n"
        "nodes:\n  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1], groups: 2 } }\n"
        "  - { name: y, op: relu, inputs: [c] }\noutputs: [y]\n";
    check_refused(conv_c16, FG_DTYPE_BF16, FG_LAYOUT_NCHW,
                  "conv2d_tc refused: y is NCHW (weights are read as [K, R*S*C] and outputs stored 8 channels at a "
                  "time: NHWC only; an NCHW input is gathered)");
    check_refused(conv_g2, FG_DTYPE_F16, FG_LAYOUT_NHWC, "conv2d_tc refused: groups 2 (one group only");
    fp32_exact = 1;
    check_refused(conv_c16, FG_DTYPE_F32, FG_LAYOUT_NHWC, "conv2d_tc refused: fp32 with precision exact (fp32 runs on "
                  "tensor cores only with precision tf32)");
    fp32_exact = 0;
    /* with precision tf32 (parse_case adds it for fp32): NHWC only */
    check_refused(conv_c16, FG_DTYPE_F32, FG_LAYOUT_NCHW,
                  "conv2d_tc refused: y is NCHW (weights are read as [K, R*S*C] and outputs stored 4 channels at a "
                  "time: NHWC only; an NCHW input is gathered)");
}

/* An NCHW graph (ONNX's layout): the layout pass stores the intermediate
 * and the weights NHWC, so the first conv reads the NCHW input through the
 * gather path on conv2d_tc and the second, writing the NCHW output, runs on
 * the direct conv; with FUSEGEN_KEEP_LAYOUT=1 both are direct.  fp16, bf16
 * and fp32 with tf32, through the executor against the reference. */
static void test_nchw_graph(void **state)
{
    (void)state;
    static const tc_case two = {"nchw_two_convs", "-",
        "inputs: [{ name: x, shape: [2, 16, 9, 11] }]\n"
        "weights:\n  - { name: w, shape: [24, 16, 3, 3] }\n" BN_WEIGHTS(24)
        "  - { name: w2, shape: [8, 24, 1, 1] }\n"
        "nodes:\n"
        "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
        "  - { name: bn, op: batch_norm, inputs: [c, g, be, mu, v] }\n"
        "  - { name: r, op: relu, inputs: [bn] }\n"
        "  - { name: y, op: conv2d, inputs: [r, w2] }\n"
        "outputs: [y]\n"};
    static const fg_dtype dts[] = {FG_DTYPE_F16, FG_DTYPE_BF16, FG_DTYPE_F32};
    for (int keep = 0; keep < 2; keep++) {
        if (keep)
            setenv("FUSEGEN_KEEP_LAYOUT", "1", 1);
        fg_context *ctx = tu_ctx_shipped();
        for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
            fg_graph *g = parse_case(ctx, &two, dts[i], FG_LAYOUT_NCHW);
            fg_plan *p = NULL;
            assert_int_equal(fg_plan_build(ctx, g, &p), FG_OK);
            assert_int_equal(p->ngroups, 2);
            assert_string_equal(p->groups[0].template_name, keep ? "conv2d" : "conv2d_tc");
            assert_string_equal(p->groups[1].template_name, "conv2d");
            assert_int_equal(p->nhwc_acts, keep ? 0 : 3);   /* the outputs of c, bn and r */
            fg_exec *e = tu_compile_emu(ctx, p);
            const char *src = fg_exec_kernel_source(e, 0);
            if (!keep && !strstr(src, "element gather (x is NCHW)"))
                fail_msg("%s: the first kernel does not gather its NCHW input", fg_dtype_name(dts[i]));
            print_message("  %s NCHW graph, %s: %s + %s\n", fg_dtype_name(dts[i]), keep ? "layouts kept" : "layout pass",
                          p->groups[0].template_name, p->groups[1].template_name);
            tu_exec_vs_reference(ctx, g, e, seed + i, tol_of(dts[i]));
            fg_exec_free(e);
            fg_plan_free(p);
            fg_graph_free(g);
        }
        fg_context_free(ctx);
    }
    unsetenv("FUSEGEN_KEEP_LAYOUT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_numerics),
        cmocka_unit_test(test_numerics_unspecialized),
        cmocka_unit_test(test_every_tile),
        cmocka_unit_test(test_missing_wait_fails),
        cmocka_unit_test(test_split_k),
        cmocka_unit_test(test_nchw_graph),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
