/* threadpool.c -- worker threads running batches of indexed tasks (threadpool.h). */
#include "threadpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

struct fg_threadpool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t work;        /* a batch was posted, or stop */
    pthread_cond_t done;        /* the batch finished */
    pthread_mutex_t run_lock;   /* one batch at a time */
    fg_task_fn fn;
    void *arg;
    int n;                      /* tasks in the current batch */
    int next;                   /* next index to hand out */
    int finished;               /* tasks completed */
    unsigned batch;             /* batch generation */
    int stop;
};

int fg_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* A worker: waits for a batch, takes indices until none are left. */
static void *worker(void *vp)
{
    fg_threadpool *p = vp;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->next >= p->n)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->stop)
            break;
        int i = p->next++;
        fg_task_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->lock);
        fn(arg, i);
        pthread_mutex_lock(&p->lock);
        if (++p->finished == p->n)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

fg_threadpool *fg_threadpool_new(int nthreads)
{
    fg_threadpool *p = fg_xcalloc(1, sizeof *p);
    p->nthreads = nthreads > 0 ? nthreads : fg_cpu_count();
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    if (p->nthreads > 1) {
        p->threads = fg_xcalloc((size_t)p->nthreads, sizeof *p->threads);
        for (int i = 0; i < p->nthreads; i++) {
            if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
                p->nthreads = i;   /* run with what started; 0 falls back to inline */
                break;
            }
        }
    }
    return p;
}

int fg_threadpool_size(const fg_threadpool *p) { return p->nthreads > 0 ? p->nthreads : 1; }

void fg_threadpool_run(fg_threadpool *p, int n, fg_task_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (p->nthreads <= 1 || !p->threads) {
        for (int i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->next = 0;
    p->finished = 0;
    p->batch++;
    pthread_cond_broadcast(&p->work);
    while (p->finished < p->n)
        pthread_cond_wait(&p->done, &p->lock);
    p->n = 0;
    p->next = 0;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->run_lock);
}

void fg_threadpool_free(fg_threadpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; p->threads && i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->run_lock);
    free(p);
}
