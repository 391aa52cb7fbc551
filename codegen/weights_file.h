/*
 * weights_file.h -- tensors in files: NumPy's .npy format (read and write)
 * and the .safetensors format (read; its JSON header is parsed with
 * Jansson).  Graph weights (`file:` in a graph, docs/graphs.md) and the
 * `--input` / `--save-outputs` files of `fusegen run` go through here.
 *
 * Every size a file states is checked against the file's real size and a
 * fixed limit before anything is allocated, so a header that claims 2^60
 * bytes is an error, not an allocation.  Failures return -1 with a one-line
 * reason in why[0..whysz) ("truncated: ...", "bad JSON header: ...").
 *
 * Element types: float32, float16 and bfloat16.  Values are returned as
 * float in logical (row-major) order; every float16 and bfloat16 value is
 * exactly a float, so reading loses nothing and the dtype says what the
 * file held.
 */
#ifndef FG_WEIGHTS_FILE_H
#define FG_WEIGHTS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "fusegen.h"
#include "ir.h"

#define FG_NPY_HEADER_MAX ((size_t)64 << 10)          /* bytes of an .npy header */
#define FG_SAFETENSORS_HEADER_MAX ((uint64_t)100 << 20) /* bytes of a .safetensors JSON header */

/* A tensor read from a file. */
typedef struct fg_file_tensor {
    fg_dtype dtype;                 /* as the file stores it */
    int rank;                       /* 1..FG_MAX_RANK */
    int64_t shape[FG_MAX_RANK];
    float *data;                    /* numel values, logical order (malloc'd; the caller frees) */
    int from_f64;                   /* fg_npy_read_input: the file is float64 (dtype says F32) */
} fg_file_tensor;

/* Reads an .npy file (format versions 1.0, 2.0 and 3.0): C order, dtype
 * '<f4', '>f4', '<f2', '>f2', '<i8', '>i8', '<i4', '>i4' or '|b1' (integers
 * at most 2^24 in magnitude, exact in the float data holds), 1..FG_MAX_RANK
 * positive dimensions, at most
 * max_numel elements, and exactly the bytes the header announces.  Fortran
 * order, other dtypes, scalars, a bad magic string, a malformed header, a
 * truncated file and bytes after the data are refused. */
int fg_npy_read(const char *path, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz);
/* The same from the regular file open as fd (read with pread; fd stays
 * open): what a loader that opened the file itself (safe_open.h) calls. */
int fg_npy_read_fd(int fd, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz);

/* fg_npy_read for a graph input given on the command line: also a scalar
 * (shape (), rank 0, one element) and float64 ('<f8', '>f8': values rounded
 * to float, dtype FG_DTYPE_F32 with from_f64 set). */
int fg_npy_read_input(const char *path, int64_t max_numel, fg_file_tensor *out, char *why, size_t whysz);

/* Element types fg_npy_write can write. */
typedef enum fg_npy_type { FG_NPY_F32 = 0, FG_NPY_F16, FG_NPY_F64, FG_NPY_I64, FG_NPY_I32, FG_NPY_BOOL } fg_npy_type;

/* Writes an .npy file (format 1.0, little-endian, C order; rank 0 to
 * FG_MAX_RANK) atomically: data holds the elements in logical order as
 * float, uint16_t fp16 bits, double, int64_t, int32_t or uint8_t 0/1 (host
 * byte order). */
int fg_npy_write(const char *path, fg_npy_type type, int rank, const int64_t *shape, const void *data, char *why,
                 size_t whysz);

/* An open .safetensors file with its parsed header. */
typedef struct fg_safetensors fg_safetensors;

/* Opens a .safetensors file and checks its header: an 8-byte length at most
 * FG_SAFETENSORS_HEADER_MAX and within the file, a JSON object whose entries
 * (other than "__metadata__") each have a string "dtype", a "shape" of
 * non-negative integers and "data_offsets" [begin, end] inside the data
 * that follows the header.  NULL on failure. */
fg_safetensors *fg_safetensors_open(const char *path, char *why, size_t whysz);
/* The same from the regular file open as fd, which the result owns (it is
 * closed on failure too). */
fg_safetensors *fg_safetensors_open_fd(int fd, char *why, size_t whysz);
void fg_safetensors_close(fg_safetensors *s);

/* Reads tensor name (dtype F32, F16 or BF16, 1..FG_MAX_RANK dimensions, at
 * most max_numel elements, its byte range exactly its size).  A missing
 * name is reported with the closest name the file holds. */
int fg_safetensors_read(fg_safetensors *s, const char *name, int64_t max_numel, fg_file_tensor *out, char *why,
                        size_t whysz);

/* Converts n elements of dtype t (float, or uint16_t fp16 / bf16 bits) to
 * float, exactly. */
void fg_file_decode(fg_dtype t, const void *src, float *dst, int64_t n);

/* Rounds v to the nearest bfloat16 value (ties to even; NaN stays NaN). */
float fg_file_round_bf16(float v);

#endif /* FG_WEIGHTS_FILE_H */
