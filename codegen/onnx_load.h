/*
 * onnx_load.h -- model graphs from ONNX (docs/onnx.md).  The model is
 * decoded by protobuf-c over the onnx.proto that libonnx-dev installs (the C
 * code is generated at build time); this module turns the decoded ModelProto
 * into an fg_graph: initializers and Constant nodes become weights, graph
 * inputs keep their names (sanitized, see below), symbolic dimensions take
 * the values of fg_onnx_options (default 1), and each operator maps onto an
 * op of the loaded vocabulary with ONNX attribute semantics.  Shapes are
 * inferred node by node (shape.c) as the graph is built, so that operators
 * whose mapping depends on a shape (PRelu slopes, Flatten axes, pooling
 * pads) see it.
 *
 * Errors are located by file and node: "m.onnx: error: node 12 'Conv_3'
 * (Conv): ...".  Every unsupported operator type is listed in one error
 * with the names of its nodes; nothing is dropped silently.
 *
 * Names: ONNX names may be any string.  Graph names are letters, digits,
 * '_' and '.', so every other byte becomes '_', a name not starting with a
 * letter or '_' gets a "t_" prefix, and a clash gets a "_2", "_3", ...
 * suffix.  Names without such bytes are kept as they are.
 */
#ifndef FG_ONNX_LOAD_H
#define FG_ONNX_LOAD_H

#include <stddef.h>

#include "ir.h"

/* Largest ONNX file read into memory (external data files are read tensor by
 * tensor and are bounded per tensor). */
#define FG_ONNX_FILE_MAX ((size_t)1 << 30)
/* Largest weight, in elements (kept as fp32 in memory: 1 GiB). */
#define FG_ONNX_MAX_WEIGHT_NUMEL (1ll << 28)
/* Opsets of the default domain this importer knows.  Opsets 7 to 10 define
 * the supported operators as 11 does, except for forms the importer refuses
 * with an error (Clip's min / max attributes, BatchNormalization's spatial
 * attribute).  Opsets 23 to 28 change no supported operator for the float
 * types (onnx.defs schemas: the bumps add element types; Cast 28's
 * round_mode and Range 27's stash_type are attributes the folder refuses
 * when present, and Range folds in double anyway); docs/onnx.md, "Opsets". */
#define FG_ONNX_OPSET_MIN 7
#define FG_ONNX_OPSET_MAX 28

/* Loads the serialized model data (len bytes) read from the file path whose
 * directory is open as dirfd (not closed): external data files are opened
 * beneath dirfd (safe_open.h).  What fg_graph_load and fg_graph_load_onnx
 * call once they have opened and read the file. */
fg_status fg_onnx_load_at(fg_context *ctx, const char *path, const void *data, size_t len, int dirfd,
                          const fg_onnx_options *o, fg_graph **out);

/* Nonzero when path names an ONNX model: its name ends in ".onnx", or its
 * first byte is that of a serialized ModelProto (field 1, ir_version, as a
 * varint: 0x08).  A file that cannot be opened is not ONNX (the caller's own
 * read reports the problem). */
int fg_onnx_is_model_file(const char *path);
/* Same test on bytes in memory. */
int fg_onnx_is_model_data(const void *data, size_t len);

#endif /* FG_ONNX_LOAD_H */
