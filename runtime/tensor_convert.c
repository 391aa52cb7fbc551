/*
 * tensor_convert.c -- element type and layout conversion of host tensors
 * (see tensor_convert.h), plus the public fg_convert_dtype/fg_convert_layout.
 */
#include "tensor_convert.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* IEEE binary16 with round-to-nearest-even, subnormals, inf and NaN. */
uint16_t fg_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x >= 0x7f800000)                  /* inf or NaN (NaN stays quiet NaN) */
        return sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00);
    if (x >= 0x477ff000)                  /* >= 65520 rounds to inf */
        return sign | 0x7c00;
    if (x < 0x38800000) {                 /* below 2^-14: a half subnormal or zero */
        if (x < 0x33000000)               /* <= 2^-25 rounds to zero */
            return sign;
        uint32_t e = x >> 23, m = (x & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;         /* m * 2^(e-150) in units of 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return sign | (uint16_t)r;
    }
    uint32_t h = (x >> 13) - (112u << 10), rem = x & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

float fg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        return bits_f32(sign | 0x7f800000 | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t fg_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float fg_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

double fg_round_to_dtype(double v, fg_dtype t)
{
    float f = (float)v;
    switch (t) {
    case FG_DTYPE_F16: return fg_f16_to_f32(fg_f32_to_f16(f));
    case FG_DTYPE_BF16: return fg_bf16_to_f32(fg_f32_to_bf16(f));
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
    default: ((float *)dst)[j] = (float)v; break;
    }
}

static double load(const void *src, int64_t j, fg_dtype t)
{
    switch (t) {
    case FG_DTYPE_F16: return fg_f16_to_f32(((const uint16_t *)src)[j]);
    case FG_DTYPE_BF16: return fg_bf16_to_f32(((const uint16_t *)src)[j]);
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
