/*
 * num.h -- the numeric leaf shared by codegen/ and runtime/: element-type
 * conversions (IEEE binary16 and bfloat16 <-> fp32), little-endian byte
 * order, writing a whole buffer to a descriptor, and running a program with
 * its output captured.  The leaf calls nothing of fusegen (only libc), so
 * every layer may use it.
 *
 * Conversions are bit-exact with numpy's float16 and with the bfloat16 of
 * PyTorch / ml_dtypes: fp32 -> 16 bits rounds to nearest even (subnormals
 * included; beyond the largest finite value: infinity); a NaN stays a NaN
 * of the same sign (fp16: quiet 0x7e00 | sign; bf16: the upper 16 bits with
 * the quiet bit set); 16 bits -> fp32 is exact (NaN payloads kept).
 */
#ifndef FG_NUM_H
#define FG_NUM_H

#include <stddef.h>
#include <stdint.h>

/* ---- num_convert.c: 16-bit float formats --------------------------------- */

/* fp32 -> IEEE binary16 bits, round to nearest even. */
uint16_t fg_f32_to_f16(float f);
/* IEEE binary16 bits -> fp32 (exact). */
float fg_f16_to_f32(uint16_t h);
/* fp32 -> bfloat16 bits, round to nearest even. */
uint16_t fg_f32_to_bf16(float f);
/* bfloat16 bits -> fp32 (exact). */
float fg_bf16_to_f32(uint16_t h);

/* ---- num_io.c: byte order, whole writes, child processes ------------------ */

/* The n-byte (1 to 8) little-endian unsigned value at p. */
uint64_t fg_le_get(const unsigned char *p, int n);
/* Stores the low n bytes (1 to 8) of v at p, little-endian. */
void fg_le_put(unsigned char *p, uint64_t v, int n);

/* Writes all len bytes of data to fd (retrying short writes and EINTR).
 * Returns 0, or -1 with errno set (EIO when write wrote nothing). */
int fg_write_all(int fd, const void *data, size_t len);

/* Runs argv (argv[0] searched on PATH; stdin /dev/null) in directory cwd
 * (NULL: this one) with stdout and stderr captured together into *out
 * (malloc'd, NUL-terminated, "" when it printed nothing).  Returns the exit
 * status, 128 + the signal when it was killed, or -1 with errno set and
 * *out NULL when it could not be started. */
int fg_run_capture(const char *const *argv, const char *cwd, char **out);

#endif /* FG_NUM_H */
