// ---- template gather.cuh: gather along one axis by integer indices ----------
// One thread per output element, grid-stride loop in the output's (logical)
// order: element (o, q, r) reads data (o, idx[q], r), with o over data's
// axes before the gathered one (OUTER), q over the indices (NIDX), r over
// the axes after it (INNER).  An index below zero counts from the end; one
// still outside [0, D) reads nothing and yields {{OOB}}.
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    for (fg_i64 i = first; i < NUMEL; i += stride) {
{{COORDS}}
        const fg_i64 r = i % INNER;
        const fg_i64 q = (i / INNER) % NIDX;
        const fg_i64 o = i / (INNER * NIDX);
        fg_i64 j = (fg_i64)p.{{IDX}}[q];
        if (j < 0)
            j += D;
        const float v = j >= 0 && j < D ? fg_load(p.{{X}} + (o * D + j) * INNER + r) : {{OOB}};
        fg_store(p.{{OUT}} + i, fg_epilogue(p, v, {{COORD_ARGS}}));
    }
}
