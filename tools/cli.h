/*
 * cli.h -- shared pieces of the `fusegen` command line: each subcommand is a
 * function cmd_<name>(argc, argv) in tools/cmd_<name>.c returning the process
 * exit code: 0 ok, 1 failure (compile, device, check, I/O), 2 bad input
 * (rules, graph, hooks, usage) and host memory running out (FG_ERR_NOMEM:
 * what the input asks for does not fit).
 */
#ifndef FG_CLI_H
#define FG_CLI_H

#include "context.h"

int cmd_rules(int argc, char **argv);    /* fusegen rules check DIR */
int cmd_plan(int argc, char **argv);     /* fusegen plan GRAPH [--rules DIR] [--explain] [--dot FILE] */
int cmd_emit(int argc, char **argv);     /* fusegen emit GRAPH (-o DIR | --group N) */
int cmd_compile(int argc, char **argv);  /* fusegen compile GRAPH [--arch sm_XX] */
int cmd_cache(int argc, char **argv);    /* fusegen cache stats|ls|clear|explain KEY */
int cmd_run(int argc, char **argv);      /* fusegen run GRAPH [--device auto|cuda|emu] [--check] */
int cmd_import(int argc, char **argv);   /* fusegen import MODEL.onnx -o GRAPH.yaml */

/* Exit code for a status: 0 ok, 2 input/hook errors, 1 anything else. */
int cli_exit_code(fg_status st);
/* Prints every recorded error as "file:line:col: error: msg" to stderr and
 * returns cli_exit_code(st). */
int cli_report(fg_context *ctx, fg_status st);
/* Creates a context whose rules come from rules_dir (NULL: the shipped rules);
 * on failure prints the errors, frees, and returns NULL with *exit_code set. */
fg_context *cli_context(const char *rules_dir, const fg_options *base, int *exit_code);
/* Loads ctx's rules then graph path and builds its plan; on failure prints
 * errors and returns the exit code (0 on success). */
int cli_load_plan(fg_context *ctx, const char *path, fg_graph **g, fg_plan **p);
/* `--dim NAME=N` (any number, after the command): values of an ONNX model's
 * symbolic dimensions, and `--precision exact|tf32` (the commands that plan):
 * the graph's precision.  cli_take_dims removes them from argv (fusegen.c,
 * before dispatch) and returns 0, or prints a usage error and returns 2;
 * cli_onnx_options gives the dimensions to the loaders (NULL when none were
 * given), cli_load_graph applies the precision. */
int cli_take_dims(int *argc, char **argv);
/* `--shape-params` (taken by cli_take_dims; emit, compile, run, cache warm):
 * kernels take their sizes as parameters (fg_compile_options.shape_params). */
extern int cli_shape_params;
const fg_onnx_options *cli_onnx_options(void);
/* Loads a graph: YAML, or ONNX with the --dim values; then --precision. */
fg_status cli_load_graph(fg_context *ctx, const char *path, fg_graph **g);
/* Option parsing helper: if argv[*i] is `name` takes the next argument into
 * *val (missing value: usage error, returns -1); returns 1 when matched, 0 if not. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* Prints "fusegen: usage: ..." to stderr and returns 2. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* FG_CLI_H */
