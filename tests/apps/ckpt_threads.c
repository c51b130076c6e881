/* ckpt_threads [STEPS=150] [PASSES=400]: 8 threads pass a token round a ring (a mutex, a condition
   variable each); per step main grants PASSES passes and waits; TLS and all counts are checked. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_threads"
#define USAGE "[STEPS] [PASSES (a multiple of 8)]"
#include "ckpt_common.h"
#define NT 8

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv[NT];
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int turn;
static long passes, budget;
static int stop;
static long count[NT];
static uint64_t thread_hash[NT];

static __thread int tls_id = -1;
static __thread long tls_count;
static __thread char tls_name[32];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    tls_id = id;
    snprintf(tls_name, sizeof tls_name, "worker-%d", id);
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)id;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!stop && !(turn == id && passes < budget))
            pthread_cond_wait(&turn_cv[id], &mu);
        if (stop)
            break;
        char expect[32];
        snprintf(expect, sizeof expect, "worker-%d", id);
        if (tls_id != id || strcmp(tls_name, expect) != 0)
            fail("thread %d: its TLS changed (tls_id=%d, name=%s)", id, tls_id, tls_name);
        if (passes % NT != id)
            fail("thread %d got the token at pass %ld", id, passes);
        tls_count++;
        count[id]++;
        if (tls_count != count[id])
            fail("thread %d: TLS count %ld != shared count %ld", id, tls_count, count[id]);
        h = fnv(h, (uint64_t)passes);
        passes++;
        turn = (id + 1) % NT;
        if (passes == budget)
            pthread_cond_signal(&done_cv);
        else
            pthread_cond_signal(&turn_cv[turn]);
    }
    thread_hash[id] = h;
    pthread_mutex_unlock(&mu);
    return (void *)(intptr_t)tls_count;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 150, 1, 10000000);
    long per_step = arg(argc, argv, 2, 400, NT, 100000000);
    if (per_step % NT)
        fail("PASSES must be a multiple of %d", NT);
    pthread_t th[NT];
    for (int i = 0; i < NT; i++)
        pthread_cond_init(&turn_cv[i], NULL);
    for (int i = 0; i < NT; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) != 0)
            fail("pthread_create");

    for (long k = 1; k <= steps; k++) {
        struct watchdog wd;
        wd_start(&wd);
        pthread_mutex_lock(&mu);
        budget += per_step;
        pthread_cond_signal(&turn_cv[turn]);
        while (passes < budget) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&done_cv, &mu, &ts);
            if (rc != 0 && rc != ETIMEDOUT)
                fail("pthread_cond_timedwait: %s", strerror(rc));
            if (wd_expired(&wd, 60))
                fail("step %ld: the ring is stuck at pass %ld of %ld", k, passes, budget);
        }
        if (passes != budget || turn != 0)
            fail("step %ld: passes=%ld budget=%ld turn=%d", k, passes, budget, turn);
        for (int i = 0; i < NT; i++)
            if (count[i] != k * per_step / NT)
                fail("step %ld: thread %d made %ld passes, expected %ld", k, i, count[i],
                     k * per_step / NT);
        pthread_mutex_unlock(&mu);
        if (tls_id != -1 || tls_count != 0)
            fail("main thread's TLS changed");
        step_line(k);
        struct timespec req = {0, 10 * 1000000L};
        nanosleep(&req, NULL); /* an interrupted sleep is simply shorter */
    }

    pthread_mutex_lock(&mu);
    stop = 1;
    for (int i = 0; i < NT; i++)
        pthread_cond_signal(&turn_cv[i]);
    pthread_mutex_unlock(&mu);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < NT; i++) {
        void *ret;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 60;
        int rc = pthread_timedjoin_np(th[i], &ret, &ts);
        if (rc != 0)
            fail("joining thread %d: %s", i, strerror(rc));
        if ((long)(intptr_t)ret != steps * per_step / NT)
            fail("thread %d returned %ld, expected %ld", i, (long)(intptr_t)ret,
                 steps * per_step / NT);
        h = fnv(h, thread_hash[i]);
    }
    if (passes != steps * per_step)
        fail("total passes %ld, expected %ld", passes, steps * per_step);
    printf("DONE checksum=%016llx passes=%ld\n", (unsigned long long)h, passes);
    return fflush(stdout) == 0 ? 0 : 1;
}
