/*
 * template.h -- the template registry: one table of the kernel templates
 * that can run a fused group, read by the rule loader (names a rule may
 * give), the planner (capability checks before a group is committed, then
 * selection), the emitter (which family renders the source) and the docs.
 *
 * A template has a name and belongs to a family ("conv2d" holds the direct
 * convolution `conv2d` and `conv2d_depthwise`; "gemm" holds `gemm` and
 * `gemm_tc`).  A rule's `template:` names a family (any of its templates) or
 * one template; without one, every template that computes the group's main
 * node may run it.  Each candidate's check(group) -> reason is side-effect
 * free; among the templates that accept, the one with the highest priority
 * wins (then registry order), unless the rule's `select:` hook picks another.
 *
 * Rules directories register variants of the built-in templates with
 * `template:` documents (docs/rules.md): a name, a built-in `base` whose
 * source it renders, a `where` constraint over the main node's capability
 * variables (kind.h) and a priority.  They add constraints; the source is
 * always the base's, so a rules directory never supplies kernel text.
 */
#ifndef FG_TEMPLATE_H
#define FG_TEMPLATE_H

#include <stddef.h>

#include "arch.h"
#include "ir.h"

struct fg_emitter;
struct fg_expr;
struct fg_ynode;

/* A candidate group as the planner sees it before committing it. */
typedef struct fg_tcand {
    const fg_graph *g;
    const fg_rule *rule;       /* NULL: a lone node */
    int nnodes;
    const int *nodes;          /* chain order */
    int anchor;                /* node the template computes (conv, matmul, pool), or -1 */
    int main_node;             /* anchor, else the first node not folded */
    int nepi;                  /* epilogue stages, the anchor's own bias included (an upper bound) */
    int ntensors;              /* distinct tensors the kernel reads or writes (an upper bound) */
    const char *arch;          /* the target arch (fg_target_arch), or NULL: unknown */
} fg_tcand;

/* Accepts candidate c (1), or refuses it (0) with the reason in why. */
typedef int (*fg_template_check_fn)(const fg_tcand *c, char *why, size_t whysz);

typedef struct fg_template {
    const char *name;
    const char *family;
    unsigned kinds;                /* kinds of main node it computes: bit (1u << fg_op_kind) */
    unsigned dtypes, layouts;      /* bit (1u << fg_dtype), bit (1u << fg_layout) */
    int priority;                  /* selection: highest accepted wins */
    int max_nodes;                 /* nodes in the group */
    int max_epilogue;              /* epilogue stages */
    int max_tensors;               /* tensor parameters of the kernel */
    const char *const *tile_keys;  /* what a `params:` hook may set (NULL-terminated) */
    fg_template_check_fn check;    /* the family's own constraints, or NULL */
    /* The default tile / split choice for an accepted candidate as one line
     * for --explain ("" when there is nothing to say), or NULL. */
    void (*describe)(const fg_tcand *c, char *buf, size_t size);
    fg_status (*emit)(struct fg_emitter *em);
    const char *summary;           /* one line for `fusegen rules templates` and the docs */
    /* registered variants (NULL / zero for built-ins) */
    const struct fg_template *base;   /* the built-in whose source it renders (built-ins: NULL) */
    struct fg_expr *where;            /* over fg_kind(first kind)->var_names */
    const char *where_src;
    fg_loc loc;
    uint64_t file_hash;
} fg_template;

/* The built-in a template renders with: t->base, or t itself. */
static inline const fg_template *fg_template_base(const fg_template *t) { return t->base ? t->base : t; }

/* Template by name (built-ins first, then the context's registered ones), or NULL. */
const fg_template *fg_template_find(const fg_context *ctx, const char *name);
/* Nonzero when name is a template or a family name. */
int fg_template_known(const fg_context *ctx, const char *name);
/* Every template and family name (for suggestions): malloc'd array, *n set. */
const char **fg_template_names(const fg_context *ctx, int *n);
/* All templates, built-ins then registered: count, and template i. */
int fg_template_count(const fg_context *ctx);
const fg_template *fg_template_at(const fg_context *ctx, int i);

/* Templates that may run a group whose main node has kind k, given a rule's
 * `template:` (a family or template name; NULL: any), in registry order.
 * Returns the count (at most max). */
int fg_template_candidates(const fg_context *ctx, const char *rule_template, fg_op_kind k, const fg_template **out,
                           int max);
/* Runs every check of template t on c: kind, dtype, layout, size limits, the
 * family's constraints, a registered variant's `where`.  1 = accepted. */
int fg_template_check(const fg_template *t, const fg_tcand *c, char *why, size_t whysz);

/* The default tile / split choice of template t for accepted candidate c,
 * for --explain; "" when the template has nothing to say. */
void fg_template_describe(const fg_template *t, const fg_tcand *c, char *buf, size_t size);

/* Loads one `template:` document (a registered variant) into the context. */
fg_status fg_template_load(fg_context *ctx, const struct fg_ynode *map, uint64_t file_hash);
/* Frees the context's registered templates (the teardown fg_template_load registers). */
void fg_templates_free(fg_context *ctx);

/* The families' own checks (emit_<family>.c). */
int fg_check_pointwise(const fg_tcand *c, char *why, size_t whysz);
int fg_check_conv2d(const fg_tcand *c, char *why, size_t whysz);
int fg_check_conv2d_depthwise(const fg_tcand *c, char *why, size_t whysz);
int fg_check_conv2d_tc(const fg_tcand *c, char *why, size_t whysz);
void fg_conv2d_tc_describe(const fg_tcand *c, char *buf, size_t size);
int fg_check_gemm(const fg_tcand *c, char *why, size_t whysz);
int fg_check_gemm_tc(const fg_tcand *c, char *why, size_t whysz);
int fg_check_gemm_tc_splitk(const fg_tcand *c, char *why, size_t whysz);
int fg_check_gemv(const fg_tcand *c, char *why, size_t whysz);
void fg_gemv_describe(const fg_tcand *c, char *buf, size_t size);
void fg_gemm_tc_describe(const fg_tcand *c, char *buf, size_t size);
void fg_gemm_tc_splitk_describe(const fg_tcand *c, char *buf, size_t size);
int fg_check_pool2d(const fg_tcand *c, char *why, size_t whysz);
/* gemm_softmax (emit_gemm_softmax.c): a matmul, its element-wise epilogue and
 * a softmax over its rows in one kernel; the emitter is declared here as it
 * belongs to no other family header. */
int fg_check_gemm_softmax(const fg_tcand *c, char *why, size_t whysz);
void fg_gemm_softmax_describe(const fg_tcand *c, char *buf, size_t size);
fg_status fg_emit_gemm_softmax(struct fg_emitter *em);
/* gemm_wgmma (emit_gemm_wgmma.c): Hopper wgmma + TMA + mbarrier, sm_90a; its
 * emitter is reached through fg_emit_gemm. */
int fg_check_gemm_wgmma(const fg_tcand *c, char *why, size_t whysz);
void fg_gemm_wgmma_describe(const fg_tcand *c, char *buf, size_t size);
fg_status fg_emit_gemm_wgmma(struct fg_emitter *em);
/* conv2d_wgmma (emit_gemm_wgmma.c): gemm_wgmma's kernel for 1x1, stride 1,
 * unpadded, groups 1 NHWC convolutions (a GEMM as stored); its --explain line
 * is fg_gemm_wgmma_describe's. */
int fg_check_conv2d_wgmma(const fg_tcand *c, char *why, size_t whysz);
fg_status fg_emit_conv2d_wgmma(struct fg_emitter *em);

#endif /* FG_TEMPLATE_H */
