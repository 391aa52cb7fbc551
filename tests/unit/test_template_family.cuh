// ---- template streamed.cuh: a template family registered by a test --------------
// (tests/unit/test_template_family.c) One output element per iteration of a
// grid-stride loop: COORDS are its logical coordinates, LOADS read the main
// node's inputs there, VALUE is the node's op; the epilogue does the rest.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < NUMEL; i += stride) {
{{COORDS}}
{{LOADS}}
        const float v = {{VALUE}};
        fg_store(p.{{Y}} + i, fg_epilogue(p, v, {{COORD_ARGS}}));
    }
}
