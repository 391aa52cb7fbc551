// fusegen kernel fg_k0_add_act (group 0)
//   rule:      add_act (goldrules/rules.yaml:13)
//   nodes:     s (add), r (leaky_relu)
//   template:  pointwise (pointwise.cuh)
//   output:    r [2, 3, 4, 5] fp16 NHWC
//   precision: exact
//   generator: fusegen 0.1.0
//   deps:      aca08ec3a5ca92ce9db0c005c8652391 (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_k0_add_act {
    fg_half *r;                          // out r [2, 3, 4, 5] fp16 NHWC
    const fg_half *a;                    // in  a [2, 3, 4, 5] fp16 NHWC
    const fg_half *b;                    // in  b [3, 1, 1] fp16
};

// epilogue: applied to each accumulator before the one store;
// (n, c, h, w) are the logical coordinates of r
FG_DEVICE float fg_epilogue(const fg_params_fg_k0_add_act &p, float v, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    // epilogue: apply r: x > 0 ? x : alpha * x
    v = ((v > 0.0f) ? v : (0.25f * v));
    return v;
}

// ---- template pointwise.cuh: element-wise kernel ------------------------------
// One thread per output element, grid-stride loop over the output in memory
// order; inputs are read at the output's logical coordinates (broadcasting).
// The vector path (every input has the output's shape and layout and the
// element count is a multiple of 4) moves 4 elements per load and store.
FG_KERNEL(fg_k0_add_act, fg_params_fg_k0_add_act, 256)
{
    const fg_i64 NUMEL = 120;
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    for (fg_i64 i = first; i < NUMEL; i += stride) {
        const fg_i64 c = i % 3;
        const fg_i64 w = i / 3 % 5;
        const fg_i64 h = i / (5 * 3) % 4;
        const fg_i64 n = i / (4 * 5 * 3);
        const float in_a = fg_load(p.a + n * 60 + h * 15 + w * 3 + c);  // a
        const float in_b = fg_load(p.b + c);  // b
        const float v = (in_a + in_b);
        fg_store(p.r + i, fg_epilogue(p, v, n, c, h, w));
    }
}
