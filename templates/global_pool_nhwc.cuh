// ---- template global_pool_nhwc.cuh: mean or max over H x W of an NHWC tensor --
// Lanes over channels: block (channel block, n) is 32 lanes x PG pixel
// groups; thread (l, g) reduces channels c0 .. c0 + VEC - 1 (c0 = (block * 32
// + l) * VEC) over pixels g, g + PG, ..., so the 32 lanes of a warp read one
// pixel's consecutive channels (VEC 8: 16 bytes a lane, when C is a multiple
// of 8 and x is 16-byte aligned; else one element a lane).  The PG partials
// meet in shared memory and group 0 combines them in the order 0, 1, ...,
// PG - 1 (the same result on every run), runs the epilogue and stores.  Max
// starts at the plane's first element and propagates NaN (fg_maxf).
FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    const int VEC = {{VEC}}, PG = {{THREADS}} / 32;
    FG_SHARED float part[PG * 32 * VEC];
    const int l = (int)fg_tid_x() % 32, g = (int)fg_tid_x() / 32;
    const fg_i64 n = fg_bid_y();
    const fg_i64 c0 = ((fg_i64)fg_bid_x() * 32 + l) * VEC;
    const {{T}} *const xn = p.{{X}} + n * H * W * C;   // image n: pixel i's channel c at i * C + c
    float acc[VEC];
    FG_UNROLL
    for (int j = 0; j < VEC; j++)
        acc[j] = {{INIT}};
{{#VEC8}}
    const bool whole = c0 + VEC <= C && fg_aligned16(p.{{X}});
{{/VEC8}}
    for (fg_i64 i = g; i < H * W; i += PG) {
        float xs[VEC];
{{#VEC8}}
        if (whole) {
            fg_load8(xn + i * C + c0, xs);
        } else {
            FG_UNROLL
            for (int j = 0; j < VEC; j++)
                xs[j] = c0 + j < C ? fg_load(xn + i * C + c0 + j) : 0.0f;
        }
{{/VEC8}}
{{^VEC8}}
        xs[0] = c0 < C ? fg_load(xn + i * C + c0) : 0.0f;
{{/VEC8}}
        FG_UNROLL
        for (int j = 0; j < VEC; j++) {
            const float xv = xs[j];
            acc[j] = {{REDUCE_J}};
        }
    }
    FG_UNROLL
    for (int j = 0; j < VEC; j++)
        part[(g * 32 + l) * VEC + j] = acc[j];
    fg_sync();
    if (g != 0)
        return;
    FG_UNROLL
    for (int j = 0; j < VEC; j++) {
        const fg_i64 c = c0 + j;
        if (c >= C)
            break;
        float a = part[l * VEC + j];
        for (int q = 1; q < PG; q++) {   // fixed order: group 0, 1, 2, ...
            const float xv = part[(q * 32 + l) * VEC + j];
            a = {{REDUCE_A}};
        }
        const float v = {{FINISH}};
        fg_store(p.{{Y}} + off_y(p, n, c), fg_epilogue(p, v, {{EPI_ARGS}}));
    }
}
