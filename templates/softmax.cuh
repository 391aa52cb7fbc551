// ---- template softmax.cuh: softmax over rows ------------------------------------
// The input viewed as [outer, LEN, INNER]: a row is the LEN elements of one
// (outer, inner) pair, LEN the product of the reduced axes.  One block per
// row, grid-stride over ROWS rows.  Pass 1: the row's max (NaN-propagating,
// so a NaN anywhere makes the row NaN, as onnxruntime does); pass 2: the sum
// of exp(x - max); pass 3: exp(x - max) / sum through the epilogue (LOG,
// log-softmax: (x - max) - log(sum), as ONNX's LogSoftmax body).  Block
// reductions: warp shuffles, then one value per warp in shared memory.
// Contiguous rows (INNER 1, row-major input, LEN % 4 == 0) load 4 elements
// (16 bytes of fp32) at a time.
FG_DEVICE float fg_sm_load(const {{PARAMS}} &p, fg_i64 lin)
{
{{LOAD}}
}

FG_DEVICE void fg_sm_store(const {{PARAMS}} &p, fg_i64 lin, float v)
{
{{STORE}}
}

// Block-wide max (is_max) or sum of v; every thread gets the result.
FG_DEVICE float fg_sm_reduce(float v, float *red, bool is_max)
{
    for (int d = 16; d > 0; d /= 2) {
        const float o = fg_shfl_xor(v, d);
        v = is_max ? fg_maxf(v, o) : v + o;
    }
    if (fg_lane() == 0)
        red[fg_warp()] = v;
    fg_sync();
    const int warps = (int)(fg_bdim_x() / 32);
    v = red[0];
    for (int w = 1; w < warps; w++)
        v = is_max ? fg_maxf(v, red[w]) : v + red[w];
    fg_sync();   // red is written again by the next reduction
    return v;
}

FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    FG_SHARED float red[32];
    for (fg_i64 r = fg_bid_x(); r < ROWS; r += fg_gdim_x()) {
        const fg_i64 base = (r / INNER) * LEN * INNER + r % INNER;   // logical index of element 0
        float m = -3.402823466e+38f;   // lowest float
{{#VEC4}}
        for (fg_i64 q = fg_tid_x(); q < LEN / 4; q += fg_bdim_x()) {
            float x4[4];
            fg_load4(p.{{X}} + base + q * 4, x4);
            for (int j = 0; j < 4; j++)
                m = fg_maxf(m, x4[j]);
        }
{{/VEC4}}
{{^VEC4}}
        for (fg_i64 k = fg_tid_x(); k < LEN; k += fg_bdim_x())
            m = fg_maxf(m, fg_sm_load(p, base + k * INNER));
{{/VEC4}}
        m = fg_sm_reduce(m, red, true);
        float s = 0.0f;
{{#VEC4}}
        for (fg_i64 q = fg_tid_x(); q < LEN / 4; q += fg_bdim_x()) {
            float x4[4];
            fg_load4(p.{{X}} + base + q * 4, x4);
            for (int j = 0; j < 4; j++)
                s += expf(x4[j] - m);
        }
{{/VEC4}}
{{^VEC4}}
        for (fg_i64 k = fg_tid_x(); k < LEN; k += fg_bdim_x())
            s += expf(fg_sm_load(p, base + k * INNER) - m);
{{/VEC4}}
        s = fg_sm_reduce(s, red, false);
{{^LOG}}
        const float inv = 1.0f / s;
        for (fg_i64 k = fg_tid_x(); k < LEN; k += fg_bdim_x())
            fg_sm_store(p, base + k * INNER, expf(fg_sm_load(p, base + k * INNER) - m) * inv);
{{/LOG}}
{{#LOG}}
        const float ls = logf(s);
        for (fg_i64 k = fg_tid_x(); k < LEN; k += fg_bdim_x())
            fg_sm_store(p, base + k * INNER, (fg_sm_load(p, base + k * INNER) - m) - ls);
{{/LOG}}
    }
}
