// ---- template attention.cuh: softmax(epilogue(Q K^T)) V in one kernel ---------
// O[bt] = softmax_rows(epilogue(Q[bt] (SQ x D) * K[bt]^T (D x SK))) * V[bt]
// (SK x DV), FlashAttention-2 style: the SQ x SK scores never leave the
// registers.  A block owns BM = 16 WARPS query rows (blockIdx.x) of one batch
// matrix (blockIdx.z); warp w the rows [16 w, 16 w + 16).  The keys stream
// through shared memory in tiles of BN rows of K and V (both [key][d], rows
// padded to KS / VS elements so that a fragment's reads fall in distinct
// banks); per tile each warp
//   - computes its 16 x BN scores S (the m16n8 C fragment layout: lane
//     g = lane / 4, t = lane % 4 holds rows g, g + 8 and columns 2 t, 2 t + 1
//     of each n8 fragment), then the epilogue on each score (the scale and
//     the mask the rule fused: fg_epilogue at the scores' coordinates);
//     scores past SK (and past SQ) are -inf;
//   - online softmax in fp32: the row's running max m (NaN-propagating),
//     mu = m, or 0 while m is -inf (so a masked score gives exp(-inf) = 0,
//     never exp(-inf + inf)), p = exp(s - mu), the running sum l and the
//     accumulator O rescaled by exp(m_old - mu);
//   - O += P V.
// The last store is O / l: a row whose scores are all -inf has l = 0 and
// O = 0, so it is NaN, as the unfused softmax (0 / 0) makes it; a NaN or a
// +inf score makes its row NaN the same way.  With NANZERO (the rule took a
// nan_to_zero of the softmax: PyTorch's export of SDPA writes one) such a
// row stores 0 instead.
//   TC (fp16 / bf16): Q's fragments in registers (loaded once), S and P V
//   with mma m16n8k16 (fp32 accumulation), P converted to the storage type
//   in registers (S's C fragments of keys 16 j .. 16 j + 15 are P's A
//   fragment of k step j); K / V tiles double buffered (NBUF 2): the next
//   tile's loads are issued before this tile's math, with cp.async 16-byte
//   copies (ASYNC: K [SK, D], V [SK, DV], D and DV multiples of 8) or
//   element loads.
//   else (exact fp32, SIMT): Q's rows in shared memory, one K / V buffer,
//   per key tile fma over D, P through shared memory per warp.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int WARPS = {{WARPS}}, BM = 16 * WARPS, BN = {{BN}}, DP = {{DP}}, DVP = {{DVP}}, THREADS = {{THREADS}};
    const int KS = {{KS}}, VS = {{VS}};   // row strides of the K and V tiles (elements)
    const int NI = BN / 8, NJ = DVP / 8;  // n8 fragments of S and of O
{{#TC}}
    const int NBUF = 2;
    FG_SHARED fg_chunk16 kv_raw[(NBUF * BN * (KS + VS) * 2 + 15) / 16];
    {{T}} *const k_s = reinterpret_cast<{{T}} *>(kv_raw);   // [NBUF][BN][KS]
    {{T}} *const v_s = k_s + NBUF * BN * KS;                   // [NBUF][BN][VS]
{{/TC}}
{{^TC}}
    const int NBUF = 1, QS = {{QS}}, PS = BN + 4;
    FG_SHARED float q_s[BM * QS];          // the block's Q rows [m][d]
    FG_SHARED float k_s[BN * KS];          // [key][d]
    FG_SHARED float v_s[BN * VS];          // [key][dv]
    FG_SHARED float p_s[WARPS * 16 * PS];  // per warp: its 16 rows of P [m][key]
{{/TC}}

    const int tid = (int)fg_tid_x();
    const int lane = (int)fg_lane();
    const int warp = (int)fg_warp();
    const int g = lane >> 2, t = lane & 3;
    const fg_i64 bt = fg_bid_z();
    const fg_i64 m0 = (fg_i64)fg_bid_x() * BM;
{{BATCH}}
    (void)y_base;
{{VBASE}}
    const {{T}} *Q = p.{{Q}} + a_base;
    const {{T}} *Kp = p.{{K}} + b_base;
    const {{T}} *V = p.{{V}} + v_base;
    const fg_i64 r0 = m0 + warp * 16 + g, r1 = r0 + 8;   // this lane's two rows
    const fg_i64 ntiles = (SK + BN - 1) / BN;

{{#TC}}
    // Q's A fragments (PTX m16n8k16 .row): a[0] (g, 2t..2t+1), a[1] (g + 8, ..),
    // a[2] (g, 2t + 8..), a[3] (g + 8, 2t + 8..), per k step of 16 along D
    fg_u32 qf[DP / 16][4];
    FG_UNROLL
    for (int kk = 0; kk < DP / 16; kk++)
        FG_UNROLL
        for (int i = 0; i < 4; i++) {
            const fg_i64 r = (i & 1) ? r1 : r0;
            const fg_i64 d = kk * 16 + 2 * t + (i >> 1) * 8;
            {{T}} lo, hi;
            lo.bits = 0;
            hi.bits = 0;
            if (r < SQ && d < D)
                lo = Q[r * D + d];
            if (r < SQ && d + 1 < D)
                hi = Q[r * D + d + 1];
            qf[kk][i] = {{PACK}}(lo, hi);
        }
{{/TC}}
{{^TC}}
    for (int c = tid; c < BM * DP; c += THREADS) {
        const int mm = c / DP, d = c % DP;
        const fg_i64 r = m0 + mm;
        q_s[mm * QS + d] = r < SQ && d < D ? Q[r * D + d] : 0.0f;
    }
{{/TC}}

    float o[NJ][4];
    FG_UNROLL
    for (int nj = 0; nj < NJ; nj++)
        FG_UNROLL
        for (int e = 0; e < 4; e++)
            o[nj][e] = 0.0f;
    const float NEG_INF = fg_neg_inf();
    float mx0 = NEG_INF, mx1 = NEG_INF;   // running max of rows r0, r1
    float l0 = 0.0f, l1 = 0.0f;           // this lane's part of the running sums

{{#TC}}
    {   // the prologue: tile 0 into buffer 0
        const int buf = 0;
        const fg_i64 j0 = 0;
{{LOAD}}
    }
{{/TC}}
    for (fg_i64 it = 0; it < ntiles; it++) {
{{#TC}}
        if (it + 1 < ntiles) {   // the next tile into the other buffer, while this one is used
            const int buf = (int)((it + 1) & 1);
            const fg_i64 j0 = (it + 1) * BN;
{{LOAD}}
        }
{{#ASYNC}}
        if (it + 1 < ntiles)
            fg_cp_async_wait_group<1>();
        else
            fg_cp_async_wait_group<0>();
{{/ASYNC}}
        const int cur = (int)(it & 1);
{{/TC}}
{{^TC}}
        {
            const int buf = 0;
            const fg_i64 j0 = it * BN;
{{LOAD}}
        }
        const int cur = 0;
{{/TC}}
        fg_sync();
        const fg_i64 j0 = it * BN;
        const {{KT}} *kt = k_s + cur * BN * KS;
        const {{KT}} *vt = v_s + cur * BN * VS;

        // S = Q K^T for this warp's 16 rows and the tile's BN keys
        float s[NI][4];
        FG_UNROLL
        for (int ni = 0; ni < NI; ni++)
            FG_UNROLL
            for (int e = 0; e < 4; e++)
                s[ni][e] = 0.0f;
{{#TC}}
        FG_UNROLL
        for (int kk = 0; kk < DP / 16; kk++)
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++) {
                // b[0] (k 2t..2t+1, n g), b[1] (k 2t + 8.., n g): key n, dims k
                const int n = ni * 8 + g;
                fg_u32 bf[2];
                FG_UNROLL
                for (int i = 0; i < 2; i++) {
                    const int at = n * KS + kk * 16 + 2 * t + i * 8;
                    bf[i] = {{PACK}}(kt[at], kt[at + 1]);
                }
                {{MMA}}(s[ni], qf[kk], bf, s[ni]);
            }
{{/TC}}
{{^TC}}
        {
            const float *qa = q_s + (warp * 16 + g) * QS, *qb = qa + 8 * QS;
            for (int d = 0; d < D; d++) {
                const float a0 = qa[d], a1 = qb[d];
                FG_UNROLL
                for (int ni = 0; ni < NI; ni++) {
                    const int n = ni * 8 + 2 * t;
                    const float b0 = kt[n * KS + d], b1 = kt[(n + 1) * KS + d];
                    s[ni][0] += a0 * b0;
                    s[ni][1] += a0 * b1;
                    s[ni][2] += a1 * b0;
                    s[ni][3] += a1 * b1;
                }
            }
        }
{{/TC}}

        // the epilogue on each score; past SQ or SK: -inf (no probability)
        float t0 = NEG_INF, t1 = NEG_INF;   // the tile's row maxima
        FG_UNROLL
        for (int ni = 0; ni < NI; ni++)
            FG_UNROLL
            for (int e = 0; e < 4; e++) {
                const fg_i64 row = (e >> 1) ? r1 : r0;
                const fg_i64 col = j0 + ni * 8 + 2 * t + (e & 1);
                const float v = row < SQ && col < SK ? fg_epilogue(p, s[ni][e], {{EPI_ARGS}}) : NEG_INF;
                s[ni][e] = v;
                if (e >> 1)
                    t1 = fg_maxf(t1, v);
                else
                    t0 = fg_maxf(t0, v);
            }
        t0 = fg_maxf(t0, fg_shfl_xor(t0, 1));
        t1 = fg_maxf(t1, fg_shfl_xor(t1, 1));
        t0 = fg_maxf(t0, fg_shfl_xor(t0, 2));
        t1 = fg_maxf(t1, fg_shfl_xor(t1, 2));
        const float n0 = fg_maxf(mx0, t0), n1 = fg_maxf(mx1, t1);
        const float mu0 = n0 == NEG_INF ? 0.0f : n0, mu1 = n1 == NEG_INF ? 0.0f : n1;
        const float al0 = expf(mx0 - mu0), al1 = expf(mx1 - mu1);   // 0 while the old max is -inf
        mx0 = n0;
        mx1 = n1;
        l0 *= al0;
        l1 *= al1;
        FG_UNROLL
        for (int nj = 0; nj < NJ; nj++) {
            o[nj][0] *= al0;
            o[nj][1] *= al0;
            o[nj][2] *= al1;
            o[nj][3] *= al1;
        }
        FG_UNROLL
        for (int ni = 0; ni < NI; ni++) {
            s[ni][0] = expf(s[ni][0] - mu0);
            s[ni][1] = expf(s[ni][1] - mu0);
            s[ni][2] = expf(s[ni][2] - mu1);
            s[ni][3] = expf(s[ni][3] - mu1);
            l0 += s[ni][0] + s[ni][1];
            l1 += s[ni][2] + s[ni][3];
        }

        // O += P V
{{#TC}}
        FG_UNROLL
        for (int kj = 0; kj < BN / 16; kj++) {
            fg_u32 pa[4];
            pa[0] = {{PACK}}({{CVT}}(s[2 * kj][0]), {{CVT}}(s[2 * kj][1]));
            pa[1] = {{PACK}}({{CVT}}(s[2 * kj][2]), {{CVT}}(s[2 * kj][3]));
            pa[2] = {{PACK}}({{CVT}}(s[2 * kj + 1][0]), {{CVT}}(s[2 * kj + 1][1]));
            pa[3] = {{PACK}}({{CVT}}(s[2 * kj + 1][2]), {{CVT}}(s[2 * kj + 1][3]));
            FG_UNROLL
            for (int nj = 0; nj < NJ; nj++) {
                // b[0] (keys 16 kj + 2t, + 1; dv column nj * 8 + g), b[1] (keys + 8)
                const int n = nj * 8 + g;
                fg_u32 vf[2];
                FG_UNROLL
                for (int i = 0; i < 2; i++) {
                    const int k = kj * 16 + 2 * t + i * 8;
                    vf[i] = {{PACK}}(vt[k * VS + n], vt[(k + 1) * VS + n]);
                }
                {{MMA}}(o[nj], pa, vf, o[nj]);
            }
        }
{{/TC}}
{{^TC}}
        {
            float *pw = p_s + warp * 16 * PS;
            FG_UNROLL
            for (int ni = 0; ni < NI; ni++)
                FG_UNROLL
                for (int e = 0; e < 4; e++)
                    pw[(g + (e >> 1) * 8) * PS + ni * 8 + 2 * t + (e & 1)] = s[ni][e];
            fg_sync();
            for (int j = 0; j < BN; j++) {
                const float p0 = pw[g * PS + j], p1 = pw[(g + 8) * PS + j];
                FG_UNROLL
                for (int nj = 0; nj < NJ; nj++) {
                    const int n = nj * 8 + 2 * t;
                    const float v0 = vt[j * VS + n], v1 = vt[j * VS + n + 1];
                    o[nj][0] += p0 * v0;
                    o[nj][1] += p0 * v1;
                    o[nj][2] += p1 * v0;
                    o[nj][3] += p1 * v1;
                }
            }
        }
{{/TC}}
        fg_sync();   // the buffer is written again by a later tile's loads
    }
    (void)NBUF;
    (void)tid;

    // the sums over the quad, and the one store of O / l
    l0 += fg_shfl_xor(l0, 1);
    l1 += fg_shfl_xor(l1, 1);
    l0 += fg_shfl_xor(l0, 2);
    l1 += fg_shfl_xor(l1, 2);
{{#NANZERO}}
    // nan_to_zero after the softmax: a row whose softmax is NaN (l is 0 or
    // NaN: every score -inf, or a NaN / +inf score) stores 0
    const bool z0 = !(l0 > 0.0f), z1 = !(l1 > 0.0f);
    FG_UNROLL
    for (int nj = 0; nj < NJ; nj++) {
        if (z0)
            o[nj][0] = o[nj][1] = 0.0f;
        if (z1)
            o[nj][2] = o[nj][3] = 0.0f;
    }
    const float inv0 = z0 ? 0.0f : 1.0f / l0, inv1 = z1 ? 0.0f : 1.0f / l1;
{{/NANZERO}}
{{^NANZERO}}
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
{{/NANZERO}}
    {{T}} *Y = p.{{Y}} + bt * SQ * DV;
    FG_UNROLL
    for (int nj = 0; nj < NJ; nj++) {
        const fg_i64 col = nj * 8 + 2 * t;
        if (col >= DV)
            continue;
{{#PAIR}}
        // DV is even: column col + 1 exists and the pair is aligned
        if (r0 < SQ)
            fg_store2(Y + r0 * DV + col, o[nj][0] * inv0, o[nj][1] * inv0);
        if (r1 < SQ)
            fg_store2(Y + r1 * DV + col, o[nj][2] * inv1, o[nj][3] * inv1);
{{/PAIR}}
{{^PAIR}}
        if (r0 < SQ) {
            fg_store(Y + r0 * DV + col, o[nj][0] * inv0);
            if (col + 1 < DV)
                fg_store(Y + r0 * DV + col + 1, o[nj][1] * inv0);
        }
        if (r1 < SQ) {
            fg_store(Y + r1 * DV + col, o[nj][2] * inv1);
            if (col + 1 < DV)
                fg_store(Y + r1 * DV + col + 1, o[nj][3] * inv1);
        }
{{/PAIR}}
    }
}
