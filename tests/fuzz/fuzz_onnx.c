/*
 * fuzz_onnx.c -- fuzz target for the ONNX model loader from memory
 * (fg_graph_load_onnx_memory, codegen/onnx_graph.c).
 *
 * Input: a serialized ModelProto.  It is loaded from memory against the
 * shipped rules (one context reused across inputs, renewed every RENEW
 * inputs, errors cleared before each; symbolic dimensions take their default,
 * 1), with a private base directory for external data that holds one
 * file, data.bin (256 float32 values), so that inputs reach the external
 * data reader and its path checks.  A model that loads is planned with
 * fg_plan_build.
 * Checks: no crash, no sanitizer report, no leak, and
 *   - nothing is read from outside the base directory: its neighbour
 *     outside.bin holds the 16-bit pattern 0x7bfb repeated, and no weight of
 *     a loaded graph holds four consecutive values of that pattern read as
 *     float32, float16 or bfloat16 (a mutation rarely writes them itself);
 *   - the error record's contract (fz_check_errors), except that errors
 *     located in the model itself (named "fuzz.onnx") have line 0: a binary
 *     model has no lines;
 *   - fg_graph_load_onnx_memory returns a graph exactly when it returns
 *     FG_OK, fg_onnx_is_model_data does not crash, and fg_plan_build returns
 *     a plan exactly when it succeeds.
 */
#include "fuzz_common.h"

#include <math.h>

#include "context.h"
#include "ir.h"
#include "onnx_load.h"

#define RENEW 4096
#define NAME "fuzz.onnx"
#define SENTINEL 0x7bfbu

static fg_context *g_ctx;
static long g_runs;
static char *g_base;

static void ctx_free_at_exit(void)
{
    fg_context_free(g_ctx);
    g_ctx = NULL;
}

static void make_base_dir(void)
{
    char *root = fz_tmpdir("onnx");
    size_t n = strlen(root) + 32;
    g_base = malloc(n);
    snprintf(g_base, n, "%s/model", root);
    if (mkdir(g_base, 0700) != 0 && errno != EEXIST)
        FZ_FAIL("mkdir %s: %s", g_base, strerror(errno));
    float v[256];
    for (int i = 0; i < 256; i++)
        v[i] = (float)(i - 128) / 16.0f;
    char *p = malloc(n + 16);
    snprintf(p, n + 16, "%s/data.bin", g_base);
    fz_write_file(p, v, sizeof v);
    uint16_t w[512];
    for (int i = 0; i < 512; i++)
        w[i] = SENTINEL;
    snprintf(p, n + 16, "%s/outside.bin", root);
    fz_write_file(p, w, sizeof w);
    free(p);
    free(root);
}

static fg_context *shipped_ctx(void)
{
    if (g_ctx && g_runs++ % RENEW != 0)
        return g_ctx;
    if (!g_ctx) {
        atexit(ctx_free_at_exit);
        make_base_dir();
    }
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

/* fz_check_errors, with the model's own errors (line 0) set aside. */
static void check_errors(fg_context *ctx, fg_status st, int from, const char *what)
{
    int n = fg_context_error_count(ctx);
    if ((int)st < 0 || st >= FG_STATUS_COUNT)
        FZ_FAIL("%s returned an invalid status %d", what, (int)st);
    if (st == FG_OK && n != from) {
        fz_dump_errors(ctx, from);
        FZ_FAIL("%s returned FG_OK but recorded %d error(s)", what, n - from);
    }
    if (st != FG_OK && n == from)
        FZ_FAIL("%s returned %s but recorded no error", what, fg_status_name(st));
    for (int i = from; i < n; i++) {
        const fg_error *e = fg_context_error(ctx, i);
        if (!e)
            FZ_FAIL("%s: error %d of %d is NULL", what, i, n);
        if (e->status <= FG_OK || e->status >= FG_STATUS_COUNT)
            FZ_FAIL("%s: error %d has status %d", what, i, (int)e->status);
        if (!e->message || !e->message[0]) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d has an empty message", what, i);
        }
        int own = e->file && strcmp(e->file, NAME) == 0;
        if (own ? e->line != 0 || e->col != 0 : (e->file && e->line < 1) || e->col < 0) {
            fz_dump_errors(ctx, from);
            FZ_FAIL("%s: error %d is located at %s:%d:%d", what, i, e->file ? e->file : "(none)", e->line, e->col);
        }
    }
}

/* Whether v is outside.bin's pattern read as float32, float16 or bfloat16. */
static int is_sentinel(float v)
{
    uint32_t u = (uint32_t)SENTINEL << 16 | SENTINEL, b;
    float f32, bf;
    memcpy(&f32, &u, 4);
    b = (uint32_t)SENTINEL << 16;
    memcpy(&bf, &b, 4);
    float f16 = ldexpf((float)(1024 + (SENTINEL & 1023)), (int)((SENTINEL >> 10) & 31) - 25);
    return v == f32 || v == bf || v == f16;
}

static void check_no_outside_data(const fg_graph *g)
{
    for (int t = 0; t < g->ntensors; t++) {
        const fg_tensor *x = &g->tensors[t];
        if (!x->is_weight || !x->data)
            continue;
        int64_t n = fg_tensor_numel(x), run = 0;
        for (int64_t i = 0; i < n; i++) {
            run = is_sentinel(x->data[i]) ? run + 1 : 0;
            if (run == 4)
                FZ_FAIL("weight '%s' holds the bytes of a file outside the base directory", x->name);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fg_context *ctx = shipped_ctx();
    fg_context_clear_errors(ctx);
    (void)fg_onnx_is_model_data(data, size);

    fg_onnx_options o = {.base_dir = g_base, .size = sizeof o};
    fg_graph *g = (fg_graph *)(uintptr_t)1;   /* must be overwritten */
    fg_status st = fg_graph_load_onnx_memory(ctx, NAME, data, size, &o, &g);
    check_errors(ctx, st, 0, "fg_graph_load_onnx_memory");
    if (st != FG_OK && g != NULL)
        FZ_FAIL("fg_graph_load_onnx_memory failed but returned a graph");
    if (st == FG_OK && g == NULL)
        FZ_FAIL("fg_graph_load_onnx_memory succeeded without a graph");
    if (getenv("FUSEGEN_FUZZ_VERBOSE")) {
        fprintf(stderr, "%s\n", st == FG_OK ? "loaded" : "refused:");
        fz_dump_errors(ctx, 0);
    }
    if (st == FG_OK) {
        check_no_outside_data(g);
        fg_plan *p = NULL;
        int e1 = fg_context_error_count(ctx);
        fg_status ps = fg_plan_build(ctx, g, &p);
        check_errors(ctx, ps, e1, "fg_plan_build");
        if (ps == FG_OK && !p)
            FZ_FAIL("fg_plan_build succeeded without a plan");
        if (ps != FG_OK && p)
            FZ_FAIL("fg_plan_build failed but returned a plan");
        fg_plan_free(p);
        fg_graph_free(g);
    }
    return 0;
}
