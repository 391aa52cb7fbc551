/*
 * nvrtc_check.h -- the one check for NVRTC calls.  A failing call is recorded
 * on the context as FG_ERR_COMPILE with the call's text, the fusegen source
 * file and line, and NVRTC's own message (nvrtcGetErrorString); given a
 * program, the program log is appended, so a compile failure always carries
 * it.  Evaluates to the fg_status (FG_OK when the call succeeded).
 *
 *   if (FG_NVRTC_CHECK(ctx, nvrtcGetCUBINSize(prog, &n))) goto fail;
 *   if (FG_NVRTC_CHECK_PROG(ctx, prog, nvrtcCompileProgram(prog, n, opts))) ...
 */
#ifndef FG_NVRTC_CHECK_H
#define FG_NVRTC_CHECK_H

#include <nvrtc.h>
#include <stdlib.h>

#include "diag.h"
#include "util.h"

#define FG_NVRTC_CHECK(ctx, call) fg_nvrtc_check_at((ctx), (call), NULL, #call, __FILE__, __LINE__)
#define FG_NVRTC_CHECK_PROG(ctx, prog, call) fg_nvrtc_check_at((ctx), (call), (prog), #call, __FILE__, __LINE__)

/* The program's log as a malloc'd string ("" when empty or unavailable). */
static inline char *fg_nvrtc_program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (!prog || nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1)
        return fg_xstrdup("");
    char *log = fg_xmalloc(n + 1);
    if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = 0;
    log[n] = 0;
    return log;
}

static inline fg_status fg_nvrtc_check_at(fg_context *ctx, nvrtcResult r, nvrtcProgram prog, const char *call,
                                          const char *file, int line)
{
    if (r == NVRTC_SUCCESS)
        return FG_OK;
    char *log = prog ? fg_nvrtc_program_log(prog) : NULL;
    fg_status st = fg_diag_error(ctx, FG_ERR_COMPILE, FG_NOLOC, "%s failed at %s:%d: %s%s%s", call, file, line,
                                 nvrtcGetErrorString(r), log && *log ? "\nNVRTC log:\n" : "", log ? log : "");
    free(log);
    return st;
}

#endif /* FG_NVRTC_CHECK_H */
