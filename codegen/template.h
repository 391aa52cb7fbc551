/*
 * template.h -- the template registry: the kernel templates that can run a
 * fused group, read by the rule loader (names a rule may give), the planner
 * (capability checks before a group is committed, then selection), the
 * emitter (the row's own emitter renders the source) and the docs.
 *
 * A template is one record (fg_template), a row of its family file's table:
 * codegen/emit_<family>.c holds the rows with everything about them -- the
 * check, the --explain text, the emitter, capabilities (input maps, the arch
 * it needs), the tile keys a hook may set with their ranges -- and declares
 * the table with FG_TEMPLATE_FAMILY.  The build gathers the declarations
 * (cmake/families.cmake); no other file names a template.
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

/* A key a rule's `params:` hook may set, with the values the template takes.
 * The registry checks a hook's value against it (fg_template_tile_check), so
 * an emitter sees only values in range; conditions that depend on the shape
 * (a tile's shared memory, a split no larger than the reduction) stay the
 * emitter's. */
typedef struct fg_tile_key {
    const char *name;
    int64_t min, max;          /* the value lies in min..max */
    int64_t step;              /* and is a multiple of step (0: any) */
    const int64_t *values;     /* or, when not NULL, is one of these (0-terminated) */
} fg_tile_key;

/* A template file a registered family brings with it (the built-ins' are
 * embedded from templates/). */
typedef struct fg_template_source {
    const char *name;          /* the name its emitter gives em->template_file, e.g. "affine.cuh" */
    const char *text;
} fg_template_source;

/* One kernel template: a row of its family file's table (emit_<family>.c),
 * or a variant a rules directory registers (fg_template_load). */
typedef struct fg_template {
    const char *name;
    const char *family;
    int order;                     /* built-ins: position in the registry (listings, --explain, equal
                                      priorities); unique */
    unsigned kinds;                /* kinds of main node it computes: bit (1u << fg_op_kind) */
    unsigned dtypes, layouts;      /* bit (1u << fg_dtype), bit (1u << fg_layout) */
    int priority;                  /* selection: highest accepted wins */
    int max_nodes;                 /* nodes in the group */
    int max_epilogue;              /* epilogue stages */
    int max_tensors;               /* tensor parameters of the kernel */
    const fg_tile_key *tiles;      /* what a `params:` hook may set (ends with a NULL name), or NULL */
    /* The target arch it needs: arch_ok(arch) is nonzero for the archs it
     * compiles for (NULL: any); arch_needs says what, as "wgmma needs
     * sm_90", arch_hint the arch to set when none is known ("sm_90"). */
    int (*arch_ok)(const char *arch);
    const char *arch_needs, *arch_hint;
    /* Input maps (index_map.h): nonzero when the template reads its main
     * input element by element through the generated off_x; else
     * map_refusal says why not (NULL: it reads no input through off_x). */
    int input_map;
    const char *map_refusal;
    int owns_last;                 /* the group's last owns_last nodes are computed by the template
                                      (gemm_softmax's softmax: 1; attention's softmax and P V: 2), not
                                      epilogue stages */
    /* The count of last nodes the template computes in group grp of g when
     * it depends on the group (attention: 3 with a nan_to_zero of the
     * softmax), or NULL: owns_last. */
    int (*owned)(const fg_graph *g, const struct fg_group *grp);
    fg_template_check_fn check;    /* the family's own constraints, or NULL */
    /* The default tile / split choice for an accepted candidate as one line
     * for --explain ("" when there is nothing to say), or NULL. */
    void (*describe)(const fg_tcand *c, char *buf, size_t size);
    fg_status (*emit)(struct fg_emitter *em);
    const char *summary;           /* one line for `fusegen rules templates` and the docs */
    const fg_template_source *sources;   /* its own template files (ends with a NULL name), or NULL: the
                                            embedded ones */
    /* registered variants (NULL / zero for built-ins) */
    const struct fg_template *base;   /* the built-in whose source it renders (built-ins: NULL) */
    struct fg_expr *where;            /* over fg_kind(first kind)->var_names */
    const char *where_src;
    fg_loc loc;
    uint64_t file_hash;
} fg_template;

/* A family file's templates.  Each codegen/emit_<family>.c declares its table
 * with FG_TEMPLATE_FAMILY(name, rows); the build gathers the declarations
 * (cmake/families.cmake) into the registry's list of built-in families, so
 * adding a family edits no other source file.  A program (or a test) may
 * add a family of its own to one context with fg_template_family_register. */
typedef struct fg_template_family {
    const char *name;
    const fg_template *templates;
    int ntemplates;
} fg_template_family;

#define FG_TEMPLATE_FAMILY(name_, rows_)                                                                             \
    const fg_template_family fg_family_##name_ = {.name = #name_, .templates = (rows_),                             \
                                                  .ntemplates = (int)(sizeof(rows_) / sizeof((rows_)[0]))}

/* The defaults of a built-in row: every layout, the group limits of ir.h,
 * the executor's tensor-parameter limit. */
#define FG_TEMPLATE_LIMITS                                                                                            \
    .layouts = (1u << FG_LAYOUT_COUNT) - 1, .max_nodes = FG_MAX_GROUP_NODES, .max_epilogue = FG_MAX_EPILOGUE,          \
    .max_tensors = FG_TEMPLATE_TENSOR_LIMIT
/* Tensor parameters a kernel may take: CUDA's 4 KiB of parameters hold far
 * more, but the executor packs slots per launch, so keep it modest. */
#define FG_TEMPLATE_TENSOR_LIMIT 32
/* Element types a row serves: the float types (what arithmetic templates
 * take), the 16-bit ones, and every type (integer and bool included: the
 * element-wise and data-movement families). */
#define FG_DTYPES_FLOAT ((1u << FG_DTYPE_F32) | (1u << FG_DTYPE_F16) | (1u << FG_DTYPE_BF16))
#define FG_DTYPES_ANY ((1u << FG_DTYPE_COUNT) - 1)
#define FG_DTYPES_HALF ((1u << FG_DTYPE_F16) | (1u << FG_DTYPE_BF16))
/* The `threads` key most families take: a multiple of 32 in 32..1024. */
extern const fg_tile_key fg_tile_threads[];

/* Adds family f's templates to ctx, after the built-ins and before rules
 * directories' variants: they are candidates like the built-ins and may be
 * a variant's base.  f (and what its rows point at) must outlive ctx.  Errors
 * when a name is taken or a row is malformed (no emitter, no kinds). */
fg_status fg_template_family_register(fg_context *ctx, const fg_template_family *f);

/* Checks value v that a tile hook gave key `key` of template t against the
 * key's declared range: FG_OK, or FG_ERR_HOOK with "tile hook: key = v (want
 * ...)" in msg; FG_ERR_INTERNAL when t declares no such key. */
fg_status fg_template_tile_check(const fg_template *t, const char *key, int64_t v, char *msg, size_t msgsz);

/* The text of template file `name` for template t: t's (its base's) own
 * sources, else the embedded templates/ file; NULL when neither has it. */
const char *fg_template_source_text(const fg_template *t, const char *name);

/* The built-in a template renders with: t->base, or t itself. */
static inline const fg_template *fg_template_base(const fg_template *t) { return t->base ? t->base : t; }
/* The last nodes of group grp that template t computes (fg_template.owned). */
static inline int fg_template_owned(const fg_template *t, const fg_graph *g, const struct fg_group *grp)
{
    const fg_template *b = fg_template_base(t);
    return b->owned ? b->owned(g, grp) : b->owns_last;
}

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

/* Nonzero when template t (its base) reads its main input element by element
 * through the generated off_x and may so take an input map (index_map.h);
 * else 0 with the reason in why. */
int fg_template_input_map_ok(const fg_template *t, char *why, size_t whysz);

/* The default tile / split choice of template t for accepted candidate c,
 * for --explain; "" when the template has nothing to say. */
void fg_template_describe(const fg_template *t, const fg_tcand *c, char *buf, size_t size);

/* Loads one `template:` document (a registered variant) into the context. */
fg_status fg_template_load(fg_context *ctx, const struct fg_ynode *map, uint64_t file_hash);
/* Frees the context's registered templates (the teardown fg_template_load registers). */
void fg_templates_free(fg_context *ctx);


#endif /* FG_TEMPLATE_H */
