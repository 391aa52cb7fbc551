/*
 * fuzz_hook.c -- fuzz target for the Lua hook interface (codegen/hook.h):
 * loading a hook file and calling predicate, parameter and fold hooks.
 *
 * Input: one selector byte, then the text of a hook file.  The text is
 * written as fuzz.lua in a private directory and loaded with fg_hooks_load
 * into a context that holds the shipped rules and a planned probe graph
 * (conv + BN + ReLU, a depthwise conv, matmul + bias + GELU, a pointwise
 * chain); the hook state of the shipped rules is dropped first, so the file
 * is the only one loaded.  When it loads, the hooks named pred, params and
 * fold are called (whether the file defines them or not):
 *   pred(node)    on node   selector % nodes (and on the next node);
 *   params(group) on group  (selector / 8) % groups, asking for tile_m,
 *                 tile_n, tile_k, threads and stages;
 *   fold(group)   on the same group, on a private copy of the plan's graph.
 * Selector bit 7 calls each hook a second time (state kept across calls).
 * Budgets are small: FUSEGEN_HOOK_STEPS=20000 instructions and
 * FUSEGEN_HOOK_MEMORY=8M per state, FUSEGEN_HOOK_TIMEOUT_MS=2000 (unless set).
 * Checks: no crash, hang, sanitizer report or leak, and for every call the
 * error-record contract (fz_check_errors); a failed call records errors that
 * are all located (a file and a line >= 1: the hook file or the calling
 * rule's line); a predicate's result is 0 or 1; a parameter hook leaves each
 * value as it was or sets it positive.  FUSEGEN_FUZZ_VERBOSE=1 prints each
 * call's status and errors.
 *
 * FUSEGEN_FUZZ_HOOK_NO_PATTERNS=1 skips inputs that mention Lua's pattern
 * functions (find, match, gmatch, gsub): one such call can backtrack for
 * minutes inside a single VM instruction, out of reach of the instruction
 * budget (docs/fuzzing.md, corpus/crashes-fuzz_hook/); set it to keep a
 * fuzzing campaign going past that known problem.
 */
#include "fuzz_common.h"

#include "context.h"
#include "hook.h"

#define RENEW 512   /* inputs per context (interned names and warnings accumulate) */

static fg_context *g_ctx;
static fg_graph *g_graph;
static fg_plan *g_plan;
static int g_runs, g_verbose, g_no_patterns;
static char *g_dir, *g_file;

/* Every shipped rule family once; tiny shapes. */
static const char probe_graph[] =
    "graph: probe\n"
    "seed: 5\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 4, 5, 5] }\n"
    "  - { name: a, shape: [3, 4] }\n"
    "weights:\n"
    "  - { name: cw, shape: [4, 4, 3, 3] }\n"
    "  - { name: g, shape: [4], init: positive }\n"
    "  - { name: b, shape: [4] }\n"
    "  - { name: m, shape: [4] }\n"
    "  - { name: v, shape: [4], init: positive }\n"
    "  - { name: dw, shape: [4, 1, 3, 3] }\n"
    "  - { name: mw, shape: [4, 2] }\n"
    "  - { name: mb, shape: [2] }\n"
    "nodes:\n"
    "  - { name: conv, op: conv2d, inputs: [x, cw], attrs: { padding: [1, 1] } }\n"
    "  - { name: bn, op: batch_norm, inputs: [conv, g, b, m, v] }\n"
    "  - { name: act, op: relu, inputs: [bn] }\n"
    "  - { name: dconv, op: conv2d, inputs: [act, dw], attrs: { padding: [1, 1], groups: 4 } }\n"
    "  - { name: res, op: add, inputs: [dconv, x] }\n"
    "  - { name: sg, op: sigmoid, inputs: [res] }\n"
    "  - { name: mm, op: matmul, inputs: [a, mw] }\n"
    "  - { name: mmb, op: add, inputs: [mm, mb] }\n"
    "  - { name: ge, op: gelu, inputs: [mmb] }\n"
    "outputs: [sg, ge]\n";

static void drop_state(void)
{
    fg_plan_free(g_plan);
    fg_graph_free(g_graph);
    fg_context_free(g_ctx);
    g_plan = NULL;
    g_graph = NULL;
    g_ctx = NULL;
}

static void new_context(void)
{
    drop_state();
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&g_ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    g_ctx->quiet = 1;
    char rules[4096];
    snprintf(rules, sizeof rules, "%s/rules", fz_source_dir());
    if (fg_rules_load(g_ctx, rules) != FG_OK ||
        fg_graph_parse(g_ctx, "probe.yaml", probe_graph, sizeof probe_graph - 1, &g_graph) != FG_OK ||
        fg_plan_build(g_ctx, g_graph, &g_plan) != FG_OK) {
        fz_dump_errors(g_ctx, 0);
        FZ_FAIL("the probe graph does not plan with the shipped rules in %s", rules);
    }
    if (g_plan->ngroups < 2 || g_plan->graph->nnodes < 2)
        FZ_FAIL("the probe plan has %d groups of %d nodes", g_plan->ngroups, g_plan->graph->nnodes);
    /* The hook state of the shipped rules goes: the input is the only file. */
    fg_hooks_free(g_ctx->hooks);
    g_ctx->hooks = NULL;
}

static void init_once(void)
{
    if (g_dir)
        return;
    if (!getenv("FUSEGEN_HOOK_STEPS"))
        setenv("FUSEGEN_HOOK_STEPS", "20000", 1);
    if (!getenv("FUSEGEN_HOOK_MEMORY"))
        setenv("FUSEGEN_HOOK_MEMORY", "8M", 1);
    if (!getenv("FUSEGEN_HOOK_TIMEOUT_MS"))
        setenv("FUSEGEN_HOOK_TIMEOUT_MS", "2000", 1);
    unsetenv("FUSEGEN_RULES");
    const char *v = getenv("FUSEGEN_FUZZ_VERBOSE");
    g_verbose = v && *v && strcmp(v, "0") != 0;
    v = getenv("FUSEGEN_FUZZ_HOOK_NO_PATTERNS");
    g_no_patterns = v && *v && strcmp(v, "0") != 0;
    g_dir = fz_tmpdir("hooks");
    size_t n = strlen(g_dir) + 16;
    g_file = malloc(n);
    snprintf(g_file, n, "%s/fuzz.lua", g_dir);
    new_context();
    atexit(drop_state);
}

/* The contract of one call, plus: a failure's errors are all located. */
static void check_call(fg_status st, int e0, const char *what, long lines)
{
    if (g_verbose) {
        fprintf(stderr, "%s: %s\n", what, fg_status_name(st));
        fz_dump_errors(g_ctx, e0);
    }
    fz_check_errors(g_ctx, st, e0, what, g_file, lines);
    if (st == FG_OK)
        return;
    for (int i = e0; i < fg_context_error_count(g_ctx); i++) {
        const fg_error *e = fg_context_error(g_ctx, i);
        if (!e->file || e->line < 1) {
            fz_dump_errors(g_ctx, e0);
            FZ_FAIL("%s failed with an error that has no location (file %s, line %d)", what,
                    e->file ? e->file : "(none)", e->line);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    if (++g_runs % RENEW == 0)
        new_context();
    fg_context_clear_errors(g_ctx);
    fg_hooks_free(g_ctx->hooks);
    g_ctx->hooks = NULL;

    unsigned sel = size ? data[0] : 0;
    const uint8_t *text = size ? data + 1 : data;
    size_t n = size ? size - 1 : 0;
    if (g_no_patterns) {
        static const char *const pats[] = {"find", "match", "gsub"};
        for (size_t i = 0; i < FG_COUNTOF(pats); i++)
            if (memmem(text, n, pats[i], strlen(pats[i])))
                return 0;
    }
    fz_write_file(g_file, text, n);
    long lines = fz_max_lines(text, n);

    int e0 = fg_context_error_count(g_ctx);
    fg_status st = fg_hooks_load(g_ctx, g_file);
    check_call(st, e0, "fg_hooks_load", lines);
    if (st != FG_OK)
        return 0;

    const fg_graph *pg = g_plan->graph;
    const fg_loc site = {"probe_rule.yaml", 7, 3};
    int rounds = (sel & 128) ? 2 : 1;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int node = (int)((sel + (unsigned)k) % (unsigned)pg->nnodes), res = -1;
            e0 = fg_context_error_count(g_ctx);
            st = fg_hook_predicate(g_ctx, "pred", site, pg, node, &res);
            check_call(st, e0, "fg_hook_predicate", lines);
            if (st == FG_OK && res != 0 && res != 1)
                FZ_FAIL("predicate result %d", res);
        }

        const fg_group *grp = &g_plan->groups[(sel / 8) % (unsigned)g_plan->ngroups];
        static const char *const keys[] = {"tile_m", "tile_n", "tile_k", "threads", "stages"};
        int64_t vals[5] = {64, 0, -3, 128, 2}, before[5];
        memcpy(before, vals, sizeof vals);
        e0 = fg_context_error_count(g_ctx);
        st = fg_hook_params(g_ctx, "params", site, pg, grp, keys, 5, vals);
        check_call(st, e0, "fg_hook_params", lines);
        for (int i = 0; i < 5; i++)
            if (vals[i] != before[i] && (st != FG_OK || vals[i] <= 0))
                FZ_FAIL("params set %s to %lld (status %s)", keys[i], (long long)vals[i], fg_status_name(st));

        fg_graph *copy = fg_graph_clone(pg);
        e0 = fg_context_error_count(g_ctx);
        st = fg_hook_fold(g_ctx, "fold", site, copy, grp);
        check_call(st, e0, "fg_hook_fold", lines);
        fg_graph_free(copy);
    }
    return 0;
}
