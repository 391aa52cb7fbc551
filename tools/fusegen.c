/*
 * fusegen.c -- the `fusegen` command line: dispatches to the subcommands of
 * tools/cmd_*.c.  Exit codes: 0 ok, 1 failure, 2 bad input or usage.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} command;

static const command commands[] = {
    {"rules", cmd_rules, "rules check DIR               validate op definitions, rules and hooks"},
    {"plan", cmd_plan, "plan GRAPH [--rules DIR] [--explain] [--dot FILE]   match rules, print the fused groups"},
    {"emit", cmd_emit, "emit GRAPH (-o DIR | --group N) [--rules DIR]       write the generated CUDA source"},
    {"compile", cmd_compile, "compile GRAPH [--rules DIR] [--arch sm_XX] [--jobs N]  JIT-compile a plan's kernels"},
    {"cache", cmd_cache, "cache stats|ls|clear|explain KEY                      inspect the kernel cache"},
    {"run", cmd_run, "run GRAPH [--device auto|cuda|emu] [--check] [--seed N]  run a plan, check numerics"},
    {"import", cmd_import, "import MODEL.onnx -o GRAPH.yaml [--weights-dir DIR]     write an ONNX model as a YAML graph"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fusegen COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n", commands[i].usage);
    fprintf(f, "\nGRAPH is a YAML graph or an ONNX model; --dim NAME=N sets an ONNX symbolic dimension (default 1).\n");
    fprintf(f, "--precision exact|tf32 (plan, emit, compile, run, cache warm): fp32 conv and matmul on TF32 tensor "
               "cores, or exact (the default; a graph's `precision:` key).\n");
    fprintf(f, "--shape-params (emit, compile, run, cache warm): kernels take their sizes as parameters, so the "
               "same graph at other --dim sizes reuses their compiles.\n");
    fprintf(f, "\nfusegen --version prints the version.  Exit codes: 0 ok, 1 failure, 2 bad input.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("fusegen %s\n", fg_version());
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    int sub_argc = argc - 1;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))   /* --dim NAME=N: ONNX symbolic dimensions, any command */
            return cli_take_dims(&sub_argc, argv + 1) ? 2 : commands[i].run(sub_argc, argv + 1);
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[i] = commands[i].name;
    const char *s = fg_suggest(argv[1], names, (int)(sizeof names / sizeof names[0]));
    fprintf(stderr, "fusegen: unknown command '%s'%s%s%s\n", argv[1], s ? " (did you mean '" : "", s ? s : "",
            s ? "'?)" : "");
    usage(stderr);
    return 2;
}
