/*
 * threadpool.h -- a fixed set of worker threads that run batches of
 * independent tasks: fg_threadpool_run(pool, n, fn, arg) calls fn(arg, i) for
 * every i in [0, n), each exactly once, spread over the workers, and returns
 * when all have finished.  Used to compile a plan's kernels in parallel.
 */
#ifndef FG_THREADPOOL_H
#define FG_THREADPOOL_H

typedef struct fg_threadpool fg_threadpool;
typedef void (*fg_task_fn)(void *arg, int index);

/* Number of online CPU cores (at least 1). */
int fg_cpu_count(void);
/* Starts nthreads workers (<= 0: fg_cpu_count()).  With one thread tasks run
 * on the caller's thread and no worker is started. */
fg_threadpool *fg_threadpool_new(int nthreads);
int fg_threadpool_size(const fg_threadpool *p);
/* Runs one batch and waits for it.  Not reentrant: one batch at a time per
 * pool (calls from several threads are serialised). */
void fg_threadpool_run(fg_threadpool *p, int n, fg_task_fn fn, void *arg);
/* Stops and joins the workers. */
void fg_threadpool_free(fg_threadpool *p);

#endif /* FG_THREADPOOL_H */
