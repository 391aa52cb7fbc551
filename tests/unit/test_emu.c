/* test_emu.c -- the CPU emulation backend: hand-written kernels that use only
 * the prelude contract, built with the host compiler and run on the
 * scheduler (barriers, warp shuffles, mma fragments, conversions, cp.async,
 * guard zones, errors, the .so cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "emu.h"
#include "jit.h"
#include "testutil.h"

static char *cache_dir;

static int group_setup(void **state)
{
    (void)state;
    cache_dir = tu_tmpdir();
    setenv("FUSEGEN_CACHE_DIR", cache_dir, 1);   /* keep the user's cache clean */
    unsetenv("FUSEGEN_EMU_STRICT");
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

static void kinit(fg_kernel *k, const char *name, const char *src, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz, int nparams)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->source = (char *)src;
    k->grid[0] = gx, k->grid[1] = gy, k->grid[2] = gz;
    k->block[0] = bx, k->block[1] = by, k->block[2] = bz;
    k->nparams = nparams;
}

/* Builds, launches once and releases; returns the first failing status. */
static fg_status run1(fg_context *ctx, const char *name, const char *src, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, int nparams, const uint64_t *args)
{
    fg_kernel k;
    kinit(&k, name, src, gx, gy, gz, bx, by, bz, nparams);
    fg_status st = fg_emu_build(ctx, &k);
    if (st == FG_OK)
        st = fg_emu_launch(ctx, &k, args);
    fg_emu_release(&k);
    assert_null(k.handle);
    return st;
}

#define P(x) ((uint64_t)(uintptr_t)(x))

static void expect_ok(fg_context *ctx, fg_status st)
{
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
}

/* ---- grid-stride vector add ---- */

static const char *src_vadd =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct fg_params_vadd { const float *a; const float *b; float *c; fg_i64 n; };\n"
    "FG_KERNEL(vadd, fg_params_vadd, 128)\n"
    "{\n"
    "    fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();\n"
    "    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < p.n; i += stride)\n"
    "        fg_store(p.c + i, fg_load(p.a + i) + fg_load(p.b + i));\n"
    "}\n";

static void test_vector_add(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { N = 10007 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 3.0f - (float)i;
        c[i] = NAN;
    }
    uint64_t args[] = {P(a), P(b), P(c), N};
    expect_ok(ctx, run1(ctx, "vadd", src_vadd, 8, 1, 1, 128, 1, 1, 4, args));
    for (int i = 0; i < N; i++)
        assert_true(c[i] == a[i] + b[i]);
    free(a), free(b), free(c);
    fg_context_free(ctx);
}

/* ---- shared-memory block reduction with barriers ---- */

#define REDUCE_SRC(NAME, SYNC)                                                         \
    "#include \"fusegen_prelude.cuh\"\n"                                               \
    "struct P_" NAME " { const float *x; float *out; };\n"                             \
    "FG_KERNEL(" NAME ", P_" NAME ", 256)\n"                                           \
    "{\n"                                                                              \
    "    FG_SHARED float s[256];\n"                                                    \
    "    unsigned t = fg_tid_x();\n"                                                   \
    "    s[t] = p.x[fg_bid_x() * 256 + t];\n"                                          \
    "    " SYNC "\n"                                                                   \
    "    for (unsigned w = 128; w > 0; w >>= 1) {\n"                                   \
    "        if (t < w) s[t] += s[t + w];\n"                                           \
    "        " SYNC "\n"                                                               \
    "    }\n"                                                                          \
    "    if (t == 0) p.out[fg_bid_x()] = s[0];\n"                                      \
    "}\n"

static void test_block_reduce_barrier(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { B = 5 };
    float x[B * 256], out[B], want[B] = {0};
    for (int i = 0; i < B * 256; i++) {
        x[i] = (float)((i * 7) % 13) - 6.0f;
        want[i / 256] += x[i];
    }
    uint64_t args[] = {P(x), P(out)};
    expect_ok(ctx, run1(ctx, "red_sync", REDUCE_SRC("red_sync", "fg_sync();"), B, 1, 1, 256, 1, 1, 2, args));
    for (int i = 0; i < B; i++)
        assert_true(out[i] == want[i]);
    /* Without the barriers thread 0 finishes before the others store: wrong. */
    expect_ok(ctx, run1(ctx, "red_nosync", REDUCE_SRC("red_nosync", ""), B, 1, 1, 256, 1, 1, 2, args));
    int wrong = 0;
    for (int i = 0; i < B; i++)
        wrong += out[i] != want[i];
    assert_true(wrong > 0);
    fg_context_free(ctx);
}

/* Threads that exit before a barrier do not block the others (device
 * semantics); in strict mode the divergence is an error. */
static const char *src_early_exit =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_early { float *out; };\n"
    "FG_KERNEL(early, P_early, 64)\n"
    "{\n"
    "    FG_SHARED float s[64];\n"
    "    unsigned t = fg_tid_x();\n"
    "    if (t >= 60) return;\n"
    "    s[t] = (float)t;\n"
    "    fg_sync();\n"
    "    p.out[t] = s[59 - t];\n"
    "}\n";

static void test_barrier_exited_threads(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float out[64];
    for (int i = 0; i < 64; i++)
        out[i] = -1.0f;
    uint64_t args[] = {P(out)};
    expect_ok(ctx, run1(ctx, "early", src_early_exit, 1, 1, 1, 64, 1, 1, 1, args));
    for (int i = 0; i < 60; i++)
        assert_true(out[i] == (float)(59 - i));
    for (int i = 60; i < 64; i++)
        assert_true(out[i] == -1.0f);

    /* The environment is read when a context is made. */
    fg_context_free(ctx);
    setenv("FUSEGEN_EMU_STRICT", "1", 1);
    ctx = tu_ctx_empty();
    unsetenv("FUSEGEN_EMU_STRICT");
    fg_status st = run1(ctx, "early", src_early_exit, 1, 1, 1, 64, 1, 1, 1, args);
    assert_int_equal(st, FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "barrier divergence"));
    assert_true(tu_has_error(ctx, "early"));
    fg_context_free(ctx);
}

/* ---- warp shuffles ---- */

static const char *src_shfl =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_shfl { const float *x; float *xo; float *dn; float *ix; float *d1; };\n"
    "FG_KERNEL(shfl, P_shfl, 64)\n"
    "{\n"
    "    unsigned i = fg_tid_x();\n"
    "    float v = p.x[i], s = v, d = v;\n"
    "    for (int m = 16; m > 0; m >>= 1) s += fg_shfl_xor(s, m);\n"
    "    for (int m = 16; m > 0; m >>= 1) d += fg_shfl_down(d, m);\n"
    "    p.xo[i] = s;\n"
    "    p.dn[i] = d;\n"
    "    p.ix[i] = fg_shfl_idx(v, 5 + (int)fg_warp());\n"
    "    p.d1[i] = fg_shfl_down(v, 1);\n"
    "}\n";

static void test_shuffles(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float x[64], xo[64], dn[64], ix[64], d1[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i * i % 17);
    uint64_t args[] = {P(x), P(xo), P(dn), P(ix), P(d1)};
    expect_ok(ctx, run1(ctx, "shfl", src_shfl, 1, 1, 1, 64, 1, 1, 5, args));
    for (int w = 0; w < 2; w++) {
        float sum = 0;
        for (int l = 0; l < 32; l++)
            sum += x[w * 32 + l];
        assert_true(dn[w * 32] == sum);   /* lane 0 of a down-reduction holds the total */
        for (int l = 0; l < 32; l++) {
            int i = w * 32 + l;
            assert_true(xo[i] == sum);    /* every lane of a butterfly holds it */
            assert_true(ix[i] == x[w * 32 + 5 + w]);
            assert_true(d1[i] == (l < 31 ? x[i + 1] : x[i]));   /* out of range: own value */
        }
    }
    fg_context_free(ctx);
}

/* A lane that leaves before a collective deadlocks its warp: reported. */
static const char *src_shfl_diverge =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_shd { float *o; };\n"
    "FG_KERNEL(shd, P_shd, 32)\n"
    "{\n"
    "    if (fg_lane() == 3) return;\n"
    "    p.o[fg_lane()] = fg_shfl_xor(1.0f, 1);\n"
    "}\n";

static void test_shuffle_divergence(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float o[32];
    uint64_t args[] = {P(o)};
    assert_int_equal(run1(ctx, "shd", src_shfl_diverge, 1, 1, 1, 32, 1, 1, 1, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "deadlock"));
    assert_true(tu_has_error(ctx, "31 of 32 lanes in fg_shfl_xor"));
    fg_context_free(ctx);
}

/* ---- mma.m16n8k16 ---- */

/* A (16x16 row-major), B (16x8, B[k][n] row-major), C, D (16x8) as floats;
 * the kernel converts to the 16-bit type, builds the PTX fragments and
 * calls the mma with d aliasing c. */
#define MMA_SRC(NAME, T, CVT, PACK, MMA)                                                  \
    "#include \"fusegen_prelude.cuh\"\n"                                                  \
    "struct P_" NAME " { const float *A; const float *B; const float *C; float *D; };\n"  \
    "static inline fg_u32 pk(float lo, float hi) { return " PACK "(" CVT "(lo), " CVT "(hi)); }\n" \
    "FG_KERNEL(" NAME ", P_" NAME ", 32)\n"                                               \
    "{\n"                                                                                 \
    "    unsigned lane = fg_lane(), g = lane >> 2, t = lane % 4;\n"                       \
    "    const float *A = p.A, *B = p.B;\n"                                               \
    "    fg_u32 a[4], b[2];\n"                                                            \
    "    a[0] = pk(A[g * 16 + t * 2], A[g * 16 + t * 2 + 1]);\n"                          \
    "    a[1] = pk(A[(g + 8) * 16 + t * 2], A[(g + 8) * 16 + t * 2 + 1]);\n"              \
    "    a[2] = pk(A[g * 16 + t * 2 + 8], A[g * 16 + t * 2 + 9]);\n"                      \
    "    a[3] = pk(A[(g + 8) * 16 + t * 2 + 8], A[(g + 8) * 16 + t * 2 + 9]);\n"          \
    "    b[0] = pk(B[(t * 2) * 8 + g], B[(t * 2 + 1) * 8 + g]);\n"                        \
    "    b[1] = pk(B[(t * 2 + 8) * 8 + g], B[(t * 2 + 9) * 8 + g]);\n"                    \
    "    float c[4] = { p.C[g * 8 + t * 2], p.C[g * 8 + t * 2 + 1],\n"                    \
    "                   p.C[(g + 8) * 8 + t * 2], p.C[(g + 8) * 8 + t * 2 + 1] };\n"      \
    "    " MMA "(c, a, b, c);\n"                                                          \
    "    p.D[g * 8 + t * 2] = c[0]; p.D[g * 8 + t * 2 + 1] = c[1];\n"                     \
    "    p.D[(g + 8) * 8 + t * 2] = c[2]; p.D[(g + 8) * 8 + t * 2 + 1] = c[3];\n"         \
    "}\n"

static void check_mma(const char *name, const char *src)
{
    fg_context *ctx = tu_ctx_empty();
    float A[256], B[128], C[128], D[128];
    srand(1234);
    /* Multiples of 1/64 below 2 in magnitude: exact in fp16 and bf16, and
     * every sum of products is exact in float, so D must match exactly. */
    for (int i = 0; i < 256; i++)
        A[i] = (float)(rand() % 257 - 128) / 64.0f;
    for (int i = 0; i < 128; i++) {
        B[i] = (float)(rand() % 257 - 128) / 64.0f;
        C[i] = (float)(rand() % 257 - 128) / 64.0f;
    }
    uint64_t args[] = {P(A), P(B), P(C), P(D)};
    expect_ok(ctx, run1(ctx, name, src, 1, 1, 1, 32, 1, 1, 4, args));
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            double want = C[i * 8 + j];
            for (int k = 0; k < 16; k++)
                want += (double)A[i * 16 + k] * B[k * 8 + j];
            if (D[i * 8 + j] != (float)want)
                fail_msg("%s: D[%d][%d] = %g, want %g", name, i, j, D[i * 8 + j], want);
        }
    fg_context_free(ctx);
}

static void test_mma_f16(void **state)
{
    (void)state;
    check_mma("mma_h", MMA_SRC("mma_h", "fg_half", "fg_f2h", "fg_pack_half2", "fg_mma_16816_f16"));
}

static void test_mma_bf16(void **state)
{
    (void)state;
    check_mma("mma_b", MMA_SRC("mma_b", "fg_bf16", "fg_f2bf", "fg_pack_bf162", "fg_mma_16816_bf16"));
}

/* The FG_KERNEL bound is enforced at launch. */
static void test_launch_bound(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float A[256] = {0}, B[128] = {0}, C[128] = {0}, D[128];
    uint64_t args[] = {P(A), P(B), P(C), P(D)};
    const char *src = MMA_SRC("mma_p", "fg_half", "fg_f2h", "fg_pack_half2", "fg_mma_16816_f16");
    fg_kernel k;
    kinit(&k, "mma_p", src, 1, 1, 1, 48, 1, 1, 4);
    /* max_threads is 32: the launch bound is checked first. */
    expect_ok(ctx, fg_emu_build(ctx, &k));
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "exceeds the kernel's bound of 32"));
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- fp16 / bf16 conversions ---- */

static const char *src_cvt =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_cvt { const float *f; unsigned short *h; unsigned short *b; float *hf; float *bf; fg_i64 n; };\n"
    "FG_KERNEL(cvt, P_cvt, 256)\n"
    "{\n"
    "    fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();\n"
    "    if (i >= p.n) return;\n"
    "    fg_half h = fg_f2h(p.f[i]);\n"
    "    fg_bf16 b = fg_f2bf(p.f[i]);\n"
    "    p.h[i] = h.bits;\n"
    "    p.b[i] = b.bits;\n"
    "    fg_half hi; hi.bits = (unsigned short)i;\n"
    "    fg_bf16 bi; bi.bits = (unsigned short)i;\n"
    "    p.hf[i] = fg_h2f(hi);\n"
    "    p.bf[i] = fg_bf2f(bi);\n"
    "}\n";

static float fbits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bitsf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_conversions(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { N = 65536 };
    static const struct {
        uint32_t f;
        uint16_t h, b;
    } known[] = {
        {0x3f800000, 0x3c00, 0x3f80},   /* 1 */
        {0xc0000000, 0xc000, 0xc000},   /* -2 */
        {0x80000000, 0x8000, 0x8000},   /* -0 */
        {0x477fe000, 0x7bff, 0x4780},   /* 65504, the largest half */
        {0x477fefff, 0x7bff, 0x4780},   /* just below 65520: rounds down */
        {0x477ff000, 0x7c00, 0x4780},   /* 65520: ties away to inf */
        {0x49742400, 0x7c00, 0x4974},   /* 1e6 overflows half */
        {0x7f800000, 0x7c00, 0x7f80},   /* inf */
        {0xff800000, 0xfc00, 0xff80},   /* -inf */
        {0x7f7fffff, 0x7c00, 0x7f80},   /* FLT_MAX: bf16 rounds to inf */
        {0x3dcccccd, 0x2e66, 0x3dcd},   /* 0.1 */
        {0x3f801000, 0x3c00, 0x3f80},   /* 1 + 2^-11: tie, half to even (down) */
        {0x3f803000, 0x3c02, 0x3f80},   /* 1 + 3*2^-11: tie, half to even (up) */
        {0x3f808000, 0x3c04, 0x3f80},   /* 1 + 2^-8: bf16 tie to even (down) */
        {0x3f818000, 0x3c0c, 0x3f82},   /* 1 + 3*2^-8: bf16 tie to even (up) */
        {0x38800000, 0x0400, 0x3880},   /* 2^-14, the smallest normal half */
        {0x387fc000, 0x03ff, 0x3880},   /* largest subnormal half */
        {0x33800000, 0x0001, 0x3380},   /* 2^-24, the smallest subnormal half */
        {0x33000000, 0x0000, 0x3300},   /* 2^-25: tie to even -> 0 */
        {0x33000001, 0x0001, 0x3300},   /* just above 2^-25 -> 2^-24 */
        {0x33c00000, 0x0002, 0x33c0},   /* 3*2^-25: tie to even -> 2 */
        {0x00012345, 0x0000, 0x0001},   /* float subnormal */
        {0x00008000, 0x0000, 0x0000},   /* bf16 tie at zero */
        {0x00018000, 0x0000, 0x0002},   /* bf16 tie at one -> two */
    };
    float *f = calloc(N, sizeof *f), *hf = calloc(N, sizeof *hf), *bf = calloc(N, sizeof *bf);
    uint16_t *h = calloc(N, 2), *b = calloc(N, 2);
    int nk = (int)FG_COUNTOF(known);
    for (int i = 0; i < nk; i++)
        f[i] = fbits(known[i].f);
    f[nk] = fbits(0x7fc00000);       /* NaN */
    f[nk + 1] = fbits(0xffa12345);   /* signalling NaN, negative */
    srand(99);
    for (int i = nk + 2; i < N; i++) {   /* random bit patterns, many near half's range */
        uint32_t u = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
        if (i % 2)
            u = (u & 0x80ffffffu) | ((uint32_t)(96 + rand() % 48) << 23);
        f[i] = fbits(u);
    }
    uint64_t args[] = {P(f), P(h), P(b), P(hf), P(bf), N};
    expect_ok(ctx, run1(ctx, "cvt", src_cvt, N / 256, 1, 1, 256, 1, 1, 6, args));
    for (int i = 0; i < nk; i++) {
        if (h[i] != known[i].h)
            fail_msg("f2h(0x%08x) = 0x%04x, want 0x%04x", known[i].f, h[i], known[i].h);
        if (b[i] != known[i].b)
            fail_msg("f2bf(0x%08x) = 0x%04x, want 0x%04x", known[i].f, b[i], known[i].b);
    }
    /* NaN stays NaN, sign kept. */
    assert_true((h[nk] & 0x7c00) == 0x7c00 && (h[nk] & 0x3ff) != 0);
    assert_true((b[nk] & 0x7f80) == 0x7f80 && (b[nk] & 0x7f) != 0);
    assert_true((h[nk + 1] & 0xfc00) == 0xfc00 && (h[nk + 1] & 0x3ff) != 0);
    assert_true((b[nk + 1] & 0xff80) == 0xff80 && (b[nk + 1] & 0x7f) != 0);
    /* Decoding: known values, then every pattern round-trips. */
    assert_true(hf[0x0001] == ldexpf(1.0f, -24));
    assert_true(hf[0x03ff] == ldexpf(1023.0f, -24));
    assert_true(hf[0x7bff] == 65504.0f);
    assert_true(hf[0x3555] == 0.333251953125f);
    assert_true(isinf(hf[0xfc00]) && hf[0xfc00] < 0);
    assert_true(isnan(hf[0x7e00]) && isnan(hf[0x7c01]));
    assert_true(bitsf(hf[0x8000]) == 0x80000000u);
    assert_true(bf[0x3f80] == 1.0f && bf[0xc2f7] == -123.5f);
    assert_true(isnan(bf[0x7fc0]) && isinf(bf[0xff80]));
    /* Round trips of every 16-bit pattern (through a second launch). */
    float *g = malloc(N * sizeof *g);
    uint16_t *h2 = calloc(N, 2), *b2 = calloc(N, 2);
    memcpy(g, hf, N * sizeof *g);
    uint64_t args2[] = {P(g), P(h2), P(b), P(hf), P(bf), N};
    expect_ok(ctx, run1(ctx, "cvt", src_cvt, N / 256, 1, 1, 256, 1, 1, 6, args2));
    memcpy(g, bf, N * sizeof *g);
    uint64_t args3[] = {P(g), P(h), P(b2), P(hf), P(bf), N};
    expect_ok(ctx, run1(ctx, "cvt", src_cvt, N / 256, 1, 1, 256, 1, 1, 6, args3));
    for (int i = 0; i < N; i++) {
        int hnan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff), bnan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        if (hnan)
            assert_true((h2[i] & 0x7c00) == 0x7c00 && (h2[i] & 0x3ff));
        else if (h2[i] != i)
            fail_msg("half 0x%04x -> %g -> 0x%04x", i, (double)fbits(bitsf(g[i])), h2[i]);
        if (bnan)
            assert_true((b2[i] & 0x7f80) == 0x7f80 && (b2[i] & 0x7f));
        else if (b2[i] != i)
            fail_msg("bf16 0x%04x -> 0x%04x", i, b2[i]);
    }
#ifdef __FLT16_MAX__
    /* The compiler's own _Float16 conversion is an independent oracle. */
    memcpy(g, f, N * sizeof *g);
    uint64_t args4[] = {P(g), P(h), P(b), P(hf), P(bf), N};
    expect_ok(ctx, run1(ctx, "cvt", src_cvt, N / 256, 1, 1, 256, 1, 1, 6, args4));
    for (int i = 0; i < N; i++) {
        _Float16 r = (_Float16)g[i];
        uint16_t rb;
        memcpy(&rb, &r, 2);
        if (isnan(g[i]))
            assert_true((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff));
        else if (h[i] != rb)
            fail_msg("f2h(0x%08x) = 0x%04x, the compiler says 0x%04x", bitsf(g[i]), h[i], rb);
    }
#endif
    free(f), free(hf), free(bf), free(h), free(b), free(g), free(h2), free(b2);
    fg_context_free(ctx);
}

/* ---- cp.async and vector access ---- */

static const char *src_cpasync =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_cpa { const float *src; float *dst; fg_i64 off; };\n"
    "FG_KERNEL(cpa, P_cpa, 32)\n"
    "{\n"
    "    FG_SHARED float tile[128];\n"
    "    unsigned t = fg_tid_x();\n"
    "    fg_cp_async16(&tile[t * 4], p.src + p.off + t * 4);\n"
    "    fg_cp_async_commit();\n"
    "    fg_cp_async_wait_all();\n"
    "    fg_sync();\n"
    "    float v[4];\n"
    "    fg_load4(&tile[(31 - t) * 4], v);\n"
    "    fg_store4(p.dst + t * 4, v);\n"
    "}\n";

static void test_cp_async(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    _Alignas(16) float src[132], dst[128];
    for (int i = 0; i < 132; i++)
        src[i] = (float)i + 0.25f;
    uint64_t args[] = {P(src), P(dst), 0};
    expect_ok(ctx, run1(ctx, "cpa", src_cpasync, 1, 1, 1, 32, 1, 1, 3, args));
    for (int t = 0; t < 32; t++)
        for (int j = 0; j < 4; j++)
            assert_true(dst[t * 4 + j] == src[(31 - t) * 4 + j]);
    /* A source that is not 16-byte aligned faults on the device: here too. */
    uint64_t bad[] = {P(src), P(dst), 1};
    assert_int_equal(run1(ctx, "cpa", src_cpasync, 1, 1, 1, 32, 1, 1, 3, bad), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "not 16-byte aligned"));
    assert_true(tu_has_error(ctx, "block (0,0,0) thread (0,0,0)"));
    fg_context_free(ctx);
}

/* ---- many threads, several blocks, 3-D indices ---- */

static const char *src_big =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_big { unsigned *out; };\n"
    "FG_KERNEL(big, P_big, 512)\n"
    "{\n"
    "    FG_SHARED unsigned s[512];\n"
    "    unsigned lin = fg_tid_x() + fg_tid_y() * fg_bdim_x() + fg_tid_z() * fg_bdim_x() * fg_bdim_y();\n"
    "    unsigned n = fg_bdim_x() * fg_bdim_y() * fg_bdim_z();\n"
    "    unsigned blk = fg_bid_x() + fg_bid_y() * fg_gdim_x() + fg_bid_z() * fg_gdim_x() * fg_gdim_y();\n"
    "    s[lin] = lin * 3 + fg_lane() * 0 + (fg_warp() == lin / 32 ? 0 : 1000000);\n"
    "    fg_sync();\n"
    "    unsigned v = s[n - 1 - lin];\n"
    "    fg_sync();\n"
    "    s[lin] = v + 1;\n"
    "    fg_sync();\n"
    "    p.out[blk * n + lin] = s[(lin + 1) % n] + blk * 100000;\n"
    "}\n";

static void test_many_threads(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { BX = 16, BY = 8, BZ = 4, NT = BX * BY * BZ, NB = 3 * 2 * 2 };
    unsigned *out = malloc(NT * NB * sizeof *out);
    memset(out, 0xff, NT * NB * sizeof *out);
    uint64_t args[] = {P(out)};
    expect_ok(ctx, run1(ctx, "big", src_big, 3, 2, 2, BX, BY, BZ, 1, args));
    for (unsigned blk = 0; blk < NB; blk++)
        for (unsigned lin = 0; lin < NT; lin++) {
            unsigned j = (lin + 1) % NT;   /* s[j] = 3*(NT-1-j) + 1 */
            assert_int_equal(out[blk * NT + lin], 3 * (NT - 1 - j) + 1 + blk * 100000);
        }
    free(out);
    fg_context_free(ctx);
}

/* ---- guard zones catch out-of-bounds writes ---- */

static const char *src_fill =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_fill { float *y; fg_i64 n; fg_i64 slack; };\n"
    "FG_KERNEL(fill, P_fill, 64)\n"
    "{\n"
    "    fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();\n"
    "    if (i < p.n + p.slack) p.y[i] = 1.0f;\n"
    "}\n";

enum { GUARD = 64 };

static int guard_touched(const float *buf, int n)
{
    const unsigned char *g0 = (const unsigned char *)buf, *g1 = (const unsigned char *)(buf + GUARD + n);
    for (size_t i = 0; i < GUARD * sizeof(float); i++)
        if (g0[i] != 0xa5 || g1[i] != 0xa5)
            return 1;
    return 0;
}

static void test_guard_zones(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    enum { N = 1000 };
    float *buf = malloc((N + 2 * GUARD) * sizeof *buf);
    for (int slack = 0; slack < 2; slack++) {
        memset(buf, 0xa5, (N + 2 * GUARD) * sizeof *buf);
        uint64_t args[] = {P(buf + GUARD), N, (uint64_t)slack};
        expect_ok(ctx, run1(ctx, "fill", src_fill, (N + 63) / 64 + 1, 1, 1, 64, 1, 1, 3, args));
        for (int i = 0; i < N; i++)
            assert_true(buf[GUARD + i] == 1.0f);
        assert_int_equal(guard_touched(buf, N), slack);   /* off by one: caught */
    }
    free(buf);
    fg_context_free(ctx);
}

/* Shared arrays are poisoned (all bits set: NaN) before every block. */
static const char *src_poison =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_poison { float *y; };\n"
    "FG_KERNEL(poison, P_poison, 32)\n"
    "{\n"
    "    FG_SHARED float s[32];\n"
    "    unsigned t = fg_tid_x();\n"
    "    p.y[fg_bid_x() * 32 + t] = s[t];\n"
    "    if (t % 2) s[t] = 5.0f;\n"
    "}\n";

static void test_shared_poison(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float y[64];
    uint64_t args[] = {P(y)};
    expect_ok(ctx, run1(ctx, "poison", src_poison, 2, 1, 1, 32, 1, 1, 1, args));
    for (int i = 0; i < 64; i++)
        assert_true(isnan(y[i]));   /* block 1 does not see block 0's writes */
    fg_context_free(ctx);
}

/* ---- errors ---- */

static void test_compile_error(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    const char *src = "#include \"fusegen_prelude.cuh\"\n"
                      "struct P_bad { float *y; };\n"
                      "FG_KERNEL(bad_kernel, P_bad, 32)\n"
                      "{\n"
                      "    p.y[0] = undeclared_name;\n"
                      "}\n";
    fg_kernel k;
    kinit(&k, "bad_kernel", src, 1, 1, 1, 32, 1, 1, 1);
    assert_int_equal(fg_emu_build(ctx, &k), FG_ERR_COMPILE);
    assert_null(k.handle);
    assert_true(tu_has_error(ctx, "bad_kernel"));
    assert_true(tu_has_error(ctx, "undeclared_name"));
    const fg_error *e = fg_context_error(ctx, 0);
    assert_non_null(e);
    assert_int_equal(e->line, 5);
    /* Source without an entry point of the kernel's name. */
    const char *src2 = "#include \"fusegen_prelude.cuh\"\n"
                       "struct P_x { float *y; };\n"
                       "FG_KERNEL(other_name, P_x, 32) { p.y[0] = 1; }\n";
    kinit(&k, "missing_entry", src2, 1, 1, 1, 32, 1, 1, 1);
    assert_int_equal(fg_emu_build(ctx, &k), FG_ERR_COMPILE);
    assert_true(tu_has_error(ctx, "missing_entry"));
    assert_true(tu_has_error(ctx, "no entry point"));
    /* A compiler that does not exist (the environment is read when a context is made). */
    fg_context_free(ctx);
    setenv("FUSEGEN_HOST_CXX", "/nonexistent/c++", 1);
    ctx = tu_ctx_empty();
    unsetenv("FUSEGEN_HOST_CXX");
    kinit(&k, "vadd", src_vadd, 1, 1, 1, 32, 1, 1, 4);
    assert_int_equal(fg_emu_build(ctx, &k), FG_ERR_COMPILE);
    assert_true(tu_has_error(ctx, "/nonexistent/c++"));
    fg_context_free(ctx);
}

static void test_launch_errors(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    float a[4], b[4], c[4];
    uint64_t args[] = {P(a), P(b), P(c), 4};
    fg_kernel k;
    kinit(&k, "vadd", src_vadd, 1, 1, 1, 0, 1, 1, 4);
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "not built for emulation"));
    expect_ok(ctx, fg_emu_build(ctx, &k));
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "invalid block size 0x1x1"));
    k.block[0] = 2048;
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "invalid block size 2048x1x1"));
    k.block[0] = 256;   /* FG_KERNEL said 128 */
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "exceeds the kernel's bound of 128"));
    k.block[0] = 4;
    k.grid[1] = 0;
    assert_int_equal(fg_emu_launch(ctx, &k, args), FG_ERR_INTERNAL);
    assert_true(tu_has_error(ctx, "invalid grid size 1x0x1"));
    k.grid[1] = 1;
    expect_ok(ctx, fg_emu_launch(ctx, &k, args));   /* still usable */
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* A deep recursion overflows the 64 KiB thread stack: the guard page turns
 * that into a fault, checked in a child process. */
static void test_stack_guard(void **state)
{
    (void)state;
    char cmd[4200], *out = NULL;
    snprintf(cmd, sizeof cmd, "(FUSEGEN_TEST_STACK_CHILD=1 /proc/%d/exe 2>&1; echo rc=$?)", (int)getpid());
    tu_run(cmd, &out);
    /* Killed by SIGSEGV (status 128+11), or stopped by AddressSanitizer in
     * an ASan build; never "survived". */
    if (!out || (!strstr(out, "rc=139") && !strstr(out, "AddressSanitizer: stack-overflow")))
        fail_msg("child output: %s", out ? out : "");
    assert_null(strstr(out, "survived"));
    free(out);
}

static int stack_child(void)
{
    fg_context *ctx = NULL;
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&ctx, &o) != FG_OK)
        return 2;
    const char *src = "#include \"fusegen_prelude.cuh\"\n"
                      "struct P_deep { float *y; fg_i64 depth; };\n"
                      "static float deep(volatile float *buf, fg_i64 d) {\n"
                      "    volatile float local[256]; local[0] = (float)d; local[255] = buf[0];\n"
                      "    return d == 0 ? local[0] : deep(local, d - 1) + local[255];\n"
                      "}\n"
                      "FG_KERNEL(deep_k, P_deep, 32) { float z = 0; p.y[0] = deep(&z, p.depth); }\n";
    fg_kernel k;
    kinit(&k, "deep_k", src, 1, 1, 1, 32, 1, 1, 2);
    if (fg_emu_build(ctx, &k) != FG_OK)
        return 3;
    float y;
    uint64_t args[] = {P(&y), 1000};   /* about 1 MiB of stack */
    fg_emu_launch(ctx, &k, args);
    printf("survived\n");
    return 0;
}

/* ---- the .so cache ---- */

static void test_cache(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_cache *c = fg_ctx_cache(ctx);
    assert_non_null(c);
    char src[1024];
    /* the salt is code, not a comment: the key ignores comments (emit_name.c) */
    snprintf(src, sizeof src, "%s#define FG_TEST_SALT_%ld_%d 1\n", src_vadd, (long)time(NULL), rand());
    fg_cache_stats s0, s1, s2;
    fg_cache_get_stats(c, &s0);
    fg_kernel k1, k2;
    kinit(&k1, "vadd", src, 2, 1, 1, 64, 1, 1, 4);
    kinit(&k2, "vadd", src, 2, 1, 1, 64, 1, 1, 4);
    expect_ok(ctx, fg_emu_build(ctx, &k1));
    fg_cache_get_stats(c, &s1);
    assert_int_equal(s1.stores, s0.stores + 1);
    assert_int_equal(s1.mem_hits, s0.mem_hits);
    expect_ok(ctx, fg_emu_build(ctx, &k2));   /* same source: a hit */
    fg_cache_get_stats(c, &s2);
    assert_int_equal(s2.mem_hits, s1.mem_hits + 1);
    assert_int_equal(s2.stores, s1.stores);
    /* Both handles are independent copies that work. */
    float a[100], b[100], r1[100], r2[100];
    for (int i = 0; i < 100; i++)
        a[i] = (float)i, b[i] = 1.0f;
    uint64_t args1[] = {P(a), P(b), P(r1), 100}, args2[] = {P(a), P(b), P(r2), 100};
    expect_ok(ctx, fg_emu_launch(ctx, &k1, args1));
    expect_ok(ctx, fg_emu_launch(ctx, &k2, args2));
    assert_memory_equal(r1, r2, sizeof r1);
    assert_true(r1[99] == 100.0f);
    fg_emu_release(&k1);
    fg_emu_release(&k2);
    fg_context_free(ctx);
    /* A fresh context finds it on disk. */
    ctx = tu_ctx_empty();
    c = fg_ctx_cache(ctx);
    fg_cache_get_stats(c, &s0);
    kinit(&k1, "vadd", src, 2, 1, 1, 64, 1, 1, 4);
    expect_ok(ctx, fg_emu_build(ctx, &k1));
    fg_cache_get_stats(c, &s1);
    assert_int_equal(s1.disk_hits, s0.disk_hits + 1);
    expect_ok(ctx, fg_emu_launch(ctx, &k1, args1));
    assert_true(r1[50] == 51.0f);
    fg_emu_release(&k1);
    fg_context_free(ctx);
}

int main(void)
{
    if (getenv("FUSEGEN_TEST_STACK_CHILD"))
        return stack_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_block_reduce_barrier),
        cmocka_unit_test(test_barrier_exited_threads),
        cmocka_unit_test(test_shuffles),
        cmocka_unit_test(test_shuffle_divergence),
        cmocka_unit_test(test_mma_f16),
        cmocka_unit_test(test_mma_bf16),
        cmocka_unit_test(test_launch_bound),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_cp_async),
        cmocka_unit_test(test_many_threads),
        cmocka_unit_test(test_guard_zones),
        cmocka_unit_test(test_shared_poison),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_launch_errors),
        cmocka_unit_test(test_stack_guard),
        cmocka_unit_test(test_cache),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
