// ---- template reduce.cuh: a reduction over axes ---------------------------------
// Output element r (ROWS of them) reduces LEN input elements.  The input's
// logical index is base + off: base from r over the kept axes, off from k
// (0 .. LEN - 1) over the reduced ones, each a few runs of adjacent axes.
// GROUP lanes work on one output: 1 (a thread per output, for reductions over
// outer axes, where neighbouring outputs are neighbours in memory), 32 (a
// warp, warp shuffles) or the whole block (shuffles, then one value per warp
// in shared memory).  acc starts at INIT (max / min: the row's first
// element), takes combine(acc, map(x)) of every element, the group's
// accumulators are combined and FINISH(acc) is stored through the epilogue.
// With SHIFT (log_sum_exp) a first pass finds the row's max m and the
// elements map to exp(x - m), the result m + log(sum); an infinite max
// shifts by 0, so that a row of -inf gives -inf and one with +inf gives +inf.
// max and min propagate NaN (fg_maxf / fg_minf).  With ARG (argmax, argmin;
// GROUP 1) each thread walks its row in index order and stores the index of
// the element that BETTER last took.
FG_DEVICE float fg_rd_load(const {{PARAMS}} &p, fg_i64 lin)
{
{{LOAD}}
}

FG_DEVICE void fg_rd_store(const {{PARAMS}} &p, fg_i64 lin, float v)
{
{{STORE}}
}

FG_DEVICE float fg_rd_map(float v, float m) { return {{MAP}}; }

FG_DEVICE float fg_rd_combine(float a, float b) { return {{COMBINE}}; }

// The group's combined value of v (combine, or max when is_max); every lane
// of the group gets it.
FG_DEVICE float fg_rd_group(float v, float *red, bool is_max)
{
{{#WARP}}
    for (int d = 16; d > 0; d /= 2) {
        const float o = fg_shfl_xor(v, d);
        v = is_max ? fg_maxf(v, o) : fg_rd_combine(v, o);
    }
{{/WARP}}
{{#BLOCK}}
    if (fg_lane() == 0)
        red[fg_warp()] = v;
    fg_sync();
    const int warps = (int)(fg_bdim_x() / 32);
    v = red[0];
    for (int w = 1; w < warps; w++)
        v = is_max ? fg_maxf(v, red[w]) : fg_rd_combine(v, red[w]);
    fg_sync();   // red is written again by the next reduction
{{/BLOCK}}
    return v;
}

FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
{{^ARG}}
    FG_SHARED float red[32];
{{/ARG}}
    const fg_i64 lane = fg_tid_x() % {{GROUP}};
    const fg_i64 per_block = fg_bdim_x() / {{GROUP}};
    for (fg_i64 r0 = (fg_i64)fg_bid_x() * per_block; r0 < ROWS; r0 += (fg_i64)fg_gdim_x() * per_block) {
        const fg_i64 r = r0 + fg_tid_x() / {{GROUP}};
        const bool live = r < ROWS;
        fg_i64 base = 0;   // logical index of the row's first element
        if (live) {
{{BASE}}
        }
{{#ARG}}
        if (live) {
            float best = fg_rd_load(p, base);
            fg_i64 at = 0;
            for (fg_i64 k = 1; k < LEN; k++) {
{{OFF}}
                const float v = fg_rd_load(p, base + off);
                if ({{BETTER}}) {
                    best = v;
                    at = k;
                }
            }
            fg_rd_store(p, r, (float)at);
        }
{{/ARG}}
{{^ARG}}
        float m = 0.0f;
{{#SHIFT}}
        m = fg_rd_load(p, base);
        if (live)
            for (fg_i64 k = lane; k < LEN; k += {{GROUP}}) {
{{OFF}}
                m = fg_maxf(m, fg_rd_load(p, base + off));
            }
        m = fg_rd_group(m, red, true);
        if (fabsf(m) > 3.402823466e+38f)
            m = 0.0f;   // infinite: shift by 0 (NaN stays NaN)
{{/SHIFT}}
        float acc = {{INIT}};
        if (live)
            for (fg_i64 k = lane; k < LEN; k += {{GROUP}}) {
{{OFF}}
                acc = fg_rd_combine(acc, fg_rd_map(fg_rd_load(p, base + off), m));
            }
        acc = fg_rd_group(acc, red, false);
        if (live && lane == 0)
            fg_rd_store(p, r, {{FINISH}});
{{/ARG}}
    }
}
