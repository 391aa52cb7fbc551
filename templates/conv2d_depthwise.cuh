// ---- template conv2d_depthwise.cuh: depthwise convolution ----------------------
// One input channel per group (Cg == 1): one thread per output element, in the
// output's memory order (grid-stride loop); the R x S weights of a channel are
// read directly (they stay in cache).  Accumulation in fp32.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < N * K * OH * OW; i += stride) {
{{COORDS}}
        const fg_i64 ci = k / Kg;  // the group's one input channel
        float acc = 0.0f;
        for (fg_i64 r = 0; r < R; r++) {
            const fg_i64 ih = oh * SH - PH + r * DH;
            if (ih < 0 || ih >= H)
                continue;
            for (fg_i64 s = 0; s < S; s++) {
                const fg_i64 iw = ow * SW - PW + s * DW;
                if (iw < 0 || iw >= W)
                    continue;
                acc += fg_load(p.{{X}} + off_x(p, n, ci, ih, iw)) * fg_load(p.{{WGT}} + off_w(p, k, 0, r, s));
            }
        }
        const float v = fg_epilogue(p, acc, n, k, oh, ow);
        fg_store(p.{{Y}} + off_y(p, n, k, oh, ow), v);
    }
}
