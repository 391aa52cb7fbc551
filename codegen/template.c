/*
 * template.c -- the template registry (contract in template.h): the
 * built-in templates, the generic capability checks, candidate lists, and
 * the `template:` documents of rules directories that register variants.
 */
#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "emit_impl.h"
#include "emit_ops.h"
#include "expr.h"
#include "kind.h"
#include "load.h"
#include "yaml_doc.h"

#define KIND(k) (1u << (k))
#define ALL_DTYPES ((1u << FG_DTYPE_COUNT) - 1)
#define ALL_LAYOUTS ((1u << FG_LAYOUT_COUNT) - 1)
#define HALF_DTYPES ((1u << FG_DTYPE_F16) | (1u << FG_DTYPE_BF16))

/* Tensor parameters a kernel may take: CUDA's 4 KiB of parameters hold far
 * more, but the executor packs slots per launch, so keep it modest. */
#define TENSOR_LIMIT 32

static const char *const tile_threads[] = {"threads", NULL};
static const char *const tile_conv[] = {"threads", "tile_k", NULL};
static const char *const tile_gemm[] = {"tile_m", "tile_n", "tile_k", NULL};
static const char *const tile_conv_tc[] = {"tile_m", "tile_n", "split_k", NULL};
static const char *const tile_gemm_tc[] = {"tile_m", "tile_n", "stages", "split_k", NULL};
static const char *const tile_gemv[] = {"split_k", NULL};
static const char *const tile_gemm_wgmma[] = {"tile_n", "stages", NULL};
static const char *const tile_none[] = {NULL};

#define BUILTIN(name_, family_, kinds_, dtypes_, prio_, tiles_, check_, emit_, summary_)                        \
    {.name = (name_), .family = (family_), .kinds = (kinds_), .dtypes = (dtypes_), .layouts = ALL_LAYOUTS,      \
     .priority = (prio_), .max_nodes = FG_MAX_GROUP_NODES, .max_epilogue = FG_MAX_EPILOGUE,                    \
     .max_tensors = TENSOR_LIMIT, .tile_keys = (tiles_), .check = (check_), .emit = (emit_), .summary = (summary_)}

static const fg_template builtins[] = {
    BUILTIN("pointwise", "pointwise", KIND(FG_OPK_POINTWISE) | KIND(FG_OPK_BATCH_NORM) | KIND(FG_OPK_FLATTEN),
            ALL_DTYPES, 0, tile_threads, fg_check_pointwise, fg_emit_pointwise,
            "element-wise chain (or flatten), one thread per element, 4-wide when inputs align"),
    BUILTIN("conv2d", "conv2d", KIND(FG_OPK_CONV2D), ALL_DTYPES, 0, tile_conv, fg_check_conv2d, fg_emit_conv2d,
            "direct convolution, weight tiles staged in shared memory; any groups, stride, padding, dilation"),
    BUILTIN("conv2d_depthwise", "conv2d", KIND(FG_OPK_CONV2D), ALL_DTYPES, 10, tile_threads,
            fg_check_conv2d_depthwise, fg_emit_conv2d,
            "depthwise convolution (one input channel per group), one thread per output element"),
    BUILTIN("conv2d_tc", "conv2d", KIND(FG_OPK_CONV2D), ALL_DTYPES, 20, tile_conv_tc, fg_check_conv2d_tc,
            fg_emit_conv2d_tc, "NHWC implicit-GEMM convolution on tensor cores, groups 1: fp16/bf16 (C % 8 == 0), "
            "fp32 with precision tf32 (C % 4 == 0); tile and split-K chosen per shape"),
    BUILTIN("conv2d_wgmma", "conv2d", KIND(FG_OPK_CONV2D), HALF_DTYPES | (1u << FG_DTYPE_F32), 30, tile_gemm_wgmma,
            fg_check_conv2d_wgmma, fg_emit_conv2d_wgmma,
            "NHWC convolution (stride 1, groups 1; 1x1, or R x S with the output as large as the input) as an "
            "implicit GEMM on Hopper (sm_90a): gemm_wgmma's kernel with the conv's epilogue; fp16/bf16, fp32 with "
            "precision tf32, C and K multiples of 8, large shapes"),
    BUILTIN("gemm", "gemm", KIND(FG_OPK_MATMUL), 1u << FG_DTYPE_F32, 0, tile_gemm, fg_check_gemm, fg_emit_gemm,
            "fp32 GEMM on shared-memory tiles (SIMT)"),
    BUILTIN("gemm_tc", "gemm", KIND(FG_OPK_MATMUL), HALF_DTYPES | (1u << FG_DTYPE_F32), 10, tile_gemm_tc,
            fg_check_gemm_tc, fg_emit_gemm,
            "GEMM on tensor cores: fp16/bf16 (mma m16n8k16), fp32 with precision tf32 (m16n8k8); ldmatrix, 3-4 "
            "stage cp.async pipeline, fp32 accumulation"),
    BUILTIN("gemm_tc_splitk", "gemm", KIND(FG_OPK_MATMUL), HALF_DTYPES | (1u << FG_DTYPE_F32), 15, tile_gemm_tc,
            fg_check_gemm_tc_splitk, fg_emit_gemm,
            "gemm_tc with the reduction split across blocks (M <= 16, or too few tiles to fill the SMs); "
            "deterministic fixed-order sum in a workspace, epilogue once"),
    BUILTIN("gemm_wgmma", "gemm", KIND(FG_OPK_MATMUL), HALF_DTYPES | (1u << FG_DTYPE_F32), 20, tile_gemm_wgmma,
            fg_check_gemm_wgmma, fg_emit_gemm,
            "GEMM on Hopper (sm_90a): wgmma from 128B-swizzled shared memory, TMA loads into a 4-stage mbarrier "
            "ring, a producer and two consumer warpgroups; fp16/bf16, fp32 with precision tf32 (B stored [N, K]), "
            "K and N multiples of 8, large shapes"),
    BUILTIN("gemv", "gemm", KIND(FG_OPK_MATMUL), 1u << FG_DTYPE_F32, 12, tile_gemv, fg_check_gemv, fg_emit_gemm,
            "exact fp32 GEMV / small-M GEMM (M <= 16): a block per column slice, K split across warps and, when "
            "the slices leave SMs idle, across blocks; fixed-order sums, epilogue once"),
    BUILTIN("gemm_softmax", "gemm_softmax", KIND(FG_OPK_MATMUL), HALF_DTYPES | (1u << FG_DTYPE_F32), 0, tile_none,
            fg_check_gemm_softmax, fg_emit_gemm_softmax,
            "matmul, element-wise epilogue and softmax over the rows (N <= 1024) in one kernel: 16 whole rows per "
            "block in registers; fp16/bf16 mma m16n8k16, exact fp32 SIMT"),
    BUILTIN("pool2d", "pool2d", KIND(FG_OPK_POOL2D) | KIND(FG_OPK_GLOBAL_POOL), ALL_DTYPES, 0, tile_threads,
            fg_check_pool2d, fg_emit_pool2d, "max / average pooling and global average pooling"),
    BUILTIN("copy", "copy", KIND(FG_OPK_RESHAPE) | KIND(FG_OPK_TRANSPOSE) | KIND(FG_OPK_CONCAT), ALL_DTYPES, 0,
            tile_threads, fg_check_copy, fg_emit_copy,
            "re-indexing copy (reshape, transpose, concat), one thread per output element"),
    BUILTIN("softmax", "softmax", KIND(FG_OPK_SOFTMAX), ALL_DTYPES, 0, tile_threads, fg_check_softmax,
            fg_emit_softmax, "softmax over rows, one block per row: max, sum of exp, normalize (4-wide loads on "
            "contiguous rows)"),
    BUILTIN("lrn", "lrn", KIND(FG_OPK_LRN), ALL_DTYPES, 0, tile_threads, fg_check_lrn, fg_emit_lrn,
            "local response normalization across channels, one thread per output element"),
    BUILTIN("reduce", "reduce", KIND(FG_OPK_REDUCE), ALL_DTYPES, 0, tile_threads, fg_check_reduce, fg_emit_reduce,
            "reduction over any axes (sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp): a "
            "thread, a warp or a block per output"),
};

/* The built-ins' --explain descriptions (a designated field kept out of the
 * BUILTIN macro, which every row shares). */
static void (*builtin_describe(const fg_template *t))(const fg_tcand *, char *, size_t)
{
    return strcmp(t->name, "conv2d_tc") == 0        ? fg_conv2d_tc_describe
           : strcmp(t->name, "gemm_tc") == 0        ? fg_gemm_tc_describe
           : strcmp(t->name, "gemm_tc_splitk") == 0 ? fg_gemm_tc_splitk_describe
           : strcmp(t->name, "gemv") == 0           ? fg_gemv_describe
           : strcmp(t->name, "gemm_softmax") == 0   ? fg_gemm_softmax_describe
           : strcmp(t->name, "gemm_wgmma") == 0     ? fg_gemm_wgmma_describe
           : strcmp(t->name, "conv2d_wgmma") == 0   ? fg_gemm_wgmma_describe
                                                    : NULL;
}

void fg_template_describe(const fg_template *t, const fg_tcand *c, char *buf, size_t size)
{
    const fg_template *b = fg_template_base(t);
    void (*fn)(const fg_tcand *, char *, size_t) = b->describe ? b->describe : builtin_describe(b);
    buf[0] = 0;
    if (fn)
        fn(c, buf, size);
}

/* ---- lookup ---------------------------------------------------------------- */

int fg_template_count(const fg_context *ctx) { return (int)FG_COUNTOF(builtins) + (ctx ? ctx->ntemplates : 0); }

const fg_template *fg_template_at(const fg_context *ctx, int i)
{
    if (i < 0)
        return NULL;
    if (i < (int)FG_COUNTOF(builtins))
        return &builtins[i];
    i -= (int)FG_COUNTOF(builtins);
    return ctx && i < ctx->ntemplates ? ctx->templates[i] : NULL;
}

const fg_template *fg_template_find(const fg_context *ctx, const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0, n = fg_template_count(ctx); i < n; i++)
        if (strcmp(fg_template_at(ctx, i)->name, name) == 0)
            return fg_template_at(ctx, i);
    return NULL;
}

int fg_template_known(const fg_context *ctx, const char *name)
{
    for (int i = 0, n = fg_template_count(ctx); i < n; i++) {
        const fg_template *t = fg_template_at(ctx, i);
        if (strcmp(t->name, name) == 0 || strcmp(t->family, name) == 0)
            return 1;
    }
    return 0;
}

const char **fg_template_names(const fg_context *ctx, int *n)
{
    int cnt = fg_template_count(ctx);
    const char **v = fg_xmalloc(sizeof *v * (size_t)(cnt + 1));
    int k = 0;
    for (int i = 0; i < cnt; i++)
        v[k++] = fg_template_at(ctx, i)->name;   /* every family is also a template's name */
    *n = k;
    return v;
}

int fg_template_candidates(const fg_context *ctx, const char *rule_template, fg_op_kind k, const fg_template **out,
                           int max)
{
    int n = 0;
    const fg_template *exact = NULL;
    int is_family = 0;
    for (int i = 0, cnt = fg_template_count(ctx); i < cnt; i++) {
        const fg_template *t = fg_template_at(ctx, i);
        if (rule_template && strcmp(t->family, rule_template) == 0)
            is_family = 1;
        if (rule_template && strcmp(t->name, rule_template) == 0)
            exact = t;
    }
    for (int i = 0, cnt = fg_template_count(ctx); i < cnt && n < max; i++) {
        const fg_template *t = fg_template_at(ctx, i);
        if (!(t->kinds & KIND(k)))
            continue;
        if (rule_template && (is_family ? strcmp(t->family, rule_template) != 0 : t != exact))
            continue;
        out[n++] = t;
    }
    return n;
}

/* ---- checks ------------------------------------------------------------------ */

static void mask_text(unsigned mask, int count, const char *(*name)(int), char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < count && at < size; i++)
        if (mask & (1u << i))
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? ", " : "", name(i));
}
static const char *dtype_i(int i) { return fg_dtype_name((fg_dtype)i); }
static const char *layout_i(int i) { return fg_layout_name((fg_layout)i); }

int fg_template_check(const fg_template *t, const fg_tcand *c, char *why, size_t whysz)
{
    const fg_graph *g = c->g;
    const fg_node *main = &g->nodes[c->main_node];
    const fg_tensor *out = &g->tensors[g->nodes[c->nodes[c->nnodes - 1]].output];
    char list[96];
    if (!(t->kinds & KIND(main->op->kind))) {
        snprintf(why, whysz, "does not compute %s nodes (%s is one)", fg_op_kind_name(main->op->kind), main->name);
        return 0;
    }
    if (!(t->dtypes & (1u << out->dtype))) {
        mask_text(t->dtypes, FG_DTYPE_COUNT, dtype_i, list, sizeof list);
        snprintf(why, whysz, "dtype %s (takes %s)", fg_dtype_name(out->dtype), list);
        return 0;
    }
    if (out->rank == 4 && !(t->layouts & (1u << out->layout))) {
        mask_text(t->layouts, FG_LAYOUT_COUNT, layout_i, list, sizeof list);
        snprintf(why, whysz, "layout %s (takes %s)", fg_layout_name(out->layout), list);
        return 0;
    }
    if (c->nnodes > t->max_nodes) {
        snprintf(why, whysz, "%d nodes (at most %d)", c->nnodes, t->max_nodes);
        return 0;
    }
    if (c->nepi > t->max_epilogue) {
        snprintf(why, whysz, "%d epilogue stages (at most %d)", c->nepi, t->max_epilogue);
        return 0;
    }
    if (c->ntensors > t->max_tensors) {
        snprintf(why, whysz, "%d tensor parameters (at most %d)", c->ntensors, t->max_tensors);
        return 0;
    }
    const fg_template *b = fg_template_base(t);
    if (b->check && !b->check(c, why, whysz))
        return 0;
    if (t->where) {
        double vals[FG_KIND_MAX_VARS] = {0};
        int n = fg_kind(main->op->kind)->vars(g, c->main_node, vals);
        if (n == 0 || fg_expr_eval(t->where, vals) == 0.0) {
            snprintf(why, whysz, "where \"%s\" is false", t->where_src);
            return 0;
        }
    }
    return 1;
}

/* ---- registered variants --------------------------------------------------------- */

static const char *const template_keys[] = {"template", "base", "where", "priority", "dtypes", "layouts"};

static unsigned parse_mask(fg_context *ctx, const fg_ynode *v, const char *what, const char *(*name)(int), int count)
{
    const fg_ynode *one[1] = {v};
    const fg_ynode *const *items = one;
    int n = 1;
    if (v->kind == FG_YNODE_SEQ) {
        items = (const fg_ynode *const *)v->items;
        n = v->n;
    }
    unsigned bits = 0;
    for (int i = 0; i < n; i++) {
        const char *s;
        if (!fg_yget_str(ctx, items[i], what, &s))
            continue;
        int found = -1;
        for (int k = 0; k < count && found < 0; k++)
            if (strcmp(s, name(k)) == 0)
                found = k;
        if (found < 0)
            fg_diag_error(ctx, FG_ERR_INPUT, items[i]->loc, "unknown %s '%s'", what, s);
        else
            bits |= 1u << found;
    }
    return bits;
}

static int first_kind(unsigned kinds)
{
    for (int k = 0; k < FG_OPK_COUNT; k++)
        if (kinds & KIND(k))
            return k;
    return 0;
}

fg_status fg_template_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash)
{
    int errs0 = ctx->nerrors;
    fg_ycheck_keys(ctx, map, "a template", template_keys, (int)FG_COUNTOF(template_keys));
    fg_template *t = fg_xcalloc(1, sizeof *t);
    const char *name = NULL, *base = NULL;
    t->loc = fg_ymap_key(map, "template")->loc;
    t->file_hash = file_hash;
    if (fg_yget_name(ctx, fg_ymap_get(map, "template"), "template name", &name)) {
        if (fg_template_known(ctx, name))
            fg_diag_error(ctx, FG_ERR_INPUT, t->loc, "template '%s' is already defined", name);
        t->name = fg_intern(ctx, name);
    }
    const fg_ynode *v = fg_ymap_get(map, "base");
    const fg_template *b = NULL;
    if (!v) {
        fg_diag_error(ctx, FG_ERR_INPUT, t->loc, "template '%s' has no `base` (the built-in template it renders)",
                      name ? name : "?");
    } else if (fg_yget_name(ctx, v, "base", &base)) {
        for (size_t i = 0; i < FG_COUNTOF(builtins) && !b; i++)
            if (strcmp(builtins[i].name, base) == 0)
                b = &builtins[i];
        if (!b) {
            const char *cands[FG_COUNTOF(builtins)];
            for (size_t i = 0; i < FG_COUNTOF(builtins); i++)
                cands[i] = builtins[i].name;
            const char *sug = fg_suggest(base, cands, (int)FG_COUNTOF(builtins));
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown base template '%s'%s%s%s", base,
                          sug ? " (did you mean '" : " (a base is one of the built-in templates)", sug ? sug : "",
                          sug ? "'?)" : "");
        }
    }
    if (b) {
        *t = (fg_template){.name = t->name, .family = b->family, .kinds = b->kinds, .dtypes = b->dtypes,
                           .layouts = b->layouts, .priority = b->priority, .max_nodes = b->max_nodes,
                           .max_epilogue = b->max_epilogue, .max_tensors = b->max_tensors, .tile_keys = b->tile_keys,
                           .check = NULL, .emit = b->emit, .summary = b->summary, .base = b, .loc = t->loc,
                           .file_hash = file_hash};
        int64_t prio;
        if ((v = fg_ymap_get(map, "priority")) && fg_yget_int(ctx, v, "priority", &prio)) {
            if (prio < -1000000 || prio > 1000000)
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "priority %lld is out of range", (long long)prio);
            t->priority = (int)prio;
        }
        if ((v = fg_ymap_get(map, "dtypes")))
            t->dtypes &= parse_mask(ctx, v, "dtype", dtype_i, FG_DTYPE_COUNT);
        if ((v = fg_ymap_get(map, "layouts")))
            t->layouts &= parse_mask(ctx, v, "layout", layout_i, FG_LAYOUT_COUNT);
        const char *src;
        if ((v = fg_ymap_get(map, "where")) && fg_yget_str(ctx, v, "where", &src)) {
            const fg_kind_info *ki = fg_kind((fg_op_kind)first_kind(b->kinds));
            int nv = 0;
            while (ki->var_names[nv])
                nv++;
            t->where = fg_expr_parse(ctx, src, fg_ynode_text_loc(v), ki->var_names, nv);
            t->where_src = fg_intern(ctx, src);
        }
    }
    if (ctx->nerrors != errs0 || !t->name) {
        fg_expr_free(t->where);
        free(t);
        return FG_ERR_INPUT;
    }
    fg_ctx_on_free(ctx, fg_templates_free);
    *FG_PUSH(ctx->templates, ctx->ntemplates, ctx->templates_cap) = t;
    return FG_OK;
}

void fg_templates_free(fg_context *ctx)
{
    for (int i = 0; i < ctx->ntemplates; i++) {
        fg_expr_free(ctx->templates[i]->where);
        free(ctx->templates[i]);
    }
    free(ctx->templates);
    ctx->templates = NULL;
    ctx->ntemplates = ctx->templates_cap = 0;
}
