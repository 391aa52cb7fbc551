/*
 * cache_fsz.c -- SIGXFSZ ignored during cache writes (cache_fsz.h): a
 * process-wide span count under a mutex; the disposition is changed only
 * when it is SIG_DFL, so a handler the application installed stays.
 */
#include "cache_fsz.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static pthread_mutex_t fsz_lock = PTHREAD_MUTEX_INITIALIZER;
static int fsz_depth;              /* spans open */
static int fsz_changed;            /* whether the first span set SIG_IGN */
static struct sigaction fsz_saved; /* the disposition before it */

void fg_cache_fsz_begin(void)
{
    pthread_mutex_lock(&fsz_lock);
    if (fsz_depth++ == 0) {
        fsz_changed = 0;
        if (sigaction(SIGXFSZ, NULL, &fsz_saved) == 0 && !(fsz_saved.sa_flags & SA_SIGINFO) &&
            fsz_saved.sa_handler == SIG_DFL) {
            struct sigaction ign;
            memset(&ign, 0, sizeof ign);
            ign.sa_handler = SIG_IGN;
            sigemptyset(&ign.sa_mask);
            fsz_changed = sigaction(SIGXFSZ, &ign, NULL) == 0;
        }
    }
    pthread_mutex_unlock(&fsz_lock);
}

void fg_cache_fsz_end(void)
{
    pthread_mutex_lock(&fsz_lock);
    if (fsz_depth > 0 && --fsz_depth == 0 && fsz_changed) {
        sigaction(SIGXFSZ, &fsz_saved, NULL);
        fsz_changed = 0;
    }
    pthread_mutex_unlock(&fsz_lock);
}
