// fusegen kernel fg_max_pool2d_691745f3c73d (group 0)
//   rule:      single op
//   nodes:     mp (max_pool2d)
//   template:  pool2d (pool2d.cuh)
//   output:    mp [1, 2, 4, 4] fp32 NHWC
//   precision: exact
//   generator: fusegen 0.1.0
//   deps:      cb17b9d49260b2a5604de1e37fc8a9bf (cache key: `fusegen compile` prints it)
#include "fusegen_prelude.cuh"

struct fg_params_fg_max_pool2d_691745f3c73d {
    const float *x;                      // in  x [1, 2, 7, 7] fp32 NHWC
    float *mp;                           // out mp [1, 2, 4, 4] fp32 NHWC
    fg_i64 dim_x_3;                      // = 7 here
    fg_i64 dim_x_1;                      // = 2 here
    fg_i64 dim_mp_3;                     // = 4 here
    fg_i64 dim_mp_1;                     // = 2 here
    fg_i64 dim_mp_2;                     // = 4 here
    fg_i64 dim_N;                        // = 1 here
    fg_i64 dim_C;                        // = 2 here
    fg_i64 dim_H;                        // = 7 here
    fg_i64 dim_W;                        // = 7 here
    fg_i64 dim_OH;                       // = 4 here
    fg_i64 dim_OW;                       // = 4 here
    fg_i64 dim_R;                        // = 3 here
    fg_i64 dim_S;                        // = 3 here
    fg_i64 dim_SH;                       // = 2 here
    fg_i64 dim_SW;                       // = 2 here
    fg_i64 dim_PH;                       // = 1 here
    fg_i64 dim_PW;                       // = 1 here
    fg_i64 dim_EH;                       // = 1 here
    fg_i64 dim_EW;                       // = 1 here
    fg_i64 dim_DH;                       // = 1 here
    fg_i64 dim_DW;                       // = 1 here
};

// offset of x NHWC at logical coordinates (n, c, h, w)
FG_DEVICE fg_i64 off_x(const fg_params_fg_max_pool2d_691745f3c73d &p, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    return h * p.dim_x_3 * p.dim_x_1 + w * p.dim_x_1 + c;
}

// offset of mp NHWC at logical coordinates (n, c, h, w)
FG_DEVICE fg_i64 off_y(const fg_params_fg_max_pool2d_691745f3c73d &p, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    return h * p.dim_mp_3 * p.dim_mp_1 + w * p.dim_mp_1 + c;
}

// epilogue: applied to each accumulator before the one store;
// (n, c, h, w) are the logical coordinates of mp
FG_DEVICE float fg_epilogue(const fg_params_fg_max_pool2d_691745f3c73d &p, float v, fg_i64 n, fg_i64 c, fg_i64 h, fg_i64 w)
{
    // epilogue: none
    return v;
}

// ---- template pool2d.cuh: max / average pooling --------------------------------
// One thread per output element, in the output's memory order (grid-stride
// loop).  Window tap (r, s) of output (oh, ow) reads input row
// oh * SH - PH + r * DH and column ow * SW - PW + s * DW (PH, PW: the begin
// padding).  Taps in the padding are skipped; `taps` counts the taps inside
// the padded extent (rows below H + EH, columns below W + EW; EH, EW: the end
// padding), the divisor of an average that counts padding; `count` those
// inside the input, the divisor of one that does not.  A ceil_mode window
// overhanging the padded extent counts neither.  A window with no tap inside
// the input gives 0.  The first element of the window starts the reduction
// (the initial value stands for an empty window), so the max of a window of
// -inf is -inf; a NaN in the window makes the result NaN, for max as for
// average (PyTorch's max_pool2d semantics).
FG_KERNEL(fg_max_pool2d_691745f3c73d, fg_params_fg_max_pool2d_691745f3c73d, 128)
{
    const fg_i64 N = p.dim_N;
    const fg_i64 C = p.dim_C;
    const fg_i64 H = p.dim_H;
    const fg_i64 W = p.dim_W;
    const fg_i64 OH = p.dim_OH;
    const fg_i64 OW = p.dim_OW;
    const fg_i64 R = p.dim_R;
    const fg_i64 S = p.dim_S;
    const fg_i64 SH = p.dim_SH;
    const fg_i64 SW = p.dim_SW;
    const fg_i64 PH = p.dim_PH;
    const fg_i64 PW = p.dim_PW;
    const fg_i64 EH = p.dim_EH;
    const fg_i64 EW = p.dim_EW;
    const fg_i64 DH = p.dim_DH;
    const fg_i64 DW = p.dim_DW;
    const fg_i64 stride = (fg_i64)fg_gdim_x() * fg_bdim_x();
    for (fg_i64 i = (fg_i64)fg_bid_x() * fg_bdim_x() + fg_tid_x(); i < N * C * OH * OW; i += stride) {
        const fg_i64 c = i % p.dim_mp_1;
        const fg_i64 ow = i / p.dim_mp_1 % p.dim_mp_3;
        const fg_i64 oh = i / (p.dim_mp_3 * p.dim_mp_1) % p.dim_mp_2;
        const fg_i64 n = i / (p.dim_mp_2 * p.dim_mp_3 * p.dim_mp_1);
        float acc = -3.402823466e+38f  /* lowest float */;
        int count = 0, taps = 0;
        for (fg_i64 r = 0; r < R; r++) {
            const fg_i64 ih = oh * SH - PH + r * DH;
            if (ih >= H + EH)
                break;   // later rows lie further past the padded extent
            for (fg_i64 s = 0; s < S; s++) {
                const fg_i64 iw = ow * SW - PW + s * DW;
                if (iw >= W + EW)
                    break;
                taps++;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                    continue;
                const float xv = fg_load(p.x + off_x(p, n, c, ih, iw));
                acc = (count == 0 || fg_isnanf(xv)) ? xv : (xv > acc ? xv : acc);
                count++;
            }
        }
        const float v = count > 0 ? acc : 0.0f;
        fg_store(p.mp + off_y(p, n, c, oh, ow), fg_epilogue(p, v, n, c, oh, ow));
    }
}
