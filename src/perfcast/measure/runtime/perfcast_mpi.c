/* perfcast MPI interposition through the PMPI profiling interface.
 *
 * Each wrapper calls the PMPI_ routine, times it (wall time, and the thread's CPU time when
 * PERFCAST_CPU_TIME=1), and records it as a leaf of the calling thread's current call path
 * (perfcast_record_mpi) with the communicator size and the bytes sent and received. The byte rules, per process, with p the communicator size and
 * |x| = count * type size, follow noise-resilient-priors.txt III-A (an MPI_Bcast of n
 * ints to p ranks counts p*n*4 bytes sent at the root and n*4 received at every other
 * rank) and extend it in the same spirit, "one copy of my data per receiving rank":
 *
 *   Send, Isend, Ssend, Bsend, Rsend     sent |buf|
 *   Recv, Irecv                          received |buf| (the posted size)
 *   Sendrecv                             sent |sendbuf|, received |recvbuf|
 *   Bcast                                root sent p*|buf|; others received |buf|
 *   Reduce                               sent |buf|; root received p*|buf|
 *   Allreduce                            sent p*|buf|, received p*|buf|
 *   Gather                               sent |sendbuf|; root received p*|recvbuf|
 *   Scatter                              root sent p*|sendbuf|; received |recvbuf|
 *   Allgather, Alltoall                  sent p*|sendbuf|, received p*|recvbuf|
 *   Alltoallv                            sent sum(sendcounts)*size, received sum(recvcounts)*size
 *   Barrier, Wait, Waitall, Init,
 *   Init_thread, Finalize                time and calls only
 *
 * (MPI_IN_PLACE takes the count and type of the other buffer.) The table is repeated in
 * ../README.md; keep both in step. Every operation name is one static string: the core
 * keys call-path nodes by the name's address.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "perfcast_rt.h"

static const char OP_INIT[] = "MPI_Init", OP_INIT_THREAD[] = "MPI_Init_thread",
                  OP_FINALIZE[] = "MPI_Finalize", OP_SEND[] = "MPI_Send",
                  OP_ISEND[] = "MPI_Isend", OP_SSEND[] = "MPI_Ssend", OP_BSEND[] = "MPI_Bsend",
                  OP_RSEND[] = "MPI_Rsend", OP_RECV[] = "MPI_Recv", OP_IRECV[] = "MPI_Irecv",
                  OP_SENDRECV[] = "MPI_Sendrecv", OP_WAIT[] = "MPI_Wait",
                  OP_WAITALL[] = "MPI_Waitall", OP_BARRIER[] = "MPI_Barrier",
                  OP_BCAST[] = "MPI_Bcast", OP_REDUCE[] = "MPI_Reduce",
                  OP_ALLREDUCE[] = "MPI_Allreduce", OP_GATHER[] = "MPI_Gather",
                  OP_SCATTER[] = "MPI_Scatter", OP_ALLGATHER[] = "MPI_Allgather",
                  OP_ALLTOALL[] = "MPI_Alltoall", OP_ALLTOALLV[] = "MPI_Alltoallv";

static uint64_t bytes(int count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

static int comm_size(MPI_Comm comm)
{
    int size = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return 0;
    return size;
}

static int comm_rank(MPI_Comm comm)
{
    int rank = -1;
    if (comm != MPI_COMM_NULL)
        PMPI_Comm_rank(comm, &rank);
    return rank;
}

static uint64_t sum_bytes(const int counts[], int n, MPI_Datatype type)
{
    uint64_t total = 0;
    for (int i = 0; i < n; ++i)
        total += bytes(counts[i], type);
    return total;
}

/* Time `call` (wall and CPU), then record it. `p` must be computed before the call: the
 * communicator may be freed by it. */
#define MEASURED(operation, p, sent, received, call)                                          \
    do {                                                                                      \
        uint64_t start_ = perfcast_now(), cpu_start_ = perfcast_cpu_now();                    \
        int result_ = (call);                                                                 \
        uint64_t cpu_ = perfcast_cpu_now() - cpu_start_;                                      \
        perfcast_record_mpi((operation), perfcast_now() - start_, cpu_, (p), (sent),          \
                            (received));                                                      \
        return result_;                                                                       \
    } while (0)

static void join_world(void)
{
    int rank = 0, ranks = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
    uint64_t id = rank == 0 ? perfcast_new_run_id() : 0;
    PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    perfcast_set_world(rank, ranks, id);
}

int MPI_Init(int *argc, char ***argv)
{
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Init(argc, argv);
    if (result == MPI_SUCCESS)
        join_world();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_INIT, perfcast_now() - start, cpu, comm_size(MPI_COMM_WORLD), 0, 0);
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Init_thread(argc, argv, required, provided);
    if (result == MPI_SUCCESS)
        join_world();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_INIT_THREAD, perfcast_now() - start, cpu, comm_size(MPI_COMM_WORLD),
                        0, 0);
    return result;
}

int MPI_Finalize(void)
{
    int p = comm_size(MPI_COMM_WORLD);
    MEASURED(OP_FINALIZE, p, 0, 0, PMPI_Finalize());
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    perfcast_mark_aborted();
    return PMPI_Abort(comm, errorcode);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    MEASURED(OP_SEND, comm_size(comm), bytes(count, type), 0,
             PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    MEASURED(OP_SSEND, comm_size(comm), bytes(count, type), 0,
             PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    MEASURED(OP_BSEND, comm_size(comm), bytes(count, type), 0,
             PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    MEASURED(OP_RSEND, comm_size(comm), bytes(count, type), 0,
             PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    MEASURED(OP_ISEND, comm_size(comm), bytes(count, type), 0,
             PMPI_Isend(buf, count, type, dest, tag, comm, request));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MEASURED(OP_RECV, comm_size(comm), 0, bytes(count, type),
             PMPI_Recv(buf, count, type, source, tag, comm, status));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    MEASURED(OP_IRECV, comm_size(comm), 0, bytes(count, type),
             PMPI_Irecv(buf, count, type, source, tag, comm, request));
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MEASURED(OP_SENDRECV, comm_size(comm), bytes(sendcount, sendtype),
             bytes(recvcount, recvtype),
             PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                           recvtype, source, recvtag, comm, status));
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    MEASURED(OP_WAIT, 0, 0, 0, PMPI_Wait(request, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    MEASURED(OP_WAITALL, 0, 0, 0, PMPI_Waitall(count, requests, statuses));
}

int MPI_Barrier(MPI_Comm comm)
{
    MEASURED(OP_BARRIER, comm_size(comm), 0, 0, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t size = bytes(count, type);
    MEASURED(OP_BCAST, p, is_root ? (uint64_t)p * size : 0, is_root ? 0 : size,
             PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t size = bytes(count, type);
    MEASURED(OP_REDUCE, p, size, is_root ? (uint64_t)p * size : 0,
             PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t size = (uint64_t)p * bytes(count, type);
    MEASURED(OP_ALLREDUCE, p, size, size,
             PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t sent = sendbuf == MPI_IN_PLACE ? bytes(recvcount, recvtype)
                                            : bytes(sendcount, sendtype);
    MEASURED(OP_GATHER, p, sent, is_root ? (uint64_t)p * bytes(recvcount, recvtype) : 0,
             PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                         comm));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t received = recvbuf == MPI_IN_PLACE ? bytes(sendcount, sendtype)
                                                : bytes(recvcount, recvtype);
    MEASURED(OP_SCATTER, p, is_root ? (uint64_t)p * bytes(sendcount, sendtype) : 0, received,
             PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                          comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = (uint64_t)p * bytes(recvcount, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : (uint64_t)p * bytes(sendcount, sendtype);
    MEASURED(OP_ALLGATHER, p, sent, received,
             PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = (uint64_t)p * bytes(recvcount, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : (uint64_t)p * bytes(sendcount, sendtype);
    MEASURED(OP_ALLTOALL, p, sent, received,
             PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = sum_bytes(recvcounts, p, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : sum_bytes(sendcounts, p, sendtype);
    MEASURED(OP_ALLTOALLV, p, sent, received,
             PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                            rdispls, recvtype, comm));
}
