/* mpich_colls.c — the MPICH-ABI shim's synchronous and ready sends, v and nonblocking collectives,
 * scans, reduce-scatters, cancels and names: translated for the libmpi.so.40 shim (docs/MPI.md). */
#include "mpich_shim.h"

typedef int (*f_send)(const void *, int, oh, int, int, oh);
typedef int (*f_scan)(const void *, void *, int, oh, oh, oh);

/* ---- point to point ---- */

static int send(f_send f, const void *buf, int count, MPI_Datatype t, int dest, int tag,
                MPI_Comm comm)
{
    return err_out(f(buf, count, type_in(t), rank_in(dest), tag_in(tag), comm_in(comm)));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return send(OFN(f_send, "MPI_Ssend"), buf, count, t, dest, tag, comm);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return send(OFN(f_send, "MPI_Rsend"), buf, count, t, dest, tag, comm);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Issend"), buf, count, t, dest, tag, comm, req);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Irsend"), buf, count, t, dest, tag, comm, req);
}

/* ---- v collectives: counts and displacements are plain ints in both ABIs ---- */

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm)
{
    typedef int (*f)(const void *, int, oh, void *, const int *, const int *, oh, int, oh);
    return err_out(OFN(f, "MPI_Gatherv")(buf_in(sbuf), scount, type_in(stype), rbuf, rcounts,
                                         displs, type_in(rtype), rank_in(root), comm_in(comm)));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    typedef int (*f)(const void *, const int *, const int *, oh, void *, int, oh, int, oh);
    return err_out(OFN(f, "MPI_Scatterv")(sbuf, scounts, displs, type_in(stype),
                                          (void *)buf_in(rbuf), rcount, type_in(rtype),
                                          rank_in(root), comm_in(comm)));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    typedef int (*f)(const void *, int, oh, void *, const int *, const int *, oh, oh);
    return err_out(OFN(f, "MPI_Allgatherv")(buf_in(sbuf), scount, type_in(stype), rbuf, rcounts,
                                            displs, type_in(rtype), comm_in(comm)));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm)
{
    typedef int (*f)(const void *, const int *, const int *, oh, void *, const int *, const int *,
                     oh, oh);
    return err_out(OFN(f, "MPI_Alltoallv")(buf_in(sbuf), scounts, sdispls, type_in(stype), rbuf,
                                           rcounts, rdispls, type_in(rtype), comm_in(comm)));
}

/* ---- scans and reduce-scatters ---- */

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    return err_out(
        OFN(f_scan, "MPI_Scan")(buf_in(sbuf), rbuf, count, type_in(t), op_in(op), comm_in(comm)));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    return err_out(
        OFN(f_scan, "MPI_Exscan")(buf_in(sbuf), rbuf, count, type_in(t), op_in(op), comm_in(comm)));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype t, MPI_Op op,
                             MPI_Comm comm)
{
    return err_out(OFN(f_scan, "MPI_Reduce_scatter_block")(buf_in(sbuf), rbuf, rcount, type_in(t),
                                                           op_in(op), comm_in(comm)));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype t, MPI_Op op,
                       MPI_Comm comm)
{
    typedef int (*f)(const void *, void *, const int *, oh, oh, oh);
    return err_out(OFN(f, "MPI_Reduce_scatter")(buf_in(sbuf), rbuf, rcounts, type_in(t), op_in(op),
                                                comm_in(comm)));
}

/* ---- nonblocking collectives: the request is the program's like any other ---- */

static int started(int rc, oh o, MPI_Request *req)
{
    *req = rc == 0 ? req_out_new(o) : MPI_REQUEST_NULL;
    return err_out(rc);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    return started(OFN(int (*)(oh, oh *), "MPI_Ibarrier")(comm_in(comm), &o), o, req);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = OFN(int (*)(void *, int, oh, int, oh, oh *),
                 "MPI_Ibcast")(buf, count, type_in(t), rank_in(root), comm_in(comm), &o);
    return started(rc, o, req);
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = OFN(int (*)(const void *, void *, int, oh, oh, oh, oh *), "MPI_Iallreduce")(
        buf_in(sbuf), rbuf, count, type_in(t), op_in(op), comm_in(comm), &o);
    return started(rc, o, req);
}

typedef int (*f_igather)(const void *, int, oh, void *, int, oh, int, oh, oh *);
typedef int (*f_iall)(const void *, int, oh, void *, int, oh, oh, oh *);
typedef int (*f_iscan)(const void *, void *, int, oh, oh, oh, oh *);

static int igather(f_igather f, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = f(buf_in(sbuf), scount, type_in(stype), (void *)buf_in(rbuf), rcount, type_in(rtype),
               rank_in(root), comm_in(comm), &o);
    return started(rc, o, req);
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    return igather(OFN(f_igather, "MPI_Igather"), sbuf, scount, stype, rbuf, rcount, rtype, root,
                   comm, req);
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    return igather(OFN(f_igather, "MPI_Iscatter"), sbuf, scount, stype, rbuf, rcount, rtype, root,
                   comm, req);
}

static int iall(f_iall f, const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc =
        f(buf_in(sbuf), scount, type_in(stype), rbuf, rcount, type_in(rtype), comm_in(comm), &o);
    return started(rc, o, req);
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return iall(OFN(f_iall, "MPI_Iallgather"), sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    return iall(OFN(f_iall, "MPI_Ialltoall"), sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = OFN(int (*)(const void *, void *, int, oh, oh, int, oh, oh *), "MPI_Ireduce")(
        buf_in(sbuf), rbuf, count, type_in(t), op_in(op), rank_in(root), comm_in(comm), &o);
    return started(rc, o, req);
}

static int iscan(f_iscan f, const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op,
                 MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = f(buf_in(sbuf), rbuf, count, type_in(t), op_in(op), comm_in(comm), &o);
    return started(rc, o, req);
}

int MPI_Iscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
              MPI_Request *req)
{
    return iscan(OFN(f_iscan, "MPI_Iscan"), sbuf, rbuf, count, t, op, comm, req);
}

int MPI_Iexscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                MPI_Request *req)
{
    return iscan(OFN(f_iscan, "MPI_Iexscan"), sbuf, rbuf, count, t, op, comm, req);
}

/* ---- cancelling a request ---- */

int MPI_Cancel(MPI_Request *req)
{
    oh o = req_in(*req);
    return err_out(OFN(int (*)(oh *), "MPI_Cancel")(&o));
}

int MPI_Test_cancelled(const MPI_Status *st, int *flag)
{
    struct ostatus os;
    return err_out(OFN(int (*)(const struct ostatus *, int *),
                       "MPI_Test_cancelled")(status_in(&os, st), flag));
}

/* ---- communicators ---- */

int MPI_Comm_set_name(MPI_Comm comm, const char *name)
{
    return err_out(OFN(int (*)(oh, const char *), "MPI_Comm_set_name")(comm_in(comm), name));
}
