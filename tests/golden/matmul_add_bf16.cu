// fusegen kernel fg_k0_matmul_add (group 0)
//   rule:      matmul_add (goldrules/rules.yaml:23)
//   nodes:     mm (matmul), y (add)
//   template:  gemm_tc (gemm_tc.cuh)
//   output:    y [5, 9] bf16 NCHW
//   precision: exact
//   generator: fusegen 0.1.0
//   deps:      aca08ec3a5ca92ce9db0c005c8652391 (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_k0_matmul_add {
    const fg_bf16 *a;                    // in  a [5, 24] bf16
    const fg_bf16 *w;                    // in  w [24, 9] bf16
    fg_bf16 *y;                          // out y [5, 9] bf16
    const fg_bf16 *r;                    // in  r [5, 1] bf16
};

// a(m, k) of batch bt: a is [5, 24] row-major
FG_DEVICE fg_i64 off_a(const fg_params_fg_k0_matmul_add &p, fg_i64 bt, fg_i64 m, fg_i64 k)
{
    return m * 24 + k;
}

// b(k, n) of batch bt: w is [24, 9] row-major
FG_DEVICE fg_i64 off_b(const fg_params_fg_k0_matmul_add &p, fg_i64 bt, fg_i64 k, fg_i64 n)
{
    return k * 9 + n;
}

// y(row, col) of batch bt: y is [5, 9] row-major
FG_DEVICE fg_i64 off_y(const fg_params_fg_k0_matmul_add &p, fg_i64 bt, fg_i64 row, fg_i64 col)
{
    return row * 9 + col;
}

// epilogue: applied to each accumulator before the one store;
// (row, col) are the logical coordinates of y
FG_DEVICE float fg_epilogue(const fg_params_fg_k0_matmul_add &p, float v, fg_i64 row, fg_i64 col)
{
    // epilogue: apply y: a + b
    {
        const float in_b = fg_load(p.r + row);  // r
        v = (v + in_b);
    }
    return v;
}

// ---- template gemm_tc.cuh: fp16 / bf16 matrix multiply on tensor cores ---------
// Y[bt] = A[bt] (M x K) * B[bt] (K x N) with mma.sync m16n8k16 (fp32
// accumulation).  A block of 4 warps (2 x 2) computes a 64 x 64 tile; each warp
// a 32 x 32 patch = 2 x 4 fragments.  Tiles of 32 along K are staged in shared
// memory as a_tile[m][k] and b_tile[n][k] (zero-filled past the edges), so the
// fragments of the PTX layout are pairs of consecutive k.
FG_KERNEL(fg_k0_matmul_add, fg_params_fg_k0_matmul_add, 128)
{
    const fg_i64 M = 5;
    const fg_i64 N = 9;
    const fg_i64 K = 24;
    FG_SHARED fg_bf16 a_tile[64][32 + 8];
    FG_SHARED fg_bf16 b_tile[64][32 + 8];
    fg_bf16 zero;
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
        for (int t = tid; t < 64 * 32; t += 128) {
            const int mm = t / 32;
            const int kk = t % 32;
            const fg_i64 m = m0 + mm, k = k0 + kk;
            a_tile[mm][kk] = (m < M && k < K) ? p.a[off_a(p, bt, m, k)] : zero;
            const fg_i64 n = n0 + mm;
            b_tile[mm][kk] = (n < N && k < K) ? p.w[off_b(p, bt, k, n)] : zero;
        }
        fg_sync();
        for (int ks = 0; ks < 32; ks += 16) {
            fg_u32 a_frag[2][4], b_frag[4][2];
            const int kc = ks + tig * 2;
            for (int i = 0; i < 2; i++) {
                const int r = warp_m * 32 + i * 16 + group;
                a_frag[i][0] = fg_pack_bf162(a_tile[r][kc], a_tile[r][kc + 1]);
                a_frag[i][1] = fg_pack_bf162(a_tile[r + 8][kc], a_tile[r + 8][kc + 1]);
                a_frag[i][2] = fg_pack_bf162(a_tile[r][kc + 8], a_tile[r][kc + 9]);
                a_frag[i][3] = fg_pack_bf162(a_tile[r + 8][kc + 8], a_tile[r + 8][kc + 9]);
            }
            for (int j = 0; j < 4; j++) {
                const int c = warp_n * 32 + j * 8 + group;
                b_frag[j][0] = fg_pack_bf162(b_tile[c][kc], b_tile[c][kc + 1]);
                b_frag[j][1] = fg_pack_bf162(b_tile[c][kc + 8], b_tile[c][kc + 9]);
            }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    fg_mma_16816_bf16(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
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
                const float v = fg_epilogue(p, acc[i][j][q], row, col);
                fg_store(p.y + off_y(p, bt, row, col), v);
            }
}
