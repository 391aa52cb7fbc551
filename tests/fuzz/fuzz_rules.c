/*
 * fuzz_rules.c -- fuzz target for the rule and op-definition loader.
 *
 * Each input is written as the one YAML file (fuzz.yaml) of a private rules
 * directory, which is loaded with fg_rules_load into a fresh context that
 * already holds the shipped rules (so the input can use, redefine and clash
 * with the shipped vocabulary).  Checks: no crash, no sanitizer report, no
 * leak; the error record follows its contract (fz_check_errors).  When the
 * input loads cleanly, a small graph that every shipped rule family could
 * match is planned with the extended rule set, so rules that load but are
 * strange reach the planner too.
 */
#include "fuzz_common.h"

#include "context.h"

static char *g_dir;       /* the private rules directory */
static char *g_file;      /* g_dir/fuzz.yaml */
static char *g_shipped;   /* <source>/rules */

/* Conv + BN + ReLU, a residual add, a matmul + bias + GELU chain: tiny shapes
 * so that generating weights and folding cost next to nothing. */
static const char probe_graph[] =
    "graph: probe\n"
    "seed: 3\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 4, 5, 5] }\n"
    "  - { name: a, shape: [3, 4] }\n"
    "weights:\n"
    "  - { name: cw, shape: [4, 4, 3, 3] }\n"
    "  - { name: g, shape: [4], init: positive }\n"
    "  - { name: b, shape: [4] }\n"
    "  - { name: m, shape: [4] }\n"
    "  - { name: v, shape: [4], init: positive }\n"
    "  - { name: mw, shape: [4, 2] }\n"
    "  - { name: mb, shape: [2] }\n"
    "nodes:\n"
    "  - { name: conv, op: conv2d, inputs: [x, cw], attrs: { padding: [1, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [conv, g, b, m, v] }\n"
    "  - { name: act, op: relu, inputs: [bn] }\n"
    "  - { name: res, op: add, inputs: [act, x] }\n"
    "  - { name: mm, op: matmul, inputs: [a, mw] }\n"
    "  - { name: mmb, op: add, inputs: [mm, mb] }\n"
    "  - { name: ge, op: gelu, inputs: [mmb] }\n"
    "outputs: [res, ge]\n";

static void init_once(void)
{
    if (g_dir)
        return;
    unsetenv("FUSEGEN_RULES");
    g_dir = fz_tmpdir("rules");
    size_t n = strlen(g_dir) + 16;
    g_file = malloc(n);
    snprintf(g_file, n, "%s/fuzz.yaml", g_dir);
    n = strlen(fz_source_dir()) + 16;
    g_shipped = malloc(n);
    snprintf(g_shipped, n, "%s/rules", fz_source_dir());

    /* The probe graph must load and plan with the shipped rules alone, or
     * the planning step below would test nothing. */
    fg_context *ctx;
    fg_options o = {0};
    o.no_rules = 1;
    fg_context_init(&ctx, &o);
    ctx->quiet = 1;
    fg_graph *g = NULL;
    fg_plan *p = NULL;
    if (fg_rules_load(ctx, g_shipped) != FG_OK ||
        fg_graph_parse(ctx, "probe.yaml", probe_graph, sizeof probe_graph - 1, &g) != FG_OK ||
        fg_plan_build(ctx, g, &p) != FG_OK) {
        fz_dump_errors(ctx, 0);
        FZ_FAIL("the probe graph does not plan with the shipped rules");
    }
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    fz_write_file(g_file, data, size);

    fg_context *ctx;
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    ctx->quiet = 1;
    if (fg_rules_load(ctx, g_shipped) != FG_OK) {
        fz_dump_errors(ctx, 0);
        FZ_FAIL("the shipped rules in %s do not load", g_shipped);
    }

    int e0 = fg_context_error_count(ctx);
    fg_status st = fg_rules_load(ctx, g_dir);
    fz_check_errors(ctx, st, e0, "fg_rules_load", g_file, fz_max_lines(data, size));

    if (st == FG_OK) {
        fg_graph *g = NULL;
        int e1 = fg_context_error_count(ctx);
        fg_status gs = fg_graph_parse(ctx, "probe.yaml", probe_graph, sizeof probe_graph - 1, &g);
        fz_check_errors(ctx, gs, e1, "fg_graph_parse (probe graph)", NULL, 0);
        if (gs == FG_OK) {
            fg_plan *p = NULL;
            int e2 = fg_context_error_count(ctx);
            fg_status ps = fg_plan_build(ctx, g, &p);
            fz_check_errors(ctx, ps, e2, "fg_plan_build (probe graph)", NULL, 0);
            if (ps == FG_OK && fg_plan_group_count(p) < 1)
                FZ_FAIL("a plan of a 7-node graph has %d groups", fg_plan_group_count(p));
            fg_plan_free(p);
        }
        fg_graph_free(g);
    }
    fg_context_free(ctx);
    return 0;
}
