/*
 * fusegen.h -- the public interface of fusegen, a rule-driven operator-fusion
 * code generator.  This is the only public header; everything is prefixed
 * fg_ / FG_.  Internals live beside their sources and are not exported.
 *
 * Life cycle:
 *   fg_context_init -> fg_rules_load -> fg_graph_load -> fg_plan_build
 *   -> fg_plan_compile -> fg_plan_run ... -> *_free.
 *
 * Errors: every function that can fail returns an fg_status (FG_OK == 0) and
 * records one or more fg_error entries (problem + location) on the context.
 * A loader reports every error it finds in a file, not only the first.
 */
#ifndef FUSEGEN_H
#define FUSEGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FG_BUILDING_LIBRARY)
#define FG_API __attribute__((visibility("default")))
#else
#define FG_API
#endif

#define FG_VERSION_MAJOR 0
#define FG_VERSION_MINOR 1
#define FG_VERSION_PATCH 0

/* Status codes.  Keep fg_status_name() in sync (static assert on the count). */
typedef enum fg_status {
    FG_OK = 0,
    FG_ERR_INPUT,        /* bad user input: rule, op or graph file (CLI exit 2) */
    FG_ERR_HOOK,         /* a Lua hook failed, looped or exceeded its budget (exit 2) */
    FG_ERR_IO,           /* a file could not be read or written */
    FG_ERR_NOMEM,        /* out of memory */
    FG_ERR_COMPILE,      /* NVRTC or the host compiler rejected generated source */
    FG_ERR_CUDA,         /* a CUDA driver call failed */
    FG_ERR_NO_DEVICE,    /* no CUDA driver or GPU present */
    FG_ERR_UNSUPPORTED,  /* valid request that this build cannot do */
    FG_ERR_CHECK,        /* numerical check against the reference failed */
    FG_ERR_INTERNAL,     /* a bug in fusegen */
    FG_STATUS_COUNT
} fg_status;

typedef enum fg_dtype {
    FG_DTYPE_F32 = 0,
    FG_DTYPE_F16,
    FG_DTYPE_BF16,
    FG_DTYPE_COUNT
} fg_dtype;

/* Storage layout of 4-D activations.  Logical shapes are always given in
 * NCHW order; the layout only says how elements are laid out in memory. */
typedef enum fg_layout {
    FG_LAYOUT_NCHW = 0,
    FG_LAYOUT_NHWC,
    FG_LAYOUT_COUNT
} fg_layout;

typedef enum fg_device {
    FG_DEVICE_AUTO = 0,  /* CUDA when a driver and GPU are present, else emulation */
    FG_DEVICE_CUDA,
    FG_DEVICE_EMU,       /* generated sources compiled for and run on the CPU */
    FG_DEVICE_COUNT
} fg_device;

/* One recorded problem.  file is NULL when the problem has no source location;
 * line/col are 1-based, 0 when unknown.  Strings are owned by the context. */
typedef struct fg_error {
    fg_status status;
    const char *file;
    int line;
    int col;
    const char *message;
} fg_error;

typedef struct fg_context fg_context;
typedef struct fg_graph fg_graph;
typedef struct fg_plan fg_plan;

/* Context options; a zeroed struct gives the defaults. */
typedef struct fg_options {
    const char *rules_dir;   /* NULL: $FUSEGEN_RULES, else the shipped rules */
    const char *cache_dir;   /* NULL: $FUSEGEN_CACHE_DIR, $XDG_CACHE_HOME/fusegen, ~/.cache/fusegen */
    fg_device device;        /* FG_DEVICE_AUTO by default */
    const char *arch;        /* "sm_90"; NULL: the GPU's, else $FUSEGEN_ARCH, else sm_90 */
    int jobs;                /* compile threads; 0: number of cores */
    int no_rules;            /* nonzero: do not load any rules at init */
} fg_options;

/* Names of enum values, for messages; never NULL. */
FG_API const char *fg_status_name(fg_status s);
FG_API const char *fg_dtype_name(fg_dtype t);
FG_API const char *fg_layout_name(fg_layout l);
FG_API const char *fg_device_name(fg_device d);
FG_API const char *fg_version(void);

/* Creates a context.  With opts->no_rules == 0 the rules directory is loaded;
 * on failure *out is still set (errors are readable) and must be freed. */
FG_API fg_status fg_context_init(fg_context **out, const fg_options *opts);
FG_API void fg_context_free(fg_context *ctx);

/* Recorded errors, oldest first.  fg_context_error returns NULL past the end. */
FG_API int fg_context_error_count(const fg_context *ctx);
FG_API const fg_error *fg_context_error(const fg_context *ctx, int i);
FG_API void fg_context_clear_errors(fg_context *ctx);
/* Formats error i as "file:line:col: error: message" into buf (always
 * NUL-terminated); returns buf. */
FG_API char *fg_error_format(const fg_error *e, char *buf, size_t size);

/* Loads every op definition (*.yaml with `op:`), fusion rule (`rule:`) and Lua
 * hook file (*.lua) of a directory into the context.  May be called more than
 * once (later directories add to the vocabulary; duplicate names are errors). */
FG_API fg_status fg_rules_load(fg_context *ctx, const char *dir);

/* Loads a model graph from a YAML file; infers shapes; generates weights that
 * the file does not give from the graph's seed. */
FG_API fg_status fg_graph_load(fg_context *ctx, const char *path, fg_graph **out);
/* Same, from YAML text in memory; name is used in error locations. */
FG_API fg_status fg_graph_parse(fg_context *ctx, const char *name, const char *text,
                                size_t len, fg_graph **out);
FG_API void fg_graph_free(fg_graph *g);

/* Matches the loaded rules on a graph and returns the fused groups, with the
 * graph's parameters folded (the input graph is not modified). */
FG_API fg_status fg_plan_build(fg_context *ctx, const fg_graph *g, fg_plan **out);
FG_API void fg_plan_free(fg_plan *p);
FG_API int fg_plan_group_count(const fg_plan *p);

#ifdef __cplusplus
}
#endif
#endif /* FUSEGEN_H */
