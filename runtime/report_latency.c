/*
 * report_latency.c -- the latency model of the performance report
 * (report.h): an estimate of each kernel's time on the device model from
 * its launch geometry, occupancy, tile line, split-K choice, SASS mix and
 * epilogue text, and so of a plan's, beside the roofline bound.  The terms
 * and their assumed constants are documented in docs/codegen.md ("The
 * latency model"); they are not calibrated on a GPU yet.
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device_model.h"

/* Assumed constants (docs/codegen.md lists them; to calibrate on a GPU). */
#define LAUNCH_US 1.5        /* a kernel node's launch and dependency gap in a replayed CUDA graph */
#define FILL_US 1.0          /* a block's pipeline fill: the first k tile's global round trip */
#define MEM_LATENCY_US 0.6   /* one dependent round of global loads (epilogue, split-K slots) */
#define SPLIT_FIXED_US 1.0   /* split-K's fence, counter atomic and barrier before the reduction */
#define EFF_HGMMA 0.75       /* fraction of the tensor-core peak a wgmma main loop reaches */
#define EFF_HMMA 0.55        /* the same for mma.sync (sm_80-style) loops */
#define EFF_SIMT 0.5         /* and for CUDA-core loops */
#define K_STEP_US_HGMMA 0.06 /* least time of one k tile's dependent wgmma chain and barrier wait */
#define K_STEP_US_HMMA 0.04  /* the same for one k tile of mma.sync steps */
#define LOADS_IN_FLIGHT 32   /* independent epilogue loads a thread keeps in flight (an unrolled epilogue issues them together) */

/* The text of the helper function `name(` of a kernel source up to its
 * closing line, or an empty span. */
static const char *fn_body(const char *src, const char *name, size_t *len)
{
    char key[64];
    snprintf(key, sizeof key, "%s(const fg_params_", name);
    const char *s = src ? strstr(src, key) : NULL;
    const char *e = s ? strstr(s, "\n}\n") : NULL;
    *len = s && e ? (size_t)(e - s) : 0;
    return s;
}

/* Occurrences of text in the span s[0..len). */
static int count_in(const char *s, size_t len, const char *text)
{
    int n = 0;
    size_t tl = strlen(text);
    for (size_t i = 0; s && i + tl <= len; i++)
        if (memcmp(s + i, text, tl) == 0)
            n++;
    return n;
}

/* The extra time per k tile of an element-gathering main loop (conv2d_tc's
 * "element gather" tile line) beyond the mma step: a gather that loads a
 * tile ahead ("loads a tile ahead") has one round of loads in flight under
 * the mma steps, so the step is at least a round; one that loads and stores
 * element by element in a loop waits a round per element of a chunk (BK / 4)
 * plus one for the weights, none of it overlapped. */
static double gather_step_us(const char *src, int bk, double step)
{
    const char *t = src ? strstr(src, "//   tile:") : NULL;
    size_t len = t ? strcspn(t, "\n") : 0;
    if (!count_in(t, len, "element gather"))
        return step;
    if (count_in(t, len, "loads a tile ahead"))
        return fmax(step, MEM_LATENCY_US);
    return step + (bk / 4 + 1) * MEM_LATENCY_US;
}

/* Global loads one epilogue thread issues per output element: scalar loads
 * count 1, a 16-byte load (fg_load8) and a load constant over 8 elements
 * 1/8 each. */
static double epilogue_loads_per_element(const char *src)
{
    size_t l1, l8, lp;
    const char *s1 = fn_body(src, "fg_epilogue", &l1);
    const char *s8 = fn_body(src, "fg_epilogue8", &l8);
    if (!s8 || !l8)
        return count_in(s1, l1, "fg_load(p.");
    const char *sp = fn_body(src, "fg_epilogue_pre", &lp);
    int vec = count_in(s8, l8, "fg_load8(");
    int uni = count_in(s8, l8, "fg_load(p.") - vec;   /* each vector load has a scalar fallback */
    return (vec + (uni > 0 ? uni : 0)) / 8.0 + count_in(sp, lp, "fg_load(p.");
}

void fg_latency_estimate(const fg_device_model *m, const fg_kernel *k, fg_kernel_report *r)
{
    r->est_launch_us = LAUNCH_US;
    r->est_math_us = r->est_mem_us = r->est_chain_us = r->est_epi_us = r->est_split_us = 0;
    r->est_splits = 1;
    r->est_ktiles = -1;
    r->est_split_bytes = 0;
    double blocks = (double)r->grid[0] * r->grid[1] * r->grid[2];
    int threads = (int)(r->block[0] * r->block[1] * r->block[2]);
    int bps = r->blocks_per_sm > 0 ? r->blocks_per_sm : 1;
    if (blocks < 1)
        blocks = 1;
    int wgmma = r->sass_read && r->hgmma > 0, mma = r->sass_read && (r->hmma > 0 || wgmma);

    /* math: the busiest SM runs ceil(blocks / SMs) blocks' FLOPs at the SM's share of the peak */
    double eff = wgmma ? EFF_HGMMA : mma ? EFF_HMMA : EFF_SIMT;
    double sm_rate = r->peak_flops * eff / m->sms;
    r->est_math_us = ceil(blocks / m->sms) * (r->flops / blocks) / sm_rate * 1e6;

    /* the tile: "BM x BN x BK, S stages" and "split-K S (T of KT k tiles each)" */
    int bm = 0, bn = 0, bk = 0, stages = 0, splits = 1;
    long long kt_split = 0, kt = 0;
    const char *t = r->tile;
    int tiled = sscanf(t, "%d x %d x %d, %d stages", &bm, &bn, &bk, &stages) == 4;
    const char *sk = strstr(t, "split-K ");
    if (sk && sscanf(sk, "split-K %d (%lld of %lld", &splits, &kt_split, &kt) != 3)
        splits = 1, kt_split = 0;
    const char *src = k ? k->source : NULL;
    double tiles = blocks / (splits > 0 ? splits : 1);
    if (tiled && kt_split <= 0 && bm > 0 && bn > 0 && bk > 0)   /* wgmma: the k tiles from the FLOPs */
        kt_split = (long long)ceil(r->flops / (2.0 * bm * bn * bk * tiles));
    r->est_splits = splits;

    /* memory: compulsory bytes and split-K partials; fewer than half the SMs busy cannot saturate DRAM */
    if (tiled && splits > 1)
        r->est_split_bytes = tiles * splits * (double)bm * bn * 4 * 2;   /* written, then read back */
    double active = blocks < m->sms ? blocks : m->sms;
    double bw = m->bandwidth * fmin(1.0, 2.0 * active / m->sms);
    r->est_mem_us = (r->bytes + r->est_split_bytes) / bw * 1e6;

    double waves = ceil(blocks / ((double)m->sms * bps));
    if (tiled) {
        /* the k-tile chain: per wave of blocks, the fill and each k tile's least step */
        r->est_ktiles = (int)kt_split;
        double step = gather_step_us(src, bk, wgmma ? K_STEP_US_HGMMA : K_STEP_US_HMMA);
        if (k && k->persistent)   /* a block fills its ring once and walks its tiles' k tiles back to back */
            r->est_chain_us = FILL_US + waves * (double)kt_split * step;
        else
            r->est_chain_us = waves * (FILL_US + (double)kt_split * step);
        /* epilogue rounds: dependent load rounds per tile, not overlapped with a main loop
         * unless another block shares the SM */
        int epi_threads = wgmma && threads > 128 ? threads - 128 : threads;
        double per_thread = (double)bm * bn / (epi_threads > 0 ? epi_threads : 1);
        double loads = per_thread * epilogue_loads_per_element(src);
        double rounds = ceil(loads / LOADS_IN_FLIGHT);
        r->est_epi_us = waves * rounds * MEM_LATENCY_US / bps;
        /* split-K: the last block of a tile fences, counts and adds the slots */
        if (splits > 1)
            r->est_split_us = waves * (SPLIT_FIXED_US + (double)splits * bm * bn * 4 / (2.0 * m->bandwidth / m->sms) * 1e6);
    } else {
        r->est_chain_us = waves * FILL_US * 0.5;   /* one load round trip per wave of untiled blocks */
    }
    double main_us = fmax(r->est_math_us, fmax(r->est_mem_us, r->est_chain_us));
    r->est_us = r->est_launch_us + main_us + r->est_epi_us + r->est_split_us;
}
