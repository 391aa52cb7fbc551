// ---- template gemv.cuh: fp32 matrix-vector / small-M matrix multiply --------
// Y[bt] = A[bt] (M x K, M <= 16) * B[bt] (K x N) in exact fp32.  Each block
// owns SLICE columns of Y for all M rows; its WARPS warps split the block's
// part of K into runs of KW, each warp accumulating in registers:
//   B [K, N] (n contiguous): lane l owns columns l * VW .. + VW, one 16-byte
//     load of B per k when VW = 4 (N % 4 == 0), else one element;
//   B [N, K] (k contiguous): the warp owns all SLICE columns, lane l the k
//     runs l * VW, + 32 * VW, ...; a fixed xor-shuffle tree sums the lanes.
// The warps' partial sums meet in shared memory and are added in warp order
// 0, 1, 2, ...  With SPLITS > 1 the blocks of blockIdx.z = batch * SPLITS +
// split each reduce KS of K, write their sums to a workspace slot, and the
// last block of a slice to arrive (an integer counter, reset by it) adds the
// slots in split order.  The epilogue runs once per output, after the sum.
// No atomics touch values: the result is the same on every run.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int MR = {{MR}};          // rows (M, at most 16)
    const int SLICE = {{SLICE}};    // columns per block
    const int VW = {{VW}};          // elements per load
    const int WARPS = {{WARPS}};
    const int SPLITS = {{SPLITS}};
    const fg_i64 KW = {{KW}}, KS = {{KS}};   // k per warp, k per split (WARPS * KW)
    FG_SHARED float red[{{WARPS}}][{{MR}} * {{SLICE}}];   // each warp's partial sums
{{#SPLIT}}
    FG_SHARED int last_s;
{{/SPLIT}}

    const int tid = (int)fg_tid_x();
    const int lane = tid & 31, warp = tid >> 5;
    const fg_i64 bt = fg_bid_z() / SPLITS;   // the batch
    const int split = (int)(fg_bid_z() % SPLITS);
    const fg_i64 n0 = (fg_i64)fg_bid_x() * SLICE;
{{BATCH}}
    const float *A = p.{{A}} + a_base;
    const float *B = p.{{B}} + b_base;
    const fg_i64 kb = split * KS + warp * KW;
    const fg_i64 ke = kb + KW < K ? kb + KW : K;

{{^TB}}
    // lane's columns c0 .. c0 + VW (N % VW == 0: all in or all out)
    const fg_i64 c0 = n0 + lane * VW;
    float acc[{{MR}}][{{VW}}];
    FG_UNROLL
    for (int m = 0; m < MR; m++)
        FG_UNROLL
        for (int v = 0; v < VW; v++)
            acc[m][v] = 0.0f;
    if (c0 < N) {
        for (fg_i64 k = kb; k < ke; k++) {
            float b[{{VW}}];
{{#VEC}}
            fg_load4(B + k * N + c0, b);
{{/VEC}}
{{^VEC}}
            b[0] = B[k * N + c0];
{{/VEC}}
            FG_UNROLL
            for (int m = 0; m < MR; m++) {
{{^TA}}
                const float a = A[m * K + k];
{{/TA}}
{{#TA}}
                const float a = A[k * M + m];
{{/TA}}
                FG_UNROLL
                for (int v = 0; v < VW; v++)
                    acc[m][v] += a * b[v];
            }
        }
    }
    FG_UNROLL
    for (int m = 0; m < MR; m++)
        FG_UNROLL
        for (int v = 0; v < VW; v++)
            red[warp][m * SLICE + lane * VW + v] = acc[m][v];
{{/TB}}
{{#TB}}
    // the warp's columns n0 .. n0 + SLICE; lane's k runs of VW
    float acc[{{MR}}][{{SLICE}}];
    FG_UNROLL
    for (int m = 0; m < MR; m++)
        FG_UNROLL
        for (int c = 0; c < SLICE; c++)
            acc[m][c] = 0.0f;
    for (fg_i64 k = kb + lane * VW; k < ke; k += 32 * VW) {
        float b[{{SLICE}}][{{VW}}];
        FG_UNROLL
        for (int c = 0; c < SLICE; c++) {
            const fg_i64 col = n0 + c < N ? n0 + c : N - 1;   // past the edge: a valid row, never stored
{{#VEC}}
            fg_load4(B + col * K + k, b[c]);
{{/VEC}}
{{^VEC}}
            b[c][0] = B[col * K + k];
{{/VEC}}
        }
        FG_UNROLL
        for (int m = 0; m < MR; m++) {
            float a[{{VW}}];
{{#A_VEC}}
            fg_load4(A + m * K + k, a);
{{/A_VEC}}
{{^A_VEC}}
            FG_UNROLL
            for (int v = 0; v < VW; v++)
{{^TA}}
                a[v] = A[m * K + k + v];
{{/TA}}
{{#TA}}
                a[v] = A[(k + v) * M + m];
{{/TA}}
{{/A_VEC}}
            FG_UNROLL
            for (int c = 0; c < SLICE; c++)
                FG_UNROLL
                for (int v = 0; v < VW; v++)
                    acc[m][c] += a[v] * b[c][v];
        }
    }
    // the lanes' sums: a fixed xor tree (every lane ends with the same value)
    FG_UNROLL
    for (int m = 0; m < MR; m++)
        FG_UNROLL
        for (int c = 0; c < SLICE; c++) {
            float s = acc[m][c];
            FG_UNROLL
            for (int off = 16; off > 0; off >>= 1)
                s += fg_shfl_xor(s, off);
            if (lane == 0)
                red[warp][m * SLICE + c] = s;
        }
{{/TB}}
    fg_sync();

    // each output (row m, column n0 + c) of the block: t = m * SLICE + c
{{#SPLIT}}
    // this split's sums to its slot of the slice's SPLITS slots, then the
    // slice's counter (the counters buffer); the last block to arrive adds
    // the slots in order
    float *ws = (float *)p.{{WS}};
    const fg_i64 slice = bt * fg_gdim_x() + fg_bid_x();
    float *slots = ws + slice * SPLITS * (fg_i64)(MR * SLICE);
{{/SPLIT}}
    for (int t = tid; t < MR * SLICE; t += {{THREADS}}) {
        float s = red[0][t];
        for (int w = 1; w < WARPS; w++)   // fixed order: warp 0, 1, 2, ...
            s += red[w][t];
{{#SPLIT}}
        slots[(fg_i64)split * (MR * SLICE) + t] = s;
    }
    fg_threadfence();                    // the slot is visible before the count
    fg_sync();
    if (tid == 0) {
        int *count = p.{{WSC}} + slice;
        const bool last = fg_atomic_add_i32(count, 1) == SPLITS - 1;
        if (last)
            *count = 0;                  // zero again for the next launch
        last_s = last ? 1 : 0;
    }
    fg_sync();
    if (last_s == 0)
        return;
    fg_threadfence();                    // the other blocks' slots are visible
    for (int t = tid; t < MR * SLICE; t += {{THREADS}}) {
        float s = slots[t];
        for (int z = 1; z < SPLITS; z++)   // fixed order: split 0, 1, 2, ...
            s += slots[(fg_i64)z * (MR * SLICE) + t];
{{/SPLIT}}
        const fg_i64 row = t / SLICE, col = n0 + t % SLICE;
        if (row >= M || col >= N)
            continue;
        const float v = fg_epilogue(p, s, {{EPI_ARGS}});
        fg_store(p.{{Y}} + y_base + row * N + col, v);
    }
}
