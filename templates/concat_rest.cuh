// ---- template concat_rest.cuh: the copied inputs of a concat ---------------
// The concat's other inputs were written into their slices of the output by
// their producers (concat elimination, codegen/concat_inplace.c).  Its slices
// are contiguous, so each copied input is one range of the output: i walks
// the copied elements packed one input after another, and COPY moves element
// i from its input to its place in the output.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COPY}}
    }
}
