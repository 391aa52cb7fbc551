/*
 * num_convert.c -- IEEE binary16 and bfloat16 <-> fp32 (contract in num.h):
 * the one implementation of the 16-bit float formats for the importer, the
 * weight files, the host tensors and the emulator.
 */
#include <string.h>

#include "num.h"

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
        if (x < 0x33000000)               /* < 2^-25 rounds to zero (2^-25 itself: the tie to even 0) */
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
    if (e == 0) {                         /* zero or subnormal: m * 2^-24, exact */
        float v = (float)m * 0x1p-24f;
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
