/*
 * tile_choice.c -- block tile and split-K chosen by the blocks they launch
 * (tile_choice.h): every candidate tile and split is priced with the terms
 * of the report's latency model that depend on the choice (runtime/
 * report_latency.c; its constants are repeated here, codegen does not call
 * the runtime), on an H200-like target of FG_TARGET_SMS SMs, and the
 * cheapest wins.  Wave quantization is in the price: blocks beyond a whole
 * wave cost another wave of math and of the k-tile chain; split-K costs its
 * partials' DRAM traffic and the reduction of the last block, so a smaller
 * tile that fills the SMs wins over a split that would.
 */
#include "tile_choice.h"

#include <math.h>

/* The latency model's assumed constants (docs/codegen.md, "The latency model"). */
#define TC_PEAK_HALF 990e12    /* fp16 / bf16 tensor-core peak, FLOP/s (H200) */
#define TC_PEAK_TF32 495e12    /* tf32 */
#define TC_BANDWIDTH 4.3e12    /* DRAM bytes/s */
#define TC_EFF_HGMMA 0.75
#define TC_EFF_HMMA 0.55
#define TC_FILL_US 1.0
#define TC_STEP_US_HGMMA 0.06
#define TC_STEP_US_HMMA 0.04
#define TC_SPLIT_FIXED_US 1.0

int fg_tc_blocks_per_sm(int bm, int bn, int threads, int smem)
{
    int regs = 64 + bm * bn / 256;
    int bps = 2048 / threads;
    if (65536 / (regs * threads) < bps)
        bps = 65536 / (regs * threads);
    if (228 * 1024 / (smem + 1024) < bps)
        bps = 228 * 1024 / (smem + 1024);
    return bps;
}

double fg_tc_estimate(const fg_tc_problem *p, const fg_tc_cand *t, int splits, int sms)
{
    double tiles = (double)((p->M + t->bm - 1) / t->bm) * (double)((p->N + t->bn - 1) / t->bn) * (double)p->batch;
    double total = tiles * splits, waves = ceil(total / sms);
    int bps = t->bps > 0 ? t->bps : 1;
    double waves_res = ceil(total / ((double)sms * bps));   /* waves of resident blocks */
    double kts = ceil((double)p->KT / splits);
    double peak = p->eb == 4 ? TC_PEAK_TF32 : TC_PEAK_HALF;
    double sm_rate = peak * (p->wgmma ? TC_EFF_HGMMA : TC_EFF_HMMA) / sms;
    double math = waves * 2.0 * t->bm * t->bn * p->bk * kts / sm_rate * 1e6;
    double partial = splits > 1 ? tiles * splits * (double)t->bm * t->bn * 4 * 2 : 0;
    double active = total < sms ? total : sms;
    double mem = (p->bytes + partial) / (TC_BANDWIDTH * fmin(1.0, 2.0 * active / sms)) * 1e6;
    double step = p->wgmma ? TC_STEP_US_HGMMA : TC_STEP_US_HMMA;
    double chain = p->wgmma ? TC_FILL_US + waves_res * kts * step : waves_res * (TC_FILL_US + kts * step);
    double split = splits > 1 ? waves_res * (TC_SPLIT_FIXED_US +
                                             (double)splits * t->bm * t->bn * 4 / (2.0 * TC_BANDWIDTH / sms) * 1e6)
                              : 0;
    return fmax(math, fmax(mem, chain)) + split;
}

fg_tc_choice fg_tc_choose(const fg_tc_problem *p, const fg_tc_cand *cands, int n, const int *skip, int sms)
{
    fg_tc_choice best = {-1, 1, 0, 0};
    double best_area = 0;
    int best_reach = 0;
    int most = p->max_splits;
    if (p->min_kt > 0 && p->KT / p->min_kt < most)
        most = (int)(p->KT / p->min_kt);
    if (most < 1)
        most = 1;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        const fg_tc_cand *t = &cands[i];
        double area = (double)((p->M + t->bm - 1) / t->bm) * t->bm * (double)((p->N + t->bn - 1) / t->bn) * t->bn;
        int last_used = 0;
        for (int s = 1; s <= most; s++) {
            /* the splits that exist when each keeps ceil(KT / s) k tiles */
            int64_t kts = (p->KT + s - 1) / s;
            int used = (int)((p->KT + kts - 1) / kts);
            if (used == last_used)
                continue;
            last_used = used;
            double est = fg_tc_estimate(p, t, used, sms);
            int64_t tiles = ((p->M + t->bm - 1) / t->bm) * ((p->N + t->bn - 1) / t->bn) * p->batch;
            int reach = tiles * used >= sms;
            /* filling the SMs comes first; then the modelled time, where a choice must save 1% to beat a
             * simpler one (fewer splits, less padding, larger) */
            int better = best.tile < 0 || (reach && !best_reach) ||
                         (reach == best_reach &&
                          (reach ? est < best.est_us * 0.99 || (est <= best.est_us * 1.01 &&
                                                                 (used < best.splits ||
                                                                  (used == best.splits && area < best_area)))
                                 : tiles * used > best.blocks ||
                                       (tiles * used == best.blocks && est < best.est_us)));
            if (better) {
                best_reach = reach;
                best.tile = i;
                best.splits = used;
                best.blocks = tiles * used;
                best.est_us = est;
                best_area = area;
            }
        }
    }
    return best;
}
