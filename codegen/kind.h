/*
 * kind.h -- the op-kind table (fg_kind_info): for each fg_op_kind, what C
 * knows about it.  Loaders, the planner, shape inference, the emitter and the
 * host reference read this one table instead of switching on the kind.
 */
#ifndef FG_KIND_H
#define FG_KIND_H

#include "ir.h"

#endif /* FG_KIND_H */
