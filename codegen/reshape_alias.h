/*
 * reshape_alias.h -- Flatten / Reshape as an alias: a lone flatten or
 * reshape group whose input and output are both stored in row-major order
 * gets no kernel; its output is a view (concat_inplace.h) of its input at
 * offset 0.  The rules are in reshape_alias.c's top comment.
 */
#ifndef FG_RESHAPE_ALIAS_H
#define FG_RESHAPE_ALIAS_H

#include "context.h"
#include "ir.h"

/* Aliases the outputs of plan p's lone flatten / reshape groups that copy
 * bytes in stored order, records them in p->views (parent = the input,
 * offset 0, slot -1) with one --explain line per such group, and removes
 * their groups (p->node_group of the node becomes -1).  Call once, after
 * fg_concat_inplace_plan.  Fails only when the views' hazard check
 * (fg_concat_views_check) fails afterwards: an internal error on ctx. */
fg_status fg_reshape_alias_plan(fg_context *ctx, fg_plan *p);

#endif /* FG_RESHAPE_ALIAS_H */
