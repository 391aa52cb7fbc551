/*
 * test_emu_tc.c -- the emulated primitives of the tensor-core templates,
 * checked against the PTX ISA's definitions with hand-written kernels:
 * ldmatrix.x4 (plain and .trans) fragment layouts, ldmatrix feeding mma
 * m16n8k16 the way conv2d_tc does (A [m][k] and B [n][k] tiles, swizzled
 * 16-byte chunks), and cp.async groups: a copy lands in shared memory only
 * when its thread's wait_group / wait_all covers its group, src-size 0 fills
 * zeros, and the limits (alignment, full warp, outstanding copies) fail the
 * launch with a message.  TF32: fg_f2tf32 against a rounding written with
 * frexp / round (nearest, ties away from zero, as cvt.rna.tf32.f32), and
 * mma m16n8k8 tf32 fragment layouts against a double-precision product.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "testutil.h"

static char *cache_dir;

static int group_setup(void **state)
{
    (void)state;
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

#define P(x) ((uint64_t)(uintptr_t)(x))

/* Builds, launches once on one block of `threads` threads and releases. */
static fg_status run1(fg_context *ctx, const char *name, const char *src, unsigned threads, int nparams,
                      const uint64_t *args)
{
    fg_kernel k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", name);
    k.source = (char *)src;
    k.grid[0] = k.grid[1] = k.grid[2] = 1;
    k.block[0] = threads;
    k.block[1] = k.block[2] = 1;
    k.nparams = nparams;
    fg_status st = fg_emu_build(ctx, &k);
    if (st == FG_OK)
        st = fg_emu_launch(ctx, &k, args);
    fg_emu_release(&k);
    return st;
}

static void expect_ok(fg_context *ctx, fg_status st)
{
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
}

/* ---- ldmatrix layouts ---- */

/* Four 8x8 matrices of 16-bit values in[(i*8 + row)*8 + col]; row j of matrix
 * i is stored at shared row ((i*8 + j) * 5) % 32, so the lanes' addresses are
 * not in order.  out[lane*4 + i] = register i of the lane. */
static const char *src_ldm =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_ldm { const unsigned short *in; fg_u32 *out; fg_u32 *out_t; fg_i64 skew; };\n"
    "FG_KERNEL(ldm, P_ldm, 32)\n"
    "{\n"
    "    FG_SHARED fg_chunk16 rows[33];\n"
    "    const unsigned l = fg_lane();\n"
    "    const unsigned pos = (l * 5) % 32;\n"
    "    unsigned short *dst = (unsigned short *)&rows[pos];\n"
    "    for (int c = 0; c < 8; c++)\n"
    "        dst[c] = p.in[l * 8 + c];\n"
    "    fg_sync();\n"
    "    fg_u32 r[4], t[4];\n"
    "    fg_ldmatrix_x4(r, (const char *)&rows[pos] + p.skew);\n"
    "    fg_ldmatrix_x4_trans(t, &rows[pos]);\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "        p.out[l * 4 + i] = r[i];\n"
    "        p.out_t[l * 4 + i] = t[i];\n"
    "    }\n"
    "}\n";

static void test_ldmatrix_layout(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    unsigned short in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (unsigned short)(0x1000 + i * 7);
    uint32_t out[128], out_t[128];
    uint64_t args[] = {P(in), P(out), P(out_t), 0};
    expect_ok(ctx, run1(ctx, "ldm", src_ldm, 32, 4, args));
#define M(i, row, col) ((uint32_t)in[((i) * 8 + (row)) * 8 + (col)])
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            uint32_t want = M(i, l / 4, 2 * (l % 4)) | M(i, l / 4, 2 * (l % 4) + 1) << 16;
            uint32_t want_t = M(i, 2 * (l % 4), l / 4) | M(i, 2 * (l % 4) + 1, l / 4) << 16;
            if (out[l * 4 + i] != want || out_t[l * 4 + i] != want_t)
                fail_msg("lane %d reg %d: %08x / %08x, want %08x / %08x", l, i, out[l * 4 + i], out_t[l * 4 + i],
                         want, want_t);
        }
#undef M
    /* a row address that is not 16-byte aligned faults on the device: here too */
    uint64_t bad[] = {P(in), P(out), P(out_t), 8};
    assert_int_equal(run1(ctx, "ldm", src_ldm, 32, 4, bad), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "fg_ldmatrix_x4: row address not 16-byte aligned"));
    fg_context_free(ctx);
}

/* A partial warp cannot run the collective. */
static void test_ldmatrix_full_warp(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    unsigned short in[256] = {0};
    uint32_t out[128], out_t[128];
    uint64_t args[] = {P(in), P(out), P(out_t), 0};
    /* 16 threads: lanes 16..31 do not exist (their rows are never read) */
    assert_int_equal(run1(ctx, "ldm", src_ldm, 16, 4, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "fg_ldmatrix_x4 needs a full warp"));
    fg_context_free(ctx);
}

/* ---- ldmatrix into mma, addressed as conv2d_tc does ---- */

/* A (16 x 32, row-major, k contiguous) and B^T (8 x 32: row n holds column n
 * of B, k contiguous) as 16-bit values in tiles of rows of four 16-byte
 * chunks, chunk q of row i at q ^ ((i >> 1) & 3); two k16 steps of
 * ldmatrix.x4 (A) and ldmatrix.x4 (two n8 fragments of B; only the first is
 * used here, the second reads rows 8..15 = zeros) and mma.  D = A * B. */
#define LDM_MMA_SRC(NAME, T, CVT, MMA)                                                       \
    "#include \"fusegen_prelude.cuh\"\n"                                                     \
    "struct P_" NAME " { const float *A; const float *Bt; float *D; };\n"                    \
    "FG_KERNEL(" NAME ", P_" NAME ", 32)\n"                                                  \
    "{\n"                                                                                    \
    "    FG_SHARED fg_chunk16 a_s[16 * 4];\n"                                                \
    "    FG_SHARED fg_chunk16 b_s[16 * 4];\n"                                                \
    "    const int lane = (int)fg_lane();\n"                                                 \
    "    if (lane < 16) {\n"                                                                 \
    "        for (int q = 0; q < 4; q++) {\n"                                                \
    "            " T " *a = (" T " *)&a_s[lane * 4 + (q ^ ((lane >> 1) & 3))];\n"            \
    "            " T " *b = (" T " *)&b_s[lane * 4 + (q ^ ((lane >> 1) & 3))];\n"            \
    "            for (int e = 0; e < 8; e++) {\n"                                            \
    "                a[e] = " CVT "(p.A[lane * 32 + q * 8 + e]);\n"                          \
    "                b[e] = " CVT "(lane < 8 ? p.Bt[lane * 32 + q * 8 + e] : 0.0f);\n"       \
    "            }\n"                                                                        \
    "        }\n"                                                                            \
    "    }\n"                                                                                \
    "    fg_sync();\n"                                                                       \
    "    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"                                         \
    "    for (int ks = 0; ks < 2; ks++) {\n"                                                 \
    "        fg_u32 af[4], t[4];\n"                                                          \
    "        int row = lane & 15, ch = ks * 2 + (lane >> 4);\n"                              \
    "        fg_ldmatrix_x4(af, &a_s[row * 4 + (ch ^ ((row >> 1) & 3))]);\n"                 \
    "        row = (lane & 7) + ((lane >> 4) << 3);\n"                                       \
    "        ch = ks * 2 + ((lane >> 3) & 1);\n"                                             \
    "        fg_ldmatrix_x4(t, &b_s[row * 4 + (ch ^ ((row >> 1) & 3))]);\n"                  \
    "        const fg_u32 bf[2] = {t[0], t[1]};\n"                                           \
    "        " MMA "(acc, af, bf, acc);\n"                                                   \
    "    }\n"                                                                                \
    "    const int g = lane >> 2, tg = lane & 3;\n"                                          \
    "    p.D[g * 8 + tg * 2] = acc[0]; p.D[g * 8 + tg * 2 + 1] = acc[1];\n"                  \
    "    p.D[(g + 8) * 8 + tg * 2] = acc[2]; p.D[(g + 8) * 8 + tg * 2 + 1] = acc[3];\n"      \
    "}\n"

static void check_ldm_mma(const char *name, const char *src)
{
    fg_context *ctx = tu_ctx_empty();
    float A[16 * 32], Bt[8 * 32], D[128];
    srand(99);
    /* multiples of 1/32 below 2: exact in fp16 and bf16, sums exact in float */
    for (int i = 0; i < 16 * 32; i++)
        A[i] = (float)(rand() % 129 - 64) / 32.0f;
    for (int i = 0; i < 8 * 32; i++)
        Bt[i] = (float)(rand() % 129 - 64) / 32.0f;
    uint64_t args[] = {P(A), P(Bt), P(D)};
    expect_ok(ctx, run1(ctx, name, src, 32, 3, args));
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            double want = 0;
            for (int k = 0; k < 32; k++)
                want += (double)A[m * 32 + k] * Bt[n * 32 + k];
            if (D[m * 8 + n] != (float)want)
                fail_msg("%s: D[%d][%d] = %g, want %g", name, m, n, D[m * 8 + n], want);
        }
    fg_context_free(ctx);
}

static void test_ldmatrix_mma_f16(void **state)
{
    (void)state;
    check_ldm_mma("ldmma_h", LDM_MMA_SRC("ldmma_h", "fg_half", "fg_f2h", "fg_mma_16816_f16"));
}

static void test_ldmatrix_mma_bf16(void **state)
{
    (void)state;
    check_ldm_mma("ldmma_b", LDM_MMA_SRC("ldmma_b", "fg_bf16", "fg_f2bf", "fg_mma_16816_bf16"));
}

/* ---- cp.async groups ---- */

/* 64 threads; thread t owns chunk t of three tiles.  Tile 0 is group 0, tile
 * 1 group 1 (zero-filled for odd t), tile 2 is issued but never committed
 * before the waits.  After each step the thread records the first word of
 * what it sees: seen[t*8 + step]. */
static const char *src_groups =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_grp { const fg_u32 *src; fg_u32 *seen; };\n"
    "FG_KERNEL(grp, P_grp, 64)\n"
    "{\n"
    "    FG_SHARED fg_chunk16 tile[3][64];\n"
    "    const int t = (int)fg_tid_x();\n"
    "    fg_u32 *seen = p.seen + t * 8;\n"
    "    fg_cp_async16(&tile[0][t], p.src + t * 4);\n"
    "    fg_cp_async_commit();\n"
    "    fg_cp_async16_zfill(&tile[1][t], p.src + 256 + t * 4, t % 2 == 0);\n"
    "    fg_cp_async_commit();\n"
    "    fg_cp_async16(&tile[2][t], p.src + 512 + t * 4);\n"
    "    seen[0] = tile[0][t].w[0];            // nothing waited for: poison\n"
    "    fg_cp_async_wait_group<2>();\n"
    "    seen[1] = tile[0][t].w[0];            // two groups may stay in flight: poison\n"
    "    fg_cp_async_wait_group<1>();\n"
    "    seen[2] = tile[0][t].w[0];            // group 0 landed\n"
    "    seen[3] = tile[1][t].w[0];            // group 1 not yet\n"
    "    fg_cp_async_wait_group<0>();\n"
    "    seen[4] = tile[1][t].w[0];            // data, or zeros for odd t\n"
    "    seen[5] = tile[2][t].w[0];            // never committed: not waited for\n"
    "    fg_cp_async_wait_all();\n"
    "    seen[6] = tile[2][t].w[0];            // wait_all commits and lands it\n"
    "    fg_sync();\n"
    "    seen[7] = tile[0][(t + 1) % 64].w[3]; // the neighbour's copy, after its wait and the barrier\n"
    "}\n";

static void test_cp_async_groups(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    _Alignas(16) uint32_t src[768];
    uint32_t seen[64 * 8];
    for (int i = 0; i < 768; i++)
        src[i] = 0x10000u + (uint32_t)i;
    uint64_t args[] = {P(src), P(seen)};
    expect_ok(ctx, run1(ctx, "grp", src_groups, 64, 2, args));
    for (int t = 0; t < 64; t++) {
        const uint32_t *s = seen + t * 8;
        uint32_t want[8] = {0xffffffffu, 0xffffffffu, src[t * 4], 0xffffffffu, t % 2 ? 0u : src[256 + t * 4],
                            0xffffffffu, src[512 + t * 4], src[((t + 1) % 64) * 4 + 3]};
        for (int i = 0; i < 8; i++)
            if (s[i] != want[i])
                fail_msg("thread %d step %d: saw %08x, want %08x", t, i, s[i], want[i]);
    }
    fg_context_free(ctx);
}

/* A thread that never waits: its copies do not land, even after a barrier. */
static const char *src_nowait =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_nw { const fg_u32 *src; fg_u32 *out; };\n"
    "FG_KERNEL(nw, P_nw, 32)\n"
    "{\n"
    "    FG_SHARED fg_chunk16 tile[32];\n"
    "    const int t = (int)fg_tid_x();\n"
    "    fg_cp_async16(&tile[t], p.src + t * 4);\n"
    "    fg_cp_async_commit();\n"
    "    fg_sync();\n"
    "    p.out[t] = tile[31 - t].w[1];\n"
    "}\n";

static void test_cp_async_no_wait(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    _Alignas(16) uint32_t src[128];
    uint32_t out[32];
    for (int i = 0; i < 128; i++)
        src[i] = (uint32_t)i;
    uint64_t args[] = {P(src), P(out)};
    expect_ok(ctx, run1(ctx, "nw", src_nowait, 32, 2, args));
    for (int t = 0; t < 32; t++)
        assert_int_equal(out[t], 0xffffffffu);
    fg_context_free(ctx);
}

/* Copies that are never waited for pile up to a limit, then fail. */
static const char *src_pileup =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_pu { const fg_u32 *src; };\n"
    "FG_KERNEL(pu, P_pu, 32)\n"
    "{\n"
    "    FG_SHARED fg_chunk16 tile[4];\n"
    "    for (int i = 0; i < 200; i++) {\n"
    "        fg_cp_async16(&tile[i % 4], p.src);\n"
    "        fg_cp_async_commit();\n"
    "    }\n"
    "    fg_cp_async_wait_all();\n"
    "}\n";

static void test_cp_async_limit(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    _Alignas(16) uint32_t src[4] = {1, 2, 3, 4};
    uint64_t args[] = {P(src)};
    assert_int_equal(run1(ctx, "pu", src_pileup, 32, 1, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "more than 128 cp.async copies outstanding in one thread"));
    fg_context_free(ctx);
}

/* ---- TF32 ---- */

/* x rounded to TF32 by arithmetic: 11 significant bits (quantum at least
 * 2^-136, the fp32 subnormal field cut at bit 13), ties away from zero. */
static float tf32_ref(float x)
{
    if (x == 0.0f || isinf(x) || isnan(x))
        return x;
    int e;
    frexp(x, &e);
    int qe = e - 11 < -136 ? -136 : e - 11;
    double q = ldexp(1.0, qe);
    return (float)(round((double)x / q) * q);
}

static const char *src_tf32cvt =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_tc { const float *in; fg_u32 *out; fg_i64 n; };\n"
    "FG_KERNEL(tfcvt, P_tc, 32)\n"
    "{\n"
    "    for (fg_i64 i = fg_lane(); i < p.n; i += 32)\n"
    "        p.out[i] = fg_f2tf32(p.in[i]);\n"
    "}\n";

static void test_f2tf32_rounding(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { N = 4096 };
    static float in[N];
    static uint32_t out[N];
    const float one_ulp = ldexpf(1.0f, -10);   /* tf32 ulp at 1 */
    const float edge[] = {1.0f + one_ulp / 2, -(1.0f + one_ulp / 2), 1.0f + 3 * one_ulp / 2, 1.0f + one_ulp / 2 - ldexpf(1.0f, -23),
                          1.0f + one_ulp / 2 + ldexpf(1.0f, -23), FLT_MAX, -FLT_MAX, FLT_MIN, ldexpf(1.0f, -140) * 3.5f,
                          INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 3.14159265f, 1e-30f};
    int ne = (int)(sizeof edge / sizeof edge[0]);
    srand(7);
    for (int i = 0; i < N; i++) {
        if (i < ne) {
            in[i] = edge[i];
            continue;
        }
        uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
        if ((u & 0x7f800000u) == 0x7f800000u)
            u &= 0xbfffffffu;   /* finite */
        memcpy(&in[i], &u, 4);
    }
    in[N - 1] = NAN;
    uint64_t args[] = {P(in), P(out), N};
    expect_ok(ctx, run1(ctx, "tfcvt", src_tf32cvt, 32, 3, args));
    for (int i = 0; i < N - 1; i++) {
        float got;
        memcpy(&got, &out[i], 4);
        float want = tf32_ref(in[i]);
        uint32_t wb;
        memcpy(&wb, &want, 4);
        if (out[i] != wb)
            fail_msg("fg_f2tf32(%a) = %a (%08x), want %a (%08x)", in[i], got, out[i], want, wb);
        assert_int_equal(out[i] & 0x1fffu, 0);
    }
    /* the ties went away from zero */
    float t;
    memcpy(&t, &out[0], 4);
    assert_true(t == 1.0f + one_ulp);
    memcpy(&t, &out[1], 4);
    assert_true(t == -(1.0f + one_ulp));
    memcpy(&t, &out[5], 4);
    assert_true(isinf(t));   /* FLT_MAX rounds up to infinity */
    memcpy(&t, &out[N - 1], 4);
    assert_true(isnan(t));
    assert_int_equal(out[N - 1] & 0x1fffu, 0);
    fg_context_free(ctx);
}

/* D = A (16 x 16) * B (16 x 8) + C as two m16n8k8 steps, each lane loading
 * its fragments straight from global memory by the PTX ISA layout; raw != 0
 * passes the fp32 bits unrounded (which must fail the launch). */
static const char *src_mma_tf32 =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_mt { const float *A; const float *B; const float *C; float *D; fg_i64 raw; };\n"
    "FG_DEVICE fg_u32 op_bits(float v, fg_i64 raw)\n"
    "{\n"
    "    union { float f; fg_u32 u; } cv;\n"
    "    cv.f = v;\n"
    "    return raw ? cv.u : fg_f2tf32(v);\n"
    "}\n"
    "FG_KERNEL(mmatf, P_mt, 32)\n"
    "{\n"
    "    const int lane = (int)fg_lane(), g = lane >> 2, t = lane & 3;\n"
    "    float c[4] = {p.C[g * 8 + 2 * t], p.C[g * 8 + 2 * t + 1], p.C[(g + 8) * 8 + 2 * t],\n"
    "                  p.C[(g + 8) * 8 + 2 * t + 1]};\n"
    "    for (int ks = 0; ks < 2; ks++) {\n"
    "        const float *A = p.A + ks * 8, *B = p.B + ks * 64;\n"
    "        const float av[4] = {A[g * 16 + t], A[(g + 8) * 16 + t], A[g * 16 + t + 4], A[(g + 8) * 16 + t + 4]};\n"
    "        const float bv[2] = {B[t * 8 + g], B[(t + 4) * 8 + g]};\n"
    "        fg_u32 a[4], b[2];\n"
    "        for (int i = 0; i < 4; i++) a[i] = op_bits(av[i], p.raw);\n"
    "        for (int i = 0; i < 2; i++) b[i] = op_bits(bv[i], p.raw);\n"
    "        fg_mma_1688_tf32(c, a, b, c);\n"
    "    }\n"
    "    for (int i = 0; i < 4; i++)\n"
    "        p.D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = c[i];\n"
    "}\n";

static void test_mma_tf32(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float A[16 * 16], B[16 * 8], C[16 * 8], D[16 * 8];
    srand(11);
    /* 1: multiples of 1/64 below 2 (exact in tf32, sums exact): the layout, exactly */
    for (int i = 0; i < 256; i++)
        A[i] = (float)(rand() % 257 - 128) / 64.0f;
    for (int i = 0; i < 128; i++) {
        B[i] = (float)(rand() % 257 - 128) / 64.0f;
        C[i] = (float)(rand() % 65 - 32) / 4.0f;
    }
    uint64_t args[] = {P(A), P(B), P(C), P(D), 0};
    expect_ok(ctx, run1(ctx, "mmatf", src_mma_tf32, 32, 5, args));
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            double want = C[m * 8 + n];
            for (int k = 0; k < 16; k++)
                want += (double)A[m * 16 + k] * B[k * 8 + n];
            if (D[m * 8 + n] != (float)want)
                fail_msg("tf32 mma: D[%d][%d] = %g, want %g", m, n, D[m * 8 + n], want);
        }
    /* 2: full fp32 values: the product of the rounded operands (to float
     * accumulation), far from the product of the unrounded ones */
    for (int i = 0; i < 256; i++)
        A[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    for (int i = 0; i < 128; i++) {
        B[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
        C[i] = 0.0f;
    }
    expect_ok(ctx, run1(ctx, "mmatf", src_mma_tf32, 32, 5, args));
    double err_r = 0, err_x = 0, norm = 0;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            double wr = 0, wx = 0;
            for (int k = 0; k < 16; k++) {
                wr += (double)tf32_ref(A[m * 16 + k]) * tf32_ref(B[k * 8 + n]);
                wx += (double)A[m * 16 + k] * B[k * 8 + n];
            }
            double d = D[m * 8 + n];
            err_r += (d - wr) * (d - wr);
            err_x += (d - wx) * (d - wx);
            norm += wx * wx;
        }
    double rel_r = sqrt(err_r / norm), rel_x = sqrt(err_x / norm);
    printf("tf32 mma: rel L2 %.2e vs rounded operands, %.2e vs exact fp32\n", rel_r, rel_x);
    assert_true(rel_r < 1e-6);
    assert_true(rel_x > 1e-5 && rel_x < 2e-3);
    /* 3: unrounded operands are refused */
    uint64_t raw[] = {P(A), P(B), P(C), P(D), 1};
    assert_int_equal(run1(ctx, "mmatf", src_mma_tf32, 32, 5, raw), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "is not a tf32 value (round it with fg_f2tf32)"));
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ldmatrix_layout),
        cmocka_unit_test(test_ldmatrix_full_warp),
        cmocka_unit_test(test_ldmatrix_mma_f16),
        cmocka_unit_test(test_ldmatrix_mma_bf16),
        cmocka_unit_test(test_cp_async_groups),
        cmocka_unit_test(test_cp_async_no_wait),
        cmocka_unit_test(test_cp_async_limit),
        cmocka_unit_test(test_f2tf32_rounding),
        cmocka_unit_test(test_mma_tf32),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
