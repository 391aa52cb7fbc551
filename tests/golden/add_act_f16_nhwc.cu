// fusegen kernel fg_add_act_9b7bd52a9935 (group 0)
//   rule:      add_act (goldrules/rules.yaml:13)
//   nodes:     s (add), r (leaky_relu)
//   template:  pointwise (pointwise.cuh)
//   output:    r [2, 3, 4, 5] fp16 NHWC
//   precision: exact
//   generator: fusegen 0.1.0
//   deps:      aca08ec3a5ca92ce9db0c005c8652391 (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_add_act_9b7bd52a9935 {
    fg_half *r;                          // out r [2, 3, 4, 5] fp16 NHWC
    const fg_half *a;                    // in  a [2, 3, 4, 5] fp16 NHWC
    const fg_half *b;                    // in  b [3, 1, 1] fp16
};

// epilogue: applied to each accumulator before the one store;
// (n, c, h, w) are the logical coordinates of r
FG_DEVICE float fg_epilogue(const fg_params_fg_add_act_9b7bd52a9935 &p, float v, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    // epilogue: apply r: x > 0 ? x : alpha * x
    v = ((v > 0.0f) ? v : (0.25f * v));
    return v;
}

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
FG_KERNEL(fg_add_act_9b7bd52a9935, fg_params_fg_add_act_9b7bd52a9935, 256)
{
    const fg_i64 NUMEL = 120;
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    const fg_i64 first = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x();
    const bool vec_ok = fg_aligned16(p.r) && fg_aligned16(p.a);
    const fg_i64 nvec = vec_ok ? NUMEL / 8 : 0;
    for (fg_i64 q = first; q < nvec; q += stride) {
        const fg_i64 base = q * 8;
        const fg_i64 b_c = base % 3;
        const fg_i64 b_w = base / 3 % 5;
        const fg_i64 b_h = base / (5 * 3) % 4;
        const fg_i64 b_n = base / (4 * 5 * 3);
        fg_i64 s_n = b_n;   // stepped along the vector
        fg_i64 s_c = b_c;   // stepped along the vector
        fg_i64 s_h = b_h;   // stepped along the vector
        fg_i64 s_w = b_w;   // stepped along the vector
        float in_a[8];
        fg_load8(p.a + base, in_a);  // a: the output's shape and layout
        float in_b[8];
        float out[8];
        FG_UNROLL
        for (int j = 0; j < 8; j++) {
            if (j > 0) {
                if (++s_c == 3) {
                    s_c = 0;
                    if (++s_w == 5) {
                        s_w = 0;
                        if (++s_h == 4) {
                            s_h = 0;
                            ++s_n;
                        }
                    }
                }
            }
            const fg_i64 n = s_n;
            const fg_i64 c = s_c;
            const fg_i64 h = s_h;
            const fg_i64 w = s_w;
            in_b[j] = fg_load(p.b + c);  // b
            const float v = ((in_a[j]) + (in_b[j]));
            out[j] = fg_epilogue(p, v, n, c, h, w);
        }
        fg_store8(p.r + base, out);
    }
    for (fg_i64 i = nvec * 8 + first; i < NUMEL; i += stride) {
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
