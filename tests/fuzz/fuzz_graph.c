/*
 * fuzz_graph.c -- fuzz target for the model-graph loader.
 *
 * Each input is parsed from memory (not NUL-terminated, so reading past the
 * end is caught) with fg_graph_parse against the shipped rules, loaded once
 * into a context reused across inputs (and renewed every RENEW inputs, so the
 * warnings and interned strings it gathers stay bounded).  Checks: no crash,
 * no sanitizer report, no leak; the error record follows its contract
 * (fz_check_errors).  A graph that loads is also planned with fg_plan_build
 * (matching, legality, folding) under the same checks.
 */
#include "fuzz_common.h"

#include "context.h"

#define RENEW 4096

static fg_context *g_ctx;
static long g_runs;

static void ctx_free_at_exit(void)
{
    fg_context_free(g_ctx);
    g_ctx = NULL;
}

static fg_context *shipped_ctx(void)
{
    if (g_ctx && g_runs++ % RENEW != 0)
        return g_ctx;
    if (!g_ctx)
        atexit(ctx_free_at_exit);
    fg_context_free(g_ctx);
    unsetenv("FUSEGEN_RULES");
    char rules[4096];
    snprintf(rules, sizeof rules, "%s/rules", fz_source_dir());
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&g_ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    g_ctx->quiet = 1;
    if (fg_rules_load(g_ctx, rules) != FG_OK) {
        fz_dump_errors(g_ctx, 0);
        FZ_FAIL("the shipped rules in %s do not load", rules);
    }
    return g_ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fg_context *ctx = shipped_ctx();
    fg_context_clear_errors(ctx);

    fg_graph *g = (fg_graph *)(uintptr_t)1;  /* must be overwritten */
    fg_status st = fg_graph_parse(ctx, "fuzz.yaml", (const char *)data, size, &g);
    fz_check_errors(ctx, st, 0, "fg_graph_parse", "fuzz.yaml", fz_max_lines(data, size));
    if (st != FG_OK && g != NULL)
        FZ_FAIL("fg_graph_parse failed but returned a graph");
    if (st == FG_OK && g == NULL)
        FZ_FAIL("fg_graph_parse succeeded without a graph");

    if (st == FG_OK) {
        fg_plan *p = NULL;
        int e1 = fg_context_error_count(ctx);
        fg_status ps = fg_plan_build(ctx, g, &p);
        fz_check_errors(ctx, ps, e1, "fg_plan_build", "fuzz.yaml", fz_max_lines(data, size));
        if (ps == FG_OK && !p)
            FZ_FAIL("fg_plan_build succeeded without a plan");
        fg_plan_free(p);
        fg_graph_free(g);
    }
    return 0;
}
