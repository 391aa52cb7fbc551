/*
 * onnx_decode.c -- the decoding part of the ONNX importer (onnx_impl.h):
 * recognising a model, reading its file, the nesting guard run before
 * protobuf-c decodes, and tensors in every encoding exporters write
 * (raw_data, typed fields, external data files) as constants.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "num.h"
#include "onnx_impl.h"
#include "oom.h"
#include "safe_open.h"

/* ---- recognising a model ------------------------------------------------ */

/* ---- recognising a model ------------------------------------------------ */

int fg_onnx_is_model_data(const void *data, size_t len)
{
    return data && len >= 2 && ((const unsigned char *)data)[0] == 0x08;
}

int fg_onnx_is_model_file(const char *path)
{
    if (!path)
        return 0;
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".onnx") == 0)
        return 1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    unsigned char head[2];
    int r = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, head, 2, 0) == 2 &&
            fg_onnx_is_model_data(head, 2);
    fg_oom_close(fd);
    return r;
}

/* ---- nesting guard ------------------------------------------------------ *
 * protobuf-c decodes nested messages recursively without a depth limit, so a
 * crafted file of deeply nested graphs could exhaust the stack.  Before
 * decoding, the wire format is walked with the generated descriptors only to
 * measure how deep messages nest; anything malformed is left to protobuf-c
 * to refuse. */

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* 0 when messages nest deeper than FG_ONNX_PB_MAX_DEPTH; 1 otherwise (also when
 * the bytes are malformed: protobuf-c reports that). */
int fg_onnx_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth)
{
    if (depth > FG_ONNX_PB_MAX_DEPTH)
        return 0;
    while (p < end) {
        uint64_t key, v;
        if (!pb_varint(&p, end, &key))
            return 1;
        switch (key & 7) {
        case 0:
            if (!pb_varint(&p, end, &v))
                return 1;
            break;
        case 1:
            if (end - p < 8)
                return 1;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return 1;
            p += 4;
            break;
        case 2: {
            if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return 1;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !fg_onnx_depth_ok(f->descriptor, p, p + v, depth + 1))
                return 0;
            p += v;
            break;
        }
        default:
            return 1;
        }
    }
    return 1;
}


/* ---- tensors ---------------------------------------------------------------- */

/* fusegen dtype of an ONNX float type; -1 for others. */
int fg_onnx_dtype_of(fg_dtype t)
{
    static const int onnx_of[] = {FG_ONNX_DTYPE_FLOAT, FG_ONNX_DTYPE_FLOAT16, FG_ONNX_DTYPE_BFLOAT16,
                                  FG_ONNX_DTYPE_INT64, FG_ONNX_DTYPE_INT32, FG_ONNX_DTYPE_BOOL};
    FG_STATIC_ASSERT(FG_COUNTOF(onnx_of) == FG_DTYPE_COUNT, "onnx_of out of sync with fg_dtype");
    return (unsigned)t < FG_DTYPE_COUNT ? onnx_of[t] : 0;
}

int fg_onnx_dtype_fg(int dt)
{
    return dt == FG_ONNX_DTYPE_FLOAT     ? FG_DTYPE_F32
           : dt == FG_ONNX_DTYPE_FLOAT16 ? FG_DTYPE_F16
           : dt == FG_ONNX_DTYPE_BFLOAT16 ? FG_DTYPE_BF16
           : dt == FG_ONNX_DTYPE_INT64   ? FG_DTYPE_I64
           : dt == FG_ONNX_DTYPE_INT32   ? FG_DTYPE_I32
           : dt == FG_ONNX_DTYPE_BOOL    ? FG_DTYPE_BOOL
                                         : -1;
}

/* Decodes n little-endian elements of type dt from bytes into k. */
static void decode_bytes(konst *k, const uint8_t *p, int64_t n)
{
    int es = fg_onnx_dtype_size(k->dtype);
    for (int64_t j = 0; j < n; j++, p += es) {
        uint64_t v = fg_le_get(p, es);
        switch (k->dtype) {
        case FG_ONNX_DTYPE_FLOAT: {
            uint32_t u = (uint32_t)v;
            memcpy(&k->f[j], &u, 4);
            break;
        }
        case FG_ONNX_DTYPE_DOUBLE: {
            double d;
            memcpy(&d, &v, 8);
            k->f[j] = (float)d;
            break;
        }
        case FG_ONNX_DTYPE_FLOAT16: k->f[j] = fg_f16_to_f32((uint16_t)v); break;
        case FG_ONNX_DTYPE_BFLOAT16: k->f[j] = fg_bf16_to_f32((uint16_t)v); break;
        case FG_ONNX_DTYPE_INT32: k->i[j] = (int32_t)(uint32_t)v; break;
        case FG_ONNX_DTYPE_INT64: k->i[j] = (int64_t)v; break;
        case FG_ONNX_DTYPE_BOOL: k->i[j] = v != 0; break;
        default: break;
        }
    }
}

#define MEMORY_PREFIX "fusegen-memory:"

/* Reads external data from the caller's buffer named by index (the text
 * after MEMORY_PREFIX; fg_onnx_options.buffers) into k. */
static int read_memory(loader *L, const char *index, int64_t offset, int64_t length, konst *k, const char *what)
{
    const fg_onnx_options *o = L->opts;
    int have = o && o->size >= offsetof(fg_onnx_options, buffer_bytes) + sizeof o->buffer_bytes;
    char *end;
    errno = 0;
    long i = strtol(index, &end, 10);
    if (!have || errno || end == index || *end || i < 0 || i >= o->nbuffers || !o->buffers || !o->buffer_bytes ||
        !o->buffers[i]) {
        fg_onnx_lerr(L, "%s: external data '" MEMORY_PREFIX "%.40s' names no buffer of the options (%d given)", what,
                     index, have ? o->nbuffers : 0);
        return 0;
    }
    int64_t need = k->numel * fg_onnx_dtype_size(k->dtype);
    if ((length >= 0 && length != need) || (uint64_t)offset > o->buffer_bytes[i] ||
        (uint64_t)need > o->buffer_bytes[i] - (uint64_t)offset) {
        fg_onnx_lerr(L, "%s: external data buffer %ld holds %llu bytes; the tensor needs %lld at offset %lld "
                     "(length %lld)", what, i, (unsigned long long)o->buffer_bytes[i], (long long)need,
                     (long long)offset, (long long)length);
        return 0;
    }
    decode_bytes(k, (const uint8_t *)o->buffers[i] + offset, k->numel);
    return 1;
}

/* Reads the external data of tensor t (what: for messages) into k: from a
 * file beside the model, or from a buffer of the options. */
static int read_external(loader *L, const Onnx__TensorProto *t, konst *k, const char *what)
{
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value)
            continue;
        char *end;
        if (strcmp(e->key, "location") == 0) {
            location = e->value;
        } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            errno = 0;
            long long v = strtoll(e->value, &end, 10);
            if (errno || *end || !*e->value || v < 0) {
                fg_onnx_lerr(L, "%s: external data %s '%s' is not a non-negative integer", what, e->key, e->value);
                return 0;
            }
            if (e->key[0] == 'o')
                offset = v;
            else
                length = v;
        }
    }
    char b1[300];
    if (!location || !*location) {
        fg_onnx_lerr(L, "%s: external data without a location", what);
        return 0;
    }
    if (strncmp(location, MEMORY_PREFIX, strlen(MEMORY_PREFIX)) == 0)
        return read_memory(L, location + strlen(MEMORY_PREFIX), offset, length, k, what);
    if (!L->base_dir && L->base_fd < 0) {
        fg_onnx_lerr(L, "%s: external data file '%s' cannot be read: the model was given in memory without a base "
                "directory", what, fg_onnx_esc(location, b1, sizeof b1));
        return 0;
    }
    int64_t need = k->numel * fg_onnx_dtype_size(k->dtype);
    if (length >= 0 && length != need) {
        fg_onnx_lerr(L, "%s: external data length %lld does not match %lld elements of %s (%lld bytes)", what,
                     (long long)length, (long long)k->numel, fg_onnx_dtype_name(k->dtype), (long long)need);
        return 0;
    }
    char why[300];
    if (L->base_fd < 0) {   /* the directory, opened once for the whole load */
        if ((L->base_fd = fg_dir_open(L->base_dir, why, sizeof why)) < 0) {
            fg_onnx_lerr(L, "%s: external data file '%s' cannot be read: %s", what,
                         fg_onnx_esc(location, b1, sizeof b1), why);
            return 0;
        }
        L->own_base_fd = 1;
        fg_oom_defer_close(L->base_fd);   /* closed if loading unwinds (oom.h) */
    }
    /* Opened once beneath the model's directory (no '..', no absolute path,
     * no symbolic link) and read from that descriptor only. */
    uint64_t size;
    int fd = fg_open_beneath(L->base_fd, location, FG_OPEN_NOFOLLOW, &size, why, sizeof why);
    fg_oom_defer_close(fd);
    if (fd < 0) {
        fg_onnx_lerr(L, "%s: external data file '%s'%s%s", what, fg_onnx_esc(location, b1, sizeof b1),
                     fg_reason_sep(why), why);
        return 0;
    }
    if ((uint64_t)offset > size || (uint64_t)need > size - (uint64_t)offset) {
        fg_onnx_lerr(L, "%s: external data file '%s' holds %llu bytes; the tensor needs %lld at offset %lld", what,
                     fg_onnx_esc(location, b1, sizeof b1), (unsigned long long)size, (long long)need,
                     (long long)offset);
        fg_oom_close(fd);
        return 0;
    }
    uint8_t *buf = fg_xmalloc((size_t)need + 1);
    int64_t got = 0;
    while (got < need) {
        ssize_t r = pread(fd, buf + got, (size_t)(need - got), (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += r;
    }
    fg_oom_close(fd);
    if (got != need) {
        fg_onnx_lerr(L, "%s: external data file '%s': short read", what, fg_onnx_esc(location, b1, sizeof b1));
        free(buf);
        return 0;
    }
    decode_bytes(k, buf, k->numel);
    free(buf);
    return 1;
}

/* Decodes TensorProto t into a new constant named name; returns its index
 * or -1 (errors reported). */
int fg_onnx_decode_tensor(loader *L, const Onnx__TensorProto *t, const char *name, const char *what)
{
    konst k = {0};
    k.name = name;
    k.weight = -1;
    k.dtype = t->has_data_type ? t->data_type : 0;
    if (t->segment) {
        fg_onnx_lerr(L, "%s: segmented tensors are not supported", what);
        return -1;
    }
    if (!fg_onnx_dtype_size(k.dtype)) {
        fg_onnx_lerr(L, "%s: element type %s is not supported (float, float16, bfloat16, double, int32, int64, bool)", what,
                     fg_onnx_dtype_name(k.dtype));
        return -1;
    }
    if (t->n_dims > FG_MAX_RANK) {
        fg_onnx_lerr(L, "%s: rank %zu is more than %d", what, t->n_dims, FG_MAX_RANK);
        return -1;
    }
    k.rank = (int)t->n_dims;
    k.numel = 1;
    for (int d = 0; d < k.rank; d++) {
        k.shape[d] = t->dims[d];
        if (t->dims[d] < 0 || __builtin_mul_overflow(k.numel, t->dims[d], &k.numel) ||
            k.numel > FG_ONNX_MAX_WEIGHT_NUMEL) {
            fg_onnx_lerr(L, "%s: dimensions out of range (a constant may have at most %lld elements)", what,
                         (long long)FG_ONNX_MAX_WEIGHT_NUMEL);
            return -1;
        }
    }
    int es = fg_onnx_dtype_size(k.dtype);
    if (fg_onnx_dtype_is_float(k.dtype))
        k.f = fg_xcalloc((size_t)k.numel + 1, sizeof *k.f);
    else
        k.i = fg_xcalloc((size_t)k.numel + 1, sizeof *k.i);
    int ok = 1;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        ok = read_external(L, t, &k, what);
    } else if (t->has_raw_data) {
        if ((int64_t)t->raw_data.len != k.numel * es) {
            fg_onnx_lerr(L, "%s: raw_data holds %zu bytes but %lld elements of %s need %lld (truncated or corrupt)", what,
                         t->raw_data.len, (long long)k.numel, fg_onnx_dtype_name(k.dtype), (long long)(k.numel * es));
            ok = 0;
        } else {
            decode_bytes(&k, t->raw_data.data, k.numel);
        }
    } else {
        size_t have = 0;
        switch (k.dtype) {
        case FG_ONNX_DTYPE_FLOAT: have = t->n_float_data; break;
        case FG_ONNX_DTYPE_DOUBLE: have = t->n_double_data; break;
        case FG_ONNX_DTYPE_INT64: have = t->n_int64_data; break;
        default: have = t->n_int32_data; break;   /* INT32, FLOAT16 and BFLOAT16 (as uint16 in int32_data) */
        }
        if ((int64_t)have != k.numel) {
            fg_onnx_lerr(L, "%s: holds %zu values but its shape needs %lld (truncated or corrupt)", what, have,
                         (long long)k.numel);
            ok = 0;
        } else {
            for (int64_t j = 0; j < k.numel; j++)
                switch (k.dtype) {
                case FG_ONNX_DTYPE_FLOAT: k.f[j] = t->float_data[j]; break;
                case FG_ONNX_DTYPE_DOUBLE: k.f[j] = (float)t->double_data[j]; break;
                case FG_ONNX_DTYPE_INT64: k.i[j] = t->int64_data[j]; break;
                case FG_ONNX_DTYPE_INT32: k.i[j] = t->int32_data[j]; break;
                case FG_ONNX_DTYPE_BOOL: k.i[j] = t->int32_data[j] != 0; break;
                case FG_ONNX_DTYPE_FLOAT16: k.f[j] = fg_f16_to_f32((uint16_t)t->int32_data[j]); break;
                case FG_ONNX_DTYPE_BFLOAT16: k.f[j] = fg_bf16_to_f32((uint16_t)t->int32_data[j]); break;
                default: break;
                }
        }
    }
    if (!ok) {
        free(k.f);
        free(k.i);
        return -1;
    }
    *FG_PUSH(L->consts, L->nconsts, L->consts_cap) = k;
    return L->nconsts - 1;
}
