/*
 * tensor_convert.c -- element type and layout conversion of host tensors
 * (see tensor_convert.h; the element conversions themselves are num.h's),
 * plus the public fg_convert_dtype/fg_convert_layout.
 */
#include "tensor_convert.h"

#include <math.h>
#include <string.h>

/* v truncated toward zero into [lo, hi]; NaN is 0 (as the kernels' stores). */
static double to_int(double v, double lo, double hi)
{
    return v != v ? 0 : v <= lo ? lo : v >= hi ? hi : trunc(v);
}

double fg_round_to_dtype(double v, fg_dtype t)
{
    float f = (float)v;
    switch (t) {
    case FG_DTYPE_F16: return fg_f16_to_f32(fg_f32_to_f16(f));
    case FG_DTYPE_BF16: return fg_bf16_to_f32(fg_f32_to_bf16(f));
    case FG_DTYPE_I64: return to_int(v, -9223372036854775808.0, 9223372036854775807.0);
    case FG_DTYPE_I32: return to_int(v, -2147483648.0, 2147483647.0);
    case FG_DTYPE_BOOL: return v != 0;
    default: return f;
    }
}

int64_t fg_layout_offset(int rank, const int64_t *shape, fg_layout l, int64_t i)
{
    if (rank != 4 || l != FG_LAYOUT_NHWC)
        return i;
    int64_t C = shape[1], H = shape[2], W = shape[3];
    int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
    return ((n * H + h) * W + w) * C + c;
}

static void store(void *dst, int64_t j, fg_dtype t, double v)
{
    switch (t) {
    case FG_DTYPE_F16: ((uint16_t *)dst)[j] = fg_f32_to_f16((float)v); break;
    case FG_DTYPE_BF16: ((uint16_t *)dst)[j] = fg_f32_to_bf16((float)v); break;
    case FG_DTYPE_I64: {
        double r = fg_round_to_dtype(v, t);  /* 2^63 itself saturates */
        ((int64_t *)dst)[j] = r >= 9223372036854775807.0 ? INT64_MAX : (int64_t)r;
        break;
    }
    case FG_DTYPE_I32: ((int32_t *)dst)[j] = (int32_t)fg_round_to_dtype(v, t); break;
    case FG_DTYPE_BOOL: ((uint8_t *)dst)[j] = v != 0; break;
    default: ((float *)dst)[j] = (float)v; break;
    }
}

static double load(const void *src, int64_t j, fg_dtype t)
{
    switch (t) {
    case FG_DTYPE_F16: return fg_f16_to_f32(((const uint16_t *)src)[j]);
    case FG_DTYPE_BF16: return fg_bf16_to_f32(((const uint16_t *)src)[j]);
    case FG_DTYPE_I64: return (double)((const int64_t *)src)[j];
    case FG_DTYPE_I32: return ((const int32_t *)src)[j];
    case FG_DTYPE_BOOL: return ((const uint8_t *)src)[j];   /* 0 or 1; anything else shows */
    default: return ((const float *)src)[j];
    }
}

void fg_tensor_pack(const fg_tensor *t, fg_layout l, const double *src, void *dst)
{
    int64_t n = fg_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        store(dst, fg_layout_offset(t->rank, t->shape, l, i), t->dtype, src[i]);
}

void fg_tensor_pack_f32(const fg_tensor *t, fg_layout l, const float *src, void *dst)
{
    int64_t n = fg_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        store(dst, fg_layout_offset(t->rank, t->shape, l, i), t->dtype, src[i]);
}

void fg_tensor_unpack(const fg_tensor *t, fg_layout l, const void *src, double *dst)
{
    int64_t n = fg_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        dst[i] = load(src, fg_layout_offset(t->rank, t->shape, l, i), t->dtype);
}

FG_API fg_status fg_convert_dtype(const void *src, fg_dtype from, void *dst, fg_dtype to, size_t n)
{
    if ((unsigned)from >= FG_DTYPE_COUNT || (unsigned)to >= FG_DTYPE_COUNT || (n && (!src || !dst)))
        return FG_ERR_INPUT;
    size_t es = fg_dtype_size(from) > fg_dtype_size(to) ? fg_dtype_size(from) : fg_dtype_size(to);
    if (n > (size_t)INT64_MAX / es)
        return FG_ERR_INPUT;
    if (from == to) {   /* exact, also for int64 beyond 2^53 */
        memmove(dst, src, n * fg_dtype_size(to));
        return FG_OK;
    }
    for (size_t i = 0; i < n; i++)
        store(dst, (int64_t)i, to, load(src, (int64_t)i, from));
    return FG_OK;
}

FG_API fg_status fg_convert_layout(const void *src, fg_layout from, void *dst, fg_layout to, const int64_t shape[4],
                                   size_t elem_size)
{
    if ((unsigned)from >= FG_LAYOUT_COUNT || (unsigned)to >= FG_LAYOUT_COUNT || !src || !dst || src == dst ||
        !elem_size || !shape)
        return FG_ERR_INPUT;
    /* Every dimension non-negative, and the byte size representable. */
    int64_t n = 1;
    for (int i = 0; i < 4; i++) {
        if (shape[i] < 0 || (shape[i] && n > INT64_MAX / shape[i]))
            return FG_ERR_INPUT;
        n *= shape[i];
    }
    if (n && (uint64_t)n > (uint64_t)INT64_MAX / elem_size)
        return FG_ERR_INPUT;
    const char *s = src;
    char *d = dst;
    for (int64_t i = 0; i < n; i++)
        memcpy(d + fg_layout_offset(4, shape, to, i) * elem_size, s + fg_layout_offset(4, shape, from, i) * elem_size,
               elem_size);
    return FG_OK;
}
