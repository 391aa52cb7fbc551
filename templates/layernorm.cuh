// ---- template layernorm.cuh: layer / RMS normalization over rows -----------------
// The input viewed as [ROWS, LEN], LEN the product of the normalized axes
// (the trailing ones).  u = x (+ skip, a residual of x's shape); statistics
// in fp32: the mean (0 for RMS) and then the mean square of u - mean (two
// passes), inv = 1 / sqrt(var + eps); each element (u - mean) * inv * scale
// goes through the epilogue (the bias, then the rule's stages) to the store.
// WARP: one row per warp (LEN <= 1024), the row held in registers between
// the passes (PER vectors of VEC elements per lane); otherwise one row per
// block, the row re-read from memory (L1/L2) by each pass.  VEC > 1: rows of
// a multiple of VEC elements, row-major and 16-byte aligned, are read (and,
// when the output is row-major, written) 16 bytes at a time.
// x (and skip) at logical index lin, in their layouts
FG_DEVICE float fg_ln_x(const {{PARAMS}} &p, fg_i64 lin)
{
{{LOADX}}
}

{{#SKIP}}
FG_DEVICE float fg_ln_skip(const {{PARAMS}} &p, fg_i64 lin)
{
{{LOADSKIP}}
}

{{/SKIP}}
// normalized value v of logical index lin: times scale, then the epilogue
FG_DEVICE float fg_ln_val(const {{PARAMS}} &p, fg_i64 lin, float v)
{
{{VAL}}
}

FG_DEVICE void fg_ln_store(const {{PARAMS}} &p, fg_i64 lin, float v)
{
{{STORE}}
}

// u = x + skip at logical index lin, VEC elements (lin a multiple of VEC)
FG_DEVICE void fg_ln_loadv(const {{PARAMS}} &p, fg_i64 lin, float *u)
{
{{LOADV}}
}

// stores VEC normalized values from logical index lin
FG_DEVICE void fg_ln_storev(const {{PARAMS}} &p, fg_i64 lin, const float *v)
{
{{STOREV}}
}

// Sum of v over the row's lanes (a warp, or the block); every lane gets it.
FG_DEVICE float fg_ln_sum(float v, float *red)
{
    for (int d = 16; d > 0; d /= 2)
        v += fg_shfl_xor(v, d);
{{^WARP}}
    if (fg_lane() == 0)
        red[fg_warp()] = v;
    fg_sync();
    const int warps = (int)(fg_bdim_x() / 32);
    v = red[0];
    for (int w = 1; w < warps; w++)
        v += red[w];
    fg_sync();   // red is written again by the next sum
{{/WARP}}
{{#WARP}}
    (void)red;
{{/WARP}}
    return v;
}

FG_KERNEL({{KERNEL}}, {{PARAMS}}, {{THREADS}})
{
{{SHAPES}}
    FG_SHARED float red[32];
    const float inv_len = 1.0f / (float)LEN;
{{#WARP}}
    const fg_i64 lane = fg_lane();
    const fg_i64 per_block = fg_bdim_x() / 32;
    for (fg_i64 r = (fg_i64)fg_bid_x() * per_block + fg_warp(); r < ROWS; r += (fg_i64)fg_gdim_x() * per_block) {
        const fg_i64 base = r * LEN;
        float u[{{PER}} * {{VEC}}];
        FG_UNROLL
        for (int i = 0; i < {{PER}}; i++) {
            const fg_i64 k = ((fg_i64)i * 32 + lane) * {{VEC}};
            if (k < LEN) {
                fg_ln_loadv(p, base + k, u + i * {{VEC}});
            } else {
                for (int j = 0; j < {{VEC}}; j++)
                    u[i * {{VEC}} + j] = 0.0f;
            }
        }
{{^RMS}}
        float s = 0.0f;
        FG_UNROLL
        for (int i = 0; i < {{PER}} * {{VEC}}; i++)
            s += u[i];   // the padding lanes hold 0
        const float mean = fg_ln_sum(s, red) * inv_len;
{{/RMS}}
{{#RMS}}
        const float mean = 0.0f;
{{/RMS}}
        float q = 0.0f;
        FG_UNROLL
        for (int i = 0; i < {{PER}}; i++) {
            const fg_i64 k = ((fg_i64)i * 32 + lane) * {{VEC}};
            if (k < LEN)
                for (int j = 0; j < {{VEC}}; j++) {
                    const float d = u[i * {{VEC}} + j] - mean;
                    q += d * d;
                }
        }
        const float inv = 1.0f / sqrtf(fg_ln_sum(q, red) * inv_len + {{EPS}});
        FG_UNROLL
        for (int i = 0; i < {{PER}}; i++) {
            const fg_i64 k = ((fg_i64)i * 32 + lane) * {{VEC}};
            if (k < LEN) {
                for (int j = 0; j < {{VEC}}; j++)
                    u[i * {{VEC}} + j] = (u[i * {{VEC}} + j] - mean) * inv;
                fg_ln_storev(p, base + k, u + i * {{VEC}});
            }
        }
    }
{{/WARP}}
{{^WARP}}
    for (fg_i64 r = fg_bid_x(); r < ROWS; r += fg_gdim_x()) {
        const fg_i64 base = r * LEN;
        float u[{{VEC}}];
{{^RMS}}
        float s = 0.0f;
        for (fg_i64 k = (fg_i64)fg_tid_x() * {{VEC}}; k < LEN; k += (fg_i64)fg_bdim_x() * {{VEC}}) {
            fg_ln_loadv(p, base + k, u);
            for (int j = 0; j < {{VEC}}; j++)
                s += u[j];
        }
        const float mean = fg_ln_sum(s, red) * inv_len;
{{/RMS}}
{{#RMS}}
        const float mean = 0.0f;
{{/RMS}}
        float q = 0.0f;
        for (fg_i64 k = (fg_i64)fg_tid_x() * {{VEC}}; k < LEN; k += (fg_i64)fg_bdim_x() * {{VEC}}) {
            fg_ln_loadv(p, base + k, u);
            for (int j = 0; j < {{VEC}}; j++) {
                const float d = u[j] - mean;
                q += d * d;
            }
        }
        const float inv = 1.0f / sqrtf(fg_ln_sum(q, red) * inv_len + {{EPS}});
        for (fg_i64 k = (fg_i64)fg_tid_x() * {{VEC}}; k < LEN; k += (fg_i64)fg_bdim_x() * {{VEC}}) {
            fg_ln_loadv(p, base + k, u);
            for (int j = 0; j < {{VEC}}; j++)
                u[j] = (u[j] - mean) * inv;
            fg_ln_storev(p, base + k, u);
        }
    }
{{/WARP}}
}
