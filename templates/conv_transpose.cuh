// ---- template conv_transpose.cuh: transposed convolution, a direct gather ------
// One thread per output element, in the output's memory order (grid-stride
// loop), fp32 accumulation.  Output (n, k, oh, ow) of group g = k / Kg sums
// x[n, c, ih, iw] * w[c, k - g * Kg, r, s] over the group's Cg input
// channels and the taps (r, s) whose input row ih = (oh + PH - r * DH) / SH
// divides exactly and lies in [0, H) (columns likewise): each output
// gathers the inputs that a scatter would add into it.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < N * K * OH * OW; i += stride) {
{{COORDS}}
        const fg_i64 g = k / Kg, kg = k - g * Kg, c0 = g * Cg;
        float acc = 0.0f;
        for (fg_i64 r = 0; r < R; r++) {
            const fg_i64 th = oh + PH - r * DH;
            if (th < 0 || th % SH != 0)
                continue;
            const fg_i64 ih = th / SH;
            if (ih >= H)
                continue;
            for (fg_i64 s = 0; s < S; s++) {
                const fg_i64 tw = ow + PW - s * DW;
                if (tw < 0 || tw % SW != 0)
                    continue;
                const fg_i64 iw = tw / SW;
                if (iw >= W)
                    continue;
                for (fg_i64 c = c0; c < c0 + Cg; c++)
                    acc += fg_load(p.{{X}} + off_x(p, n, c, ih, iw)) * fg_load(p.{{WGT}} + off_w(p, c, kg, r, s));
            }
        }
        fg_store(p.{{Y}} + off_y(p, n, k, oh, ow), fg_epilogue(p, acc, n, k, oh, ow));
    }
}
