/* dmtcp_locks.c — DMTCP's DmtcpMutex and DmtcpRWLock (include/dmtcp.h), futex locks over the
 * structures' layouts, for programs that use them; crac itself needs none of them. */
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* DmtcpMutex: {futex, owner, count, type}; all-zero is an unlocked normal mutex (its static
 * initialisers). futex: 0 free, 1 held, 2 held with waiters. */
enum { MUTEX_NORMAL, MUTEX_RECURSIVE, MUTEX_LLL };
struct dmtcp_mutex {
    uint32_t futex, owner, count;
    int type;
};

/* DmtcpRWLock (16 bytes); we use `readers` as the lock word: 0 free, n > 0 readers, -1 writer. */
struct dmtcp_rwlock {
    int32_t status;
    int32_t writer_tid;
    int32_t readers;
    uint32_t unused;
};

static void futex_wait(void *addr, uint32_t val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(void *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void DmtcpMutexInit(struct dmtcp_mutex *m, int type) { *m = (struct dmtcp_mutex){0, 0, 0, type}; }

static int recursive_again(struct dmtcp_mutex *m, uint32_t tid)
{
    if (m->type != MUTEX_RECURSIVE || __atomic_load_n(&m->owner, __ATOMIC_RELAXED) != tid)
        return 0;
    m->count++;
    return 1;
}

int DmtcpMutexTryLock(struct dmtcp_mutex *m)
{
    uint32_t tid = (uint32_t)gettid(), zero = 0;
    if (recursive_again(m, tid))
        return 0;
    if (!__atomic_compare_exchange_n(&m->futex, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return EBUSY;
    m->owner = tid;
    m->count = 1;
    return 0;
}

int DmtcpMutexLock(struct dmtcp_mutex *m)
{
    uint32_t tid = (uint32_t)gettid(), c = 0;
    if (recursive_again(m, tid))
        return 0;
    if (!__atomic_compare_exchange_n(&m->futex, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        if (c != 2)
            c = __atomic_exchange_n(&m->futex, 2, __ATOMIC_ACQUIRE);
        while (c != 0) {
            futex_wait(&m->futex, 2);
            c = __atomic_exchange_n(&m->futex, 2, __ATOMIC_ACQUIRE);
        }
    }
    m->owner = tid;
    m->count = 1;
    return 0;
}

int DmtcpMutexUnlock(struct dmtcp_mutex *m)
{
    if (m->type == MUTEX_RECURSIVE) {
        if (m->owner != (uint32_t)gettid())
            return EPERM;
        if (--m->count > 0)
            return 0;
    }
    m->owner = 0;
    m->count = 0;
    if (__atomic_exchange_n(&m->futex, 0, __ATOMIC_RELEASE) == 2)
        futex_wake(&m->futex, 1);
    return 0;
}

void DmtcpRWLockInit(struct dmtcp_rwlock *l) { *l = (struct dmtcp_rwlock){0, 0, 0, 0}; }

int DmtcpRWLockTryRdLock(struct dmtcp_rwlock *l)
{
    int32_t v = __atomic_load_n(&l->readers, __ATOMIC_RELAXED);
    while (v >= 0)
        if (__atomic_compare_exchange_n(&l->readers, &v, v + 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return 0;
    return EBUSY;
}

int DmtcpRWLockRdLock(struct dmtcp_rwlock *l)
{
    for (;;) {
        if (DmtcpRWLockTryRdLock(l) == 0)
            return 0;
        futex_wait(&l->readers, (uint32_t)-1);
    }
}

/* No writer is ever queued ahead of readers here, so this is RdLock. */
int DmtcpRWLockRdLockIgnoreQueuedWriter(struct dmtcp_rwlock *l) { return DmtcpRWLockRdLock(l); }

int DmtcpRWLockWrLock(struct dmtcp_rwlock *l)
{
    for (;;) {
        int32_t v = 0;
        if (__atomic_compare_exchange_n(&l->readers, &v, -1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            l->writer_tid = (int32_t)gettid();
            return 0;
        }
        futex_wait(&l->readers, (uint32_t)v);
    }
}

int DmtcpRWLockUnlock(struct dmtcp_rwlock *l)
{
    int32_t v = __atomic_load_n(&l->readers, __ATOMIC_RELAXED);
    if (v == 0)
        return EPERM;
    if (v < 0) {
        l->writer_tid = 0;
        __atomic_store_n(&l->readers, 0, __ATOMIC_RELEASE);
    } else if (__atomic_sub_fetch(&l->readers, 1, __ATOMIC_RELEASE) != 0) {
        return 0;
    }
    futex_wake(&l->readers, 0x7fffffff);
    return 0;
}
