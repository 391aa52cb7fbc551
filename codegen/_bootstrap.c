/* Temporary weak placeholders so the tree links while modules land; removed at integration. */
#include "context.h"
#include "expr.h"
#include "hook.h"
__attribute__((weak)) fg_status fg_rules_load(fg_context *ctx, const char *dir) { (void)dir; return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC, "rule loading not built yet"); }
__attribute__((weak)) void fg_hooks_free(fg_hooks *h) { (void)h; }
__attribute__((weak)) void fg_expr_free(fg_expr *e) { (void)e; }
#include "plan.h"
__attribute__((weak)) fg_status fg_graph_load(fg_context *ctx, const char *path, fg_graph **out) { (void)path; *out = NULL; return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC, "graph loading not built yet"); }
__attribute__((weak)) void fg_graph_free(fg_graph *g) { (void)g; }
__attribute__((weak)) fg_status fg_plan_build(fg_context *ctx, const fg_graph *g, fg_plan **out) { (void)g; *out = NULL; return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC, "planning not built yet"); }
__attribute__((weak)) void fg_plan_free(fg_plan *p) { (void)p; }
__attribute__((weak)) void fg_plan_print(const fg_context *ctx, const fg_plan *p, const fg_plan_print_opts *o, FILE *out) { (void)ctx; (void)p; (void)o; (void)out; }
__attribute__((weak)) void fg_plan_dot(const fg_context *ctx, const fg_plan *p, FILE *out) { (void)ctx; (void)p; (void)out; }
