// fusegen_prelude.cuh -- the device prelude of generated kernels (NVRTC).
//
// Every hardware-specific operation a generated kernel uses is defined here:
// thread indices, barriers, warp shuffles, fp16/bf16 conversion, vector
// access, async copies, ldmatrix and tensor-core fragments.
// templates/prelude_emu.h defines the same names for the CPU emulation
// backend.  No toolkit header is included: conversions, cp.async, ldmatrix and
// mma are inline PTX, so NVRTC parses only this file and the kernel.
// Requires sm_80 or newer.
#ifndef FUSEGEN_PRELUDE_CUH
#define FUSEGEN_PRELUDE_CUH

typedef long long fg_i64;
typedef unsigned int fg_u32;
typedef unsigned long long fg_u64;

// Storage types: the raw 16 bits of an IEEE half / a bfloat16.
struct fg_half { unsigned short bits; };
struct fg_bf16 { unsigned short bits; };

#define FG_DEVICE __device__ __forceinline__

// ---- programmatic dependent launch (sm_90 and newer) -----------------------
// The CUDA backend may launch a kernel with programmatic stream
// serialization (runtime/backend_cuda.c): it can then start while the
// kernel before it in the stream is still running.  fg_grid_dep_wait()
// (griddepcontrol.wait) returns once every grid it depends on has completed
// and its memory is visible; nothing may touch global memory before it,
// neither a read (the predecessor may still be writing) nor a write (it may
// still be reading).  fg_grid_dep_launch() (griddepcontrol.launch_dependents)
// lets the next grid be scheduled once every block of this one has called it
// or exited; it orders no memory.  Both are no-ops without a programmatic
// dependency, and compile to nothing below sm_90 (PTX ISA 7.8, sm_90).
FG_DEVICE void fg_grid_dep_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
FG_DEVICE void fg_grid_dep_launch()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// FG_GRID_DEP_MARKER_(name): the module constant that says the entry point
// waits (FG_KERNEL, below); only where the wait is compiled in.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FG_GRID_DEP_MARKER_(name) extern "C" __constant__ int name##__fg_grid_dep = 1;
#else
#define FG_GRID_DEP_MARKER_(name)
#endif

// FG_KERNEL(name, Params, max_threads[, min_blocks]): min_blocks, when given,
// is the launch bound's blocks per SM; 1 lets ptxas use the registers the
// bound allows (65536 / max_threads, 255 at most) instead of spilling a few
// to reach an occupancy it picked itself.
//
// The entry point waits for the grids it depends on (fg_grid_dep_wait)
// before anything else, then lets its dependents be scheduled
// (fg_grid_dep_launch: they wait in turn, so at most the next grid is
// resident early), then runs the body: the text after the macro, a function
// of p (a reference to the kernel parameter, so that a __grid_constant__
// parameter's address stays the parameter's), inlined.  The body is a
// template only so that it need not name Params, which may carry
// __grid_constant__.  name__fg_grid_dep, a constant of the module (1), is
// there only when the entry point was compiled with the wait (sm_90 and
// newer): the CUDA backend launches with programmatic stream serialization
// only a kernel whose module holds it.
#define FG_KERNEL(name, Params, ...)                                                      \
    template <class fg_params_t_> FG_DEVICE void name##__fg_body(const fg_params_t_ &p); \
    FG_GRID_DEP_MARKER_(name)                                                             \
    extern "C" __global__ void __launch_bounds__(__VA_ARGS__) name(const Params p)       \
    {                                                                                     \
        fg_grid_dep_wait();                                                               \
        fg_grid_dep_launch();                                                             \
        name##__fg_body(p);                                                               \
    }                                                                                     \
    template <class fg_params_t_> FG_DEVICE void name##__fg_body(const fg_params_t_ &p)
#define FG_SHARED __shared__
#define FG_RESTRICT __restrict__
#define FG_UNROLL _Pragma("unroll")
// A loop unrolled n times (bounds the registers of a long constant-count loop).
#define FG_PRAGMA_(x) _Pragma(#x)
#define FG_UNROLL_BY(n) FG_PRAGMA_(unroll n)

// One 16-byte chunk: the element type of shared tiles that cp.async fills and
// ldmatrix reads (both need 16-byte aligned addresses).
struct alignas(16) fg_chunk16 { fg_u32 w[4]; };

// ---- indices ---------------------------------------------------------------
FG_DEVICE fg_u32 fg_tid_x() { return threadIdx.x; }
FG_DEVICE fg_u32 fg_tid_y() { return threadIdx.y; }
FG_DEVICE fg_u32 fg_tid_z() { return threadIdx.z; }
FG_DEVICE fg_u32 fg_bid_x() { return blockIdx.x; }
FG_DEVICE fg_u32 fg_bid_y() { return blockIdx.y; }
FG_DEVICE fg_u32 fg_bid_z() { return blockIdx.z; }
FG_DEVICE fg_u32 fg_bdim_x() { return blockDim.x; }
FG_DEVICE fg_u32 fg_bdim_y() { return blockDim.y; }
FG_DEVICE fg_u32 fg_bdim_z() { return blockDim.z; }
FG_DEVICE fg_u32 fg_gdim_x() { return gridDim.x; }
FG_DEVICE fg_u32 fg_gdim_y() { return gridDim.y; }
FG_DEVICE fg_u32 fg_gdim_z() { return gridDim.z; }
FG_DEVICE fg_u32 fg_linear_tid()
{
    return threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
}
FG_DEVICE fg_u32 fg_lane() { return fg_linear_tid() & 31u; }
FG_DEVICE fg_u32 fg_warp() { return fg_linear_tid() >> 5; }

// ---- barrier and warp collectives -----------------------------------------
FG_DEVICE void fg_sync() { __syncthreads(); }
FG_DEVICE float fg_shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
FG_DEVICE float fg_shfl_down(float v, int delta) { return __shfl_down_sync(0xffffffffu, v, (unsigned)delta); }
FG_DEVICE float fg_shfl_idx(float v, int src_lane) { return __shfl_sync(0xffffffffu, v, src_lane); }

// ---- conversions (round to nearest even) -----------------------------------
FG_DEVICE float fg_h2f(fg_half h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
FG_DEVICE fg_half fg_f2h(float f)
{
    fg_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
FG_DEVICE float fg_bf2f(fg_bf16 b) { return __uint_as_float(((fg_u32)b.bits) << 16); }
FG_DEVICE fg_bf16 fg_f2bf(float f)
{
    fg_bf16 b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
    return b;
}

// ---- element access (math is always in float) ------------------------------
FG_DEVICE float fg_load(const float *p) { return *p; }
FG_DEVICE float fg_load(const fg_half *p) { return fg_h2f(*p); }
FG_DEVICE float fg_load(const fg_bf16 *p) { return fg_bf2f(*p); }
FG_DEVICE void fg_store(float *p, float v) { *p = v; }
FG_DEVICE void fg_store(fg_half *p, float v) { *p = fg_f2h(v); }
FG_DEVICE void fg_store(fg_bf16 *p, float v) { *p = fg_f2bf(v); }

// Integer and bool storage: element-wise math reads them as float (exact up
// to 2^24 in magnitude) and a store truncates toward zero, saturating, NaN
// to 0 (the conversion of cvt.rzi); a bool stores v != 0.
typedef int fg_i32;
struct fg_bool { unsigned char v; };
FG_DEVICE float fg_load(const fg_i64 *p) { return (float)*p; }
FG_DEVICE float fg_load(const fg_i32 *p) { return (float)*p; }
FG_DEVICE float fg_load(const fg_bool *p) { return p->v ? 1.0f : 0.0f; }
FG_DEVICE void fg_store(fg_i64 *p, float v)
{
    *p = v != v ? 0 : v >= 9.22337204e18f ? (fg_i64)0x7fffffffffffffffLL : v <= -9.22337204e18f ? (fg_i64)(-0x7fffffffffffffffLL - 1) : (fg_i64)v;
}
FG_DEVICE void fg_store(fg_i32 *p, float v)
{
    *p = v != v ? 0 : v >= 2147483647.0f ? 2147483647 : v <= -2147483648.0f ? (-2147483647 - 1) : (fg_i32)v;
}
FG_DEVICE void fg_store(fg_bool *p, float v) { p->v = v != 0.0f; }

// Two consecutive elements in one store; p is aligned to 2 elements.
struct alignas(8) fg_vec2f { float x, y; };
FG_DEVICE void fg_store2(float *p, float a, float b)
{
    fg_vec2f q;
    q.x = a; q.y = b;
    *reinterpret_cast<fg_vec2f *>(p) = q;
}
FG_DEVICE void fg_store2(fg_half *p, float a, float b)
{
    *reinterpret_cast<fg_u32 *>(p) = (fg_u32)fg_f2h(a).bits | ((fg_u32)fg_f2h(b).bits << 16);
}
FG_DEVICE void fg_store2(fg_bf16 *p, float a, float b)
{
    *reinterpret_cast<fg_u32 *>(p) = (fg_u32)fg_f2bf(a).bits | ((fg_u32)fg_f2bf(b).bits << 16);
}

// Four consecutive elements; p is aligned to 4 elements.
struct alignas(16) fg_vec4f { float x, y, z, w; };
struct alignas(8) fg_vec4h { unsigned short x, y, z, w; };

FG_DEVICE void fg_load4(const float *p, float v[4])
{
    const fg_vec4f q = *reinterpret_cast<const fg_vec4f *>(p);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
FG_DEVICE void fg_store4(float *p, const float v[4])
{
    fg_vec4f q;
    q.x = v[0]; q.y = v[1]; q.z = v[2]; q.w = v[3];
    *reinterpret_cast<fg_vec4f *>(p) = q;
}
FG_DEVICE void fg_load4(const fg_half *p, float v[4])
{
    const fg_vec4h q = *reinterpret_cast<const fg_vec4h *>(p);
    fg_half h;
    h.bits = q.x; v[0] = fg_h2f(h);
    h.bits = q.y; v[1] = fg_h2f(h);
    h.bits = q.z; v[2] = fg_h2f(h);
    h.bits = q.w; v[3] = fg_h2f(h);
}
FG_DEVICE void fg_store4(fg_half *p, const float v[4])
{
    fg_vec4h q;
    q.x = fg_f2h(v[0]).bits; q.y = fg_f2h(v[1]).bits;
    q.z = fg_f2h(v[2]).bits; q.w = fg_f2h(v[3]).bits;
    *reinterpret_cast<fg_vec4h *>(p) = q;
}
FG_DEVICE void fg_load4(const fg_bf16 *p, float v[4])
{
    const fg_vec4h q = *reinterpret_cast<const fg_vec4h *>(p);
    fg_bf16 b;
    b.bits = q.x; v[0] = fg_bf2f(b);
    b.bits = q.y; v[1] = fg_bf2f(b);
    b.bits = q.z; v[2] = fg_bf2f(b);
    b.bits = q.w; v[3] = fg_bf2f(b);
}
FG_DEVICE void fg_store4(fg_bf16 *p, const float v[4])
{
    fg_vec4h q;
    q.x = fg_f2bf(v[0]).bits; q.y = fg_f2bf(v[1]).bits;
    q.z = fg_f2bf(v[2]).bits; q.w = fg_f2bf(v[3]).bits;
    *reinterpret_cast<fg_vec4h *>(p) = q;
}

// ---- 16-byte vector access (pointwise template) ------------------------------
// fg_aligned16: whether p may take a 16-byte vector access.  fg_load8 /
// fg_store8: eight consecutive elements; fp16 / bf16 in one 16-byte access,
// fp32 in two; p 16-byte aligned.
struct alignas(16) fg_vec8h { fg_u32 w[4]; };
FG_DEVICE bool fg_aligned16(const void *p) { return ((fg_u64)p & 15u) == 0; }
// One 16-byte global store of four words, p 16-byte aligned.  Written out
// because the compiler may split a 16-byte struct store into four 4-byte
// ones (it did in a gemm_wgmma epilogue inside a loop).
FG_DEVICE void fg_st16(void *p, fg_u32 a, fg_u32 b, fg_u32 c, fg_u32 d)
{
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
FG_DEVICE void fg_load8(const float *p, float v[8])
{
    fg_load4(p, v);
    fg_load4(p + 4, v + 4);
}
FG_DEVICE void fg_store8(float *p, const float v[8])
{
    fg_st16(p, __float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    fg_st16(p + 4, __float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7]));
}
FG_DEVICE void fg_load8(const fg_half *p, float v[8])
{
    const fg_vec8h q = *reinterpret_cast<const fg_vec8h *>(p);
    fg_half h;
    FG_UNROLL
    for (int i = 0; i < 4; i++) {
        h.bits = (unsigned short)(q.w[i] & 0xffffu); v[2 * i] = fg_h2f(h);
        h.bits = (unsigned short)(q.w[i] >> 16); v[2 * i + 1] = fg_h2f(h);
    }
}
FG_DEVICE void fg_store8(fg_half *p, const float v[8])
{
    fg_vec8h q;
    FG_UNROLL
    for (int i = 0; i < 4; i++)
        q.w[i] = (fg_u32)fg_f2h(v[2 * i]).bits | ((fg_u32)fg_f2h(v[2 * i + 1]).bits << 16);
    fg_st16(p, q.w[0], q.w[1], q.w[2], q.w[3]);
}
FG_DEVICE void fg_load8(const fg_bf16 *p, float v[8])
{
    const fg_vec8h q = *reinterpret_cast<const fg_vec8h *>(p);
    FG_UNROLL
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(q.w[i] << 16);
        v[2 * i + 1] = __uint_as_float(q.w[i] & 0xffff0000u);
    }
}
FG_DEVICE void fg_store8(fg_bf16 *p, const float v[8])
{
    fg_vec8h q;
    FG_UNROLL
    for (int i = 0; i < 4; i++)
        q.w[i] = (fg_u32)fg_f2bf(v[2 * i]).bits | ((fg_u32)fg_f2bf(v[2 * i + 1]).bits << 16);
    fg_st16(p, q.w[0], q.w[1], q.w[2], q.w[3]);
}

// ---- math ------------------------------------------------------------------
FG_DEVICE float fg_rsqrtf(float x) { return 1.0f / sqrtf(x); }

// ---- NaN-propagating min / max (the expression language's min and max) ----
// NaN when either argument is NaN, as in ONNX and PyTorch (fminf / fmaxf
// would return the other argument); else the smaller / larger, the first
// argument when the two compare equal (fg_maxf(-0, 0) is -0).
FG_DEVICE bool fg_isnanf(float x) { return x != x; }
// -infinity (a masked score; no <math.h> here for INFINITY).
FG_DEVICE float fg_neg_inf() { return __uint_as_float(0xff800000u); }
FG_DEVICE float fg_minf(float a, float b) { return (b < a || fg_isnanf(b)) ? b : a; }
FG_DEVICE float fg_maxf(float a, float b) { return (b > a || fg_isnanf(b)) ? b : a; }

// ---- asynchronous copy global -> shared (sm_80+) ---------------------------
// A copy is issued into the current group; fg_cp_async_commit closes the
// group; fg_cp_async_wait_group<N>() waits until at most N of this thread's
// committed groups are still in flight (so every older one has landed);
// fg_cp_async_wait_all() commits and waits for everything.  Other threads see
// the data only after the wait and a barrier.  Both addresses 16-byte aligned.
FG_DEVICE void fg_cp_async16(void *smem_dst, const void *gmem_src)
{
    const fg_u32 dst = (fg_u32)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem_src) : "memory");
}
// valid: copy 16 bytes; otherwise write 16 zero bytes and read nothing
// (src-size 0; gmem_src must still be a valid global address).
FG_DEVICE void fg_cp_async16_zfill(void *smem_dst, const void *gmem_src, bool valid)
{
    const fg_u32 dst = (fg_u32)__cvta_generic_to_shared(smem_dst);
    const fg_u32 src_size = valid ? 16u : 0u;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem_src), "r"(src_size)
                 : "memory");
}
FG_DEVICE void fg_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> FG_DEVICE void fg_cp_async_wait_group() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
FG_DEVICE void fg_cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- ldmatrix: four 8x8 b16 matrices from shared memory to a warp ------------
// Lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte
// aligned).  r[i] of lane l holds matrix i's elements (l / 4, 2 * (l % 4))
// and (l / 4, 2 * (l % 4) + 1), low half first: the PTX m16n8k16 A / B
// fragment layout when the tile's rows run along M (A) or N (B) with K
// contiguous.  _trans delivers the transposed matrices: (2 * (l % 4), l / 4)
// and (2 * (l % 4) + 1, l / 4).  Full warp, converged.
FG_DEVICE void fg_ldmatrix_x4(fg_u32 r[4], const void *smem_row)
{
    const fg_u32 a = (fg_u32)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
FG_DEVICE void fg_ldmatrix_x4_trans(fg_u32 r[4], const void *smem_row)
{
    const fg_u32 a = (fg_u32)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// ---- tensor cores: mma.sync m16n8k16, f32 accumulate -----------------------
FG_DEVICE fg_u32 fg_pack_half2(fg_half lo, fg_half hi) { return (fg_u32)lo.bits | ((fg_u32)hi.bits << 16); }
FG_DEVICE fg_u32 fg_pack_bf162(fg_bf16 lo, fg_bf16 hi) { return (fg_u32)lo.bits | ((fg_u32)hi.bits << 16); }

FG_DEVICE void fg_mma_16816_f16(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
FG_DEVICE void fg_mma_16816_bf16(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ---- tensor cores, TF32: cvt.rna.tf32.f32 and mma.sync m16n8k8 (conv2d_tc, gemm) --
// fg_f2tf32: f rounded to TF32 (10 mantissa bits; to nearest, ties away from
// zero: cvt.rna), as the .b32 pattern an mma takes.  fg_mma_1688_tf32:
// D (16x8) = A (16x8) * B (8x8) + C, operands from fg_f2tf32, fp32
// accumulate; groupID g = lane / 4, t = lane % 4: a[0] (g, t), a[1]
// (g + 8, t), a[2] (g, t + 4), a[3] (g + 8, t + 4); b[0] (k t, n g),
// b[1] (k t + 4, n g); c / d[i] (g + 8 * (i / 2), 2 t + i % 2).
FG_DEVICE fg_u32 fg_f2tf32(float f)
{
    fg_u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}
// fg_tf32_bits: the same for an fp32 value given as its bits (a fragment
// register loaded by ldmatrix from an fp32 tile).
FG_DEVICE fg_u32 fg_tf32_bits(fg_u32 bits) { return fg_f2tf32(__uint_as_float(bits)); }
FG_DEVICE void fg_mma_1688_tf32(float d[4], const fg_u32 a[4], const fg_u32 b[2], const float c[4])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ---- split-K: partial sums in a workspace, the last block of a tile reduces ----
// fg_threadfence: this thread's global writes are visible device-wide before
// its later ones (__threadfence).  fg_atomic_add_i32: *p += v, returns the
// old value (an integer counter: results never depend on the order).
FG_DEVICE void fg_threadfence() { __threadfence(); }
FG_DEVICE int fg_atomic_add_i32(int *p, int v) { return atomicAdd(p, v); }

// ---- Hopper (sm_90a only): mbarrier, TMA, wgmma, setmaxnreg -----------------
// Compiled only for the architecture-specific target sm_90a (NVRTC defines
// __CUDA_ARCH_FEAT_SM90_ALL there), so sm_80 / sm_90 builds of the other
// kernels see none of it.  templates/prelude_emu.h has the same names with
// the same semantics (docs/emulation.md, "Hopper primitives").
//   fg_mbar: a shared-memory mbarrier (CTA scope).  fg_mbar_init (one thread):
//     expected arrivals = count, phase 0, tx-count 0; fg_fence_mbar_init makes
//     it visible to the async proxy (the block barrier is still the caller's).
//     fg_mbar_arrive: one arrival; fg_mbar_arrive_expect_tx: raises the
//     expected transaction bytes, then one arrival.  fg_mbar_wait(b, parity)
//     returns once the phase with that parity has completed (all arrivals and
//     all expected bytes delivered).
//   fg_tmap: a 128-byte tensor map (cuTensorMapEncodeTiled), a kernel
//     parameter (`__grid_constant__` parameter struct).  fg_tma_load_2d (one
//     thread): cp.async.bulk.tensor of the box at element (c0 along the
//     contiguous axis, c1 rows) into smem_dst (1024-byte aligned for a 128B
//     swizzle), zero fill outside the tensor, the full box's bytes signalled
//     as complete_tx on b.  fg_tma_load_4d: the same over a rank-4 map,
//     coordinates from the contiguous axis out; with element strides the
//     landed elements are packed (ceil(box / estride) per axis, runtime/
//     tmap.h).  fg_fence_proxy_async: this thread's generic
//     shared-memory writes are ordered before later async-proxy accesses.
//   wgmma (all 128 threads of a warpgroup, converged): fg_wgmma_desc packs the
//     shared-memory matrix descriptor (start >> 4 in bits 0-13, leading byte
//     offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, base offset 0,
//     swizzle mode in 62-63: 1 128B, 2 64B, 3 32B); fg_wgmma_f16 / _bf16
//     <BN, TRANS_B> issue D[64 x BN] (+)= A[64 x 16] * B[16 x BN] with A
//     K-major and B K-major (TRANS_B 0: stored [BN][16]) or N-major (1:
//     [16][BN]); fg_wgmma_tf32<BN, 0> the same with k8 on fp32 operands read
//     as tf32 (32 bytes of a row per step, as above; both K-major); d[i] of
//     thread t (w = t / 32, l = t % 32) is row 16 w + l / 4 + 8 ((i / 2) % 2),
//     column 8 (i / 4) + 2 (l % 4) + i % 2.
//     The result is there only after the fg_wgmma_wait<N> that covers the
//     fg_wgmma_commit of its group; fg_wgmma_fence before the first wgmma
//     and whenever the accumulators were touched.
//   fg_setmaxnreg_inc / _dec<N>: a warpgroup's register budget (24..256).
// FG_SHARED_DYN(name, bytes): the kernel's dynamic shared memory as a byte
// array, 1024-byte aligned (the launch passes fg_kernel.smem >= bytes; the
// alignment of the window's start is not promised, so kernels that need it
// realign); the emulation prelude makes it a static FG_SHARED array of that
// size.
#define FG_SHARED_DYN(name, bytes) extern __shared__ __align__(1024) unsigned char name[]

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
struct alignas(8) fg_mbar { fg_u64 v; };
struct alignas(64) fg_tmap { fg_u64 w[16]; };

FG_DEVICE fg_u32 fg_smem_addr(const void *p) { return (fg_u32)__cvta_generic_to_shared(p); }

FG_DEVICE void fg_mbar_init(fg_mbar *b, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(fg_smem_addr(b)), "r"(count) : "memory");
}
FG_DEVICE void fg_fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
FG_DEVICE void fg_mbar_arrive(fg_mbar *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(fg_smem_addr(b)) : "memory");
}
FG_DEVICE void fg_mbar_arrive_expect_tx(fg_mbar *b, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(fg_smem_addr(b)), "r"(bytes)
                 : "memory");
}
FG_DEVICE void fg_mbar_wait(fg_mbar *b, unsigned parity)
{
    const fg_u32 a = fg_smem_addr(b);
    fg_u32 done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

FG_DEVICE void fg_tma_load_2d(void *smem_dst, const fg_tmap *m, int c0, int c1, fg_mbar *b)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];" ::"r"(fg_smem_addr(smem_dst)),
                 "l"(m), "r"(c0), "r"(c1), "r"(fg_smem_addr(b))
                 : "memory");
}
FG_DEVICE void fg_tma_load_4d(void *smem_dst, const fg_tmap *m, int c0, int c1, int c2, int c3, fg_mbar *b)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(fg_smem_addr(smem_dst)),
                 "l"(m), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(fg_smem_addr(b))
                 : "memory");
}
FG_DEVICE void fg_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

FG_DEVICE fg_u64 fg_wgmma_desc(const void *smem, int swizzle_bytes, unsigned lbo_bytes, unsigned sbo_bytes)
{
    const fg_u64 mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    return (fg_u64)((fg_smem_addr(smem) >> 4) & 0x3fffu) | (fg_u64)((lbo_bytes >> 4) & 0x3fffu) << 16 |
           (fg_u64)((sbo_bytes >> 4) & 0x3fffu) << 32 | mode << 62;
}
FG_DEVICE void fg_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
FG_DEVICE void fg_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> FG_DEVICE void fg_wgmma_wait()
{
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of the accumulators across a
// wgmma issue (the asm below reads and writes them; nothing else may).
template <int R> FG_DEVICE void fg_wgmma_fence_regs(float (&d)[R])
{
    FG_UNROLL
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}
// One wgmma issue of D[64 x N] (+)= A * B for each N the templates use, as a
// macro over the instruction's shape and types (INSTR, e.g.
// "m64n64k16.f32.f16.f16") and whether it takes transposes (TRANS): after
// scale-d, 16-bit types take scale-a, scale-b, trans-a and trans-b (TRANS 1:
// FG_WGMMA_IMMS<N>_1, with TRANS_B's operand), tf32 only the scales (TRANS 0;
// TRANS_B stays an unused operand).
// The accumulators are the asm's read-write operands, acc its scale-d.
#define FG_WGMMA_IMMS64_1 ", 1, 1, 0, %35"
#define FG_WGMMA_IMMS64_0 ", 1, 1"
#define FG_WGMMA_N64(NAME, INSTR, TRANS) \
    template <int TRANS_B> FG_DEVICE void fg_wgmma_n64_##NAME(float (&d)[32], fg_u64 da, fg_u64 db, int acc) \
    { \
        fg_wgmma_fence_regs(d); \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                     "wgmma.mma_async.sync.aligned." INSTR " {" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, " \
                     "%30, %31 " \
                     "}, %32, %33, p" FG_WGMMA_IMMS64_##TRANS ";\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
                     "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), \
                     "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                     "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), \
                     "+f"(d[30]), "+f"(d[31]) \
                     : "l"(da), "l"(db), "r"(acc), "n"(TRANS_B)); \
        fg_wgmma_fence_regs(d); \
    }
#define FG_WGMMA_IMMS128_1 ", 1, 1, 0, %67"
#define FG_WGMMA_IMMS128_0 ", 1, 1"
#define FG_WGMMA_N128(NAME, INSTR, TRANS) \
    template <int TRANS_B> FG_DEVICE void fg_wgmma_n128_##NAME(float (&d)[64], fg_u64 da, fg_u64 db, int acc) \
    { \
        fg_wgmma_fence_regs(d); \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned." INSTR " {" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, " \
                     "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, " \
                     "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
                     "%58, %59, %60, %61, %62, %63 " \
                     "}, %64, %65, p" FG_WGMMA_IMMS128_##TRANS ";\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
                     "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), \
                     "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                     "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), \
                     "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
                     "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
                     "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                     "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), \
                     "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
                     "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                     : "l"(da), "l"(db), "r"(acc), "n"(TRANS_B)); \
        fg_wgmma_fence_regs(d); \
    }
#define FG_WGMMA_IMMS256_1 ", 1, 1, 0, %131"
#define FG_WGMMA_IMMS256_0 ", 1, 1"
#define FG_WGMMA_N256(NAME, INSTR, TRANS) \
    template <int TRANS_B> FG_DEVICE void fg_wgmma_n256_##NAME(float (&d)[128], fg_u64 da, fg_u64 db, int acc) \
    { \
        fg_wgmma_fence_regs(d); \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
                     "wgmma.mma_async.sync.aligned." INSTR " {" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, " \
                     "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, " \
                     "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
                     "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, " \
                     "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, " \
                     "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
                     "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
                     "%124, %125, %126, %127 " \
                     "}, %128, %129, p" FG_WGMMA_IMMS256_##TRANS ";\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), \
                     "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
                     "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), \
                     "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                     "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), \
                     "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
                     "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
                     "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                     "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), \
                     "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
                     "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), \
                     "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
                     "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), \
                     "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
                     "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), \
                     "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
                     "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), \
                     "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), \
                     "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), \
                     "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), \
                     "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), \
                     "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), \
                     "+f"(d[126]), "+f"(d[127]) \
                     : "l"(da), "l"(db), "r"(acc), "n"(TRANS_B)); \
        fg_wgmma_fence_regs(d); \
    }
// fg_wgmma_<NAME><BN, TRANS_B>: the issue of width BN, for the types of NAME.
#define FG_WGMMA_TYPE(NAME, K, TYPES, TRANS, TB_OK, TB_WHY) \
    FG_WGMMA_N64(NAME, "m64n64" K ".f32." TYPES, TRANS) \
    FG_WGMMA_N128(NAME, "m64n128" K ".f32." TYPES, TRANS) \
    FG_WGMMA_N256(NAME, "m64n256" K ".f32." TYPES, TRANS) \
    template <int BN, int TRANS_B> \
    FG_DEVICE void fg_wgmma_##NAME(float (&d)[BN / 2], fg_u64 desc_a, fg_u64 desc_b, int accumulate) \
    { \
        static_assert(BN == 64 || BN == 128 || BN == 256, "the device prelude issues wgmma n64, n128 and n256"); \
        static_assert(TB_OK, TB_WHY); \
        if constexpr (BN == 64) \
            fg_wgmma_n64_##NAME<TRANS_B>(d, desc_a, desc_b, accumulate); \
        else if constexpr (BN == 128) \
            fg_wgmma_n128_##NAME<TRANS_B>(d, desc_a, desc_b, accumulate); \
        else \
            fg_wgmma_n256_##NAME<TRANS_B>(d, desc_a, desc_b, accumulate); \
    }
FG_WGMMA_TYPE(f16, "k16", "f16.f16", 1, TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1")
FG_WGMMA_TYPE(bf16, "k16", "bf16.bf16", 1, TRANS_B == 0 || TRANS_B == 1, "TRANS_B is 0 or 1")
FG_WGMMA_TYPE(tf32, "k8", "tf32.tf32", 0, TRANS_B == 0, "tf32 wgmma reads B K-major only")

template <int N> FG_DEVICE void fg_setmaxnreg_inc()
{
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> FG_DEVICE void fg_setmaxnreg_dec()
{
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
#endif // __CUDA_ARCH_FEAT_SM90_ALL

#endif // FUSEGEN_PRELUDE_CUH
