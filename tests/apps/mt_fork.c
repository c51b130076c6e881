/* mt_fork: 4 threads churn malloc/free and mmap/munmap while the main thread forks 1000 times; each
   child mallocs, mmaps and _exit(7)s; a child not gone after 10 s is killed and reported as hung. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 4
#define NFORKS 1000
#define CHILD_TIMEOUT_MS 10000

static atomic_int stop;
static atomic_int thread_failed;

static void *churn(void *arg)
{
    unsigned s = (unsigned)(long)arg * 2654435761u + 1;
    long pg = sysconf(_SC_PAGESIZE);
    while (!atomic_load(&stop)) {
        s = s * 1103515245u + 12345u;
        size_t n = 16 + (s >> 8) % 300000;
        unsigned char *p = malloc(n);
        if (!p) {
            atomic_store(&thread_failed, 1);
            return NULL;
        }
        p[0] = 0xab;
        p[n - 1] = 0xcd;
        if (p[0] != 0xab || p[n - 1] != 0xcd)
            atomic_store(&thread_failed, 1);
        free(p);
        size_t m = (size_t)pg * (1 + (s >> 4) % 8);
        unsigned char *q =
            mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) {
            atomic_store(&thread_failed, 1);
            return NULL;
        }
        q[0] = 1;
        q[m - 1] = 2;
        if (q[0] != 1 || q[m - 1] != 2)
            atomic_store(&thread_failed, 1);
        munmap(q, m);
    }
    return NULL;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Waits for pid for at most CHILD_TIMEOUT_MS; returns 1 and sets *st when it exited, 0 on timeout. */
static int wait_child(pid_t pid, int *st)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    long deadline = now_ms() + CHILD_TIMEOUT_MS;
    useconds_t nap = 20;
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid) {
            if (pfd >= 0)
                close(pfd);
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            perror("mt_fork: waitpid");
            exit(1);
        }
        long left = deadline - now_ms();
        if (left <= 0)
            break;
        if (pfd >= 0) {
            struct pollfd pf = {.fd = pfd, .events = POLLIN};
            poll(&pf, 1, (int)left);
        } else {
            usleep(nap);
            if (nap < 10000)
                nap *= 2;
        }
    }
    if (pfd >= 0)
        close(pfd);
    return 0;
}

int main(void)
{
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++) {
        int rc = pthread_create(&t[i], NULL, churn, (void *)i);
        if (rc != 0) {
            fprintf(stderr, "mt_fork: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    int failed = 0;
    for (int i = 0; i < NFORKS && !failed; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("mt_fork: fork");
            failed = 1;
            break;
        }
        if (pid == 0) {
            char *p = malloc(100 + (size_t)i);
            if (!p)
                _exit(11);
            memset(p, i & 0xff, 100 + (size_t)i);
            void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                _exit(12);
            ((char *)m)[8191] = p[99];
            _exit(7);
        }
        int st = 0;
        if (!wait_child(pid, &st)) {
            fprintf(stderr, "mt_fork: child hung (fork #%d, pid %d did not exit within %d s)\n", i,
                    (int)pid, CHILD_TIMEOUT_MS / 1000);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            failed = 1;
            break;
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 7) {
            fprintf(stderr, "mt_fork: child #%d status 0x%x, expected exit 7\n", i, st);
            failed = 1;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    if (atomic_load(&thread_failed)) {
        fprintf(stderr, "mt_fork: a worker thread saw a failure\n");
        failed = 1;
    }
    if (failed)
        return 1;
    printf("mt_fork ok forks=%d threads=%d\n", NFORKS, NTHREADS);
    return 0;
}
