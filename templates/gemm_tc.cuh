// ---- template gemm_tc.cuh: matrix multiply on tensor cores -------------------
// Y[bt] = A[bt] (M x K) * B[bt] (K x N) with mma.sync, fp32 accumulation:
// m16n8k16 for fp16 / bf16, m16n8k8 tf32 for fp32 when the graph's precision
// is tf32 (operands rounded by cvt.rna).  A block computes a BM x BN tile
// with WARPS_M x WARPS_N warps; a warp a WM x WN patch of MI x NI fragments.
// The reduction advances BK = 64 bytes of k (EPC elements per 16-byte chunk,
// BK = 4 * EPC) at a time through a STAGES-deep cp.async pipeline: while
// tile kt is multiplied, tiles kt+1 .. kt+STAGES-1 are in flight.
//
// Shared tiles are 16-byte chunks, each operand copied along its contiguous
// axis so that a warp reads whole 16-byte runs of global memory:
//   - "k-chunk" tiles (A [M, K]; B stored [N, K]): BM (BN) rows of 4 chunks
//     along k; chunk q of row r stored at q ^ ((r >> 1) & 3); fragments by
//     ldmatrix.x4.
//   - "k-row" tiles (A stored [K, M]; B [K, N]): BK rows (k) of BM / EPC
//     (BN / EPC) chunks along m (n), chunk q of row r stored at q ^ (r & 7)
//     (rows of 8+ chunks), q ^ ((r >> 1) & 3) (4) or q ^ ((r >> 2) & 1) (2);
//     fragments by ldmatrix.x4.trans (16-bit), or element by element (tf32:
//     .trans moves 16-bit halves).
// Either way the 8 rows one ldmatrix phase reads, and the chunks a warp's
// copies write, fall in distinct banks.  With VEC the chunks are copied by
// cp.async (16 bytes, zero-filled past M, N or K); without (a contiguous axis
// not a multiple of EPC), element by element with the same guards.
//
// Split-K (SPLITS > 1): blockIdx.z = batch * SPLITS + split; split s
// multiplies k tiles [s * KT_SPLIT, ...) and writes its accumulators to a
// workspace slot; the last of a tile's blocks to arrive (an integer counter)
// adds the slots in split order 0, 1, ... (the same sum on every run) and
// runs the epilogue.  The epilogue runs once, on the accumulators; pairs of
// columns are stored together.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int BM = {{BM}}, BN = {{BN}}, EPC = {{EPC}}, BK = 4 * EPC, STAGES = {{STAGES}}, THREADS = {{THREADS}};
    const int SPLITS = {{SPLITS}}, KT_SPLIT = {{KT_SPLIT}};
    const int WARPS_M = {{WARPS_M}}, WARPS_N = {{WARPS_N}};
    const int WM = BM / WARPS_M, WN = BN / WARPS_N;   // one warp's patch
    const int MI = WM / 16, NI = WN / 8;              // its fragments
    const int A_ITERS = BM * 4 / THREADS, B_ITERS = BN * 4 / THREADS;   // chunks per thread and tile
    FG_SHARED fg_chunk16 a_s[STAGES * BM * 4];   // [stage][BM * BK / EPC chunks], swizzled
    FG_SHARED fg_chunk16 b_s[STAGES * BN * 4];   // [stage][BN * BK / EPC chunks], swizzled

    const int tid = (int)fg_tid_x();
    const int lane = (int)fg_lane();
    const int warp = (int)fg_warp();
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const fg_i64 bt = fg_bid_z() / SPLITS;   // the batch
    const int split = (int)(fg_bid_z() % SPLITS);
    const fg_i64 m0 = (fg_i64)fg_bid_y() * BM;
    const fg_i64 n0 = (fg_i64)fg_bid_x() * BN;
{{BATCH}}
    const {{T}} *A = p.{{A}} + a_base;
    const {{T}} *B = p.{{B}} + b_base;

    // One chunk: `lim` (0..EPC) elements from src, zeros after them.
    auto load_chunk = [&](fg_chunk16 *dst, const {{T}} *src, fg_i64 lim) {
{{#VEC}}
        fg_cp_async16_zfill(dst, src, lim > 0);   // lim is 0 or EPC; src valid either way
{{/VEC}}
{{^VEC}}
{{#TF32}}
        fg_chunk16 c;
        FG_UNROLL
        for (int i = 0; i < 4; i++)
            c.w[i] = i < lim ? fg_f2tf32(src[i]) : 0u;
        *dst = c;
{{/TF32}}
{{^TF32}}
        {{T}} e[8];
        FG_UNROLL
        for (int i = 0; i < 8; i++) {
            e[i].bits = 0;
            if (i < lim)
                e[i] = src[i];
        }
        fg_chunk16 c;
        FG_UNROLL
        for (int i = 0; i < 4; i++)
            c.w[i] = {{PACK}}(e[2 * i], e[2 * i + 1]);
        *dst = c;
{{/TF32}}
{{/VEC}}
    };

    // Issues the copies of reduction tile kt into stage `dst`: chunk
    // c = tid + i * THREADS of each operand's tile.
    auto load_tile = [&](int dst, int kt) {
        const fg_i64 k0 = (fg_i64)kt * BK;
        FG_UNROLL
        for (int i = 0; i < A_ITERS; i++) {
            const int c = tid + i * THREADS;
{{^A_KROW}}
            const int r = c >> 2, q = c & 3;             // row m0 + r, k0 + EPC q..
            const fg_i64 m = m0 + r, k = k0 + q * EPC;
            const fg_i64 lim = m < M && k < K ? (K - k < EPC ? K - k : EPC) : 0;
            load_chunk(&a_s[(dst * BM + r) * 4 + (q ^ ((r >> 1) & 3))], lim > 0 ? A + m * K + k : A, lim);
{{/A_KROW}}
{{#A_KROW}}
            const int CH = BM / EPC, r = c / CH, q = c % CH;   // row k0 + r, m0 + EPC q..
            const fg_i64 k = k0 + r, m = m0 + q * EPC;
            const fg_i64 lim = m < M && k < K ? (M - m < EPC ? M - m : EPC) : 0;
            const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
            load_chunk(&a_s[dst * BM * 4 + r * CH + sq], lim > 0 ? A + k * M + m : A, lim);
{{/A_KROW}}
        }
        FG_UNROLL
        for (int j = 0; j < B_ITERS; j++) {
            const int c = tid + j * THREADS;
{{^B_KROW}}
            const int r = c >> 2, q = c & 3;             // column n0 + r, k0 + EPC q..
            const fg_i64 n = n0 + r, k = k0 + q * EPC;
            const fg_i64 lim = n < N && k < K ? (K - k < EPC ? K - k : EPC) : 0;
            load_chunk(&b_s[(dst * BN + r) * 4 + (q ^ ((r >> 1) & 3))], lim > 0 ? B + n * K + k : B, lim);
{{/B_KROW}}
{{#B_KROW}}
            const int CH = BN / EPC, r = c / CH, q = c % CH;   // row k0 + r, n0 + EPC q..
            const fg_i64 k = k0 + r, n = n0 + q * EPC;
            const fg_i64 lim = n < N && k < K ? (N - n < EPC ? N - n : EPC) : 0;
            const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
            load_chunk(&b_s[dst * BN * 4 + r * CH + sq], lim > 0 ? B + k * N + n : B, lim);
{{/B_KROW}}
        }
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
    const int KT = (int)((K + BK - 1) / BK);
    const int kt0 = split * KT_SPLIT;
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
        if (it + STAGES - 1 < NT)
            load_tile(free_stage, kt0 + it + STAGES - 1);
        fg_cp_async_commit();                   // possibly empty: the group count stays in step
        FG_UNROLL
        for (int ks = 0; ks < 2; ks++) {        // two mma k steps of 32 bytes
            fg_u32 af[MI][4], bf[NI][2];
            FG_UNROLL
            for (int mi = 0; mi < MI; mi++) {
{{^A_KROW}}
                // lane l addresses row l % 16 of the m16 x k16 block, chunk l / 16
                const int r = warp_m * WM + mi * 16 + (lane & 15);
                const int ch = ks * 2 + (lane >> 4);
                fg_ldmatrix_x4(af[mi], &a_s[(stage * BM + r) * 4 + (ch ^ ((r >> 1) & 3))]);
{{/A_KROW}}
{{#A_KROW}}
{{^TF32}}
                // transposed: lane l addresses k row (l & 7) + 8 (l >> 4), m chunk (l >> 3) & 1
                const int CH = BM / EPC;
                const int r = ks * 2 * EPC + (lane & 7) + ((lane >> 4) << 3);
                const int q = (warp_m * WM + mi * 16) / EPC + ((lane >> 3) & 1);
                const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
                fg_ldmatrix_x4_trans(af[mi], &a_s[stage * BM * 4 + r * CH + sq]);
{{/TF32}}
{{#TF32}}
                // k-row fp32 tile: a[e] is (m g + 8 (e & 1), k t + 4 (e >> 1)), g = lane / 4, t = lane % 4
                const int CH = BM / EPC;
                FG_UNROLL
                for (int e = 0; e < 4; e++) {
                    const int r = ks * 2 * EPC + (lane & 3) + (e >> 1) * 4;
                    const int m = warp_m * WM + mi * 16 + (lane >> 2) + (e & 1) * 8, q = m / EPC;
                    const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
                    af[mi][e] = a_s[stage * BM * 4 + r * CH + sq].w[m % EPC];
                }
{{/TF32}}
{{/A_KROW}}
            }
{{^B_TF32_ELEM}}
            // two n8 fragments per ldmatrix
            FG_UNROLL
            for (int nj = 0; nj < NI / 2; nj++) {
                fg_u32 t[4];
{{^B_KROW}}
                // lane l addresses column (l & 7) + 8 (l >> 4), k chunk (l >> 3) & 1
                const int r = warp_n * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int ch = ks * 2 + ((lane >> 3) & 1);
                fg_ldmatrix_x4(t, &b_s[(stage * BN + r) * 4 + (ch ^ ((r >> 1) & 3))]);
{{/B_KROW}}
{{#B_KROW}}
                // transposed: lane l addresses k row (l & 7) + 8 ((l >> 3) & 1), n chunk l >> 4
                const int CH = BN / EPC;
                const int r = ks * 2 * EPC + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int q = (warp_n * WN + nj * 16) / EPC + (lane >> 4);
                const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
                fg_ldmatrix_x4_trans(t, &b_s[stage * BN * 4 + r * CH + sq]);
{{/B_KROW}}
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
{{/B_TF32_ELEM}}
{{#B_TF32_ELEM}}
            // k-row fp32 tile: b[e] is (k t + 4 e, n g), g = lane / 4, t = lane % 4
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 2; e++) {
                    const int CH = BN / EPC;
                    const int r = ks * 2 * EPC + (lane & 3) + e * 4;
                    const int n = warp_n * WN + ni * 8 + (lane >> 2), q = n / EPC;
                    const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
                    bf[ni][e] = b_s[stage * BN * 4 + r * CH + sq].w[n % EPC];
                }
{{/B_TF32_ELEM}}
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
        free_stage = stage;
        stage = stage == STAGES - 1 ? 0 : stage + 1;
    }
    // (the groups still open are empty: nothing is left in flight)
{{#SPLIT}}

    // Split-K: this block's accumulators to slot `split` of its tile's
    // SPLITS slots of BM * BN floats ([(mi, ni, e)][tid]) in the workspace,
    // the tile's counter in the counters buffer; the last block to arrive
    // adds the slots in split order.
    {
        float *ws = (float *)p.{{WS}};
        const fg_i64 tile = (bt * fg_gdim_y() + fg_bid_y()) * fg_gdim_x() + fg_bid_x();
        float *slots = ws + tile * SPLITS * (fg_i64)(BM * BN);
        FG_UNROLL
        for (int mi = 0; mi < MI; mi++)
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 4; e++)
                    slots[(fg_i64)split * (BM * BN) + ((mi * NI + ni) * 4 + e) * THREADS + tid] = acc[mi][ni][e];
        fg_threadfence();                        // the slot is visible before the count
        fg_sync();
        // the verdict goes through a_s[0] (no extra shared memory: every
        // thread is past its last tile, the barrier above saw to that)
        if (tid == 0) {
            int *count = p.{{WSC}} + tile;
            const bool last = fg_atomic_add_i32(count, 1) == SPLITS - 1;
            if (last)
                *count = 0;                      // zero again for the next launch
            a_s[0].w[0] = last ? 1u : 0u;
        }
        fg_sync();
        if (a_s[0].w[0] == 0u)
            return;
        fg_threadfence();                        // the other blocks' slots are visible
        FG_UNROLL
        for (int mi = 0; mi < MI; mi++)
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 4; e++) {
                    const int at = ((mi * NI + ni) * 4 + e) * THREADS + tid;
                    float sum = slots[at];
                    for (int z = 1; z < SPLITS; z++)   // fixed order: split 0, 1, 2, ...
                        sum += slots[(fg_i64)z * (BM * BN) + at];
                    acc[mi][ni][e] = sum;
                }
    }
{{/SPLIT}}

    // C fragment: e = 0, 1 -> row group, columns tig*2 + {0, 1}; e = 2, 3 -> row group + 8
    const int group = lane >> 2, tig = lane & 3;
{{#VEC_EPI}}
    // N a multiple of 8: per four n8 fragments 4 g .. 4 g + 3 of a row the quad
    // (lanes 4 group .. 4 group + 3) transposes its column pairs, as gemm_wgmma.cuh's
    // epilogue does, so that lane tig holds fragment 4 g + tig's eight columns;
    // fg_epilogue8 reads the epilogue's inputs along them 16 bytes at a time and
    // one 16-byte store writes them.  Every lane takes part in the shuffles;
    // rows and columns past the output store nothing (a predicate, no branch).
    FG_UNROLL
    for (int mi = 0; mi < MI; mi++)
        FG_UNROLL
        for (int h = 0; h < 2; h++) {
            const fg_i64 row = m0 + warp_m * WM + mi * 16 + h * 8 + group;
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
                const fg_i64 col = n0 + warp_n * WN + (4 * g + tig) * 8;
                if (row < M && col < N) {
                    fg_epilogue8(p, a, {{EPI_ARGS}});
                    fg_store8(p.{{Y}} + y_base + row * N + col, a);
                }
            }
        }
{{/VEC_EPI}}
{{^VEC_EPI}}
    FG_UNROLL
    for (int mi = 0; mi < MI; mi++)
        FG_UNROLL
        for (int h = 0; h < 2; h++) {
            const fg_i64 row = m0 + warp_m * WM + mi * 16 + h * 8 + group;
            if (row >= M)
                continue;
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++) {
                const fg_i64 col = n0 + warp_n * WN + ni * 8 + tig * 2;
                if (col >= N)
                    continue;
                const float v0 = fg_epilogue(p, acc[mi][ni][h * 2], {{EPI_ARGS}});
{{#PAIR}}
                // N is even: column col + 1 exists and the pair is 4-byte aligned
                const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], {{EPI_ARGS1}});
                fg_store2(p.{{Y}} + y_base + row * N + col, v0, v1);
{{/PAIR}}
{{^PAIR}}
                fg_store(p.{{Y}} + y_base + row * N + col, v0);
                if (col + 1 < N) {
                    const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], {{EPI_ARGS1}});
                    fg_store(p.{{Y}} + y_base + row * N + col + 1, v1);
                }
{{/PAIR}}
            }
        }
{{/VEC_EPI}}
}
