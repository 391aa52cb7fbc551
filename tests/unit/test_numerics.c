/*
 * test_numerics.c -- the emulation numerics matrix: every shipped rule, every
 * dtype (fp32, fp16, bf16) and layout (NCHW, NHWC), on odd shapes, run as the
 * generated CUDA sources on the CPU emulator and compared with the host
 * reference of the UNFUSED source graph.
 *
 * The runner below is self-contained (it does not use the executor): for each
 * group of the plan it emits the kernel, optionally mutates the source, builds
 * it for the emulator and launches it on buffers it owns.  Every buffer has a
 * guard zone of GUARD bytes before and after it, filled with a sentinel byte;
 * outputs and intermediates are poisoned with NaN before the first launch;
 * inputs and weights are compared with their packed copy after each launch.
 * The checks: relative L2 error per output within the case's tolerance for
 * the dtype, no element beyond ELEM_FACTOR * tolerance (relative to the larger
 * of |reference| and the output's RMS), no poison left, no guard byte changed,
 * no read-only buffer changed.
 *
 * Inputs are drawn from the run's seed (printed; FUSEGEN_SEED overrides) and
 * rounded to the dtype before the reference sees them; weights likewise (the
 * reference reads the source graph's weights rounded to the dtype, the kernels
 * the plan graph's folded weights packed to the dtype), so the comparison
 * measures kernel error rather than input quantization.
 *
 * The mutation tests change the generated sources (a wrong value, a skipped
 * element, a store outside the output) and assert that the specific check
 * reports it, so a broken checker cannot pass silently.
 *
 * FUSEGEN_NUMERICS_DEVICE=cuda runs the same matrix on the GPU (the device
 * tier): NVRTC instead of the host compiler, buffers (guards included) copied
 * to the device before the first launch and back after each launch, the
 * checks unchanged.  Default: emu.
 * FUSEGEN_CACHE_DIR: a fresh temporary cache unless the variable is set.
 * FUSEGEN_NUMERICS_VERBOSE=1 prints one line per case variant.
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
#include <time.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "concat_inplace.h"
#include "emit.h"
#include "emu.h"
#include "jit.h"
#include "plan.h"
#include "reference.h"
#include "testutil.h"

#define GUARD 256            /* bytes of sentinel before and after each buffer */
#define SENTINEL 0xA5        /* guard byte */
#define ELEM_FACTOR 10.0     /* per-element bound: ELEM_FACTOR * tol * max(|ref|, rms(ref)) */

/* ---- the case table ------------------------------------------------------
 * body: the graph after its header (graph, seed, dtype, layout are added per
 * variant).  rules: the rule each plan group must come from, in group order,
 * comma-separated; "-" for a single op planned without a rule.  tol: relative
 * L2 bound for fp32, fp16, bf16.  why: the reason for a bound other than the
 * defaults (TOL). */

#define TOL 1e-5, 1e-2, 2e-2 /* fp32, fp16, bf16 (bf16 keeps 8 mantissa bits) */

typedef struct ncase {
    const char *family;
    const char *name;
    const char *rules;
    double tol[TU_FLOAT_DTYPES];
    const char *why;
    const char *body;
} ncase;

static const ncase cases[] = {
    /* ---- conv_act ---- */
    {"conv_act", "conv_act_same_relu", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 7] }]\n"
     "weights: [{ name: w, shape: [12, 5, 3, 3] }, { name: b, shape: [12] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: relu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_s2_p0_nobias_leaky", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 13, 13] }]\n"
     "weights: [{ name: w, shape: [17, 3, 3, 3] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2] } }\n"
     "  - { name: y, op: leaky_relu, inputs: [c], attrs: { alpha: 0.2 } }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_dil2_gelu", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 4, 13, 7] }]\n"
     "weights: [{ name: w, shape: [6, 4, 3, 3] }, { name: b, shape: [6] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { dilation: [2, 2], padding: [2, 2] } }\n"
     "  - { name: y, op: gelu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_g4_prelu", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 12, 7, 7] }]\n"
     "weights: [{ name: w, shape: [8, 3, 3, 3] }, { name: b, shape: [8] }, { name: s, shape: [8] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 4, padding: [1, 1] } }\n"
     "  - { name: y, op: prelu, inputs: [c, s] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_1x1_spatial1_hardswish", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 17, 1, 1] }]\n"
     "weights: [{ name: w, shape: [5, 17, 1, 1] }, { name: b, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b] }\n"
     "  - { name: y, op: hardswish, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_c1_5x3_s21_softplus", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 1, 13, 7] }]\n"
     "weights: [{ name: w, shape: [3, 1, 5, 3] }, { name: b, shape: [3] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { stride: [2, 1], padding: [2, 1] } }\n"
     "  - { name: y, op: softplus, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_g2_s2_elu", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 6, 13, 13] }]\n"
     "weights: [{ name: w, shape: [4, 3, 3, 3] }, { name: b, shape: [4] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 2, stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: y, op: elu, inputs: [c] }\n"
     "outputs: [y]\n"},

    {"conv_act", "conv_act_c70_chunks_tanh", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 70, 5, 5] }]\n"
     "weights: [{ name: w, shape: [9, 70, 3, 3] }, { name: b, shape: [9] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: tanh, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"conv_act", "conv_act_g2_kg12_many_pixels_relu6", "conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 6, 17, 19] }]\n"
     "weights: [{ name: w, shape: [24, 3, 3, 3] }, { name: b, shape: [24] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 2, padding: [1, 1] } }\n"
     "  - { name: y, op: relu6, inputs: [c] }\n"
     "outputs: [y]\n"},

    /* ---- conv_bn, conv_bn_act ---- */
    {"conv_bn", "conv_bn_nobias_same", "conv_bn", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 7] }]\n"
     "weights:\n"
     "  - { name: w, shape: [12, 5, 3, 3] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "outputs: [y]\n"},
    {"conv_bn", "conv_bn_bias_g2_s2", "conv_bn", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 6, 13, 13] }]\n"
     "weights:\n"
     "  - { name: w, shape: [10, 3, 3, 3] }\n"
     "  - { name: b, shape: [10] }\n"
     "  - { name: g, shape: [10], init: positive }\n"
     "  - { name: be, shape: [10] }\n"
     "  - { name: m, shape: [10], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [10], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 2, stride: [2, 2] } }\n"
     "  - { name: y, op: batch_norm, inputs: [c, g, be, m, v], attrs: { eps: 0.001 } }\n"
     "outputs: [y]\n"},
    {"conv_bn", "conv_bn_relu6_nobias_s2", "conv_bn_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 13, 13] }]\n"
     "weights:\n"
     "  - { name: w, shape: [16, 3, 3, 3] }\n"
     "  - { name: g, shape: [16], init: positive }\n"
     "  - { name: be, shape: [16] }\n"
     "  - { name: m, shape: [16], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [16], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: relu6, inputs: [bn] }\n"
     "outputs: [y]\n"},
    {"conv_bn", "conv_bn_silu_1x1", "conv_bn_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 17, 7, 7] }]\n"
     "weights:\n"
     "  - { name: w, shape: [12, 17, 1, 1] }\n"
     "  - { name: b, shape: [12] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b] }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: silu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    {"conv_bn", "conv_bn_dil2_sigmoid", "conv_bn_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 5, 13, 13] }]\n"
     "weights:\n"
     "  - { name: w, shape: [7, 5, 3, 3] }\n"
     "  - { name: g, shape: [7], init: positive }\n"
     "  - { name: be, shape: [7] }\n"
     "  - { name: m, shape: [7], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [7], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { dilation: [2, 2], padding: [2, 2] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: sigmoid, inputs: [bn] }\n"
     "outputs: [y]\n"},

    /* ---- conv_bn_add_act, conv_add_act ---- */
    {"conv_residual", "conv_bn_add_relu_shortcut_x", "conv_bn_add_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 8, 7, 7] }]\n"
     "weights:\n"
     "  - { name: w, shape: [8, 8, 3, 3] }\n"
     "  - { name: g, shape: [8], init: positive }\n"
     "  - { name: be, shape: [8] }\n"
     "  - { name: m, shape: [8], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [8], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: a, op: add, inputs: [bn, x] }\n"
     "  - { name: y, op: relu, inputs: [a] }\n"
     "outputs: [y]\n"},
    {"conv_residual", "conv_bn_add_noact_s2", "conv_bn_add_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 13, 13] }, { name: r, shape: [2, 12, 7, 7] }]\n"
     "weights:\n"
     "  - { name: w, shape: [12, 5, 3, 3] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: add, inputs: [r, bn] }\n"
     "outputs: [y]\n"},
    {"conv_residual", "conv_add_prelu_1x1", "conv_add_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 7, 7] }, { name: r, shape: [1, 5, 7, 7] }]\n"
     "weights: [{ name: w, shape: [5, 3, 1, 1] }, { name: b, shape: [5] }, { name: s, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b] }\n"
     "  - { name: a, op: add, inputs: [c, r] }\n"
     "  - { name: y, op: prelu, inputs: [a, s] }\n"
     "outputs: [y]\n"},
    {"conv_residual", "conv_add_bcast_channel_gelu", "conv_add_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 4, 7, 13] }]\n"
     "weights: [{ name: w, shape: [5, 4, 3, 3] }, { name: s, shape: [5, 1, 1] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }\n"
     "  - { name: a, op: add, inputs: [c, s] }\n"
     "  - { name: y, op: gelu, inputs: [a] }\n"
     "outputs: [y]\n"},
    {"conv_residual", "conv_add_g2_p0_noact", "conv_add_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 4, 7, 7] }, { name: r, shape: [2, 6, 5, 5] }]\n"
     "weights: [{ name: w, shape: [6, 2, 3, 3] }, { name: b, shape: [6] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 2 } }\n"
     "  - { name: y, op: add, inputs: [c, r] }\n"
     "outputs: [y]\n"},

    /* ---- depthwise ---- */
    {"depthwise", "dw_bn_relu6_s2", "dw_conv_bn_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 12, 13, 13] }]\n"
     "weights:\n"
     "  - { name: w, shape: [12, 1, 3, 3] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { groups: 12, stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: relu6, inputs: [bn] }\n"
     "outputs: [y]\n"},
    {"depthwise", "dw_bn_noact_nobias", "dw_conv_bn_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 7] }]\n"
     "weights:\n"
     "  - { name: w, shape: [5, 1, 3, 3] }\n"
     "  - { name: g, shape: [5], init: positive }\n"
     "  - { name: be, shape: [5] }\n"
     "  - { name: m, shape: [5], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [5], init: positive }\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w], attrs: { groups: 5, padding: [1, 1] } }\n"
     "  - { name: y, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "outputs: [y]\n"},
    {"depthwise", "dw_dil2_clip", "dw_conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 7] }]\n"
     "weights: [{ name: w, shape: [5, 1, 3, 3] }, { name: b, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 5, dilation: [2, 2], padding: [2, 2] } }\n"
     "  - { name: y, op: clip, inputs: [c], attrs: { lo: -0.25, hi: 0.5 } }\n"
     "outputs: [y]\n"},
    {"depthwise", "dw_multiplier2_silu", "dw_conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 4, 7, 7] }]\n"
     "weights: [{ name: w, shape: [8, 1, 3, 3] }, { name: b, shape: [8] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 4 } }\n"
     "  - { name: y, op: silu, inputs: [c] }\n"
     "outputs: [y]\n"},
    {"depthwise", "dw_5x5_w1_hardswish", "dw_conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 7, 1] }]\n"
     "weights: [{ name: w, shape: [3, 1, 5, 5] }, { name: b, shape: [3] }]\n"
     "nodes:\n"
     "  - { name: c, op: conv2d, inputs: [x, w, b], attrs: { groups: 3, padding: [2, 2] } }\n"
     "  - { name: y, op: hardswish, inputs: [c] }\n"
     "outputs: [y]\n"},

    /* ---- matmul_bias_act, gemm_act, gemm_bn_act ---- */
    {"matmul", "mm_1x37x5_bias_n_relu", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [1, 37] }]\n"
     "weights: [{ name: b, shape: [37, 5] }, { name: bias, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: ad, op: add, inputs: [mm, bias] }\n"
     "  - { name: y, op: relu, inputs: [ad] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_13x100x17_bias_1n_gelu_tanh", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [13, 100] }]\n"
     "weights: [{ name: b, shape: [100, 17] }, { name: bias, shape: [1, 17] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: ad, op: add, inputs: [mm, bias] }\n"
     "  - { name: y, op: gelu_tanh, inputs: [ad] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_64x300x40_bias_m1_noact", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [64, 300] }]\n"
     "weights: [{ name: b, shape: [300, 40] }, { name: bias, shape: [64, 1] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: add, inputs: [bias, mm] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_13x100x17_bias_mn_softplus", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [13, 100] }, { name: r, shape: [13, 17] }]\n"
     "weights: [{ name: b, shape: [100, 17] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: ad, op: add, inputs: [mm, r] }\n"
     "  - { name: y, op: softplus, inputs: [ad] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_trans_b_7x37x5_tanh", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [7, 37] }]\n"
     "weights: [{ name: b, shape: [5, 37] }, { name: bias, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b], attrs: { trans_b: true } }\n"
     "  - { name: ad, op: add, inputs: [mm, bias] }\n"
     "  - { name: y, op: tanh, inputs: [ad] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_trans_a_batched_2x13x37x5_relu6", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [2, 37, 13] }]\n"
     "weights: [{ name: b, shape: [37, 5] }, { name: bias, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b], attrs: { trans_a: true } }\n"
     "  - { name: ad, op: add, inputs: [mm, bias] }\n"
     "  - { name: y, op: relu6, inputs: [ad] }\n"
     "outputs: [y]\n"},
    {"matmul", "gemm_13x100x17_bias_elu", "gemm_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [13, 100] }]\n"
     "weights: [{ name: b, shape: [100, 17] }, { name: bias, shape: [17] }]\n"
     "nodes:\n"
     "  - { name: mm, op: gemm, inputs: [a, b, bias] }\n"
     "  - { name: y, op: elu, inputs: [mm], attrs: { alpha: 0.5 } }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_1x37x5_sigmoid", "gemm_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [1, 37] }]\n"
     "weights: [{ name: b, shape: [37, 5] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: y, op: sigmoid, inputs: [mm] }\n"
     "outputs: [y]\n"},
    {"matmul", "gemm_bn_7x37x12_leaky", "gemm_bn_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [7, 37] }]\n"
     "weights:\n"
     "  - { name: b, shape: [37, 12] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: mm, op: gemm, inputs: [a, b] }\n"
     "  - { name: bn, op: batch_norm, inputs: [mm, g, be, m, v] }\n"
     "  - { name: y, op: leaky_relu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    {"matmul", "gemm_bn_64x300x40_bias_noact", "gemm_bn_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [64, 300] }]\n"
     "weights:\n"
     "  - { name: b, shape: [300, 40] }\n"
     "  - { name: bias, shape: [40] }\n"
     "  - { name: g, shape: [40], init: positive }\n"
     "  - { name: be, shape: [40] }\n"
     "  - { name: m, shape: [40], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [40], init: positive }\n"
     "nodes:\n"
     "  - { name: mm, op: gemm, inputs: [a, b, bias] }\n"
     "  - { name: y, op: batch_norm, inputs: [mm, g, be, m, v] }\n"
     "outputs: [y]\n"},

    {"matmul", "gemm_67x45x70_two_tiles_hardswish", "gemm_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [67, 45] }]\n"
     "weights: [{ name: b, shape: [45, 70] }, { name: bias, shape: [70] }]\n"
     "nodes:\n"
     "  - { name: mm, op: gemm, inputs: [a, b, bias] }\n"
     "  - { name: y, op: hardswish, inputs: [mm] }\n"
     "outputs: [y]\n"},
    {"matmul", "mm_batched_3x7x13x9_b_input_bias_clip", "matmul_bias_act", {TOL}, NULL,
     "inputs: [{ name: a, shape: [3, 7, 13] }, { name: b, shape: [13, 9] }]\n"
     "weights: [{ name: bias, shape: [9] }]\n"
     "nodes:\n"
     "  - { name: mm, op: matmul, inputs: [a, b] }\n"
     "  - { name: ad, op: add, inputs: [mm, bias] }\n"
     "  - { name: y, op: clip, inputs: [ad], attrs: { lo: -0.3, hi: 0.3 } }\n"
     "outputs: [y]\n"},

    /* ---- matmul_softmax (tests/unit/test_gemm_softmax.c has the matrix) ---- */
    {"matmul", "mm_batched_2x9x33x13_bias_scale_softmax", "matmul_softmax", {TOL}, NULL,
     "inputs: [{ name: a, shape: [2, 9, 13] }]\n"
     "weights: [{ name: b, shape: [13, 33] }, { name: bias, shape: [33] }, { name: s, shape: [1] }]\n"
     "nodes:\n"
     "  - { name: mm, op: gemm, inputs: [a, b, bias] }\n"
     "  - { name: sc, op: mul, inputs: [mm, s] }\n"
     "  - { name: y, op: softmax, inputs: [sc] }\n"
     "outputs: [y]\n"},

    /* ---- bn_bn, bn_pointwise, pointwise_chain ---- */
    {"pointwise", "bn_bn_relu", "bn_bn", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 7] }]\n"
     "weights:\n"
     "  - { name: g1, shape: [5], init: positive }\n"
     "  - { name: b1, shape: [5] }\n"
     "  - { name: m1, shape: [5], uniform: [-0.2, 0.2] }\n"
     "  - { name: v1, shape: [5], init: positive }\n"
     "  - { name: g2, shape: [5], init: positive }\n"
     "  - { name: b2, shape: [5] }\n"
     "  - { name: m2, shape: [5], uniform: [-0.2, 0.2] }\n"
     "  - { name: v2, shape: [5], init: positive }\n"
     "nodes:\n"
     "  - { name: bn1, op: batch_norm, inputs: [x, g1, b1, m1, v1] }\n"
     "  - { name: bn2, op: batch_norm, inputs: [bn1, g2, b2, m2, v2] }\n"
     "  - { name: y, op: relu, inputs: [bn2] }\n"
     "outputs: [y]\n"},
    {"pointwise", "bn_bn_only_17x13x1", "bn_bn", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 17, 13, 1] }]\n"
     "weights:\n"
     "  - { name: g1, shape: [17], init: positive }\n"
     "  - { name: b1, shape: [17] }\n"
     "  - { name: m1, shape: [17], uniform: [-0.2, 0.2] }\n"
     "  - { name: v1, shape: [17], init: positive }\n"
     "  - { name: g2, shape: [17], init: positive }\n"
     "  - { name: b2, shape: [17] }\n"
     "  - { name: m2, shape: [17], uniform: [-0.2, 0.2] }\n"
     "  - { name: v2, shape: [17], init: positive }\n"
     "nodes:\n"
     "  - { name: bn1, op: batch_norm, inputs: [x, g1, b1, m1, v1] }\n"
     "  - { name: y, op: batch_norm, inputs: [bn1, g2, b2, m2, v2], attrs: { eps: 0.01 } }\n"
     "outputs: [y]\n"},
    {"pointwise", "bn_prelu_mul_bcast", "bn_pointwise", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 17, 13, 1] }]\n"
     "weights:\n"
     "  - { name: g, shape: [17], init: positive }\n"
     "  - { name: be, shape: [17] }\n"
     "  - { name: m, shape: [17], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [17], init: positive }\n"
     "  - { name: s, shape: [17] }\n"
     "  - { name: k, shape: [17, 1, 1] }\n"
     "nodes:\n"
     "  - { name: bn, op: batch_norm, inputs: [x, g, be, m, v] }\n"
     "  - { name: p, op: prelu, inputs: [bn, s] }\n"
     "  - { name: y, op: mul, inputs: [p, k] }\n"
     "outputs: [y]\n"},
    {"pointwise", "pw_add_bcast_gelu_tanh_hardsigmoid", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 7, 13] }, { name: z, shape: [3, 1, 13] }]\n"
     "nodes:\n"
     "  - { name: a, op: add, inputs: [x, z] }\n"
     "  - { name: gt, op: gelu_tanh, inputs: [a] }\n"
     "  - { name: y, op: hardsigmoid, inputs: [gt] }\n"
     "outputs: [y]\n"},
    /* The ONNX element-wise ops (rules/onnx_ops.yaml): unary math on a
     * positive argument (|x| + 0.5), pow with a computed exponent.  Tensors
     * read by several ops end chains, hence several pointwise kernels. */
    {"pointwise", "pw_onnx_unary_pow",
     "pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }, { name: z, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: h, shape: [1], values: [0.5] }]\n"
     "nodes:\n"
     "  - { name: a, op: abs, inputs: [x] }\n"
     "  - { name: b, op: add, inputs: [a, h] }\n"
     "  - { name: l, op: log, inputs: [b] }\n"
     "  - { name: q, op: sqrt, inputs: [b] }\n"
     "  - { name: r, op: reciprocal, inputs: [b] }\n"
     "  - { name: e, op: exp, inputs: [z] }\n"
     "  - { name: n, op: neg, inputs: [e] }\n"
     "  - { name: pw, op: pow, inputs: [b, z] }\n"
     "  - { name: s1, op: add, inputs: [l, q] }\n"
     "  - { name: s2, op: add, inputs: [r, n] }\n"
     "  - { name: s3, op: add, inputs: [s1, s2] }\n"
     "  - { name: y, op: add, inputs: [s3, pw] }\n"
     "outputs: [y]\n"},
    /* Clip with tensor bounds, Max / Min, the comparisons and Where.  The
     * comparisons read graph inputs only, so the fused kernel and the
     * reference compare the same stored values (no flips at rounding ties). */
    {"pointwise", "pw_onnx_clip_minmax_where",
     "pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,"
     "pointwise_chain",
     {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }, { name: z, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: lo, shape: [1], values: [-0.5] }, { name: hi, shape: [1], values: [0.5] }]\n"
     "nodes:\n"
     "  - { name: c1, op: clip_t, inputs: [x, lo, hi] }\n"
     "  - { name: c2, op: clip_min_t, inputs: [z, lo] }\n"
     "  - { name: c3, op: clip_max_t, inputs: [c2, hi] }\n"
     "  - { name: mx, op: max2, inputs: [c1, z] }\n"
     "  - { name: mn, op: min2, inputs: [c3, x] }\n"
     "  - { name: lt, op: cmp_less, inputs: [x, z] }\n"
     "  - { name: gt, op: cmp_greater, inputs: [x, z] }\n"
     "  - { name: eq, op: cmp_equal, inputs: [x, x] }\n"
     "  - { name: le, op: cmp_less_equal, inputs: [z, x] }\n"
     "  - { name: ge, op: cmp_greater_equal, inputs: [z, x] }\n"
     "  - { name: w1, op: where, inputs: [lt, mx, mn] }\n"
     "  - { name: w2, op: where, inputs: [gt, mn, mx] }\n"
     "  - { name: w3, op: where, inputs: [eq, w1, x] }\n"
     "  - { name: w4, op: where, inputs: [le, w2, z] }\n"
     "  - { name: w5, op: where, inputs: [ge, w3, w4] }\n"
     "  - { name: y, op: add, inputs: [w5, w4] }\n"
     "outputs: [y]\n"},
    /* T5's overflow clamp as one op: the bound picked by a one-element flag,
     * c != 0 (a negative flag holds) or with strict c > 0 (it does not) */
    {"pointwise", "pw_clip_sym_select", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: fneg, shape: [1], values: [-1.0] }, { name: fzero, shape: [1], values: [0.0] }]\n"
     "nodes:\n"
     "  - { name: c1, op: clip_sym_select, inputs: [x, fneg], attrs: { hi_true: 0.25, hi_false: 2.0, strict: 1 } }\n"
     "  - { name: c2, op: clip_sym_select, inputs: [c1, fneg], attrs: { hi_true: 1.5, hi_false: 0.1 } }\n"
     "  - { name: c3, op: clip_sym_select, inputs: [c2, fzero], attrs: { hi_true: 0.1, hi_false: 1.25 } }\n"
     "  - { name: y, op: mul, inputs: [c3, x] }\n"
     "outputs: [y]\n"},
    {"pointwise", "pw_vec4_sub_mul_tanh", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 4, 7, 7] }, { name: z, shape: [2, 4, 7, 7] }, { name: u, shape: [2, 4, 7, 7] }]\n"
     "nodes:\n"
     "  - { name: d, op: sub, inputs: [x, z] }\n"
     "  - { name: e, op: mul, inputs: [d, u] }\n"
     "  - { name: y, op: tanh, inputs: [e] }\n"
     "outputs: [y]\n"},
    {"pointwise", "pw_scalar_mul_elu_softplus_clip", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 5, 1, 13] }]\n"
     "weights: [{ name: k, shape: [1], values: [3.0] }]\n"
     "nodes:\n"
     "  - { name: s, op: mul, inputs: [x, k] }\n"
     "  - { name: e, op: elu, inputs: [s] }\n"
     "  - { name: sp, op: softplus, inputs: [e] }\n"
     "  - { name: y, op: clip, inputs: [sp], attrs: { lo: 0.5, hi: 2.0 } }\n"
     "outputs: [y]\n"},
    {"pointwise", "pw_rank2_bias_silu_relu6_leaky", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [13, 17] }]\n"
     "weights: [{ name: b, shape: [17] }, { name: k, shape: [1], values: [5.0] }]\n"
     "nodes:\n"
     "  - { name: a, op: add, inputs: [x, b] }\n"
     "  - { name: s, op: mul, inputs: [a, k] }\n"
     "  - { name: si, op: silu, inputs: [s] }\n"
     "  - { name: r6, op: relu6, inputs: [si] }\n"
     "  - { name: y, op: leaky_relu, inputs: [r6], attrs: { alpha: 0.1 } }\n"
     "outputs: [y]\n"},
    /* the element-wise ops of the ONNX vocabulary (rules/onnx_ops.yaml) */
    {"pointwise", "pw_onnx_div_erf_prelu_clips_hsig", "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: d, shape: [3, 1, 1], uniform: [0.5, 2.0] }, { name: s, shape: [3, 1, 7] }]\n"
     "nodes:\n"
     "  - { name: q, op: div, inputs: [x, d] }\n"
     "  - { name: e, op: erf, inputs: [q] }\n"
     "  - { name: i, op: identity, inputs: [e] }\n"
     "  - { name: pr, op: prelu_broadcast, inputs: [i, s] }\n"
     "  - { name: lo, op: clip_min, inputs: [pr], attrs: { lo: -0.3 } }\n"
     "  - { name: hi, op: clip_max, inputs: [lo], attrs: { hi: 0.6 } }\n"
     "  - { name: y, op: hardsigmoid_ab, inputs: [hi], attrs: { alpha: 0.3, beta: 0.4 } }\n"
     "outputs: [y]\n"},

    /* Rounding and sign (rules/onnx_ops.yaml).  Each reads a graph input
     * scaled by 4 (exact in every dtype), so the fused kernel and the reference
     * of the unfused graph round the same values: no flips at integer
     * boundaries between fp32 registers and a stored intermediate. */
    {"pointwise", "pw_onnx_floor_ceil_round_sign",
     "pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }, { name: z, shape: [2, 3, 5, 7] },\n"
     "         { name: u, shape: [2, 3, 5, 7] }, { name: v, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: k, shape: [1], values: [4.0] }]\n"
     "nodes:\n"
     "  - { name: xs, op: mul, inputs: [x, k] }\n"
     "  - { name: f, op: floor, inputs: [xs] }\n"
     "  - { name: zs, op: mul, inputs: [z, k] }\n"
     "  - { name: c, op: ceil, inputs: [zs] }\n"
     "  - { name: us, op: mul, inputs: [u, k] }\n"
     "  - { name: r, op: round, inputs: [us] }\n"
     "  - { name: g, op: sign, inputs: [v] }\n"
     "  - { name: a1, op: add, inputs: [f, c] }\n"
     "  - { name: a2, op: add, inputs: [r, g] }\n"
     "  - { name: y, op: add, inputs: [a1, a2] }\n"
     "outputs: [y]\n"},
    /* The trigonometric and hyperbolic functions and their inverses, each on
     * an argument where it is well conditioned (|arg| <= 0.5 for asin and
     * atanh, >= 2 for acosh).  Thirteen ops exceed the pointwise template's 12
     * epilogue stages, hence two
     * kernels. */
    {"pointwise", "pw_onnx_trig_hyperbolic", "pointwise_chain,pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }]\n"
     "weights: [{ name: h, shape: [1], values: [0.5] }, { name: two, shape: [1], values: [2.0] }]\n"
     "nodes:\n"
     "  - { name: s, op: mul, inputs: [x, h] }\n"
     "  - { name: as, op: asin, inputs: [s] }\n"
     "  - { name: si, op: sin, inputs: [as] }\n"
     "  - { name: ac, op: acos, inputs: [si] }\n"
     "  - { name: co, op: cos, inputs: [ac] }\n"
     "  - { name: at, op: atan, inputs: [co] }\n"
     "  - { name: ta, op: tan, inputs: [at] }\n"
     "  - { name: ah, op: atanh, inputs: [ta] }\n"
     "  - { name: sh, op: sinh, inputs: [ah] }\n"
     "  - { name: ash, op: asinh, inputs: [sh] }\n"
     "  - { name: ch, op: cosh, inputs: [ash] }\n"
     "  - { name: p, op: add, inputs: [ch, two] }\n"
     "  - { name: y, op: acosh, inputs: [p] }\n"
     "outputs: [y]\n"},
    /* selu, celu, softsign and mish on a chain; shrink and thresholded_relu
     * (discontinuous) read graph inputs directly, as the comparisons above. */
    {"pointwise", "pw_onnx_selu_celu_softsign_mish_shrink", "pointwise_chain,pointwise_chain,pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 5, 7] }, { name: z, shape: [2, 3, 5, 7] }, { name: u, shape: [2, 3, 5, 7] }]\n"
     "nodes:\n"
     "  - { name: se, op: selu, inputs: [x] }\n"
     "  - { name: ce, op: celu, inputs: [se], attrs: { alpha: 0.7 } }\n"
     "  - { name: ss, op: softsign, inputs: [ce] }\n"
     "  - { name: mi, op: mish, inputs: [ss] }\n"
     "  - { name: sk, op: shrink, inputs: [z], attrs: { bias: 0.1, lambd: 0.3 } }\n"
     "  - { name: th, op: thresholded_relu, inputs: [u], attrs: { alpha: 0.2 } }\n"
     "  - { name: a1, op: add, inputs: [mi, sk] }\n"
     "  - { name: y, op: add, inputs: [a1, th] }\n"
     "outputs: [y]\n"},

    /* ---- single ops (no rule) and a multi-kernel graph ---- */
    /* integer and bool tensors: an embedding gather by int64 ids (negative
     * ones count from the end), and an int32 gather of a computed tensor */
    {"single", "gather_embedding_ids", "gather_pointwise", {TOL}, NULL,
     "inputs: [{ name: ids, shape: [2, 5], dtype: int64 }]\n"
     "weights: [{ name: table, shape: [11, 6] }]\n"
     "nodes:\n"
     "  - { name: e, op: gather, inputs: [table, ids] }\n"
     "  - { name: y, op: relu, inputs: [e] }\n"
     "outputs: [y]\n"},
    {"single", "gather_axis1_int32", "pointwise_chain,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 7, 4] }, { name: i, shape: [5], dtype: int32 }]\n"
     "nodes:\n"
     "  - { name: t, op: tanh, inputs: [x] }\n"
     "  - { name: y, op: gather, inputs: [t, i], attrs: { axis: 1 } }\n"
     "outputs: [y]\n"},
    /* bool results of comparisons and predicates, the logic ops, Where and
     * the casts (to int toward zero, to bool nonzero, back to float) */
    {"pointwise", "pw_bool_logic_where_casts",
     "pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,pointwise_chain,"
     "pointwise_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 7] }, { name: z, shape: [2, 3, 7] }, { name: m, shape: [3, 7], dtype: bool }]\n"
     /* k a power of two: x * k is exact in every dtype, so whether the product is rounded to
      * the storage dtype before the truncating cast (a kernel boundary) cannot move it across an
      * integer (with 5.0, fp16 -0.7998 * 5 = -3.999 rounds to -4 when stored) */
     "weights: [{ name: k, shape: [1], values: [4.0] }]\n"
     "nodes:\n"
     "  - { name: gt, op: cmp_greater, inputs: [x, z] }\n"
     "  - { name: nan, op: is_nan, inputs: [x] }\n"
     "  - { name: inf, op: is_inf, inputs: [z] }\n"
     "  - { name: o1, op: logical_or, inputs: [gt, nan] }\n"
     "  - { name: o2, op: logical_xor, inputs: [o1, inf] }\n"
     "  - { name: a, op: logical_and, inputs: [o2, m] }\n"
     "  - { name: na, op: logical_not, inputs: [a] }\n"
     "  - { name: w, op: where, inputs: [na, x, z] }\n"
     "  - { name: xs, op: mul, inputs: [x, k] }\n"
     "  - { name: xi, op: cast_int, inputs: [xs], attrs: { to: int64 } }\n"
     "  - { name: xf, op: cast, inputs: [xi], attrs: { to: fp32 } }\n"
     "  - { name: zb, op: cast_bool, inputs: [z] }\n"
     "  - { name: lg, op: log, inputs: [z] }\n"
     "  - { name: nzz, op: nan_to_zero, inputs: [lg] }\n"
     "outputs: [w, xf, zb, nzz]\n"},
    {"single", "maxpool_3x3_s2_p1", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 5, 13, 13] }]\n"
     "nodes:\n"
     "  - { name: y, op: max_pool2d, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
     "outputs: [y]\n"},
    {"single", "avgpool_2x2_s2_odd", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 3, 7, 7] }]\n"
     "nodes:\n"
     "  - { name: y, op: avg_pool2d, inputs: [x], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
     "outputs: [y]\n"},
    {"single", "global_avg_pool_17x7x5", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 17, 7, 5] }]\n"
     "nodes:\n"
     "  - { name: y, op: global_avg_pool, inputs: [x] }\n"
     "outputs: [y]\n"},
    /* NHWC: lanes over channels, 8 a lane (C 72: a partial block of 256 channels;
     * 3 x 7 pixels over 4 pixel groups), one a lane (C 17 above) */
    {"single", "global_avg_pool_72x3x7", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 72, 3, 7] }]\n"
     "nodes:\n"
     "  - { name: y, op: global_avg_pool, inputs: [x] }\n"
     "outputs: [y]\n"},
    {"single", "global_max_pool_264x5x1", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 264, 5, 1] }]\n"
     "nodes:\n"
     "  - { name: y, op: global_max_pool, inputs: [x] }\n"
     "outputs: [y]\n"},
    {"single", "avgpool_3x3_s2_p1", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 5, 13, 13] }]\n"
     "nodes:\n"
     "  - { name: y, op: avg_pool2d, inputs: [x], attrs: { kernel: [3, 3], stride: [2, 2], padding: [1, 1] } }\n"
     "outputs: [y]\n"},
    {"single", "head_gap_flatten_gemm_relu", "-,gemm_act", {TOL}, NULL,   /* the flatten: an alias, no kernel */
     "inputs: [{ name: x, shape: [2, 17, 5, 3] }]\n"
     "weights: [{ name: w, shape: [17, 10] }, { name: b, shape: [10] }]\n"
     "nodes:\n"
     "  - { name: gp, op: global_avg_pool, inputs: [x] }\n"
     "  - { name: f, op: flatten, inputs: [gp] }\n"
     "  - { name: mm, op: gemm, inputs: [f, w, b] }\n"
     "  - { name: y, op: relu, inputs: [mm] }\n"
     "outputs: [y]\n"},
    {"single", "flatten_spatial_gemm", "-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 3, 3] }]\n"
     "weights: [{ name: w, shape: [45, 7] }]\n"
     "nodes:\n"
     "  - { name: f, op: flatten, inputs: [x] }\n"
     "  - { name: y, op: matmul, inputs: [f, w] }\n"
     "outputs: [y]\n"},
    {"single", "bn_alone_rank2", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [13, 17] }]\n"
     "weights:\n"
     "  - { name: g, shape: [17], init: positive }\n"
     "  - { name: be, shape: [17] }\n"
     "  - { name: m, shape: [17], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [17], init: positive }\n"
     "nodes:\n"
     "  - { name: y, op: batch_norm, inputs: [x, g, be, m, v] }\n"
     "outputs: [y]\n"},
    {"single", "conv_alone_same", "-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 7, 7] }]\n"
     "weights: [{ name: w, shape: [5, 3, 3, 3] }, { name: b, shape: [5] }]\n"
     "nodes:\n"
     "  - { name: y, op: conv2d, inputs: [x, w, b], attrs: { padding: [1, 1] } }\n"
     "outputs: [y]\n"},
    {"single", "net_convbnrelu_pool_convact_two_outputs", "conv_bn_act,-,conv_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 3, 13, 13] }]\n"
     "weights:\n"
     "  - { name: w1, shape: [12, 3, 3, 3] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "  - { name: w2, shape: [5, 12, 3, 3] }\n"
     "  - { name: b2, shape: [5] }\n"
     "nodes:\n"
     "  - { name: c1, op: conv2d, inputs: [x, w1], attrs: { padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c1, g, be, m, v] }\n"
     "  - { name: r1, op: relu, inputs: [bn] }\n"
     "  - { name: p, op: max_pool2d, inputs: [r1], attrs: { kernel: [2, 2], stride: [2, 2] } }\n"
     "  - { name: c2, op: conv2d, inputs: [p, w2, b2], attrs: { padding: [1, 1] } }\n"
     "  - { name: y, op: tanh, inputs: [c2] }\n"
     "outputs: [y, p]\n"},
    /* ---- re-indexing copies and rows: copy_chain (ShuffleNet's channel shuffle), softmax, lrn ---- */
    {"single", "copy_chain_shuffle_softmax_lrn", "copy_chain,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 6, 5, 3] }]\n"
     "nodes:\n"
     "  - { name: a, op: reshape, inputs: [x], attrs: { shape: [2, 2, 3, 5, 3] } }\n"
     "  - { name: b, op: transpose, inputs: [a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: c, op: reshape, inputs: [b], attrs: { shape: [2, 6, 5, 3] } }\n"
     "  - { name: s, op: softmax, inputs: [c], attrs: { axis: 1 } }\n"
     "  - { name: y, op: lrn, inputs: [s], attrs: { size: 3, alpha: 0.5 } }\n"
     "outputs: [y]\n"},
    {"single", "copy_bn_act_concat_transpose_sigmoid", "copy_bn_act,copy_act", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 6, 5, 3] }, { name: z, shape: [2, 1, 5, 3] }]\n"
     "weights:\n"
     "  - { name: g, shape: [7], init: positive }\n"
     "  - { name: be, shape: [7] }\n"
     "  - { name: m, shape: [7], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [7], init: positive }\n"
     "nodes:\n"
     "  - { name: cat, op: concat, inputs: [x, z], attrs: { axis: 1 } }\n"
     "  - { name: bn, op: batch_norm, inputs: [cat, g, be, m, v] }\n"
     "  - { name: r, op: relu, inputs: [bn] }\n"
     "  - { name: t, op: transpose, inputs: [r], attrs: { perm: [0, 2, 3, 1] } }\n"
     "  - { name: y, op: sigmoid, inputs: [t] }\n"
     "outputs: [y]\n"},
    /* ---- input maps: a channel shuffle (or any reshape / transpose chain) read
     * by the conv after it through the composed index map, no copy kernel
     * (rules/shuffle.yaml); in NHWC every template here still reads x element
     * by element (conv2d_depthwise, conv2d_nhwc), C = 12 is no tensor-core
     * shape, so every variant fuses ---- */
    {"shuffle", "shuffle_g3_dw_bn_relu", "shuffle_conv", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 12, 7, 5] }]\n"
     "weights:\n"
     "  - { name: wd, shape: [12, 1, 3, 3] }\n"
     "  - { name: g, shape: [12], init: positive }\n"
     "  - { name: be, shape: [12] }\n"
     "  - { name: m, shape: [12], uniform: [-0.2, 0.2] }\n"
     "  - { name: v, shape: [12], init: positive }\n"
     "nodes:\n"
     "  - { name: a, op: reshape, inputs: [x], attrs: { shape: [2, 3, 4, 7, 5] } }\n"
     "  - { name: b, op: transpose, inputs: [a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: s, op: reshape, inputs: [b], attrs: { shape: [2, 12, 7, 5] } }\n"
     "  - { name: c, op: conv2d, inputs: [s, wd], attrs: { groups: 12, padding: [1, 1] } }\n"
     "  - { name: bn, op: batch_norm, inputs: [c, g, be, m, v] }\n"
     "  - { name: y, op: relu, inputs: [bn] }\n"
     "outputs: [y]\n"},
    /* a grouped conv (2 groups): conv2d_tc, which cannot read through an
     * input map and would leave the shuffle a copy, refuses it in every dtype */
    {"shuffle", "shuffle_g4_gconv_s2_add_relu", "shuffle_conv", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 12, 5, 7] }, { name: z, shape: [1, 6, 3, 4] }]\n"
     "weights: [{ name: w, shape: [6, 6, 3, 3] }, { name: bias, shape: [6] }]\n"
     "nodes:\n"
     "  - { name: a, op: reshape, inputs: [x], attrs: { shape: [1, 4, 3, 5, 7] } }\n"
     "  - { name: b, op: transpose, inputs: [a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: s, op: reshape, inputs: [b], attrs: { shape: [1, 12, 5, 7] } }\n"
     "  - { name: c, op: conv2d, inputs: [s, w, bias], attrs: { stride: [2, 2], padding: [1, 1], groups: 2 } }\n"
     "  - { name: r, op: add, inputs: [c, z] }\n"
     "  - { name: y, op: relu, inputs: [r] }\n"
     "outputs: [y]\n"},
    {"shuffle", "transpose_into_dw_s2_hardswish", "shuffle_conv", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 12] }]\n"
     "weights: [{ name: wd, shape: [12, 1, 3, 3] }, { name: bias, shape: [12] }]\n"
     "nodes:\n"
     "  - { name: t, op: transpose, inputs: [x], attrs: { perm: [0, 3, 1, 2] } }\n"
     "  - { name: c, op: conv2d, inputs: [t, wd, bias], attrs: { groups: 12, stride: [2, 2], padding: [1, 1] } }\n"
     "  - { name: y, op: hardswish, inputs: [c] }\n"
     "outputs: [y]\n"},
    /* a shuffle followed by element-wise ops is one copy kernel already (the
     * copy template composes the map and applies them before its store) */
    {"shuffle", "shuffle_g4_add_sigmoid", "copy_chain", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 12, 5, 3] }, { name: z, shape: [2, 12, 5, 3] }]\n"
     "nodes:\n"
     "  - { name: a, op: reshape, inputs: [x], attrs: { shape: [2, 4, 3, 5, 3] } }\n"
     "  - { name: b, op: transpose, inputs: [a], attrs: { perm: [0, 2, 1, 3, 4] } }\n"
     "  - { name: s, op: reshape, inputs: [b], attrs: { shape: [2, 12, 5, 3] } }\n"
     "  - { name: r, op: add, inputs: [z, s] }\n"
     "  - { name: y, op: sigmoid, inputs: [r] }\n"
     "outputs: [y]\n"},
    /* ---- reductions (reduce kind, templates/reduce.cuh) and log_softmax: a warp per output over
     * contiguous axes, a thread per output over outer axes, a block per output over long rows;
     * axes not adjacent, keepdims both ways ---- */
    {"reduce", "reduce_sum_warp_max_thread_min_split", "-,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 13, 7, 3] }]\n"
     "nodes:\n"
     "  - { name: s, op: reduce_sum, inputs: [x], attrs: { axes: [2, 3] } }\n"
     "  - { name: m, op: reduce_max, inputs: [x], attrs: { axes: [1] } }\n"
     "  - { name: n, op: reduce_min, inputs: [x], attrs: { axes: [0, 2], keepdims: false } }\n"
     "outputs: [s, m, n]\n"},
    {"reduce", "reduce_mean_prod_l1_l2_sumsq", "-,-,-,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 5, 4, 6] }]\n"
     "nodes:\n"
     "  - { name: a, op: reduce_mean, inputs: [x], attrs: { axes: [-1, 1] } }\n"
     "  - { name: b, op: reduce_prod, inputs: [x], attrs: { axes: [2], keepdims: false } }\n"
     "  - { name: c, op: reduce_l1, inputs: [x], attrs: { axes: [0, 1, 2, 3], keepdims: false } }\n"
     "  - { name: d, op: reduce_l2, inputs: [x], attrs: { axes: [0] } }\n"
     "  - { name: e, op: reduce_sum_square, inputs: [x], attrs: { axes: [1, 2] } }\n"
     "outputs: [a, b, c, d, e]\n"},
    /* the index reductions (a thread per output, in index order; int64 results) over an inner,
     * an outer and a long axis, and integer sums and maxima (int64 inputs, fp32 accumulation) */
    {"reduce", "reduce_argmax_argmin_last_int64_sum", "-,-,-,-,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 5, 4, 6] }, { name: z, shape: [2, 1500] },\n"
     "         { name: ids, shape: [4, 9], dtype: int64 }]\n"
     "nodes:\n"
     "  - { name: a, op: argmax, inputs: [x], attrs: { axes: [3] } }\n"
     "  - { name: b, op: argmin_last, inputs: [x], attrs: { axes: [1], keepdims: false } }\n"
     "  - { name: c, op: argmax_last, inputs: [z], attrs: { axes: [1], keepdims: false } }\n"
     "  - { name: d, op: argmin, inputs: [x], attrs: { axes: [0] } }\n"
     "  - { name: s, op: reduce_sum, inputs: [ids], attrs: { axes: [1] } }\n"
     "  - { name: m, op: reduce_max, inputs: [ids], attrs: { axes: [0], keepdims: false } }\n"
     "outputs: [a, b, c, d, s, m]\n"},
    /* log_sum of exp(x) (a positive sum); log_sum_exp over rows of 4200 (a block per output) */
    {"reduce", "reduce_log_sum_exp_block_log_softmax", "pointwise_chain,-,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 6, 5, 7] }, { name: z, shape: [3, 4200] }]\n"
     "nodes:\n"
     "  - { name: ex, op: exp, inputs: [x] }\n"
     "  - { name: ls, op: reduce_log_sum, inputs: [ex], attrs: { axes: [1, 3] } }\n"
     "  - { name: lse, op: reduce_log_sum_exp, inputs: [z], attrs: { axes: [1], keepdims: false } }\n"
     "  - { name: lsm, op: log_softmax, inputs: [x], attrs: { axis: 1 } }\n"
     "outputs: [ls, lse, lsm]\n"},
    /* ---- layer / RMS normalization (rules/norm.yaml, templates/layernorm.cuh): a warp per row
     * (768, 13), a block per row (2049, scalar accesses), the residual skip, RMS, a normalized
     * block of two axes with a broadcast bias, the decomposed forms rewritten ---- */
    {"norm", "layer_norm_768_gelu_skip_rms_13", "layer_norm_epilogue,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 7, 768] }, { name: z, shape: [5, 13] }, { name: k, shape: [5, 13] }]\n"
     "weights:\n"
     "  - { name: g, shape: [768], init: positive }\n"
     "  - { name: b, shape: [768] }\n"
     "  - { name: g2, shape: [13], init: positive }\n"
     "nodes:\n"
     "  - { name: ln, op: layer_norm, inputs: [x, g, b], attrs: { eps: 1e-6 } }\n"
     "  - { name: y, op: gelu, inputs: [ln] }\n"
     "  - { name: u, op: add, inputs: [z, k] }\n"
     "  - { name: r, op: layer_norm, inputs: [u, g2], attrs: { rms: true } }\n"
     "outputs: [y, r]\n"},
    {"norm", "layer_norm_block_2049_axis_2_1000_skip", "-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [3, 2049] }, { name: z, shape: [2, 4, 10, 100] }, { name: k, shape: [2, 4, 10, 100] }]\n"
     "weights:\n"
     "  - { name: g, shape: [2049], init: positive }\n"
     "  - { name: g2, shape: [10, 100], init: positive }\n"
     "  - { name: b2, shape: [100] }\n"
     "nodes:\n"
     "  - { name: y, op: layer_norm, inputs: [x, g] }\n"
     "  - { name: u, op: add, inputs: [k, z] }\n"
     "  - { name: r, op: layer_norm, inputs: [u, g2, b2], attrs: { axis: -2 } }\n"
     "outputs: [y, r]\n"},
    {"norm", "layer_norm_rms_decomposed_1_row", "-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [1, 1, 64] }, { name: z, shape: [4, 7] }]\n"
     "weights:\n"
     "  - { name: two, shape: [1], values: [2.0] }\n"
     "  - { name: eps, shape: [1], values: [1e-5] }\n"
     "  - { name: one, shape: [1], values: [1.0] }\n"
     "  - { name: g, shape: [64], init: positive }\n"
     "  - { name: b, shape: [64] }\n"
     "  - { name: g2, shape: [7], init: positive }\n"
     "nodes:\n"
     "  - { name: m, op: reduce_mean, inputs: [x], attrs: { axes: [2] } }\n"
     "  - { name: d, op: sub, inputs: [x, m] }\n"
     "  - { name: p, op: pow, inputs: [d, two] }\n"
     "  - { name: v, op: reduce_mean, inputs: [p], attrs: { axes: [2] } }\n"
     "  - { name: e, op: add, inputs: [v, eps] }\n"
     "  - { name: s, op: sqrt, inputs: [e] }\n"
     "  - { name: n, op: div, inputs: [d, s] }\n"
     "  - { name: w, op: mul, inputs: [n, g] }\n"
     "  - { name: y, op: add, inputs: [w, b] }\n"
     "  - { name: q, op: pow, inputs: [z, two] }\n"
     "  - { name: qm, op: reduce_mean, inputs: [q], attrs: { axes: [1] } }\n"
     "  - { name: qe, op: add, inputs: [qm, eps] }\n"
     "  - { name: qs, op: sqrt, inputs: [qe] }\n"
     "  - { name: qr, op: reciprocal, inputs: [qs] }\n"
     "  - { name: qh, op: mul, inputs: [z, qr] }\n"
     "  - { name: r, op: mul, inputs: [g2, qh] }\n"
     "outputs: [y, r]\n"},
    /* ---- layer_norm whose output dtype is not its input's (`to`): an fp32 residual stream
     * normalized into an fp16 / bf16 model (fp32 statistics, the store converted).  The weights
     * take the variant's dtype; x is fp32 and the output fp16 (bf16) in every variant.  Rows 1,
     * 7, 129; widths 13, 45 (scalar), 36 (fp32 vectors of 4 loaded, 8-byte fp16 stores), 1036
     * and 1031 (a block per row, vectorized and not); the residual skip with an epilogue; the
     * Llama RMSNorm an fp16 TorchScript export writes (rms_norm_div_cast); a matmul whose
     * residual sum the norm reads (matmul_bias_residual); fp16 in, fp32 out (vectors of 8, two
     * 16-byte stores) ---- */
    {"norm", "layer_norm_mixed_fp32_to_fp16_rows_1_7_129", "-,layer_norm_epilogue,-,-,matmul_bias_residual,-",
     {1e-2, 1e-2, 1e-2}, "the outputs are fp16 in every variant (x is fp32, `to: fp16`)",
     "inputs:\n"
     "  - { name: a, shape: [1, 13], dtype: fp32 }\n"
     "  - { name: b, shape: [7, 36], dtype: fp32 }\n"
     "  - { name: kb, shape: [7, 36], dtype: fp32 }\n"
     "  - { name: c, shape: [129, 45], dtype: fp32 }\n"
     "  - { name: d, shape: [3, 1036], dtype: fp32 }\n"
     "  - { name: x, shape: [7, 24], dtype: fp32 }\n"
     "  - { name: h, shape: [7, 40], dtype: fp32 }\n"
     "weights:\n"
     "  - { name: two, shape: [1], values: [2.0] }\n"
     "  - { name: eps, shape: [1], values: [1e-5] }\n"
     "  - { name: one, shape: [1], values: [1.0] }\n"
     "  - { name: ga, shape: [13], init: positive }\n"
     "  - { name: gb, shape: [36], init: positive }\n"
     "  - { name: bb, shape: [36] }\n"
     "  - { name: gc, shape: [45], dtype: fp16, init: positive }\n"
     "  - { name: gd, shape: [1036], init: positive }\n"
     "  - { name: w, shape: [40, 24], dtype: fp32 }\n"
     "  - { name: wb, shape: [24], dtype: fp32 }\n"
     "  - { name: gx, shape: [24], init: positive }\n"
     "nodes:\n"
     "  - { name: ya, op: layer_norm, inputs: [a, ga], attrs: { rms: true, to: fp16 } }\n"
     "  - { name: ub, op: add, inputs: [b, kb] }\n"
     "  - { name: nb, op: layer_norm, inputs: [ub, gb, bb], attrs: { eps: 1e-6, to: fp16 } }\n"
     "  - { name: yb, op: gelu, inputs: [nb] }\n"
     "  - { name: pc, op: pow, inputs: [c, two] }\n"
     "  - { name: vc, op: reduce_mean, inputs: [pc], attrs: { axes: [1] } }\n"
     "  - { name: ec, op: add, inputs: [vc, eps] }\n"
     "  - { name: sc, op: sqrt, inputs: [ec] }\n"
     "  - { name: rc, op: div, inputs: [one, sc] }\n"
     "  - { name: hc, op: mul, inputs: [c, rc] }\n"
     "  - { name: bc, op: cast, inputs: [hc], attrs: { to: fp16 } }\n"
     "  - { name: yc, op: mul, inputs: [gc, bc] }\n"
     "  - { name: yd, op: layer_norm, inputs: [d, gd], attrs: { rms: true, to: fp16 } }\n"
     "  - { name: px, op: matmul, inputs: [h, w] }\n"
     "  - { name: pbx, op: add, inputs: [px, wb] }\n"
     "  - { name: rx, op: add, inputs: [x, pbx] }\n"
     "  - { name: yx, op: layer_norm, inputs: [rx, gx], attrs: { rms: true, to: fp16 } }\n"
     "outputs: [ya, yb, yc, yd, rx, yx]\n"},
    {"norm", "layer_norm_mixed_fp32_to_bf16_rows_129_1_7", "-,-,-,-,-",
     {2e-2, 2e-2, 2e-2}, "the outputs are bf16 (and one fp32 from an fp16 input) in every variant",
     "inputs:\n"
     "  - { name: a, shape: [129, 13], dtype: fp32 }\n"
     "  - { name: b, shape: [1, 36], dtype: fp32 }\n"
     "  - { name: c, shape: [7, 45], dtype: fp32 }\n"
     "  - { name: d, shape: [3, 1031], dtype: fp32 }\n"
     "  - { name: e, shape: [7, 40], dtype: fp16 }\n"
     "weights:\n"
     "  - { name: ga, shape: [13], init: positive }\n"
     "  - { name: gb, shape: [36], init: positive }\n"
     "  - { name: bb, shape: [36] }\n"
     "  - { name: gc, shape: [45], init: positive }\n"
     "  - { name: gd, shape: [1031], init: positive }\n"
     "  - { name: ge, shape: [40], init: positive }\n"
     "nodes:\n"
     "  - { name: ya, op: layer_norm, inputs: [a, ga], attrs: { rms: true, to: bf16 } }\n"
     "  - { name: yb, op: layer_norm, inputs: [b, gb, bb], attrs: { to: bf16 } }\n"
     "  - { name: yc, op: layer_norm, inputs: [c, gc], attrs: { rms: true, eps: 1e-6, to: bf16 } }\n"
     "  - { name: yd, op: layer_norm, inputs: [d, gd], attrs: { to: bf16 } }\n"
     "  - { name: ye, op: layer_norm, inputs: [e, ge], attrs: { rms: true, to: fp32 } }\n"
     "outputs: [ya, yb, yc, yd, ye]\n"},
    /* ---- resize (templates/resize.cuh) with its pointwise epilogue, and conv_transpose2d with bias and
     * activation (conv_transpose.cuh): odd sizes, a non-integer scale, stride 2 with output_padding ---- */
    {"resize", "resize_linear_sigmoid_nearest_cubic", "resize_pointwise,-,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 5, 7, 9] }]\n"
     "nodes:\n"
     "  - { name: r, op: resize, inputs: [x], attrs: { mode: linear, scale_h: 2.0, scale_w: 1.5 } }\n"
     "  - { name: s, op: sigmoid, inputs: [r] }\n"
     "  - { name: n, op: resize, inputs: [x], attrs: { size: [13, 4], nearest_mode: round_prefer_ceil } }\n"
     "  - { name: c, op: resize, inputs: [x], attrs: { mode: cubic, size: [5, 17],\n"
     "      coordinate_transformation_mode: align_corners } }\n"
     "outputs: [s, n, c]\n"},
    {"conv_transpose", "conv_transpose_bias_relu_groups", "conv_transpose_act,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 4, 7, 5] }]\n"
     "weights: [{ name: w, shape: [4, 3, 3, 3] }, { name: b, shape: [3] }, { name: wg, shape: [4, 2, 2, 3] }]\n"
     "nodes:\n"
     "  - { name: t, op: conv_transpose2d, inputs: [x, w, b], attrs: { stride: [2, 2], padding: [1, 1],\n"
     "      output_padding: [1, 0] } }\n"
     "  - { name: a, op: relu, inputs: [t] }\n"
     "  - { name: g, op: conv_transpose2d, inputs: [x, wg], attrs: { stride: [3, 2], groups: 2 } }\n"
     "outputs: [a, g]\n"},
    /* ---- attention (tests/unit/test_attention.c has the matrix) ---- */
    {"matmul", "attention_6x19x21x40_mul_mask", "attention", {TOL}, NULL,
     "inputs: [{ name: q, shape: [6, 19, 40] }, { name: k, shape: [6, 21, 40] },\n"
     "         { name: v, shape: [6, 21, 24] }, { name: mask, shape: [6, 1, 21] }]\n"
     "weights: [{ name: s, shape: [1] }]\n"
     "nodes:\n"
     "  - { name: qk, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\n"
     "  - { name: sc, op: mul, inputs: [qk, s] }\n"
     "  - { name: mk, op: add, inputs: [sc, mask] }\n"
     "  - { name: sm, op: softmax, inputs: [mk] }\n"
     "  - { name: y, op: matmul, inputs: [sm, v] }\n"
     "outputs: [y]\n"},
    /* torch.export's SDPA: Where(IsNaN(p), 0, p) after the softmax, rewritten
     * to nan_to_zero and run in the attention kernel; rows whose mask is
     * all -inf (log 0) have a NaN softmax and give 0 */
    {"matmul", "attention_nan_rows_to_zero_4x13x17x32", "pointwise_chain,pointwise_chain,attention", {TOL}, NULL,
     "inputs: [{ name: q, shape: [4, 13, 32] }, { name: k, shape: [4, 17, 32] },\n"
     "         { name: v, shape: [4, 17, 16] }, { name: mrow, shape: [4, 13, 1] }]\n"
     "weights: [{ name: z, shape: [1], values: [0.0] }, { name: s, shape: [1], values: [0.25] }]\n"
     "nodes:\n"
     "  - { name: ninf, op: log, inputs: [z] }\n"
     "  - { name: off, op: cmp_greater, inputs: [mrow, s] }\n"
     "  - { name: mask, op: where, inputs: [off, ninf, z] }\n"
     "  - { name: qk, op: matmul, inputs: [q, k], attrs: { trans_b: true } }\n"
     "  - { name: sc, op: mul, inputs: [qk, s] }\n"
     "  - { name: mk, op: add, inputs: [sc, mask] }\n"
     "  - { name: sm, op: softmax, inputs: [mk] }\n"
     "  - { name: isn, op: is_nan, inputs: [sm] }\n"
     "  - { name: nz, op: where, inputs: [isn, z, sm] }\n"
     "  - { name: y, op: matmul, inputs: [nz, v] }\n"
     "outputs: [y]\n"},
    {"matmul", "attention_transpose_div_3x9x70x32", "-,attention", {TOL}, NULL,
     "inputs: [{ name: q, shape: [3, 9, 32] }, { name: k, shape: [3, 70, 32] }, { name: v, shape: [3, 70, 32] }]\n"
     "weights: [{ name: s, shape: [1], uniform: [4, 6] }]\n"
     "nodes:\n"
     "  - { name: kt, op: transpose, inputs: [k], attrs: { perm: [0, 2, 1] } }\n"
     "  - { name: qk, op: matmul, inputs: [q, kt] }\n"
     "  - { name: sc, op: div, inputs: [qk, s] }\n"
     "  - { name: sm, op: softmax, inputs: [sc] }\n"
     "  - { name: y, op: matmul, inputs: [sm, v] }\n"
     "outputs: [y]\n"},
    /* a pre-norm transformer's output projection: x + (h W + b), the sum read by a LayerNorm */
    {"matmul", "mm_bias_residual_2x13x40x24_ln", "matmul_bias_residual,-", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 13, 24] }, { name: h, shape: [2, 13, 40] }]\n"
     "weights: [{ name: w, shape: [40, 24] }, { name: b, shape: [24] }, { name: g, shape: [24], init: positive }]\n"
     "nodes:\n"
     "  - { name: p, op: matmul, inputs: [h, w] }\n"
     "  - { name: pb, op: add, inputs: [p, b] }\n"
     "  - { name: r, op: add, inputs: [x, pb] }\n"
     "  - { name: n, op: layer_norm, inputs: [r, g] }\n"
     "outputs: [r, n]\n"},
    {"matmul", "mm_gated_2x13x24x40_swiglu", "gemm_act,matmul_gated", {TOL}, NULL,
     "inputs: [{ name: x, shape: [2, 13, 24] }]\n"
     "weights: [{ name: wg, shape: [24, 40] }, { name: wu, shape: [24, 40] }, { name: bu, shape: [40] }]\n"
     "nodes:\n"
     "  - { name: g, op: matmul, inputs: [x, wg] }\n"
     "  - { name: a, op: silu, inputs: [g] }\n"
     "  - { name: u, op: matmul, inputs: [x, wu] }\n"
     "  - { name: ub, op: add, inputs: [u, bu] }\n"
     "  - { name: y, op: mul, inputs: [a, ub] }\n"
     "outputs: [y]\n"},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- run state ----------------------------------------------------------- */

static uint64_t run_seed;
static int use_cuda;            /* FUSEGEN_NUMERICS_DEVICE=cuda */
static char *own_cache_dir;     /* removed at exit; NULL when FUSEGEN_CACHE_DIR was given */
static int verbose;
static int nvariants_run;
static double t_start;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A context with the shipped rules; with FUSEGEN_NUMERICS_DEVICE=cuda the
 * driver is initialised too (no GPU: the test fails, never skips). */
static fg_context *numerics_ctx(void)
{
    fg_context *ctx = tu_ctx_shipped();
    if (use_cuda) {
        fg_status st = fg_cuda_init(ctx);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
    }
    return ctx;
}

static const ncase *find_case(const char *name)
{
    for (int i = 0; i < NCASES; i++)
        if (strcmp(cases[i].name, name) == 0)
            return &cases[i];
    fail_msg("no case named %s", name);
    return NULL;
}

/* ---- source mutations ---------------------------------------------------- */

typedef enum mut_kind {
    MUT_NONE = 0,
    MUT_SCALE,        /* every stored value times (1 + amount) */
    MUT_ONE,          /* the element at physical index numel/2 gets + amount */
    MUT_SKIP,         /* the elements at physical index 0 and numel-1 are not stored */
    MUT_PAST_END,     /* the last element is also stored one element past the end */
    MUT_BEFORE,       /* the first element is also stored one element before the start */
    MUT_INPUT,        /* element 0 of the kernel's first graph-input buffer is overwritten too */
    MUT_KIND_COUNT
} mut_kind;

typedef struct mutation {
    mut_kind kind;
    double amount;
} mutation;

/* Rewrites every output store `fg_store(p.NAME ...` / `fg_store2(p.NAME ...` / `fg_store4(...` / `fg_store8(...`
 * of src into `fg_mut_store(p.NAME, (void *)p.OTHER, p.NAME ...` and inserts
 * the wrappers, which know the output's element count, after the prelude
 * include.  OTHER is the params field `other` (MUT_INPUT), else NAME.
 * Returns a malloc'd source; *nstores receives the number of rewritten
 * stores. */
static char *mutate_source(const char *src, const mutation *m, const char *other, int64_t numel, int *nstores)
{
    static const char inc[] = "#include \"fusegen_prelude.cuh\"\n";
    const char *at = strstr(src, inc);
    assert_non_null(at);
    fg_buf b = {0};
    fg_buf_putn(&b, src, (size_t)(at - src) + strlen(inc));
    fg_buf_printf(&b,
                  "// ---- test mutation %d ----\n"
                  "static const fg_i64 FG_MUT_NUMEL = %" PRId64 ";\n"
                  "template <typename T> FG_DEVICE void fg_mut_store(T *base, void *other, T *ptr, float v)\n"
                  "{\n"
                  "    const fg_i64 i = ptr - base;\n",
                  (int)m->kind, numel);
    switch (m->kind) {
    case MUT_SCALE: fg_buf_printf(&b, "    fg_store(ptr, v * (1.0f + (float)(%.9g)));\n", m->amount); break;
    case MUT_ONE: fg_buf_printf(&b, "    fg_store(ptr, i == FG_MUT_NUMEL / 2 ? v + (float)(%.9g) : v);\n", m->amount); break;
    case MUT_SKIP: fg_buf_put(&b, "    if (i != 0 && i != FG_MUT_NUMEL - 1)\n        fg_store(ptr, v);\n"); break;
    case MUT_PAST_END:
        fg_buf_put(&b, "    fg_store(ptr, v);\n    if (i == FG_MUT_NUMEL - 1)\n        fg_store(ptr + 1, v);\n");
        break;
    case MUT_BEFORE: fg_buf_put(&b, "    fg_store(ptr, v);\n    if (i == 0)\n        fg_store(ptr - 1, v);\n"); break;
    case MUT_INPUT:
        fg_buf_put(&b, "    fg_store(ptr, v);\n    if (i == 0)\n        fg_store((T *)other, fg_load((T *)other) + 1.0f);\n");
        break;
    default: fail_msg("bad mutation");
    }
    fg_buf_put(&b, "}\n"
                   "template <typename T> FG_DEVICE void fg_mut_store2(T *base, void *other, T *ptr, float a, float b)\n"
                   "{\n"
                   "    fg_mut_store(base, other, ptr, a);\n"
                   "    fg_mut_store(base, other, ptr + 1, b);\n"
                   "}\n"
                   "template <typename T> FG_DEVICE void fg_mut_store4(T *base, void *other, T *ptr, const float *v)\n"
                   "{\n"
                   "    for (int j = 0; j < 4; j++)\n"
                   "        fg_mut_store(base, other, ptr + j, v[j]);\n"
                   "}\n"
                   "template <typename T> FG_DEVICE void fg_mut_store8(T *base, void *other, T *ptr, const float *v)\n"
                   "{\n"
                   "    for (int j = 0; j < 8; j++)\n"
                   "        fg_mut_store(base, other, ptr + j, v[j]);\n"
                   "}\n"
                   "// ---- end of test mutation ----\n");
    *nstores = 0;
    const char *s = at + strlen(inc);
    for (;;) {
        const char *f = strstr(s, "fg_store");
        if (!f)
            break;
        const char *rest = f + 8;
        char width = rest[0] == '2' || rest[0] == '4' || rest[0] == '8' ? rest[0] : 0;   /* fg_store2/4/8 */
        if (width)
            rest++;
        if (strncmp(rest, "(p.", 3) != 0) {
            fg_buf_putn(&b, s, (size_t)(rest - s));
            s = rest;
            continue;
        }
        const char *name = rest + 3, *e = name;
        while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '_')
            e++;
        fg_buf_putn(&b, s, (size_t)(f - s));
        fg_buf_printf(&b, "fg_mut_store%.*s(p.%.*s, (void *)p.", width ? 1 : 0, &width, (int)(e - name), name);
        if (other)
            fg_buf_printf(&b, "%s, p.", other);
        else
            fg_buf_printf(&b, "%.*s, p.", (int)(e - name), name);
        s = name;
        (*nstores)++;
    }
    fg_buf_put(&b, s);
    return fg_buf_take(&b);
}

/* ---- buffers ------------------------------------------------------------- */

typedef struct nbuf {
    unsigned char *base;     /* GUARD + bytes + GUARD */
    unsigned char *data;
    size_t bytes;
    unsigned char *pristine; /* read-only buffers: the packed contents */
    CUdeviceptr dev;         /* CUDA: the device copy of base */
} nbuf;

/* CUDA: copies the whole buffer, guards included, to / from the device. */
static void nbuf_upload(fg_context *ctx, const nbuf *b)
{
    if (use_cuda)
        assert_int_equal(CU_CHECK(ctx, fg_cu()->MemcpyHtoD(b->dev, b->base, b->bytes + 2 * GUARD)), FG_OK);
}

static void nbuf_download(fg_context *ctx, nbuf *b)
{
    if (use_cuda)
        assert_int_equal(CU_CHECK(ctx, fg_cu()->MemcpyDtoH(b->base, b->dev, b->bytes + 2 * GUARD)), FG_OK);
}

static size_t dtype_bytes(fg_dtype t) { return fg_dtype_size(t); }

/* Packs n logical fp32 values into dst in t's dtype and physical layout, with
 * the public conversions. */
static void pack_values(const fg_tensor *t, const float *logical, void *dst)
{
    size_t n = (size_t)fg_tensor_numel(t), es = dtype_bytes(t->dtype);
    void *tmp = malloc(n * es + 1);
    assert_int_equal(fg_convert_dtype(logical, FG_DTYPE_F32, tmp, t->dtype, n), FG_OK);
    if (t->rank == 4 && t->layout == FG_LAYOUT_NHWC)
        assert_int_equal(fg_convert_layout(tmp, FG_LAYOUT_NCHW, dst, FG_LAYOUT_NHWC, t->shape, es), FG_OK);
    else
        memcpy(dst, tmp, n * es);
    free(tmp);
}

/* The inverse of pack_values: logical-order doubles. */
static void unpack_values(const fg_tensor *t, const void *src, double *out)
{
    size_t n = (size_t)fg_tensor_numel(t), es = dtype_bytes(t->dtype);
    void *tmp = malloc(n * es + 1);
    float *f = malloc(n * sizeof *f + 1);
    if (t->rank == 4 && t->layout == FG_LAYOUT_NHWC)
        assert_int_equal(fg_convert_layout(src, FG_LAYOUT_NHWC, tmp, FG_LAYOUT_NCHW, t->shape, es), FG_OK);
    else
        memcpy(tmp, src, n * es);
    assert_int_equal(fg_convert_dtype(tmp, t->dtype, f, FG_DTYPE_F32, n), FG_OK);
    for (size_t i = 0; i < n; i++)
        out[i] = f[i];
    free(tmp);
    free(f);
}

/* Logical (NCHW-order) index of physical element p of t. */
static int64_t logical_of_physical(const fg_tensor *t, int64_t p)
{
    if (t->rank != 4 || t->layout != FG_LAYOUT_NHWC)
        return p;
    int64_t C = t->shape[1], H = t->shape[2], W = t->shape[3];
    int64_t c = p % C, w = p / C % W, h = p / (C * W) % H, n = p / (C * W * H);
    return ((n * C + c) * H + h) * W + w;
}

static void nbuf_alloc(nbuf *b, size_t bytes)
{
    b->bytes = bytes;
    b->base = malloc(bytes + 2 * GUARD);
    assert_non_null(b->base);
    memset(b->base, SENTINEL, bytes + 2 * GUARD);
    b->data = b->base + GUARD;
    b->pristine = NULL;
}

/* Fills the buffer of t with NaN in t's dtype (integers: every bit set,
 * -1; bools 0xFF, which is neither value). */
static void nbuf_poison(nbuf *b, const fg_tensor *t)
{
    int64_t n = fg_tensor_numel(t);
    if (!fg_dtype_is_float(t->dtype)) {
        memset(b->data, 0xFF, (size_t)n * fg_dtype_size(t->dtype));
    } else if (t->dtype == FG_DTYPE_F32) {
        uint32_t nan32 = 0x7fc00000u;
        for (int64_t i = 0; i < n; i++)
            memcpy(b->data + 4 * i, &nan32, 4);
    } else {
        uint16_t nan16 = t->dtype == FG_DTYPE_F16 ? 0x7e00 : 0x7fc0;
        for (int64_t i = 0; i < n; i++)
            memcpy(b->data + 2 * i, &nan16, 2);
    }
}

/* Byte offset of the first damaged guard byte: -1 when intact; *after says
 * which zone. */
static long guard_damage(const nbuf *b, int *after)
{
    for (long i = 0; i < GUARD; i++)
        if (b->base[i] != SENTINEL) {
            *after = 0;
            return i;
        }
    for (long i = 0; i < GUARD; i++)
        if (b->data[b->bytes + i] != SENTINEL) {
            *after = 1;
            return i;
        }
    return -1;
}

/* ---- one case variant ---------------------------------------------------- */

typedef struct nresult {
    int ok;                  /* every check passed */
    int rules_ok;            /* the plan used the expected rules */
    double rel;              /* worst relative L2 over the outputs */
    double max_abs;          /* worst max |error| */
    double elem_ratio;       /* worst |err| / (tol * max(|ref|, rms)) */
    int64_t nan_left;        /* output elements still poisoned where the reference is finite */
    int guards_damaged;      /* buffers with a damaged guard zone */
    int guard_after;         /* the last damaged zone was the one after the data */
    char guard_tensor[64];   /* the last buffer with a damaged guard */
    int readonly_changed;    /* input / weight buffers changed by a kernel */
    int64_t first_bad;       /* logical index of the first mismatching output element, -1 if none */
    int nkernels;
    int nstores_mutated;
    char msg[2048];
} nresult;

static void msg_add(nresult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_add(nresult *r, const char *fmt, ...)
{
    size_t len = strlen(r->msg);
    if (len + 1 >= sizeof r->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + len, sizeof r->msg - len, fmt, ap);
    va_end(ap);
}

static void coords_str(const fg_tensor *t, int64_t i, char *out, size_t size)
{
    int64_t c[FG_MAX_RANK];
    for (int d = t->rank - 1; d >= 0; d--) {
        c[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    size_t len = 0;
    len += (size_t)snprintf(out + len, size - len, "[");
    for (int d = 0; d < t->rank && len < size; d++)
        len += (size_t)snprintf(out + len, size - len, "%s%" PRId64, d ? ", " : "", c[d]);
    if (len < size)
        snprintf(out + len, size - len, "]");
}

/* The rule names of p's groups, comma-separated ("-" for none). */
static void plan_rules(const fg_context *ctx, const fg_plan *p, char *out, size_t size)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < p->ngroups && len < size; i++) {
        int r = p->groups[i].rule;
        len += (size_t)snprintf(out + len, size - len, "%s%s", i ? "," : "", r >= 0 ? ctx->rules[r]->name : "-");
    }
}

/* Runs case c in dtype dt and layout lay, the kernels emitted with shapes as
 * constants (specialize 1) or as parameters (0); with a mutation the stores
 * of the kernel that writes the first graph output are rewritten.  Fills *res; never
 * fails the test itself except on harness errors (parse, plan, emit, build). */
static void run_variant(fg_context *ctx, const ncase *c, fg_dtype dt, fg_layout lay, int specialize, const mutation *mut,
                        nresult *res)
{
    memset(res, 0, sizeof *res);
    res->first_bad = -1;
    double tol = c->tol[dt];
    static const char *dtn[] = {"fp32", "fp16", "bf16"};
    char *text = NULL;
    fg_buf tb = {0};
    fg_buf_printf(&tb, "graph: %s\nseed: %" PRIu64 "\ndtype: %s\nlayout: %s\n%s", c->name, run_seed, dtn[dt],
                  lay == FG_LAYOUT_NHWC ? "NHWC" : "NCHW", c->body);
    text = fg_buf_take(&tb);

    fg_graph *src = NULL;
    fg_status st = fg_graph_parse(ctx, c->name, text, strlen(text), &src);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    fg_plan *p = NULL;
    st = fg_plan_build(ctx, src, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    const fg_graph *pg = p->graph;

    char got_rules[256];
    plan_rules(ctx, p, got_rules, sizeof got_rules);
    res->rules_ok = strcmp(got_rules, c->rules) == 0;
    if (!res->rules_ok)
        msg_add(res, "  plan groups use rules '%s', the case expects '%s'\n", got_rules, c->rules);

    /* reference inputs: random values rounded to the dtype; weights of the
     * source graph rounded to the dtype */
    double **ref = calloc((size_t)src->ntensors, sizeof *ref);
    fg_reference_random_inputs(src, run_seed ^ fg_hash64(c->name, strlen(c->name)), ref);
    float **in32 = calloc((size_t)src->ntensors, sizeof *in32);   /* rounded input values, by source tensor */
    for (int t = 0; t < src->ntensors; t++) {
        const fg_tensor *tt = &src->tensors[t];
        int64_t n = fg_tensor_numel(tt);
        if (!(tt->is_input || (tt->is_weight && tt->data)))
            continue;
        float *f = malloc((size_t)n * sizeof *f);
        for (int64_t i = 0; i < n; i++)
            f[i] = tt->is_input ? (float)ref[t][i] : tt->data[i];
        void *packed = malloc((size_t)n * dtype_bytes(tt->dtype) + 1);
        pack_values(tt, f, packed);
        if (!ref[t])
            ref[t] = malloc((size_t)n * sizeof(double));
        unpack_values(tt, packed, ref[t]);
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)ref[t][i];
        free(packed);
        in32[t] = f;
    }
    st = fg_reference_run(ctx, src, ref);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);

    /* buffers of the plan graph's tensors, made when a kernel first names them */
    nbuf *bufs = calloc((size_t)pg->ntensors, sizeof *bufs);
    for (int gi = 0; gi < p->ngroups; gi++) {
        fg_kernel k;
        memset(&k, 0, sizeof k);
        fg_emit_opts eo = {.specialize = specialize};
        st = fg_emit_group(ctx, p, gi, &eo, &k);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        res->nkernels++;
        if (mut && mut->kind != MUT_NONE && p->groups[gi].output == pg->outputs[0]) {
            int ns = 0;
            const char *other = NULL;
            for (int j = 0; j < k.nparams && mut->kind == MUT_INPUT && !other; j++)
                if (k.params[j].kind == FG_KPARAM_TENSOR && pg->tensors[k.params[j].tensor].is_input)
                    other = k.params[j].name;
            if (mut->kind == MUT_INPUT)
                assert_non_null(other);
            char *m = mutate_source(k.source, mut, other, fg_tensor_numel(&pg->tensors[p->groups[gi].output]), &ns);
            free(k.source);
            k.source = m;
            res->nstores_mutated += ns;
        }
        CUmodule mod = NULL;
        CUfunction fn = NULL;
        if (use_cuda) {
            st = fg_jit_compile(ctx, &k, fg_jit_arch(ctx), NULL);
            if (st == FG_OK)
                st = CU_CHECK_K(ctx, fg_cu()->ModuleLoadData(&mod, k.binary), k.name);
            if (st == FG_OK)
                st = CU_CHECK_K(ctx, fg_cu()->ModuleGetFunction(&fn, mod, k.name), k.name);
            if (st == FG_OK && k.smem > 48 * 1024)
                st = CU_CHECK_K(ctx, fg_cu()->FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                               (int)k.smem), k.name);
        } else {
            st = fg_emu_build(ctx, &k);
        }
        if (st != FG_OK) {
            tu_dump_errors(ctx);
            fprintf(stderr, "%s\n", k.source);
        }
        assert_int_equal(st, FG_OK);

        uint64_t args[FG_MAX_KPARAMS];
        void *ws_host[2] = {NULL, NULL};   /* split-K workspace and counters, zeroed, as the executor's */
        CUdeviceptr ws_dev[2] = {0, 0};
        for (int j = 0; j < k.nparams; j++) {
            const fg_kparam *kp = &k.params[j];
            if (kp->kind == FG_KPARAM_WORKSPACE || kp->kind == FG_KPARAM_COUNTERS) {
                int w = kp->kind == FG_KPARAM_COUNTERS;
                ws_host[w] = calloc(1, (size_t)kp->value);
                assert_non_null(ws_host[w]);
                if (use_cuda) {
                    assert_int_equal(CU_CHECK(ctx, fg_cu()->MemAlloc(&ws_dev[w], (size_t)kp->value)), FG_OK);
                    assert_int_equal(CU_CHECK(ctx, fg_cu()->MemcpyHtoD(ws_dev[w], ws_host[w], (size_t)kp->value)),
                                     FG_OK);
                }
                args[j] = use_cuda ? (uint64_t)ws_dev[w] : (uint64_t)(uintptr_t)ws_host[w];
                continue;
            }
            if (kp->kind != FG_KPARAM_TENSOR) {
                args[j] = (uint64_t)kp->value;
                continue;
            }
            int t = kp->tensor;
            assert_true(t >= 0 && t < pg->ntensors);
            /* a view (an aliased flatten / reshape, a concat input in place): its root's buffer */
            int64_t view_off = 0, step = 0;
            for (int par, depth = 0; (par = fg_concat_view_parent(p, t, &step)) >= 0 && depth < pg->ntensors; depth++) {
                view_off += step;
                t = par;
            }
            const fg_tensor *tt = &pg->tensors[t];
            nbuf *b = &bufs[t];
            if (!b->base) {
                size_t bytes = (size_t)fg_tensor_numel(tt) * dtype_bytes(tt->dtype);
                nbuf_alloc(b, bytes);
                int si = fg_graph_find_tensor(src, tt->name);
                if (tt->is_input) {
                    assert_true(si >= 0 && in32[si]);
                    pack_values(tt, in32[si], b->data);
                } else if (tt->is_weight && tt->data) {
                    /* the plan graph's (folded) weights */
                    float *v = fg_xmalloc((size_t)fg_tensor_numel(tt) * sizeof *v);
                    fg_tensor_values(tt, v);
                    pack_values(tt, v, b->data);
                    free(v);
                } else {
                    nbuf_poison(b, tt);
                }
                if (tt->is_input || tt->is_weight) {
                    b->pristine = malloc(bytes + 1);
                    memcpy(b->pristine, b->data, bytes);
                }
                if (use_cuda) {
                    assert_int_equal(CU_CHECK(ctx, fg_cu()->MemAlloc(&b->dev, bytes + 2 * GUARD)), FG_OK);
                    nbuf_upload(ctx, b);
                }
            }
            args[j] = use_cuda ? (uint64_t)(b->dev + GUARD + (size_t)view_off)
                               : (uint64_t)(uintptr_t)((char *)b->data + view_off);
        }
        if (use_cuda) {
            void *kargs[1] = {args};   /* one struct argument made of 8-byte slots */
            st = CU_CHECK_K(ctx, fg_cu()->LaunchKernel(fn, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                                                       k.block[2], k.smem, NULL, kargs, NULL), k.name);
            if (st == FG_OK)
                st = CU_CHECK_K(ctx, fg_cu()->CtxSynchronize(), k.name);
        } else {
            st = fg_emu_launch(ctx, &k, args);
        }
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        for (int w = 0; w < 2; w++) {
            free(ws_host[w]);
            if (ws_dev[w])
                fg_cu()->MemFree(ws_dev[w]);
        }
        for (int t = 0; t < pg->ntensors; t++) {
            nbuf *b = &bufs[t];
            if (!b->base)
                continue;
            nbuf_download(ctx, b);
            int after = 0;
            long off = guard_damage(b, &after);
            if (off >= 0) {
                res->guards_damaged++;
                res->guard_after = after;
                snprintf(res->guard_tensor, sizeof res->guard_tensor, "%s", pg->tensors[t].name);
                msg_add(res, "  kernel %s damaged the guard zone %s '%s' (byte %ld of the zone)\n", k.name,
                        after ? "after" : "before", pg->tensors[t].name, off);
                memset(b->base, SENTINEL, GUARD);   /* report each damage once */
                memset(b->data + b->bytes, SENTINEL, GUARD);
            }
            if (b->pristine && memcmp(b->pristine, b->data, b->bytes) != 0) {
                res->readonly_changed++;
                msg_add(res, "  kernel %s changed the read-only buffer '%s'\n", k.name, pg->tensors[t].name);
                memcpy(b->data, b->pristine, b->bytes);
                off = 0;
            }
            if (off >= 0)
                nbuf_upload(ctx, b);   /* the repaired copy */
        }
        if (mod)
            fg_cu()->ModuleUnload(mod);
        fg_kernel_free(&k);
    }

    /* compare every graph output with the reference of the unfused graph */
    for (int o = 0; o < pg->noutputs; o++) {
        const fg_tensor *ot = &pg->tensors[pg->outputs[o]];
        int si = fg_graph_find_tensor(src, ot->name);
        assert_true(si >= 0);
        const double *want = ref[si];
        int64_t n = fg_tensor_numel(ot);
        assert_int_equal(n, fg_tensor_numel(&src->tensors[si]));
        double *got = malloc((size_t)n * sizeof *got);
        nbuf *b = &bufs[pg->outputs[o]];
        if (!b->base) {
            msg_add(res, "  output '%s' is written by no kernel\n", ot->name);
            res->nan_left += n;
            free(got);
            continue;
        }
        unpack_values(ot, b->data, got);
        double ss = 0;
        for (int64_t i = 0; i < n; i++)
            ss += want[i] * want[i];
        double rms = sqrt(ss / (double)(n ? n : 1));
        int64_t nan_left = 0, first_bad = -1, worst = 0;
        double worst_abs = -1, worst_ratio = 0;
        for (int64_t i = 0; i < n; i++) {
            int gn = isnan(got[i]), wn = isnan(want[i]);
            double err = fabs(got[i] - want[i]);
            double bound = tol * fmax(fabs(want[i]), rms);
            if (gn && !wn)
                nan_left++;
            int bad = gn != wn || (!gn && !(err <= ELEM_FACTOR * bound));
            if (bad && first_bad < 0)
                first_bad = i;
            if (!gn && !wn) {
                if (err > worst_abs)
                    worst_abs = err, worst = i;
                double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
                if (ratio > worst_ratio)
                    worst_ratio = ratio;
            }
        }
        /* relative L2 over the finite pairs; poison is counted separately */
        double num = 0, den = 0, mabs = 0;
        for (int64_t i = 0; i < n; i++)
            if (!isnan(got[i]) && !isnan(want[i])) {
                double d = got[i] - want[i];
                num += d * d;
                den += want[i] * want[i];
                mabs = fmax(mabs, fabs(d));
            }
        double rel = sqrt(num) / fmax(sqrt(den), 1e-30);
        if (rel > res->rel)
            res->rel = rel;
        if (mabs > res->max_abs)
            res->max_abs = mabs;
        if (worst_ratio > res->elem_ratio)
            res->elem_ratio = worst_ratio;
        res->nan_left += nan_left;
        if (first_bad >= 0 && res->first_bad < 0)
            res->first_bad = first_bad;
        char cs[96];
        if (!(rel <= tol))
            msg_add(res, "  output '%s': relative L2 %.3g > tolerance %.3g\n", ot->name, rel, tol);
        if (nan_left)
            msg_add(res, "  output '%s': %" PRId64 " of %" PRId64 " elements never written (NaN poison left)\n",
                    ot->name, nan_left, n);
        if (first_bad >= 0) {
            coords_str(ot, first_bad, cs, sizeof cs);
            msg_add(res, "  output '%s': first mismatch at %s: got %.9g, want %.9g (bound %.3g)\n", ot->name, cs,
                    got[first_bad], want[first_bad], ELEM_FACTOR * tol * fmax(fabs(want[first_bad]), rms));
        }
        if (worst_abs >= 0 && (first_bad >= 0 || !(rel <= tol))) {
            coords_str(ot, worst, cs, sizeof cs);
            msg_add(res, "  output '%s': largest error at %s: got %.9g, want %.9g\n", ot->name, cs, got[worst],
                    want[worst]);
        }
        free(got);
    }
    res->ok = res->rules_ok && res->rel <= tol && res->nan_left == 0 && res->first_bad < 0 &&
              res->guards_damaged == 0 && res->readonly_changed == 0;

    for (int t = 0; t < pg->ntensors; t++) {
        if (bufs[t].dev)
            fg_cu()->MemFree(bufs[t].dev);
        free(bufs[t].base);
        free(bufs[t].pristine);
    }
    free(bufs);
    for (int t = 0; t < src->ntensors; t++)
        free(in32[t]);
    free(in32);
    fg_reference_free(src, ref);
    free(ref);
    fg_plan_free(p);
    fg_graph_free(src);
    free(text);
    nvariants_run++;
}

static const char *dtype_str(fg_dtype t) { return fg_dtype_name(t); }
static const char *layout_str(fg_layout l) { return fg_layout_name(l); }

static void print_failure(const ncase *c, fg_dtype dt, fg_layout lay, int specialize, const nresult *r)
{
    fprintf(stderr,
            "FAIL case %s  seed %" PRIu64 "  dtype %s  layout %s  %s  rel L2 %.3g (tol %.3g)  max abs %.3g  "
            "worst element %.2f x tol\n%s",
            c->name, run_seed, dtype_str(dt), layout_str(lay), specialize ? "specialized" : "shape params", r->rel,
            c->tol[dt], r->max_abs, r->elem_ratio, r->msg);
    fprintf(stderr, "  (rerun: FUSEGEN_SEED=%" PRIu64 ")\n", run_seed);
}

/* Runs every case of a family in every dtype and layout; fails at the end
 * with the number of failing variants (each one printed). */
static void run_family(const char *family)
{
    fg_context *ctx = numerics_ctx();
    int failures = 0, ncase_fam = 0;
    for (int i = 0; i < NCASES; i++) {
        const ncase *c = &cases[i];
        if (strcmp(c->family, family) != 0)
            continue;
        ncase_fam++;
        for (int dt = 0; dt < TU_FLOAT_DTYPES; dt++)
            for (int lay = 0; lay < FG_LAYOUT_COUNT; lay++)
                for (int spec = 1; spec >= (use_cuda ? 1 : 0); spec--) {   /* CUDA: specialized only (NVRTC time) */
                    nresult r;
                    double t0 = now_s();
                    run_variant(ctx, c, (fg_dtype)dt, (fg_layout)lay, spec, NULL, &r);
                    if (verbose)
                        printf("  %-44s %-5s %-5s %s rel %.2e (tol %.0e) worst elem %.2f x tol  kernels %d  %.2fs\n",
                               c->name, dtype_str((fg_dtype)dt), layout_str((fg_layout)lay), spec ? "spec " : "param",
                               r.rel, c->tol[dt], r.elem_ratio, r.nkernels, now_s() - t0);
                    if (!r.ok) {
                        failures++;
                        print_failure(c, (fg_dtype)dt, (fg_layout)lay, spec, &r);
                    }
                }
    }
    fg_context_free(ctx);
    assert_true(ncase_fam > 0);
    if (failures)
        fail_msg("%d failing variant(s) in family %s (seed %" PRIu64 ")", failures, family);
}

static void test_conv_act(void **state) { (void)state; run_family("conv_act"); }
static void test_conv_bn(void **state) { (void)state; run_family("conv_bn"); }
static void test_conv_residual(void **state) { (void)state; run_family("conv_residual"); }
static void test_depthwise(void **state) { (void)state; run_family("depthwise"); }
static void test_matmul(void **state) { (void)state; run_family("matmul"); }
static void test_pointwise(void **state) { (void)state; run_family("pointwise"); }
static void test_single(void **state) { (void)state; run_family("single"); }
static void test_shuffle(void **state) { (void)state; run_family("shuffle"); }
static void test_reduce(void **state) { (void)state; run_family("reduce"); }
static void test_norm(void **state) { (void)state; run_family("norm"); }
static void test_resize(void **state) { (void)state; run_family("resize"); }
static void test_conv_transpose(void **state) { (void)state; run_family("conv_transpose"); }

/* ---- coverage of the table ---------------------------------------------- */

/* Every shipped rule is the expected rule of some case, and every pointwise op
 * of the vocabulary appears in some case body. */
static void test_table_covers_rules_and_ops(void **state)
{
    (void)state;
    fg_context *ctx = numerics_ctx();
    assert_true(ctx->nrules > 0);
    int missing = 0;
    for (int r = 0; r < ctx->nrules; r++) {
        const char *name = ctx->rules[r]->name;
        size_t len = strlen(name);
        int found = 0;
        for (int i = 0; i < NCASES && !found; i++)
            for (const char *s = cases[i].rules; (s = strstr(s, name)) != NULL; s += len)
                if ((s == cases[i].rules || s[-1] == ',') && (s[len] == 0 || s[len] == ','))
                    found = 1;
        if (!found) {
            fprintf(stderr, "no numerics case for rule %s\n", name);
            missing++;
        }
    }
    for (int o = 0; o < ctx->nops; o++) {
        if (ctx->ops[o]->kind != FG_OPK_POINTWISE)
            continue;
        char needle[96];
        snprintf(needle, sizeof needle, "op: %s,", ctx->ops[o]->name);
        int found = 0;
        for (int i = 0; i < NCASES && !found; i++)
            found = strstr(cases[i].body, needle) != NULL;
        if (!found) {
            fprintf(stderr, "no numerics case uses pointwise op %s\n", ctx->ops[o]->name);
            missing++;
        }
    }
    /* every case names a tolerance for each dtype, fp32 no looser than 1e-5
     * unless it says why */
    for (int i = 0; i < NCASES; i++) {
        for (int d = 0; d < TU_FLOAT_DTYPES; d++)
            assert_true(cases[i].tol[d] > 0 && cases[i].tol[d] <= 2e-2);
        if (cases[i].tol[FG_DTYPE_F32] > 1e-5)
            assert_non_null(cases[i].why);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(cases[i].name, cases[j].name);
    }
    fg_context_free(ctx);
    assert_int_equal(missing, 0);
}

/* ---- mutations: the checks catch wrong, missing and stray stores --------- */

static void expect_caught(fg_context *ctx, const char *case_name, fg_dtype dt, fg_layout lay)
{
    const ncase *c = find_case(case_name);
    nresult r;
    double tol = c->tol[dt];

    /* control: the unmutated kernel passes */
    run_variant(ctx, c, dt, lay, 1, NULL, &r);
    if (!r.ok)
        print_failure(c, dt, lay, 1, &r);
    assert_true(r.ok);
    double base_rel = r.rel;

    /* a wrong value everywhere: the relative L2 error exceeds the tolerance */
    mutation m = {MUT_SCALE, 3 * tol};
    run_variant(ctx, c, dt, lay, 1, &m, &r);
    assert_true(r.nstores_mutated >= 1);
    assert_false(r.ok);
    assert_true(r.rel > tol);
    assert_true(r.rel > base_rel);
    assert_int_equal(r.nan_left, 0);
    assert_int_equal(r.guards_damaged, 0);

    /* one wrong element: caught by the element check, at its coordinates */
    m = (mutation){MUT_ONE, 1.0};
    run_variant(ctx, c, dt, lay, 1, &m, &r);
    assert_false(r.ok);
    assert_int_equal(r.nan_left, 0);
    assert_int_equal(r.guards_damaged, 0);
    {
        fg_graph *g = NULL;
        char *text = NULL;
        fg_buf tb = {0};
        fg_buf_printf(&tb, "graph: %s\ndtype: %s\nlayout: %s\n%s", c->name, fg_dtype_name(dt),
                      lay == FG_LAYOUT_NHWC ? "NHWC" : "NCHW", c->body);
        text = fg_buf_take(&tb);
        assert_int_equal(fg_graph_parse(ctx, c->name, text, strlen(text), &g), FG_OK);
        const fg_tensor *ot = &g->tensors[g->outputs[0]];
        assert_int_equal(r.first_bad, logical_of_physical(ot, fg_tensor_numel(ot) / 2));
        fg_graph_free(g);
        free(text);
    }

    /* skipped elements: the poison is left exactly there */
    m = (mutation){MUT_SKIP, 0};
    run_variant(ctx, c, dt, lay, 1, &m, &r);
    assert_false(r.ok);
    assert_int_equal(r.nan_left, 2);
    assert_int_equal(r.guards_damaged, 0);

    /* stores outside the output: the guard zone after / before is damaged */
    m = (mutation){MUT_PAST_END, 0};
    run_variant(ctx, c, dt, lay, 1, &m, &r);
    assert_false(r.ok);
    assert_int_equal(r.guards_damaged, 1);
    assert_int_equal(r.guard_after, 1);
    assert_int_equal(r.nan_left, 0);
    m = (mutation){MUT_BEFORE, 0};
    run_variant(ctx, c, dt, lay, 1, &m, &r);
    assert_false(r.ok);
    assert_int_equal(r.guards_damaged, 1);
    assert_int_equal(r.guard_after, 0);
    assert_int_equal(r.nan_left, 0);
}

static void test_mutations_conv(void **state)
{
    (void)state;
    fg_context *ctx = numerics_ctx();
    expect_caught(ctx, "conv_bn_relu6_nobias_s2", FG_DTYPE_F32, FG_LAYOUT_NCHW);
    expect_caught(ctx, "conv_act_g4_prelu", FG_DTYPE_F16, FG_LAYOUT_NHWC);
    expect_caught(ctx, "dw_bn_relu6_s2", FG_DTYPE_BF16, FG_LAYOUT_NHWC);
    fg_context_free(ctx);
}

static void test_mutations_gemm(void **state)
{
    (void)state;
    fg_context *ctx = numerics_ctx();
    expect_caught(ctx, "mm_13x100x17_bias_1n_gelu_tanh", FG_DTYPE_F32, FG_LAYOUT_NCHW);
    expect_caught(ctx, "mm_13x100x17_bias_mn_softplus", FG_DTYPE_F16, FG_LAYOUT_NCHW);
    fg_context_free(ctx);
}

static void test_mutations_pointwise(void **state)
{
    (void)state;
    fg_context *ctx = numerics_ctx();
    expect_caught(ctx, "pw_add_bcast_gelu_tanh_hardsigmoid", FG_DTYPE_F32, FG_LAYOUT_NHWC);
    expect_caught(ctx, "pw_vec4_sub_mul_tanh", FG_DTYPE_BF16, FG_LAYOUT_NCHW);   /* the 4-wide store path */
    fg_context_free(ctx);
}

/* A kernel that also writes into its input buffer (the in-place hazard) is
 * reported as a changed read-only buffer. */
static void test_readonly_write_caught(void **state)
{
    (void)state;
    fg_context *ctx = numerics_ctx();
    static const char *names[] = {"pw_vec4_sub_mul_tanh", "conv_act_same_relu", "mm_1x37x5_bias_n_relu"};
    for (int i = 0; i < 3; i++) {
        const ncase *c = find_case(names[i]);
        nresult r;
        mutation m = {MUT_INPUT, 0};
        run_variant(ctx, c, FG_DTYPE_F16, FG_LAYOUT_NHWC, i == 1 ? 0 : 1, &m, &r);
        assert_true(r.nstores_mutated >= 1);
        assert_false(r.ok);
        assert_int_equal(r.readonly_changed, 1);
        assert_int_equal(r.guards_damaged, 0);
        assert_int_equal(r.nan_left, 0);
    }
    fg_context_free(ctx);
}

static int group_setup(void **state)
{
    (void)state;
    const char *s = getenv("FUSEGEN_SEED");
    if (s && *s)
        run_seed = strtoull(s, NULL, 0);
    else
        run_seed = ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)getpid();
    run_seed &= 0xffffffffu;   /* short enough to type */
    t_start = now_s();
    const char *dev = getenv("FUSEGEN_NUMERICS_DEVICE");
    if (dev && *dev && strcmp(dev, "emu") != 0 && strcmp(dev, "cuda") != 0) {
        fprintf(stderr, "FUSEGEN_NUMERICS_DEVICE=%s: want emu or cuda\n", dev);
        return -1;
    }
    use_cuda = dev && strcmp(dev, "cuda") == 0;
    const char *v = getenv("FUSEGEN_NUMERICS_VERBOSE");
    verbose = v && *v && strcmp(v, "0") != 0;
    const char *cd = getenv("FUSEGEN_CACHE_DIR");
    if (!cd || !*cd) {
        own_cache_dir = tu_tmpdir();
        setenv("FUSEGEN_CACHE_DIR", own_cache_dir, 1);
    }
    unsetenv("FUSEGEN_EMU_STRICT");
    printf("numerics: seed %" PRIu64 " (FUSEGEN_SEED=%" PRIu64 " reruns it), %d cases x %d dtypes x %d layouts "
           "x 2 emissions (shapes specialized, shapes as parameters) on %s, cache %s\n",
           run_seed, run_seed, NCASES, (int)TU_FLOAT_DTYPES, (int)FG_LAYOUT_COUNT, use_cuda ? "cuda" : "emu",
           getenv("FUSEGEN_CACHE_DIR"));
    fflush(stdout);
    t_start = now_s();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    printf("numerics: %d variants run in %.1f s (seed %" PRIu64 ")\n", nvariants_run, now_s() - t_start, run_seed);
    if (own_cache_dir) {
        tu_rmtree(own_cache_dir);
        free(own_cache_dir);
        own_cache_dir = NULL;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_rules_and_ops),
        cmocka_unit_test(test_mutations_conv),
        cmocka_unit_test(test_mutations_gemm),
        cmocka_unit_test(test_mutations_pointwise),
        cmocka_unit_test(test_readonly_write_caught),
        cmocka_unit_test(test_conv_act),
        cmocka_unit_test(test_conv_bn),
        cmocka_unit_test(test_conv_residual),
        cmocka_unit_test(test_depthwise),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_pointwise),
        cmocka_unit_test(test_single),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_conv_transpose),
    };
    if (getenv("FUSEGEN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("FUSEGEN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
