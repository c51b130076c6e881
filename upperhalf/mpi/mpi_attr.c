/* mpi_attr.c — attribute caching on communicators (keyvals, MPI_Comm_set/get/delete_attr): kept
 * in upper memory, so they are saved with the program; the predefined ones asked of the library. */
#include "mpi_shim.h"

#include <stdlib.h>

/* The program's keyvals are KEYVAL_BASE + a slot: above every predefined one (Open MPI's enum
 * of them starts at 0, MPI_TAG_UB, and has a few dozen). */
#define KEYVAL_BASE 0x4000
#define KEYVALS_MAX 1024

struct keyval {
    int used, freed;
    int refs; /* attributes holding it: a freed keyval's slot is reused once none does */
    MPI_Comm_copy_attr_function *copy;
    MPI_Comm_delete_attr_function *del;
    void *extra;
};

struct vattr {
    int keyval;
    void *value;
    struct vattr *next; /* newest first */
};

static pthread_mutex_t attr_mu = PTHREAD_MUTEX_INITIALIZER;
static struct keyval keyvals[KEYVALS_MAX];

static struct keyval *keyval_of(int keyval)
{
    int i = keyval - KEYVAL_BASE;
    if (i < 0 || i >= KEYVALS_MAX || !keyvals[i].used)
        return NULL;
    return &keyvals[i];
}

static void keyval_unref(struct keyval *k)
{
    if (--k->refs == 0 && k->freed)
        k->used = k->freed = 0;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy, MPI_Comm_delete_attr_function *del,
                           int *keyval, void *extra_state)
{
    pthread_mutex_lock(&attr_mu);
    int i = 0;
    while (i < KEYVALS_MAX && keyvals[i].used)
        i++;
    if (i < KEYVALS_MAX)
        keyvals[i] = (struct keyval){1, 0, 0, copy, del, extra_state};
    pthread_mutex_unlock(&attr_mu);
    if (i == KEYVALS_MAX)
        return MPI_ERR_INTERN;
    *keyval = KEYVAL_BASE + i;
    return MPI_SUCCESS;
}

int MPI_Comm_free_keyval(int *keyval)
{
    pthread_mutex_lock(&attr_mu);
    struct keyval *k = keyval_of(*keyval);
    if (k && !k->freed) {
        k->freed = 1;
        k->refs++;
        keyval_unref(k);
    }
    pthread_mutex_unlock(&attr_mu);
    if (!k)
        return MPI_ERR_KEYVAL;
    *keyval = MPI_KEYVAL_INVALID;
    return MPI_SUCCESS;
}

/* C's attribute of KEYVAL, out of its list (the caller owns it); NULL if none. attr_mu held. */
static struct vattr *attr_detach(struct vcomm *c, int keyval)
{
    for (struct vattr **pp = &c->attrs; *pp; pp = &(*pp)->next)
        if ((*pp)->keyval == keyval) {
            struct vattr *a = *pp;
            *pp = a->next;
            return a;
        }
    return NULL;
}

/* The delete callback of a detached attribute, called with no lock held (it may call MPI, as
 * mpi4py's frees a communicator), then the attribute freed. */
static int attr_delete(MPI_Comm comm, struct vattr *a)
{
    pthread_mutex_lock(&attr_mu);
    struct keyval *k = &keyvals[a->keyval - KEYVAL_BASE];
    MPI_Comm_delete_attr_function *del = k->del;
    void *extra = k->extra;
    pthread_mutex_unlock(&attr_mu);
    int rc = del ? del(comm, a->keyval, a->value, extra) : MPI_SUCCESS;
    pthread_mutex_lock(&attr_mu);
    keyval_unref(k);
    pthread_mutex_unlock(&attr_mu);
    free(a);
    return rc;
}

int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *value)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    struct vattr *a = malloc(sizeof(*a));
    if (!a)
        return MPI_ERR_NO_MEM;
    pthread_mutex_lock(&attr_mu);
    struct keyval *k = keyval_of(keyval);
    struct vattr *old = k && !k->freed ? attr_detach(c, keyval) : NULL;
    if (k && !k->freed) {
        *a = (struct vattr){keyval, value, c->attrs};
        c->attrs = a;
        k->refs++;
    }
    pthread_mutex_unlock(&attr_mu);
    if (!k || k->freed) {
        free(a);
        return MPI_ERR_KEYVAL;
    }
    return old ? attr_delete(comm, old) : MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int keyval)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    pthread_mutex_lock(&attr_mu);
    struct vattr *a = attr_detach(c, keyval);
    pthread_mutex_unlock(&attr_mu);
    return a ? attr_delete(comm, a) : MPI_ERR_KEYVAL;
}

/* The predefined attributes (MPI_TAG_UB ...): the library's value, asked of it on the world and
 * copied into upper memory, since the program may keep the pointer it gets across a restart. */
static int predefined_attr(int keyval, void *value, int *flag)
{
    static int kept[MPI_UNIVERSE_SIZE + 1];
    /* MPICH's keyvals for Open MPI's MPI_TAG_UB .. MPI_UNIVERSE_SIZE (MPICH's mpi.h). */
    static const int mpich_keyval[] = {0x64400001, 0x64400003, 0x64400005, 0x64400007,
                                       0x6440000d, 0x6440000b, 0x64400009};
    if (keyval < 0 || keyval > MPI_UNIVERSE_SIZE) {
        *flag = 0;
        return MPI_ERR_KEYVAL;
    }
    int lower_keyval = mpi_abi.mpich ? mpich_keyval[keyval] : keyval;
    int *lower_value = NULL, found = 0;
    cross_gate_enter();
    int rc = L("MPI_Comm_get_attr", U(vcomm_world->real), (uint64_t)lower_keyval, U(&lower_value),
               U(&found));
    if (rc == MPI_SUCCESS && found && lower_value)
        __atomic_store_n(&kept[keyval], *lower_value, __ATOMIC_RELAXED);
    cross_gate_leave();
    *flag = rc == MPI_SUCCESS && found && lower_value;
    if (*flag)
        *(int **)value = &kept[keyval];
    return rc;
}

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    if (keyval < KEYVAL_BASE)
        return predefined_attr(keyval, value, flag);
    pthread_mutex_lock(&attr_mu);
    struct keyval *k = keyval_of(keyval);
    struct vattr *a = c->attrs;
    while (a && a->keyval != keyval)
        a = a->next;
    *flag = a != NULL;
    if (a)
        *(void **)value = a->value;
    pthread_mutex_unlock(&attr_mu);
    return k || a ? MPI_SUCCESS : MPI_ERR_KEYVAL;
}

/* MPI_Comm_dup: each attribute of FROM its keyval's copy callback lets through, on TO. The
 * callbacks run with no lock held (they may call MPI): FROM's attributes are read first. */
int mpi_attrs_copy(MPI_Comm from_comm, struct vcomm *from, MPI_Comm to_comm)
{
    pthread_mutex_lock(&attr_mu);
    int n = 0;
    for (struct vattr *a = from->attrs; a; a = a->next)
        n++;
    struct vattr *snap = malloc(sizeof(*snap) * (size_t)(n ? n : 1));
    n = 0;
    for (struct vattr *a = from->attrs; a && snap; a = a->next)
        snap[n++] = *a;
    pthread_mutex_unlock(&attr_mu);
    if (!snap)
        return MPI_ERR_NO_MEM;
    int rc = MPI_SUCCESS;
    for (int i = n - 1; i >= 0 && rc == MPI_SUCCESS; i--) { /* oldest first */
        pthread_mutex_lock(&attr_mu);
        struct keyval k = keyvals[snap[i].keyval - KEYVAL_BASE];
        pthread_mutex_unlock(&attr_mu);
        void *out = NULL;
        int flag = 0;
        if (k.copy)
            rc = k.copy(from_comm, snap[i].keyval, k.extra, snap[i].value, &out, &flag);
        if (rc == MPI_SUCCESS && flag)
            rc = MPI_Comm_set_attr(to_comm, snap[i].keyval, out);
    }
    free(snap);
    return rc;
}

/* MPI_Comm_free, and MPI_Finalize for MPI_COMM_SELF: every attribute deleted, newest first. */
int mpi_attrs_delete_all(MPI_Comm comm, struct vcomm *c)
{
    for (;;) {
        pthread_mutex_lock(&attr_mu);
        struct vattr *a = c->attrs;
        if (a)
            c->attrs = a->next;
        pthread_mutex_unlock(&attr_mu);
        if (!a)
            return MPI_SUCCESS;
        int rc = attr_delete(comm, a);
        if (rc != MPI_SUCCESS)
            return rc;
    }
}
