/* mpi_shim.h — internals of the upper MPI shim (libmpi.so.40, docs/MPI.md): crossings into the
 * real library in the lower half, virtual handles, the consistent-cut state. All upper memory. */
#ifndef CRAC_MPI_SHIM_H
#define CRAC_MPI_SHIM_H

#include <mpi.h>

#include "mpi_predef.h"

#include <pthread.h>
#include <stdint.h>

/* ---- crossing (mpi_lower.c) ---- */
/* A function of the current lower half: its address and the restart epoch it was looked up in,
 * in one word (address in the low 48 bits), so a thread never pairs a new epoch with an old
 * address while another thread refreshes it. */
struct lcache {
    uint64_t word;
};
/* Calls the real library's function NAME with N integer/pointer arguments. */
uint64_t mpi_lcall(struct lcache *c, const char *name, const uint64_t *args, int n);
#define L(name, ...)                                                                               \
    ({                                                                                             \
        static struct lcache lc_;                                                                  \
        uint64_t la_[] = {__VA_ARGS__};                                                            \
        (int)mpi_lcall(&lc_, name, la_, (int)(sizeof(la_) / sizeof(la_[0])));                      \
    })
#define U(x) ((uint64_t)(uintptr_t)(x))
/* The checkpoint gate (libcrac-upper.so, preloaded first under crac): held, no checkpoint
 * comes between a handle read from a record and the library call that uses it. */
extern void cross_gate_enter(void) __attribute__((weak));
extern void cross_gate_leave(void) __attribute__((weak));

__attribute__((noreturn, format(printf, 1, 2))) void mpi_die(const char *fmt, ...);

/* ---- the library below (mpi_lower.c): Open MPI, or MPICH at a restart ---- */
struct lower_abi {
    int mpich; /* integer handles, its own constants and MPI_Status layout */
    int any_source, proc_null, root;
    uint64_t in_place;
};
extern struct lower_abi mpi_abi;
/* Big enough for either library's MPI_Status; converted to and from the program's. */
typedef struct {
    uint64_t w[4];
} lstatus;
void status_up(MPI_Status *up, const lstatus *low);
/* Polls of one crossing in the wait loops (mpi_ltest): enough that the crossing is a small part
 * of a poll, few enough that a thread holds the checkpoint gate only briefly. */
#define MPI_WAIT_TRIES 32
/* MPI_Test of *REAL up to TRIES times in one crossing, until *FLAG: the wait loops' poll. */
int mpi_ltest(void **real, int *flag, lstatus *ls, int tries);
/* MPI_Improbe (SOURCE already the library's rank, COMM the library's) up to TRIES times in one
 * crossing, until *FLAG: a blocking matched probe's poll. */
int mpi_limprobe(int source, int tag, void *comm, int *flag, void **msg, lstatus *ls, int tries);
/* POST (a nonblocking MPI function) with its N (up to 10) ARGS, the last REAL (the request *),
 * then up to TRIES tests of that request, in one crossing. */
int mpi_lpost_test(struct lcache *c, const char *post, const uint64_t *args, int n, void **real,
                   int *flag, lstatus *ls, int tries);
/* One request of a crossing that tests several: the library's request, complete or not, its
 * status. */
struct ltest {
    void *real;
    int flag;
    lstatus ls;
};
/* Up to TRIES rounds of MPI_Test of the requests of T[0..N) whose flag is 0, in one crossing,
 * until all are complete. */
int mpi_ltests(struct ltest *t, int n, int tries);
/* A nonblocking call for mpi_lposts_test: NAME with its N (up to 10) ARGS, the last &T->real of
 * its struct ltest. */
struct lpost {
    struct lcache *c;
    const char *name;
    const uint64_t *args;
    int n;
};
/* The N (up to 4) posts P in order, then up to TRIES rounds of tests of their requests T, in
 * one crossing (MPI_Sendrecv). A failed post ends it: those before it are live. */
int mpi_lposts_test(const struct lpost *p, struct ltest *t, int n, int tries);
void status_down(lstatus *low, const MPI_Status *up);
int rank_down(int r); /* a rank argument (MPI_ANY_SOURCE, MPI_PROC_NULL ...) for the library */
int rank_up(int r);
static inline uint64_t buf_down(const void *p)
{
    return p == MPI_IN_PLACE ? mpi_abi.in_place : U(p);
}

/* ---- virtual handles (mpi_objects.c) ---- */
struct vattr;
struct vcart;
#define VMAGIC 0x4d50495643524143ULL

struct vcomm {
    uint64_t magic;
    void *real;
    int size, rank;
    int *world_ranks; /* world rank of each member, in this communicator's rank order */
    uint64_t key;     /* the same on every member: hash of world_ranks and creation ordinal */
    int freed;
    uint64_t seq, target; /* collectives started here; where the cut stops them */
    int inflight;         /* collectives started, not yet completed */
    int held;             /* program threads waiting at its target (mpi_enter_locked) */
    struct vcomm *next;   /* creation order */
    /* mpi_groups.c, mpi_intercomm.c: a counter only (no communicator: the cut counts a
     * creation whose participants share no communicator on it), or an inter-communicator
     * (world_ranks the local group; remote_world the remote one, rebuilt from both). */
    int ghost, inter;
    int remote_size, *remote_world;
    int local_leader, remote_leader_world, tag;
    MPI_Errhandler errhandler;      /* the library's, as of the last checkpoint (mpi_errh.c) */
    struct vattr *attrs;            /* the program's attributes (mpi_attr.c) */
    struct vcart *cart;             /* a Cartesian grid's (mpi_cart.c), or NULL */
    char name[MPI_MAX_OBJECT_NAME]; /* the program's MPI_Comm_set_name, or empty */
};

/* A derived datatype (mpi_types.c): its constructor (MPI_COMBINER_*) and arguments, laid out as
 * MPI_Type_get_contents gives them; TYPES the program's handles. */
struct vtype {
    uint64_t magic;
    void *real;
    int combiner, ni, na, nt;
    int *ints;
    MPI_Aint *aints;
    MPI_Datatype *types;
    int committed, freed;
    struct vtype *next;
};

/* VR_INACTIVE: a persistent request not started, or completed and not started again. */
enum { VR_ACTIVE = 1, VR_DONE = 2, VR_UNPOSTED = 3, VR_INACTIVE = 4 };
struct vreq {
    uint64_t magic;
    void *real;
    int state, is_recv, is_coll;
    int persistent; /* MPI_Send_init/MPI_Recv_init: kept after completion, started again */
    int sync;       /* MPI_Ssend/MPI_Issend: complete once the receive has matched it */
    void *buf;
    int count, peer, tag;
    MPI_Datatype type;
    struct vcomm *comm;
    MPI_Status status;
    struct vreq *next, *prev;
};

extern struct vcomm *vcomm_world, *vcomm_self, *vcomm_list;
extern struct vtype *vtype_list;
extern struct vreq *vreq_list;

struct vcomm *comm_v(MPI_Comm c); /* NULL for MPI_COMM_NULL or garbage */
void *type_real(MPI_Datatype t);  /* lower handle */
void *op_real(MPI_Op o);
void *userop_real(MPI_Op o);           /* NULL unless one of MPI_Op_create (mpi_userop.c) */
void *predef_lower(const void *upper); /* NULL unless a predefined object */
void *predef_upper_of_lower(const void *lower);
void *lower_named(const char *name); /* the lower object of a predefined name */
struct vcomm *vcomm_wrap(void *real);
/* The program's handle *OUT of REAL, the library's new communicator (MPI_COMM_NULL for its null),
 * unless RC is an error. Callers hold the checkpoint gate from the creating call to here, and
 * are still inside the creation's section: a checkpoint between the two would leave REAL a
 * handle of the library before the restart with no record to rebuild it from, and a cut while
 * no record exists would not drain the messages a faster member already sent on it. */
int mpi_comm_made(void *real, int rc, MPI_Comm *out);
int vcomm_describe(struct vcomm *c); /* fills size, rank, world_ranks, key */
struct vreq *vreq_new(void);
/* R just completed in the library (VR_DONE): a receive counts for the cut, a nonblocking
 * collective is no longer in flight on its communicator. Under mpi_mu. */
static inline void vreq_completed(struct vreq *r)
{
    extern int64_t mpi_received;
    if (r->is_recv)
        mpi_received++;
    if (r->is_coll)
        r->comm->inflight--;
}
void vreq_free(struct vreq *r);
void vreq_to_tail(struct vreq *r); /* a started persistent request: posted after the others */
struct vtype *vtype_new(void);
int mpi_type_make(struct vtype *t, void **real); /* T made in the library (gate held) */

/* ---- the library's life (mpi_lower.c) ---- */
extern int mpi_inited, mpi_finalized, mpi_world_rank, mpi_world_size;
extern void *mpi_ctl_comm;           /* the shim's own duplicate of the world (lower handle) */
extern volatile int32_t mpi_initing; /* mpi_lower_start runs */
int mpi_lower_start(void);           /* load, MPI_Init_thread, predefined handles, ctl comm */
int mpi_lower_rebuild(void);         /* at restart: communicators and datatypes again */
void mpi_adopt_sockets(void);        /* sockets MPI opened since MPI_Init are the lower half's */

/* ---- the consistent cut (mpi_cut.c) ---- */
extern pthread_mutex_t mpi_mu;
extern int64_t *mpi_sent_to; /* messages started to each world rank */
extern int64_t mpi_received; /* messages received (completed receives and drained ones) */
/* A communicating section: may wait (outside the lower half) while a checkpoint cuts. COMM and
 * IS_COLL: a collective on COMM is starting (counted, or held at the cut's target). */
void mpi_enter(struct vcomm *comm, int is_coll);
void mpi_leave(struct vcomm *comm, int coll_done);
/* The same, entered/left with mpi_mu held by the caller (one lock hold for a whole call). */
void mpi_enter_locked(struct vcomm *comm, int is_coll);
void mpi_leave_locked(struct vcomm *comm, int coll_done);
void mpi_backoff(unsigned *spins);
/* A message drained at a checkpoint that matches (comm, source, tag): copied into the receive,
 * which is then complete. 1 if one matched. Call under mpi_mu. */
int mpi_drained_match(struct vreq *r);
int mpi_post_recv(struct vreq *r); /* drained match, else the real Irecv */
/* A message drained by a cut, or taken by a matched probe: its bytes in upper memory, or (a
 * matched one, until the next cut) still the library's matched message REAL. */
struct drained {
    struct vcomm *comm;
    int source, tag; /* source: rank in comm */
    int len;
    unsigned char *data; /* packed (MPI_BYTE) */
    void *real;          /* the library's MPI_Message, or NULL */
    struct drained *next;
};
/* A matched probe (MPI_Improbe): the first message matching (C, SOURCE, TAG), a drained one or
 * one the library matches now (counted as received: the cut no longer finds it in the library's
 * queue, and receives it into upper memory if the program has not by then); NULL if none (*RC
 * the library's error, if any). Call under mpi_mu, inside a communicating section. */
struct drained *mpi_message_take(struct vcomm *c, int source, int tag, int *rc, int tries);
/* D received into (BUF, COUNT, TYPE): unpacked from its bytes as far as they fit, or by the
 * library's MPI_Mrecv; its envelope in *ST; D freed. Call under mpi_mu. */
void mpi_message_unpack(struct drained *d, void *buf, int count, MPI_Datatype type, MPI_Status *st);
/* 1 when a drained message matches (source and tag as the program gives them); its envelope in
 * *st. Call under mpi_mu. */
int mpi_drained_peek(struct vcomm *c, int source, int tag, MPI_Status *st);
void mpi_register_hooks(void);
void mpi_finalize_agree(void); /* MPI_Finalize after its barrier: every rank leaves together */

/* ---- groups and inter-communicators (mpi_groups.c, mpi_intercomm.c) ---- */
void vcomm_append(struct vcomm *c);             /* a record made outside vcomm_wrap, appended */
int comm_peer_world(struct vcomm *c, int peer); /* world rank of a p2p peer, -1 if none */
extern struct vcomm *mpi_aux;                   /* the shim's own duplicate of the world */
void mpi_groups_start(void);                    /* at MPI_Init, after the world: mpi_aux */
void mpi_intercomm_rebuild(struct vcomm *c);    /* at restart, in creation order */
int mpi_inter_dup(struct vcomm *c, void *real, MPI_Comm *out); /* MPI_Comm_dup's new one */
/* The ghost counter of a creation whose participants are the world ranks A (and B, the other
 * side of an inter-communicator) with TAG: found or made, the same key on every participant. */
struct vcomm *mpi_ghost(uint64_t kind, const int *a, int na, const int *b, int nb, int tag);
void *mpi_lower_group(const int *w, int n); /* a lower group of those world ranks */
void mpi_lower_group_free(void *g, int n);

/* ---- error handlers (mpi_errh.c), refused functions (mpi_refused.c) ---- */
void mpi_errh_record(void);  /* at a checkpoint, after the cut */
void mpi_errh_rebuild(void); /* at restart, after the communicators */
int mpi_refused(const char *name);

/* ---- attributes (mpi_attr.c) ---- */
/* MPI_Comm_dup: the attributes of FROM that their copy callbacks let through, set on TO_COMM. */
int mpi_attrs_copy(MPI_Comm from_comm, struct vcomm *from, MPI_Comm to_comm);
/* MPI_Comm_free, and MPI_Finalize for MPI_COMM_SELF: every attribute deleted, newest first. */
int mpi_attrs_delete_all(MPI_Comm comm, struct vcomm *c);
int mpi_cart_copy(struct vcomm *from, MPI_Comm to); /* MPI_Comm_dup keeps a grid */
void mpi_names_rebuild(void); /* at restart: the names the program gave communicators */

#endif
