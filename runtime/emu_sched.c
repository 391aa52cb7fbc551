/*
 * emu_sched.c -- the emulation scheduler (see emu_sched.h; internals shared
 * with emu_hopper.c in emu_sched_impl.h).
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
 * The Hopper async machinery (mbarriers, TMA, the async proxy, wgmma) is
 * emu_hopper.c, behind the private emu_sched_impl.h; it blocks and wakes
 * threads through this file's ready queue.  None of it costs a kernel that
 * does not use it more than a test per context switch.
 */
#define _GNU_SOURCE
#include "emu_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "emu_sched_impl.h"
#include "num.h"
#include "util.h"

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
#ifdef FG_EMU_ASM_SWITCH
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

__thread fg_emu_sched *fg_emu_tls_sched;

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
void fg_emu_api_fail(const char *msg)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    record_failure(s, msg);
    to_main(s, s->cur->w, 1);
    abort(); /* not reached: a failed launch never resumes its threads */
}

/* ---- scheduling ---- */

void fg_emu_rq_push(fg_emu_sched *s, int lin)
{
    s->rq[(s->rq_head + s->rq_len++) % MAX_THREADS] = lin;
    s->threads[lin].state = T_READY;
}

static void release_barrier(fg_emu_sched *s)
{
    for (int i = 0; i < s->nbar; i++)
        fg_emu_rq_push(s, s->bar_wait[i]);
    s->nbar = 0;
}

/* The running thread t waits: back to the scheduler until it is resumed. */
void fg_emu_yield(fg_emu_sched *s, thread *t)
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
    fg_emu_sched *s = fg_emu_tls_sched;
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
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    t->nsync++;
    if (s->nbar + 1 == s->live) {   /* last to arrive: release and go on */
        release_barrier(s);
        return;
    }
    s->bar_wait[s->nbar++] = (int)t->lin;
    t->state = T_BAR;
    fg_emu_yield(s, t);
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
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    warpslot *ws = &s->warps[t->info.warp];
    int lane = (int)t->info.lane;
    char msg[256];
    if (op < FG_EMU_WOP_SHFL_XOR || op > FG_EMU_WOP_MMA_TF32 || nin > WARP_IN || nout > WARP_OUT || nin < 0 ||
        nout < 0)
        fg_emu_api_fail("malformed warp collective call (prelude and runtime out of step)");
    if (op >= FG_EMU_WOP_MMA_F16 && ws->nlanes != 32) {
        snprintf(msg, sizeof msg, "%s needs a full warp, but warp %u has %d threads", wop_name(op), t->info.warp,
                 ws->nlanes);
        fg_emu_api_fail(msg);
    }
    if (ws->arrived == 0) {
        ws->op = op;
        ws->nin = nin;
    } else if (ws->op != op || ws->nin != nin) {
        snprintf(msg, sizeof msg, "warp divergence: lane %d calls %s while %d lane(s) of warp %u wait in %s", lane,
                 wop_name(op), ws->arrived, t->info.warp, wop_name(ws->op));
        fg_emu_api_fail(msg);
    }
    memcpy(ws->in[lane], in, (size_t)nin * 4);
    ws->arg[lane] = arg;
    if (++ws->arrived < ws->nlanes) {
        ws->waiting[ws->nwait++] = (int)t->lin;
        t->state = T_WARP;
        fg_emu_yield(s, t);
    } else {
        warp_compute(ws);
        for (int i = 0; i < ws->nwait; i++)
            fg_emu_rq_push(s, ws->waiting[i]);
        ws->nwait = 0;
        ws->arrived = 0;
    }
    memcpy(out, ws->out[lane], (size_t)nout * 4);
}

/* ---- cp.async ---- */

static void api_cp_async(void *dst, const void *src)
{
    fg_emu_sched *s = fg_emu_tls_sched;
    thread *t = s->cur;
    if (!s->cpq)
        s->cpq = fg_xcalloc((size_t)MAX_THREADS * CPQ_MAX, sizeof *s->cpq);
    if (t->ncp == CPQ_MAX)
        fg_emu_api_fail("more than 128 cp.async copies outstanding in one thread (a wait is missing)");
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
    fg_emu_tls_sched->cur->cp_group++;
}

static void api_cp_wait(int n)
{
    fg_emu_sched *s = fg_emu_tls_sched;
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
    s->api.fail = fg_emu_api_fail;
    s->api.cp_async = api_cp_async;
    s->api.cp_commit = api_cp_commit;
    s->api.cp_wait = api_cp_wait;
    s->api.mbar_init = fg_emu_api_mbar_init;
    s->api.mbar_arrive = fg_emu_api_mbar_arrive;
    s->api.mbar_wait = fg_emu_api_mbar_wait;
    s->api.tma_load = fg_emu_api_tma_load;
    s->api.fence_proxy_async = fg_emu_api_fence_proxy_async;
    s->api.wgmma = fg_emu_api_wgmma;
    s->api.wgmma_fence = fg_emu_api_wgmma_fence;
    s->api.wgmma_commit = fg_emu_api_wgmma_commit;
    s->api.wgmma_wait = fg_emu_api_wgmma_wait;
    return s;
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
    fg_emu_drop_tma(s);
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

void fg_emu_sched_set_shuffle(fg_emu_sched *s, uint64_t seed)
{
    s->shuffle = seed;
}

/* The next ready thread: the queue's head, or under a shuffle a random
 * one, swapped to the head first. */
static int rq_pop(fg_emu_sched *s)
{
    if (s->shuffle && s->rq_len > 1) {
        s->shuffle = s->shuffle * 6364136223846793005ull + 1442695040888963407ull;   /* an LCG */
        int k = (s->rq_head + (int)((s->shuffle >> 33) % (uint64_t)s->rq_len)) % MAX_THREADS;
        int t = s->rq[k];
        s->rq[k] = s->rq[s->rq_head];
        s->rq[s->rq_head] = t;
    }
    int lin = s->rq[s->rq_head];
    s->rq_head = (s->rq_head + 1) % MAX_THREADS;
    s->rq_len--;
    return lin;
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
                      fg_emu_soff(s, b->addr), t->mbar_parity, b->nwait - 1, b->phase, b->pending, b->count, b->tx);
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
    fg_emu_drop_tma(s);
    if (s->view)
        memset(s->view, 0xff, (size_t)(s->shared_end - s->shared_begin));
    s->fence_epoch = s->view_epoch = 0;
    while (s->live > 0 && !s->failed) {
        if (s->rq_len > 0) {
            thread *t = &s->threads[rq_pop(s)];
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
            fg_emu_deliver_awaited(s);   /* nothing else can run: copies in flight land */
            if (s->rq_len == 0)
                report_deadlock(s);
        } else {
            report_deadlock(s);
        }
    }
    fg_emu_drop_tma(s);
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
    fg_emu_sched *saved = fg_emu_tls_sched;
    fg_emu_tls_sched = s;
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
    fg_emu_tls_sched = saved;
    return rc;
}
