// ---- template gemm_softmax.cuh: matrix multiply, epilogue, softmax over rows --
// Y[bt] = softmax_rows(epilogue(A[bt] (M x K) * B[bt] (K x N))) in one kernel:
// the matmul's output never leaves the block.  A block owns BM = 16 full rows
// (blockIdx.x) of one batch matrix (blockIdx.z) and every one of the N <= NP
// columns: WARPS_N warps side by side, warp w the columns [w WN, (w + 1) WN),
// WN = NI * 8, each lane NI x 4 accumulators in registers laid out as the
// m16n8 C fragment of mma.sync (e = 0, 1: row g, columns 2 t, 2 t + 1;
// e = 2, 3: row g + 8; g = lane / 4, t = lane % 4).
//
// The reduction advances BK elements of k at a time: A's 16 x BK and B's
// NP x BK tiles are copied into shared memory (zero past M, N and K),
// element by element, or B [K, N] with N a multiple of VW in 16-byte loads
// of VW columns (BVEC: fg_load8 for fp16 / bf16, fg_load4 for fp32), then
//   - TC (fp16 / bf16): one mma m16n8k16 per n8 fragment, fp32 accumulation;
//     tiles k-contiguous, rows of 16 elements (8 words) whose two halves swap
//     when (row & 4), so a fragment's 32 reads fall in 32 distinct banks;
//   - else (exact fp32, SIMT): per k, 2 values of A and 2 NI of B, 4 NI fma;
//     tiles [k][m] and [k][n], consecutive lanes reading consecutive words.
// After the loop each accumulator goes through the epilogue (bias, scale,
// mask: what the rule fused before the softmax), then the rows' softmax,
// numerically stable: the row's max (NaN-propagating: a NaN anywhere makes
// the row NaN, as the unfused softmax does), the sum of exp(v - max), and
// one store of exp(v - max) / sum.  Row partials: over a lane's values, the
// 4 lanes of a quad (shuffles), then WARPS_N warps through shared memory.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int BM = 16, BK = {{BK}}, WARPS_N = {{WARPS_N}}, NI = {{NI}}, NP = {{NP}}, THREADS = {{THREADS}};
    const int WN = NI * 8;   // one warp's columns
{{#TC}}
    FG_SHARED {{T}} a_s[BM * BK];   // [m][k], swizzled: (m, k) at m * BK + (k ^ ((m & 4) << 1))
    FG_SHARED {{T}} b_s[NP * BK];   // [n][k], swizzled alike
{{/TC}}
{{^TC}}
    FG_SHARED float a_s[BK * BM];   // [k][m]
    FG_SHARED float b_s[BK * NP];   // [k][n]
{{/TC}}
    FG_SHARED float red[2 * WARPS_N * BM];   // per warp and row: the max, then the sum

    const int tid = (int)fg_tid_x();
    const int lane = (int)fg_lane();
    const int warp = (int)fg_warp();
    const int g = lane >> 2, t = lane & 3;
    const fg_i64 bt = fg_bid_z();
    const fg_i64 m0 = (fg_i64)fg_bid_x() * BM;
{{BATCH}}
    const {{T}} *A = p.{{A}} + a_base;
    const {{T}} *B = p.{{B}} + b_base;

    float acc[NI][4];
    FG_UNROLL
    for (int ni = 0; ni < NI; ni++)
        FG_UNROLL
        for (int e = 0; e < 4; e++)
            acc[ni][e] = 0.0f;

    for (fg_i64 k0 = 0; k0 < K; k0 += BK) {
        // A's tile: 16 x BK elements, read along A's contiguous axis
        for (int c = tid; c < BM * BK; c += THREADS) {
{{^TA}}
            const int mm = c / BK, kk = c % BK;   // A [M, K]: k fastest
            const fg_i64 m = m0 + mm, k = k0 + kk;
            const bool in = m < M && k < K;
            const fg_i64 at = in ? m * K + k : 0;
{{/TA}}
{{#TA}}
            const int kk = c / BM, mm = c % BM;   // A [K, M]: m fastest
            const fg_i64 m = m0 + mm, k = k0 + kk;
            const bool in = m < M && k < K;
            const fg_i64 at = in ? k * M + m : 0;
{{/TA}}
{{#TC}}
            {{T}} v;
            v.bits = 0;
            if (in)
                v = A[at];
            a_s[mm * BK + (kk ^ ((mm & 4) << 1))] = v;
{{/TC}}
{{^TC}}
            a_s[kk * BM + mm] = in ? A[at] : 0.0f;
{{/TC}}
        }
        // B's tile: NP x BK elements, read along B's contiguous axis
{{#BVEC}}
        // B [K, N], N a multiple of the vector: 16-byte loads of VW columns
        // (whole vectors lie inside N or past it)
        for (int c = tid; c < NP * BK / {{VW}}; c += THREADS) {
            const int kk = c / (NP / {{VW}}), nn = c % (NP / {{VW}}) * {{VW}};
            const fg_i64 k = k0 + kk;
            float v[{{VW}}];
            FG_UNROLL
            for (int j = 0; j < {{VW}}; j++)
                v[j] = 0.0f;
            if (nn < N && k < K)
                fg_load{{VW}}(B + k * N + nn, v);
            FG_UNROLL
            for (int j = 0; j < {{VW}}; j++) {
{{#TC}}
                const int n = nn + j;
                b_s[n * BK + (kk ^ ((n & 4) << 1))] = {{CVT}}(v[j]);   // exact: the value came from {{T}}
{{/TC}}
{{^TC}}
                b_s[kk * NP + nn + j] = v[j];
{{/TC}}
            }
        }
{{/BVEC}}
{{^BVEC}}
        for (int c = tid; c < NP * BK; c += THREADS) {
{{^TB}}
            const int kk = c / NP, nn = c % NP;   // B [K, N]: n fastest
            const fg_i64 k = k0 + kk;
            const bool in = nn < N && k < K;
            const fg_i64 at = in ? k * N + nn : 0;
{{/TB}}
{{#TB}}
            const int nn = c / BK, kk = c % BK;   // B [N, K]: k fastest
            const fg_i64 k = k0 + kk;
            const bool in = nn < N && k < K;
            const fg_i64 at = in ? (fg_i64)nn * K + k : 0;
{{/TB}}
{{#TC}}
            {{T}} v;
            v.bits = 0;
            if (in)
                v = B[at];
            b_s[nn * BK + (kk ^ ((nn & 4) << 1))] = v;
{{/TC}}
{{^TC}}
            b_s[kk * NP + nn] = in ? B[at] : 0.0f;
{{/TC}}
        }
{{/BVEC}}
        fg_sync();
{{#TC}}
        // fragments (PTX m16n8k16 .row.col): a[0] (g, 2t..2t+1), a[1] (g + 8, ..),
        // a[2] (g, 2t + 8..), a[3] (g + 8, 2t + 8..); b[0] (k 2t..2t+1, n g), b[1] (k 2t + 8.., n g)
        fg_u32 af[4];
        FG_UNROLL
        for (int i = 0; i < 4; i++) {
            const int r = g + (i & 1) * 8, k = 2 * t + (i >> 1) * 8;
            const int at = r * BK + (k ^ ((r & 4) << 1));
            af[i] = {{PACK}}(a_s[at], a_s[at + 1]);
        }
        FG_UNROLL
        for (int ni = 0; ni < NI; ni++) {
            const int n = warp * WN + ni * 8 + g;
            fg_u32 bf[2];
            FG_UNROLL
            for (int i = 0; i < 2; i++) {
                const int k = 2 * t + i * 8;
                const int at = n * BK + (k ^ ((n & 4) << 1));
                bf[i] = {{PACK}}(b_s[at], b_s[at + 1]);
            }
            {{MMA}}(acc[ni], af, bf, acc[ni]);
        }
{{/TC}}
{{^TC}}
        FG_UNROLL
        for (int kk = 0; kk < BK; kk++) {
            const float a0 = a_s[kk * BM + g], a1 = a_s[kk * BM + g + 8];
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++) {
                const int n = warp * WN + ni * 8 + 2 * t;
                const float b0 = b_s[kk * NP + n], b1 = b_s[kk * NP + n + 1];
                acc[ni][0] += a0 * b0;
                acc[ni][1] += a0 * b1;
                acc[ni][2] += a1 * b0;
                acc[ni][3] += a1 * b1;
            }
        }
{{/TC}}
        fg_sync();   // the tiles are written again by the next step
    }

    // the epilogue on each accumulator of the output (the rest stays 0)
    FG_UNROLL
    for (int ni = 0; ni < NI; ni++)
        FG_UNROLL
        for (int e = 0; e < 4; e++) {
            const fg_i64 row = m0 + g + (e >> 1) * 8;
            const fg_i64 col = warp * WN + ni * 8 + 2 * t + (e & 1);
            acc[ni][e] = row < M && col < N ? fg_epilogue(p, acc[ni][e], {{EPI_ARGS}}) : 0.0f;
        }

    // the rows' max: row g (x0) and row g + 8 (x1) of this lane; scalars, so
    // that nothing is indexed by a loop variable the compiler might keep
    float x0 = -3.402823466e+38f, x1 = -3.402823466e+38f;   // lowest float
    FG_UNROLL
    for (int ni = 0; ni < NI; ni++) {
        const int col = warp * WN + ni * 8 + 2 * t;
        if (col < N) {
            x0 = fg_maxf(x0, acc[ni][0]);
            x1 = fg_maxf(x1, acc[ni][2]);
        }
        if (col + 1 < N) {
            x0 = fg_maxf(x0, acc[ni][1]);
            x1 = fg_maxf(x1, acc[ni][3]);
        }
    }
    x0 = fg_maxf(x0, fg_shfl_xor(x0, 1));
    x1 = fg_maxf(x1, fg_shfl_xor(x1, 1));
    x0 = fg_maxf(x0, fg_shfl_xor(x0, 2));
    x1 = fg_maxf(x1, fg_shfl_xor(x1, 2));
    if (t == 0) {
        red[warp * BM + g] = x0;
        red[warp * BM + g + 8] = x1;
    }
    fg_sync();
    x0 = red[g];
    x1 = red[g + 8];
    for (int w = 1; w < WARPS_N; w++) {
        x0 = fg_maxf(x0, red[w * BM + g]);
        x1 = fg_maxf(x1, red[w * BM + g + 8]);
    }

    // exp(v - max) in place, and the rows' sums
    float s0 = 0.0f, s1 = 0.0f;
    FG_UNROLL
    for (int ni = 0; ni < NI; ni++) {
        const int col = warp * WN + ni * 8 + 2 * t;
        if (col < N) {
            acc[ni][0] = expf(acc[ni][0] - x0);
            acc[ni][2] = expf(acc[ni][2] - x1);
            s0 += acc[ni][0];
            s1 += acc[ni][2];
        }
        if (col + 1 < N) {
            acc[ni][1] = expf(acc[ni][1] - x0);
            acc[ni][3] = expf(acc[ni][3] - x1);
            s0 += acc[ni][1];
            s1 += acc[ni][3];
        }
    }
    s0 += fg_shfl_xor(s0, 1);
    s1 += fg_shfl_xor(s1, 1);
    s0 += fg_shfl_xor(s0, 2);
    s1 += fg_shfl_xor(s1, 2);
    if (t == 0) {
        red[(WARPS_N + warp) * BM + g] = s0;
        red[(WARPS_N + warp) * BM + g + 8] = s1;
    }
    fg_sync();
    s0 = red[WARPS_N * BM + g];
    s1 = red[WARPS_N * BM + g + 8];
    for (int w = 1; w < WARPS_N; w++) {   // fixed order: warp 0, 1, 2, ...
        s0 += red[(WARPS_N + w) * BM + g];
        s1 += red[(WARPS_N + w) * BM + g + 8];
    }
    const float inv0 = 1.0f / s0, inv1 = 1.0f / s1;

    // the one store
    const fg_i64 row0 = m0 + g, row1 = m0 + g + 8;
    FG_UNROLL
    for (int ni = 0; ni < NI; ni++) {
        const fg_i64 col = warp * WN + ni * 8 + 2 * t;
        if (col >= N)
            continue;
{{#PAIR}}
        // N is even: column col + 1 exists and the pair is aligned
        if (row0 < M)
            fg_store2(p.{{Y}} + y_base + row0 * N + col, acc[ni][0] * inv0, acc[ni][1] * inv0);
        if (row1 < M)
            fg_store2(p.{{Y}} + y_base + row1 * N + col, acc[ni][2] * inv1, acc[ni][3] * inv1);
{{/PAIR}}
{{^PAIR}}
        if (row0 < M) {
            fg_store(p.{{Y}} + y_base + row0 * N + col, acc[ni][0] * inv0);
            if (col + 1 < N)
                fg_store(p.{{Y}} + y_base + row0 * N + col + 1, acc[ni][1] * inv0);
        }
        if (row1 < M) {
            fg_store(p.{{Y}} + y_base + row1 * N + col, acc[ni][2] * inv1);
            if (col + 1 < N)
                fg_store(p.{{Y}} + y_base + row1 * N + col + 1, acc[ni][3] * inv1);
        }
{{/PAIR}}
    }
}
