/* Temporary weak placeholders so the tree links while modules land; removed at integration. */
#include "context.h"
#include "expr.h"
#include "hook.h"
__attribute__((weak)) fg_status fg_rules_load(fg_context *ctx, const char *dir) { (void)dir; return fg_diag_error(ctx, FG_ERR_UNSUPPORTED, FG_NOLOC, "rule loading not built yet"); }
__attribute__((weak)) void fg_hooks_free(fg_hooks *h) { (void)h; }
__attribute__((weak)) void fg_expr_free(fg_expr *e) { (void)e; }
