// ---- template pool2d.cuh: max / average pooling --------------------------------
// One thread per output element, in the output's memory order (grid-stride
// loop).  Window tap (r, s) of output (oh, ow) reads input row
// oh * SH - PH + r * DH and column ow * SW - PW + s * DW (PH, PW: the begin
// padding).  Taps in the padding are skipped; `taps` counts the taps inside
// the padded extent (rows below H + EH, columns below W + EW; EH, EW: the end
// padding), the divisor of an average that counts padding; `count` those
// inside the input, the divisor of one that does not.  A ceil_mode window
// overhanging the padded extent counts neither.  A window with no tap inside
// the input gives 0.  The first element of the window starts the reduction
// (the initial value stands for an empty window), so the max of a window of
// -inf is -inf; a NaN in the window makes the result NaN, for max as for
// average (PyTorch's max_pool2d semantics).
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < N * C * OH * OW; i += stride) {
{{COORDS}}
        float acc = {{INIT}};
        int count = 0, taps = 0;
        for (fg_i64 r = 0; r < R; r++) {
            const fg_i64 ih = oh * SH - PH + r * DH;
            if (ih >= H + EH)
                break;   // later rows lie further past the padded extent
            for (fg_i64 s = 0; s < S; s++) {
                const fg_i64 iw = ow * SW - PW + s * DW;
                if (iw >= W + EW)
                    break;
                taps++;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                    continue;
                const float xv = fg_load(p.{{X}} + off_x(p, n, c, ih, iw));
                acc = (count == 0 || fg_isnanf(xv)) ? xv : ({{REDUCE}});
                count++;
            }
        }
        const float v = {{FINISH}};
        fg_store(p.{{Y}} + off_y(p, n, c, oh, ow), fg_epilogue(p, v, n, c, oh, ow));
    }
}
