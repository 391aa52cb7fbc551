/*
 * test_pointwise_vec.c -- the pointwise template's 16-byte vector path, in
 * CPU emulation (the exact generated source; the emulation prelude fails a
 * launch on any vector access that is not 16-byte aligned, as the device
 * would fault).
 *
 * Graphs planned with the shipped rules into one pointwise kernel each:
 *   - rank 4, fp32 / fp16 / bf16, NCHW and NHWC:
 *       y = (prelu(x + b, slope) + r) * g
 *     x, r [N, C, H, W] inputs (the output's shape: vector loads), b
 *     [1, C, 1, 1] and g [W] broadcast weights, slope a per-channel [C]
 *     weight; shapes whose innermost axis (W for NCHW, C for NHWC) is and is
 *     not a multiple of the vector width, element counts with and without a
 *     scalar tail;
 *   - rank 1, every dtype, 1, 7, 13, 4096 and 4097 elements:
 *       y = relu((x + r) * s), s a [1] weight.
 * Each kernel runs on seeded random inputs (rounded to the dtype) with a
 * NaN-poisoned output, and the output must match the host reference
 * (runtime/reference.c, double precision, unfused) within fp32 1e-5, fp16
 * 2e-3, bf16 1e-2 relative L2.  The source must show what the shapes allow:
 * vector loads and stores, contiguous reads along the innermost axis, reads
 * once per vector.
 * That the vector path really runs: a copy of the source whose vector loop
 * adds 1e4 to each value it stores must be off by 1e4 exactly on the
 * elements before the scalar tail, and exact on the tail; with one input
 * bound 1 element off 16-byte alignment, the launch check sends every
 * element through the scalar loop (no element off, no alignment failure).
 * A kernel with shapes as parameters (specialize = 0) runs the same checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emu.h"
#include "plan.h"
#include "reference.h"
#include "tensor_convert.h"
#include "testutil.h"

static const char *const dt_names[] = {"fp32", "fp16", "bf16"};
static const double tol[] = {1e-5, 2e-3, 1e-2};

/* A graph, its plan and its one pointwise group's kernel. */
typedef struct pw_case {
    fg_context *ctx;
    fg_graph *g;
    fg_plan *p;
    fg_kernel k;
    int out;          /* output tensor of the plan graph */
    int vec;          /* vector width of the output's dtype */
} pw_case;

static void case_open(pw_case *c, fg_context *ctx, const char *yaml, int specialize)
{
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    fg_status st = fg_graph_parse(ctx, "pw.yaml", yaml, strlen(yaml), &c->g);
    if (st == FG_OK)
        st = fg_plan_build(ctx, c->g, &c->p);
    if (st != FG_OK) {
        tu_dump_errors(ctx);
        fprintf(stderr, "%s\n", yaml);
    }
    assert_int_equal(st, FG_OK);
    assert_int_equal(c->p->ngroups, 1);
    assert_string_equal(c->p->groups[0].template_name, "pointwise");
    fg_emit_opts o = {.specialize = specialize};
    st = fg_emit_group(ctx, c->p, 0, &o, &c->k);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);
    c->out = c->p->groups[0].output;
    c->vec = (int)(16 / fg_dtype_size(c->p->graph->tensors[c->out].dtype));
}

static void case_close(pw_case *c)
{
    fg_kernel_free(&c->k);
    fg_plan_free(c->p);
    fg_graph_free(c->g);
}

/* One launch of k (source src) on fresh buffers: inputs from the reference's
 * rounded random values, weights from the plan graph, the output poisoned;
 * misalign_input: the first graph input is bound that many elements past a
 * 64-byte boundary.  Returns the output's bytes in memory order (malloc'd);
 * *ref_out gets the reference output (logical order, malloc'd). */
static void *launch(pw_case *c, const char *src, int misalign_input, double **ref_out)
{
    fg_context *ctx = c->ctx;
    const fg_graph *g = c->g, *pg = c->p->graph;
    double **ref = fg_xcalloc((size_t)g->ntensors + 1, sizeof *ref);
    fg_reference_random_inputs(g, 99, ref);
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].is_input)
            for (int64_t i = 0; i < fg_tensor_numel(&g->tensors[t]); i++)
                ref[t][i] = fg_round_to_dtype(ref[t][i], g->tensors[t].dtype);

    fg_kernel k = c->k;   /* a shallow copy with its own source and no binary */
    k.source = fg_xstrdup(src);
    k.binary = NULL;
    k.binary_size = 0;
    k.handle = NULL;
    k.release = NULL;
    fg_status st = fg_emu_build(ctx, &k);
    if (st != FG_OK) {
        tu_dump_errors(ctx);
        fprintf(stderr, "%s\n", src);
    }
    assert_int_equal(st, FG_OK);

    uint64_t args[FG_MAX_KPARAMS];
    unsigned char *bases[FG_MAX_KPARAMS] = {0};
    unsigned char *outp = NULL;
    int first_input = 1;
    for (int j = 0; j < k.nparams; j++) {
        const fg_kparam *kp = &k.params[j];
        if (kp->kind != FG_KPARAM_TENSOR) {
            args[j] = (uint64_t)kp->value;
            continue;
        }
        const fg_tensor *tt = &pg->tensors[kp->tensor];
        size_t esz = fg_dtype_size(tt->dtype), n = (size_t)fg_tensor_numel(tt);
        size_t skew = 0;
        if (tt->is_input && first_input) {
            skew = (size_t)misalign_input * esz;
            first_input = 0;
        }
        bases[j] = aligned_alloc(64, (n * esz + skew + 64 + 63) / 64 * 64);
        unsigned char *data = bases[j] + skew;
        int si = fg_graph_find_tensor(g, tt->name);
        if (tt->is_input) {
            assert_true(si >= 0);
            fg_tensor_pack(tt, tt->layout, ref[si], data);
        } else if (tt->is_weight) {
            float *v = fg_xmalloc(n * sizeof *v);
            fg_tensor_values(tt, v);
            fg_tensor_pack_f32(tt, tt->layout, v, data);
            free(v);
        } else {
            memset(data, 0xFF, n * esz);   /* NaN in every dtype */
            outp = data;
        }
        args[j] = (uint64_t)(uintptr_t)data;
    }
    assert_non_null(outp);
    st = fg_emu_launch(ctx, &k, args);
    if (st != FG_OK)
        tu_dump_errors(ctx);
    assert_int_equal(st, FG_OK);

    const fg_tensor *ot = &pg->tensors[c->out];
    size_t obytes = (size_t)fg_tensor_numel(ot) * fg_dtype_size(ot->dtype);
    void *res = fg_xmalloc(obytes);
    memcpy(res, outp, obytes);
    assert_int_equal(fg_reference_run(ctx, g, ref), FG_OK);
    int so = fg_graph_find_tensor(g, ot->name);
    *ref_out = fg_xmalloc((size_t)fg_tensor_numel(ot) * sizeof(double));
    memcpy(*ref_out, ref[so], (size_t)fg_tensor_numel(ot) * sizeof(double));
    for (int j = 0; j < k.nparams; j++)
        free(bases[j]);
    fg_reference_free(g, ref);
    free(ref);
    k.group = c->k.group;
    fg_emu_release(&k);
    free(k.source);
    free(k.binary);
    return res;
}

/* Element i (memory order) of an output buffer, as a double. */
static double elem(const void *buf, fg_dtype t, int64_t i)
{
    if (t == FG_DTYPE_F32)
        return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return t == FG_DTYPE_F16 ? fg_f16_to_f32(h) : fg_bf16_to_f32(h);
}

/* The kernel against the reference, then the vector path's own checks. */
static void check_case(pw_case *c, const char *label)
{
    const fg_tensor *ot = &c->p->graph->tensors[c->out];
    int64_t n = fg_tensor_numel(ot);
    double *ref = NULL;
    void *out = launch(c, c->k.source, 0, &ref);
    double *got = fg_xmalloc((size_t)n * sizeof *got), max_abs;
    fg_tensor_unpack(ot, ot->layout, out, got);
    double rel = fg_rel_l2(got, ref, n, &max_abs);
    int has_vec = strstr(c->k.source, "fg_aligned16(") != NULL;
    print_message("  %-28s %6lld elements, %s: rel_l2 %.2e (max |d| %.2e)\n", label, (long long)n,
                  has_vec ? "vector path" : "scalar only", rel, max_abs);
    if (!(rel <= tol[ot->dtype]))
        fprintf(stderr, "%s\n", c->k.source);
    assert_true(rel <= tol[ot->dtype]);
    free(got);
    free(ref);

    /* outputs of fewer than 16 bytes have no vector path */
    assert_int_equal(has_vec, n >= c->vec);
    if (!has_vec) {
        free(out);
        return;
    }
    char store[32];
    snprintf(store, sizeof store, "fg_store%d(p.", c->vec);
    assert_non_null(strstr(c->k.source, store));

    /* the vector loop marked: +1e4 on every value it stores */
    const char *mark = "out[j] = fg_epilogue(";
    const char *at = strstr(c->k.source, mark);
    assert_non_null(at);
    size_t pre = (size_t)(at - c->k.source);
    fg_buf m = {0};
    fg_buf_putn(&m, c->k.source, pre);
    fg_buf_put(&m, "out[j] = 1e4f + fg_epilogue(");
    fg_buf_put(&m, at + strlen(mark));
    int64_t nv = n / c->vec * c->vec;
    for (int misalign = 0; misalign <= 1; misalign++) {
        void *marked = launch(c, m.s, misalign, &ref);
        free(ref);
        int64_t off_vec = 0, off_tail = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = elem(marked, ot->dtype, i) - elem(out, ot->dtype, i);
            if (i < nv && !misalign)
                off_vec += fabs(d - 1e4) <= 64;   /* fp16 spacing at 1e4 is 8, bf16 64 */
            else
                off_tail += d != 0;
        }
        print_message("  %-28s marked vector loop, %s: %lld of %lld vector elements off by 1e4, %lld others off\n",
                      label, misalign ? "input misaligned" : "aligned", (long long)off_vec,
                      (long long)(misalign ? 0 : nv), (long long)off_tail);
        assert_int_equal(off_vec, misalign ? 0 : nv);
        assert_int_equal(off_tail, 0);
        free(marked);
    }
    fg_buf_free(&m);
    free(out);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void rank4(fg_context *ctx, int dt, const char *layout, int N, int C, int H, int W, int specialize,
                  int want_contig, int want_uniform)
{
    char yaml[1024], label[96];
    snprintf(yaml, sizeof yaml,
             "graph: pw4\nseed: 5\ndtype: %s\nlayout: %s\ninputs:\n"
             "  - { name: x, shape: [%d, %d, %d, %d] }\n  - { name: r, shape: [%d, %d, %d, %d] }\n"
             "weights:\n  - { name: b, shape: [1, %d, 1, 1] }\n  - { name: slope, shape: [%d] }\n"
             "  - { name: g, shape: [%d] }\n"
             "nodes:\n"
             "  - { name: a, op: add, inputs: [x, b] }\n"
             "  - { name: pr, op: prelu, inputs: [a, slope] }\n"
             "  - { name: s, op: add, inputs: [pr, r] }\n"
             "  - { name: y, op: mul, inputs: [s, g] }\n"
             "outputs: [y]\n",
             dt_names[dt], layout, N, C, H, W, N, C, H, W, C, C, W);
    snprintf(label, sizeof label, "%s %s [%d,%d,%d,%d]%s", dt_names[dt], layout, N, C, H, W,
             specialize ? "" : " unspecialized");
    pw_case c;
    case_open(&c, ctx, yaml, specialize);
    int contig = count(c.k.source, "contiguous along the innermost axis\n"),
        uniform = count(c.k.source, "one value per vector\n");
    if (contig != want_contig || uniform != want_uniform)
        fprintf(stderr, "%s: %d contiguous and %d uniform reads, want %d and %d\n%s\n", label, contig, uniform,
                want_contig, want_uniform, c.k.source);
    assert_int_equal(contig, want_contig);
    assert_int_equal(uniform, want_uniform);
    check_case(&c, label);
    case_close(&c);
}

static void rank1(fg_context *ctx, int dt, int n)
{
    char yaml[1024], label[96];
    snprintf(yaml, sizeof yaml,
             "graph: pw1\nseed: 6\ndtype: %s\ninputs:\n  - { name: x, shape: [%d] }\n  - { name: r, shape: [%d] }\n"
             "weights:\n  - { name: s, shape: [1] }\n"
             "nodes:\n"
             "  - { name: a, op: add, inputs: [x, r] }\n"
             "  - { name: m, op: mul, inputs: [a, s] }\n"
             "  - { name: y, op: relu, inputs: [m] }\n"
             "outputs: [y]\n",
             dt_names[dt], n, n);
    snprintf(label, sizeof label, "%s [%d]", dt_names[dt], n);
    pw_case c;
    case_open(&c, ctx, yaml, 1);
    check_case(&c, label);
    case_close(&c);
}

/* Rank 4: which reads are contiguous / once per vector follows from the
 * innermost axis (W for NCHW, C for NHWC) and the vector width (4 fp32, 8
 * fp16/bf16):
 *   NCHW, W % vec == 0: b and slope once per vector, g contiguous;
 * *   NHWC, C % vec == 0: b and slope contiguous, g (constant along C) once per vector;
 *   innermost axis not a multiple: everything per element (x, r vectors). */
static void test_rank4(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    for (int dt = 0; dt < 3; dt++) {
        int vec = dt == 0 ? 4 : 8;
        rank4(ctx, dt, "NCHW", 2, 8, 3, 8, 1, 1, 2);
        rank4(ctx, dt, "NHWC", 2, 8, 3, 8, 1, 2, 1);
        rank4(ctx, dt, "NCHW", 1, 7, 3, 5, 1, 0, 0);   /* 105 elements: a tail */
        rank4(ctx, dt, "NHWC", 1, 7, 3, 5, 1, 0, 0);
        rank4(ctx, dt, "NCHW", 1, 12, 1, 12, 1, 12 % vec ? 0 : 1, 12 % vec ? 0 : 2);
        rank4(ctx, dt, "NHWC", 1, 12, 1, 12, 1, 12 % vec ? 0 : 2, 12 % vec ? 0 : 1);
    }
    fg_context_free(ctx);
}

static void test_rank1(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    static const int sizes[] = {1, 7, 13, 4096, 4097};
    for (int dt = 0; dt < 3; dt++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            rank1(ctx, dt, sizes[i]);
    fg_context_free(ctx);
}

static void test_unspecialized(void **state)
{
    (void)state;
    fg_context *ctx = tu_ctx_shipped();
    rank4(ctx, 1, "NHWC", 2, 8, 3, 8, 0, 2, 1);
    rank4(ctx, 0, "NCHW", 1, 3, 5, 8, 0, 1, 2);
    fg_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank1),
        cmocka_unit_test(test_rank4),
        cmocka_unit_test(test_unspecialized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
