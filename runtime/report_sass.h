/*
 * report_sass.h -- what the performance report (report.h) reads from the
 * output of NVIDIA's tools: one function's line of `cuobjdump -res-usage`,
 * the instruction mix of `nvdisasm` SASS text, and the spill line ptxas
 * writes into NVRTC's log when asked (-Xptxas -v).  The tools do the
 * decoding; this only picks fields and counts opcodes in their text.
 */
#ifndef FG_REPORT_SASS_H
#define FG_REPORT_SASS_H

/* Per-thread resources of one function; -1 where unknown. */
typedef struct fg_res_usage {
    int registers;
    int stack;              /* stack frame bytes */
    int shared;             /* static shared memory bytes */
    int local;              /* local memory bytes besides the stack */
} fg_res_usage;

/* Opcode counts of a SASS listing. */
typedef struct fg_sass_mix {
    int instructions;
    int hmma;               /* warp-level tensor-core mma (mma.sync) */
    int hgmma;              /* warpgroup tensor-core mma (wgmma, sm_90) */
    int ldg128;             /* 16-byte global loads (LDG.*.128) */
    int stg128;             /* 16-byte global stores (STG.*.128) */
    int ldgsts;             /* asynchronous global -> shared copies (cp.async) */
    int utmaldg;            /* tensor-memory-accelerator loads (TMA) */
    int ldsm;               /* ldmatrix */
    int ldl, stl;           /* local memory loads / stores (spills, stack arrays) */
} fg_sass_mix;

/* Fills *r from `cuobjdump -res-usage` text for function `name` (the first
 * function listed when name is not).  Returns 0, or -1 when the text holds
 * no function line (*r is then all -1). */
int fg_res_usage_parse(const char *text, const char *name, fg_res_usage *r);
/* Counts the opcodes of SASS text (nvdisasm or cuobjdump -sass output). */
void fg_sass_mix_count(const char *sass, fg_sass_mix *m);
/* Programmatic dependent launch in a SASS listing of one function (sm_90:
 * griddepcontrol.wait is ACQBULK, griddepcontrol.launch_dependents
 * PREEXIT).  before_wait is the opcode of the first instruction ahead of
 * the first wait (in listing order) that may touch global memory (a global,
 * generic, atomic, TMA, bulk-copy, cache-control, surface or texture
 * access) or leaves the straight line (a branch, call, return or exit, after
 * which the wait might not cover every path); "" when there is none. */
typedef struct fg_sass_grid_dep {
    int waits;              /* ACQBULK */
    int launches;           /* PREEXIT */
    char before_wait[32];
} fg_sass_grid_dep;
void fg_sass_grid_dep_scan(const char *sass, fg_sass_grid_dep *g);
/* From an NVRTC log holding ptxas -v output for function name: the stack
 * frame and spill store / load bytes.  Returns 0, or -1 when absent. */
int fg_ptxas_spills_parse(const char *log, const char *name, int *stack, int *spill_stores, int *spill_loads);

#endif /* FG_REPORT_SASS_H */
