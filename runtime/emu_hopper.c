/*
 * emu_hopper.c -- the Hopper async machinery of the emulation scheduler
 * (emu_sched_impl.h; semantics in docs/emulation.md, "Hopper primitives"):
 * mbarriers in a per-block table (the fg_mbar's bytes hold a tag and the
 * index) with arrival counts, phases and transaction bytes; TMA boxes read
 * at issue and kept in flight on their barrier until a thread waits on it;
 * the async proxy's copy of shared memory, refreshed by
 * fg_fence_proxy_async(); wgmma operations queued per thread and computed
 * for the whole warpgroup by the last of its 128 threads to reach
 * fg_wgmma_wait.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_sched_impl.h"
#include "emu_tmap.h"
#include "num.h"
#include "util.h"

/* The emulated shared address of a pointer is its offset from the start of
 * the kernel's shared arrays (the analogue of the device's shared window):
 * swizzles, alignments and wgmma descriptors are in terms of it. */

static int in_shared(const fg_emu_sched *s, const void *p, size_t bytes)
{
    const char *c = p;
    return s->shared_begin && c >= s->shared_begin && c <= s->shared_end &&
           bytes <= (size_t)(s->shared_end - c);
}

unsigned long fg_emu_soff(const fg_emu_sched *s, const void *p)
{
    return (unsigned long)((const char *)p - s->shared_begin);
}

/* The mbarrier at bar, or the launch fails naming fn. */
static mbar *mbar_lookup(fg_emu_sched *s, void *bar, const char *fn)
{
    char msg[256];
    if (!in_shared(s, bar, 8) || (uintptr_t)bar % 8) {
        snprintf(msg, sizeof msg, "%s: the mbarrier is not an 8-byte aligned object in shared memory (FG_SHARED)", fn);
        fg_emu_api_fail(msg);
    }
    uint64_t v;
    memcpy(&v, bar, 8);
    unsigned idx = (unsigned)(v & 0xffffffffu);
    if ((unsigned)(v >> 32) != MBAR_MAGIC || idx >= (unsigned)s->nmbar || s->mbars[idx].addr != bar) {
        snprintf(msg, sizeof msg,
                 "%s: the mbarrier at shared offset 0x%lx is not initialized (no fg_mbar_init in this block, or its "
                 "bytes were overwritten)",
                 fn, fg_emu_soff(s, bar));
        fg_emu_api_fail(msg);
    }
    return &s->mbars[idx];
}

/* The phase completes: the next one expects count arrivals again; every
 * blocked waiter becomes ready (and re-checks its parity). */
static void mbar_complete(fg_emu_sched *s, mbar *b)
{
    b->phase++;
    b->pending = b->count;
    b->tx = 0;
    for (int w = b->wait_head; w >= 0;) {
        thread *t = &s->threads[w];
        w = t->next_waiter;
        t->next_waiter = -1;
        t->mbar_wait = -1;
        fg_emu_rq_push(s, (int)t->lin);
    }
    s->mbar_nwait -= b->nwait;
    b->nwait = 0;
    b->wait_head = b->wait_tail = -1;
}

/* The async proxy's view, made (poisoned) on first use. */
static unsigned char *async_view(fg_emu_sched *s)
{
    if (!s->view) {
        size_t n = (size_t)(s->shared_end - s->shared_begin);
        s->view = fg_xcalloc(n ? n : 1, 1);
        memset(s->view, 0xff, n);
    }
    return s->view;
}

/* Lands b's copies in flight, in issue order: each writes its bytes (to
 * generic shared memory and the async view) and completes its transaction
 * bytes; the phase completes as soon as nothing is missing. */
static void mbar_deliver(fg_emu_sched *s, mbar *b)
{
    while (b->head) {
        tmacopy *c = b->head;
        b->head = c->next;
        if (!b->head)
            b->tail = NULL;
        memcpy(c->dst, c->data, c->bytes);
        memcpy(async_view(s) + fg_emu_soff(s, c->dst), c->data, c->bytes);
        b->tx -= (long)c->bytes;
        s->tma_inflight--;
        free(c);
        if (b->pending == 0 && b->tx == 0)
            mbar_complete(s, b);
    }
}

/* Copies in flight land on every barrier someone is blocked on (the
 * scheduler calls this only when no thread can run). */
void fg_emu_deliver_awaited(fg_emu_sched *s)
{
    for (int i = 0; i < s->nmbar; i++)
        if (s->mbars[i].nwait > 0 && s->mbars[i].head)
            mbar_deliver(s, &s->mbars[i]);
}

void fg_emu_api_mbar_init(void *bar, unsigned count)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    char msg[200];
    if (!in_shared(s, bar, 8) || (uintptr_t)bar % 8)
        fg_emu_api_fail("fg_mbar_init: the mbarrier is not an 8-byte aligned object in shared memory (FG_SHARED)");
    if (count < 1 || count > MBAR_LIMIT) {
        snprintf(msg, sizeof msg, "fg_mbar_init: arrival count %u (1 to %u allowed)", count, MBAR_LIMIT);
        fg_emu_api_fail(msg);
    }
    uint64_t v;
    memcpy(&v, bar, 8);
    unsigned idx = (unsigned)(v & 0xffffffffu);
    mbar *b;
    if ((unsigned)(v >> 32) == MBAR_MAGIC && idx < (unsigned)s->nmbar && s->mbars[idx].addr == bar) {
        b = &s->mbars[idx];   /* initialized again */
        if (b->nwait > 0 || b->head) {
            snprintf(msg, sizeof msg,
                     "fg_mbar_init: the mbarrier at shared offset 0x%lx is initialized again while %s",
                     fg_emu_soff(s, bar), b->nwait ? "threads wait on it" : "TMA copies are in flight on it");
            fg_emu_api_fail(msg);
        }
    } else {
        if (s->nmbar == MAX_MBARS)
            fg_emu_api_fail("fg_mbar_init: more than 128 mbarriers in one block");
        idx = (unsigned)s->nmbar++;
        b = &s->mbars[idx];
    }
    memset(b, 0, sizeof *b);
    b->addr = bar;
    b->count = b->pending = count;
    b->wait_head = b->wait_tail = -1;
    v = (uint64_t)MBAR_MAGIC << 32 | idx;
    memcpy(bar, &v, 8);
}

void fg_emu_api_mbar_arrive(void *bar, int expect, unsigned tx)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    const char *fn = expect ? "fg_mbar_arrive_expect_tx" : "fg_mbar_arrive";
    mbar *b = mbar_lookup(s, bar, fn);
    char msg[300];
    if (expect) {
        if (tx > MBAR_LIMIT || b->tx + (long)tx > MBAR_LIMIT) {
            snprintf(msg, sizeof msg,
                     "%s: %u transaction bytes on the mbarrier at shared offset 0x%lx exceed the tx-count range "
                     "(%ld outstanding, at most %u)",
                     fn, tx, fg_emu_soff(s, bar), b->tx, MBAR_LIMIT);
            fg_emu_api_fail(msg);
        }
        b->tx += tx;
    }
    if (b->pending == 0) {
        snprintf(msg, sizeof msg,
                 "%s: the mbarrier at shared offset 0x%lx has no arrival left in phase %u (count %u, all arrived; "
                 "%ld transaction bytes outstanding): more arrivals than its count before the phase completed",
                 fn, fg_emu_soff(s, bar), b->phase, b->count, b->tx);
        fg_emu_api_fail(msg);
    }
    b->pending--;
    if (b->pending == 0 && b->tx == 0) {
        if (b->head) {
            snprintf(msg, sizeof msg,
                     "%s: the phase of the mbarrier at shared offset 0x%lx would complete while TMA copies on it "
                     "are in flight whose bytes no fg_mbar_arrive_expect_tx announced",
                     fn, fg_emu_soff(s, bar));
            fg_emu_api_fail(msg);
        }
        mbar_complete(s, b);
    }
}

void fg_emu_api_mbar_wait(void *bar, unsigned parity)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    mbar *b = mbar_lookup(s, bar, "fg_mbar_wait");
    if (parity > 1)
        fg_emu_api_fail("fg_mbar_wait: the phase parity must be 0 or 1");
    for (;;) {
        mbar_deliver(s, b);              /* what is in flight lands when observed */
        if ((b->phase & 1u) != parity)   /* the phase of this parity completed */
            return;
        t->state = T_MBAR;
        t->mbar_wait = (int)(b - s->mbars);
        t->mbar_parity = parity;
        t->next_waiter = -1;
        if (b->wait_tail >= 0)
            s->threads[b->wait_tail].next_waiter = (int)t->lin;
        else
            b->wait_head = (int)t->lin;
        b->wait_tail = (int)t->lin;
        b->nwait++;
        s->mbar_nwait++;
        fg_emu_yield(s, t);
    }
}

/* cp.async.bulk.tensor.<rank>d of the box at coordinates c[0..rank) (tmap.h):
 * reads it now, element by element along axis 0 in 16-byte chunks, the
 * landed elements packed axis 0 fastest, out-of-range ones zero; lands it
 * when the barrier is waited on. */
static int wgmma_reading(fg_emu_sched *s, uint64_t lo, uint64_t hi);

void fg_emu_api_tma_load(void *dst, const void *map, int rank, const int *coord, void *bar)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    char msg[300], fn[32];
    snprintf(fn, sizeof fn, "fg_tma_load_%dd", rank);
    fg_tmap_desc d;
    if (fg_emu_tmap_decode(map, &d) != 0) {
        snprintf(msg, sizeof msg, "%s: the tensor map was not written by fg_emu_tmap_encode (or its bytes were changed)",
                 fn);
        fg_emu_api_fail(msg);
    }
    if ((unsigned)rank != d.rank) {
        snprintf(msg, sizeof msg, "%s: the tensor map has rank %u", fn, d.rank);
        fg_emu_api_fail(msg);
    }
    mbar *b = mbar_lookup(s, bar, fn);
    size_t inner = (size_t)d.box[0] * d.elem_bytes, rows = 1;
    for (unsigned i = 1; i < d.rank; i++)
        rows *= fg_tmap_box_count(&d, i);
    size_t bytes = inner * rows;
    unsigned long align = d.swizzle ? 8ul * (unsigned long)d.swizzle : 128ul;
    if (!in_shared(s, dst, bytes)) {
        snprintf(msg, sizeof msg, "%s: the %zu-byte box does not fit in shared memory at the destination", fn, bytes);
        fg_emu_api_fail(msg);
    }
    if (fg_emu_soff(s, dst) % align) {
        snprintf(msg, sizeof msg, "%s: the shared destination (offset 0x%lx) is not %lu-byte aligned (%s)", fn,
                 fg_emu_soff(s, dst), align,
                 d.swizzle ? "a swizzled box starts its pattern at the destination" : "cp.async.bulk.tensor");
        fg_emu_api_fail(msg);
    }
    int reader = wgmma_reading(s, fg_emu_soff(s, dst), fg_emu_soff(s, dst) + bytes);
    if (reader >= 0) {
        snprintf(msg, sizeof msg, "%s: the box overwrites shared memory (offset 0x%lx) that a wgmma of warpgroup %d "
                 "still reads (not yet waited for): the stage was refilled before its empty barrier said so", fn,
                 fg_emu_soff(s, dst), reader);
        fg_emu_api_fail(msg);
    }
    tmacopy *c = fg_xcalloc(1, sizeof *c + bytes);   /* zero: the out-of-bounds fill */
    c->dst = dst;
    c->bytes = bytes;
    const unsigned char *base = (const unsigned char *)(uintptr_t)d.base;
    unsigned per_chunk = 16 / d.elem_bytes;
    unsigned idx[FG_TMAP_MAX_RANK] = {0};   /* the row's landed index along axes 1.. */
    for (size_t r = 0; r < rows; r++) {
        /* the row's global coordinates along axes 1..: c + index * estride */
        int inside = 1;
        uint64_t off = 0;
        for (unsigned i = 1; i < d.rank; i++) {
            int64_t y = (int64_t)coord[i] + (int64_t)idx[i] * d.estride[i];
            if (y < 0 || y >= (int64_t)d.dim[i])
                inside = 0;
            else
                off += (uint64_t)y * d.stride[i - 1];
        }
        if (inside) {
            const unsigned char *row = base + off;
            for (size_t j = 0; j < inner / 16; j++) {   /* 16-byte chunks stay whole under the swizzle */
                unsigned char *out = c->data + fg_emu_tmap_swizzle(r * inner + j * 16, d.swizzle);
                int64_t x0 = (int64_t)coord[0] + (int64_t)(j * per_chunk);
                if (x0 >= 0 && x0 + per_chunk <= (int64_t)d.dim[0]) {
                    memcpy(out, row + (uint64_t)x0 * d.elem_bytes, 16);
                    continue;
                }
                for (unsigned e = 0; e < per_chunk; e++)
                    if (x0 + e >= 0 && x0 + e < (int64_t)d.dim[0])
                        memcpy(out + e * d.elem_bytes, row + (uint64_t)(x0 + e) * d.elem_bytes, d.elem_bytes);
            }
        }
        for (unsigned i = 1; i < d.rank; i++) {   /* the next row: axis 1 fastest */
            if (++idx[i] < fg_tmap_box_count(&d, i))
                break;
            idx[i] = 0;
        }
    }
    if (b->tail)
        b->tail->next = c;
    else
        b->head = c;
    b->tail = c;
    s->tma_inflight++;
}

void fg_emu_api_fence_proxy_async(void)
{
    fg_emu_tls_sched->fence_epoch++;
}

/* The warpgroup of the running thread (fails unless all 128 threads exist). */
static int warpgroup_of(fg_emu_sched *s, thread *t, const char *fn)
{
    int wg = (int)(t->lin / 128);
    if ((wg + 1) * 128 > s->nthreads) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s needs a full warpgroup of 128 threads, but warpgroup %d has %d", fn, wg,
                 s->nthreads - wg * 128);
        fg_emu_api_fail(msg);
    }
    return wg;
}

static const char *wgmma_name(int kind)
{
    return kind == FG_EMU_WGMMA_BF16 ? "fg_wgmma_bf16" : kind == FG_EMU_WGMMA_TF32 ? "fg_wgmma_tf32" : "fg_wgmma_f16";
}

static void poison_floats(float *d, int n)
{
    memset(d, 0xff, (size_t)n * sizeof *d);
}

static int operand_sig(fg_emu_sched *s, const wgop *op, uint64_t *sig);
static int operand_spans(const wgop *op, uint64_t span[2][2]);

/* Whether [lo, hi) overlaps either of op's operand spans. */
static int op_overlaps(const wgop *op, uint64_t lo, uint64_t hi)
{
    uint64_t sp[2][2];
    if (operand_spans(op, sp) != 0)
        return 0;
    for (int i = 0; i < 2; i++)
        if (sp[i][0] < hi && lo < sp[i][1])
            return 1;
    return 0;
}

/* The first TMA copy in flight (issued, not yet landed) whose shared
 * destination overlaps shared offsets [lo, hi), or NULL. */
static const tmacopy *copy_in_flight(fg_emu_sched *s, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < s->nmbar; i++)
        for (const tmacopy *c = s->mbars[i].head; c; c = c->next) {
            uint64_t d = fg_emu_soff(s, c->dst);
            if (d < hi && lo < d + c->bytes)
                return c;
        }
    return NULL;
}

/* The warpgroup (0, 1, ...) one of whose wgmma operations, issued and not
 * yet landed by a wait, reads shared offsets overlapping [lo, hi); -1 when
 * none.  A TMA copy there would change what the device's wgmma may still
 * be reading (a stage refilled before its empty barrier said so). */
static int wgmma_reading(fg_emu_sched *s, uint64_t lo, uint64_t hi)
{
    for (int j = 0; j < s->nthreads; j++) {
        thread *t = &s->threads[j];
        if (t->lin % 128)
            continue;
        for (int i = 0; i < t->wg_nops; i++)
            if (op_overlaps(&t->wgq[i], lo, hi))
                return (int)(t->lin / 128);
    }
    return -1;
}

void fg_emu_api_wgmma(int kind, int bn, int trans_b, uint64_t desc_a, uint64_t desc_b, int acc, float *d)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    char msg[256];
    if ((kind != FG_EMU_WGMMA_F16 && kind != FG_EMU_WGMMA_BF16 && kind != FG_EMU_WGMMA_TF32) || bn < 8 || bn > 256 ||
        bn % 8 || (trans_b != 0 && trans_b != 1) || !d)
        fg_emu_api_fail("malformed wgmma call (prelude and runtime out of step)");
    const char *fn = wgmma_name(kind);
    if (kind == FG_EMU_WGMMA_TF32 && trans_b)
        fg_emu_api_fail("fg_wgmma_tf32: B must be K-major (wgmma transposes only 16-bit operands)");
    warpgroup_of(s, t, fn);
    if (!t->wg_fenced) {
        snprintf(msg, sizeof msg, "%s: no fg_wgmma_fence() before this thread's first wgmma", fn);
        fg_emu_api_fail(msg);
    }
    if (!t->wgq)
        t->wgq = fg_xcalloc(WGQ_MAX, sizeof *t->wgq);
    if (t->wg_nops == WGQ_MAX) {
        snprintf(msg, sizeof msg,
                 "%s: more than %d wgmma operations pending in one thread (a fg_wgmma_wait is missing)", fn, WGQ_MAX);
        fg_emu_api_fail(msg);
    }
    wgop *op = &t->wgq[t->wg_nops];
    op->d = d;
    op->desc_a = desc_a;
    op->desc_b = desc_b;
    op->kind = kind;
    op->bn = bn;
    op->trans_b = trans_b;
    op->acc = acc != 0;
    op->group = t->wg_group;
    op->chained = 0;
    for (int i = t->wg_nops - 1; i >= 0; i--)
        if (t->wgq[i].d == d) {
            if (t->wgq[i].bn != bn) {
                snprintf(msg, sizeof msg,
                         "%s: the accumulators are those of a pending wgmma of another shape (n%d, now n%d) without "
                         "a fg_wgmma_wait between them",
                         fn, t->wgq[i].bn, bn);
                fg_emu_api_fail(msg);
            }
            op->chained = op->acc;
            break;
        }
    if (op->acc && !op->chained)
        memcpy(op->snap, d, (size_t)bn / 2 * sizeof *d);
    /* the operands must already be what the wgmma reads at its wait (the
     * device may read them any time in between), and no copy in flight may
     * be about to change them */
    op->signed_ = t->lin % 128 == 0 && operand_sig(s, op, &op->sig) == 0;
    uint64_t sp[2][2];
    if (op->signed_ && operand_spans(op, sp) == 0)
        for (int i = 0; i < 2; i++)
            if (copy_in_flight(s, sp[i][0], sp[i][1])) {
                snprintf(msg, sizeof msg,
                         "%s: warpgroup %d reads shared memory (%s at offsets 0x%llx..0x%llx) that a TMA copy in "
                         "flight will overwrite (no wait on the stage's full barrier, or the stage refilled before "
                         "its release)",
                         fn, (int)(t->lin / 128), i ? "B" : "A", (unsigned long long)sp[i][0],
                         (unsigned long long)sp[i][1]);
                fg_emu_api_fail(msg);
            }
    t->wg_nops++;
    poison_floats(d, bn / 2);   /* undefined until the covering wait */
}

void fg_emu_api_wgmma_fence(void)
{
    fg_emu_tls_sched->cur->wg_fenced = 1;
}

void fg_emu_api_wgmma_commit(void)
{
    fg_emu_tls_sched->cur->wg_group++;
}

/* The shared byte address of element (mn, k) of a 16-bit operand described
 * by desc (PTX ISA, wgmma shared-memory matrix layouts; T = 8 elements):
 * K-major, none:     ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
 * K-major, swizzled: ((8,m),(T,2k)) : ((S/16 T,SBO),(1,T))
 * MN-major, none:    ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
 * MN-major, swizzled: ((T,S/16,m),(8,k)) : ((1,T,LBO),(S/16 T,SBO))
 * where S is the swizzle span in bytes; then the swizzle of the address
 * (desc_invalid tells first whether the descriptor can be emulated). */
static uint64_t operand_addr(uint64_t desc, int mn, int k, int mn_major)
{
    uint64_t start = (desc & 0x3fff) << 4, lbo = ((desc >> 16) & 0x3fff) << 4, sbo = ((desc >> 32) & 0x3fff) << 4;
    static const unsigned spans[4] = {0, 128, 64, 32};
    unsigned span = spans[desc >> 62];
    uint64_t o;
    if (!mn_major) {
        if (!span)
            o = (uint64_t)(mn % 8) * 16 + (uint64_t)(mn / 8) * sbo + (uint64_t)(k % 8) * 2 + (uint64_t)(k / 8) * lbo;
        else
            o = (uint64_t)(mn % 8) * span + (uint64_t)(mn / 8) * sbo + (uint64_t)k * 2;
    } else {
        if (!span) {
            o = (uint64_t)(mn % 8) * 2 + (uint64_t)(mn / 8) * sbo + (uint64_t)(k % 8) * 16 + (uint64_t)(k / 8) * lbo;
        } else {
            unsigned w = span / 2;   /* elements in one swizzle row */
            o = (uint64_t)(mn % w) * 2 + (uint64_t)(mn / w) * lbo + (uint64_t)(k % 8) * span + (uint64_t)(k / 8) * sbo;
        }
    }
    return fg_emu_tmap_swizzle(start + o, span);
}

/* Why desc cannot be emulated, or NULL. */
static const char *desc_invalid(uint64_t desc)
{
    static const unsigned spans[4] = {0, 128, 64, 32};
    unsigned span = spans[desc >> 62];
    if ((desc >> 49) & 7)
        return "a non-zero matrix base offset is not emulated (start the operand at an address aligned to the swizzle "
               "pattern)";
    if (span && ((((desc & 0x3fff) << 4) >> 7) & (span / 16 - 1)))
        return "the start address is not aligned to the swizzle pattern's rows (a matrix base offset would be needed; "
               "not emulated)";
    return NULL;
}

/* Reads element (mn, k) of an operand of wgmma kind `kind` from the async
 * view into *v.  A tf32 element k is 4 bytes where the 16-bit elements 2k
 * and 2k + 1 would be (a k8 tf32 step spans the 32 bytes of a k16 one); its
 * low 13 mantissa bits are dropped: the tensor core reads only tf32's 10. */
static int read_operand(fg_emu_sched *s, uint64_t desc, int mn, int k, int mn_major, int kind, float *v)
{
    int tf32 = kind == FG_EMU_WGMMA_TF32;
    uint64_t a = operand_addr(desc, mn, tf32 ? 2 * k : k, mn_major);
    size_t n = (size_t)(s->shared_end - s->shared_begin);
    if (a + (tf32 ? 4 : 2) > n)
        return -1;
    if (tf32) {
        uint32_t bits;
        memcpy(&bits, s->view + a, 4);
        bits &= ~(uint32_t)0x1fff;
        memcpy(v, &bits, 4);
        return 0;
    }
    uint16_t h;
    memcpy(&h, s->view + a, 2);
    *v = kind == FG_EMU_WGMMA_BF16 ? fg_bf16_to_f32(h) : fg_f16_to_f32(h);
    return 0;
}

/* Fenced generic writes become visible to the async proxy. */
static void view_sync(fg_emu_sched *s)
{
    unsigned char *view = async_view(s);
    if (s->view_epoch != s->fence_epoch) {
        if (s->shared_end > s->shared_begin)
            memcpy(view, s->shared_begin, (size_t)(s->shared_end - s->shared_begin));
        s->view_epoch = s->fence_epoch;
    }
}

/* A hash (FNV-1a) of the bytes of op's A (64 x 16) and B (BN x 16) 16-bit
 * elements (the same 32 bytes per row as a tf32 op's 8) in the async view,
 * synced first; 0, or -1 when a descriptor cannot be
 * emulated or an element lies outside shared memory (the land reports it). */
static int operand_sig(fg_emu_sched *s, const wgop *op, uint64_t *sig)
{
    if (desc_invalid(op->desc_a) || desc_invalid(op->desc_b))
        return -1;
    view_sync(s);
    size_t n = (size_t)(s->shared_end - s->shared_begin);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int pass = 0; pass < 2; pass++)
        for (int mn = 0; mn < (pass ? op->bn : 64); mn++)
            for (int k = 0; k < 16; k++) {
                uint64_t a = pass ? operand_addr(op->desc_b, mn, k, op->trans_b) : operand_addr(op->desc_a, mn, k, 0);
                if (a + 2 > n)
                    return -1;
                h = (h ^ s->view[a]) * 0x100000001b3ull;
                h = (h ^ s->view[a + 1]) * 0x100000001b3ull;
            }
    *sig = h;
    return 0;
}

/* The shared offsets [span[0][0], span[0][1]) op's A elements span, and
 * span[1] B's (each the lowest and highest byte its descriptor addresses);
 * -1 when a descriptor cannot be emulated. */
static int operand_spans(const wgop *op, uint64_t span[2][2])
{
    if (desc_invalid(op->desc_a) || desc_invalid(op->desc_b))
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t l = UINT64_MAX, h = 0;
        for (int mn = 0; mn < (pass ? op->bn : 64); mn++)
            for (int k = 0; k < 16; k++) {
                uint64_t a = pass ? operand_addr(op->desc_b, mn, k, op->trans_b) : operand_addr(op->desc_a, mn, k, 0);
                l = a < l ? a : l;
                h = a + 2 > h ? a + 2 : h;
            }
        span[pass][0] = l;
        span[pass][1] = h;
    }
    return 0;
}

/* Row and column of accumulator i of warpgroup thread t (PTX ISA, wgmma
 * register fragment of D for m64nNk16 with f32 accumulators). */
static void frag_pos(int t, int i, int *row, int *col)
{
    int w = t / 32, l = t % 32;
    *row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
    *col = 8 * (i / 4) + 2 * (l % 4) + (i % 2);
}

/* Computes op j of the 128 threads T (identical in all of them): operands
 * from the async view, C from each thread's snapshot or accumulators, D
 * scattered to the accumulators.  0, or -1 with msg. */
static int wgmma_land_one(fg_emu_sched *s, thread **T, int j, char *msg, size_t msgsize)
{
    const wgop *op = &T[0]->wgq[j];
    const char *why;
    if ((why = desc_invalid(op->desc_a)) || (why = desc_invalid(op->desc_b))) {
        snprintf(msg, msgsize, "%s: %s descriptor: %s", wgmma_name(op->kind),
                 desc_invalid(op->desc_a) ? "the A" : "the B", why);
        return -1;
    }
    if (!s->wgs_scratch)
        s->wgs_scratch = fg_xcalloc(1, sizeof *s->wgs_scratch);
    wgscratch *w = s->wgs_scratch;
    int kind = op->kind, bn = op->bn, nk = kind == FG_EMU_WGMMA_TF32 ? 8 : 16;
    for (int m = 0; m < 64; m++)
        for (int k = 0; k < nk; k++)
            if (read_operand(s, op->desc_a, m, k, 0, kind, &w->a[m][k])) {
                snprintf(msg, msgsize, "%s: A element (%d, %d) lies outside shared memory", wgmma_name(op->kind), m, k);
                return -1;
            }
    for (int n = 0; n < bn; n++)
        for (int k = 0; k < nk; k++)
            if (read_operand(s, op->desc_b, n, k, op->trans_b, kind, &w->b[n][k])) {
                snprintf(msg, msgsize, "%s: B element (%d, %d) lies outside shared memory", wgmma_name(op->kind), k, n);
                return -1;
            }
    for (int t = 0; t < 128; t++) {
        const wgop *o = &T[t]->wgq[j];
        for (int i = 0; i < bn / 2; i++) {
            int row, col;
            frag_pos(t, i, &row, &col);
            w->c[row][col] = !o->acc ? 0.0f : o->chained ? o->d[i] : o->snap[i];
        }
    }
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < bn; n++) {
            float acc = 0.0f;   /* products of 16-bit and tf32 values are exact in float; sums in k order */
            for (int k = 0; k < nk; k++)
                acc += w->a[m][k] * w->b[n][k];
            w->c[m][n] += acc;
        }
    for (int t = 0; t < 128; t++) {
        float *d = T[t]->wgq[j].d;
        for (int i = 0; i < bn / 2; i++) {
            int row, col;
            frag_pos(t, i, &row, &col);
            d[i] = w->c[row][col];
        }
    }
    return 0;
}

/* Lands, for warpgroup wg, every op of the groups older than the n most
 * recent ones.  0, or -1 with msg. */
static int wgmma_land(fg_emu_sched *s, int wg, int n, char *msg, size_t msgsize)
{
    thread *T[128];
    int nland = -1;
    for (int i = 0; i < 128; i++) {
        thread *t = T[i] = &s->threads[wg * 128 + i];
        int cnt = 0;
        while (cnt < t->wg_nops && (long)t->wgq[cnt].group < (long)t->wg_group - n)
            cnt++;
        if (i == 0) {
            nland = cnt;
            continue;
        }
        int same = cnt == nland && t->wg_group == T[0]->wg_group;
        for (int j = 0; same && j < cnt; j++) {
            const wgop *a = &t->wgq[j], *b = &T[0]->wgq[j];
            same = a->desc_a == b->desc_a && a->desc_b == b->desc_b && a->kind == b->kind && a->bn == b->bn &&
                   a->trans_b == b->trans_b && a->acc == b->acc && a->group == b->group && a->chained == b->chained;
        }
        if (!same) {
            snprintf(msg, msgsize,
                     "warpgroup divergence: thread %d of warpgroup %d queued other wgmma operations or groups than "
                     "thread 0 of it (%d to land, thread 0 has %d; descriptors, shape, type, accumulate or commits "
                     "differ)",
                     i, wg, cnt, nland);
            return -1;
        }
    }
    if (nland == 0)
        return 0;
    view_sync(s);
    for (int j = 0; j < nland; j++) {
        const wgop *op = &T[0]->wgq[j];
        uint64_t sig;
        if (op->signed_ && operand_sig(s, op, &sig) == 0 && sig != op->sig) {
            snprintf(msg, msgsize,
                     "%s: warpgroup %d: the operands in shared memory changed between the wgmma's issue and its "
                     "fg_wgmma_wait (written while it was in flight, or made visible only after the issue: a missing "
                     "barrier wait or proxy fence before the wgmma)",
                     wgmma_name(op->kind), wg);
            return -1;
        }
        if (wgmma_land_one(s, T, j, msg, msgsize))
            return -1;
    }
    for (int i = 0; i < 128; i++) {
        thread *t = T[i];
        int left = t->wg_nops - nland;
        memmove(t->wgq, t->wgq + nland, (size_t)left * sizeof *t->wgq);
        t->wg_nops = left;
        for (int j = 0; j < left; j++) {   /* an op chained to one that landed keeps its C aside */
            wgop *o = &t->wgq[j];
            int earlier = 0;
            for (int q = 0; q < j && !earlier; q++)
                earlier = t->wgq[q].d == o->d;
            if (o->chained && !earlier) {
                memcpy(o->snap, o->d, (size_t)o->bn / 2 * sizeof *o->d);
                o->chained = 0;
            }
            if (!earlier)
                poison_floats(o->d, o->bn / 2);
        }
    }
    return 0;
}

void fg_emu_api_wgmma_wait(int n)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    char msg[400];
    if (n < 0 || n > 7)
        fg_emu_api_fail("fg_wgmma_wait: N must be 0 to 7");
    int wg = warpgroup_of(s, t, "fg_wgmma_wait");
    wgslot *w = &s->wgs[wg];
    if (w->arrived == 0) {
        w->n = n;
    } else if (w->n != n) {
        snprintf(msg, sizeof msg, "warpgroup divergence: fg_wgmma_wait<%d> while %d thread(s) of warpgroup %d wait in "
                 "fg_wgmma_wait<%d>", n, w->arrived, wg, w->n);
        fg_emu_api_fail(msg);
    }
    if (++w->arrived < 128) {
        w->waiting[w->arrived - 1] = (int)t->lin;
        t->state = T_WGWAIT;
        fg_emu_yield(s, t);
        return;
    }
    w->arrived = 0;
    if (wgmma_land(s, wg, n, msg, sizeof msg))
        fg_emu_api_fail(msg);
    for (int i = 0; i < 127; i++)
        fg_emu_rq_push(s, w->waiting[i]);
}


/* Frees the TMA copies still in flight (they never land) and forgets the
 * block's mbarriers. */
void fg_emu_drop_tma(fg_emu_sched *s)
{
    for (int i = 0; i < s->nmbar; i++) {
        for (tmacopy *c = s->mbars[i].head, *next; c; c = next) {
            next = c->next;
            free(c);
        }
        s->mbars[i].head = s->mbars[i].tail = NULL;
    }
    s->nmbar = 0;
    s->tma_inflight = 0;
    s->mbar_nwait = 0;
}
