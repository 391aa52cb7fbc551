/*
 * embed.c -- using fusegen from a C program: build one fused
 * conv2d + batch_norm + relu kernel from a specification, run it (on the GPU
 * when one is present, else on the CPU through emulation), and check the
 * result against a plain loop.  Prints OK and exits 0 on success.
 *
 * Build against an installed fusegen (CMake: find_package(fusegen), or
 * pkg-config: cc embed.c $(pkg-config --cflags --libs fusegen) -lm).
 * EMBED_RULES_DIR names the installed rules, unless $FUSEGEN_RULES is set;
 * without either the library's default (its installed rules) is used.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <fusegen.h>

enum { N = 1, C = 6, H = 9, W = 9, K = 8, R = 3, S = 3 };

static void fail_with(fg_context *ctx, const char *what, fg_status st)
{
    char buf[2048];
    fprintf(stderr, "embed: %s failed: %s\n", what, fg_status_name(st));
    for (int i = 0; i < fg_context_error_count(ctx); i++)
        fprintf(stderr, "  %s\n", fg_error_format(fg_context_error(ctx, i), buf, sizeof buf));
    fg_context_free(ctx);
    exit(1);
}

/* Deterministic values in [-1, 1). */
static float next_value(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void)
{
    static float x[N * C * H * W], w[K * C * R * S], y[N * K * H * W];
    float gamma[K], beta[K], mean[K], var[K];
    unsigned seed = 42;
    for (int i = 0; i < N * C * H * W; i++)
        x[i] = next_value(&seed);
    for (int i = 0; i < K * C * R * S; i++)
        w[i] = 0.3f * next_value(&seed);
    for (int k = 0; k < K; k++) {
        gamma[k] = 1.0f + 0.5f * next_value(&seed);
        beta[k] = 0.2f * next_value(&seed);
        mean[k] = 0.1f * next_value(&seed);
        var[k] = 1.0f + 0.5f * next_value(&seed);
    }

    fg_options opts = {0};
#ifdef EMBED_RULES_DIR
    if (!getenv("FUSEGEN_RULES"))   /* the environment wins, as for the library */
        opts.rules_dir = EMBED_RULES_DIR;
#endif
    fg_context *ctx;
    fg_status st = fg_context_init(&ctx, &opts);
    if (st)
        fail_with(ctx, "fg_context_init", st);

    fg_spec_op ops[] = {
        {"conv", "conv2d", "{ stride: [1, 1], padding: [1, 1] }"},
        {"bn", "batch_norm", "{ eps: 0.00001 }"},
        {"act", "relu", NULL},
    };
    fg_spec_weight weights[] = {
        {"conv.weight", 4, {K, C, R, S}, w},
        {"bn.gamma", 1, {K}, gamma},
        {"bn.beta", 1, {K}, beta},
        {"bn.mean", 1, {K}, mean},
        {"bn.var", 1, {K}, var},
    };
    fg_kernel_spec spec = {
        .template_name = "conv2d",
        .nops = 3,
        .ops = ops,
        .nweights = 5,
        .weights = weights,
        .dtype = FG_DTYPE_F32,
        .layout = FG_LAYOUT_NCHW,
        .rank = 4,
        .input_shape = {N, C, H, W},
        .compile = {.device = FG_DEVICE_AUTO},
    };
    fg_kernel_handle *kh;
    if ((st = fg_kernel_create(ctx, &spec, &kh)))
        fail_with(ctx, "fg_kernel_create", st);
    fg_exec *e = fg_kernel_exec(kh);
    printf("kernel %s on %s\n", fg_exec_kernel_name(e, 0), fg_device_name(fg_exec_device(e)));

    for (int i = 0; i < N * K * H * W; i++)
        y[i] = NAN;
    fg_binding b[] = {{"x", x}, {"y", y}};
    if ((st = fg_exec_run_host(e, b, 2)))
        fail_with(ctx, "fg_exec_run_host", st);

    /* The same computation as a plain loop, unfused, in double. */
    double max_err = 0, max_ref = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    double acc = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int ih = oh + r - 1, iw = ow + s - 1;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    acc += (double)x[((n * C + c) * H + ih) * W + iw] *
                                           w[((k * C + c) * R + r) * S + s];
                            }
                    double v = (acc - mean[k]) / sqrt(var[k] + 1e-5) * gamma[k] + beta[k];
                    v = v > 0 ? v : 0;
                    double got = y[((n * K + k) * H + oh) * W + ow];
                    double err = fabs(got - v);
                    if (!(err <= max_err))   /* NaN counts as the worst */
                        max_err = isnan(err) ? INFINITY : err;
                    if (fabs(v) > max_ref)
                        max_ref = fabs(v);
                }
    fg_kernel_handle_free(kh);
    fg_context_free(ctx);
    if (!(max_err <= 1e-4 * (max_ref > 1 ? max_ref : 1))) {
        fprintf(stderr, "embed: result differs from the loop: max abs error %g (max |y| %g)\n", max_err, max_ref);
        return 1;
    }
    printf("max abs error %.3g\nOK\n", max_err);
    return 0;
}
