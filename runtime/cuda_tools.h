/*
 * cuda_tools.h -- NVIDIA's binary utilities (cuobjdump, nvdisasm) found and
 * run on a cubin, for the performance report (report.h).  They read what a
 * GPU would run without one: registers, shared memory, stack and local
 * memory per function (cuobjdump -res-usage) and the SASS text (cuobjdump
 * -sass, or nvdisasm).
 *
 * Not every CUDA toolkit ships them; pip installs them as
 * nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm.  A tool is looked for, in
 * order, in $FUSEGEN_CUDA_TOOLS, on PATH, in $CUDA_HOME/bin,
 * /usr/local/cuda/bin, and in Python's site-packages (nvidia/<cuXX>/bin, as
 * `python3` on PATH reports them).  FUSEGEN_CUDA_TOOLS=off finds none (as on
 * a machine without them).  The search runs once per process.
 */
#ifndef FG_CUDA_TOOLS_H
#define FG_CUDA_TOOLS_H

#include <stddef.h>

typedef enum fg_cuda_tool {
    FG_TOOL_CUOBJDUMP = 0,
    FG_TOOL_NVDISASM,
    FG_TOOL_COUNT
} fg_cuda_tool;

/* The tool's file name ("cuobjdump"). */
const char *fg_cuda_tool_name(fg_cuda_tool t);
/* Full path of the tool, or NULL when it was not found (thread-safe; the
 * string lives as long as the process). */
const char *fg_cuda_tool_path(fg_cuda_tool t);
/* Runs the tool on a cubin in memory: the bytes are written to a private
 * temporary file, the tool runs with args (e.g. {"-res-usage"}) followed by
 * the file name, and its standard output and error are returned in *out
 * (malloc'd, NUL-terminated).  Returns the tool's exit status, or -1 when
 * it is missing or could not be started (*out is then NULL). */
int fg_cuda_tool_run(fg_cuda_tool t, const char *const *args, int nargs, const void *cubin, size_t size, char **out);

#endif /* FG_CUDA_TOOLS_H */
