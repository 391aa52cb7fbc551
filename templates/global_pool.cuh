// ---- template global_pool.cuh: mean or max over H x W --------------------------
// One warp per output (n, c): each lane reduces strided elements, then a
// shuffle reduction combines the lanes; lane 0 applies the epilogue and
// stores.  The loop bound is the same for every lane of a warp, so the
// shuffles are convergent.  Max starts every lane at the plane's first
// element (an element of the window, so a plane of -inf gives -inf) and
// propagates NaN (fg_maxf).
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 warps = fg_bdim_x() / 32;
    for (fg_i64 o = (fg_i64)fg_bid_x() * warps + fg_warp(); o < N * C; o += (fg_i64)fg_gdim_x() * warps) {
        const fg_i64 n = o / C;
        const fg_i64 c = o % C;
        float acc = {{INIT}};
        for (fg_i64 i = fg_lane(); i < H * W; i += 32) {
            const float xv = fg_load(p.{{X}} + off_x(p, n, c, i / W, i % W));
            acc = {{REDUCE}};
        }
        for (int d = 16; d > 0; d /= 2) {
            const float xv = fg_shfl_xor(acc, d);
            acc = {{REDUCE}};
        }
        if (fg_lane() == 0) {
            const float v = {{FINISH}};
            fg_store(p.{{Y}} + off_y(p, n, c), fg_epilogue(p, v, {{EPI_ARGS}}));
        }
    }
}
