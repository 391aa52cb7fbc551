// ---- template gemm_tc.cuh: fp16 / bf16 matrix multiply on tensor cores ---------
// Y[bt] = A[bt] (M x K) * B[bt] (K x N) with mma.sync m16n8k16 (fp32
// accumulation).  A block of 4 warps (2 x 2) computes a 64 x 64 tile; each warp
// a 32 x 32 patch = 2 x 4 fragments.  Tiles of 32 along K are staged in shared
// memory as a_tile[m][k] and b_tile[n][k] (zero-filled past the edges), so the
// fragments of the PTX layout are pairs of consecutive k.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    FG_SHARED {{T}} a_tile[64][32 + 8];
    FG_SHARED {{T}} b_tile[64][32 + 8];
    {{T}} zero;
    zero.bits = 0;

    const int tid = (int)fg_tid_x();
    const int warp = (int)fg_warp();
    const int lane = (int)fg_lane();
    const int group = lane >> 2;  // fragment row (A, C) / column (B)
    const int tig = lane & 3;     // thread in group
    const int warp_m = warp / 2, warp_n = warp % 2;
    const fg_i64 bt = fg_bid_z();
    const fg_i64 m0 = (fg_i64)fg_bid_y() * 64;
    const fg_i64 n0 = (fg_i64)fg_bid_x() * 64;

    float acc[2][4][4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++)
                acc[i][j][q] = 0.0f;

    for (fg_i64 k0 = 0; k0 < K; k0 += 32) {
        for (int t = tid; t < 64 * 32; t += {{THREADS}}) {
            const int mm = t / 32;
            const int kk = t % 32;
            const fg_i64 m = m0 + mm, k = k0 + kk;
            a_tile[mm][kk] = (m < M && k < K) ? p.{{A}}[off_a(p, bt, m, k)] : zero;
            const fg_i64 n = n0 + mm;
            b_tile[mm][kk] = (n < N && k < K) ? p.{{B}}[off_b(p, bt, k, n)] : zero;
        }
        fg_sync();
        for (int ks = 0; ks < 32; ks += 16) {
            fg_u32 a_frag[2][4], b_frag[4][2];
            const int kc = ks + tig * 2;
            for (int i = 0; i < 2; i++) {
                const int r = warp_m * 32 + i * 16 + group;
                a_frag[i][0] = {{PACK}}(a_tile[r][kc], a_tile[r][kc + 1]);
                a_frag[i][1] = {{PACK}}(a_tile[r + 8][kc], a_tile[r + 8][kc + 1]);
                a_frag[i][2] = {{PACK}}(a_tile[r][kc + 8], a_tile[r][kc + 9]);
                a_frag[i][3] = {{PACK}}(a_tile[r + 8][kc + 8], a_tile[r + 8][kc + 9]);
            }
            for (int j = 0; j < 4; j++) {
                const int c = warp_n * 32 + j * 8 + group;
                b_frag[j][0] = {{PACK}}(b_tile[c][kc], b_tile[c][kc + 1]);
                b_frag[j][1] = {{PACK}}(b_tile[c][kc + 8], b_tile[c][kc + 9]);
            }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    {{MMA}}(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
        }
        fg_sync();
    }

    // C fragment: q = 0, 1 -> row group, columns tig*2 + {0, 1}; q = 2, 3 -> row group + 8
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 4; q++) {
                const fg_i64 row = m0 + warp_m * 32 + i * 16 + group + (q >= 2 ? 8 : 0);
                const fg_i64 col = n0 + warp_n * 32 + j * 8 + tig * 2 + (q & 1);
                if (row >= M || col >= N)
                    continue;
                const float v = fg_epilogue(p, acc[i][j][q], {{EPI_ARGS}});
                fg_store(p.{{Y}} + off_y(p, bt, row, col), v);
            }
}
