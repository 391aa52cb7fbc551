// ---- template pointwise.cuh: element-wise kernel ------------------------------
// One thread per output element, grid-stride loop over the output in memory
// order; inputs are read at the output's logical coordinates (broadcasting).
// The vector path (every input has the output's shape and layout and the
// element count is a multiple of 4) moves 4 elements per load and store.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
{{#VEC4}}
    for (fg_i64 q = first; q < NUMEL / 4; q += stride) {
{{LOADS4}}
        float out[4];
        for (int j = 0; j < 4; j++) {
            const fg_i64 i = q * 4 + j;
{{COORDS}}
            const float v = {{COMPUTE4}};
            out[j] = fg_epilogue(p, v, {{COORD_ARGS}});
        }
        fg_store4(p.{{OUT}} + q * 4, out);
    }
{{/VEC4}}
{{^VEC4}}
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COORDS}}
{{LOADS}}
        const float v = {{COMPUTE}};
        fg_store(p.{{OUT}} + i, fg_epilogue(p, v, {{COORD_ARGS}}));
    }
{{/VEC4}}
}
