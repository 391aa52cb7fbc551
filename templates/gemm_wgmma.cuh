// ---- template gemm_wgmma.cuh: matrix multiply on Hopper (sm_90a) -------------
// Y = A (MR x K) * B (K x N), fp16 / bf16 operands (or fp32 read as tf32: EB,
// the element bytes, 4; BK = 128 / EB elements either way), fp32 accumulation, with
// wgmma.mma_async from shared-memory descriptors, TMA loads into a STAGES-deep
// ring completed on mbarriers, and 256 threads, two warpgroups of 64 rows of
// the BM x BN tile each, with no producer warpgroup (so that two blocks of
// BN 128 fit an SM: 128 registers a thread):
//   - thread 0 is also the loader: it issues the first STAGES k tiles, then
//     one after each release of its warpgroup: it waits until both
//     warpgroups have released the stage, announces its bytes on the
//     stage's full barrier and issues the TMA copies of A's and B's k tile;
//   - each warpgroup waits until the stage is full, issues four wgmma steps
//     (k16, or k8 for tf32: 32 bytes of each row), commits, waits until at
//     most one group is in flight (the previous stage's wgmmas are done) and
//     releases the previous stage on its empty barrier (one arrival per
//     warpgroup).
// Tiles: A [BM rows][BK k], K contiguous, 128-byte rows with the 128B swizzle
// (chunk j of row r at j ^ (r % 8)), one box of BK x BM; B stored [N, K]
// (TB 0): the same layout, [BN rows][BK]; B stored [K, N] (TB 1): BN / 64
// boxes of [BK k rows][64 n], 128B swizzled, N-major for wgmma.  Out-of-range
// elements are zero-filled by TMA; a box always signals its full size.
// Batched operands (A's batch axes contiguous, B shared) are folded into MR =
// batch * M rows; the epilogue recovers the batch coordinates from the row.
// The epilogue runs on the accumulator fragments (d[i]: row 16 w + l / 4 +
// 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2), guarded at the
// edges; each quad transposes its row's values so that a lane stores eight
// consecutive columns with one 16-byte store (below).
// Taps (conv2d_wgmma with an R x S kernel, TAPS): stride 1 and an output as
// large as the input, so the input pixel under tap (r, s) of output pixel m
// is row m + (r DH - PT) W + s DW - PL of x viewed as [N*H*W, C]: k tile kt
// (C a multiple of BK, so a tile lies in one tap) is a box of BM such rows
// at channel (kt % (C / BK)) BK, and B's k tile is the weights [K, R*S*C]
// at column kt BK.  A row whose pixel lies in the padding read a neighbour
// (or zero past the tensor): after the stage is full, each warpgroup zeroes
// those of its own 64 rows with generic stores (two threads a row), fences
// them for the async proxy (wgmma) and meets on its `fixed` mbarrier before
// its wgmmas read them.
// Pixel tiles (conv2d_wgmma, PIX: any stride up to 8, padding, output
// size): the block's BM rows are TN images x TH output rows x TW output
// columns from (nb0, oh0, ow0), tile row r = (image * TH + row) * TW +
// column; k tile kt is tap kt / CT (CT = ceil(C / BK) channel tiles) at
// channel (kt % CT) BK, one 4-D TMA box of x [N, H, W, C] at (channel,
// ow0 SW - PL + s DW, oh0 SH - PT + r DH, nb0) of BK x TW SW x TH SH x TN
// elements stepping by (1, SW, SH, 1): exactly the tile's input pixels
// under the tap, in tile-row order, zeros where they fall outside the image
// (the padding) or past C.
// Persistent: the kernel covers MT x NT tiles of BM x BN (tile t is row
// tile t / NT, column tile t % NT, so consecutive tiles share A's rows);
// block b runs tiles b, b + gridDim.x, ... (fg_kernel.persistent: the GPU
// launch has as many blocks as its SMs hold at once).  The loader runs
// ahead into the next tile while the warpgroups store the last one: a stage
// is released as soon as its wgmmas are done, the tile's last one after its
// final wait.
// Split-K (SPLIT, SPLITS > 1: few tiles for the SMs): the units of work are
// (tile, split) pairs, unit u = tile * SPLITS + split, split z reducing k
// tiles [z KT_SPLIT, (z + 1) KT_SPLIT); every role walks the units as it
// walks tiles.  After its last wgmma a warpgroup writes its 64 x BN
// accumulators to slot z of its half tile in the workspace, fences, and
// meets its warpgroup on an mbarrier; thread 0 bumps the half tile's
// counter, and the warpgroup that sees SPLITS - 1 arrivals before it resets
// the counter, adds the SPLITS slots in the order 0, 1, ... (the same sum
// whatever order the units finished in; no float atomics) and alone runs
// the epilogue; the others go on to their next unit.
// The ring lives in dynamic shared memory (FG_SHARED_DYN: the launch's
// fg_kernel.smem bytes on the device, a static array in emulation), from its
// first 1024-byte aligned address (the 128B swizzle pattern's repeat).
FG_KERNEL({{KERNEL}}, __grid_constant__ {{PARAMS}}, {{THREADS}}, {{MIN_BLOCKS}})
{
{{SHAPES}}
    constexpr int BM = 128, BN = {{BN}}, EB = {{EB}}, BK = 128 / EB, STAGES = {{STAGES}};
    constexpr int A_BYTES = BM * BK * EB, B_BYTES = BN * BK * EB, STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int SPLITS = {{SPLITS}};   // split-K: units (tile, split) per tile
    FG_SHARED_DYN(fg_smem, {{SMEM_BYTES}});
    // the ring starts at the first 1024-byte aligned shared address (the
    // descriptor's address field is the shared address >> 4)
    unsigned char *const ring = fg_smem + ((1024 - ((fg_wgmma_desc(fg_smem, 0, 0, 0) & 0x3f) << 4)) & 1023);
    fg_mbar *const full = (fg_mbar *)(ring + STAGES * STAGE_BYTES);
    fg_mbar *const empty = full + STAGES;
{{#TAPS}}
    fg_mbar *const fixed = empty + STAGES;           // per warpgroup: its padding rows are zero
{{/TAPS}}
{{#SPLIT}}
    fg_mbar *const met = empty + STAGES + 2 * {{TAPS}};   // per warpgroup: its 128 threads wrote their slot
    fg_mbar *const told = met + 2;                   // and thread 0 has read the counter
    int *const last = (int *)(told + 2);             // whether the warpgroup reduces the half tile
{{/SPLIT}}

    const int tid = (int)fg_tid_x();
    const int wg = tid / 128;
    const int KT = (int)((K + BK - 1) / BK);
    const int NT = (int)((N + BN - 1) / BN);    // column tiles; MT row tiles; tile t is row tile t / NT
    const int TILES = (int)MT * NT;             // < 2^31 (the emitter checks)
    const int UNITS = TILES * SPLITS;           // (tile, split) pairs, < 2^31 (the emitter checks)
    const int KT_SPLIT = {{KT_SPLIT}};          // k tiles per split (the last may have fewer)
{{#PIX}}
    constexpr int TW = {{TW}}, TH = {{TH}}, TN = {{TN}};   // the pixel tile: TN x TH x TW = BM
{{/PIX}}
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            fg_mbar_init(&full[s], 1);    // the loader's arrive_expect_tx (+ the TMA bytes)
            fg_mbar_init(&empty[s], 2);   // one arrival per warpgroup
        }
{{#TAPS}}
        for (int c = 0; c < 2; c++)
            fg_mbar_init(&fixed[c], 128);   // the warpgroup's threads zeroed their padding rows
{{/TAPS}}
{{#SPLIT}}
        for (int c = 0; c < 2; c++) {
            fg_mbar_init(&met[c], 128);
            fg_mbar_init(&told[c], 1);
        }
{{/SPLIT}}
        fg_fence_mbar_init();
    }
    fg_sync();

    // Every walk -- the loader's and each warpgroup's -- covers the same units,
    // bid, bid + gdim, ..., and counts the k tiles it has passed: k tile `it`
    // lies in stage it % STAGES, in round it / STAGES (a barrier's phase parity),
    // carried from one unit to the next.
    //
    // ---- the loader: thread 0, STAGES k tiles ahead of the warpgroups ----
    // load_next() issues the loader's next k tile (lu: its unit, lkt: the k
    // tile, lit: its count) into stage lit % STAGES once both warpgroups have
    // released it; called STAGES times here, then once after each release of
    // thread 0's warpgroup, so stage (it - 1) % STAGES, just released, gets
    // k tile it - 1 + STAGES.
    int lu = (int)fg_bid_x(), lkt = lu % SPLITS * KT_SPLIT, lit = 0;
    auto load_next = [&]() {
        if (lu >= UNITS)
            return;
        const int tile = lu / SPLITS, kt = lkt;
{{TILE_P}}
        const int s = lit % STAGES;
        fg_mbar_wait(&empty[s], ((lit / STAGES) & 1) ^ 1);   // round 0 passes: a fresh barrier
        unsigned char *const a_s = ring + s * STAGE_BYTES;
        unsigned char *const b_s = a_s + A_BYTES;
        fg_mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
{{#PIX}}
        const int CT = (int)((C + BK - 1) / BK);   // channel tiles per tap
        const int tap = kt / CT, cb = kt % CT;
        fg_tma_load_4d(a_s, &p.{{TMAP_A}}, cb * BK, ow0 * (int)SW - (int)PL + tap % (int)S * (int)DW,
                       oh0 * (int)SH - (int)PT + tap / (int)S * (int)DH, nb0, &full[s]);
{{/PIX}}
{{^PIX}}
{{^TAPS}}
        fg_tma_load_2d(a_s, &p.{{TMAP_A}}, kt * BK, (int)m0, &full[s]);
{{/TAPS}}
{{/PIX}}
{{#TAPS}}
        const int tap = kt / (int)(C / BK), cb = kt % (int)(C / BK);
        const int shift = (tap / (int)S * (int)DH - (int)PT) * (int)W + tap % (int)S * (int)DW - (int)PL;
        fg_tma_load_2d(a_s, &p.{{TMAP_A}}, cb * BK, (int)m0 + shift, &full[s]);
{{/TAPS}}
{{^TB}}
        fg_tma_load_2d(b_s, &p.{{TMAP_B}}, kt * BK, (int)n0, &full[s]);
{{/TB}}
{{#TB}}
        constexpr int BOX_BYTES = 64 * BK * EB;   // one [BK][64 n] box of B
        FG_UNROLL
        for (int j = 0; j < BN / 64; j++)
            fg_tma_load_2d(b_s + j * BOX_BYTES, &p.{{TMAP_B}}, (int)n0 + 64 * j, kt * BK, &full[s]);
{{/TB}}
        lit++;
        const int lk1 = lu % SPLITS * KT_SPLIT + KT_SPLIT;
        if (++lkt >= (lk1 < KT ? lk1 : KT)) {   // the unit's last k tile: on to the next unit
            lu += (int)fg_gdim_x();
            lkt = lu % SPLITS * KT_SPLIT;
        }
    };
    if (tid == 0)
        for (int i = 0; i < STAGES; i++)
            load_next();

    // ---- the warpgroups: rows 64 c .. 64 c + 63 of each tile ----
    const int c = wg;
    const int w = (tid % 128) / 32, l = tid % 32, q = l % 4;
    float d[BN / 2];
    FG_UNROLL
    for (int i = 0; i < BN / 2; i++)
        d[i] = 0.0f;
    int it = 0;
{{#SPLIT}}
    int sp = 0;   // split-K meetings so far: the phase parity of met and told
{{/SPLIT}}
    for (int u = (int)fg_bid_x(); u < UNITS; u += (int)fg_gdim_x()) {
        const int tile = u / SPLITS, k0 = u % SPLITS * KT_SPLIT;
        const int k1 = k0 + KT_SPLIT < KT ? k0 + KT_SPLIT : KT;
{{#SPLIT}}
        FG_UNROLL
        for (int i = 0; i < BN / 2; i++)   // the last unit's sums are dead: no copies of them across units
            d[i] = 0.0f;
{{/SPLIT}}
{{TILE_C}}
{{#TAPS}}
        // this thread's half (fq) of row fr of the tile, whose pixel under a tap may lie in the padding
        const int fr = c * 64 + tid % 128 / 2, fq = tid % 2;
        const fg_i64 fm = m0 + fr;
        const bool fok = fm < MR;   // rows past MR are never stored
        const int fh = (int)(fm / W % H), fw = (int)(fm % W);
{{/TAPS}}
        for (int kt = k0; kt < k1; kt++, it++) {
            const int s = it % STAGES;
            fg_mbar_wait(&full[s], (it / STAGES) & 1);
{{#TAPS}}
            {   // a row whose pixel lies in the padding read a neighbour (or TMA's zeros): zero it
                const int tap = kt / (int)(C / BK);
                const int ih = fh + tap / (int)S * (int)DH - (int)PT, iw = fw + tap % (int)S * (int)DW - (int)PL;
                if (fok && (ih < 0 || ih >= (int)H || iw < 0 || iw >= (int)W)) {
                    // half of a 128-byte row: the swizzle only permutes its chunks
                    fg_chunk16 *const half = (fg_chunk16 *)(ring + s * STAGE_BYTES + fr * (BK * EB)) + fq * 4;
                    FG_UNROLL
                    for (int j = 0; j < 4; j++)
                        half[j] = fg_chunk16{};
                }
                fg_fence_proxy_async();   // the zeros are what wgmma reads
                fg_mbar_arrive(&fixed[c]);
                fg_mbar_wait(&fixed[c], it & 1);   // one phase per k tile: the warpgroup's rows are all fixed
            }
{{/TAPS}}
            const unsigned char *const a_s = ring + s * STAGE_BYTES + c * (64 * BK * EB);
            const unsigned char *const b_s = ring + s * STAGE_BYTES + A_BYTES;
            fg_wgmma_fence();
            FG_UNROLL
            for (int kk = 0; kk < BK * EB / 32; kk++) {
                // K-major, 128B swizzle: 8-row groups 1024 bytes apart, a k step (k16, tf32 k8) = 32 bytes along the row
                const fg_u64 da = fg_wgmma_desc(a_s + kk * 32, 128, 16, 1024);
{{^TB}}
                const fg_u64 db = fg_wgmma_desc(b_s + kk * 32, 128, 16, 1024);
{{/TB}}
{{#TB}}
                // N-major, 128B swizzle: 64-column boxes 64 * BK * 2 bytes apart (leading), 8 k rows 1024 (stride)
                const fg_u64 db = fg_wgmma_desc(b_s + kk * 16 * 128, 128, 64 * BK * EB, 1024);
{{/TB}}
                {{WGMMA}}<BN, {{TB}}>(d, da, db, kt > k0 || kk > 0);
            }
            fg_wgmma_commit();
            fg_wgmma_wait<1>();                     // the previous stage's wgmmas are done
            if (kt > k0 && tid % 128 == 0)
                fg_mbar_arrive(&empty[(it - 1) % STAGES]);
            if (kt > k0 && tid == 0)
                load_next();                        // into the stage just released
        }
        fg_wgmma_wait<0>();
        if (tid % 128 == 0)   // the unit's last stage (the loader is already loading the next unit)
            fg_mbar_arrive(&empty[(it - 1) % STAGES]);
        if (tid == 0)
            load_next();
{{#SPLIT}}

        // ---- split-K: slot u % SPLITS of this warpgroup's half tile, each
        // thread's accumulators at [i][tid % 128]; one counter per half tile ----
        {
            const int t = tid % 128;
            float *const ws = (float *)p.{{WS}} + (fg_i64)(tile * 2 + c) * SPLITS * (64 * BN);
            float *const slot = ws + (fg_i64)(u % SPLITS) * (64 * BN);
            FG_UNROLL
            for (int i = 0; i < BN / 2; i++)
                slot[i * 128 + t] = d[i];
            fg_threadfence();                    // the slot is visible before the count
            fg_mbar_arrive(&met[c]);
            fg_mbar_wait(&met[c], sp & 1);
            if (t == 0) {
                int *const count = p.{{WSC}} + tile * 2 + c;
                const int arrived = fg_atomic_add_i32(count, 1);
                last[c] = arrived == SPLITS - 1;
                if (arrived == SPLITS - 1)
                    *count = 0;                  // ready for the next launch
                fg_mbar_arrive(&told[c]);
            }
            fg_mbar_wait(&told[c], sp & 1);
            sp++;
            if (!last[c])
                continue;                        // another unit of this tile adds the slots
            fg_threadfence();                    // see the other units' slots
            // fixed order: split 0, 1, 2, ... onto cleared accumulators (one slot's loads in flight)
            FG_UNROLL
            for (int i = 0; i < BN / 2; i++)
                d[i] = 0.0f;
            FG_UNROLL_BY(1)
            for (int z = 0; z < SPLITS; z++) {
                const float *const sz = ws + (fg_i64)z * (64 * BN) + t;
                FG_UNROLL
                for (int i = 0; i < BN / 2; i++)
                    d[i] += sz[i * 128];
            }
        }
{{/SPLIT}}

        // ---- epilogue from the accumulator fragments, stored 16 bytes at a time ----
        // A quad (lanes 4 i .. 4 i + 3) holds one row of the tile: lane q has the
        // column pair 2 q of every n8 block j.  Per four blocks 4 g .. 4 g + 3 each
        // lane runs the epilogue on its four pairs, the quad transposes them (two
        // exchange steps, lane q swapping with q ^ m the pair slots whose bit m
        // differs from its own), and lane q stores block 4 g + q's eight columns
        // with one 16-byte store (two for fp32).  Every lane takes part in the
        // shuffles; rows and blocks past the output compute nothing and store
        // nothing.  N is a multiple of 8 (the emitter checks), so a block lies
        // wholly inside or outside the output and its store is 16-byte aligned.
        // When the output's columns are its innermost axis the quad transposes the
        // accumulators first and fg_epilogue8 runs on a lane's eight columns, so
        // residuals and biases along them are read 16 bytes at a time too.
        FG_UNROLL
        for (int h = 0; h < 2; h++) {
            const int r = c * 64 + w * 16 + l / 4 + 8 * h;   // the row of the tile
{{ROW}}
            FG_UNROLL
            for (int g = 0; g < BN / 32; g++) {
                float a[8];   // a[2 k + e]: column 2 q + e of block 4 g + k, then block 4 g + q's column 2 k + e
                FG_UNROLL
                for (int k = 0; k < 4; k++) {
                    const int j = 4 * g + k;
{{#VEC_EPI}}
                    a[2 * k] = d[4 * j + 2 * h];       // the epilogue runs after the transpose
                    a[2 * k + 1] = d[4 * j + 2 * h + 1];
{{/VEC_EPI}}
{{^VEC_EPI}}
                    const fg_i64 col = n0 + 8 * j + 2 * q;
                    const bool ok = live && col < N;
                    a[2 * k] = ok ? fg_epilogue(p, d[4 * j + 2 * h], {{EPI_ARGS}}) : 0.0f;
                    a[2 * k + 1] = ok ? fg_epilogue(p, d[4 * j + 2 * h + 1], {{EPI_ARGS1}}) : 0.0f;
{{/VEC_EPI}}
                }
                FG_UNROLL
                for (int m = 1; m <= 2; m *= 2) {
                    const bool hi = (q & m) != 0;
                    FG_UNROLL
                    for (int i = 0; i < 2; i++) {
                        const int lo = m == 1 ? 2 * i : i, up = lo + m;   // pair slots with bit m clear and set
                        FG_UNROLL
                        for (int e = 0; e < 2; e++) {
                            const float x = fg_shfl_xor(hi ? a[2 * lo + e] : a[2 * up + e], m);
                            a[2 * lo + e] = hi ? x : a[2 * lo + e];
                            a[2 * up + e] = hi ? a[2 * up + e] : x;
                        }
                    }
                }
                const fg_i64 col = n0 + 32 * g + 8 * q;
                if (live && col < N) {
{{#VEC_EPI}}
                    // columns col .. col + 7: the epilogue's inputs along them in 16-byte loads
                    fg_epilogue8(p, a, {{EPI_ARGS}});
{{/VEC_EPI}}
                    fg_store8(p.{{Y}} + grow * N + col, a);
                }
            }
        }
    }
}
