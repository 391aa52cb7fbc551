// fusegen kernel fg_conv_act_27cb6f0c1cc1 (group 0)
//   rule:      conv_act (goldrules/rules.yaml:2)
//   nodes:     c1 (conv2d), r1 (relu)
//   template:  conv2d (conv2d.cuh)
//   output:    r1 [1, 4, 5, 5] fp32 NCHW
//   precision: exact
//   generator: fusegen 0.1.0
//   deps:      aca08ec3a5ca92ce9db0c005c8652391 (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_conv_act_27cb6f0c1cc1 {
    const float *x;                      // in  x [1, 3, 5, 5] fp32 NCHW
    const float *c1_w;                   // in  c1.w [4, 3, 3, 3] fp32 NCHW
    float *r1;                           // out r1 [1, 4, 5, 5] fp32 NCHW
    const float *c1_b;                   // in  c1.b [4] fp32
};

// offset of x NCHW at logical coordinates (n, c, h, w)
FG_DEVICE fg_i64 off_x(const fg_params_fg_conv_act_27cb6f0c1cc1 &p, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    return c * 25 + h * 5 + w;
}

// offset of c1.w NCHW at logical coordinates (k, c, r, s)
FG_DEVICE fg_i64 off_w(const fg_params_fg_conv_act_27cb6f0c1cc1 &p, fg_i64 k, fg_i64 c, fg_i64 r, fg_i64 s)
{
    return k * 27 + c * 9 + r * 3 + s;
}

// offset of r1 NCHW at logical coordinates (n, c, h, w)
FG_DEVICE fg_i64 off_y(const fg_params_fg_conv_act_27cb6f0c1cc1 &p, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    return c * 25 + h * 5 + w;
}

// epilogue: applied to each accumulator before the one store;
// (n, c, h, w) are the logical coordinates of r1
FG_DEVICE float fg_epilogue(const fg_params_fg_conv_act_27cb6f0c1cc1 &p, float v, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    // epilogue: bias (c1.b)
    v = v + fg_load(p.c1_b + c);
    // epilogue: apply r1: x > 0 ? x : 0
    v = ((v > 0.0f) ? v : 0.0f);
    return v;
}

// ---- template conv2d.cuh: direct convolution -----------------------------------
// Each thread computes TILE_K output channels of one output pixel (n, oh, ow).
// The block's TILE_K channels lie in one group; their weights are staged in
// shared memory CHUNK_C input channels at a time and reused by every thread.
// Two weight stages: while chunk c is multiplied from one, chunk c + 1 was
// staged into the other just before, each thread issuing its loads 8 at a
// time (independent, so they are in flight together) before storing them;
// one barrier per chunk.  Accumulation in fp32; blockIdx.y = group *
// tiles_per_group + channel tile.
// Indices that are divided are 32-bit (the emitter checks that pixels and
// weight tiles fit): with shapes as parameters, a 64-bit division is a call
// whose live registers go to a stack frame.  Threads past the last pixel
// compute a copy of it and store nothing, so no predicate lives across the
// loops.
FG_KERNEL(fg_conv_act_27cb6f0c1cc1, fg_params_fg_conv_act_27cb6f0c1cc1, 128, 1)
{
    const fg_i64 N = 1;
    const fg_i64 H = 5;
    const fg_i64 W = 5;
    const fg_i64 OH = 5;
    const fg_i64 OW = 5;
    const fg_i64 R = 3;
    const fg_i64 S = 3;
    const fg_i64 Cg = 3;
    const fg_i64 Kg = 4;
    const fg_i64 SH = 1;
    const fg_i64 SW = 1;
    const fg_i64 PH = 1;
    const fg_i64 PW = 1;
    const fg_i64 DH = 1;
    const fg_i64 DW = 1;
    const fg_i64 TILE_K = 4;
    const fg_i64 CHUNK_C = 3;
    const fg_i64 WTILE = 108;
    FG_SHARED float w_tile[2 * 108];  // two stages of [TILE_K][CHUNK_C][R][S]

    // output channels k0 .. k_end-1 of group g
    const fg_u32 tiles_per_group = (fg_u32)((Kg + TILE_K - 1) / TILE_K);
    const fg_u32 g = fg_bid_y() / tiles_per_group;
    const fg_i64 k0 = (fg_i64)g * Kg + (fg_i64)(fg_bid_y() - g * tiles_per_group) * TILE_K;
    const fg_i64 k_end = k0 + TILE_K < (fg_i64)(g + 1) * Kg ? k0 + TILE_K : (fg_i64)(g + 1) * Kg;

    // output pixel of this thread (the last one for threads past it)
    const fg_u32 npix = (fg_u32)(N * OH * OW);
    const fg_u32 pix = fg_bid_x() * fg_bdim_x() + fg_tid_x();
    const fg_u32 pc = pix < npix ? pix : npix - 1;
    const fg_u32 ow = pc % (fg_u32)OW;
    const fg_u32 oh = pc / (fg_u32)OW % (fg_u32)OH;
    const fg_u32 n = pc / (fg_u32)(OW * OH);

    float acc[4];
    for (int kk = 0; kk < TILE_K; kk++)
        acc[kk] = 0.0f;

    // Stages weights [k0, k0 + TILE_K) x [c0, c0 + CHUNK_C) into stage buf
    // (zeros past the ends): per thread, batches of 8 loads, then 8 stores.
    const int THREADS = 128, PER_THREAD = (int)((WTILE + THREADS - 1) / THREADS);
    const fg_u32 RS = (fg_u32)(R * S), CRS = (fg_u32)CHUNK_C * RS;
    auto stage_weights = [&](int buf, fg_i64 c0) {
        const fg_u32 cn = (fg_u32)(Cg - c0 < CHUNK_C ? Cg - c0 : CHUNK_C);
        for (int b0 = 0; b0 < PER_THREAD; b0 += 8) {
            float v[8];
            FG_UNROLL
            for (int u = 0; u < 8; u++) {
                const fg_u32 t = fg_tid_x() + (fg_u32)(b0 + u) * THREADS;
                const fg_u32 kk = t / CRS, crs = t - kk * CRS;
                const fg_u32 cc = crs / RS, rs = crs - cc * RS;
                const fg_u32 r = rs / (fg_u32)S, s = rs - r * (fg_u32)S;
                v[u] = (t < WTILE && k0 + kk < k_end && cc < cn) ? fg_load(p.c1_w + off_w(p, k0 + kk, c0 + cc, r, s))
                                                                 : 0.0f;
            }
            FG_UNROLL
            for (int u = 0; u < 8; u++) {
                const fg_u32 t = fg_tid_x() + (fg_u32)(b0 + u) * THREADS;
                if (t < WTILE)
                    w_tile[buf * WTILE + t] = v[u];
            }
        }
    };

    stage_weights(0, 0);
    fg_sync();
    int buf = 0;
    for (fg_i64 c0 = 0; c0 < Cg; c0 += CHUNK_C) {
        // the next chunk into the other stage (free: everyone passed the last barrier)
        if (c0 + CHUNK_C < Cg)
            stage_weights(buf ^ 1, c0 + CHUNK_C);
        const fg_i64 cn = Cg - c0 < CHUNK_C ? Cg - c0 : CHUNK_C;
        FG_UNROLL_BY(4)   // fully unrolled, a one-chunk 1x1 conv's 256 channels spilled on sm_80
        for (fg_i64 cc = 0; cc < cn; cc++) {
            const fg_i64 ci = (fg_i64)g * Cg + c0 + cc;  // input channel
            for (fg_i64 r = 0; r < R; r++) {
                const fg_i64 ih = (fg_i64)oh * SH - PH + r * DH;
                if (ih < 0 || ih >= H)
                    continue;
                for (fg_i64 s = 0; s < S; s++) {
                    const fg_i64 iw = (fg_i64)ow * SW - PW + s * DW;
                    if (iw < 0 || iw >= W)
                        continue;
                    const float xv = fg_load(p.x + off_x(p, n, ci, ih, iw));
                    const float *wt = &w_tile[buf * WTILE + (cc * R + r) * S + s];
                    for (int kk = 0; kk < TILE_K; kk++)
                        acc[kk] += xv * wt[kk * CHUNK_C * R * S];
                }
            }
        }
        fg_sync();   // the next stage is complete; this one is free for the chunk after
        buf ^= 1;
    }
    if (pix >= npix)
        return;
    for (int kk = 0; kk < TILE_K; kk++) {
        const fg_i64 k = k0 + kk;
        if (k >= k_end)
            break;
        const float v = fg_epilogue(p, acc[kk], n, k, oh, ow);
        fg_store(p.r1 + off_y(p, n, k, oh, ow), v);
    }
}
