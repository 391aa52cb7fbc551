/*
 * emu_sched_impl.h -- internals of the emulation scheduler shared by its two
 * parts (contract in emu_sched.h): emu_sched.c (workers, context switches,
 * barriers, warp collectives, cp.async, running a grid) and emu_hopper.c
 * (the Hopper async machinery: mbarriers, TMA copies, the async proxy,
 * wgmma).  Nothing outside these two files includes this header.
 */
#ifndef FG_EMU_SCHED_IMPL_H
#define FG_EMU_SCHED_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "emu_sched.h"

#if defined(__SANITIZE_ADDRESS__)
#define FG_EMU_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FG_EMU_FIBER_ASAN 1
#endif
#endif

/* On x86-64 a few lines of assembly switch contexts (emu_sched.c);
 * elsewhere ucontext does everything. */
#if defined(__x86_64__) && !defined(FG_EMU_UCONTEXT_ONLY)
#define FG_EMU_ASM_SWITCH 1
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
    uint64_t shuffle;           /* the generator's state; 0: first in, first out */
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

/* The scheduler running a launch on this thread. */
extern __thread fg_emu_sched *fg_emu_tls_sched;

/* ---- emu_sched.c: services for the Hopper part --------------------------- */

/* Called from kernel code: records msg and abandons the running thread. */
void fg_emu_api_fail(const char *msg) __attribute__((noreturn));
/* Makes thread lin ready to run. */
void fg_emu_rq_push(fg_emu_sched *s, int lin);
/* The running thread t waits: back to the scheduler until it is resumed. */
void fg_emu_yield(fg_emu_sched *s, thread *t);

/* ---- emu_hopper.c --------------------------------------------------------- */

/* The Hopper entries of the table (struct fg_emu_api, templates/emu_api.h,
 * says what each does); called from kernel code on the running thread. */
void fg_emu_api_mbar_init(void *bar, unsigned count);
void fg_emu_api_mbar_arrive(void *bar, int expect, unsigned tx);
void fg_emu_api_mbar_wait(void *bar, unsigned parity);
void fg_emu_api_tma_load(void *dst, const void *map, int rank, const int *coord, void *bar);
void fg_emu_api_fence_proxy_async(void);
void fg_emu_api_wgmma(int kind, int bn, int trans_b, uint64_t desc_a, uint64_t desc_b, int accumulate, float *d);
void fg_emu_api_wgmma_fence(void);
void fg_emu_api_wgmma_commit(void);
void fg_emu_api_wgmma_wait(int n);
/* The emulated shared address of p: its offset from the shared arrays. */
unsigned long fg_emu_soff(const fg_emu_sched *s, const void *p);
/* Lands the TMA copies of every mbarrier a thread is blocked on (when no
 * thread can run). */
void fg_emu_deliver_awaited(fg_emu_sched *s);
/* Frees the TMA copies still in flight (they never land) and forgets the
 * block's mbarriers. */
void fg_emu_drop_tma(fg_emu_sched *s);

#endif /* FG_EMU_SCHED_IMPL_H */
