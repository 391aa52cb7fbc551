/*
 * fuzz_emit.c -- fuzz target for planning and source emission: random valid
 * graphs through fg_plan_build and fg_emit_group with the shipped rules.
 *
 * Input: bytes that steer a small graph generator (a byte stream read left
 * to right; missing bytes read as 0).  The graph is a chain of 1 to 8 ops of
 * the shipped vocabulary (rules/ops.yaml, rules/pointwise.yaml): conv2d
 * (kernel 1/2/3/5, stride, padding, dilation, groups incl. depthwise, bias),
 * batch_norm, unary activations with attributes, prelu, add/sub/mul against
 * a weight (full, per-channel or broadcast) or an earlier tensor (residual),
 * max/avg pooling, global pooling, flatten, and on 2-D/3-D tensors matmul
 * and gemm (transposes, bias) and bias adds; small shapes (odd sizes and
 * channel counts on purpose), fp32/fp16/bf16, NCHW/NHWC; sometimes an
 * intermediate is a graph output too.  The generator keeps shapes valid, so
 * almost every input is a graph that loads.
 *
 * The property (the planner asks each template before committing a group,
 * so emission never fails after planning): when fg_graph_parse and
 * fg_plan_build succeed, fg_emit_group succeeds on every group, with a
 * non-empty source and kernel name; also the usual error-record contract of
 * each call (fz_check_errors).  A failure prints the generated graph.
 * Set FUSEGEN_FUZZ_VERBOSE=1 to print every graph and why it did not plan.
 */
#include "fuzz_common.h"

#include "context.h"
#include "emit.h"

#define RENEW 4096
#define MAX_STEPS 8
#define MAX_HIST (MAX_STEPS + 1)

static fg_context *g_ctx;
static int g_runs, g_verbose;

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

/* The next byte modulo m (0 once the input is used up). */
static unsigned take(reader *r, unsigned m)
{
    unsigned v = r->i < r->n ? r->p[r->i++] : 0;
    return m ? v % m : v;
}

static int pick(reader *r, const int *table, unsigned n) { return table[take(r, n)]; }

static const int k_channels[] = {1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 24, 32};
static const int k_spatial[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16};
static const char *const k_unary[] = {"relu", "leaky_relu", "relu6", "clip", "sigmoid", "tanh", "silu",
                                      "gelu", "gelu_tanh", "hardswish", "hardsigmoid", "elu", "softplus"};
static const char *const k_binary[] = {"add", "sub", "mul"};
static const char *const k_dtype[] = {"fp32", "fp16", "bf16"};
static const char *const k_layout[] = {"NCHW", "NHWC"};

/* A tensor of the chain so far. */
typedef struct tinfo {
    char name[16];
    int rank;
    int64_t d[4];
} tinfo;

typedef struct gen {
    reader r;
    fg_buf weights, nodes;
    int nweights, nnodes;
    tinfo hist[MAX_HIST];
    int nhist;
    tinfo cur;
} gen;

static void put_shape(fg_buf *b, const int64_t *d, int rank)
{
    fg_buf_put(b, "[");
    for (int i = 0; i < rank; i++)
        fg_buf_printf(b, "%s%lld", i ? ", " : "", (long long)d[i]);
    fg_buf_put(b, "]");
}

/* Declares a weight of the given shape; returns its name (static slot). */
static const char *weight(gen *g, const int64_t *d, int rank, const char *init)
{
    static char names[8][16];
    char *nm = names[g->nweights % 8];
    snprintf(nm, 16, "w%d", g->nweights++);
    fg_buf_printf(&g->weights, "  - { name: %s, shape: ", nm);
    put_shape(&g->weights, d, rank);
    if (init)
        fg_buf_printf(&g->weights, ", init: %s", init);
    fg_buf_put(&g->weights, " }\n");
    return nm;
}

/* Starts node text "  - { name: nK, op: OP, inputs: [" and names its output. */
static void node_begin(gen *g, const char *op)
{
    fg_buf_printf(&g->nodes, "  - { name: n%d, op: %s, inputs: [%s", g->nnodes, op, g->cur.name);
}

/* Ends the node: the chain's current tensor becomes its output, of shape d. */
static void node_end(gen *g, const char *attrs, const int64_t *d, int rank)
{
    fg_buf_printf(&g->nodes, "]%s%s%s }\n", attrs && *attrs ? ", attrs: { " : "", attrs ? attrs : "",
                  attrs && *attrs ? " }" : "");
    if (g->nhist < MAX_HIST)
        g->hist[g->nhist++] = g->cur;
    snprintf(g->cur.name, sizeof g->cur.name, "n%d", g->nnodes++);
    g->cur.rank = rank;
    memcpy(g->cur.d, d, sizeof g->cur.d);
}

static void op_unary(gen *g)
{
    const char *op = k_unary[take(&g->r, FG_COUNTOF(k_unary))];
    char attrs[96] = "";
    unsigned a = take(&g->r, 4);
    if (a && !strcmp(op, "leaky_relu"))
        snprintf(attrs, sizeof attrs, "alpha: %s", a == 1 ? "0.2" : a == 2 ? "-1.5" : "0");
    else if (a && !strcmp(op, "clip"))
        snprintf(attrs, sizeof attrs, "lo: %s, hi: %s", a == 1 ? "-1" : "0", a == 3 ? "-2" : "3.5");
    else if (a && !strcmp(op, "elu"))
        snprintf(attrs, sizeof attrs, "alpha: %s", a == 1 ? "0.5" : "2");
    node_begin(g, op);
    node_end(g, attrs, g->cur.d, g->cur.rank);
}

/* Another tensor of the chain with the current shape, or NULL. */
static const char *same_shape_earlier(gen *g)
{
    for (int i = g->nhist - 1; i >= 0; i--)
        if (g->hist[i].rank == g->cur.rank && !memcmp(g->hist[i].d, g->cur.d, sizeof g->cur.d))
            return g->hist[i].name;
    return NULL;
}

static void op_binary(gen *g)
{
    const char *op = k_binary[take(&g->r, 3)];
    unsigned how = take(&g->r, 4), swap = take(&g->r, 4) == 0;
    const char *other = how == 3 ? same_shape_earlier(g) : NULL;
    if (!other) {
        int64_t d[4] = {1, 1, 1, 1};
        int rank = g->cur.rank;
        memcpy(d, g->cur.d, sizeof d);
        if (how == 1 && rank == 4) {          /* per channel, broadcast as [1, C, 1, 1] */
            d[0] = d[2] = d[3] = 1;
        } else if (how == 2) {                /* trailing dimension only */
            d[0] = g->cur.d[rank - 1];
            rank = 1;
        }
        other = weight(g, d, rank, NULL);
    }
    char cur[16];
    memcpy(cur, g->cur.name, sizeof cur);
    /* Swapped operands: output dtype and layout come from input 0. */
    fg_buf_printf(&g->nodes, "  - { name: n%d, op: %s, inputs: [%s, %s", g->nnodes, op, swap ? other : cur,
                  swap ? cur : other);
    node_end(g, "", g->cur.d, g->cur.rank);
}

/* Output size of a convolution or pooling window; 0 when the window does
 * not fit (the numerator is negative: C division would round it to 0). */
static int64_t conv_out(int64_t in, int k, int s, int p, int d)
{
    int64_t num = in + 2 * p - (int64_t)d * (k - 1) - 1;
    return num < 0 ? 0 : num / s + 1;
}

static void op_conv(gen *g)
{
    int64_t n = g->cur.d[0], c = g->cur.d[1], h = g->cur.d[2], w = g->cur.d[3];
    static const int ks[] = {1, 2, 3, 5};
    int r = ks[take(&g->r, 4)], s = ks[take(&g->r, 4)];
    int stride = 1 + (int)take(&g->r, 2), dil = take(&g->r, 4) == 0 ? 2 : 1;
    int ph = (int)take(&g->r, 3), pw = (int)take(&g->r, 3);
    if (conv_out(h, r, stride, ph, dil) < 1 || conv_out(w, s, stride, pw, dil) < 1)
        r = s = 1, dil = 1;
    int64_t groups = 1, k = pick(&g->r, k_channels, FG_COUNTOF(k_channels));
    unsigned gsel = take(&g->r, 4);
    if (gsel == 1 && c > 1) {             /* depthwise, channel multiplier 1 or 2 */
        groups = c;
        k = c * (1 + (int64_t)take(&g->r, 2));
    } else if (gsel == 2) {               /* grouped: a divisor of c */
        for (int64_t q = c / 2; q > 1; q--)
            if (c % q == 0) {
                groups = q;
                break;
            }
        k = groups * (1 + (int64_t)take(&g->r, 3));
    }
    int64_t wd[4] = {k, c / groups, r, s};
    const char *wn = weight(g, wd, 4, NULL);
    const char *bn = NULL;
    if (take(&g->r, 2)) {
        int64_t bd[1] = {k};
        bn = weight(g, bd, 1, NULL);
    }
    char attrs[160];
    snprintf(attrs, sizeof attrs, "stride: [%d, %d], padding: [%d, %d], dilation: [%d, %d], groups: %lld", stride,
             stride, ph, pw, dil, dil, (long long)groups);
    node_begin(g, "conv2d");
    fg_buf_printf(&g->nodes, ", %s%s%s", wn, bn ? ", " : "", bn ? bn : "");
    int64_t od[4] = {n, k, conv_out(h, r, stride, ph, dil), conv_out(w, s, stride, pw, dil)};
    node_end(g, attrs, od, 4);
}

static void op_bn(gen *g)
{
    int64_t d[1] = {g->cur.d[1]};
    const char *gm = weight(g, d, 1, "positive");
    char gam[16], bet[16], mea[16];
    snprintf(gam, sizeof gam, "%s", gm);
    snprintf(bet, sizeof bet, "%s", weight(g, d, 1, NULL));
    snprintf(mea, sizeof mea, "%s", weight(g, d, 1, NULL));
    const char *var = weight(g, d, 1, "positive");
    node_begin(g, "batch_norm");
    fg_buf_printf(&g->nodes, ", %s, %s, %s, %s", gam, bet, mea, var);
    node_end(g, take(&g->r, 4) == 0 ? "eps: 0.001" : "", g->cur.d, 4);
}

static void op_prelu(gen *g)
{
    int64_t d[1] = {g->cur.d[1]};
    const char *sl = weight(g, d, 1, NULL);
    node_begin(g, "prelu");
    fg_buf_printf(&g->nodes, ", %s", sl);
    node_end(g, "", g->cur.d, 4);
}

static void op_pool(gen *g)
{
    const char *op = take(&g->r, 2) ? "max_pool2d" : "avg_pool2d";
    int k = 1 + (int)take(&g->r, 3), s = 1 + (int)take(&g->r, 2), p = (int)take(&g->r, 2);
    if (p > k / 2)
        p = k / 2;
    if (g->cur.d[2] + 2 * p < k || g->cur.d[3] + 2 * p < k)
        k = 1, p = 0;
    char attrs[96];
    snprintf(attrs, sizeof attrs, "kernel: [%d, %d], stride: [%d, %d], padding: [%d, %d]", k, k, s, s, p, p);
    int64_t od[4] = {g->cur.d[0], g->cur.d[1], conv_out(g->cur.d[2], k, s, p, 1), conv_out(g->cur.d[3], k, s, p, 1)};
    node_begin(g, op);
    node_end(g, attrs, od, 4);
}

static void op_matmul(gen *g, int gemm)
{
    int rank = g->cur.rank;
    int64_t m = g->cur.d[rank - 2], kk = g->cur.d[rank - 1];
    int ta = rank == 2 && take(&g->r, 8) == 0, tb = take(&g->r, 3) == 0;
    if (ta) {
        int64_t t = m;
        m = kk;
        kk = t;
    }
    int64_t nn = pick(&g->r, k_channels, FG_COUNTOF(k_channels));
    int64_t bd[2] = {tb ? nn : kk, tb ? kk : nn};
    const char *bw = weight(g, bd, 2, NULL);
    char bname[16];
    snprintf(bname, sizeof bname, "%s", bw);
    const char *bias = NULL;
    if (gemm && take(&g->r, 2)) {
        int64_t d1[1] = {nn};
        bias = weight(g, d1, 1, NULL);
    }
    char attrs[64] = "";
    if (ta || tb)
        snprintf(attrs, sizeof attrs, "%s%s%s", ta ? "trans_a: true" : "", ta && tb ? ", " : "",
                 tb ? "trans_b: true" : "");
    node_begin(g, gemm ? "gemm" : "matmul");
    fg_buf_printf(&g->nodes, ", %s%s%s", bname, bias ? ", " : "", bias ? bias : "");
    int64_t od[4] = {0};
    memcpy(od, g->cur.d, sizeof od);
    od[rank - 2] = m;
    od[rank - 1] = nn;
    node_end(g, attrs, od, rank);
}

/* Builds the graph text from the bytes; returns it (malloc'd). */
static char *generate(const uint8_t *data, size_t size)
{
    gen g;
    memset(&g, 0, sizeof g);
    g.r.p = data;
    g.r.n = size;
    unsigned seed = take(&g.r, 0), dtype = take(&g.r, 3), layout = take(&g.r, 2), start = take(&g.r, 4);
    snprintf(g.cur.name, sizeof g.cur.name, "x");
    if (start <= 1) {
        g.cur.rank = 4;
        g.cur.d[0] = 1 + take(&g.r, 2);
        g.cur.d[1] = pick(&g.r, k_channels, FG_COUNTOF(k_channels));
        g.cur.d[2] = pick(&g.r, k_spatial, FG_COUNTOF(k_spatial));
        g.cur.d[3] = pick(&g.r, k_spatial, FG_COUNTOF(k_spatial));
    } else {
        g.cur.rank = start == 2 ? 2 : 3;
        int i = 0;
        if (g.cur.rank == 3)
            g.cur.d[i++] = 1 + take(&g.r, 3);
        g.cur.d[i++] = pick(&g.r, k_spatial, FG_COUNTOF(k_spatial));
        g.cur.d[i++] = pick(&g.r, k_channels, FG_COUNTOF(k_channels));
    }
    tinfo input = g.cur;
    int steps = 1 + (int)take(&g.r, MAX_STEPS);
    char extra[16] = "";   /* an intermediate that is a graph output too */
    unsigned eo = take(&g.r, 4);
    for (int s = 0; s < steps; s++) {
        unsigned op = take(&g.r, 12);
        if (g.cur.rank == 4) {
            switch (op) {
            case 0: case 1: case 11: op_conv(&g); break;
            case 2: op_bn(&g); break;
            case 3: case 4: case 5: op_unary(&g); break;
            case 6: op_prelu(&g); break;
            case 7: case 10: op_binary(&g); break;
            case 8: op_pool(&g); break;
            case 9: {
                int64_t od[4] = {g.cur.d[0], g.cur.d[1], 1, 1};
                if (take(&g.r, 2)) {
                    node_begin(&g, "global_avg_pool");
                    node_end(&g, "", od, 4);
                } else {
                    od[1] = g.cur.d[1] * g.cur.d[2] * g.cur.d[3];
                    od[2] = od[3] = 0;
                    node_begin(&g, "flatten");
                    node_end(&g, "", od, 2);
                }
                break;
            }
            }
        } else {
            switch (op) {
            case 0: case 1: case 2: op_matmul(&g, 0); break;
            case 3: op_matmul(&g, 1); break;
            case 4: case 8: case 9: op_binary(&g); break;
            default: op_unary(&g); break;
            }
        }
        if (eo == 0 && s == steps / 2 && s < steps - 1)
            memcpy(extra, g.cur.name, sizeof extra);
    }
    fg_buf out = {0};
    fg_buf_printf(&out, "graph: fz\nseed: %u\ndtype: %s\nlayout: %s\ninputs:\n  - { name: x, shape: ", seed,
                  k_dtype[dtype], k_layout[layout]);
    put_shape(&out, input.d, input.rank);
    fg_buf_put(&out, " }\n");
    if (g.nweights) {
        fg_buf_put(&out, "weights:\n");
        fg_buf_putn(&out, g.weights.s, g.weights.len);
    }
    fg_buf_put(&out, "nodes:\n");
    fg_buf_putn(&out, g.nodes.s, g.nodes.len);
    fg_buf_printf(&out, "outputs: [%s", g.cur.name);
    if (extra[0])
        fg_buf_printf(&out, ", %s", extra);
    fg_buf_put(&out, "]\n");
    fg_buf_free(&g.weights);
    fg_buf_free(&g.nodes);
    return fg_buf_take(&out);
}

static void at_exit_free(void)
{
    fg_context_free(g_ctx);
    g_ctx = NULL;
}

static void new_context(void)
{
    fg_context_free(g_ctx);
    fg_options o = {0};
    o.no_rules = 1;
    if (fg_context_init(&g_ctx, &o) != FG_OK)
        FZ_FAIL("fg_context_init failed");
    g_ctx->quiet = 1;
    char rules[4096];
    snprintf(rules, sizeof rules, "%s/rules", fz_source_dir());
    if (fg_rules_load(g_ctx, rules) != FG_OK) {
        fz_dump_errors(g_ctx, 0);
        FZ_FAIL("the shipped rules in %s do not load", rules);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ctx) {
        unsetenv("FUSEGEN_RULES");
        const char *v = getenv("FUSEGEN_FUZZ_VERBOSE");
        g_verbose = v && *v && strcmp(v, "0") != 0;
        new_context();
        atexit(at_exit_free);
    }
    if (++g_runs % RENEW == 0)
        new_context();
    fg_context_clear_errors(g_ctx);
    unsigned flags = size ? data[0] : 0;
    char *text = generate(size ? data + 1 : data, size ? size - 1 : 0);
    if (g_verbose)
        fprintf(stderr, "---- graph\n%s", text);

    fg_graph *g = NULL;
    int e0 = fg_context_error_count(g_ctx);
    fg_status st = fg_graph_parse(g_ctx, "fuzz_emit.yaml", text, strlen(text), &g);
    fz_check_errors(g_ctx, st, e0, "fg_graph_parse", NULL, 0);
    if ((st == FG_OK) != (g != NULL))
        FZ_FAIL("fg_graph_parse returned %s and %s graph", fg_status_name(st), g ? "a" : "no");
    if (st != FG_OK) {
        if (g_verbose)
            fz_dump_errors(g_ctx, e0);
        free(text);
        return 0;
    }
    fg_plan *p = NULL;
    e0 = fg_context_error_count(g_ctx);
    st = fg_plan_build(g_ctx, g, &p);
    fz_check_errors(g_ctx, st, e0, "fg_plan_build", NULL, 0);
    if ((st == FG_OK) != (p != NULL))
        FZ_FAIL("fg_plan_build returned %s and %s plan", fg_status_name(st), p ? "a" : "no");
    if (st != FG_OK && g_verbose)
        fz_dump_errors(g_ctx, e0);
    if (st == FG_OK && g_verbose) {
        fprintf(stderr, "plan:");
        for (int i = 0; i < p->ngroups; i++)
            fprintf(stderr, " %s(%d)", p->groups[i].template_name ? p->groups[i].template_name : "-",
                    p->groups[i].nnodes);
        fputc('\n', stderr);
    }
    for (int i = 0; p && i < fg_plan_group_count(p); i++) {
        fg_emit_opts eo = {.specialize = (flags & 1) ? 0 : 1};
        fg_kernel k;
        memset(&k, 0, sizeof k);
        e0 = fg_context_error_count(g_ctx);
        st = fg_emit_group(g_ctx, p, i, &eo, &k);
        fz_check_errors(g_ctx, st, e0, "fg_emit_group", NULL, 0);
        if (st != FG_OK) {
            fprintf(stderr, "graph:\n%s", text);
            fz_dump_errors(g_ctx, e0);
            FZ_FAIL("fg_emit_group failed on group %d of %d after fg_plan_build succeeded (specialize=%d)", i,
                    fg_plan_group_count(p), eo.specialize);
        }
        if (!k.source || !k.source[0] || !k.name[0])
            FZ_FAIL("group %d: emission succeeded without a source or a kernel name", i);
        fg_kernel_free(&k);
    }
    fg_plan_free(p);
    fg_graph_free(g);
    free(text);
    return 0;
}
