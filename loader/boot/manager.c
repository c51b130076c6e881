/* manager.c — the lower-half threads that serve the upper half: the manager, which runs
 * checkpoints (docs/ARCHITECTURE.md "Checkpoint"), and the grower of the shadow-TCB pool. */
#include "manager.h"

#include "ckpt.h"

#include "lower_threads.h"
#include "shadow_pool.h"

#include <pthread.h>
#include <unistd.h>

static void *pool_grower_main(void *arg)
{
    (void)arg;
    lower_threads_register(gettid());
    shadow_pool_serve_growth();
    return NULL;
}

static void *manager_main(void *arg)
{
    (void)arg;
    lower_threads_register(gettid());
    ckpt_serve();
    return NULL;
}

/* Takes the checkpoint signal, which every thread keeps blocked (ckpt_trigger.c). */
static int sigwaiter_signal;

static void *sigwaiter_main(void *arg)
{
    (void)arg;
    lower_threads_register(gettid());
    ckpt_wait_signal(sigwaiter_signal);
}

static int start_detached(void *(*fn)(void *))
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, fn, NULL);
    pthread_attr_destroy(&attr);
    return -err;
}

int manager_start(int ckpt_signal)
{
    sigwaiter_signal = ckpt_signal;
    int e = start_detached(pool_grower_main);
    if (e == 0)
        e = start_detached(manager_main);
    return e ? e : start_detached(sigwaiter_main);
}
