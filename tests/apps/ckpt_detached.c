/* ckpt_detached [STEPS=100] [PER_STEP=40]: main keeps creating detached threads (up to 32 alive) that do
   a little work, add to shared totals and exit; the number of completions and their sum are checked. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_detached"
#define USAGE "[STEPS] [PER_STEP]"
#include "ckpt_common.h"
#define MAX_ALIVE 32

static atomic_long alive, completed;
static atomic_uint_fast64_t sum;
static atomic_int bad;
static __thread long tls_index = -1;

static uint64_t work(long i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ULL + 1;
    for (long n = 0; n < 200 + i % 97; n++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 8;
}

static void *worker(void *arg)
{
    long i = (long)(intptr_t)arg;
    if (tls_index != -1)
        atomic_store(&bad, 1); /* a fresh thread's TLS starts from the initial image */
    tls_index = i;
    uint64_t v = work(i);
    if (tls_index != i)
        atomic_store(&bad, 2);
    atomic_fetch_add(&sum, v);
    atomic_fetch_add(&completed, 1);
    atomic_fetch_sub(&alive, 1);
    return NULL;
}

static void pause_us(long us)
{
    struct timespec req = {0, us * 1000L};
    nanosleep(&req, NULL);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    long per_step = arg(argc, argv, 2, 40, 1, 100000);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);

    long created = 0;
    uint64_t expected_sum = 0;
    for (long k = 1; k <= steps; k++) {
        for (long j = 0; j < per_step; j++) {
            struct watchdog wd;
            wd_start(&wd);
            while (atomic_load(&alive) >= MAX_ALIVE) {
                pause_us(100);
                if (wd_expired(&wd, 30))
                    fail("step %ld: %ld threads alive and none finishing", k, atomic_load(&alive));
            }
            atomic_fetch_add(&alive, 1);
            pthread_t t;
            int rc;
            wd_start(&wd);
            while ((rc = pthread_create(&t, &attr, worker, (void *)(intptr_t)created)) == EAGAIN) {
                pause_us(1000);
                if (wd_expired(&wd, 30))
                    fail("step %ld: pthread_create keeps failing with EAGAIN", k);
            }
            if (rc != 0)
                fail("step %ld: pthread_create: %s", k, strerror(rc));
            expected_sum += work(created);
            created++;
        }
        if (atomic_load(&bad))
            fail("step %ld: a thread saw a wrong TLS value (%d)", k, atomic_load(&bad));
        long done = atomic_load(&completed);
        if (done > created || done < created - MAX_ALIVE)
            fail("step %ld: %ld completed of %ld created", k, done, created);
        step_line(k);
        pause_us(20000);
    }

    struct watchdog wd;
    wd_start(&wd);
    while (atomic_load(&completed) < created) {
        pause_us(1000);
        if (wd_expired(&wd, 30))
            fail("only %ld of %ld threads completed", atomic_load(&completed), created);
    }
    pause_us(20000);
    if (atomic_load(&completed) != created || atomic_load(&alive) != 0)
        fail("completed %ld, created %ld, alive %ld", atomic_load(&completed), created,
             atomic_load(&alive));
    if (atomic_load(&sum) != expected_sum)
        fail("sum of the threads' results is %#llx, expected %#llx",
             (unsigned long long)atomic_load(&sum), (unsigned long long)expected_sum);
    if (atomic_load(&bad))
        fail("a thread saw a wrong TLS value (%d)", atomic_load(&bad));
    printf("DONE threads=%ld sum=%016llx\n", created, (unsigned long long)expected_sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
