/*
 * onnx_convert_resize.h -- the ONNX converters of Resize, Upsample and
 * ConvTranspose (onnx_convert_resize.c), which onnx_convert.c's operator
 * table lists, and the services of onnx_convert.c they use to read a node
 * and emit graph nodes (struct nctx: the node being converted).  Nothing
 * outside the importer includes this header.
 */
#ifndef FG_ONNX_CONVERT_RESIZE_H
#define FG_ONNX_CONVERT_RESIZE_H

#include "onnx_impl.h"

struct nctx;

/* ---- onnx_convert.c: services ----------------------------------------- */

/* Reports an error at the node (its label first) and marks it failed;
 * returns FG_ERR_INPUT. */
fg_status fg_onnx_nc_err(struct nctx *nc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nonzero when the node failed (an error was reported). */
int fg_onnx_nc_failed(const struct nctx *nc);
/* The loader, and the node's proto. */
loader *fg_onnx_nc_loader(const struct nctx *nc);
/* The computed input 0 as a tensor (reported when missing), or -1. */
int fg_onnx_nc_x(struct nctx *nc);
/* Input i is given (a non-empty name). */
int fg_onnx_nc_has_in(const struct nctx *nc, int i);
/* Input i as a tensor (a constant becomes a weight), or -1. */
int fg_onnx_nc_in_tensor(struct nctx *nc, int i);
/* Constant input i, or NULL (absent or computed). */
fg_onnx_const *fg_onnx_nc_in_const(const struct nctx *nc, int i);
/* Attribute name of the node, or NULL. */
const Onnx__AttributeProto *fg_onnx_nc_attr(const struct nctx *nc, const char *name);
/* Appends a node of op opname reading ins[0..nins) with attributes
 * names[i] = vals[i] (i < nas) whose output is the node's output 0;
 * returns the output tensor or -1 (reported). */
int fg_onnx_nc_emit_out(struct nctx *nc, const char *opname, const int *ins, int nins, const char *const *names,
                        const fg_attr_value *vals, int nas);

/* ---- onnx_convert_resize.c: converters --------------------------------- */

int fg_onnx_op_resize(struct nctx *nc);
int fg_onnx_op_upsample(struct nctx *nc);
int fg_onnx_op_conv_transpose(struct nctx *nc);

#endif /* FG_ONNX_CONVERT_RESIZE_H */
