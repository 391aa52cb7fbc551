/*
 * kind.c -- the op-kind table: what C knows about each fg_op_kind (see
 * kind.h).  Everything else about an op is data in rules/ *.yaml.
 */
#include "kind.h"

#include "util.h"

static const char *const op_kind_names[] = {
    "pointwise", "conv2d", "matmul", "batch_norm", "pool2d", "global_pool", "flatten",
};
FG_STATIC_ASSERT(FG_COUNTOF(op_kind_names) == FG_OPK_COUNT, "op_kind_names out of sync");

const char *fg_op_kind_name(fg_op_kind k) { return (unsigned)k < FG_COUNTOF(op_kind_names) ? op_kind_names[k] : "?"; }
