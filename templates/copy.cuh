// ---- template copy.cuh: re-indexing copy (reshape, transpose, concat) ---------
// One thread per output element, grid-stride loop over the output in memory
// order; LOAD reads the element where the op's index map puts it in the
// input (for concat: in the input whose slice holds it).
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COORDS}}
{{LOAD}}
        fg_store(p.{{OUT}} + i, fg_epilogue(p, v, {{COORD_ARGS}}));
    }
}
