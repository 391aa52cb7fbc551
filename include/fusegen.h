/*
 * fusegen.h -- the public interface of fusegen, a rule-driven operator-fusion
 * code generator.  This is the only public header; everything is prefixed
 * fg_ / FG_.  Internals live beside their sources and are not exported.
 *
 * Life cycle:
 *   fg_context_init -> fg_rules_load -> fg_graph_load -> fg_plan_build
 *   -> fg_plan_compile -> fg_exec_run ... -> *_free.
 *
 * Errors: every function that can fail returns an fg_status (FG_OK == 0) and
 * records one or more fg_error entries (problem + location) on the context.
 * A loader reports every error it finds in a file, not only the first.
 * Arguments are validated: a NULL pointer, an enum value out of range, a
 * negative count or a shape whose size overflows is FG_ERR_INPUT (recorded
 * on the context when there is one), never a crash.  Getters given NULL
 * return 0, NULL or -1; *_free(NULL) does nothing.
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
    FG_ERR_NOMEM,        /* host memory ran out (CLI exit 2) while loading rules, a graph, a model or weights,
                            planning, compiling a plan (emission, placement, the weight block) or binding a run:
                            recorded as "out of memory while ...", nothing handed out, what the call had
                            allocated freed; buffers sized by tensors (the weights, the intermediates, staging)
                            that cannot be had: "out of host memory: N bytes for ..." at the tensor (device
                            memory: "out of GPU memory").  Still aborting on a real failure: small bookkeeping
                            in held regions -- obtaining, loading and launching kernels (the kernel cache,
                            the compilers, worker threads, the driver, the emulator) and the context's own
                            records (docs/architecture.md, "Out of memory") */
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
    FG_DTYPE_I64,    /* integer and boolean tensors: token ids, positions, masks */
    FG_DTYPE_I32,
    FG_DTYPE_BOOL,   /* one byte, 0 or 1 */
    FG_DTYPE_COUNT
} fg_dtype;

/* Storage layout of 4-D activations.  Logical shapes are always given in
 * NCHW order; the layout only says how elements are laid out in memory. */
typedef enum fg_layout {
    FG_LAYOUT_NCHW = 0,
    FG_LAYOUT_NHWC,
    FG_LAYOUT_COUNT
} fg_layout;

/* Arithmetic a plan may use for fp32 work (docs/graphs.md, "Precision").
 * EXACT (the default): fp32 stays fp32 everywhere.  TF32 (opt-in, like
 * torch.backends.cudnn.allow_tf32): fp32 convolutions and matrix products
 * may run on tensor cores with their operands rounded to TF32 (a 10-bit
 * mantissa, cvt.rna.tf32.f32) and fp32 accumulation.  fp16 / bf16 work is
 * not affected.  Keep fg_precision_name() in sync (static assert). */
typedef enum fg_precision {
    FG_PRECISION_EXACT = 0,
    FG_PRECISION_TF32,
    FG_PRECISION_COUNT
} fg_precision;

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

/* Severity of a logged message (fg_log_fn). */
typedef enum fg_log_level {
    FG_LOG_INFO = 0,
    FG_LOG_WARNING,
    FG_LOG_LEVEL_COUNT
} fg_log_level;

/* Receives each warning as one formatted line without a newline
 * ("rules/x.yaml:3:5: warning: ..."), from any thread that reports one; it
 * must not call back into the context.  The default writes the line to
 * stderr unless $FUSEGEN_QUIET is set. */
typedef void (*fg_log_fn)(void *user, fg_log_level level, const char *message);

/* Context options; a zeroed struct gives the defaults.  Each setting comes
 * from the first of: the field here (when set), its environment variable
 * (read once, by fg_context_init), the default.  A malformed or out-of-range
 * environment value is reported with one warning and the default is used; an
 * out-of-range field here makes fg_context_init fail with FG_ERR_INPUT.
 *
 * size: 0 or sizeof(fg_options).  The struct only grows at the end; 0 means
 * the layout of fusegen 0.1 (every field up to log_user), so zeroed structs
 * keep working when fields are added; a later field is read only when size
 * covers it. */
typedef struct fg_options {
    const char *rules_dir;   /* NULL: $FUSEGEN_RULES, else the shipped rules */
    const char *cache_dir;   /* NULL: $FUSEGEN_CACHE_DIR, $XDG_CACHE_HOME/fusegen, ~/.cache/fusegen */
    fg_device device;        /* FG_DEVICE_AUTO by default */
    const char *arch;        /* "sm_90"; NULL: the GPU's, else $FUSEGEN_ARCH, else sm_90 */
    int jobs;                /* compile threads, 0..4096; 0: number of cores */
    int no_rules;            /* nonzero: do not load any rules at init */
    size_t size;             /* 0 or sizeof(fg_options), see above */
    long long hook_steps;    /* Lua instructions per hook call; 0: $FUSEGEN_HOOK_STEPS, else 10,000,000 */
    long long hook_memory;   /* Lua memory in bytes; 0: $FUSEGEN_HOOK_MEMORY, else 64 MiB */
    int hook_timeout_ms;     /* wall clock per hook call; 0: $FUSEGEN_HOOK_TIMEOUT_MS, else 2000 */
    long long cache_max_mb;  /* disk cache limit in MiB; 0: $FUSEGEN_CACHE_MAX_MB, else 1024 */
    int cache_off;           /* nonzero: no disk cache; 0: $FUSEGEN_CACHE (off, 0, false, no: none) */
    fg_log_fn log;           /* NULL: the default (stderr); see fg_context_set_log */
    void *log_user;          /* passed to log */
    /* ---- after 0.1, read only when size covers them: the remote kernel
     * cache a fleet shares (docs/cache.md, "The remote tier").  Strings are
     * copied; NULL / 0 take the variable, then the default. */
    const char *remote_cache;          /* "redis://host[:port][/db]"; NULL: $FUSEGEN_REMOTE_CACHE; "off": none */
    const char *remote_cache_key_file; /* the fleet secret, a file only its owner may read;
                                          NULL: $FUSEGEN_REMOTE_CACHE_KEY_FILE (none: no remote tier) */
    const char *remote_cache_mode;     /* "ro" (never writes) or "rw"; NULL: $FUSEGEN_REMOTE_CACHE_MODE, else "ro" */
    int remote_cache_timeout_ms;       /* connect and command timeout, 1..60000; 0: $FUSEGEN_REMOTE_CACHE_TIMEOUT_MS,
                                          else 500 */
    long long remote_cache_ttl_s;      /* entry lifetime (SET EX), 1..2^31-1 s; 0: $FUSEGEN_REMOTE_CACHE_TTL, else
                                          30 days */
} fg_options;

/* Names of enum values, for messages; never NULL. */
FG_API const char *fg_status_name(fg_status s);
FG_API const char *fg_dtype_name(fg_dtype t);
FG_API const char *fg_layout_name(fg_layout l);
FG_API const char *fg_device_name(fg_device d);
FG_API const char *fg_precision_name(fg_precision p);   /* "exact", "tf32" */
FG_API const char *fg_version(void);

/* Creates a context.  With opts->no_rules == 0 the rules directory is loaded;
 * on failure *out is still set (errors are readable) and must be freed. */
FG_API fg_status fg_context_init(fg_context **out, const fg_options *opts);
FG_API void fg_context_free(fg_context *ctx);
/* Where the context's warnings go from now on: fn(user, level, line); fn
 * NULL restores the default.  Set it in fg_options to see the warnings of
 * fg_context_init itself. */
FG_API void fg_context_set_log(fg_context *ctx, fg_log_fn fn, void *user);

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
 * the file does not give from the graph's seed.  The file's directory and the
 * file are opened once; `file:` weights are opened beneath that directory
 * without "..", absolute paths or symbolic links (docs/graphs.md). */
FG_API fg_status fg_graph_load(fg_context *ctx, const char *path, fg_graph **out);
/* Same, from YAML text in memory; name is used in error locations. */
FG_API fg_status fg_graph_parse(fg_context *ctx, const char *name, const char *text,
                                size_t len, fg_graph **out);
FG_API void fg_graph_free(fg_graph *g);

/* The graph's precision (a YAML graph's `precision:` key, else EXACT) and
 * setting it, e.g. for an ONNX model: plans built afterwards use it, and it
 * is named in each generated kernel's header comment (so kernels of the two
 * precisions never share a cache entry).  A NULL g or a value out of range
 * is FG_ERR_INPUT; fg_graph_precision(NULL) is FG_PRECISION_EXACT. */
FG_API fg_status fg_graph_set_precision(fg_context *ctx, fg_graph *g, fg_precision p);
FG_API fg_precision fg_graph_precision(const fg_graph *g);

/* ---- ONNX models (docs/onnx.md) -----------------------------------------
 * fg_graph_load also reads an ONNX file (recognised by its content, or by a
 * .onnx name) with default options.  Operators map onto the loaded
 * vocabulary (rules/ops.yaml, rules/pointwise.yaml, rules/onnx_ops.yaml);
 * initializers and Constant nodes become weights.  An unsupported operator
 * or attribute is an error, never dropped. */

/* The value of one symbolic dimension (an input's dim_param), e.g. {"batch", 4}. */
typedef struct fg_onnx_dim {
    const char *name;
    int64_t value;           /* 1 .. 2^31 */
} fg_onnx_dim;

/* Zeroed = defaults.  size: 0 or sizeof(fg_onnx_options), as in fg_options. */
typedef struct fg_onnx_options {
    int ndims;
    const fg_onnx_dim *dims; /* symbolic dimensions not listed here are 1 */
    const char *base_dir;    /* fg_graph_load_onnx_memory: directory that external data files are
                                opened beneath (once per load); NULL: external data is refused */
    size_t size;             /* 0 or sizeof(fg_onnx_options) */
    /* Read when size covers them: external data held by the caller in memory.  A tensor whose external
     * data location is "fusegen-memory:<i>" reads buffers[i] (buffer_bytes[i] bytes long; its offset and
     * length as in a file) instead of a file, so a binding can pass weights it holds (a framework's
     * parameters) without serializing them into the model.  The values are copied into the graph. */
    int nbuffers;
    const void *const *buffers;
    const size_t *buffer_bytes;
} fg_onnx_options;

/* Loads an ONNX model file; external data files are opened beneath the
 * model's directory, opened once: a relative location without ".." or
 * symbolic links, read from the descriptor opened.  o may be NULL. */
FG_API fg_status fg_graph_load_onnx(fg_context *ctx, const char *path, const fg_onnx_options *o, fg_graph **out);
/* Same, from a serialized ModelProto in memory; name is used in error
 * locations.  data is not kept. */
FG_API fg_status fg_graph_load_onnx_memory(fg_context *ctx, const char *name, const void *data, size_t len,
                                           const fg_onnx_options *o, fg_graph **out);

/* Matches the loaded rules on a graph and returns the fused groups, with the
 * graph's parameters folded.  The input graph is not modified; the plan
 * borrows its unmodified weights, so the graph must outlive the plan. */
FG_API fg_status fg_plan_build(fg_context *ctx, const fg_graph *g, fg_plan **out);
FG_API void fg_plan_free(fg_plan *p);
FG_API int fg_plan_group_count(const fg_plan *p);

/* ---- weights from memory, plan groups (docs/api.md) ----------------------
 * Both take the context that loaded the graph / built the plan and validate
 * every argument: a NULL pointer, an unknown name, a dtype, rank or index
 * out of range, a shape or dtype that does not match is FG_ERR_INPUT with a
 * message on ctx (nothing is recorded when ctx itself is NULL). */

/* Replaces the values of weight `name` of g with data: rank and shape (the
 * logical shape, NCHW order for rank 4) must be the weight's, and dtype its
 * dtype; data holds the elements in logical order as float (FG_DTYPE_F32)
 * or as the 16-bit patterns (uint16_t) of fp16 / bf16 values, which are
 * kept exactly.  NaN and infinities are accepted.  The values are copied
 * into the graph's own storage; plans built from g earlier may have copied
 * the old values or may read the new ones, so build plans after the last
 * call. */
FG_API fg_status fg_graph_set_weight(fg_context *ctx, fg_graph *g, const char *name, fg_dtype dtype,
                                     const int64_t *shape, int rank, const void *data);

#define FG_GROUP_INFO_MAX_NODES 16

/* One fused group of a plan (a kernel), as `fusegen plan` shows it.  The
 * strings belong to the context and the plan and stay valid while both do. */
typedef struct fg_group_info {
    const char *rule;            /* rule name; NULL when no rule matched (a single op) */
    const char *rule_file;       /* the rule's file; NULL with rule */
    int rule_line;               /* line of its `rule:` key; 0 with rule */
    int nnodes;
    const char *nodes[FG_GROUP_INFO_MAX_NODES];  /* graph node names, in chain order */
    int folded[FG_GROUP_INFO_MAX_NODES];         /* nonzero: folded into the anchor's parameters */
    const char *anchor;          /* the node the template computes; NULL for pointwise-only groups */
    const char *template_name;   /* the template chosen ("conv2d", "pointwise", ...) */
    const char *output;          /* the tensor the group writes */
    char epilogue[256];          /* "bias, apply(relu)", "-" when none; cut with "..." if longer */
} fg_group_info;

/* Fills *info for group i (0 .. fg_plan_group_count(p) - 1, execution order). */
FG_API fg_status fg_plan_group_info(fg_context *ctx, const fg_plan *p, int i, fg_group_info *info);


/* ---- a plan as text -------------------------------------------------------
 * What `fusegen plan` prints, for bindings that cannot pass a FILE *:
 * fg_plan_text gives the group table and the summary line (explain nonzero:
 * also the near misses and the templates considered, as --explain), and
 * fg_plan_dot_text the Graphviz graph of --dot.  *out receives a
 * NUL-terminated string from malloc, to be released with fg_string_free;
 * it is NULL when the call fails.  ctx is the context that built p. */
FG_API fg_status fg_plan_text(fg_context *ctx, const fg_plan *p, int explain, char **out);
FG_API fg_status fg_plan_dot_text(fg_context *ctx, const fg_plan *p, char **out);
FG_API void fg_string_free(char *s);

/* ---- compiling and running plans (runtime/) -----------------------------
 * fg_plan_compile emits one kernel per group, compiles them (NVRTC for CUDA,
 * the host C++ compiler for emulation; both through the kernel cache), uploads
 * the folded weights and sizes one arena for the intermediates (reused by
 * liveness).  The plan must outlive the fg_exec.  See docs/api.md. */

typedef struct fg_exec fg_exec;

/* Zeroed = defaults.  size: 0 or sizeof(fg_compile_options), as in fg_options
 * (0: the layout of fusegen 0.1, every field below). */
typedef struct fg_compile_options {
    fg_device device;        /* FG_DEVICE_AUTO: the context's device option (auto: CUDA if present, else emu) */
    int graph_replay;        /* CUDA: capture the launches into a CUDA graph on the first run, replay it after */
    int timing;              /* record per-kernel times of each run (fg_exec_kernel_ms) */
    size_t size;             /* 0 or sizeof(fg_compile_options) */
    /* ---- after 0.1, read only when size covers them */
    int shape_params;        /* nonzero: kernels take the tensor sizes as parameters instead of constants,
                                so plans of one graph at other sizes (batch, sequence: fg_onnx_options.dims)
                                render the same sources wherever the templates' own choices (tiles, split-K,
                                vector widths: fg_exec_kernel_choices) agree, and share their compiles
                                through the kernel cache.  Index arithmetic then reads sizes at run time
                                (docs/codegen.md, "Sizes as parameters"). */
} fg_compile_options;

/* A graph input or output of a compiled plan. */
typedef struct fg_tensor_info {
    const char *name;
    fg_dtype dtype;
    fg_layout layout;        /* physical layout of rank-4 tensors */
    int rank;                /* 0 for a scalar the model declares rank 0 (one element) */
    int64_t shape[6];        /* logical shape, NCHW order for rank 4 */
    size_t bytes;            /* storage size */
    int float64;             /* the model declares it float64: dtype is FG_DTYPE_F32, and a
                                binding converts at the boundary (the Python package and
                                `fusegen run` do) */
} fg_tensor_info;

/* Names a graph input or output and where its data lives: a CUDA device
 * pointer (a CUdeviceptr cast to void *) for fg_exec_run on CUDA, a host
 * pointer for emulation and for fg_exec_run_host.  Data is in the tensor's
 * dtype and physical layout. */
typedef struct fg_binding {
    const char *name;
    void *data;
} fg_binding;

FG_API fg_status fg_plan_compile(fg_context *ctx, const fg_plan *p, const fg_compile_options *o, fg_exec **out);
FG_API void fg_exec_free(fg_exec *e);
/* The device it runs on: FG_DEVICE_CUDA or FG_DEVICE_EMU, never AUTO. */
FG_API fg_device fg_exec_device(const fg_exec *e);
FG_API int fg_exec_input_count(const fg_exec *e);
FG_API int fg_exec_output_count(const fg_exec *e);
FG_API fg_status fg_exec_input_info(const fg_exec *e, int i, fg_tensor_info *info);
FG_API fg_status fg_exec_output_info(const fg_exec *e, int i, fg_tensor_info *info);
/* Runs the plan once.  Every graph input and output must be bound (extra or
 * unknown names are errors).  CUDA: launches on stream (a CUstream; NULL: the
 * exec's own stream) and returns when the launches are queued, unless timing
 * is on (then it synchronizes).  Emulation: runs to completion, stream ignored.
 * Runs of one exec are serialized; different execs may run concurrently. */
FG_API fg_status fg_exec_run(fg_exec *e, const fg_binding *b, int n, void *stream);
/* Same with host pointers on either device: on CUDA the data is copied to and
 * from device buffers the exec owns.  Synchronous. */
FG_API fg_status fg_exec_run_host(fg_exec *e, const fg_binding *b, int n);
/* The kernels, in launch order: entry point name, generated CUDA source, and
 * the milliseconds of the last run (timing on; -1 otherwise). */
FG_API int fg_exec_kernel_count(const fg_exec *e);
FG_API const char *fg_exec_kernel_name(const fg_exec *e, int i);
FG_API const char *fg_exec_kernel_source(const fg_exec *e, int i);
FG_API double fg_exec_kernel_ms(const fg_exec *e, int i);
/* The template's choices for kernel i, "NAME=value ..." (tile sizes, split-K,
 * vector widths and switches; "" for a template without any).  The entry
 * point's name is a hash of the source, so two kernels of the same name are
 * one program; with shape_params, kernels of two sizes of a graph differ only
 * where these choices (or the group itself) differ. */
FG_API const char *fg_exec_kernel_choices(const fg_exec *e, int i);
/* Peak bytes of the intermediate arena (after liveness reuse). */
FG_API size_t fg_exec_arena_bytes(const fg_exec *e);

/* How the kernels of a context's compiles were obtained, counted since
 * fg_context_init (every fg_plan_compile, fg_kernel_create and report
 * compile of this context): compiled by NVRTC (CUDA) or by the host C++
 * compiler (emulation), or found in the kernel cache's memory, disk or
 * remote tier.  A kernel identical to another of the same batch (same
 * cache key) is obtained once and counted once.  Bindings use it to state
 * how many compiles a new input size cost.  size: sizeof(fg_kernel_counts)
 * (0 is FG_ERR_INPUT); fields beyond it are not written. */
typedef struct fg_kernel_counts {
    size_t size;
    uint64_t nvrtc_compiled;   /* CUDA kernels compiled by NVRTC */
    uint64_t host_compiled;    /* emulated kernels compiled by the host compiler */
    uint64_t memory_hits, disk_hits, remote_hits;
} fg_kernel_counts;
FG_API fg_status fg_context_kernel_counts(fg_context *ctx, fg_kernel_counts *out);

/* Host conversions: n elements between dtypes (round-to-nearest-even), and a
 * [N,C,H,W] tensor between storage layouts (src and dst must not overlap). */
FG_API fg_status fg_convert_dtype(const void *src, fg_dtype from, void *dst, fg_dtype to, size_t n);
FG_API fg_status fg_convert_layout(const void *src, fg_layout from, void *dst, fg_layout to, const int64_t shape[4],
                                   size_t elem_size);

/* ---- one kernel from a specification ------------------------------------
 * A chain of ops (an anchor such as conv2d or matmul, then epilogue ops such
 * as batch_norm and relu) is turned into a one-input graph, planned with the
 * context's rules, and must come out as exactly one fused kernel.  The chain
 * input is named "x" and the output "y"; weights are named
 * "<step name>.<input name>" after the op definition's input names
 * ("conv.weight", "bn.gamma"). */

typedef struct fg_spec_op {
    const char *name;        /* step name, unique in the spec ("conv", "bn", "act") */
    const char *op;          /* op from the loaded vocabulary ("conv2d", "batch_norm", "relu") */
    const char *attrs;       /* YAML flow mapping ("{ stride: [2, 2], padding: [1, 1] }") or NULL */
} fg_spec_op;

typedef struct fg_spec_weight {
    const char *name;        /* "<step>.<input>": every required non-chain input of each op */
    int rank;
    int64_t shape[6];        /* logical shape (conv weights [K, C/groups, R, S]) */
    const float *data;       /* logical order, copied at create time; NULL: seeded random values */
} fg_spec_weight;

typedef struct fg_kernel_spec {
    const char *template_name;   /* expected template ("conv2d"), or NULL for any */
    int nops;
    const fg_spec_op *ops;       /* the chain; ops[0] consumes x */
    int nweights;
    const fg_spec_weight *weights;
    fg_dtype dtype;
    fg_layout layout;
    int rank;
    int64_t input_shape[6];      /* logical shape of x */
    fg_compile_options compile;  /* device etc. */
} fg_kernel_spec;

typedef struct fg_kernel_handle fg_kernel_handle;

FG_API fg_status fg_kernel_create(fg_context *ctx, const fg_kernel_spec *spec, fg_kernel_handle **out);
FG_API void fg_kernel_handle_free(fg_kernel_handle *h);
/* The generated CUDA source of the kernel (owned by the handle). */
FG_API const char *fg_kernel_source(const fg_kernel_handle *h);
/* The compiled one-kernel plan, for fg_exec_* queries and fg_exec_run_host. */
FG_API fg_exec *fg_kernel_exec(fg_kernel_handle *h);
/* Launches with bindings for "x" and "y" (fg_exec_run semantics). */
FG_API fg_status fg_kernel_launch(fg_kernel_handle *h, const fg_binding *b, int n, void *stream);

/* ---- performance report without a GPU (docs/api.md, "Performance report")
 * fg_plan_report emits and compiles every kernel of a plan for a cubin
 * target (through the kernel cache, as fg_plan_compile does) and reads what
 * a GPU would run: registers, shared memory, stack and local memory
 * (cuobjdump -res-usage), the SASS instruction mix (cuobjdump -sass, or
 * nvdisasm when cuobjdump is missing), an occupancy
 * estimate, FLOPs and minimum bytes from the group's shapes, and a roofline
 * lower bound for a device model.  When cuobjdump or nvdisasm is missing the
 * report says so once and leaves those fields at -1; it never fails for
 * that.  `fusegen compile GRAPH --report` prints fg_report_text. */

/* Zeroed = defaults.  size: 0 or sizeof(fg_report_options), as in fg_options. */
typedef struct fg_report_options {
    const char *device_model;    /* "h200" (default), "h100", "a100" */
    const char *arch;            /* cubin target "sm_XX"; NULL: the device model's arch when device_model
                                    is given, else the context's (fg_options.arch, $FUSEGEN_ARCH, sm_90) */
    size_t size;                 /* 0 or sizeof(fg_report_options) */
    /* ---- after 0.1, read only when size covers them */
    int shape_params;            /* emit the kernels as fg_compile_options.shape_params does */
} fg_report_options;

/* One kernel.  Integer fields read from the tools are -1 when unknown. */
typedef struct fg_kernel_report {
    int group;                   /* plan group */
    char name[64];               /* entry point */
    char template_name[32];      /* the template the planner chose */
    char tile[96];               /* the template's tile choice as the emitter wrote it
                                    ("64 x 64 x 32, 3 stages, 128 threads (2 x 2 warps)"), "-" when none */
    fg_dtype dtype;
    unsigned grid[3], block[3];
    int registers;               /* per thread */
    int static_smem;             /* bytes, as cuobjdump reports them */
    int dynamic_smem;            /* bytes asked at launch (known without tools) */
    int stack_bytes;             /* stack frame per thread */
    int local_bytes;             /* other local memory per thread */
    int spill_store_bytes;       /* from ptxas -v in the NVRTC log, when the options asked for it */
    int spill_load_bytes;
    int sass_read;               /* nonzero: the counts below were read from SASS */
    int instructions;
    int hmma, hgmma;             /* tensor-core mma instructions (mma.sync, wgmma) */
    int ldg128, stg128;          /* 16-byte global loads / stores */
    int ldgsts, utmaldg;         /* asynchronous copies (cp.async, TMA) */
    int ldsm;                    /* ldmatrix */
    int ldl, stl;                /* local loads / stores */
    int blocks_per_sm;           /* occupancy estimate (docs/api.md gives the formula); -1 with the
                                    registers or shared memory unknown, and so occupancy and waves */
    double occupancy;            /* active warps / the SM's maximum, 0..1 */
    const char *occupancy_limit; /* "registers", "shared memory", "threads", "blocks", "block too large",
                                    "unknown" */
    double waves;                /* grid blocks / (SMs * blocks_per_sm) */
    double flops;                /* anchor (2 per multiply-add) + 1 per output element per epilogue stage */
    double bytes;                /* inputs + weights + outputs, each once */
    double peak_flops;           /* the rate taken: tensor core (dtype; TF32 for fp32) when SASS has mma */
    const char *peak_name;       /* "fp16 tensor core", "bf16 tensor core", "tf32 tensor core", "fp32" */
    double bound_us;             /* roofline lower bound: max(flops / peak, bytes / bandwidth) */
    const char *bound_by;        /* "memory" or "compute" */
    /* the latency model (docs/codegen.md, "The latency model"): an estimate, not calibrated yet */
    double est_us;               /* launch + max(math, memory, k-tile chain) + epilogue + split-K reduction */
    double est_launch_us, est_math_us, est_mem_us, est_chain_us, est_epi_us, est_split_us;
    int est_ktiles;              /* k tiles one block (one tile of a persistent kernel) walks; -1: not tiled */
    int est_splits;              /* split-K slices (1: none) */
    double est_split_bytes;      /* split-K partials written and read back */
} fg_kernel_report;

/* The plan's totals. */
typedef struct fg_report_summary {
    int nkernels;
    char arch[32];
    const char *device_model;    /* "h200" */
    const char *device_description;
    int have_res_usage;          /* cuobjdump was found */
    int have_sass;               /* cuobjdump or nvdisasm was found */
    double flops, bytes;
    double bound_us;             /* the sum of the kernels' bounds */
    int tensor_core_kernels;     /* kernels whose SASS holds HMMA or HGMMA */
    int local_memory_kernels;    /* kernels with stack, local memory, LDL/STL or spill bytes */
    double est_us;               /* the latency model's estimates summed (launches included) */
    double est_launch_us;        /* the launches' share of it */
    double est_split_bytes;      /* split-K partials written and read back by all kernels */
} fg_report_summary;

typedef struct fg_report fg_report;

/* Builds the report of plan p (built by ctx); o may be NULL.  An unknown
 * device model or a target that is not a cubin arch is FG_ERR_INPUT; a
 * kernel that does not compile fails the call with its status. */
FG_API fg_status fg_plan_report(fg_context *ctx, const fg_plan *p, const fg_report_options *o, fg_report **out);
FG_API void fg_report_free(fg_report *r);
FG_API int fg_report_kernel_count(const fg_report *r);
/* Kernel i (0 .. count - 1, launch order), NULL out of range; owned by r. */
FG_API const fg_kernel_report *fg_report_kernel(const fg_report *r, int i);
FG_API const fg_report_summary *fg_report_summary_of(const fg_report *r);
/* The report as `fusegen compile --report` prints it; owned by r. */
FG_API const char *fg_report_text(const fg_report *r);

#ifdef __cplusplus
}
#endif
#endif /* FUSEGEN_H */
