/*
 * reference_resize.c -- the host reference of resize (separable taps of
 * codegen/resize.h, in double) and of conv_transpose2d (written as the
 * scatter that defines it: each input element adds x * w into the outputs
 * its taps reach, which the kernel computes as a gather).  Plain loops.
 */
#include "reference_resize.h"

#include <string.h>

#include "conv_transpose.h"
#include "resize.h"

void fg_ref_resize(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]];
    const double *x = vals[nd->inputs[0]];
    fg_resize_geom d;
    char why[200];
    if (fg_resize_geom_of(nd, xt, &d, why, sizeof why) != 0)
        return;   /* shape inference refused the node before any run */
    int64_t NC = xt->shape[0] * xt->shape[1], H = d.in[0], W = d.in[1], OH = d.out[0], OW = d.out[1];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t ih[4], iw[4];
            double wh[4], ww[4];
            int nh = fg_resize_taps(&d, 0, oh, ih, wh);
            for (int64_t ow = 0; ow < OW; ow++) {
                int nw = fg_resize_taps(&d, 1, ow, iw, ww);
                double acc = 0;
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++)
                        acc += wh[a] * ww[b] * x[(nc * H + ih[a]) * W + iw[b]];
                y[(nc * OH + oh) * OW + ow] = acc;
            }
        }
}

void fg_ref_conv_transpose(const fg_graph *g, const fg_node *nd, double **vals, double *y)
{
    const fg_tensor *xt = &g->tensors[nd->inputs[0]], *wt = &g->tensors[nd->inputs[1]];
    int bslot = fg_node_input(nd, "bias");
    int bt = bslot >= 0 && bslot < nd->ninputs ? nd->inputs[bslot] : -1;
    const double *x = vals[nd->inputs[0]], *w = vals[nd->inputs[1]], *bias = bt >= 0 ? vals[bt] : NULL;
    fg_convt_geom d;
    char why[240];
    if (fg_convt_geom_of(nd, xt, wt, NULL, &d, why, sizeof why) != 0)
        return;
    int64_t OHW = d.OH * d.OW;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t k = 0; k < d.K; k++)
            for (int64_t q = 0; q < OHW; q++)
                y[(n * d.K + k) * OHW + q] = bias ? bias[k] : 0.0;
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t c = 0; c < d.C; c++) {
            int64_t grp = c / d.Cg;
            for (int64_t ih = 0; ih < d.H; ih++)
                for (int64_t iw = 0; iw < d.W; iw++) {
                    double xv = x[((n * d.C + c) * d.H + ih) * d.W + iw];
                    for (int64_t kg = 0; kg < d.Kg; kg++) {
                        int64_t k = grp * d.Kg + kg;
                        for (int64_t r = 0; r < d.R; r++) {
                            int64_t oh = ih * d.stride[0] - d.pad_beg[0] + r * d.dilation[0];
                            if (oh < 0 || oh >= d.OH)
                                continue;
                            for (int64_t s = 0; s < d.S; s++) {
                                int64_t ow = iw * d.stride[1] - d.pad_beg[1] + s * d.dilation[1];
                                if (ow < 0 || ow >= d.OW)
                                    continue;
                                y[((n * d.K + k) * d.OH + oh) * d.OW + ow] +=
                                    xv * w[((c * d.Kg + kg) * d.R + r) * d.S + s];
                            }
                        }
                    }
                }
        }
}
