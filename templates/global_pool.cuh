// ---- template global_pool.cuh: mean over H x W ---------------------------------
// One warp per output (n, c): the lanes sum strided elements, then a shuffle
// reduction; lane 0 applies the epilogue and stores.  The loop bound is the
// same for every lane of a warp, so the shuffles are convergent.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 warps = fg_bdim_x() / 32;
    for (fg_i64 o = (fg_i64)fg_bid_x() * warps + fg_warp(); o < N * C; o += (fg_i64)fg_gdim_x() * warps) {
        const fg_i64 n = o / C;
        const fg_i64 c = o % C;
        float sum = 0.0f;
        for (fg_i64 i = fg_lane(); i < H * W; i += 32)
            sum += fg_load(p.{{X}} + off_x(p, n, c, i / W, i % W));
        for (int d = 16; d > 0; d /= 2)
            sum += fg_shfl_xor(sum, d);
        if (fg_lane() == 0) {
            const float v = H * W > 0 ? sum / (float)(H * W) : 0.0f;
            fg_store(p.{{Y}} + off_y(p, n, c), fg_epilogue(p, v, {{EPI_ARGS}}));
        }
    }
}
