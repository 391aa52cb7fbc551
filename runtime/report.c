/*
 * report.c -- the performance report without a GPU (fg_plan_report in
 * fusegen.h, `fusegen compile --report`): per kernel the template and tile,
 * the resources and SASS mix NVIDIA's tools read from the cubin
 * (cuda_tools.h, report_sass.h), an occupancy estimate and a roofline bound
 * for a device model (device_model.h), from FLOPs and bytes of the group's
 * shapes (report_work.c); then the plan's totals, as data and as text.
 */
#include "report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "cuda_tools.h"
#include "device_model.h"
#include "env.h"
#include "jit.h"
#include "report_sass.h"

struct fg_report {
    fg_report_summary sum;
    int n;
    fg_kernel_report *k;
    char *text;
};

#define BAD(...) fg_diag_error(ctx, FG_ERR_INPUT, FG_NOLOC, "fg_plan_report: " __VA_ARGS__)

/* The tile line the emitter wrote into the kernel's header comment, or "-". */
static void tile_of(const char *src, char *out, size_t size)
{
    const char *t = src ? strstr(src, "//   tile:") : NULL;
    if (!t) {
        snprintf(out, size, "-");
        return;
    }
    t += strlen("//   tile:");
    while (*t == ' ')
        t++;
    snprintf(out, size, "%.*s", (int)strcspn(t, "\n"), t);
}

/* Copies the counts of m into r when m holds instructions. */
static void put_mix(const fg_sass_mix *m, fg_kernel_report *r)
{
    if (m->instructions <= 0)
        return;
    r->sass_read = 1;
    r->instructions = m->instructions;
    r->hmma = m->hmma;
    r->hgmma = m->hgmma;
    r->ldg128 = m->ldg128;
    r->stg128 = m->stg128;
    r->ldgsts = m->ldgsts;
    r->utmaldg = m->utmaldg;
    r->ldsm = m->ldsm;
    r->ldl = m->ldl;
    r->stl = m->stl;
}

/* Resources and SASS of one kernel through the tools: one cuobjdump run
 * gives both (-res-usage -sass); nvdisasm reads the SASS when cuobjdump is
 * missing.  Fields stay -1 / 0 where no tool could read them. */
static void read_cubin(const fg_kernel *k, fg_kernel_report *r)
{
    char *out = NULL;
    fg_sass_mix m;
    static const char *const obj_args[] = {"-res-usage", "-sass"};
    if (fg_cuda_tool_run(FG_TOOL_CUOBJDUMP, obj_args, 2, k->binary, k->binary_size, &out) == 0) {
        fg_res_usage u;
        fg_res_usage_parse(out, k->name, &u);
        r->registers = u.registers;
        r->static_smem = u.shared;
        r->stack_bytes = u.stack;
        r->local_bytes = u.local;
        fg_sass_mix_count(out, &m);
        put_mix(&m, r);
    }
    free(out);
    out = NULL;
    static const char *const dis_args[] = {"-c"};
    if (!r->sass_read && fg_cuda_tool_run(FG_TOOL_NVDISASM, dis_args, 1, k->binary, k->binary_size, &out) == 0) {
        fg_sass_mix_count(out, &m);
        put_mix(&m, r);
    }
    free(out);
}

/* Whether a kernel touches local memory (spills, a stack frame). */
static int uses_local(const fg_kernel_report *r)
{
    return r->stack_bytes > 0 || r->local_bytes > 0 || r->spill_store_bytes > 0 || r->spill_load_bytes > 0 ||
           (r->sass_read && (r->ldl > 0 || r->stl > 0));
}

/* Occupancy, peak and roofline of r for model m. */
static void estimate(const fg_device_model *m, fg_kernel_report *r)
{
    int threads = (int)(r->block[0] * r->block[1] * r->block[2]);
    if (r->registers < 0 || r->static_smem < 0) {
        /* without cuobjdump the resources, and so the occupancy, are unknown */
        r->blocks_per_sm = -1;
        r->occupancy = -1;
        r->occupancy_limit = "unknown";
        r->waves = -1;
    } else {
        long smem = r->static_smem + (long)r->dynamic_smem;
        r->blocks_per_sm = fg_device_model_blocks_per_sm(m, threads, r->registers, smem, &r->occupancy_limit);
        int warps = (threads + 31) / 32;
        r->occupancy = (double)r->blocks_per_sm * warps / (m->max_threads_per_sm / 32);
        double blocks = (double)r->grid[0] * r->grid[1] * r->grid[2];
        r->waves = r->blocks_per_sm > 0 ? blocks / ((double)m->sms * r->blocks_per_sm) : 0;
    }
    int tc = r->sass_read && (r->hmma > 0 || r->hgmma > 0);
    if (tc && r->dtype == FG_DTYPE_F32) {
        r->peak_flops = m->tf32;
        r->peak_name = "tf32 tensor core";
    } else if (tc) {
        r->peak_flops = m->fp16;
        r->peak_name = r->dtype == FG_DTYPE_BF16 ? "bf16 tensor core" : "fp16 tensor core";
    } else {
        r->peak_flops = m->fp32;
        r->peak_name = "fp32";
    }
    double tc_s = r->flops / r->peak_flops, tm_s = r->bytes / m->bandwidth;
    r->bound_us = (tc_s > tm_s ? tc_s : tm_s) * 1e6;
    r->bound_by = tc_s > tm_s ? "compute" : "memory";
}

/* A number of at most 5 characters, or "-" for -1. */
static const char *num(char *buf, int v)
{
    if (v < 0)
        snprintf(buf, 16, "-");
    else
        snprintf(buf, 16, "%d", v);
    return buf;
}

/* The tile column: "64x64x32/3" from "64 x 64 x 32, 3 stages, ...". */
static void short_tile(const char *tile, char *out, size_t size)
{
    size_t o = 0;
    const char *s = tile;
    for (; *s && *s != ',' && o + 1 < size; s++)
        if (*s != ' ')
            out[o++] = *s;
    out[o] = 0;
    int stages;
    if (*s == ',' && sscanf(s + 1, " %d stages", &stages) == 1 && o + 4 < size)
        snprintf(out + o, size - o, "/%d", stages);
}

static void render(fg_report *R)
{
    fg_buf b = {0};
    const fg_report_summary *s = &R->sum;
    fg_buf_printf(&b, "performance report: %d kernel%s for %s, device model %s: %s\n", s->nkernels,
                  s->nkernels == 1 ? "" : "s", s->arch, s->device_model, s->device_description);
    const char *cuobjdump = fg_cuda_tool_path(FG_TOOL_CUOBJDUMP), *nvdisasm = fg_cuda_tool_path(FG_TOOL_NVDISASM);
    if (cuobjdump) {
        fg_buf_printf(&b, "tools: %s (resources and SASS)\n", cuobjdump);
    } else if (nvdisasm) {
        fg_buf_printf(&b, "note: cuobjdump not found (pip install nvidia-cuda-cuobjdump, or set FUSEGEN_CUDA_TOOLS): "
                          "registers, static shared memory, stack, local memory and occupancy unknown, shown as '-'; "
                          "SASS from %s\n", nvdisasm);
    } else {
        fg_buf_printf(&b, "note: cuobjdump and nvdisasm not found (pip install nvidia-cuda-cuobjdump "
                          "nvidia-cuda-nvdisasm, or set FUSEGEN_CUDA_TOOLS): registers, shared memory, stack, local "
                          "memory, occupancy and the SASS mix unknown, shown as '-'; the roofline takes the fp32 rate "
                          "for every kernel\n");
    }
    fg_buf_printf(&b, "%-3s %-26s %-10s %-12s %5s %7s %4s %6s %5s %5s %5s %5s %6s %6s %4s %4s %4s %5s %5s %9s %9s "
                      "%9s %8s %7s %s\n",
                  "#", "kernel", "template", "tile", "thr", "blocks", "reg", "smem", "stack", "local", "mma", "ldg16",
                  "ldgsts", "tma", "ldsm", "ldl", "stl", "occ", "waves", "MFLOP", "KB", "bound_us", "est_us", "splitKB",
                  "bound by");
    for (int i = 0; i < R->n; i++) {
        const fg_kernel_report *r = &R->k[i];
        char t[32], b1[16], b2[16], b3[16], smem[24];
        short_tile(r->tile, t, sizeof t);
        if (r->static_smem >= 0)
            snprintf(smem, sizeof smem, "%d", r->static_smem + r->dynamic_smem);
        else
            snprintf(smem, sizeof smem, "?+%d", r->dynamic_smem);
        char mix[7][16];
        int vals[7] = {r->hmma + r->hgmma, r->ldg128, r->ldgsts, r->utmaldg, r->ldsm, r->ldl, r->stl};
        for (int j = 0; j < 7; j++)
            num(mix[j], r->sass_read ? vals[j] : -1);
        char occ[16], waves[16];
        if (r->blocks_per_sm < 0) {
            snprintf(occ, sizeof occ, "-");
            snprintf(waves, sizeof waves, "-");
        } else {
            snprintf(occ, sizeof occ, "%.0f%%", r->occupancy * 100);
            snprintf(waves, sizeof waves, "%.2f", r->waves);
        }
        fg_buf_printf(&b, "%-3d %-26.26s %-10.10s %-12.12s %5u %7.0f %4s %6s %5s %5s %5s %5s %6s %6s %4s %4s %4s %5s "
                          "%5s %9.2f %9.1f %9.2f %8.2f %7.0f %s (%s)\n",
                      i, r->name, r->template_name, t, r->block[0] * r->block[1] * r->block[2],
                      (double)r->grid[0] * r->grid[1] * r->grid[2], num(b1, r->registers), smem,
                      num(b2, r->stack_bytes), num(b3, r->local_bytes), mix[0], mix[1], mix[2], mix[3], mix[4], mix[5],
                      mix[6], occ, waves, r->flops / 1e6, r->bytes / 1024, r->bound_us, r->est_us,
                      r->est_split_bytes / 1024, r->bound_by,
                      r->peak_name);
        if (r->spill_store_bytes >= 0)
            fg_buf_printf(&b, "    ptxas: %d bytes stack frame, %d bytes spill stores, %d bytes spill loads\n",
                          r->stack_bytes, r->spill_store_bytes, r->spill_load_bytes);
    }
    fg_buf_printf(&b, "total: %d kernels, %.3f GFLOP, %.2f MB moved at least, roofline lower bound %.1f us on %s; "
                      "%d on tensor cores%s, %d using local memory%s\n",
                  s->nkernels, s->flops / 1e9, s->bytes / 1e6, s->bound_us, s->device_model, s->tensor_core_kernels,
                  s->have_sass ? "" : " (SASS not read)", s->local_memory_kernels,
                  s->have_res_usage || s->have_sass ? "" : " (not read)");
    fg_buf_printf(&b, "latency model: %.1f us estimated (%.1f us of it launches), beside the roofline's %.1f us; "
                      "split-K partials %.2f MB written and read back\n",
                  s->est_us, s->est_launch_us, s->bound_us, s->est_split_bytes / 1e6);
    fg_buf_printf(&b, "columns: thr threads per block; smem static + dynamic bytes; stack, local bytes per thread; "
                      "mma HMMA + HGMMA; ldg16 16-byte global loads; ldgsts cp.async; tma UTMALDG; ldsm ldmatrix; "
                      "ldl/stl local loads/stores; occ = blocks/SM x warps per block / max warps per SM, blocks/SM = "
                      "min(max blocks, threads, registers, shared memory per SM / per block incl. 1 KiB reserved); "
                      "waves = blocks / (SMs x blocks/SM); MFLOP: 2 per multiply-add, 1 per element per epilogue "
                      "stage; KB: inputs + weights + output once; bound_us = max(FLOP / peak, bytes / bandwidth); "
                      "est_us: the latency model (launch + max(math, memory, k-tile chain) + epilogue rounds + split-K "
                      "reduction, docs/codegen.md); splitKB: split-K partials written and read back\n");
    R->text = fg_buf_take(&b);
}

fg_status fg_report_build(fg_context *ctx, const fg_plan *p, const fg_kernel *ks, const fg_jit_info *infos, int n,
                          const char *arch, const fg_device_model *model, fg_report **out)
{
    fg_report *R = fg_xcalloc(1, sizeof *R);
    R->n = n;
    R->k = fg_xcalloc((size_t)(n > 0 ? n : 1), sizeof *R->k);
    fg_report_summary *s = &R->sum;
    s->nkernels = n;
    snprintf(s->arch, sizeof s->arch, "%s", arch);
    s->device_model = model->name;
    s->device_description = model->description;
    s->have_res_usage = fg_cuda_tool_path(FG_TOOL_CUOBJDUMP) != NULL;
    s->have_sass = s->have_res_usage || fg_cuda_tool_path(FG_TOOL_NVDISASM) != NULL;
    for (int i = 0; i < n; i++) {
        const fg_kernel *k = &ks[i];
        fg_kernel_report *r = &R->k[i];
        r->group = k->group;
        snprintf(r->name, sizeof r->name, "%s", k->name);
        fg_group_info gi;
        const char *tmpl = k->template_name;
        if (fg_plan_group_info(ctx, p, k->group, &gi) == FG_OK)
            tmpl = gi.template_name;
        snprintf(r->template_name, sizeof r->template_name, "%s", tmpl ? tmpl : "?");
        tile_of(k->source, r->tile, sizeof r->tile);
        r->dtype = k->dtype;
        memcpy(r->grid, k->grid, sizeof r->grid);
        memcpy(r->block, k->block, sizeof r->block);
        r->registers = r->static_smem = r->stack_bytes = r->local_bytes = -1;
        r->spill_store_bytes = r->spill_load_bytes = -1;
        r->dynamic_smem = (int)k->smem;
        if (k->binary)
            read_cubin(k, r);
        if (infos && infos[i].log[0]) {
            int stack, st_b, ld_b;
            if (fg_ptxas_spills_parse(infos[i].log, k->name, &stack, &st_b, &ld_b) == 0) {
                r->spill_store_bytes = st_b;
                r->spill_load_bytes = ld_b;
                if (r->stack_bytes < 0)
                    r->stack_bytes = stack;
            }
        }
        fg_group_work(p, k->group, &r->flops, &r->bytes);
        estimate(model, r);
        fg_latency_estimate(model, k, r);
        s->est_us += r->est_us;
        s->est_launch_us += r->est_launch_us;
        s->est_split_bytes += r->est_split_bytes;
        s->flops += r->flops;
        s->bytes += r->bytes;
        s->bound_us += r->bound_us;
        s->tensor_core_kernels += r->sass_read && (r->hmma > 0 || r->hgmma > 0);
        s->local_memory_kernels += uses_local(r);
    }
    render(R);
    *out = R;
    return FG_OK;
}

FG_API fg_status fg_plan_report(fg_context *ctx, const fg_plan *p, const fg_report_options *o, fg_report **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return FG_ERR_INPUT;
    if (!p)
        return BAD("plan is NULL");
    if (!out)
        return BAD("out is NULL");
    fg_report_options ro;
    if (o) {
        const size_t v01 = offsetof(fg_report_options, shape_params);   /* the layout of fusegen 0.1 */
        fg_status st = fg_copy_sized(ctx, "fg_report_options", &ro, sizeof ro, o, o->size, v01, v01);
        if (st)
            return st;
    } else {
        memset(&ro, 0, sizeof ro);
    }
    const fg_device_model *m = fg_device_model_default();
    if (ro.device_model && !(m = fg_device_model_find(ro.device_model)))
        return BAD("unknown device model '%s' (known: %s)", ro.device_model, fg_device_model_names());
    const char *arch = ro.arch ? ro.arch : ro.device_model ? m->arch : fg_jit_arch(ctx);
    fg_status st = fg_jit_check_arch(ctx, arch);
    if (st)
        return st;
    if (strncmp(arch, "sm_", 3) != 0)
        return BAD("the report reads machine code: give a cubin target (sm_XX), not '%s'", arch);
    for (int i = 0; i < p->ngroups; i++)
        if (p->groups[i].rule >= ctx->nrules)
            return BAD("the plan was built with another context");
    int n = p->ngroups;
    fg_kernel *ks = fg_xcalloc((size_t)(n > 0 ? n : 1), sizeof *ks);
    fg_jit_info *infos = fg_xcalloc((size_t)(n > 0 ? n : 1), sizeof *infos);
    fg_emit_opts eo = {.specialize = !ro.shape_params};   /* as fg_plan_compile emits them */
    int emitted = 0;
    for (; emitted < n && st == FG_OK; emitted++)
        st = fg_emit_group_guarded(ctx, p, emitted, &eo, &ks[emitted]);
    if (st == FG_OK)
        st = fg_jit_compile_all(ctx, ks, n, arch, infos);
    if (st == FG_OK)
        st = fg_report_build(ctx, p, ks, infos, n, arch, m, out);
    for (int i = 0; i < emitted; i++)
        fg_kernel_free(&ks[i]);
    free(ks);
    free(infos);
    return st;
}

FG_API void fg_report_free(fg_report *r)
{
    if (!r)
        return;
    free(r->k);
    free(r->text);
    free(r);
}

FG_API int fg_report_kernel_count(const fg_report *r)
{
    return r ? r->n : 0;
}

FG_API const fg_kernel_report *fg_report_kernel(const fg_report *r, int i)
{
    return r && i >= 0 && i < r->n ? &r->k[i] : NULL;
}

FG_API const fg_report_summary *fg_report_summary_of(const fg_report *r)
{
    return r ? &r->sum : NULL;
}

FG_API const char *fg_report_text(const fg_report *r)
{
    return r ? r->text : NULL;
}
