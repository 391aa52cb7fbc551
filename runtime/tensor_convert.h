/*
 * tensor_convert.h -- host-side conversions of whole tensors: element types
 * (fp32 <-> fp16 / bf16 with round-to-nearest-even, from num.h) and the storage layout of
 * rank-4 tensors (logical NCHW <-> physical NHWC).  The executor and the
 * `run` command move data between the reference (double, logical NCHW) and
 * device buffers (tensor dtype, tensor layout) with these.
 */
#ifndef FG_TENSOR_CONVERT_H
#define FG_TENSOR_CONVERT_H

#include <stdint.h>

#include "ir.h"
#include "num.h"   /* fg_f32_to_f16 and the other element conversions */

/* v rounded to dtype t (through fp32 first, as a device store does). */
double fg_round_to_dtype(double v, fg_dtype t);

/* Physical element offset of the logical (NCHW-order) element i of a tensor
 * of that rank/shape stored in layout l (identity unless rank 4 and NHWC). */
int64_t fg_layout_offset(int rank, const int64_t *shape, fg_layout l, int64_t i);

/* Packs the fg_tensor_numel(t) logical values src into dst (t->dtype, layout l). */
void fg_tensor_pack(const fg_tensor *t, fg_layout l, const double *src, void *dst);
void fg_tensor_pack_f32(const fg_tensor *t, fg_layout l, const float *src, void *dst);
/* The inverse: dst receives logical-order values. */
void fg_tensor_unpack(const fg_tensor *t, fg_layout l, const void *src, double *dst);

#endif /* FG_TENSOR_CONVERT_H */
