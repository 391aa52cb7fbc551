// ---- template gemm.cuh: fp32 matrix multiply (SIMT) ----------------------------
// Y[bt] = A[bt] (M x K) * B[bt] (K x N), tiles of TILE_M x TILE_N per block,
// staged through shared memory TILE_K columns of A at a time (zero-filled past
// the edges, each operand read along its contiguous axis); each thread
// accumulates a 4 x 4 patch in fp32 registers.  blockIdx = (column tile, row
// tile, batch); the batch's matrices are at a_base, b_base and y_base.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}}, 1)
{
{{SHAPES}}
    const int TILE_M = {{TILE_M}};
    const int TILE_N = {{TILE_N}};
    const int TILE_K = {{TILE_K}};
    FG_SHARED float a_tile[{{TILE_K}}][{{TILE_M}} + 4];  // a_tile[k][m]
    FG_SHARED float b_tile[{{TILE_K}}][{{TILE_N}} + 4];  // b_tile[k][n]

    const int tid = (int)fg_tid_x();
    const int tx = tid % (TILE_N / 4);  // columns tx + j * TILE_N / 4
    const int ty = tid / (TILE_N / 4);  // rows ty + i * TILE_M / 4
    const fg_i64 bt = fg_bid_z();
    const fg_i64 m0 = (fg_i64)fg_bid_y() * TILE_M;
    const fg_i64 n0 = (fg_i64)fg_bid_x() * TILE_N;
{{BATCH}}
    const float *A = p.{{A}} + a_base;
    const float *B = p.{{B}} + b_base;

    float acc[4][4];
    FG_UNROLL
    for (int i = 0; i < 4; i++)
        FG_UNROLL
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;

    for (fg_i64 k0 = 0; k0 < K; k0 += TILE_K) {
        // the tiles: TILE_M * TILE_K and TILE_K * TILE_N elements, a fixed
        // number per thread (unrolled: no loop state kept across the tile)
        FG_UNROLL
        for (int i = 0; i < (TILE_M * TILE_K + {{THREADS}} - 1) / {{THREADS}}; i++) {
            const int t = tid + i * {{THREADS}};
            if (t >= TILE_M * TILE_K)
                break;
{{^TA}}
            const int mm = t / TILE_K, kk = t % TILE_K;   // A [M, K]: k fastest
            const fg_i64 m = m0 + mm, k = k0 + kk;
            a_tile[kk][mm] = (m < M && k < K) ? A[m * K + k] : 0.0f;
{{/TA}}
{{#TA}}
            const int kk = t / TILE_M, mm = t % TILE_M;   // A [K, M]: m fastest
            const fg_i64 m = m0 + mm, k = k0 + kk;
            a_tile[kk][mm] = (m < M && k < K) ? A[k * M + m] : 0.0f;
{{/TA}}
        }
        FG_UNROLL
        for (int i = 0; i < (TILE_K * TILE_N + {{THREADS}} - 1) / {{THREADS}}; i++) {
            const int t = tid + i * {{THREADS}};
            if (t >= TILE_K * TILE_N)
                break;
{{^TB}}
            const int kk = t / TILE_N, nn = t % TILE_N;   // B [K, N]: n fastest
            const fg_i64 k = k0 + kk, n = n0 + nn;
            b_tile[kk][nn] = (k < K && n < N) ? B[k * N + n] : 0.0f;
{{/TB}}
{{#TB}}
            const int nn = t / TILE_K, kk = t % TILE_K;   // B [N, K]: k fastest
            const fg_i64 k = k0 + kk, n = n0 + nn;
            b_tile[kk][nn] = (k < K && n < N) ? B[n * K + k] : 0.0f;
{{/TB}}
        }
        fg_sync();
        FG_UNROLL
        for (int kk = 0; kk < TILE_K; kk++) {
            float a_frag[4], b_frag[4];
            FG_UNROLL
            for (int i = 0; i < 4; i++)
                a_frag[i] = a_tile[kk][ty + i * (TILE_M / 4)];
            FG_UNROLL
            for (int j = 0; j < 4; j++)
                b_frag[j] = b_tile[kk][tx + j * (TILE_N / 4)];
            FG_UNROLL
            for (int i = 0; i < 4; i++)
                FG_UNROLL
                for (int j = 0; j < 4; j++)
                    acc[i][j] += a_frag[i] * b_frag[j];
        }
        fg_sync();
    }

    FG_UNROLL
    for (int i = 0; i < 4; i++) {
        const fg_i64 row = m0 + ty + i * (TILE_M / 4);
        if (row >= M)
            continue;
        FG_UNROLL
        for (int j = 0; j < 4; j++) {
            const fg_i64 col = n0 + tx + j * (TILE_N / 4);
            if (col >= N)
                continue;
            const float v = fg_epilogue(p, acc[i][j], {{EPI_ARGS}});
            fg_store(p.{{Y}} + y_base + row * N + col, v);
        }
    }
}
