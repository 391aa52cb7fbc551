/*
 * test_concat_inplace.c -- concat elimination (codegen/concat_inplace.c):
 * which concat inputs their producers write in place, each legality rule
 * accepted or refused with its reason (the --explain lines), the hazard
 * check on deliberately broken views, kernel counts with and without the
 * concat's kernel, and numerics in CPU emulation against the host reference
 * of the unfused graph: an Inception-like block (batch 1 and 2, NCHW and
 * NHWC, fp32 and fp16), a DenseNet-like chain of nested concats, a concat
 * of a graph input and one of a graph output.  Outputs are poisoned with
 * NaN before the run and the concats' outputs are graph outputs, so a slice
 * no kernel writes fails the comparison.  The kernel that copies the inputs
 * left over compiles under NVRTC (sm_80, sm_90) with an empty log.  The
 * cases keep the graphs' layouts (FUSEGEN_KEEP_LAYOUT=1); one DenseNet case
 * runs with the planner's layout pass, where NHWC intermediates are copied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concat_inplace.h"
#include "emit.h"
#include "exec.h"
#include "jit.h"
#include "plan.h"
#include "testutil.h"

static fg_graph *parse(fg_context *ctx, const char *yaml)
{
    fg_graph *g = NULL;
    fg_status st = fg_graph_parse(ctx, "g.yaml", yaml, strlen(yaml), &g);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return g;
}

static fg_plan *plan(fg_context *ctx, const fg_graph *g)
{
    fg_plan *p = NULL;
    fg_status st = fg_plan_build(ctx, g, &p);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    return p;
}

/* Nonzero when some --explain line of p's concats contains want. */
static int has_line(const fg_plan *p, const char *want)
{
    for (int i = 0; p->views && i < p->views->nlines; i++)
        if (strstr(p->views->lines[i], want))
            return 1;
    return 0;
}

static void dump_lines(const fg_plan *p)
{
    for (int i = 0; p->views && i < p->views->nlines; i++)
        fprintf(stderr, "    %s\n", p->views->lines[i]);
}

/* ---- legality: one graph per rule ------------------------------------------ */

/* %s: layout, batch, the x shape's spatial size, nodes, outputs */
static const char legal_fmt[] =
    "graph: legal\n"
    "seed: 1\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [%d, 4, %d, %d] }\n"
    "weights:\n"
    "  - { name: w, shape: [4, 4, 1, 1] }\n"
    "  - { name: w3, shape: [3, 4, 1, 1] }\n"
    "  - { name: wc, shape: [%d, 4, %d, %d] }\n"
    "nodes:\n"
    "%s"
    "outputs: [%s]\n";

static const struct legal_case {
    const char *what;
    const char *layout;
    int batch, hw;
    const char *nodes, *outputs;
    const char *want[3];   /* lines that must be there */
    int eliminated;        /* concats left without a kernel */
} legal_cases[] = {
    {"accepted", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [a, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat",
     {"concat cat: input 0 (a) written in place at offset 0 bytes of cat",
      "concat cat: input 1 (b) written in place at offset 576 bytes of cat", "concat cat: no kernel"},
     1},
    {"graph input", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [x, a], attrs: { axis: 1 } }\n",
     "cat",
     {"concat cat: input 0 (x) copied because x is a graph input",
      "concat cat: input 1 (a) written in place at offset 576 bytes"},
     0},
    {"constant", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, wc], attrs: { axis: 1 } }\n",
     "cat", {"concat cat: input 1 (wc) copied because wc is a constant"}, 0},
    {"graph output", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat, a",
     {"concat cat: input 0 (a) copied because a is a graph output",
      "concat cat: input 1 (b) written in place at offset 576 bytes"},
     0},
    {"output not stored", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n"
     "  - { name: r, op: relu, inputs: [cat] }\n",
     "r", {"concat cat: inputs copied because its output is not stored (one kernel also applies r)"}, 0},
    {"strided (batch 2)", "NCHW", 2, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat",
     {"concat cat: inputs copied because its slices are strided (axis 0, of extent 2, precedes the concat axis 1 "
      "in the NCHW layout)"},
     0},
    {"strided (NHWC)", "NHWC", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat", {"concat cat: inputs copied because its slices are strided (axis 2, of extent 6, precedes"}, 0},
    {"NHWC 1 x 1 is contiguous", "NHWC", 1, 1,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat", {"concat cat: input 1 (b) written in place at offset 16 bytes", "concat cat: no kernel"}, 1},
    {"twice in one concat", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, a], attrs: { axis: 1 } }\n",
     "cat",
     {"concat cat: input 0 (a) written in place at offset 0",
      "concat cat: input 1 (a) copied because a is written in place at input 0 already"},
     0},
    {"in another concat", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat1, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n"
     "  - { name: cat2, op: concat, inputs: [b, a], attrs: { axis: 1 } }\n",
     "cat1, cat2",
     {"concat cat2: input 0 (b) copied because b is written in place in cat1 already",
      "concat cat2: input 1 (a) copied because a is written in place in cat1 already", "concat cat1: no kernel"},
     1},
    {"misaligned offset", "NCHW", 1, 5,
     "  - { name: a, op: conv2d, inputs: [x, w3] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n",
     "cat",
     {"concat cat: input 1 (b) copied because its offset, 300 bytes, is not a multiple of 16",
      "concat cat: input 0 (a) written in place at offset 0"},
     0},
    {"nested", "NCHW", 1, 6,
     "  - { name: a, op: conv2d, inputs: [x, w] }\n"
     "  - { name: b, op: conv2d, inputs: [x, w] }\n"
     "  - { name: c1, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n"
     "  - { name: f, op: relu, inputs: [c1] }\n"
     "  - { name: g, op: sigmoid, inputs: [c1] }\n"
     "  - { name: c2, op: concat, inputs: [g, c1, f], attrs: { axis: 1 } }\n",
     "c2",
     {"concat c2: input 1 (c1) written in place at offset 1152 bytes of c2",
      "concat c2: input 2 (f) written in place at offset 2304 bytes of c2", "concat c1: no kernel"},
     2},
};

/* Every rule of concat_inplace.h, accepted or refused with its reason. */
static void test_legality(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    for (size_t i = 0; i < sizeof legal_cases / sizeof legal_cases[0]; i++) {
        const struct legal_case *c = &legal_cases[i];
        char text[4096];
        snprintf(text, sizeof text, legal_fmt, c->layout, c->batch, c->hw, c->hw, c->batch, c->hw, c->hw, c->nodes,
                 c->outputs);
        fg_graph *g = parse(ctx, text);
        fg_plan *p = plan(ctx, g);
        int ok = p->views != NULL && p->views->eliminated == c->eliminated;
        for (int k = 0; k < 3 && c->want[k]; k++)
            ok &= has_line(p, c->want[k]);
        if (!ok) {
            fprintf(stderr, "case '%s': eliminated %d (want %d); lines:\n", c->what,
                    p->views ? p->views->eliminated : -1, c->eliminated);
            dump_lines(p);
            fail_msg("case '%s': the decision is not the expected one", c->what);
        }
        /* one group less per concat without a kernel; none writes the views' roots twice */
        char why[256];
        assert_true(fg_concat_views_check(p, why, sizeof why));
        int grouped = 0;
        for (int gi = 0; gi < p->ngroups; gi++)
            grouped += p->groups[gi].nnodes;
        assert_int_equal(grouped + c->eliminated, g->nnodes);
        fg_plan_free(p);
        fg_graph_free(g);
    }
    fg_context_free(ctx);
}

/* The hazard check fails on views broken on purpose: two kernels writing
 * the same bytes, a kernel reading bytes it writes, a read before the write. */
static void test_hazards(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const char text[] = "graph: hazards\n"
                               "inputs:\n"
                               "  - { name: x, shape: [1, 4, 6, 6] }\n"
                               "weights:\n"
                               "  - { name: w, shape: [4, 4, 1, 1] }\n"
                               "  - { name: w8, shape: [4, 8, 1, 1] }\n"
                               "nodes:\n"
                               "  - { name: a, op: conv2d, inputs: [x, w] }\n"
                               "  - { name: b, op: conv2d, inputs: [x, w] }\n"
                               "  - { name: cat, op: concat, inputs: [a, b], attrs: { axis: 1 } }\n"
                               "  - { name: f, op: conv2d, inputs: [cat, w8] }\n"
                               "outputs: [f]\n";
    fg_graph *g = parse(ctx, text);
    int a = fg_graph_find_tensor(g, "a"), b = fg_graph_find_tensor(g, "b"), cat = fg_graph_find_tensor(g, "cat"),
        f = fg_graph_find_tensor(g, "f");
    char why[512];

    /* as planned: a and b in place, no concat kernel, safe */
    fg_plan *p = plan(ctx, g);
    assert_int_equal(p->ngroups, 3);
    assert_int_equal(p->views->parent[a], cat);
    assert_int_equal(p->views->parent[b], cat);
    assert_true(fg_concat_views_check(p, why, sizeof why));

    /* b over a: two kernels write the same bytes */
    p->views->offset[b] = 0;
    assert_false(fg_concat_views_check(p, why, sizeof why));
    assert_non_null(strstr(why, "would write the same bytes of cat"));
    p->views->offset[b] = 576;

    /* f written over b's slice while it reads cat (b stored on its own) */
    p->views->parent[b] = -1;
    p->views->parent[f] = cat;
    p->views->slot[f] = 1;
    p->views->offset[f] = 576;
    assert_false(fg_concat_views_check(p, why, sizeof why));
    assert_non_null(strstr(why, "would read cat while writing f over it"));
    p->views->parent[f] = -1;
    p->views->parent[b] = cat;

    /* f's kernel moved before b's: it would read cat before b is written */
    assert_true(fg_concat_views_check(p, why, sizeof why));
    fg_group tmp = p->groups[1];
    p->groups[1] = p->groups[2];
    p->groups[2] = tmp;
    assert_false(fg_concat_views_check(p, why, sizeof why));
    assert_non_null(strstr(why, "would read cat before the kernel of b writes it"));

    /* a cycle of views */
    p->views->parent[cat] = a;
    assert_false(fg_concat_views_check(p, why, sizeof why));
    assert_non_null(strstr(why, "cycle"));
    p->views->parent[cat] = -1;
    fg_plan_free(p);
    fg_graph_free(g);
    fg_context_free(ctx);
}

/* ---- numerics in emulation -------------------------------------------------- */

/* An Inception-like block: four branches (1x1; 1x1 then 3x3; pool then 1x1;
 * the stem itself) concatenated, the concat read by two ops.  %s dtype,
 * %s layout, %d batch, %s outputs: with the concat among them its buffer is
 * the caller's (poisoned), else an arena slot live from the stem (whose
 * output is in place in it) to the last reader. */
static const char incep_fmt[] =
    "graph: incep\n"
    "seed: 3\n"
    "dtype: %s\n"
    "layout: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [%d, 8, 9, 9] }\n"
    "weights:\n"
    "  - { name: w0, shape: [16, 8, 3, 3] }\n"
    "  - { name: w1, shape: [8, 16, 1, 1] }\n"
    "  - { name: w2a, shape: [4, 16, 1, 1] }\n"
    "  - { name: w2b, shape: [12, 4, 3, 3] }\n"
    "  - { name: w3, shape: [4, 16, 1, 1] }\n"
    "nodes:\n"
    "  - { name: stem, op: conv2d, inputs: [x, w0], attrs: { padding: [1, 1] } }\n"
    "  - { name: stem_r, op: relu, inputs: [stem] }\n"
    "  - { name: b1, op: conv2d, inputs: [stem_r, w1] }\n"
    "  - { name: b1r, op: relu, inputs: [b1] }\n"
    "  - { name: b2a, op: conv2d, inputs: [stem_r, w2a] }\n"
    "  - { name: b2b, op: conv2d, inputs: [b2a, w2b], attrs: { padding: [1, 1] } }\n"
    "  - { name: b3p, op: max_pool2d, inputs: [stem_r], attrs: { kernel: [3, 3], stride: [1, 1], padding: [1, 1] } }\n"
    "  - { name: b3, op: conv2d, inputs: [b3p, w3] }\n"
    "  - { name: cat, op: concat, inputs: [b1r, b2b, b3, stem_r], attrs: { axis: 1 } }\n"
    "  - { name: out, op: relu, inputs: [cat] }\n"
    "  - { name: out2, op: sigmoid, inputs: [cat] }\n"
    "outputs: [%s]\n";

/* A DenseNet-like chain: s -> c1 = concat(s, f(s)) -> c2 = concat(c1,
 * g(c1)) -> c3 = concat(c2, h(c2)), the concats nested in c3's buffer; d
 * concatenates a graph input and a tensor already in place in c1; z a graph
 * output (copied) and a conv (in place).  %s dtype. */
static const char dense_fmt[] =
    "graph: dense\n"
    "seed: 4\n"
    "dtype: %s\n"
    "inputs:\n"
    "  - { name: x, shape: [1, 4, 6, 6] }\n"
    "weights:\n"
    "  - { name: w0, shape: [8, 4, 3, 3] }\n"
    "  - { name: wf, shape: [4, 8, 3, 3] }\n"
    "  - { name: wg, shape: [4, 12, 1, 1] }\n"
    "  - { name: wh, shape: [4, 16, 3, 3] }\n"
    "  - { name: wk, shape: [4, 16, 1, 1] }\n"
    "nodes:\n"
    "  - { name: s, op: conv2d, inputs: [x, w0], attrs: { padding: [1, 1] } }\n"
    "  - { name: sr, op: relu, inputs: [s] }\n"
    "  - { name: f, op: conv2d, inputs: [sr, wf], attrs: { padding: [1, 1] } }\n"
    "  - { name: fr, op: relu, inputs: [f] }\n"
    "  - { name: c1, op: concat, inputs: [sr, fr], attrs: { axis: 1 } }\n"
    "  - { name: g, op: conv2d, inputs: [c1, wg] }\n"
    "  - { name: gr, op: relu, inputs: [g] }\n"
    "  - { name: c2, op: concat, inputs: [c1, gr], attrs: { axis: 1 } }\n"
    "  - { name: h, op: conv2d, inputs: [c2, wh], attrs: { padding: [1, 1] } }\n"
    "  - { name: c3, op: concat, inputs: [c2, h], attrs: { axis: 1 } }\n"
    "  - { name: d, op: concat, inputs: [x, sr], attrs: { axis: 1 } }\n"
    "  - { name: q, op: sigmoid, inputs: [c2] }\n"
    "  - { name: k, op: conv2d, inputs: [c2, wk] }\n"
    "  - { name: z, op: concat, inputs: [q, k], attrs: { axis: 1 } }\n"
    "outputs: [c3, d, q, z]\n";

/* Plans, checks the counts, runs in emulation against the reference. */
static void run_case(fg_context *ctx, const char *text, const char *what, int want_views, int want_eliminated,
                     int want_kernels, double tol)
{
    fg_graph *g = parse(ctx, text);
    fg_plan *p = plan(ctx, g);
    int views = p->views ? p->views->nviews : 0, elim = p->views ? p->views->eliminated : 0;
    print_message("%s: %d inputs in place, kernels %d -> %d\n", what, views, p->ngroups + elim, p->ngroups);
    if (views != want_views || elim != want_eliminated || p->ngroups != want_kernels) {
        dump_lines(p);
        fail_msg("%s: %d in place, %d eliminated, %d kernels (want %d, %d, %d)", what, views, elim, p->ngroups,
                 want_views, want_eliminated, want_kernels);
    }
    fg_exec *e = tu_compile_emu(ctx, p);
    /* views sit inside their root, which is the only one with storage */
    for (int t = 0; t < g->ntensors; t++) {
        size_t off = 0;
        if (fg_exec_tensor_place(e, t, &off) == FG_PLACE_VIEW)
            assert_true(p->views && p->views->parent[t] >= 0);
        else
            assert_true(!p->views || p->views->parent[t] < 0);
    }
    tu_exec_vs_reference(ctx, g, e, 11, tol);
    fg_exec_free(e);
    fg_plan_free(p);
    fg_graph_free(g);
}

static void test_inception(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const struct {
        const char *dtype, *layout;
        int batch, views, eliminated, kernels;
        double tol;
        const char *outputs;
    } cases[] = {
        /* fp32 batch 1 NCHW: every branch in place, no concat kernel (9 kernels before) */
        {"fp32", "NCHW", 1, 4, 1, 8, 1e-5, "out, out2"},
        {"fp32", "NCHW", 1, 4, 1, 8, 1e-5, NULL},
        /* fp16: b3's slice starts at 3240 bytes, not 16-aligned: copied by the concat */
        {"fp16", "NCHW", 1, 3, 0, 9, 5e-3},
        {"fp32", "NCHW", 2, 0, 0, 9, 1e-5},
        {"fp16", "NCHW", 2, 0, 0, 9, 5e-3},
        {"fp32", "NHWC", 1, 0, 0, 9, 1e-5},
        {"fp16", "NHWC", 1, 0, 0, 9, 5e-3},
        {"fp32", "NHWC", 2, 0, 0, 9, 1e-5},
        {"fp16", "NHWC", 2, 0, 0, 9, 5e-3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[sizeof incep_fmt + 64], what[96];
        const char *outs = cases[i].outputs ? cases[i].outputs : "cat, out, out2";
        snprintf(text, sizeof text, incep_fmt, cases[i].dtype, cases[i].layout, cases[i].batch, outs);
        snprintf(what, sizeof what, "inception %s %s batch %d, outputs %s", cases[i].dtype, cases[i].layout,
                 cases[i].batch, outs);
        run_case(ctx, text, what, cases[i].views, cases[i].eliminated, cases[i].kernels, cases[i].tol);
    }
    fg_context_free(ctx);
}

static void test_densenet(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const struct {
        const char *dtype;
        double tol;
    } cases[] = {{"fp32", 1e-5}, {"fp16", 5e-3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[sizeof dense_fmt + 16], what[64];
        snprintf(text, sizeof text, dense_fmt, cases[i].dtype);
        snprintf(what, sizeof what, "densenet chain %s", cases[i].dtype);
        /* sr, fr (in c1), c1, gr (in c2), c2, h (in c3), k (in z); c1, c2, c3 without kernels;
         * 8 kernels: s, f, g, h, k, q, d (copies x and sr), z (copies q) -- 11 before */
        run_case(ctx, text, what, 7, 3, 8, cases[i].tol);
    }
    fg_context_free(ctx);
    /* With the layout pass (the default; main() turns it off for the cases
     * above), an fp16 NCHW graph with convolutions stores its intermediates
     * NHWC, where channel slices are strided: every concat copies (11
     * kernels), and the result is still right. */
    unsetenv("FUSEGEN_KEEP_LAYOUT");
    ctx = tu_ctx_shipped();
    char text[sizeof dense_fmt + 16];
    snprintf(text, sizeof text, dense_fmt, "fp16");
    run_case(ctx, text, "densenet chain fp16, layout pass", 0, 0, 11, 5e-3);
    fg_context_free(ctx);
    setenv("FUSEGEN_KEEP_LAYOUT", "1", 1);
}

/* The kernels copying the inputs left over compile under NVRTC, specialized
 * and not, with an empty log. */
static void test_nvrtc(void **state)
{
    (void)state;
    setenv("FUSEGEN_CACHE", "off", 1);
    fg_context *ctx = tu_ctx_shipped();
    fg_kernel ks[8];
    int nk = 0;
    for (int which = 0; which < 2; which++) {
        char text[sizeof incep_fmt + sizeof dense_fmt];
        if (which == 0)
            snprintf(text, sizeof text, incep_fmt, "fp16", "NCHW", 1, "cat, out, out2");
        else
            snprintf(text, sizeof text, dense_fmt, "fp32");
        fg_graph *g = parse(ctx, text);
        fg_plan *p = plan(ctx, g);
        for (int gi = 0; gi < p->ngroups; gi++)
            for (int spec = 0; spec < 2; spec++) {
                fg_kernel k;
                fg_emit_opts o = {.specialize = spec};
                assert_int_equal(fg_emit_group(ctx, p, gi, &o, &k), FG_OK);
                if (strstr(k.source, "concat_rest.cuh") && nk < 8)
                    ks[nk++] = k;
                else
                    fg_kernel_free(&k);
            }
        fg_plan_free(p);
        fg_graph_free(g);
    }
    assert_int_equal(nk, 4);   /* the inception's cat and the chain's z, specialized and not */
    static const char *const archs[] = {"sm_80", "sm_90"};
    fg_jit_info infos[8];
    for (int a = 0; a < 2; a++) {
        memset(infos, 0, sizeof infos);
        fg_status st = fg_jit_compile_all(ctx, ks, nk, archs[a], infos);
        if (st != FG_OK)
            tu_dump_errors(ctx);
        assert_int_equal(st, FG_OK);
        for (int i = 0; i < nk; i++) {
            if (infos[i].log[0] || !ks[i].binary_size)
                fprintf(stderr, "---- %s (%s): log:\n%s\n---- source:\n%s\n", ks[i].name, archs[a], infos[i].log,
                        ks[i].source);
            assert_true(!infos[i].log[0] && ks[i].binary_size);
        }
    }
    for (int i = 0; i < nk; i++)
        fg_kernel_free(&ks[i]);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legality),
        cmocka_unit_test(test_hazards),
        cmocka_unit_test(test_densenet),
        cmocka_unit_test(test_inception),
        cmocka_unit_test(test_nvrtc),
    };
    /* Concat elimination is tested on the graphs' own layouts: without this
     * the planner's layout pass would store the fp16 NCHW cases' intermediates
     * NHWC (test_densenet shows that case too). */
    setenv("FUSEGEN_KEEP_LAYOUT", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
