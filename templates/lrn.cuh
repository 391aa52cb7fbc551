// ---- template lrn.cuh: local response normalization across channels -----------
// One thread per output element, grid-stride over the output in memory
// order: the sum of squares over the channel window [c - BEFORE, c + AFTER]
// (clipped to the C channels), then x / (BIAS + ALPHA / SIZE * sum)^BETA.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COORDS}}
        const fg_i64 q0 = {{CH}} - BEFORE < 0 ? 0 : {{CH}} - BEFORE;
        const fg_i64 q1 = {{CH}} + AFTER > C - 1 ? C - 1 : {{CH}} + AFTER;
        float sq = 0.0f;
        for (fg_i64 q = q0; q <= q1; q++) {
            const float t = fg_load(p.{{X}} + {{OFF_Q}});
            sq += t * t;
        }
        const float xv = fg_load(p.{{X}} + {{OFF}});
        const float v = xv / powf({{BIAS}} + {{ALPHA}} * sq, {{BETA}});
        fg_store(p.{{Y}} + i, fg_epilogue(p, v, {{COORD_ARGS}}));
    }
}
