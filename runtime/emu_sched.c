/*
 * emu_sched.c -- the emulation scheduler (see emu_sched.h).
 *
 * A block's threads are started in linear order on "workers": a worker is a
 * ucontext with its own mmap'd stack (guard page below it, so an overflow
 * faults).  A worker runs a thread until it exits and then starts the next
 * unstarted thread itself, so a kernel without barriers runs the whole block
 * on one worker without a single context switch.  A thread that must wait (at
 * fg_sync() or a warp collective) switches back to the scheduler, which then
 * resumes a ready thread or starts a fresh worker for the next unstarted one.
 *
 * Barrier: the last live thread to arrive releases the waiters (in arrival
 * order) and continues without switching.  Exited threads do not count, as
 * on the device; strict mode reports threads that passed different numbers
 * of barriers.  Warp collectives: each lane deposits its operands in the
 * warp's slot; the last lane to arrive computes every lane's result and wakes
 * the others, which read their result before they can deposit again, so one
 * rendezvous suffices.  ldmatrix is such a collective too: each lane deposits
 * the 16-byte row it addresses and receives its fragments.
 *
 * cp.async: a copy's source is read when it is issued, but the 16 bytes are
 * kept in the issuing thread's queue, tagged with its open group, and written
 * to shared memory only when that thread's wait covers the group (wait_group
 * N lands every committed group but the N most recent).  A kernel that reads
 * a tile without the right wait therefore reads stale or poisoned (0xff)
 * shared memory and fails its numerics, which on the device would be a race
 * that usually goes unnoticed.  Copies still queued when a thread exits, or
 * when the block ends, are dropped.
 *
 * Hopper (docs/emulation.md, "Hopper primitives"): mbarriers live in a
 * per-block table (the fg_mbar's bytes hold a tag and the index) with
 * arrival counts, phases and transaction bytes; a thread waiting on an
 * incomplete phase is blocked on the barrier until a phase completes.  A TMA
 * box is read at issue and kept in flight on its barrier; it lands (and
 * subtracts its bytes) when a thread waits on that barrier, or when no
 * thread can run and one is blocked on it.  wgmma operations are queued per
 * thread (accumulators NaN meanwhile) and computed for the whole warpgroup
 * by the last of its 128 threads to reach fg_wgmma_wait, from an "async
 * proxy" copy of shared memory that TMA writes and that takes the generic
 * bytes only after a fg_fence_proxy_async().  None of this costs a kernel
 * that does not use it more than a test per context switch.
 */
#define _GNU_SOURCE
#include "emu_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "emu_tmap.h"
#include "num.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define FG_EMU_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FG_EMU_FIBER_ASAN 1
#endif
#endif
#ifdef FG_EMU_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* On x86-64 a few lines of assembly switch contexts without the signal-mask
 * system call that swapcontext() makes (about 20 times faster at barriers);
 * elsewhere ucontext does everything.  Under AddressSanitizer the switches
 * are announced as fiber switches either way, and a stack is unpoisoned
 * before a thread starts on it and before it is unmapped (what ASan's
 * swapcontext interceptor does: a block's threads exit without unwinding,
 * leaving their frames' redzones in the shadow of a stack the next thread,
 * or the next mapping there, reuses). */
#if defined(__x86_64__) && !defined(FG_EMU_UCONTEXT_ONLY)
#define FG_EMU_ASM_SWITCH 1
/* Saves the callee-saved registers, MXCSR and the x87 control word on the
 * current stack, stores the stack pointer in *save, and resumes the context
 * whose stack pointer is `to`. */
void fg_emu_switch(void **save, void *to);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl fg_emu_switch\n"
        ".hidden fg_emu_switch\n"
        ".type fg_emu_switch, @function\n"
        "fg_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size fg_emu_switch, .-fg_emu_switch\n");
#endif

#define MAX_THREADS 1024
#define MAX_WARPS (MAX_THREADS / 32)
#define WARP_IN 10
#define WARP_OUT 4
#define CPQ_MAX 128          /* outstanding cp.async copies per thread */
#define MAX_MBARS 128        /* mbarriers initialized in one block */
#define MAX_WGROUPS (MAX_THREADS / 128)
#define WGQ_MAX 32           /* wgmma operations pending per thread */
#define MBAR_LIMIT 0xfffff   /* arrival count and tx-count range (PTX: 2^20 - 1) */
#define MBAR_MAGIC 0x6d626172u   /* "mbar": the high word of an initialized fg_mbar */

enum { T_UNSTARTED, T_READY, T_RUNNING, T_BAR, T_WARP, T_MBAR, T_WGWAIT, T_EXITED };

/* One wgmma queued by one thread: D = A*B (+ C) for its BN / 2 accumulators. */
typedef struct wgop {
    float *d;                /* the thread's accumulator array */
    uint64_t desc_a, desc_b;
    int kind, bn, trans_b, acc;
    unsigned group;          /* the thread's open group at issue */
    int chained;             /* C is the result of an earlier pending op on d */
    int signed_;             /* sig was taken at issue (warpgroup thread 0; operands in shared memory) */
    uint64_t sig;            /* hash of the A and B bytes the async proxy held at issue */
    float snap[128];         /* C as d held it at issue (acc and not chained) */
} wgop;

typedef struct worker {
#ifdef FG_EMU_ASM_SWITCH
    void *sp;                /* saved stack pointer */
#else
    ucontext_t uc;
#endif
    char *map;               /* mapping: guard page + stack */
    size_t mapsize;
    char *stack;
    size_t stacksize;
} worker;

typedef struct thread {
    fg_emu_tinfo info;       /* what the prelude reads */
    unsigned lin;
    int state;
    int nsync;               /* barriers passed */
    int ncp;                 /* cp.async copies queued (not landed) */
    unsigned cp_group;       /* the open cp.async group: groups committed so far */
    worker *w;
    /* Hopper */
    int mbar_wait;           /* the mbarrier this thread is blocked on (T_MBAR) */
    unsigned mbar_parity;
    int next_waiter;         /* next thread blocked on the same mbarrier, -1 */
    int wg_nops;             /* wgmma ops queued (not landed) */
    unsigned wg_group;       /* the open wgmma group: groups committed so far */
    int wg_fenced;           /* fg_wgmma_fence() called in this block */
    wgop *wgq;               /* WGQ_MAX, made on the thread's first wgmma */
} thread;

/* One TMA box copy in flight: its bytes as they will land. */
typedef struct tmacopy {
    struct tmacopy *next;
    unsigned char *dst;
    size_t bytes;
    unsigned char data[];
} tmacopy;

/* One mbarrier of the running block (its fg_mbar holds MBAR_MAGIC and the index). */
typedef struct mbar {
    void *addr;
    unsigned count;          /* expected arrivals per phase */
    unsigned pending;        /* arrivals still missing in the current phase */
    unsigned phase;          /* phases completed */
    long tx;                 /* transaction bytes expected and not yet delivered */
    tmacopy *head, *tail;    /* copies in flight, in issue order */
    int wait_head, wait_tail; /* blocked threads, in blocking order (-1: none) */
    int nwait;
} mbar;

/* The fg_wgmma_wait rendezvous of one warpgroup. */
typedef struct wgslot {
    int arrived, n;
    int waiting[128];
} wgslot;

/* Scratch of a landing wgmma (too big for a thread stack). */
typedef struct wgscratch {
    float a[64][16], b[256][16], c[64][256];   /* b[n][k]: both operands contiguous along k */
} wgscratch;

/* One queued cp.async copy. */
typedef struct cpcopy {
    void *dst;
    unsigned group;
    unsigned char data[16];
} cpcopy;

typedef struct warpslot {
    int arrived, nlanes, op, nin;
    int nwait;
    int waiting[32];         /* linear ids, arrival order */
    int arg[32];
    uint32_t in[32][WARP_IN];
    uint32_t out[32][WARP_OUT];
} warpslot;

struct fg_emu_sched {
    fg_emu_api api;
    size_t stack_bytes;
    worker *workers[MAX_THREADS];
    int nused;                  /* workers used in this block */
    thread threads[MAX_THREADS];
    warpslot warps[MAX_WARPS];
    cpcopy *cpq;                /* CPQ_MAX per thread, made on the first cp.async */
    int rq[MAX_THREADS];        /* ready queue (ring); each thread at most once */
    int rq_head, rq_len;
    int bar_wait[MAX_THREADS];
    int nbar;
    int nthreads, next_start, live;
#ifdef FG_EMU_ASM_SWITCH
    void *main_sp;
#else
    ucontext_t main;
#endif
    worker *starting;
    thread *cur;
    fg_emu_entry entry;
    const void *params;
    char *shared_begin, *shared_end;
    int strict;
    int failed;
    char err[1024];
    /* Hopper: mbarriers, TMA copies in flight, the async proxy's view of
     * shared memory (poisoned like the generic one; TMA writes both, a
     * landing wgmma reads it, refreshed from the generic bytes when some
     * thread fenced since the last refresh), warpgroup rendezvous. */
    mbar mbars[MAX_MBARS];
    int nmbar;
    int mbar_nwait;             /* threads blocked on mbarriers */
    long tma_inflight;
    unsigned char *view;
    unsigned fence_epoch, view_epoch;
    wgslot wgs[MAX_WGROUPS];
    wgscratch *wgs_scratch;
#ifdef FG_EMU_FIBER_ASAN
    const void *main_bottom;
    size_t main_size;
#endif
};

static __thread fg_emu_sched *tls_sched;

/* ---- context switches ---- */

static void to_worker(fg_emu_sched *s, worker *w)
{
#ifdef FG_EMU_FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, w->stack, w->stacksize);
#endif
#ifdef FG_EMU_ASM_SWITCH
    fg_emu_switch(&s->main_sp, w->sp);
#else
    swapcontext(&s->main, &w->uc);
#endif
#ifdef FG_EMU_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* Switches from worker w back to the scheduler; exiting: never resumed. */
static void to_main(fg_emu_sched *s, worker *w, int exiting)
{
#ifdef FG_EMU_FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(exiting ? NULL : &fake, s->main_bottom, s->main_size);
#else
    (void)exiting;
#endif
#ifdef FG_EMU_ASM_SWITCH
    fg_emu_switch(&w->sp, s->main_sp);
#else
    swapcontext(&w->uc, &s->main);
#endif
#ifdef FG_EMU_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &s->main_bottom, &s->main_size);
#endif
}

/* ---- errors ---- */

/* Records the first failure, naming the current block and thread. */
static void record_failure(fg_emu_sched *s, const char *msg)
{
    if (s->failed)
        return;
    s->failed = 1;
    const fg_emu_api *a = &s->api;
    if (s->cur)
        snprintf(s->err, sizeof s->err, "block (%u,%u,%u) thread (%u,%u,%u): %s", a->bid[0], a->bid[1], a->bid[2],
                 s->cur->info.tid[0], s->cur->info.tid[1], s->cur->info.tid[2], msg);
    else
        snprintf(s->err, sizeof s->err, "block (%u,%u,%u): %s", a->bid[0], a->bid[1], a->bid[2], msg);
}

/* Called from kernel code: records msg and abandons the running thread. */
static void api_fail(const char *msg)
{
    fg_emu_sched *s = tls_sched;
    record_failure(s, msg);
    to_main(s, s->cur->w, 1);
    abort(); /* not reached: a failed launch never resumes its threads */
}

/* ---- scheduling ---- */

static void rq_push(fg_emu_sched *s, int lin)
{
    s->rq[(s->rq_head + s->rq_len++) % MAX_THREADS] = lin;
    s->threads[lin].state = T_READY;
}

static void release_barrier(fg_emu_sched *s)
{
    for (int i = 0; i < s->nbar; i++)
        rq_push(s, s->bar_wait[i]);
    s->nbar = 0;
}

/* The running thread t waits: back to the scheduler until it is resumed. */
static void yield(fg_emu_sched *s, thread *t)
{
    to_main(s, t->w, 0);
}

static void thread_exit(fg_emu_sched *s, thread *t)
{
    t->state = T_EXITED;
    t->ncp = 0;             /* copies never waited for do not land */
    t->wg_nops = 0;         /* nor wgmma operations */
    s->live--;
    if (s->nbar > 0 && s->nbar == s->live)
        release_barrier(s);
}

static void worker_main(void)
{
    fg_emu_sched *s = tls_sched;
    worker *w = s->starting;
#ifdef FG_EMU_FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &s->main_bottom, &s->main_size);
#endif
    while (s->next_start < s->nthreads) {
        thread *t = &s->threads[s->next_start++];
        t->w = w;
        t->state = T_RUNNING;
        s->cur = t;
        s->api.cur = &t->info;
        s->entry(s->params);
        thread_exit(s, t);
    }
    to_main(s, w, 1);
    abort(); /* not reached */
}

static void api_sync(void)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    t->nsync++;
    if (s->nbar + 1 == s->live) {   /* last to arrive: release and go on */
        release_barrier(s);
        return;
    }
    s->bar_wait[s->nbar++] = (int)t->lin;
    t->state = T_BAR;
    yield(s, t);
}

static const char *wop_name(int op)
{
    switch (op) {
    case FG_EMU_WOP_SHFL_XOR: return "fg_shfl_xor";
    case FG_EMU_WOP_SHFL_DOWN: return "fg_shfl_down";
    case FG_EMU_WOP_SHFL_IDX: return "fg_shfl_idx";
    case FG_EMU_WOP_MMA_F16: return "fg_mma_16816_f16";
    case FG_EMU_WOP_MMA_BF16: return "fg_mma_16816_bf16";
    case FG_EMU_WOP_LDMATRIX_X4: return "fg_ldmatrix_x4";
    case FG_EMU_WOP_LDMATRIX_X4_TRANS: return "fg_ldmatrix_x4_trans";
    case FG_EMU_WOP_MMA_TF32: return "fg_mma_1688_tf32";
    default: return "an unknown warp collective";
    }
}

/* D = A*B + C for one m16n8k16 tile from the 32 lanes' fragments (PTX ISA
 * layouts for .row.col with f16/bf16 A, B and f32 C, D). */
static void warp_mma(warpslot *ws, int bf16)
{
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, tg = lane & 3;
        const uint32_t *in = ws->in[lane];
        for (int h = 0; h < 2; h++) {
            int col = tg * 2 + h;
#define CVT(word) (bf16 ? fg_bf16_to_f32((uint16_t)((word) >> (16 * h))) : fg_f16_to_f32((uint16_t)((word) >> (16 * h))))
            A[g][col] = CVT(in[0]);
            A[g + 8][col] = CVT(in[1]);
            A[g][col + 8] = CVT(in[2]);
            A[g + 8][col + 8] = CVT(in[3]);
            B[col][g] = CVT(in[4]);
            B[col + 8][g] = CVT(in[5]);
#undef CVT
        }
        float c[4];
        memcpy(c, &in[6], sizeof c);
        C[g][tg * 2] = c[0];
        C[g][tg * 2 + 1] = c[1];
        C[g + 8][tg * 2] = c[2];
        C[g + 8][tg * 2 + 1] = c[3];
    }
    float D[16][8];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            float acc = 0.0f;   /* products are exact in float */
            for (int k = 0; k < 16; k++)
                acc += A[i][k] * B[k][j];
            D[i][j] = acc + C[i][j];
        }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, tg = lane & 3;
        float d[4] = {D[g][tg * 2], D[g][tg * 2 + 1], D[g + 8][tg * 2], D[g + 8][tg * 2 + 1]};
        memcpy(ws->out[lane], d, sizeof d);
    }
}

/* D = A*B + C for one m16n8k8 tile with tf32 A, B (the prelude checked that
 * they are tf32 values) and f32 C, D; PTX ISA fragment layouts for .row.col:
 * g = lane / 4, t = lane % 4; A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
 * a3 (g + 8, t + 4); B b0 (t, g), b1 (t + 4, g); C, D as m16n8k16.
 * Products of two tf32 values are exact in float; the sum runs along k. */
static void warp_mma_tf32(warpslot *ws)
{
    float A[16][8], B[8][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, tg = lane & 3;
        const uint32_t *in = ws->in[lane];
        float v[10];
        memcpy(v, in, sizeof v);
        A[g][tg] = v[0];
        A[g + 8][tg] = v[1];
        A[g][tg + 4] = v[2];
        A[g + 8][tg + 4] = v[3];
        B[tg][g] = v[4];
        B[tg + 4][g] = v[5];
        C[g][tg * 2] = v[6];
        C[g][tg * 2 + 1] = v[7];
        C[g + 8][tg * 2] = v[8];
        C[g + 8][tg * 2 + 1] = v[9];
    }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, tg = lane & 3;
        float d[4];
        for (int i = 0; i < 4; i++) {
            int row = g + 8 * (i / 2), col = tg * 2 + i % 2;
            float acc = 0.0f;
            for (int k = 0; k < 8; k++)
                acc += A[row][k] * B[k][col];
            d[i] = acc + C[row][col];
        }
        memcpy(ws->out[lane], d, sizeof d);
    }
}

/* ldmatrix.x4 (PTX ISA, "Warp-level matrix load instruction: ldmatrix"):
 * lane 8i + j deposited row j of matrix i (8 b16 elements, 4 words).  Lane l
 * receives, in register i, matrix i's elements (l/4, 2(l%4)) and
 * (l/4, 2(l%4) + 1), low half first; transposed, (2(l%4), l/4) and
 * (2(l%4) + 1, l/4). */
static void warp_ldmatrix(warpslot *ws, int trans)
{
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            if (!trans) {
                ws->out[lane][i] = ws->in[i * 8 + lane / 4][lane % 4];
                continue;
            }
            int row = 2 * (lane % 4), col = lane / 4;
            uint32_t lo = (ws->in[i * 8 + row][col / 2] >> (16 * (col % 2))) & 0xffffu;
            uint32_t hi = (ws->in[i * 8 + row + 1][col / 2] >> (16 * (col % 2))) & 0xffffu;
            ws->out[lane][i] = lo | hi << 16;
        }
}

static void warp_compute(warpslot *ws)
{
    int nl = ws->nlanes;
    switch (ws->op) {
    case FG_EMU_WOP_SHFL_XOR:
    case FG_EMU_WOP_SHFL_DOWN:
    case FG_EMU_WOP_SHFL_IDX:
        for (int l = 0; l < nl; l++) {
            long src = ws->op == FG_EMU_WOP_SHFL_XOR    ? (long)(l ^ ws->arg[l])
                       : ws->op == FG_EMU_WOP_SHFL_DOWN ? (long)l + ws->arg[l]
                                                        : (long)(ws->arg[l] & 31);
            ws->out[l][0] = src >= 0 && src < nl ? ws->in[src][0] : ws->in[l][0];
        }
        break;
    case FG_EMU_WOP_MMA_F16: warp_mma(ws, 0); break;
    case FG_EMU_WOP_MMA_BF16: warp_mma(ws, 1); break;
    case FG_EMU_WOP_LDMATRIX_X4: warp_ldmatrix(ws, 0); break;
    case FG_EMU_WOP_LDMATRIX_X4_TRANS: warp_ldmatrix(ws, 1); break;
    case FG_EMU_WOP_MMA_TF32: warp_mma_tf32(ws); break;
    }
}

static void api_warp(int op, int arg, const uint32_t *in, int nin, uint32_t *out, int nout)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    warpslot *ws = &s->warps[t->info.warp];
    int lane = (int)t->info.lane;
    char msg[256];
    if (op < FG_EMU_WOP_SHFL_XOR || op > FG_EMU_WOP_MMA_TF32 || nin > WARP_IN || nout > WARP_OUT || nin < 0 ||
        nout < 0)
        api_fail("malformed warp collective call (prelude and runtime out of step)");
    if (op >= FG_EMU_WOP_MMA_F16 && ws->nlanes != 32) {
        snprintf(msg, sizeof msg, "%s needs a full warp, but warp %u has %d threads", wop_name(op), t->info.warp,
                 ws->nlanes);
        api_fail(msg);
    }
    if (ws->arrived == 0) {
        ws->op = op;
        ws->nin = nin;
    } else if (ws->op != op || ws->nin != nin) {
        snprintf(msg, sizeof msg, "warp divergence: lane %d calls %s while %d lane(s) of warp %u wait in %s", lane,
                 wop_name(op), ws->arrived, t->info.warp, wop_name(ws->op));
        api_fail(msg);
    }
    memcpy(ws->in[lane], in, (size_t)nin * 4);
    ws->arg[lane] = arg;
    if (++ws->arrived < ws->nlanes) {
        ws->waiting[ws->nwait++] = (int)t->lin;
        t->state = T_WARP;
        yield(s, t);
    } else {
        warp_compute(ws);
        for (int i = 0; i < ws->nwait; i++)
            rq_push(s, ws->waiting[i]);
        ws->nwait = 0;
        ws->arrived = 0;
    }
    memcpy(out, ws->out[lane], (size_t)nout * 4);
}

/* ---- cp.async ---- */

static void api_cp_async(void *dst, const void *src)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    if (!s->cpq)
        s->cpq = fg_xcalloc((size_t)MAX_THREADS * CPQ_MAX, sizeof *s->cpq);
    if (t->ncp == CPQ_MAX)
        api_fail("more than 128 cp.async copies outstanding in one thread (a wait is missing)");
    cpcopy *c = &s->cpq[(size_t)t->lin * CPQ_MAX + (size_t)t->ncp++];
    c->dst = dst;
    c->group = t->cp_group;
    if (src)
        memcpy(c->data, src, sizeof c->data);
    else
        memset(c->data, 0, sizeof c->data);
}

static void api_cp_commit(void)
{
    tls_sched->cur->cp_group++;
}

static void api_cp_wait(int n)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    if (n < 0) {            /* wait_all: commit, then wait for every group */
        t->cp_group++;
        n = 0;
    }
    if (!t->ncp)
        return;
    cpcopy *q = &s->cpq[(size_t)t->lin * CPQ_MAX];
    int keep = 0;
    for (int i = 0; i < t->ncp; i++) {
        if ((long)q[i].group < (long)t->cp_group - n)
            memcpy(q[i].dst, q[i].data, sizeof q[i].data);   /* lands, in issue order */
        else
            q[keep++] = q[i];
    }
    t->ncp = keep;
}

/* ---- Hopper: mbarriers, TMA, the async proxy, wgmma ----
 * The emulated shared address of a pointer is its offset from the start of
 * the kernel's shared arrays (the analogue of the device's shared window):
 * swizzles, alignments and wgmma descriptors are in terms of it. */

static int in_shared(const fg_emu_sched *s, const void *p, size_t bytes)
{
    const char *c = p;
    return s->shared_begin && c >= s->shared_begin && c <= s->shared_end &&
           bytes <= (size_t)(s->shared_end - c);
}

static unsigned long soff(const fg_emu_sched *s, const void *p)
{
    return (unsigned long)((const char *)p - s->shared_begin);
}

/* The mbarrier at bar, or the launch fails naming fn. */
static mbar *mbar_lookup(fg_emu_sched *s, void *bar, const char *fn)
{
    char msg[256];
    if (!in_shared(s, bar, 8) || (uintptr_t)bar % 8) {
        snprintf(msg, sizeof msg, "%s: the mbarrier is not an 8-byte aligned object in shared memory (FG_SHARED)", fn);
        api_fail(msg);
    }
    uint64_t v;
    memcpy(&v, bar, 8);
    unsigned idx = (unsigned)(v & 0xffffffffu);
    if ((unsigned)(v >> 32) != MBAR_MAGIC || idx >= (unsigned)s->nmbar || s->mbars[idx].addr != bar) {
        snprintf(msg, sizeof msg,
                 "%s: the mbarrier at shared offset 0x%lx is not initialized (no fg_mbar_init in this block, or its "
                 "bytes were overwritten)",
                 fn, soff(s, bar));
        api_fail(msg);
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
        rq_push(s, (int)t->lin);
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
        memcpy(async_view(s) + soff(s, c->dst), c->data, c->bytes);
        b->tx -= (long)c->bytes;
        s->tma_inflight--;
        free(c);
        if (b->pending == 0 && b->tx == 0)
            mbar_complete(s, b);
    }
}

/* Copies in flight land on every barrier someone is blocked on (the
 * scheduler calls this only when no thread can run). */
static void deliver_awaited(fg_emu_sched *s)
{
    for (int i = 0; i < s->nmbar; i++)
        if (s->mbars[i].nwait > 0 && s->mbars[i].head)
            mbar_deliver(s, &s->mbars[i]);
}

static void api_mbar_init(void *bar, unsigned count)
{
    fg_emu_sched *s = tls_sched;
    char msg[200];
    if (!in_shared(s, bar, 8) || (uintptr_t)bar % 8)
        api_fail("fg_mbar_init: the mbarrier is not an 8-byte aligned object in shared memory (FG_SHARED)");
    if (count < 1 || count > MBAR_LIMIT) {
        snprintf(msg, sizeof msg, "fg_mbar_init: arrival count %u (1 to %u allowed)", count, MBAR_LIMIT);
        api_fail(msg);
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
                     soff(s, bar), b->nwait ? "threads wait on it" : "TMA copies are in flight on it");
            api_fail(msg);
        }
    } else {
        if (s->nmbar == MAX_MBARS)
            api_fail("fg_mbar_init: more than 128 mbarriers in one block");
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

static void api_mbar_arrive(void *bar, int expect, unsigned tx)
{
    fg_emu_sched *s = tls_sched;
    const char *fn = expect ? "fg_mbar_arrive_expect_tx" : "fg_mbar_arrive";
    mbar *b = mbar_lookup(s, bar, fn);
    char msg[300];
    if (expect) {
        if (tx > MBAR_LIMIT || b->tx + (long)tx > MBAR_LIMIT) {
            snprintf(msg, sizeof msg,
                     "%s: %u transaction bytes on the mbarrier at shared offset 0x%lx exceed the tx-count range "
                     "(%ld outstanding, at most %u)",
                     fn, tx, soff(s, bar), b->tx, MBAR_LIMIT);
            api_fail(msg);
        }
        b->tx += tx;
    }
    if (b->pending == 0) {
        snprintf(msg, sizeof msg,
                 "%s: the mbarrier at shared offset 0x%lx has no arrival left in phase %u (count %u, all arrived; "
                 "%ld transaction bytes outstanding): more arrivals than its count before the phase completed",
                 fn, soff(s, bar), b->phase, b->count, b->tx);
        api_fail(msg);
    }
    b->pending--;
    if (b->pending == 0 && b->tx == 0) {
        if (b->head) {
            snprintf(msg, sizeof msg,
                     "%s: the phase of the mbarrier at shared offset 0x%lx would complete while TMA copies on it "
                     "are in flight whose bytes no fg_mbar_arrive_expect_tx announced",
                     fn, soff(s, bar));
            api_fail(msg);
        }
        mbar_complete(s, b);
    }
}

static void api_mbar_wait(void *bar, unsigned parity)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    mbar *b = mbar_lookup(s, bar, "fg_mbar_wait");
    if (parity > 1)
        api_fail("fg_mbar_wait: the phase parity must be 0 or 1");
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
        yield(s, t);
    }
}

/* cp.async.bulk.tensor.<rank>d of the box at coordinates c[0..rank) (tmap.h):
 * reads it now, element by element along axis 0 in 16-byte chunks, the
 * landed elements packed axis 0 fastest, out-of-range ones zero; lands it
 * when the barrier is waited on. */
static void api_tma_load(void *dst, const void *map, int rank, const int *coord, void *bar)
{
    fg_emu_sched *s = tls_sched;
    char msg[300], fn[32];
    snprintf(fn, sizeof fn, "fg_tma_load_%dd", rank);
    fg_tmap_desc d;
    if (fg_emu_tmap_decode(map, &d) != 0) {
        snprintf(msg, sizeof msg, "%s: the tensor map was not written by fg_emu_tmap_encode (or its bytes were changed)",
                 fn);
        api_fail(msg);
    }
    if ((unsigned)rank != d.rank) {
        snprintf(msg, sizeof msg, "%s: the tensor map has rank %u", fn, d.rank);
        api_fail(msg);
    }
    mbar *b = mbar_lookup(s, bar, fn);
    size_t inner = (size_t)d.box[0] * d.elem_bytes, rows = 1;
    for (unsigned i = 1; i < d.rank; i++)
        rows *= fg_tmap_box_count(&d, i);
    size_t bytes = inner * rows;
    unsigned long align = d.swizzle ? 8ul * (unsigned long)d.swizzle : 128ul;
    if (!in_shared(s, dst, bytes)) {
        snprintf(msg, sizeof msg, "%s: the %zu-byte box does not fit in shared memory at the destination", fn, bytes);
        api_fail(msg);
    }
    if (soff(s, dst) % align) {
        snprintf(msg, sizeof msg, "%s: the shared destination (offset 0x%lx) is not %lu-byte aligned (%s)", fn,
                 soff(s, dst), align,
                 d.swizzle ? "a swizzled box starts its pattern at the destination" : "cp.async.bulk.tensor");
        api_fail(msg);
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

static void api_fence_proxy_async(void)
{
    tls_sched->fence_epoch++;
}

/* The warpgroup of the running thread (fails unless all 128 threads exist). */
static int warpgroup_of(fg_emu_sched *s, thread *t, const char *fn)
{
    int wg = (int)(t->lin / 128);
    if ((wg + 1) * 128 > s->nthreads) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s needs a full warpgroup of 128 threads, but warpgroup %d has %d", fn, wg,
                 s->nthreads - wg * 128);
        api_fail(msg);
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

static void api_wgmma(int kind, int bn, int trans_b, uint64_t desc_a, uint64_t desc_b, int acc, float *d)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    char msg[256];
    if ((kind != FG_EMU_WGMMA_F16 && kind != FG_EMU_WGMMA_BF16 && kind != FG_EMU_WGMMA_TF32) || bn < 8 || bn > 256 ||
        bn % 8 || (trans_b != 0 && trans_b != 1) || !d)
        api_fail("malformed wgmma call (prelude and runtime out of step)");
    const char *fn = wgmma_name(kind);
    if (kind == FG_EMU_WGMMA_TF32 && trans_b)
        api_fail("fg_wgmma_tf32: B must be K-major (wgmma transposes only 16-bit operands)");
    warpgroup_of(s, t, fn);
    if (!t->wg_fenced) {
        snprintf(msg, sizeof msg, "%s: no fg_wgmma_fence() before this thread's first wgmma", fn);
        api_fail(msg);
    }
    if (!t->wgq)
        t->wgq = fg_xcalloc(WGQ_MAX, sizeof *t->wgq);
    if (t->wg_nops == WGQ_MAX) {
        snprintf(msg, sizeof msg,
                 "%s: more than %d wgmma operations pending in one thread (a fg_wgmma_wait is missing)", fn, WGQ_MAX);
        api_fail(msg);
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
                api_fail(msg);
            }
            op->chained = op->acc;
            break;
        }
    if (op->acc && !op->chained)
        memcpy(op->snap, d, (size_t)bn / 2 * sizeof *d);
    /* the operands must already be what the wgmma reads at its wait (the
     * device may read them any time in between) */
    op->signed_ = t->lin % 128 == 0 && operand_sig(s, op, &op->sig) == 0;
    t->wg_nops++;
    poison_floats(d, bn / 2);   /* undefined until the covering wait */
}

static void api_wgmma_fence(void)
{
    tls_sched->cur->wg_fenced = 1;
}

static void api_wgmma_commit(void)
{
    tls_sched->cur->wg_group++;
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

static void api_wgmma_wait(int n)
{
    fg_emu_sched *s = tls_sched;
    thread *t = s->cur;
    char msg[400];
    if (n < 0 || n > 7)
        api_fail("fg_wgmma_wait: N must be 0 to 7");
    int wg = warpgroup_of(s, t, "fg_wgmma_wait");
    wgslot *w = &s->wgs[wg];
    if (w->arrived == 0) {
        w->n = n;
    } else if (w->n != n) {
        snprintf(msg, sizeof msg, "warpgroup divergence: fg_wgmma_wait<%d> while %d thread(s) of warpgroup %d wait in "
                 "fg_wgmma_wait<%d>", n, w->arrived, wg, w->n);
        api_fail(msg);
    }
    if (++w->arrived < 128) {
        w->waiting[w->arrived - 1] = (int)t->lin;
        t->state = T_WGWAIT;
        yield(s, t);
        return;
    }
    w->arrived = 0;
    if (wgmma_land(s, wg, n, msg, sizeof msg))
        api_fail(msg);
    for (int i = 0; i < 127; i++)
        rq_push(s, w->waiting[i]);
}

/* ---- workers ---- */

static worker *worker_get(fg_emu_sched *s)
{
    worker *w = s->workers[s->nused];
    if (!w) {
        long page = sysconf(_SC_PAGESIZE);
        size_t sz = (s->stack_bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
        char *m = mmap(NULL, sz + (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        if (mprotect(m, (size_t)page, PROT_NONE) != 0) {
            munmap(m, sz + (size_t)page);
            return NULL;
        }
        w = fg_xcalloc(1, sizeof *w);
        w->map = m;
        w->mapsize = sz + (size_t)page;
        w->stack = m + page;
        w->stacksize = sz;
        s->workers[s->nused] = w;
    }
    s->nused++;
#ifdef FG_EMU_FIBER_ASAN
    __asan_unpoison_memory_region(w->stack, w->stacksize);
#endif
#ifdef FG_EMU_ASM_SWITCH
    /* A fresh stack as fg_emu_switch leaves it: control words, six zero
     * registers, then worker_main as the return address, placed so that
     * worker_main starts with the stack alignment of a called function. */
    uint64_t *top = (uint64_t *)(w->stack + w->stacksize);
    uint64_t *sp = top - 2 - 7;
    memset(sp, 0, 9 * sizeof *sp);
    sp[0] = 0x1f80u | ((uint64_t)0x37fu << 32);   /* MXCSR and x87 control word defaults */
    sp[7] = (uint64_t)(uintptr_t)worker_main;
    w->sp = sp;
#else
    getcontext(&w->uc);
    w->uc.uc_stack.ss_sp = w->stack;
    w->uc.uc_stack.ss_size = w->stacksize;
    w->uc.uc_link = &s->main;
    makecontext(&w->uc, worker_main, 0);
#endif
    return w;
}

fg_emu_sched *fg_emu_sched_new(size_t stack_bytes)
{
    fg_emu_sched *s = fg_xcalloc(1, sizeof *s);
    if (!stack_bytes)
        stack_bytes = (size_t)64 * 1024;
    s->stack_bytes = stack_bytes;
    s->api.version = FG_EMU_API_VERSION;
    s->api.size = sizeof s->api;
    s->api.sync = api_sync;
    s->api.warp = api_warp;
    s->api.fail = api_fail;
    s->api.cp_async = api_cp_async;
    s->api.cp_commit = api_cp_commit;
    s->api.cp_wait = api_cp_wait;
    s->api.mbar_init = api_mbar_init;
    s->api.mbar_arrive = api_mbar_arrive;
    s->api.mbar_wait = api_mbar_wait;
    s->api.tma_load = api_tma_load;
    s->api.fence_proxy_async = api_fence_proxy_async;
    s->api.wgmma = api_wgmma;
    s->api.wgmma_fence = api_wgmma_fence;
    s->api.wgmma_commit = api_wgmma_commit;
    s->api.wgmma_wait = api_wgmma_wait;
    return s;
}

/* Frees the TMA copies still in flight (they never land) and forgets the
 * block's mbarriers. */
static void drop_tma(fg_emu_sched *s)
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

void fg_emu_sched_free(fg_emu_sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < MAX_THREADS; i++)
        if (s->workers[i]) {
#ifdef FG_EMU_FIBER_ASAN
            /* Clean shadow for whatever is mapped here next (dlopen maps
             * without ASan seeing it). */
            __asan_unpoison_memory_region(s->workers[i]->stack, s->workers[i]->stacksize);
#endif
            munmap(s->workers[i]->map, s->workers[i]->mapsize);
            free(s->workers[i]);
        }
    free(s->cpq);
    for (int i = 0; i < MAX_THREADS; i++)
        free(s->threads[i].wgq);
    drop_tma(s);
    free(s->view);
    free(s->wgs_scratch);
    free(s);
}

fg_emu_api *fg_emu_sched_api(fg_emu_sched *s)
{
    return &s->api;
}

void fg_emu_sched_set_shared(fg_emu_sched *s, void *begin, void *end)
{
    s->shared_begin = begin;
    s->shared_end = end;
}

void fg_emu_sched_set_strict(fg_emu_sched *s, int strict)
{
    s->strict = strict;
}

/* Describes why no thread of the block can make progress. */
static void report_deadlock(fg_emu_sched *s)
{
    int nbar = 0, nwarp = 0, nmbar = 0, nwg = 0;
    for (int i = 0; i < s->nthreads; i++) {
        nbar += s->threads[i].state == T_BAR;
        nwarp += s->threads[i].state == T_WARP;
        nmbar += s->threads[i].state == T_MBAR;
        nwg += s->threads[i].state == T_WGWAIT;
    }
    char msg[900];
    int n = snprintf(msg, sizeof msg, "deadlock: %d thread(s) wait at fg_sync(), %d in a warp collective", nbar, nwarp);
    s->cur = NULL;
    if (nmbar || nwg)
        n += snprintf(msg + n, sizeof msg - (size_t)n, ", %d in fg_wgmma_wait, %d on an mbarrier", nwg, nmbar);
    for (int i = 0; i < s->nmbar && n < (int)sizeof msg - 300; i++) {
        const mbar *b = &s->mbars[i];
        if (!b->nwait)
            continue;
        thread *t = &s->threads[b->wait_head];
        n += snprintf(msg + n, sizeof msg - (size_t)n,
                      "; the mbarrier at shared offset 0x%lx is awaited (parity %u) by this thread and %d other(s): "
                      "phase %u incomplete, %u of %u arrival(s) missing, %ld transaction byte(s) expected but not "
                      "delivered",
                      soff(s, b->addr), t->mbar_parity, b->nwait - 1, b->phase, b->pending, b->count, b->tx);
        s->cur = t;   /* the message names the first waiter */
        break;
    }
    for (int w = 0; w < MAX_WGROUPS && n < (int)sizeof msg - 200; w++)
        if (s->wgs[w].arrived > 0) {
            n += snprintf(msg + n, sizeof msg - (size_t)n,
                          "; warpgroup %d: %d of 128 threads in fg_wgmma_wait, the others exited or wait elsewhere", w,
                          s->wgs[w].arrived);
            break;
        }
    for (int w = 0; w < (s->nthreads + 31) / 32 && n < (int)sizeof msg - 100; w++) {
        warpslot *ws = &s->warps[w];
        if (ws->arrived > 0) {
            n += snprintf(msg + n, sizeof msg - (size_t)n,
                          "; warp %d: %d of %d lanes in %s, the others exited or wait at fg_sync()", w, ws->arrived,
                          ws->nlanes, wop_name(ws->op));
            break;
        }
    }
    record_failure(s, msg);
}

/* Runs one block to completion; 0 or -1 (s->failed). */
static int run_block(fg_emu_sched *s)
{
    int n = s->nthreads;
    if (s->shared_begin && s->shared_end > s->shared_begin)
        memset(s->shared_begin, 0xff, (size_t)(s->shared_end - s->shared_begin));
    s->next_start = 0;
    s->live = n;
    s->nbar = 0;
    s->rq_head = s->rq_len = 0;
    s->nused = 0;
    s->cur = NULL;
    for (int i = 0; i < n; i++) {
        s->threads[i].state = T_UNSTARTED;
        s->threads[i].nsync = 0;
        s->threads[i].ncp = 0;
        s->threads[i].cp_group = 0;
        s->threads[i].mbar_wait = s->threads[i].next_waiter = -1;
        s->threads[i].wg_nops = 0;
        s->threads[i].wg_group = 0;
        s->threads[i].wg_fenced = 0;
    }
    for (int w = 0; w < (n + 31) / 32; w++) {
        s->warps[w].arrived = 0;
        s->warps[w].nwait = 0;
    }
    for (int w = 0; w < MAX_WGROUPS; w++)
        s->wgs[w].arrived = 0;
    drop_tma(s);
    if (s->view)
        memset(s->view, 0xff, (size_t)(s->shared_end - s->shared_begin));
    s->fence_epoch = s->view_epoch = 0;
    while (s->live > 0 && !s->failed) {
        if (s->rq_len > 0) {
            thread *t = &s->threads[s->rq[s->rq_head]];
            s->rq_head = (s->rq_head + 1) % MAX_THREADS;
            s->rq_len--;
            t->state = T_RUNNING;
            s->cur = t;
            s->api.cur = &t->info;
            to_worker(s, t->w);
        } else if (s->next_start < n) {
            worker *w = worker_get(s);
            if (!w) {
                s->cur = NULL;
                record_failure(s, "cannot map a thread stack (out of memory?)");
                break;
            }
            s->starting = w;
            to_worker(s, w);
        } else if (s->mbar_nwait > 0 && s->tma_inflight > 0) {
            deliver_awaited(s);   /* nothing else can run: copies in flight land */
            if (s->rq_len == 0)
                report_deadlock(s);
        } else {
            report_deadlock(s);
        }
    }
    drop_tma(s);
    if (s->failed)
        return -1;
    if (s->strict)
        for (int i = 1; i < n; i++)
            if (s->threads[i].nsync != s->threads[0].nsync) {
                char msg[200];
                snprintf(msg, sizeof msg, "barrier divergence: this thread passed %d fg_sync() call(s), thread 0 passed %d",
                         s->threads[i].nsync, s->threads[0].nsync);
                s->cur = &s->threads[i];
                record_failure(s, msg);
                return -1;
            }
    return 0;
}

int fg_emu_sched_run(fg_emu_sched *s, fg_emu_entry entry, const void *params, const unsigned grid[3],
                     const unsigned block[3], char *err, size_t errsize)
{
    unsigned n = block[0] * block[1] * block[2];
    if (n == 0 || n > MAX_THREADS) {
        snprintf(err, errsize, "block of %u threads (1 to %d allowed)", n, MAX_THREADS);
        return -1;
    }
    fg_emu_sched *saved = tls_sched;
    tls_sched = s;
    s->entry = entry;
    s->params = params;
    s->nthreads = (int)n;
    s->failed = 0;
    s->err[0] = 0;
    for (int i = 0; i < 3; i++) {
        s->api.bdim[i] = block[i];
        s->api.gdim[i] = grid[i];
    }
    for (unsigned i = 0; i < n; i++) {
        thread *t = &s->threads[i];
        t->lin = i;
        t->info.tid[0] = i % block[0];
        t->info.tid[1] = i / block[0] % block[1];
        t->info.tid[2] = i / (block[0] * block[1]);
        t->info.lane = i & 31;
        t->info.warp = i >> 5;
    }
    for (unsigned w = 0; w < (n + 31) / 32; w++)
        s->warps[w].nlanes = (int)(n - w * 32 < 32 ? n - w * 32 : 32);
    int rc = 0;
    for (unsigned z = 0; z < grid[2] && rc == 0; z++)
        for (unsigned y = 0; y < grid[1] && rc == 0; y++)
            for (unsigned x = 0; x < grid[0] && rc == 0; x++) {
                s->api.bid[0] = x;
                s->api.bid[1] = y;
                s->api.bid[2] = z;
                rc = run_block(s);
            }
    if (rc)
        snprintf(err, errsize, "%s", s->err);
    s->api.cur = NULL;
    tls_sched = saved;
    return rc;
}
