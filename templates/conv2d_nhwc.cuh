// ---- template conv2d_nhwc.cuh: direct convolution, NHWC, lanes on channels --
// The conv2d template's NHWC form: thread (kl, pg) = (tid % KL, tid / KL)
// computes output channel k0 + kl of PPT output pixels, pixel j of the block
// being pg + j * PG.  The KL lanes that share a pixel read the same input
// element (one broadcast), consecutive lanes read consecutive weights from
// shared memory (staged [CHUNK_C][R][S][KL]) and store consecutive channels
// of one output pixel.  Weights go through two shared stages as in conv2d:
// chunk c + 1 is staged (loads 8 at a time, then stores) before chunk c is
// multiplied, one barrier per chunk.  Accumulation in fp32; blockIdx.y =
// group * tiles_per_group + channel tile.  As in conv2d, indices that are
// divided are 32-bit and no predicate lives across the loops: pixels past the
// last one are computed on a copy of it, lanes past the group's last channel
// on zero weights, and neither is stored.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}}, 1)
{
{{SHAPES}}
    const int THREADS = {{THREADS}}, KL = {{KL}}, PG = THREADS / KL, PPT = {{PPT}};
    const fg_i64 CHUNK_C = {{CHUNK_C}};
    const fg_i64 WTILE = {{WTILE}};
    FG_SHARED float w_tile[2 * {{WTILE}}];  // two stages of [CHUNK_C][R][S][KL]

    const int tid = (int)fg_tid_x(), kl = tid % KL, pg = tid / KL;
    // output channels k0 .. k_end-1 of group g; this thread's is k
    const fg_u32 tiles_per_group = (fg_u32)((Kg + KL - 1) / KL);
    const fg_u32 g = fg_bid_y() / tiles_per_group;
    const fg_i64 k0 = (fg_i64)g * Kg + (fg_i64)(fg_bid_y() - g * tiles_per_group) * KL;
    const fg_i64 k_end = k0 + KL < (fg_i64)(g + 1) * Kg ? k0 + KL : (fg_i64)(g + 1) * Kg;
    const fg_i64 k = k0 + kl;

    // this thread's pixels: pixel j is fg_bid_x() * PG * PPT + pg + j * PG (the
    // last one for those past it), kept as its image and top-left input row and
    // column (ih0, iw0: bounds then take one unsigned compare each)
    const fg_u32 npix = (fg_u32)(N * OH * OW);
    fg_u32 pn[PPT];
    int ih0[PPT], iw0[PPT];
    FG_UNROLL
    for (int j = 0; j < PPT; j++) {
        const fg_u32 pix = fg_bid_x() * (fg_u32)(PG * PPT) + (fg_u32)(pg + j * PG);
        const fg_u32 pc = pix < npix ? pix : npix - 1;
        iw0[j] = (int)(pc % (fg_u32)OW) * (int)SW - (int)PW;
        ih0[j] = (int)(pc / (fg_u32)OW % (fg_u32)OH) * (int)SH - (int)PH;
        pn[j] = pc / (fg_u32)(OW * OH);
    }
    float acc[PPT];
    FG_UNROLL
    for (int j = 0; j < PPT; j++)
        acc[j] = 0.0f;

    // Stages weights [k0, k0 + KL) x [c0, c0 + CHUNK_C) into stage buf,
    // channel fastest (zeros past the ends): batches of 8 loads, then 8 stores.
    const int PER_THREAD = (int)((WTILE + THREADS - 1) / THREADS);
    const fg_u32 KS = (fg_u32)(KL * S), KRS = KS * (fg_u32)R;
    auto stage_weights = [&](int buf, fg_i64 c0) {
        const fg_u32 cn = (fg_u32)(Cg - c0 < CHUNK_C ? Cg - c0 : CHUNK_C);
        for (int b0 = 0; b0 < PER_THREAD; b0 += 8) {
            float v[8];
            FG_UNROLL
            for (int u = 0; u < 8; u++) {
                const fg_u32 t = (fg_u32)tid + (fg_u32)(b0 + u) * THREADS;
                const fg_u32 kk = t % KL;
                const fg_u32 s = t / KL % (fg_u32)S;
                const fg_u32 cc = t / KRS, r = (t - cc * KRS) / KS;
                v[u] = (t < WTILE && k0 + kk < k_end && cc < cn) ? fg_load(p.{{WGT}} + off_w(p, k0 + kk, c0 + cc, r, s))
                                                                 : 0.0f;
            }
            FG_UNROLL
            for (int u = 0; u < 8; u++) {
                const fg_u32 t = (fg_u32)tid + (fg_u32)(b0 + u) * THREADS;
                if (t < WTILE)
                    w_tile[buf * WTILE + t] = v[u];
            }
        }
    };

    stage_weights(0, 0);
    fg_sync();
    int buf = 0;
    for (fg_i64 c0 = 0; c0 < Cg; c0 += CHUNK_C) {
        if (c0 + CHUNK_C < Cg)
            stage_weights(buf ^ 1, c0 + CHUNK_C);
        const fg_i64 cn = Cg - c0 < CHUNK_C ? Cg - c0 : CHUNK_C;
        for (fg_i64 cc = 0; cc < cn; cc++) {
            const fg_i64 ci = g * Cg + c0 + cc;  // input channel
            for (fg_i64 r = 0; r < R; r++)
                for (fg_i64 s = 0; s < S; s++) {
                    const float wv = w_tile[buf * WTILE + ((cc * R + r) * S + s) * KL + kl];
                    FG_UNROLL
                    for (int j = 0; j < PPT; j++) {
                        const int ih = ih0[j] + (int)(r * DH), iw = iw0[j] + (int)(s * DW);
                        if ((fg_u32)ih < (fg_u32)H && (fg_u32)iw < (fg_u32)W)
                            acc[j] += fg_load(p.{{X}} + off_x(p, pn[j], ci, ih, iw)) * wv;
                    }
                }
        }
        fg_sync();   // the next stage is complete; this one is free for the chunk after
        buf ^= 1;
    }
    if (k >= k_end)
        return;
    FG_UNROLL
    for (int j = 0; j < PPT; j++) {
        const fg_u32 pix = fg_bid_x() * (fg_u32)(PG * PPT) + (fg_u32)(pg + j * PG);
        if (pix >= npix)
            continue;
        const fg_u32 ow = pix % (fg_u32)OW, oh = pix / (fg_u32)OW % (fg_u32)OH;
        const float v = fg_epilogue(p, acc[j], pn[j], k, oh, ow);
        fg_store(p.{{Y}} + off_y(p, pn[j], k, oh, ow), v);
    }
}
