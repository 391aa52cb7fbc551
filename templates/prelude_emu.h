/*
 * fusegen_prelude.cuh (emulation) -- the prelude of generated kernels when
 * they are compiled by the host C++ compiler and run on the CPU (runtime/emu.c).
 * Same names and semantics as templates/prelude.cuh, the device prelude.
 *
 * The runtime calls the kernel entry once per emulated thread, each thread on
 * its own cooperative context.  Everything that needs the scheduler (thread
 * and block indices, barriers, warp collectives, errors) goes through a table
 * the runtime installs with fg_emu_bind() after dlopen, so the shared object
 * has no link-time dependency on the library.  struct fg_emu_api is declared
 * once, in templates/emu_api.h, for the runtime and this prelude (the bind
 * checks version and size).
 */
#ifndef FG_PRELUDE_EMU_H
#define FG_PRELUDE_EMU_H

#include <stdint.h>
#include <string.h>

/* The float functions of <math.h> that kernels call (the expression
 * language's functions and the templates'), declared here rather than by
 * including it: in C++ <math.h> brings in <cmath> and much of the standard
 * library, which took 0.3 s of the 0.4 s it takes to compile a kernel. */
extern "C" {
float expf(float) noexcept;
float expm1f(float) noexcept;
float logf(float) noexcept;
float log1pf(float) noexcept;
float tanhf(float) noexcept;
float erff(float) noexcept;
float sqrtf(float) noexcept;
float fabsf(float) noexcept;
float powf(float, float) noexcept;
float floorf(float) noexcept;
float ceilf(float) noexcept;
float truncf(float) noexcept;
float rintf(float) noexcept;
float sinf(float) noexcept;
float cosf(float) noexcept;
float tanf(float) noexcept;
float asinf(float) noexcept;
float acosf(float) noexcept;
float atanf(float) noexcept;
float sinhf(float) noexcept;
float coshf(float) noexcept;
float asinhf(float) noexcept;
float acoshf(float) noexcept;
float atanhf(float) noexcept;
}

typedef long long fg_i64;
typedef unsigned int fg_u32;
typedef unsigned long long fg_u64;

struct fg_half { unsigned short bits; };
struct fg_bf16 { unsigned short bits; };

/* ---- the runtime interface (templates/emu_api.h, written beside this file) ---- */

#include "fusegen_emu_api.h"

static fg_emu_api *fg_emu_api_;

extern "C" __attribute__((visibility("default"))) int fg_emu_bind(fg_emu_api *api, unsigned version, unsigned size)
{
    if (version != FG_EMU_API_VERSION || size != sizeof(fg_emu_api))
        return -1;
    fg_emu_api_ = api;
    return 0;
}

/* Block-shared arrays live in their own section so that the runtime can
 * poison them before every block (reads of unwritten shared memory show up). */
extern "C" char __start_fg_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_fg_shared[] __attribute__((weak, visibility("hidden")));
extern "C" __attribute__((visibility("default"))) void fg_emu_shared_range(char **begin, char **end)
{
    *begin = __start_fg_shared;
    *end = __stop_fg_shared;
}

/* ---- qualifiers and the kernel entry ---- */

#define FG_DEVICE static inline
#define FG_SHARED static __attribute__((section("fg_shared"), aligned(16)))
/* The kernel's dynamic shared memory on the device (a byte array, 1024-byte
 * aligned, fg_kernel.smem bytes); here a static shared array of `bytes`
 * (a constant), poisoned and addressed like the others. */
#define FG_SHARED_DYN(name, bytes) alignas(1024) FG_SHARED unsigned char name[bytes]
#define FG_RESTRICT __restrict__
#define FG_UNROLL
#define FG_UNROLL_BY(n)
/* On the device: a const kernel parameter whose address may be taken (the
 * tensor maps fg_tma_load_2d / _4d read); nothing here. */
#ifndef __grid_constant__
#define __grid_constant__
#endif

/* One 16-byte chunk: the element type of shared tiles for cp.async / ldmatrix. */
struct alignas(16) fg_chunk16 { fg_u32 w[4]; };

/* Programmatic dependent launch (prelude.cuh): the emulator runs one kernel
 * after another, each to completion, so every dependency is complete before
 * a kernel starts; both are no-ops. */
static inline void fg_grid_dep_wait() {}
static inline void fg_grid_dep_launch() {}

/* extern "C" void name(const void *params): the body for the current thread,
 * entered as on the device (fg_grid_dep_wait, fg_grid_dep_launch, then the
 * body); name__fg_max_threads lets the runtime check the launch bound.  A
 * fourth argument (the device's blocks per SM, prelude.cuh) is ignored here. */
#define FG_KERNEL(name, Params, ...) FG_KERNEL_(name, Params, __VA_ARGS__, 0)
#define FG_KERNEL_(name, Params, max_threads, ...)                                   \
    extern "C" __attribute__((visibility("default"))) const unsigned name##__fg_max_threads = (max_threads); \
    static void name##__fg_body(const Params &p);                                    \
    extern "C" __attribute__((visibility("default"))) void name(const void *params)  \
    {                                                                                \
        fg_grid_dep_wait();                                                          \
        fg_grid_dep_launch();                                                        \
        name##__fg_body(*(const Params *)params);                                    \
    }                                                                                \
    static void name##__fg_body(const Params &p)

/* ---- indices ---- */

static inline fg_u32 fg_tid_x() { return fg_emu_api_->cur->tid[0]; }
static inline fg_u32 fg_tid_y() { return fg_emu_api_->cur->tid[1]; }
static inline fg_u32 fg_tid_z() { return fg_emu_api_->cur->tid[2]; }
static inline fg_u32 fg_bid_x() { return fg_emu_api_->bid[0]; }
static inline fg_u32 fg_bid_y() { return fg_emu_api_->bid[1]; }
static inline fg_u32 fg_bid_z() { return fg_emu_api_->bid[2]; }
static inline fg_u32 fg_bdim_x() { return fg_emu_api_->bdim[0]; }
static inline fg_u32 fg_bdim_y() { return fg_emu_api_->bdim[1]; }
static inline fg_u32 fg_bdim_z() { return fg_emu_api_->bdim[2]; }
static inline fg_u32 fg_gdim_x() { return fg_emu_api_->gdim[0]; }
static inline fg_u32 fg_gdim_y() { return fg_emu_api_->gdim[1]; }
static inline fg_u32 fg_gdim_z() { return fg_emu_api_->gdim[2]; }
static inline fg_u32 fg_linear_tid() { return fg_emu_api_->cur->warp * 32 + fg_emu_api_->cur->lane; }
static inline fg_u32 fg_lane() { return fg_emu_api_->cur->lane; }
static inline fg_u32 fg_warp() { return fg_emu_api_->cur->warp; }

/* ---- barrier ---- */

static inline void fg_sync() { fg_emu_api_->sync(); }

/* ---- warp collectives ---- */

static inline fg_u32 fg_emu_fbits(float f)
{
    fg_u32 u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float fg_emu_bitsf(fg_u32 u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float fg_emu_shfl(int op, float v, int arg)
{
    fg_u32 in = fg_emu_fbits(v), out;
    fg_emu_api_->warp(op, arg, &in, 1, &out, 1);
    return fg_emu_bitsf(out);
}

static inline float fg_shfl_xor(float v, int lane_mask) { return fg_emu_shfl(FG_EMU_WOP_SHFL_XOR, v, lane_mask); }
static inline float fg_shfl_down(float v, int delta) { return fg_emu_shfl(FG_EMU_WOP_SHFL_DOWN, v, delta); }
static inline float fg_shfl_idx(float v, int src_lane) { return fg_emu_shfl(FG_EMU_WOP_SHFL_IDX, v, src_lane); }

static inline void fg_emu_mma(int op, float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    fg_u32 in[10], out[4];
    for (int i = 0; i < 4; i++) in[i] = a[i];
    for (int i = 0; i < 2; i++) in[4 + i] = b[i];
    for (int i = 0; i < 4; i++) in[6 + i] = fg_emu_fbits(c[i]);
    fg_emu_api_->warp(op, 0, in, 10, out, 4);
    for (int i = 0; i < 4; i++) d[i] = fg_emu_bitsf(out[i]);
}

static inline void fg_mma_16816_f16(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    fg_emu_mma(FG_EMU_WOP_MMA_F16, d, a, b, c);
}

static inline void fg_mma_16816_bf16(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    fg_emu_mma(FG_EMU_WOP_MMA_BF16, d, a, b, c);
}

/* ---- conversions: IEEE round to nearest even, NaN kept, overflow to inf ---- */

static inline float fg_h2f(fg_half h)
{
    fg_u32 sign = (fg_u32)(h.bits & 0x8000u) << 16;
    fg_u32 e = (h.bits >> 10) & 0x1f, m = h.bits & 0x3ffu;
    fg_u32 u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) {
        if (m == 0) {
            u = sign;
        } else {                     /* subnormal: normalise */
            int ex = 1;
            while (!(m & 0x400u)) {
                m <<= 1;
                ex--;
            }
            u = sign | ((fg_u32)(ex + 112) << 23) | ((m & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    return fg_emu_bitsf(u);
}

static inline fg_half fg_f2h(float f)
{
    fg_u32 x = fg_emu_fbits(f);
    fg_u32 sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    fg_half h;
    if (ax > 0x7f800000u) {                          /* NaN: quiet, top payload kept */
        h.bits = (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    } else if (ax >= 0x477ff000u) {                  /* >= 65520 (or inf): inf */
        h.bits = (unsigned short)(sign | 0x7c00u);
    } else if (ax >= 0x38800000u) {                  /* normal half */
        fg_u32 r = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
            r++;
        h.bits = (unsigned short)(sign | r);
    } else if (ax < 0x33000000u) {                   /* <= 2^-25: zero */
        h.bits = (unsigned short)sign;
    } else {                                         /* subnormal half */
        fg_u32 e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
        fg_u32 s = 126 - e, r = mant >> s, rem = mant & ((1u << s) - 1), half = 1u << (s - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        h.bits = (unsigned short)(sign | r);
    }
    return h;
}

static inline float fg_bf2f(fg_bf16 b) { return fg_emu_bitsf((fg_u32)b.bits << 16); }

static inline fg_bf16 fg_f2bf(float f)
{
    fg_u32 x = fg_emu_fbits(f);
    fg_bf16 b;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        b.bits = (unsigned short)((x >> 16) | 0x40u);
    else
        b.bits = (unsigned short)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
    return b;
}

static inline fg_u32 fg_pack_half2(fg_half lo, fg_half hi) { return (fg_u32)lo.bits | ((fg_u32)hi.bits << 16); }
static inline fg_u32 fg_pack_bf162(fg_bf16 lo, fg_bf16 hi) { return (fg_u32)lo.bits | ((fg_u32)hi.bits << 16); }

/* ---- element access ---- */

static inline float fg_load(const float *p) { return *p; }
static inline float fg_load(const fg_half *p) { return fg_h2f(*p); }
static inline float fg_load(const fg_bf16 *p) { return fg_bf2f(*p); }
static inline void fg_store(float *p, float v) { *p = v; }
static inline void fg_store(fg_half *p, float v) { *p = fg_f2h(v); }
static inline void fg_store(fg_bf16 *p, float v) { *p = fg_f2bf(v); }

/* Integer and bool storage, as on the device: read as float, stored
 * truncated toward zero and saturated (NaN to 0); a bool stores v != 0. */
typedef int fg_i32;
struct fg_bool { unsigned char v; };
static inline float fg_load(const fg_i64 *p) { return (float)*p; }
static inline float fg_load(const fg_i32 *p) { return (float)*p; }
static inline float fg_load(const fg_bool *p) { return p->v ? 1.0f : 0.0f; }
static inline void fg_store(fg_i64 *p, float v)
{
    *p = v != v ? 0 : v >= 9.22337204e18f ? (fg_i64)0x7fffffffffffffffLL : v <= -9.22337204e18f ? (fg_i64)(-0x7fffffffffffffffLL - 1) : (fg_i64)v;
}
static inline void fg_store(fg_i32 *p, float v)
{
    *p = v != v ? 0 : v >= 2147483647.0f ? 2147483647 : v <= -2147483648.0f ? (-2147483647 - 1) : (fg_i32)v;
}
static inline void fg_store(fg_bool *p, float v) { p->v = v != 0.0f; }

/* The device uses one vector access, which faults when misaligned: so does this. */
static inline void fg_emu_check_align(const void *p, unsigned align, const char *what)
{
    if ((uintptr_t)p % align)
        fg_emu_api_->fail(what);
}

template <typename T> static inline void fg_load4(const T *p, float v[4])
{
    fg_emu_check_align(p, 4 * sizeof(T), "fg_load4: pointer not aligned to 4 elements");
    for (int i = 0; i < 4; i++)
        v[i] = fg_load(p + i);
}

template <typename T> static inline void fg_store4(T *p, const float v[4])
{
    fg_emu_check_align(p, 4 * sizeof(T), "fg_store4: pointer not aligned to 4 elements");
    for (int i = 0; i < 4; i++)
        fg_store(p + i, v[i]);
}

template <typename T> static inline void fg_store2(T *p, float a, float b)
{
    fg_emu_check_align(p, 2 * sizeof(T), "fg_store2: pointer not aligned to 2 elements");
    fg_store(p, a);
    fg_store(p + 1, b);
}

/* ---- 16-byte vector access (pointwise template) ----
 * Same as the device prelude: fg_aligned16 tells whether p may take a 16-byte
 * access; fg_load8 / fg_store8 move eight elements and, like the device's
 * 16-byte accesses, fail the launch on a pointer that is not 16-byte aligned. */
static inline bool fg_aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

template <typename T> static inline void fg_load8(const T *p, float v[8])
{
    fg_emu_check_align(p, 16, "fg_load8: pointer not 16-byte aligned");
    for (int i = 0; i < 8; i++)
        v[i] = fg_load(p + i);
}

template <typename T> static inline void fg_store8(T *p, const float v[8])
{
    fg_emu_check_align(p, 16, "fg_store8: pointer not 16-byte aligned");
    for (int i = 0; i < 8; i++)
        fg_store(p + i, v[i]);
}

/* ---- ldmatrix ---- */

/* ldmatrix: each lane deposits the 16 bytes of the row it addresses; the
 * runtime hands every lane its fragments (PTX ldmatrix layout, runtime/emu_sched.c). */
static inline void fg_emu_ldmatrix(int op, fg_u32 r[4], const void *smem_row, const char *misaligned)
{
    fg_emu_check_align(smem_row, 16, misaligned);
    fg_u32 in[4];
    memcpy(in, smem_row, 16);
    fg_emu_api_->warp(op, 0, in, 4, r, 4);
}

static inline void fg_ldmatrix_x4(fg_u32 r[4], const void *smem_row)
{
    fg_emu_ldmatrix(FG_EMU_WOP_LDMATRIX_X4, r, smem_row, "fg_ldmatrix_x4: row address not 16-byte aligned");
}

static inline void fg_ldmatrix_x4_trans(fg_u32 r[4], const void *smem_row)
{
    fg_emu_ldmatrix(FG_EMU_WOP_LDMATRIX_X4_TRANS, r, smem_row,
                    "fg_ldmatrix_x4_trans: row address not 16-byte aligned");
}

/* ---- math ---- */

static inline float fg_rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* ---- NaN-propagating min / max (the expression language's min and max) ----
 * Same as the device prelude: NaN when either argument is NaN, else the
 * smaller / larger, the first argument when the two compare equal. */
static inline bool fg_isnanf(float x) { return x != x; }
/* -infinity (a masked score). */
static inline float fg_neg_inf()
{
    const fg_u32 bits = 0xff800000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline float fg_minf(float a, float b) { return (b < a || fg_isnanf(b)) ? b : a; }
static inline float fg_maxf(float a, float b) { return (b > a || fg_isnanf(b)) ? b : a; }

/* ---- asynchronous copy: queued per thread, lands at the wait ----
 * The source is read when the copy is issued; the destination is written only
 * when the issuing thread's fg_cp_async_wait_group / wait_all covers the
 * copy's group, so a missing or too weak wait reads stale or poisoned shared
 * memory, as it may on the device. */

static inline void fg_cp_async16(void *smem_dst, const void *gmem_src)
{
    fg_emu_check_align(smem_dst, 16, "fg_cp_async16: shared destination not 16-byte aligned");
    fg_emu_check_align(gmem_src, 16, "fg_cp_async16: global source not 16-byte aligned");
    fg_emu_api_->cp_async(smem_dst, gmem_src);
}
static inline void fg_cp_async16_zfill(void *smem_dst, const void *gmem_src, bool valid)
{
    fg_emu_check_align(smem_dst, 16, "fg_cp_async16_zfill: shared destination not 16-byte aligned");
    if (valid)
        fg_emu_check_align(gmem_src, 16, "fg_cp_async16_zfill: global source not 16-byte aligned");
    fg_emu_api_->cp_async(smem_dst, valid ? gmem_src : NULL);
}
static inline void fg_cp_async_commit() { fg_emu_api_->cp_commit(); }
template <int N> static inline void fg_cp_async_wait_group()
{
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0..7");
    fg_emu_api_->cp_wait(N);
}
static inline void fg_cp_async_wait_all() { fg_emu_api_->cp_wait(-1); }

/* ---- Hopper: mbarrier, TMA, wgmma (sm_90a on the device) ----
 * Emulated as docs/emulation.md ("Hopper primitives") describes, so that a
 * missing wait or fence is a numerics failure or an error here:
 * - an mbarrier counts arrivals and transaction bytes per phase; a thread
 *   that waits on an incomplete phase blocks (all threads blocked: the launch
 *   fails naming the barrier and a waiting thread);
 * - a TMA box is read at issue but lands in shared memory only when a
 *   thread waits on its barrier (or when no thread can run any more), never
 *   at issue; until then the tile holds what was there (0xff: NaN);
 * - wgmma reads its operands and writes its accumulators only at the
 *   fg_wgmma_wait that covers its group; the accumulators are NaN from the
 *   issue until then;
 * - wgmma reads the async proxy's view of shared memory: TMA data, and
 *   generic writes only once some thread ran fg_fence_proxy_async() after
 *   them.
 * Shared addresses (descriptors, swizzle, alignment) are offsets from the
 * start of the kernel's FG_SHARED arrays. */

struct alignas(8) fg_mbar { fg_u64 v; };
struct alignas(64) fg_tmap { fg_u64 w[16]; };

/* runtime/emu_tmap.c writes an fg_emu_tmap (emu_api.h) into an fg_tmap. */
static_assert(sizeof(fg_emu_tmap) == sizeof(fg_tmap), "the emulated tensor map is 128 bytes");

/* Where byte `offset` of a box loaded with a swizzle of `span` bytes (32,
 * 64, 128; anything else: none) lies in shared memory: the 16-byte chunk
 * index (bits 4..6) XOR the 128-byte row index (bits 7..9), masked to
 * span / 16 - 1 chunks; offset from a base aligned to 8 * span bytes.  The
 * same formula as fg_emu_tmap_swizzle (runtime/emu_tmap.c). */
static inline fg_u64 fg_emu_swizzle(fg_u64 offset, unsigned span)
{
    if (span != 32 && span != 64 && span != 128)
        return offset;
    return offset ^ (((offset >> 7) & (fg_u64)(span / 16 - 1)) << 4);
}

static inline void fg_mbar_init(fg_mbar *b, unsigned count) { fg_emu_api_->mbar_init(b, count); }
/* Threads run one at a time here: the initialisation is visible at once
 * (the block barrier after it is still the kernel's job, as on the device). */
static inline void fg_fence_mbar_init() {}
static inline void fg_mbar_arrive(fg_mbar *b) { fg_emu_api_->mbar_arrive(b, 0, 0); }
static inline void fg_mbar_arrive_expect_tx(fg_mbar *b, unsigned bytes) { fg_emu_api_->mbar_arrive(b, 1, bytes); }
static inline void fg_mbar_wait(fg_mbar *b, unsigned parity) { fg_emu_api_->mbar_wait(b, parity); }

static inline void fg_emu_tma_load(void *smem_dst, const fg_tmap *m, int rank, const int *c, fg_mbar *b)
{
    fg_u64 magic;
    memcpy(&magic, m, sizeof magic);
    if (magic != FG_EMU_TMAP_MAGIC)
        fg_emu_api_->fail("fg_tma_load: not a tensor map for emulation (encode it with fg_emu_tmap_encode)");
    fg_emu_api_->tma_load(smem_dst, m, rank, c, b);
}
static inline void fg_tma_load_2d(void *smem_dst, const fg_tmap *m, int c0, int c1, fg_mbar *b)
{
    const int c[2] = {c0, c1};
    fg_emu_tma_load(smem_dst, m, 2, c, b);
}
static inline void fg_tma_load_4d(void *smem_dst, const fg_tmap *m, int c0, int c1, int c2, int c3, fg_mbar *b)
{
    const int c[4] = {c0, c1, c2, c3};
    fg_emu_tma_load(smem_dst, m, 4, c, b);
}

static inline void fg_fence_proxy_async() { fg_emu_api_->fence_proxy_async(); }

/* The shared-memory matrix descriptor, packed as on the device: start
 * address >> 4 in bits 0-13, leading byte offset >> 4 in 16-29, stride byte
 * offset >> 4 in 32-45, base offset 0, swizzle mode in 62-63 (0 none, 1 128B,
 * 2 64B, 3 32B).  What the device would silently truncate fails here. */
static inline fg_u64 fg_wgmma_desc(const void *smem, int swizzle_bytes, unsigned lbo_bytes, unsigned sbo_bytes)
{
    const char *p = (const char *)smem;
    if (!__start_fg_shared || p < __start_fg_shared || p >= __stop_fg_shared)
        fg_emu_api_->fail("fg_wgmma_desc: the operand is not in shared memory (FG_SHARED)");
    fg_u64 addr = (fg_u64)(p - __start_fg_shared);
    if (addr % 16 || lbo_bytes % 16 || sbo_bytes % 16)
        fg_emu_api_->fail("fg_wgmma_desc: start address, leading and stride byte offsets must be multiples of 16");
    if (addr >= (1u << 18) || lbo_bytes >= (1u << 18) || sbo_bytes >= (1u << 18))
        fg_emu_api_->fail("fg_wgmma_desc: an address or offset does not fit its 14-bit field (256 KiB)");
    fg_u64 mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    if (swizzle_bytes != 0 && mode == 0)
        fg_emu_api_->fail("fg_wgmma_desc: swizzle must be 0, 32, 64 or 128 bytes");
    return (addr >> 4) | (fg_u64)(lbo_bytes >> 4) << 16 | (fg_u64)(sbo_bytes >> 4) << 32 | mode << 62;
}

static inline void fg_wgmma_fence() { fg_emu_api_->wgmma_fence(); }
static inline void fg_wgmma_commit() { fg_emu_api_->wgmma_commit(); }
template <int N> static inline void fg_wgmma_wait()
{
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
    fg_emu_api_->wgmma_wait(N);
}

/* D[64 x BN] = A[64 x 16] * B[16 x BN] (+ D when accumulate): A K-major, B
 * K-major ([BN][16]) when TRANS_B is 0, N-major ([16][BN]) when 1; d holds
 * this thread's accumulators in the PTX register fragment of D (thread t of
 * the warpgroup, w = t / 32, l = t % 32: d[i] is row 16w + l/4 + 8((i/2)%2),
 * column 8(i/4) + 2(l%4) + i%2). */
template <int BN, int TRANS_B>
static inline void fg_wgmma_f16(float (&d)[BN / 2], fg_u64 desc_a, fg_u64 desc_b, int accumulate)
{
    static_assert(BN >= 8 && BN <= 256 && BN % 8 == 0, "wgmma n is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1");
    fg_emu_api_->wgmma(FG_EMU_WGMMA_F16, BN, TRANS_B, desc_a, desc_b, accumulate, d);
}
template <int BN, int TRANS_B>
static inline void fg_wgmma_bf16(float (&d)[BN / 2], fg_u64 desc_a, fg_u64 desc_b, int accumulate)
{
    static_assert(BN >= 8 && BN <= 256 && BN % 8 == 0, "wgmma n is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1");
    fg_emu_api_->wgmma(FG_EMU_WGMMA_BF16, BN, TRANS_B, desc_a, desc_b, accumulate, d);
}

/* D[64 x BN] = A[64 x 8] * B[8 x BN] (+ D) on tf32: operands are fp32 in
 * shared memory (32 bytes per row and k step, as a k16 step of 16-bit ones),
 * both K-major (TRANS_B 0 only: wgmma transposes only 16-bit operands), read
 * as tf32 (the low 13 mantissa bits dropped); d as above. */
template <int BN, int TRANS_B>
static inline void fg_wgmma_tf32(float (&d)[BN / 2], fg_u64 desc_a, fg_u64 desc_b, int accumulate)
{
    static_assert(BN >= 8 && BN <= 256 && BN % 8 == 0, "wgmma n is a multiple of 8 up to 256");
    static_assert(TRANS_B == 0, "tf32 wgmma reads B K-major only");
    fg_emu_api_->wgmma(FG_EMU_WGMMA_TF32, BN, TRANS_B, desc_a, desc_b, accumulate, d);
}

/* setmaxnreg: registers are not emulated. */
template <int N> static inline void fg_setmaxnreg_inc()
{
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
}
template <int N> static inline void fg_setmaxnreg_dec()
{
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
}

/* ---- tensor cores, TF32 (conv2d_tc, gemm) ----
 * fg_f2tf32 rounds as cvt.rna.tf32.f32 does: to the nearest value with 10
 * mantissa bits, ties away from zero (add half an ulp to the magnitude,
 * clear the 13 low bits; a carry into the exponent rounds up to the next
 * binade or to infinity), infinities kept, NaN a quiet NaN.
 * fg_mma_1688_tf32 takes what the device's takes: operands that fg_f2tf32
 * produced.  An operand with any of its 13 low bits set (raw fp32 bits,
 * which the device would not round the same way) fails the launch. */
static inline fg_u32 fg_f2tf32(float f)
{
    fg_u32 x = fg_emu_fbits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (x | 0x00400000u) & 0xffffe000u;
    if ((x & 0x7fffffffu) == 0x7f800000u)
        return x;
    return (x + 0x1000u) & 0xffffe000u;
}

static inline fg_u32 fg_tf32_bits(fg_u32 bits) { return fg_f2tf32(fg_emu_bitsf(bits)); }

static inline void fg_mma_1688_tf32(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    for (int i = 0; i < 4; i++)
        if (a[i] & 0x1fffu)
            fg_emu_api_->fail("fg_mma_1688_tf32: an A operand is not a tf32 value (round it with fg_f2tf32)");
    for (int i = 0; i < 2; i++)
        if (b[i] & 0x1fffu)
            fg_emu_api_->fail("fg_mma_1688_tf32: a B operand is not a tf32 value (round it with fg_f2tf32)");
    fg_u32 in[10], out[4];
    for (int i = 0; i < 4; i++) in[i] = a[i];
    for (int i = 0; i < 2; i++) in[4 + i] = b[i];
    for (int i = 0; i < 4; i++) in[6 + i] = fg_emu_fbits(c[i]);
    fg_emu_api_->warp(FG_EMU_WOP_MMA_TF32, 0, in, 10, out, 4);
    for (int i = 0; i < 4; i++) d[i] = fg_emu_bitsf(out[i]);
}

/* ---- split-K: partial sums in a workspace, the last block of a tile reduces ----
 * Same as the device prelude.  Blocks run one after another here, so the
 * last block to arrive is always the highest split; the reduction order is
 * fixed by the kernel (split 0 first), not by arrival. */
static inline void fg_threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int fg_atomic_add_i32(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

#endif /* FG_PRELUDE_EMU_H */
