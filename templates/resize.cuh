// ---- template resize.cuh: nearest / linear / cubic resize over H and W -------
// One thread per output element, in the output's memory order (grid-stride
// loop), fp32 arithmetic.  Output row oh maps to the input coordinate
// {{SRC_H}} (the coordinate transformation mode, resize.h), column ow to
// {{SRC_W}}; resize_taps turns a coordinate into input indices (clamped into
// the input: the edge repeats) and weights: nearest one tap (floor, or
// floor + 1 by nearest_mode), linear two, cubic four (Keys' kernel of
// parameter A; exclude_outside zeroes the taps outside the input and
// renormalises).  A 2-D tap weighs wh * ww.
FG_DEVICE int resize_taps(const float x, const fg_i64 n, fg_i64 *idx, float *w)
{
    const float f = floorf(x);
    const float r = x - f;
    const fg_i64 fi = (fg_i64)f;
{{#NEAREST}}
    const fg_i64 j = fi + (({{ROUND_UP}}) ? 1 : 0);
    idx[0] = j < 0 ? 0 : j >= n ? n - 1 : j;
    w[0] = 1.0f;
    return 1;
{{/NEAREST}}
{{#LINEAR}}
    const int nt = 2;
    const fg_i64 first = fi;
    w[0] = 1.0f - r;
    w[1] = r;
{{/LINEAR}}
{{#CUBIC}}
    const int nt = 4;
    const fg_i64 first = fi - 1;
    const float A = {{CUBIC_A}};
    const float t0 = r + 1.0f, q = 1.0f - r, t3 = 2.0f - r;
    w[0] = ((A * t0 - 5.0f * A) * t0 + 8.0f * A) * t0 - 4.0f * A;
    w[1] = ((A + 2.0f) * r - (A + 3.0f)) * r * r + 1.0f;
    w[2] = ((A + 2.0f) * q - (A + 3.0f)) * q * q + 1.0f;
    w[3] = ((A * t3 - 5.0f * A) * t3 + 8.0f * A) * t3 - 4.0f * A;
{{/CUBIC}}
{{^NEAREST}}
    float sum = 0.0f;
    for (int t = 0; t < nt; t++) {
        const fg_i64 j = first + t;
{{#EXCLUDE}}
        if (j < 0 || j >= n)
            w[t] = 0.0f;
{{/EXCLUDE}}
        sum += w[t];
        idx[t] = j < 0 ? 0 : j >= n ? n - 1 : j;
    }
{{#EXCLUDE}}
    if (sum != 0.0f)
        for (int t = 0; t < nt; t++)
            w[t] /= sum;
{{/EXCLUDE}}
    (void)sum;
    return nt;
{{/NEAREST}}
}

FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < N * C * OH * OW; i += stride) {
{{COORDS}}
        fg_i64 ih[4], iw[4];
        float wh[4], ww[4];
        const int nh = resize_taps({{SRC_H}}, H, ih, wh);
        const int nw = resize_taps({{SRC_W}}, W, iw, ww);
        float acc = 0.0f;
        for (int a = 0; a < nh; a++) {
            float row = 0.0f;
            for (int b = 0; b < nw; b++)
                row += ww[b] * fg_load(p.{{X}} + off_x(p, n, c, ih[a], iw[b]));
            acc += wh[a] * row;
        }
        fg_store(p.{{Y}} + off_y(p, n, c, oh, ow), fg_epilogue(p, acc, n, c, oh, ow));
    }
}
