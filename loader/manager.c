/* manager.c — the lower-half manager thread. For now it grows the shadow-TCB pool on request;
 * checkpoint requests will be received here (DESIGN §7). */
#include "manager.h"

#include "../lowerhalf/lower_threads.h"
#include "../lowerhalf/shadow_pool.h"

#include <pthread.h>
#include <unistd.h>

static void *manager_main(void *arg)
{
    (void)arg;
    lower_threads_register(gettid());
    shadow_pool_serve_growth();
    return NULL;
}

int manager_start(void)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, manager_main, NULL);
    pthread_attr_destroy(&attr);
    return -err;
}
