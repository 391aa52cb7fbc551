/*
 * report.h -- the performance report's internals (the public side is
 * fg_plan_report in fusegen.h): the work of one fused group, as FLOPs and
 * minimum bytes, computed from the plan graph's shapes alone
 * (report_work.c).  report.c compiles the kernels and reads the tools'
 * output (report_sass.h) and the device model (device_model.h).
 */
#ifndef FG_REPORT_H
#define FG_REPORT_H

#include "emit.h"
#include "ir.h"

/* FLOPs and minimum bytes of group i of plan p:
 *   conv2d  2 * N * K * P * Q * (C / groups) * R * S
 *   matmul  2 * batch * M * N * K
 *   pool2d  one per output element per window tap (kernel_h * kernel_w)
 *   global pool, un-folded batch norm  one (two) per input (output) element
 *   each epilogue stage or pointwise node  one per output element
 *   re-indexing ops (flatten, reshape, ...)  none
 * Folded nodes count nothing.  bytes: every tensor the group reads from
 * outside itself (inputs, weights, other groups' outputs) and its output,
 * each once, at its dtype's size. */
void fg_group_work(const fg_plan *p, int i, double *flops, double *bytes);

/* The latency model (report_latency.c, docs/codegen.md "The latency
 * model"): fills r's est_* fields from its geometry, occupancy, tile line,
 * SASS mix and k's epilogue text; r's other fields must be set first. */
struct fg_device_model;
void fg_latency_estimate(const struct fg_device_model *m, const fg_kernel *k, fg_kernel_report *r);

/* The report of kernels ks[0..n) of plan p, already emitted and compiled
 * for cubin target arch (infos[i]: their compile records, for the NVRTC
 * log; may be NULL), estimated for model.  fg_plan_report is this after
 * emitting and compiling; `fusegen compile --report` calls it on the
 * kernels it compiled. */
struct fg_device_model;
struct fg_jit_info;
fg_status fg_report_build(fg_context *ctx, const fg_plan *p, const fg_kernel *ks, const struct fg_jit_info *infos,
                          int n, const char *arch, const struct fg_device_model *model, fg_report **out);

#endif /* FG_REPORT_H */
