// ---- template gemm_tc.cuh: fp16 / bf16 matrix multiply on tensor cores ---------
// Y[bt] = A[bt] (M x K) * B[bt] (K x N) with mma.sync m16n8k16, fp32
// accumulation.  A block computes a BM x BN tile with WARPS_M x WARPS_N
// warps; a warp a WM x WN patch of MI x NI fragments.  K advances BK = 32 at
// a time through a STAGES-deep cp.async pipeline: while tile kt is
// multiplied, tiles kt+1 .. kt+STAGES-1 are in flight.
//
// Shared tiles are 16-byte chunks (8 elements), each operand copied along
// its contiguous axis so that a warp reads whole 16-byte runs of global
// memory:
//   - "k-chunk" tiles (A [M, K]; B stored [N, K]): BM (BN) rows of 4 chunks
//     along k; chunk q of row r stored at q ^ ((r >> 1) & 3); fragments by
//     ldmatrix.x4.
//   - "k-row" tiles (A stored [K, M]; B [K, N]): BK rows (k) of BM / 8 (BN / 8)
//     chunks along m (n); chunk q of row r stored at q ^ (r & 7) (rows of 8+
//     chunks) or q ^ ((r >> 1) & 3) (4 chunks); fragments by ldmatrix.x4.trans.
// Either way the 8 rows one ldmatrix phase reads, and the chunks a warp's
// copies write, fall in distinct banks.  With VEC the chunks are copied by
// cp.async (16 bytes, zero-filled past M, N or K); without (a contiguous axis
// not a multiple of 8), element by element with the same guards.  The
// epilogue runs on the accumulators; pairs of columns are stored together.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int BM = {{BM}}, BN = {{BN}}, BK = 32, STAGES = {{STAGES}}, THREADS = {{THREADS}};
    const int WARPS_M = {{WARPS_M}}, WARPS_N = {{WARPS_N}};
    const int WM = BM / WARPS_M, WN = BN / WARPS_N;   // one warp's patch
    const int MI = WM / 16, NI = WN / 8;              // its fragments
    const int A_ITERS = BM * 4 / THREADS, B_ITERS = BN * 4 / THREADS;   // chunks per thread and tile
    FG_SHARED fg_chunk16 a_s[STAGES * BM * 4];   // [stage][BM * BK / 8 chunks], swizzled
    FG_SHARED fg_chunk16 b_s[STAGES * BN * 4];   // [stage][BN * BK / 8 chunks], swizzled

    const int tid = (int)fg_tid_x();
    const int lane = (int)fg_lane();
    const int warp = (int)fg_warp();
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
    const fg_i64 bt = fg_bid_z();
    const fg_i64 m0 = (fg_i64)fg_bid_y() * BM;
    const fg_i64 n0 = (fg_i64)fg_bid_x() * BN;
{{BATCH}}
    const {{T}} *A = p.{{A}} + a_base;
    const {{T}} *B = p.{{B}} + b_base;
    {{T}} *Y = p.{{Y}} + y_base;

    // One chunk: `lim` (0..8) elements from src, zeros after them.
    auto load_chunk = [&](fg_chunk16 *dst, const {{T}} *src, fg_i64 lim) {
{{#VEC}}
        fg_cp_async16_zfill(dst, src, lim > 0);   // lim is 0 or 8; src valid either way
{{/VEC}}
{{^VEC}}
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
            const int r = c >> 2, q = c & 3;             // row m0 + r, k0 + 8q..
            const fg_i64 m = m0 + r, k = k0 + q * 8;
            const fg_i64 lim = m < M && k < K ? (K - k < 8 ? K - k : 8) : 0;
            load_chunk(&a_s[(dst * BM + r) * 4 + (q ^ ((r >> 1) & 3))], lim > 0 ? A + m * K + k : A, lim);
{{/A_KROW}}
{{#A_KROW}}
            const int CH = BM / 8, r = c / CH, q = c % CH;   // row k0 + r, m0 + 8q..
            const fg_i64 k = k0 + r, m = m0 + q * 8;
            const fg_i64 lim = m < M && k < K ? (M - m < 8 ? M - m : 8) : 0;
            const int sq = CH >= 8 ? q ^ (r & 7) : q ^ ((r >> 1) & 3);
            load_chunk(&a_s[dst * BM * 4 + r * CH + sq], lim > 0 ? A + k * M + m : A, lim);
{{/A_KROW}}
        }
        FG_UNROLL
        for (int j = 0; j < B_ITERS; j++) {
            const int c = tid + j * THREADS;
{{^B_KROW}}
            const int r = c >> 2, q = c & 3;             // column n0 + r, k0 + 8q..
            const fg_i64 n = n0 + r, k = k0 + q * 8;
            const fg_i64 lim = n < N && k < K ? (K - k < 8 ? K - k : 8) : 0;
            load_chunk(&b_s[(dst * BN + r) * 4 + (q ^ ((r >> 1) & 3))], lim > 0 ? B + n * K + k : B, lim);
{{/B_KROW}}
{{#B_KROW}}
            const int CH = BN / 8, r = c / CH, q = c % CH;   // row k0 + r, n0 + 8q..
            const fg_i64 k = k0 + r, n = n0 + q * 8;
            const fg_i64 lim = n < N && k < K ? (N - n < 8 ? N - n : 8) : 0;
            const int sq = CH >= 8 ? q ^ (r & 7) : q ^ ((r >> 1) & 3);
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

    const int KT = (int)((K + BK - 1) / BK);
    FG_UNROLL
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < KT)
            load_tile(st, st);
        fg_cp_async_commit();
    }
    int stage = 0, free_stage = STAGES - 1;   // kt % STAGES, (kt - 1) % STAGES
    for (int kt = 0; kt < KT; kt++) {
        fg_cp_async_wait_group<STAGES - 2>();   // this thread's copies of tile kt have landed
        fg_sync();                              // everyone's have; free_stage is read by nobody
        if (kt + STAGES - 1 < KT)
            load_tile(free_stage, kt + STAGES - 1);
        fg_cp_async_commit();                   // possibly empty: the group count stays in step
        FG_UNROLL
        for (int ks = 0; ks < BK / 16; ks++) {
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
                // transposed: lane l addresses k row (l & 7) + 8 (l >> 4), m chunk (l >> 3) & 1
                const int CH = BM / 8;
                const int r = ks * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int q = (warp_m * WM + mi * 16) / 8 + ((lane >> 3) & 1);
                const int sq = CH >= 8 ? q ^ (r & 7) : q ^ ((r >> 1) & 3);
                fg_ldmatrix_x4_trans(af[mi], &a_s[stage * BM * 4 + r * CH + sq]);
{{/A_KROW}}
            }
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
                const int CH = BN / 8;
                const int r = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int q = (warp_n * WN + nj * 16) / 8 + (lane >> 4);
                const int sq = CH >= 8 ? q ^ (r & 7) : q ^ ((r >> 1) & 3);
                fg_ldmatrix_x4_trans(t, &b_s[stage * BN * 4 + r * CH + sq]);
{{/B_KROW}}
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
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

    // C fragment: e = 0, 1 -> row group, columns tig*2 + {0, 1}; e = 2, 3 -> row group + 8
    const int group = lane >> 2, tig = lane & 3;
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
                fg_store2(Y + row * N + col, v0, v1);
{{/PAIR}}
{{^PAIR}}
                fg_store(Y + row * N + col, v0);
                if (col + 1 < N) {
                    const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], {{EPI_ARGS1}});
                    fg_store(Y + row * N + col + 1, v1);
                }
{{/PAIR}}
            }
        }
}
