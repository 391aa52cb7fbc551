// ---- template conv2d_tc.cuh: implicit-GEMM convolution on tensor cores -------
// NHWC, groups 1; fp16 / bf16 (mma.sync m16n8k16) or, with the graph's
// precision tf32, fp32 (mma.sync m16n8k8 on operands rounded to tf32).  The
// GEMM: row m = output pixel (n, oh, ow), M = N*OH*OW; column = output
// channel k, K of them; reduction index kk = (r*S + s)*C + c over RSC =
// R*S*C.  kk runs along C within one filter tap, which is how an input pixel
// (NHWC) and a weight row ([K, R, S, C], the NHWC weight layout) are stored.
// When C is a multiple of EPC (8 fp16 / bf16 elements, 4 fp32) A and B are
// read in place, 16 bytes (EPC channels of one tap) at a time; otherwise
// (GATHER: a network's first layer, C = 3, or an NCHW input, X_NCHW)
// element by element into registers, all loads of a tile issued together
// one tile ahead of its use (gather_issue / gather_store).
//
// A block computes a BM x BN output tile with WARPS_M x WARPS_N warps; a
// warp computes a WM x WN patch as MI x NI mma fragments with fp32
// accumulators.  A reduction tile is 64 bytes per row (BK = 4 * EPC
// elements, two mma k steps) through a 3-stage cp.async pipeline: while
// tile kt is multiplied, tiles kt+1 and kt+2 are in flight.  Copies past the
// image (padding), past M, K or RSC are zero-filled (src-size 0).  Shared
// tiles are rows of four 16-byte chunks, chunk q of row i stored at
// q ^ ((i >> 1) & 3): the 8 rows one ldmatrix phase reads, and the chunks
// one warp's cp.async writes, hit distinct banks.  Fragments come from
// ldmatrix.x4 (both operands have kk contiguous, so no .trans; the tf32
// fragments of m16n8k8 have the byte layout of the 16-bit ones of m16n8k16,
// and each 32-bit register is then rounded to tf32).
//
// Split-K (SPLITS > 1): block z of the grid's third axis reduces its share
// of the k tiles, writes its accumulators to slot z of its tile in the
// workspace, and the last block of the tile to arrive (an integer counter)
// adds the SPLITS slots in order 0, 1, ... -- the same sum whatever the
// arrival order -- resets the counter, and alone runs the epilogue, which
// stores pairs of channels together.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int BM = {{BM}}, BN = {{BN}}, EPC = {{EPC}}, BK = 4 * EPC, STAGES = 3, THREADS = {{THREADS}};
    const int KT_SPLIT = {{KT_SPLIT}};   // k tiles per split (the last may have fewer)
    const int WARPS_M = {{WARPS_M}}, WARPS_N = {{WARPS_N}};
    const int WM = BM / WARPS_M, WN = BN / WARPS_N;   // one warp's patch
    const int MI = WM / 16, NI = WN / 8;              // its fragments
    const int A_ITERS = BM * 4 / THREADS, B_ITERS = BN * 4 / THREADS;   // chunks per thread and tile
    FG_SHARED fg_chunk16 a_s[STAGES * BM * 4];   // [stage][m][chunk], swizzled
    FG_SHARED fg_chunk16 b_s[STAGES * BN * 4];   // [stage][k][chunk], swizzled

    const int tid = (int)fg_tid_x();
    const int lane = (int)fg_lane();
    const int warp = (int)fg_warp();
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const int m0 = (int)fg_bid_x() * BM;
    const int n0 = (int)fg_bid_y() * BN;

    // The loader: this thread copies chunk q of rows tid / 4 + i * THREADS / 4
    // of both tiles.  Per A row, the image and the window's corner; per B row,
    // the weight row.
    const int q = tid & 3;
    const {{T}} *a_img[A_ITERS];
    int a_ih0[A_ITERS], a_iw0[A_ITERS];
    bool a_ok[A_ITERS];
    FG_UNROLL
    for (int i = 0; i < A_ITERS; i++) {
        const int m = m0 + tid / 4 + i * (THREADS / 4);
        const int ow = m % (int)OW, oh = m / (int)OW % (int)OH, n = m / (int)(OW * OH);
        a_ok[i] = m < M;
        a_img[i] = p.{{X}} + (a_ok[i] ? (fg_i64)n * (H * W * C) : 0);
        a_ih0[i] = oh * (int)SH - (int)PH;
        a_iw0[i] = ow * (int)SW - (int)PW;
    }
    const {{T}} *b_row[B_ITERS];
    bool b_ok[B_ITERS];
    FG_UNROLL
    for (int j = 0; j < B_ITERS; j++) {
        const int k = n0 + tid / 4 + j * (THREADS / 4);
        b_ok[j] = k < K;
        b_row[j] = p.{{WGT}} + (b_ok[j] ? (fg_i64)k * RSC : 0);
    }

{{#GATHER}}
    // C is not a multiple of EPC (or x is NCHW): a chunk's EPC reduction
    // indices may lie in different filter taps and are not 16-byte aligned,
    // so they are gathered element by element, in two steps.  gather_issue
    // loads all of this thread's A_ITERS x EPC and B_ITERS x EPC elements of
    // tile kt into registers (zero past the image, M, K and RSC): the loop is
    // unrolled, the tap (r, s) and channel c of each index are computed
    // directly (no chain through the previous index), so every load is
    // independent and they are all in flight together.  gather_store writes
    // them to stage `dst`, one 16-byte shared store per chunk.  The main loop
    // issues tile it + STAGES - 1 before the mma steps of tile it and stores
    // it after them, so the loads' latency is under the tensor-core work.
    {{T}} ga[A_ITERS][EPC], gb[B_ITERS][EPC];
    auto gather_issue = [&](int kt) {
        const int kk = kt * BK + q * EPC;
        FG_UNROLL
        for (int e = 0; e < EPC; e++) {
            const int ke = kk + e;
            const bool ke_ok = ke < RSC;
            const int c = ke % (int)C, rs = ke / (int)C;
            const int s = rs % (int)S, r = rs / (int)S;
            FG_UNROLL
            for (int i = 0; i < A_ITERS; i++) {
                const int ih = a_ih0[i] + r * (int)DH, iw = a_iw0[i] + s * (int)DW;
                const bool ok = ke_ok && a_ok[i] && ih >= 0 && ih < H && iw >= 0 && iw < W;
{{^X_NCHW}}
                ga[i][e] = ok ? a_img[i][(ih * (int)W + iw) * (int)C + c] : {{T}}{};
{{/X_NCHW}}
{{#X_NCHW}}
                ga[i][e] = ok ? a_img[i][(c * (int)H + ih) * (int)W + iw] : {{T}}{};   // x is NCHW
{{/X_NCHW}}
            }
            FG_UNROLL
            for (int j = 0; j < B_ITERS; j++)
                gb[j][e] = b_ok[j] && ke_ok ? b_row[j][ke] : {{T}}{};
        }
    };
    // One chunk of EPC gathered elements as four 32-bit words.
    auto gather_chunk = [&](const {{T}} *v) {
        fg_chunk16 ch;
        FG_UNROLL
        for (int w = 0; w < 4; w++)
{{#TF32}}
            ch.w[w] = fg_f2tf32(v[w]);
{{/TF32}}
{{^TF32}}
            ch.w[w] = {{PACK}}(v[2 * w], v[2 * w + 1]);
{{/TF32}}
        return ch;
    };
    auto gather_store = [&](int dst) {
        FG_UNROLL
        for (int i = 0; i < A_ITERS; i++) {
            const int row = tid / 4 + i * (THREADS / 4);
            a_s[(dst * BM + row) * 4 + (q ^ ((row >> 1) & 3))] = gather_chunk(ga[i]);
        }
        FG_UNROLL
        for (int j = 0; j < B_ITERS; j++) {
            const int row = tid / 4 + j * (THREADS / 4);
            b_s[(dst * BN + row) * 4 + (q ^ ((row >> 1) & 3))] = gather_chunk(gb[j]);
        }
    };

{{/GATHER}}
    // Issues the copies of reduction tile kt into stage `dst`.
    auto load_tile = [&](int dst, int kt) {
{{#GATHER}}
        gather_issue(kt);
        gather_store(dst);
{{/GATHER}}
{{^GATHER}}
        const int kk = kt * BK + q * EPC;
        const bool kk_ok = kk < RSC;
        const int c = kk % (int)C, rs = kk / (int)C;
        const int s = rs % (int)S, r = rs / (int)S;
        FG_UNROLL
        for (int i = 0; i < A_ITERS; i++) {
            const int row = tid / 4 + i * (THREADS / 4);
            const int ih = a_ih0[i] + r * (int)DH, iw = a_iw0[i] + s * (int)DW;
            const bool ok = kk_ok && a_ok[i] && ih >= 0 && ih < H && iw >= 0 && iw < W;
            const {{T}} *src = ok ? a_img[i] + (ih * (int)W + iw) * (int)C + c : p.{{X}};
            fg_cp_async16_zfill(&a_s[(dst * BM + row) * 4 + (q ^ ((row >> 1) & 3))], src, ok);
        }
        FG_UNROLL
        for (int j = 0; j < B_ITERS; j++) {
            const int row = tid / 4 + j * (THREADS / 4);
            const bool ok = kk_ok && b_ok[j];
            fg_cp_async16_zfill(&b_s[(dst * BN + row) * 4 + (q ^ ((row >> 1) & 3))], ok ? b_row[j] + kk : p.{{WGT}},
                                ok);
        }
{{/GATHER}}
    };

    float acc[MI][NI][4];
    FG_UNROLL
    for (int mi = 0; mi < MI; mi++)
        FG_UNROLL
        for (int ni = 0; ni < NI; ni++)
            FG_UNROLL
            for (int e = 0; e < 4; e++)
                acc[mi][ni][e] = 0.0f;

    // this block's k tiles: [kt0, kt0 + NT)
    const int KT = (int)((RSC + BK - 1) / BK);
    const int kt0 = (int)fg_bid_z() * KT_SPLIT;
    const int NT = KT - kt0 < KT_SPLIT ? KT - kt0 : KT_SPLIT;
    FG_UNROLL
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < NT)
            load_tile(st, kt0 + st);
        fg_cp_async_commit();
    }
    int stage = 0, free_stage = STAGES - 1;   // it % STAGES, (it - 1) % STAGES
    for (int it = 0; it < NT; it++) {
        fg_cp_async_wait_group<STAGES - 2>();   // this thread's copies of tile it have landed
        fg_sync();                              // everyone's have; free_stage is read by nobody
{{#GATHER}}
        const bool ahead = it + STAGES - 1 < NT;
        if (ahead)
            gather_issue(kt0 + it + STAGES - 1);   // stored after this tile's mma steps
{{/GATHER}}
{{^GATHER}}
        if (it + STAGES - 1 < NT)
            load_tile(free_stage, kt0 + it + STAGES - 1);
{{/GATHER}}
        fg_cp_async_commit();                   // possibly empty: the group count stays in step
        FG_UNROLL
        for (int ks = 0; ks < 2; ks++) {        // two mma k steps of 32 bytes
            fg_u32 af[MI][4], bf[NI][2];
            // A: lane l addresses row l % 16 of the m16 x k16 block, chunk l / 16
            FG_UNROLL
            for (int mi = 0; mi < MI; mi++) {
                const int row = warp_m * WM + mi * 16 + (lane & 15);
                const int ch = ks * 2 + (lane >> 4);
                fg_ldmatrix_x4(af[mi], &a_s[(stage * BM + row) * 4 + (ch ^ ((row >> 1) & 3))]);
            }
            // B: two n8 fragments per ldmatrix; lane l addresses column
            // (l & 7) + 8 * (l >> 4), chunk (l >> 3) & 1
            FG_UNROLL
            for (int nj = 0; nj < NI / 2; nj++) {
                const int row = warp_n * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int ch = ks * 2 + ((lane >> 3) & 1);
                fg_u32 t[4];
                fg_ldmatrix_x4(t, &b_s[(stage * BN + row) * 4 + (ch ^ ((row >> 1) & 3))]);
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
{{#TF32}}
            // fp32 bits -> tf32 (cvt.rna), as mma .tf32 takes them
            FG_UNROLL
            for (int mi = 0; mi < MI; mi++)
                FG_UNROLL
                for (int e = 0; e < 4; e++)
                    af[mi][e] = fg_tf32_bits(af[mi][e]);
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 2; e++)
                    bf[ni][e] = fg_tf32_bits(bf[ni][e]);
{{/TF32}}
            FG_UNROLL
            for (int mi = 0; mi < MI; mi++)
                FG_UNROLL
                for (int ni = 0; ni < NI; ni++)
                    {{MMA}}(acc[mi][ni], af[mi], bf[ni], acc[mi][ni]);
        }
{{#GATHER}}
        if (ahead)
            gather_store(free_stage);           // read at iteration it + STAGES - 1, after two fg_syncs
{{/GATHER}}
        free_stage = stage;
        stage = stage == STAGES - 1 ? 0 : stage + 1;
    }
    // (the groups still open are empty: nothing is left in flight)
{{#SPLIT}}

    // Split-K: slot z of this tile's SPLITS slots of BM * BN floats, each
    // thread's accumulators at [(mi, ni, e)][tid]; one counter per tile in the
    // counters buffer.
    {
        const int SPLITS = {{SPLITS}};
        float *ws = (float *)p.{{WS}};
        const fg_i64 tile = (fg_i64)fg_bid_y() * fg_gdim_x() + fg_bid_x();
        float *slot = ws + (tile * SPLITS + fg_bid_z()) * (fg_i64)(BM * BN);
        FG_UNROLL
        for (int mi = 0; mi < MI; mi++)
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 4; e++)
                    slot[((mi * NI + ni) * 4 + e) * THREADS + tid] = acc[mi][ni][e];
        fg_threadfence();                        // the slot is visible before the count
        fg_sync();
        FG_SHARED int last_block;
        if (tid == 0) {
            int *count = p.{{WSC}} + tile;
            const int arrived = fg_atomic_add_i32(count, 1);
            last_block = arrived == SPLITS - 1;
            if (last_block)
                *count = 0;                      // ready for the next launch
        }
        fg_sync();
        if (!last_block)
            return;
        fg_threadfence();                        // see the other blocks' slots
        const float *base = ws + tile * SPLITS * (fg_i64)(BM * BN);
        FG_UNROLL
        for (int mi = 0; mi < MI; mi++)
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 4; e++) {
                    const int at = ((mi * NI + ni) * 4 + e) * THREADS + tid;
                    float sum = base[at];
                    for (int z = 1; z < SPLITS; z++)   // fixed order: split 0, 1, 2, ...
                        sum += base[(fg_i64)z * (BM * BN) + at];
                    acc[mi][ni][e] = sum;
                }
    }
{{/SPLIT}}

    // C fragment: e = 0, 1 -> row group, columns tig*2 + {0, 1}; e = 2, 3 -> row group + 8
    const int group = lane >> 2, tig = lane & 3;
{{#VEC_EPI}}
    // K a multiple of 8: per four n8 fragments 4 g .. 4 g + 3 of a row the quad
    // (lanes 4 group .. 4 group + 3) transposes its column pairs, as gemm_wgmma.cuh's
    // epilogue does, so that lane tig holds fragment 4 g + tig's eight columns;
    // fg_epilogue8 reads the epilogue's inputs along them 16 bytes at a time and
    // one 16-byte store writes them.  Every lane takes part in the shuffles;
    // rows and columns past the output store nothing (a predicate, no branch).
    FG_UNROLL
    for (int mi = 0; mi < MI; mi++)
        FG_UNROLL
        for (int h = 0; h < 2; h++) {
            const int m = m0 + warp_m * WM + mi * 16 + h * 8 + group;
            const fg_i64 ow = m % (int)OW, oh = m / (int)OW % (int)OH, n = m / (int)(OW * OH);
            FG_UNROLL
            for (int g = 0; g < NI / 4; g++) {
                float a[8];   // a[2 j + e]: column 2 tig + e of fragment 4 g + j, then fragment 4 g + tig's column 2 j + e
                FG_UNROLL
                for (int j = 0; j < 4; j++) {
                    a[2 * j] = acc[mi][4 * g + j][h * 2];
                    a[2 * j + 1] = acc[mi][4 * g + j][h * 2 + 1];
                }
                FG_UNROLL
                for (int bit = 1; bit <= 2; bit *= 2) {   // the quad transpose of gemm_wgmma.cuh's epilogue
                    const bool hi = (tig & bit) != 0;
                    FG_UNROLL
                    for (int i = 0; i < 2; i++) {
                        const int lo = bit == 1 ? 2 * i : i, up = lo + bit;   // pair slots with that bit clear and set
                        FG_UNROLL
                        for (int e = 0; e < 2; e++) {
                            const float x = fg_shfl_xor(hi ? a[2 * lo + e] : a[2 * up + e], bit);
                            a[2 * lo + e] = hi ? x : a[2 * lo + e];
                            a[2 * up + e] = hi ? a[2 * up + e] : x;
                        }
                    }
                }
                const fg_i64 k = n0 + warp_n * WN + (4 * g + tig) * 8;
                if (m < M && k < K) {
                    fg_epilogue8(p, a, n, k, oh, ow);
                    fg_store8(p.{{Y}} + off_y(p, n, k, oh, ow), a);
                }
            }
        }
{{/VEC_EPI}}
{{^VEC_EPI}}
    FG_UNROLL
    for (int mi = 0; mi < MI; mi++)
        FG_UNROLL
        for (int h = 0; h < 2; h++) {
            const int m = m0 + warp_m * WM + mi * 16 + h * 8 + group;
            if (m >= M)
                continue;
            const fg_i64 ow = m % (int)OW, oh = m / (int)OW % (int)OH, n = m / (int)(OW * OH);
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++) {
                const fg_i64 k = n0 + warp_n * WN + ni * 8 + tig * 2;
                if (k >= K)
                    continue;
                const float v0 = fg_epilogue(p, acc[mi][ni][h * 2], n, k, oh, ow);
{{#PAIR}}
                // K is even: channel k + 1 exists and the pair is 4-byte aligned
                const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], n, k + 1, oh, ow);
                fg_store2(p.{{Y}} + off_y(p, n, k, oh, ow), v0, v1);
{{/PAIR}}
{{^PAIR}}
                fg_store(p.{{Y}} + off_y(p, n, k, oh, ow), v0);
                if (k + 1 < K) {
                    const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], n, k + 1, oh, ow);
                    fg_store(p.{{Y}} + off_y(p, n, k + 1, oh, ow), v1);
                }
{{/PAIR}}
            }
        }
{{/VEC_EPI}}
}
