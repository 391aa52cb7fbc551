/*
 * test_hopper_emu.c -- the emulated Hopper primitives (mbarrier, TMA,
 * wgmma, the proxy fence) checked with hand-written kernels against host
 * computations written here from the PTX ISA's definitions, never with the
 * emulator's own functions:
 * - TMA 2-D box loads with each swizzle mode, inside and across the tensor's
 *   bounds, byte for byte against the swizzle formula (chunk bits 4..6 XOR
 *   row bits 7..9, masked to the span) and zero fill;
 * - TMA 4-D box loads with element strides (cuTensorMapEncodeTiled's
 *   elementStrides: ceil(box / stride) elements of each axis land, packed,
 *   from the start coordinate in steps of the stride), negative and
 *   past-the-end coordinates on every axis, against the definition; a map
 *   of the wrong rank is refused;
 * - wgmma m64nNk16 (N 64, 128, 256; B K-major and N-major; f16 and bf16;
 *   with and without accumulating into initial values) on TMA-loaded,
 *   128B-swizzled operands against a double-precision matmul, through the
 *   register fragment of D as the ISA draws it; m64nNk8 on tf32 (N 64 and
 *   256, K-major fp32 operands whose low 13 mantissa bits are dropped);
 * - a 3-stage producer / consumer ring (full and empty mbarriers, 32B
 *   swizzle, K = 16 x 12, wait_group 1; one and two consumer warpgroups),
 *   and generic stores published to wgmma by fence.proxy.async (no-swizzle
 *   layout, B 64B-swizzled);
 * - mutations that must fail and do: a tile read without the mbarrier wait
 *   (0xff), accumulators read before fg_wgmma_wait (NaN), more expected
 *   transaction bytes than delivered (deadlock naming the barrier), an
 *   uninitialized mbarrier, the ring without its empty-barrier wait, a
 *   missing proxy fence (NaN), a missing wgmma fence, warpgroup divergence,
 *   a partial warpgroup, a misaligned TMA destination or descriptor, and
 *   tensor maps the encoder must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "emu_tmap.h"
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

/* Builds a kernel of one block of `threads` threads (fails the test if it
 * does not build). */
static void kbuild(fg_context *ctx, fg_kernel *k, const char *name, const char *src, unsigned threads, int nparams)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->source = (char *)src;
    k->grid[0] = k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    k->nparams = nparams;
    fg_status st = fg_emu_build(ctx, k);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
}

static void expect_ok(fg_context *ctx, fg_status st)
{
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
}

/* The launch failed with an error containing each needle. */
static void expect_error(fg_context *ctx, fg_status st, const char *n1, const char *n2)
{
    assert_int_equal(st, FG_ERR_INTERNAL);
    if (!tu_has_error(ctx, n1) || (n2 && !tu_has_error(ctx, n2))) {
        tu_dump_errors(ctx);
        fail_msg("expected an error with '%s'%s%s", n1, n2 ? " and " : "", n2 ? n2 : "");
    }
}

/* Puts a tensor map into parameter slots (8 of them per 64 bytes). */
static void put_map(uint64_t *slots, const fg_tmap_desc *d)
{
    assert_int_equal(fg_emu_tmap_encode(d, slots), 0);
}

static fg_tmap_desc map2d(const void *base, unsigned eb, uint64_t d0, uint64_t d1, uint64_t stride, unsigned b0,
                          unsigned b1, fg_tmap_swizzle sw)
{
    fg_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.base = P(base);
    d.elem_bytes = eb;
    d.rank = 2;
    d.dim[0] = d0;
    d.dim[1] = d1;
    d.stride[0] = stride;
    d.box[0] = b0;
    d.box[1] = b1;
    d.estride[0] = d.estride[1] = 1;
    d.swizzle = sw;
    return d;
}

/* A 4-D map: dims d0..d3 (d0 contiguous), strides s1 (axis 1) and s2 (axis
 * 2) in bytes, axis 3 packed after axis 2; box b0 x b1 x b2 x b3; element
 * steps e1, e2, e3 (axis 0: 1); no swizzle unless set after. */
static fg_tmap_desc map4d(const void *base, unsigned eb, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3,
                          uint64_t s1, uint64_t s2, unsigned b0, unsigned b1, unsigned b2, unsigned b3, unsigned e1,
                          unsigned e2, unsigned e3)
{
    fg_tmap_desc d;
    memset(&d, 0, sizeof d);
    d.base = P(base);
    d.elem_bytes = eb;
    d.rank = 4;
    const uint64_t dim[4] = {d0, d1, d2, d3};
    const unsigned box[4] = {b0, b1, b2, b3}, es[4] = {1, e1, e2, e3};
    for (int i = 0; i < 4; i++) {
        d.dim[i] = dim[i];
        d.box[i] = box[i];
        d.estride[i] = es[i];
    }
    d.stride[0] = s1;
    d.stride[1] = s2;
    d.stride[2] = s2 * d2;
    return d;
}

static fg_tmap_desc with_rank(fg_tmap_desc d, unsigned rank)
{
    d.rank = rank;
    return d;
}

static fg_tmap_desc with_estride(fg_tmap_desc d, int axis, unsigned e)
{
    d.estride[axis] = e;
    return d;
}

/* ---- host side, from the PTX ISA ---- */

/* Tensor swizzling modes: within each 8 * span bytes, the 16-byte chunk
 * (offset bits 4..6) is XORed with the 128-byte row (bits 7..9), keeping
 * span / 16 chunks. */
static size_t isa_swizzle(size_t off, unsigned span)
{
    if (!span)
        return off;
    size_t chunks = span / 16;
    size_t chunk = (off >> 4) & 7, row = (off >> 7) & 7;
    return (off & ~(size_t)0x70) | (((chunk ^ row) & (chunks - 1)) | (chunk & ~(chunks - 1))) << 4;
}

/* wgmma D fragment (m64nNk16, f32): thread t of the warpgroup, register i. */
static void isa_frag(int t, int i, int *row, int *col)
{
    int warp = t / 32, lane = t % 32, group = lane / 4, tig = lane % 4;
    *row = 16 * warp + group + ((i % 4) >= 2 ? 8 : 0);
    *col = 8 * (i / 4) + 2 * tig + (i % 2);
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* A random fp16 value of magnitude 2^-4 .. 2^1 and its value. */
static uint16_t rnd_half(double *v)
{
    unsigned sign = rnd() & 1, e = 11 + rnd() % 5, m = rnd() % 1024;
    *v = (sign ? -1.0 : 1.0) * ldexp(1.0 + m / 1024.0, (int)e - 15);
    return (uint16_t)(sign << 15 | e << 10 | m);
}

/* A random bf16 value of magnitude 2^-4 .. 2^1 and its value. */
static uint16_t rnd_bf16(double *v)
{
    unsigned sign = rnd() & 1, e = 123 + rnd() % 5, m = rnd() % 128;
    *v = (sign ? -1.0 : 1.0) * ldexp(1.0 + m / 128.0, (int)e - 127);
    return (uint16_t)(sign << 15 | e << 7 | m);
}

/* ---- tensor map encoding ---- */

static void test_tmap_encode(void **state)
{
    (void)state;
    static _Alignas(16) unsigned char buf[4096];
    unsigned char out[128];
    fg_tmap_desc ok = map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_128B);
    assert_null(fg_emu_tmap_invalid(&ok));
    assert_int_equal(fg_emu_tmap_encode(&ok, out), 0);
    fg_tmap_desc back;
    assert_int_equal(fg_emu_tmap_decode(out, &back), 0);
    assert_int_equal(back.base, ok.base);
    assert_int_equal(back.box[1], 8);
    out[17] ^= 1; /* a changed byte is refused */
    assert_int_equal(fg_emu_tmap_decode(out, &back), -1);
    assert_int_equal(fg_emu_tmap_encode(NULL, out), -1);
    assert_int_equal(fg_emu_tmap_encode(&ok, NULL), -1);
    struct {
        fg_tmap_desc d;
        const char *why;
    } bad[] = {
        {map2d(buf, 3, 64, 16, 192, 16, 8, FG_TMAP_SWIZZLE_NONE), "elem_bytes"},
        {map2d(buf + 8, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), "base address"},
        {map2d(NULL, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), "base address"},
        {map2d(buf, 2, 0, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), "dimension"},
        {map2d(buf, 2, 64, 16, 120, 8, 8, FG_TMAP_SWIZZLE_NONE), "multiple of 16"},
        {map2d(buf, 2, 64, 16, 112, 8, 8, FG_TMAP_SWIZZLE_NONE), "shorter than a row"},
        {map2d(buf, 2, 64, 16, 128, 0, 8, FG_TMAP_SWIZZLE_NONE), "box extent"},
        {map2d(buf, 2, 64, 16, 128, 8, 257, FG_TMAP_SWIZZLE_NONE), "box extent"},
        {map2d(buf, 2, 64, 16, 128, 12, 8, FG_TMAP_SWIZZLE_NONE), "inner extent"},
        {map2d(buf, 2, 64, 16, 128, 32, 8, FG_TMAP_SWIZZLE_128B), "swizzle span"},
        {map2d(buf, 4, 64, 16, 256, 16, 8, FG_TMAP_SWIZZLE_32B), "swizzle span"},
        {map2d(buf, 2, 64, 16, 128, 64, 8, (fg_tmap_swizzle)48), "NONE, 32B"},
        {with_rank(map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), 0), "rank"},
        {with_rank(map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), 6), "rank"},
        {with_estride(map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), 1, 9), "element stride"},
        {with_estride(map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), 1, 0), "element stride"},
        {with_estride(map2d(buf, 2, 64, 16, 128, 64, 8, FG_TMAP_SWIZZLE_NONE), 0, 2), "1 along axis 0"},
        {map4d(buf, 2, 64, 8, 8, 2, 128, 512, 64, 8, 8, 1, 1, 1, 1), "shorter than the axes inside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(out, 0x5a, sizeof out);
        assert_int_equal(fg_emu_tmap_encode(&bad[i].d, out), -1);
        assert_int_equal(out[0], 0x5a);   /* untouched */
        const char *why = fg_emu_tmap_invalid(&bad[i].d);
        if (!why || !strstr(why, bad[i].why))
            fail_msg("case %zu: '%s', want '%s'", i, why ? why : "(valid)", bad[i].why);
    }
}

/* ---- TMA: one box into 1024-byte aligned shared memory ----
 * flags: 1 read the tile without waiting on the barrier; 2 expect 16 more
 * transaction bytes than the box has; 4 no fg_mbar_init.  The box goes to
 * tile + dst.  sw[i] = fg_emu_swizzle(16 i, span). */
static const char *src_tma =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_tma { unsigned char *out; fg_u64 *sw; fg_i64 c0, c1, bytes, flags, span, dst; fg_tmap map; };\n"
    "FG_KERNEL(tma, P_tma, 128)\n"
    "{\n"
    "    alignas(1024) FG_SHARED unsigned char tile[16384];\n"
    "    FG_SHARED fg_mbar bar;\n"
    "    const unsigned t = fg_linear_tid();\n"
    "    if (t == 0 && !(p.flags & 4)) {\n"
    "        fg_mbar_init(&bar, 1);\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    fg_sync();\n"
    "    if (t == 0) {\n"
    "        fg_mbar_arrive_expect_tx(&bar, (unsigned)p.bytes + ((p.flags & 2) ? 16u : 0u));\n"
    "        fg_tma_load_2d(tile + p.dst, &p.map, (int)p.c0, (int)p.c1, &bar);\n"
    "    }\n"
    "    if (!(p.flags & 1))\n"
    "        fg_mbar_wait(&bar, 0);\n"
    "    for (fg_i64 i = t; i < p.bytes; i += fg_bdim_x())\n"
    "        p.out[i] = tile[i];\n"
    "    if (t < 64)\n"
    "        p.sw[t] = fg_emu_swizzle(16 * (fg_u64)t, (unsigned)p.span);\n"
    "}\n";

enum { TMA_SLOTS = 8 + 16 };

static void test_tma_box(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "tma", src_tma, 64, TMA_SLOTS);
    /* a 40 x 300 byte-pattern tensor (row stride 320 bytes), read as 2- or 4-byte elements */
    enum { ROWS = 40, STRIDE = 320 };
    static _Alignas(16) unsigned char g[ROWS * STRIDE];
    for (size_t i = 0; i < sizeof g; i++)
        g[i] = (unsigned char)(rnd() | 1);   /* never 0: zero fill is visible */
    static unsigned char out[16384];
    uint64_t sw[64];
    struct {
        unsigned eb, span, b0, b1;
        int c0, c1;
        uint64_t d0;
    } cases[] = {
        {2, 128, 64, 16, 8, 3, 150},     /* interior */
        {2, 128, 64, 20, 100, 30, 150},  /* past the last column and row */
        {2, 128, 64, 8, -24, -5, 150},   /* before the first column and row */
        {2, 64, 32, 24, 40, 7, 150},
        {4, 64, 16, 12, -3, 33, 75},
        {2, 32, 16, 40, 141, -1, 150},
        {4, 32, 8, 16, 70, 0, 75},
        {2, 0, 24, 10, -8, 35, 150},     /* no swizzle, 48-byte rows */
        {4, 0, 4, 7, 73, 2, 75},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        unsigned eb = cases[ci].eb, span = cases[ci].span, b0 = cases[ci].b0, b1 = cases[ci].b1;
        int c0 = cases[ci].c0, c1 = cases[ci].c1;
        uint64_t d0 = cases[ci].d0;
        size_t inner = (size_t)b0 * eb, bytes = inner * b1;
        uint64_t args[TMA_SLOTS] = {P(out), P(sw), (uint64_t)(int64_t)c0, (uint64_t)(int64_t)c1, bytes, 0, span};
        fg_tmap_desc d = map2d(g, eb, d0, ROWS, STRIDE, b0, b1, (fg_tmap_swizzle)span);
        put_map(args + 8, &d);
        memset(out, 0, sizeof out);
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        for (unsigned r = 0; r < b1; r++)
            for (unsigned e = 0; e < b0; e++) {
                long x = (long)c0 + e, y = (long)c1 + r;
                int inside = x >= 0 && x < (long)d0 && y >= 0 && y < ROWS;
                for (unsigned b = 0; b < eb; b++) {
                    size_t o = r * inner + e * eb + b;
                    unsigned char want = inside ? g[y * STRIDE + x * eb + b] : 0;
                    unsigned char got = out[isa_swizzle(o, span)];
                    if (got != want)
                        fail_msg("case %zu: box (%u, %u) byte %u: %02x, want %02x", ci, r, e, b, got, want);
                }
            }
        for (int i = 0; i < 64; i++)
            assert_int_equal(sw[i], isa_swizzle((size_t)16 * i, span));
    }
    /* the tile read without the wait: the copy has not landed (0xff poison) */
    {
        fg_tmap_desc d = map2d(g, 2, 150, ROWS, STRIDE, 64, 8, FG_TMAP_SWIZZLE_128B);
        uint64_t args[TMA_SLOTS] = {P(out), P(sw), 0, 0, 1024, 1, 128};
        put_map(args + 8, &d);
        memset(out, 0, sizeof out);
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        for (int i = 0; i < 1024; i++)
            assert_int_equal(out[i], 0xff);
        /* more transaction bytes expected than the box delivers: a deadlock that names the barrier */
        args[5] = 2;
        expect_error(ctx, fg_emu_launch(ctx, &k, args), "deadlock",
                     "16 transaction byte(s) expected but not delivered");
        assert_true(tu_has_error(ctx, "the mbarrier at shared offset 0x"));
        assert_true(tu_has_error(ctx, "block (0,0,0) thread ("));   /* a waiting thread is named */
        /* an mbarrier used without fg_mbar_init */
        args[5] = 4;
        expect_error(ctx, fg_emu_launch(ctx, &k, args), "the mbarrier at shared offset 0x",
                     "is not initialized (no fg_mbar_init in this block");
        /* a 128B-swizzled box must start its 1024-byte pattern at the destination */
        args[5] = 0;
        args[7] = 128;
        expect_error(ctx, fg_emu_launch(ctx, &k, args),
                     "fg_tma_load_2d: the shared destination (offset 0x", "80) is not 1024-byte aligned");
        /* a shifted map is no map */
        args[7] = 0;
        args[9] ^= 16;
        expect_error(ctx, fg_emu_launch(ctx, &k, args), "not written by fg_emu_tmap_encode", NULL);
    }
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- TMA: a 4-D box with element strides ----
 * The box at (c0, c1, c2, c3) of a map over an [d3][d2][d1][d0] tensor of
 * 2-byte elements lands in tile (128B swizzle when span is 128); flags 1:
 * load it with fg_tma_load_2d instead (a map of the wrong rank). */
static const char *src_tma4 =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_tma4 { unsigned char *out; fg_i64 c0, c1, c2, c3, bytes, flags, pad; fg_tmap map; };\n"
    "FG_KERNEL(tma4, P_tma4, 128)\n"
    "{\n"
    "    alignas(1024) FG_SHARED unsigned char tile[32768];\n"
    "    FG_SHARED fg_mbar bar;\n"
    "    const unsigned t = fg_linear_tid();\n"
    "    if (t == 0) {\n"
    "        fg_mbar_init(&bar, 1);\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    fg_sync();\n"
    "    if (t == 0) {\n"
    "        fg_mbar_arrive_expect_tx(&bar, (unsigned)p.bytes);\n"
    "        if (p.flags & 1)\n"
    "            fg_tma_load_2d(tile, &p.map, (int)p.c0, (int)p.c1, &bar);\n"
    "        else\n"
    "            fg_tma_load_4d(tile, &p.map, (int)p.c0, (int)p.c1, (int)p.c2, (int)p.c3, &bar);\n"
    "    }\n"
    "    fg_mbar_wait(&bar, 0);\n"
    "    for (fg_i64 i = t; i < p.bytes; i += fg_bdim_x())\n"
    "        p.out[i] = tile[i];\n"
    "}\n";

enum { TMA4_SLOTS = 8 + 16 };

static void test_tma_box_4d(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "tma4", src_tma4, 128, TMA4_SLOTS);
    /* an NHWC-like tensor: 3 images x 11 rows x 13 columns x 40 channels of 2 bytes, channel rows padded to 96 bytes */
    enum { D0 = 40, D1 = 13, D2 = 11, D3 = 3, S1 = 96, S2 = S1 * D1 };
    static _Alignas(16) unsigned char g[S2 * D2 * D3];
    for (size_t i = 0; i < sizeof g; i++)
        g[i] = (unsigned char)(rnd() | 1);   /* never 0: zero fill is visible */
    static unsigned char out[32768];
    struct {
        unsigned b0, b1, b2, b3, e1, e2, e3, span;
        int c0, c1, c2, c3;
    } cases[] = {
        {64, 8, 4, 2, 2, 2, 1, 128, 0, -1, -1, 0},      /* a stride-2 conv's tile: padding above and left */
        {64, 16, 8, 2, 2, 2, 1, 128, 8, 5, 3, 1},       /* past the last column, row and image */
        {32, 12, 6, 3, 3, 2, 1, 0, -8, -2, 7, -1},      /* steps 3 and 2, before the first channel and image */
        {16, 7, 5, 4, 1, 1, 1, 0, 24, 9, -3, 0},        /* unit steps, partial steps past the ends */
        {64, 5, 9, 1, 4, 3, 1, 128, 0, 2, 1, 2},        /* a box not a multiple of its step: ceil(5/4), ceil(9/3) */
        {64, 2, 2, 32, 2, 2, 1, 128, 0, 0, 0, -16},     /* 32 images, most outside */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        __typeof__(cases[0]) c = cases[ci];
        unsigned n1 = (c.b1 + c.e1 - 1) / c.e1, n2 = (c.b2 + c.e2 - 1) / c.e2, n3 = (c.b3 + c.e3 - 1) / c.e3;
        size_t inner = (size_t)c.b0 * 2, bytes = inner * n1 * n2 * n3;
        assert_true(bytes <= sizeof out);
        uint64_t args[TMA4_SLOTS] = {P(out), (uint64_t)(int64_t)c.c0, (uint64_t)(int64_t)c.c1,
                                     (uint64_t)(int64_t)c.c2, (uint64_t)(int64_t)c.c3, bytes, 0};
        fg_tmap_desc d = map4d(g, 2, D0, D1, D2, D3, S1, S2, c.b0, c.b1, c.b2, c.b3, c.e1, c.e2, c.e3);
        d.swizzle = (fg_tmap_swizzle)c.span;
        put_map(args + 8, &d);
        memset(out, 0xee, sizeof out);
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        size_t row = 0;
        for (unsigned i3 = 0; i3 < n3; i3++)
            for (unsigned i2 = 0; i2 < n2; i2++)
                for (unsigned i1 = 0; i1 < n1; i1++, row++) {
                    long y1 = c.c1 + (long)i1 * c.e1, y2 = c.c2 + (long)i2 * c.e2, y3 = c.c3 + (long)i3 * c.e3;
                    for (unsigned e = 0; e < c.b0; e++) {
                        long x = (long)c.c0 + e;
                        int inside = x >= 0 && x < D0 && y1 >= 0 && y1 < D1 && y2 >= 0 && y2 < D2 && y3 >= 0 &&
                                     y3 < D3;
                        for (unsigned b = 0; b < 2; b++) {
                            size_t o = row * inner + e * 2 + b;
                            unsigned char want = inside ? g[y3 * S2 * D2 + y2 * S2 + y1 * S1 + x * 2 + b] : 0;
                            unsigned char got = out[isa_swizzle(o, c.span)];
                            if (got != want)
                                fail_msg("case %zu: box (%u, %u, %u, %u) byte %u: %02x, want %02x", ci, i3, i2, i1, e,
                                         b, got, want);
                        }
                    }
                }
    }
    /* a 4-D map read by a 2-D copy */
    fg_tmap_desc d = map4d(g, 2, D0, D1, D2, D3, S1, S2, 64, 8, 4, 2, 2, 2, 1);
    uint64_t args[TMA4_SLOTS] = {P(out), 0, 0, 0, 0, 128 * 4 * 2 * 2, 1};
    put_map(args + 8, &d);
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "fg_tma_load_2d: the tensor map has rank 4", NULL);
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- wgmma GEMM: D[64 x BN] = C + A[64 x K] * B, operands by TMA, 128B swizzle ----
 * (A and B stages in the dynamic shared memory, FG_SHARED_DYN.)
 * A [64][K]; B [BN][K] (trans_b 0, K-major) or [K][BN] (trans_b 1, N-major).
 * Per 64-wide k tile: A box 64 x 64, B box 64 x BN or BN / 64 boxes of 64 x
 * 64; four k16 steps (descriptor start + 32 bytes K-major, + 16 rows
 * N-major).  flags: 1 store the accumulators before the last fg_wgmma_wait;
 * 2 thread 5 uses another B descriptor; 4 no fg_wgmma_fence; 8 A starts on
 * the second 128-byte row of its swizzle pattern. */
static const char *src_gemm =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_gemm { float *out; const float *c; fg_i64 k, bn, trans_b, bf16, acc, flags; fg_tmap ma, mb; };\n"
    "FG_DEVICE void frag(unsigned t, int i, int *row, int *col)\n"
    "{\n"
    "    const unsigned w = t / 32, l = t % 32;\n"
    "    *row = (int)(16 * w + l / 4 + 8 * ((i / 2) % 2));\n"
    "    *col = (int)(8 * (i / 4) + 2 * (l % 4) + i % 2);\n"
    "}\n"
    "template <int BN, int TB, int BF>\n"
    "FG_DEVICE void gemm(const P_gemm &p, unsigned char *sa, unsigned char *sb, fg_mbar *bar)\n"
    "{\n"
    "    const unsigned t = fg_linear_tid();\n"
    "    float d[BN / 2];\n"
    "    for (int i = 0; i < BN / 2; i++) {\n"
    "        int row, col;\n"
    "        frag(t, i, &row, &col);\n"
    "        d[i] = p.acc ? p.c[row * BN + col] : 1e30f;\n"
    "    }\n"
    "    if (!(p.flags & 4))\n"
    "        fg_wgmma_fence();\n"
    "    const int ktiles = (int)((p.k + 63) / 64);\n"
    "    for (int kt = 0; kt < ktiles; kt++) {\n"
    "        if (t == 0) {\n"
    "            fg_mbar_arrive_expect_tx(bar, 64 * 128 + BN * 128);\n"
    "            fg_tma_load_2d(sa, &p.ma, kt * 64, 0, bar);\n"
    "            if (TB)\n"
    "                for (int nb = 0; nb < BN / 64; nb++)\n"
    "                    fg_tma_load_2d(sb + nb * 8192, &p.mb, nb * 64, kt * 64, bar);\n"
    "            else\n"
    "                fg_tma_load_2d(sb, &p.mb, kt * 64, 0, bar);\n"
    "        }\n"
    "        fg_mbar_wait(bar, (unsigned)kt & 1);\n"
    "        if (!(p.flags & 4))\n"
    "            fg_wgmma_fence();\n"
    "        for (int ks = 0; ks < 4; ks++) {\n"
    "            fg_u64 da = fg_wgmma_desc(sa + ks * 32 + ((p.flags & 8) ? 128 : 0), 128, 16, 1024);\n"
    "            fg_u64 db = TB ? fg_wgmma_desc(sb + ks * 2048, 128, 8192, 1024)\n"
    "                           : fg_wgmma_desc(sb + ks * 32, 128, 16, 1024);\n"
    "            if ((p.flags & 2) && t == 5)\n"
    "                db = fg_wgmma_desc(sb, 128, 16, 1024);\n"
    "            const int acc = kt > 0 || ks > 0 || p.acc;\n"
    "            if (BF)\n"
    "                fg_wgmma_bf16<BN, TB>(d, da, db, acc);\n"
    "            else\n"
    "                fg_wgmma_f16<BN, TB>(d, da, db, acc);\n"
    "        }\n"
    "        fg_wgmma_commit();\n"
    "        if (kt == ktiles - 1 && (p.flags & 1))\n"
    "            break;\n"
    "        fg_wgmma_wait<0>();\n"
    "        fg_sync();\n"
    "    }\n"
    "    for (int i = 0; i < BN / 2; i++) {\n"
    "        int row, col;\n"
    "        frag(t, i, &row, &col);\n"
    "        p.out[row * BN + col] = d[i];\n"
    "    }\n"
    "    fg_wgmma_wait<0>();\n"
    "}\n"
    "template <int BN> FG_DEVICE void gemm_bn(const P_gemm &p, unsigned char *sa, unsigned char *sb, fg_mbar *bar)\n"
    "{\n"
    "    if (p.trans_b)\n"
    "        p.bf16 ? gemm<BN, 1, 1>(p, sa, sb, bar) : gemm<BN, 1, 0>(p, sa, sb, bar);\n"
    "    else\n"
    "        p.bf16 ? gemm<BN, 0, 1>(p, sa, sb, bar) : gemm<BN, 0, 0>(p, sa, sb, bar);\n"
    "}\n"
    "FG_KERNEL(wg_gemm, P_gemm, 128)\n"
    "{\n"
    "    FG_SHARED_DYN(smem, 64 * 128 + 256 * 128);\n"
    "    unsigned char *sa = smem, *sb = smem + 64 * 128;\n"
    "    FG_SHARED fg_mbar bar;\n"
    "    if (fg_linear_tid() == 0) {\n"
    "        fg_mbar_init(&bar, 1);\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    fg_sync();\n"
    "    if (p.bn == 64)\n"
    "        gemm_bn<64>(p, sa, sb, &bar);\n"
    "    else if (p.bn == 128)\n"
    "        gemm_bn<128>(p, sa, sb, &bar);\n"
    "    else\n"
    "        gemm_bn<256>(p, sa, sb, &bar);\n"
    "}\n";

enum { GEMM_SLOTS = 8 + 16 + 16 };

typedef struct gemm_data {
    int m, k, bn, trans_b, bf16;
    uint16_t *a, *b;        /* device layouts */
    double *av, *bv;        /* values: av[m][k], bv[k][n] */
    float *c, *out;
} gemm_data;

static void gemm_make(gemm_data *g, int m, int k, int bn, int trans_b, int bf16)
{
    memset(g, 0, sizeof *g);
    g->m = m, g->k = k, g->bn = bn, g->trans_b = trans_b, g->bf16 = bf16;
    g->a = aligned_alloc(16, (size_t)m * k * 2);
    g->b = aligned_alloc(16, (size_t)bn * k * 2);
    g->av = malloc(sizeof(double) * m * k);
    g->bv = malloc(sizeof(double) * k * bn);
    g->c = malloc(sizeof(float) * m * bn);
    g->out = malloc(sizeof(float) * m * bn);
    for (int i = 0; i < m * k; i++)
        g->a[i] = bf16 ? rnd_bf16(&g->av[i]) : rnd_half(&g->av[i]);
    for (int kk = 0; kk < k; kk++)
        for (int n = 0; n < bn; n++) {
            double v;
            uint16_t h = bf16 ? rnd_bf16(&v) : rnd_half(&v);
            g->bv[kk * bn + n] = v;
            g->b[trans_b ? kk * bn + n : n * k + kk] = h;
        }
    for (int i = 0; i < m * bn; i++)
        g->c[i] = (float)((int)(rnd() % 2001) - 1000) / 256.0f;
}

static void gemm_free(gemm_data *g)
{
    free(g->a), free(g->b), free(g->av), free(g->bv), free(g->c), free(g->out);
}

static void gemm_args(const gemm_data *g, uint64_t *args, int acc, int flags)
{
    memset(args, 0, GEMM_SLOTS * sizeof *args);
    args[0] = P(g->out), args[1] = P(g->c), args[2] = (uint64_t)g->k, args[3] = (uint64_t)g->bn;
    args[4] = (uint64_t)g->trans_b, args[5] = (uint64_t)g->bf16, args[6] = (uint64_t)acc, args[7] = (uint64_t)flags;
    fg_tmap_desc ma = map2d(g->a, 2, (uint64_t)g->k, 64, (uint64_t)g->k * 2, 64, 64, FG_TMAP_SWIZZLE_128B);
    fg_tmap_desc mb = g->trans_b ? map2d(g->b, 2, (uint64_t)g->bn, (uint64_t)g->k, (uint64_t)g->bn * 2, 64, 64,
                                         FG_TMAP_SWIZZLE_128B)
                                 : map2d(g->b, 2, (uint64_t)g->k, (uint64_t)g->bn, (uint64_t)g->k * 2, 64,
                                         (unsigned)g->bn, FG_TMAP_SWIZZLE_128B);
    put_map(args + 8, &ma);
    put_map(args + 24, &mb);
}

/* out == C (when acc) + A * B within fp32 summation error; returns the
 * largest error relative to the bound (<= 1 passes). */
static double gemm_check(const gemm_data *g, const float *out, int acc)
{
    double worst = 0;
    for (int m = 0; m < g->m; m++)
        for (int n = 0; n < g->bn; n++) {
            double want = acc ? g->c[m * g->bn + n] : 0.0, mag = fabs(want);
            for (int kk = 0; kk < g->k; kk++) {
                double p = g->av[m * g->k + kk] * g->bv[kk * g->bn + n];
                want += p;
                mag += fabs(p);
            }
            double got = out[m * g->bn + n];
            double bound = 4.0 * (g->k + 2) * ldexp(1.0, -24) * mag + 1e-30;
            double r = isnan(got) ? INFINITY : fabs(got - want) / bound;
            if (r > worst)
                worst = r;
        }
    return worst;
}

static void test_wgmma_gemm(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "wg_gemm", src_gemm, 128, GEMM_SLOTS);
    struct {
        int k, bn, trans_b, bf16, acc;
    } cases[] = {
        {128, 64, 0, 0, 0}, {120, 64, 1, 1, 1}, {64, 128, 0, 1, 1},
        {120, 128, 1, 0, 0}, {136, 256, 0, 0, 1}, {128, 256, 1, 1, 0},
    };
    uint64_t args[GEMM_SLOTS];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        gemm_data g;
        gemm_make(&g, 64, cases[ci].k, cases[ci].bn, cases[ci].trans_b, cases[ci].bf16);
        gemm_args(&g, args, cases[ci].acc, 0);
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        double r = gemm_check(&g, g.out, cases[ci].acc);
        if (!(r <= 1.0))
            fail_msg("case %zu (K %d, N %d, trans_b %d, %s, acc %d): error %.3g of the fp32 bound", ci, g.k, g.bn,
                     g.trans_b, g.bf16 ? "bf16" : "f16", cases[ci].acc, r);
        gemm_free(&g);
    }
    /* mutations */
    gemm_data g;
    gemm_make(&g, 64, 128, 64, 0, 0);
    gemm_args(&g, args, 1, 1);   /* accumulators read before fg_wgmma_wait: NaN */
    expect_ok(ctx, fg_emu_launch(ctx, &k, args));
    for (int i = 0; i < 64 * 64; i++)
        assert_true(isnan(g.out[i]));
    gemm_args(&g, args, 1, 2);
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "warpgroup divergence: thread 5 of warpgroup 0", NULL);
    gemm_args(&g, args, 1, 4);
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "no fg_wgmma_fence() before this thread's first wgmma", NULL);
    gemm_args(&g, args, 1, 8);
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "the A descriptor: the start address is not aligned to the swizzle",
                 NULL);
    gemm_free(&g);
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- wgmma on tf32: D[64 x BN] = A[64 x K] * B[BN x K]^T, fp32 operands ----
 * Both K-major (tf32 has no transpose), 128B swizzle: a k tile is 32 fp32
 * (128 bytes) per row, A box 32 x 64, B box 32 x BN, four k8 steps 32 bytes
 * apart.  The ISA reads a .tf32 operand's 32 bits and uses its 19 high ones:
 * the host reference truncates each operand to tf32 (sign, 8 exponent and
 * 10 mantissa bits), computes in double, and bounds the fp32 summation. */
static const char *src_tf32 =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_tf32 { float *out; fg_i64 k, bn; fg_tmap ma, mb; };\n"
    "template <int BN>\n"
    "FG_DEVICE void gemm_tf32(const P_tf32 &p, unsigned char *sa, unsigned char *sb, fg_mbar *bar)\n"
    "{\n"
    "    const unsigned t = fg_linear_tid();\n"
    "    float d[BN / 2];\n"
    "    fg_wgmma_fence();\n"
    "    const int ktiles = (int)((p.k + 31) / 32);\n"
    "    for (int kt = 0; kt < ktiles; kt++) {\n"
    "        if (t == 0) {\n"
    "            fg_mbar_arrive_expect_tx(bar, 64 * 128 + BN * 128);\n"
    "            fg_tma_load_2d(sa, &p.ma, kt * 32, 0, bar);\n"
    "            fg_tma_load_2d(sb, &p.mb, kt * 32, 0, bar);\n"
    "        }\n"
    "        fg_mbar_wait(bar, (unsigned)kt & 1);\n"
    "        fg_wgmma_fence();\n"
    "        for (int ks = 0; ks < 4; ks++)\n"
    "            fg_wgmma_tf32<BN, 0>(d, fg_wgmma_desc(sa + ks * 32, 128, 16, 1024),\n"
    "                                 fg_wgmma_desc(sb + ks * 32, 128, 16, 1024), kt > 0 || ks > 0);\n"
    "        fg_wgmma_commit();\n"
    "        fg_wgmma_wait<0>();\n"
    "        fg_sync();\n"
    "    }\n"
    "    for (int i = 0; i < BN / 2; i++) {\n"
    "        const unsigned w = t / 32, l = t % 32;\n"
    "        p.out[(16 * w + l / 4 + 8 * ((i / 2) % 2)) * BN + 8 * (i / 4) + 2 * (l % 4) + i % 2] = d[i];\n"
    "    }\n"
    "}\n"
    "FG_KERNEL(wg_tf32, P_tf32, 128)\n"
    "{\n"
    "    FG_SHARED_DYN(smem, 64 * 128 + 256 * 128);\n"
    "    FG_SHARED fg_mbar bar;\n"
    "    if (fg_linear_tid() == 0) {\n"
    "        fg_mbar_init(&bar, 1);\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    fg_sync();\n"
    "    if (p.bn == 64)\n"
    "        gemm_tf32<64>(p, smem, smem + 64 * 128, &bar);\n"
    "    else\n"
    "        gemm_tf32<256>(p, smem, smem + 64 * 128, &bar);\n"
    "}\n";

/* A random fp32 value of magnitude 2^-4 .. 2^1 with all 23 mantissa bits
 * random; *tv is its tf32 value (the low 13 bits dropped). */
static float rnd_f32(double *tv)
{
    uint32_t sign = rnd() & 1, e = 123 + rnd() % 5, m = rnd() & 0x7fffff;
    uint32_t bits = sign << 31 | e << 23 | m;
    float f;
    memcpy(&f, &bits, 4);
    *tv = (sign ? -1.0 : 1.0) * ldexp(1.0 + (double)(m >> 13) / 1024.0, (int)e - 127);
    return f;
}

static void test_wgmma_tf32(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "wg_tf32", src_tf32, 128, GEMM_SLOTS);
    const int cases[][2] = {{128, 64}, {72, 256}};   /* K (72: a partial k tile, zero-filled), BN */
    for (size_t ci = 0; ci < 2; ci++) {
        int K = cases[ci][0], BN = cases[ci][1];
        float *a = aligned_alloc(16, sizeof(float) * 64 * (size_t)K), *b = aligned_alloc(16, sizeof(float) * BN * K);
        float *out = malloc(sizeof(float) * 64 * (size_t)BN);
        /* gemm_check's operand values: tv the tf32 ones, fv the unrounded fp32 ones (av[m][k], bv[k][n]) */
        gemm_data tv = {.m = 64, .k = K, .bn = BN}, fv = tv;
        tv.av = malloc(sizeof(double) * 64 * (size_t)K), tv.bv = malloc(sizeof(double) * BN * (size_t)K);
        fv.av = malloc(sizeof(double) * 64 * (size_t)K), fv.bv = malloc(sizeof(double) * BN * (size_t)K);
        for (int i = 0; i < 64 * K; i++) {
            a[i] = rnd_f32(&tv.av[i]);
            fv.av[i] = a[i];
        }
        for (int n = 0; n < BN; n++)   /* B stored [BN][K] */
            for (int kk = 0; kk < K; kk++) {
                b[n * K + kk] = rnd_f32(&tv.bv[kk * BN + n]);
                fv.bv[kk * BN + n] = b[n * K + kk];
            }
        uint64_t args[GEMM_SLOTS];
        memset(args, 0, sizeof args);
        args[0] = P(out), args[1] = (uint64_t)K, args[2] = (uint64_t)BN;
        fg_tmap_desc ma = map2d(a, 4, (uint64_t)K, 64, (uint64_t)K * 4, 32, 64, FG_TMAP_SWIZZLE_128B);
        fg_tmap_desc mb = map2d(b, 4, (uint64_t)K, (uint64_t)BN, (uint64_t)K * 4, 32, (unsigned)BN,
                                FG_TMAP_SWIZZLE_128B);
        put_map(args + 8, &ma);
        put_map(args + 24, &mb);
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        double worst = gemm_check(&tv, out, 0), worst_full = gemm_check(&fv, out, 0);
        print_message("tf32 K %d N %d: error %.3g of the fp32 bound (%.3g against unrounded operands)\n", K, BN,
                      worst, worst_full);
        if (!(worst <= 1.0))
            fail_msg("tf32 K %d N %d: error %.3g of the fp32 bound", K, BN, worst);
        /* the operands were read as tf32, not as fp32: far off the unrounded product */
        assert_true(worst_full > 4.0);
        free(a), free(b), free(out);
        free(tv.av), free(tv.bv), free(fv.av), free(fv.bv);
    }
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- a 3-stage ring: one producer thread (the warp after the consumers),
 * ncons (1 or 2) consumer warpgroups ----
 * D[64 ncons x 128] = C + A[64 ncons x 192] * B[192 x 128] (f16, B N-major),
 * k16 per stage, 32B swizzle: A box 16 x 64 ncons (K-major, SBO 256;
 * warpgroup g starts at row 64 g), B eight boxes 16 x 16 (N-major, LBO 512,
 * SBO 256).  full[s]: one arrival + transaction bytes; empty[s]: 128 ncons
 * arrivals once the stage's wgmma landed (wait_group 1).  flags 1: the
 * producer does not wait on empty[s]. */
static const char *src_ring =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_ring { float *out; const float *c; fg_i64 flags, ncons, pad[4]; fg_tmap ma, mb; };\n"
    "FG_KERNEL(ring, P_ring, 288)\n"
    "{\n"
    "    alignas(1024) FG_SHARED unsigned char sa[3][4096];\n"
    "    alignas(1024) FG_SHARED unsigned char sb[3][4096];\n"
    "    FG_SHARED fg_mbar full[3], empty[3];\n"
    "    const unsigned t = fg_linear_tid(), nc = 128 * (unsigned)p.ncons;\n"
    "    const int KT = 12;\n"
    "    if (t == 0) {\n"
    "        for (int s = 0; s < 3; s++) {\n"
    "            fg_mbar_init(&full[s], 1);\n"
    "            fg_mbar_init(&empty[s], nc);\n"
    "        }\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    fg_sync();\n"
    "    if (t >= nc) {\n"
    "        fg_setmaxnreg_dec<40>();\n"
    "        if (t == nc)\n"
    "            for (int i = 0; i < KT; i++) {\n"
    "                const int s = i % 3, round = i / 3;\n"
    "                if (!(p.flags & 1))\n"
    "                    fg_mbar_wait(&empty[s], (unsigned)(round & 1) ^ 1u);\n"
    "                fg_mbar_arrive_expect_tx(&full[s], 2048 * (unsigned)p.ncons + 4096);\n"
    "                fg_tma_load_2d(sa[s], &p.ma, i * 16, 0, &full[s]);\n"
    "                for (int nb = 0; nb < 8; nb++)\n"
    "                    fg_tma_load_2d(sb[s] + nb * 512, &p.mb, nb * 16, i * 16, &full[s]);\n"
    "            }\n"
    "        return;\n"
    "    }\n"
    "    fg_setmaxnreg_inc<232>();\n"
    "    const unsigned g = t / 128, w = t % 128 / 32, l = t % 32;\n"
    "    float d[64];\n"
    "    for (int i = 0; i < 64; i++)\n"
    "        d[i] = p.c[(64 * g + 16 * w + l / 4 + 8 * ((i / 2) % 2)) * 128 + 8 * (i / 4) + 2 * (l % 4) + i % 2];\n"
    "    for (int i = 0; i < KT; i++) {\n"
    "        const int s = i % 3, round = i / 3;\n"
    "        fg_mbar_wait(&full[s], (unsigned)round & 1);\n"
    "        fg_wgmma_fence();\n"
    "        const fg_u64 da = fg_wgmma_desc(sa[s] + g * 2048, 32, 16, 256);\n"
    "        fg_wgmma_f16<128, 1>(d, da, fg_wgmma_desc(sb[s], 32, 512, 256), 1);\n"
    "        fg_wgmma_commit();\n"
    "        fg_wgmma_wait<1>();\n"
    "        if (i > 0)\n"
    "            fg_mbar_arrive(&empty[(i - 1) % 3]);\n"
    "    }\n"
    "    fg_wgmma_wait<0>();\n"
    "    for (int i = 0; i < 64; i++)\n"
    "        p.out[(64 * g + 16 * w + l / 4 + 8 * ((i / 2) % 2)) * 128 + 8 * (i / 4) + 2 * (l % 4) + i % 2] = d[i];\n"
    "}\n";

enum { RING_SLOTS = 8 + 16 + 16 };

static void test_ring(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "ring", src_ring, 160, RING_SLOTS);
    gemm_data g;
    uint64_t args[RING_SLOTS];
    for (int ncons = 2; ncons >= 1; ncons--) {
        gemm_make(&g, 64 * ncons, 192, 128, 1, 0);
        memset(args, 0, sizeof args);
        args[0] = P(g.out), args[1] = P(g.c), args[3] = (uint64_t)ncons;
        fg_tmap_desc ma = map2d(g.a, 2, 192, (uint64_t)g.m, 384, 16, (unsigned)g.m, FG_TMAP_SWIZZLE_32B);
        fg_tmap_desc mb = map2d(g.b, 2, 128, 192, 256, 16, 16, FG_TMAP_SWIZZLE_32B);
        put_map(args + 8, &ma);
        put_map(args + 24, &mb);
        k.block[0] = 128 * (unsigned)ncons + 32;
        k.grid[0] = 3;   /* each block starts afresh: barriers, copies, warpgroups */
        expect_ok(ctx, fg_emu_launch(ctx, &k, args));
        double r = gemm_check(&g, g.out, 1);
        if (!(r <= 1.0))
            fail_msg("ring with %d consumer warpgroup(s): error %.3g of the fp32 bound", ncons, r);
        if (ncons == 2)
            gemm_free(&g);
    }
    k.grid[0] = 1;
    /* without the empty-barrier wait the producer refills a stage the
     * consumers still own: its full barrier gets a second arrival before
     * the phase completed */
    args[2] = 1;
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "fg_mbar_arrive_expect_tx: the mbarrier at shared offset",
                 "more arrivals than its count");
    gemm_free(&g);
    fg_emu_release(&k);
    fg_context_free(ctx);
}

/* ---- generic stores published to wgmma by fence.proxy.async ----
 * A [64][32] written by the threads in the no-swizzle K-major layout (core
 * matrices of 8 rows x 16 bytes; LBO 128 between k chunks, SBO 512 between
 * 8-row groups); B [64][32] by TMA, 64B swizzle (K-major, SBO 512).  D = A *
 * B^T, n64.  flags: 1 no fg_fence_proxy_async; 8 thread 77 swaps the k
 * steps of A. */
static const char *src_fence =
    "#include \"fusegen_prelude.cuh\"\n"
    "struct P_fence { float *out; const unsigned short *a; fg_i64 flags, pad[5]; fg_tmap mb; };\n"
    "FG_KERNEL(wg_fence, P_fence, 128)\n"
    "{\n"
    "    alignas(1024) FG_SHARED unsigned short sa[64 * 32];\n"
    "    alignas(1024) FG_SHARED unsigned char sb[64 * 64];\n"
    "    FG_SHARED fg_mbar bar;\n"
    "    const unsigned t = fg_linear_tid();\n"
    "    if (t == 0) {\n"
    "        fg_mbar_init(&bar, 1);\n"
    "        fg_fence_mbar_init();\n"
    "    }\n"
    "    for (unsigned e = t; e < 64 * 32; e += fg_bdim_x()) {\n"
    "        const unsigned m = e / 32, k = e % 32;\n"
    "        sa[((m % 8) * 16 + (m / 8) * 512 + (k % 8) * 2 + (k / 8) * 128) / 2] = p.a[e];\n"
    "    }\n"
    "    if (!(p.flags & 1))\n"
    "        fg_fence_proxy_async();\n"
    "    fg_sync();\n"
    "    if (t == 0) {\n"
    "        fg_mbar_arrive_expect_tx(&bar, 64 * 64);\n"
    "        fg_tma_load_2d(sb, &p.mb, 0, 0, &bar);\n"
    "    }\n"
    "    fg_mbar_wait(&bar, 0);\n"
    "    float d[32];\n"
    "    fg_wgmma_fence();\n"
    "    for (int ks = 0; ks < 2; ks++) {\n"
    "        const int ka = ((p.flags & 8) && t == 77) ? 1 - ks : ks;\n"
    "        fg_wgmma_f16<64, 0>(d, fg_wgmma_desc((const char *)sa + ka * 256, 0, 128, 512),\n"
    "                            fg_wgmma_desc(sb + ks * 32, 64, 16, 512), ks);\n"
    "    }\n"
    "    fg_wgmma_commit();\n"
    "    fg_wgmma_wait<0>();\n"
    "    const unsigned w = t / 32, l = t % 32;\n"
    "    for (int i = 0; i < 32; i++)\n"
    "        p.out[(16 * w + l / 4 + 8 * ((i / 2) % 2)) * 64 + 8 * (i / 4) + 2 * (l % 4) + i % 2] = d[i];\n"
    "}\n";

enum { FENCE_SLOTS = 8 + 16 };

static void test_proxy_fence(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_empty();
    fg_kernel k;
    kbuild(ctx, &k, "wg_fence", src_fence, 128, FENCE_SLOTS);
    gemm_data g;
    gemm_make(&g, 64, 32, 64, 0, 0);   /* B stored [n][k] */
    uint64_t args[FENCE_SLOTS] = {P(g.out), P(g.a), 0};
    fg_tmap_desc mb = map2d(g.b, 2, 32, 64, 64, 32, 64, FG_TMAP_SWIZZLE_64B);
    put_map(args + 8, &mb);
    expect_ok(ctx, fg_emu_launch(ctx, &k, args));
    double r = gemm_check(&g, g.out, 0);
    if (!(r <= 1.0))
        fail_msg("fence: error %.3g of the fp32 bound", r);
    /* without the proxy fence wgmma does not see the generic stores */
    args[2] = 1;
    expect_ok(ctx, fg_emu_launch(ctx, &k, args));
    for (int i = 0; i < 64 * 64; i++)
        assert_true(isnan(g.out[i]));
    args[2] = 8;
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "warpgroup divergence: thread 77 of warpgroup 0", NULL);
    /* a warpgroup needs 128 threads */
    args[2] = 0;
    k.block[0] = 96;
    expect_error(ctx, fg_emu_launch(ctx, &k, args), "needs a full warpgroup of 128 threads", NULL);
    gemm_free(&g);
    fg_emu_release(&k);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tmap_encode),
        cmocka_unit_test(test_tma_box_4d),
        cmocka_unit_test(test_tma_box),
        cmocka_unit_test(test_wgmma_gemm),
        cmocka_unit_test(test_wgmma_tf32),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_proxy_fence),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
