// ---- template pointwise.cuh: element-wise kernel ------------------------------
// Grid-stride loop over the output in memory order; inputs are read at the
// output's logical coordinates (broadcasting).
// The vector path (outputs of at least 16 bytes) moves 16 bytes of the
// output per access, 4 fp32 or 8 fp16/bf16 elements: the output, every input
// that has the output's shape and layout, and every input whose elements run
// along the output's innermost axis (contiguous) are read and written with
// vector accesses (16 bytes; an fp32 input of a 16-bit output takes two, a
// 16-bit input of an fp32 output one of 8 bytes); an input that is constant
// along that axis is read once per vector.  It runs when every
// vector-accessed pointer is 16-byte aligned (checked at launch: the
// condition below); otherwise, and for the elements after the last whole
// vector, the scalar loop does the work.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
{{#VEC}}
    const bool vec_ok = {{VEC_OK}};
    const fg_i64 nvec = vec_ok ? NUMEL / {{VEC}} : 0;
    for (fg_i64 q = first; q < nvec; q += stride) {
        const fg_i64 base = q * {{VEC}};
{{VLOADS}}
        float out[{{VEC}}];
        FG_UNROLL
        for (int j = 0; j < {{VEC}}; j++) {
{{VELEM}}
            const float v = {{VCOMPUTE}};
            out[j] = fg_epilogue(p, v{{VPRE}}, {{COORD_ARGS}});
        }
        fg_store{{VEC}}(p.{{OUT}} + base, out);
    }
    for (fg_i64 i = nvec * {{VEC}} + first; i < NUMEL; i += stride) {
{{COORDS}}
{{LOADS}}
        const float v = {{COMPUTE}};
        fg_store(p.{{OUT}} + i, fg_epilogue(p, v{{PRE}}, {{COORD_ARGS}}));
    }
{{/VEC}}
{{^VEC}}
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COORDS}}
{{LOADS}}
        const float v = {{COMPUTE}};
        fg_store(p.{{OUT}} + i, fg_epilogue(p, v{{PRE}}, {{COORD_ARGS}}));
    }
{{/VEC}}
}
