// fusegen kernel fg_matmul_add_551bd015727e (group 0)
//   rule:      matmul_add (goldrules/rules.yaml:23)
//   nodes:     mm (matmul), y (add)
//   template:  gemm_tc (gemm_tc.cuh)
//   output:    y [5, 9] bf16 NCHW
//   precision: exact
//   tile:      32 x 32 x 32, 4 stages, 64 threads (1 x 2 warps), split-K 1 (1 of 1 k tiles each), mma m16n8k16, element loads
//   operands:  A [M, K], B [K, N] (k-row tile)
//   generator: fusegen 0.1.0
//   deps:      aca08ec3a5ca92ce9db0c005c8652391 (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_matmul_add_551bd015727e {
    const fg_bf16 *a;                    // in  a [5, 24] bf16
    const fg_bf16 *w;                    // in  w [24, 9] bf16
    fg_bf16 *y;                          // out y [5, 9] bf16
    const fg_bf16 *r;                    // in  r [5, 1] bf16
};

// epilogue: applied to each accumulator before the one store;
// (row, col) are the logical coordinates of y
FG_DEVICE float fg_epilogue(const fg_params_fg_matmul_add_551bd015727e &p, float v, fg_i64 row, fg_i64 col)
{
    // epilogue: apply y: a + b
    {
        const float in_b = fg_load(p.r + row);  // r
        v = (v + in_b);
    }
    return v;
}

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
FG_KERNEL(fg_matmul_add_551bd015727e, fg_params_fg_matmul_add_551bd015727e, 64)
{
    const fg_i64 M = 5;
    const fg_i64 N = 9;
    const fg_i64 K = 24;
    const int BM = 32, BN = 32, EPC = 8, BK = 4 * EPC, STAGES = 4, THREADS = 64;
    const int SPLITS = 1, KT_SPLIT = 1;
    const int WARPS_M = 1, WARPS_N = 2;
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
    const fg_i64 a_base = 0, b_base = 0, y_base = 0;   // one matrix

    const fg_bf16 *A = p.a + a_base;
    const fg_bf16 *B = p.w + b_base;

    // One chunk: `lim` (0..EPC) elements from src, zeros after them.
    auto load_chunk = [&](fg_chunk16 *dst, const fg_bf16 *src, fg_i64 lim) {
        fg_bf16 e[8];
        FG_UNROLL
        for (int i = 0; i < 8; i++) {
            e[i].bits = 0;
            if (i < lim)
                e[i] = src[i];
        }
        fg_chunk16 c;
        FG_UNROLL
        for (int i = 0; i < 4; i++)
            c.w[i] = fg_pack_bf162(e[2 * i], e[2 * i + 1]);
        *dst = c;
    };

    // Issues the copies of reduction tile kt into stage `dst`: chunk
    // c = tid + i * THREADS of each operand's tile.
    auto load_tile = [&](int dst, int kt) {
        const fg_i64 k0 = (fg_i64)kt * BK;
        FG_UNROLL
        for (int i = 0; i < A_ITERS; i++) {
            const int c = tid + i * THREADS;
            const int r = c >> 2, q = c & 3;             // row m0 + r, k0 + EPC q..
            const fg_i64 m = m0 + r, k = k0 + q * EPC;
            const fg_i64 lim = m < M && k < K ? (K - k < EPC ? K - k : EPC) : 0;
            load_chunk(&a_s[(dst * BM + r) * 4 + (q ^ ((r >> 1) & 3))], lim > 0 ? A + m * K + k : A, lim);
        }
        FG_UNROLL
        for (int j = 0; j < B_ITERS; j++) {
            const int c = tid + j * THREADS;
            const int CH = BN / EPC, r = c / CH, q = c % CH;   // row k0 + r, n0 + EPC q..
            const fg_i64 k = k0 + r, n = n0 + q * EPC;
            const fg_i64 lim = n < N && k < K ? (N - n < EPC ? N - n : EPC) : 0;
            const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
            load_chunk(&b_s[dst * BN * 4 + r * CH + sq], lim > 0 ? B + k * N + n : B, lim);
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
                // lane l addresses row l % 16 of the m16 x k16 block, chunk l / 16
                const int r = warp_m * WM + mi * 16 + (lane & 15);
                const int ch = ks * 2 + (lane >> 4);
                fg_ldmatrix_x4(af[mi], &a_s[(stage * BM + r) * 4 + (ch ^ ((r >> 1) & 3))]);
            }
            // two n8 fragments per ldmatrix
            FG_UNROLL
            for (int nj = 0; nj < NI / 2; nj++) {
                fg_u32 t[4];
                // transposed: lane l addresses k row (l & 7) + 8 ((l >> 3) & 1), n chunk l >> 4
                const int CH = BN / EPC;
                const int r = ks * 2 * EPC + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int q = (warp_n * WN + nj * 16) / EPC + (lane >> 4);
                const int sq = CH >= 8 ? q ^ (r & 7) : CH == 4 ? q ^ ((r >> 1) & 3) : q ^ ((r >> 2) & 1);
                fg_ldmatrix_x4_trans(t, &b_s[stage * BN * 4 + r * CH + sq]);
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
            FG_UNROLL
            for (int mi = 0; mi < MI; mi++)
                FG_UNROLL
                for (int ni = 0; ni < NI; ni++)
                    fg_mma_16816_bf16(acc[mi][ni], af[mi], bf[ni], acc[mi][ni]);
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
                const float v0 = fg_epilogue(p, acc[mi][ni][h * 2], row, col);
                fg_store(p.y + y_base + row * N + col, v0);
                if (col + 1 < N) {
                    const float v1 = fg_epilogue(p, acc[mi][ni][h * 2 + 1], row, col + 1);
                    fg_store(p.y + y_base + row * N + col + 1, v1);
                }
            }
        }
}
