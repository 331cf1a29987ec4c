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
 *   Allgatherv                           sent p*|sendbuf|, received sum(recvcounts)*size
 *   Reduce_scatter                       sent sum(recvcounts)*size, received p*recvcounts[me]*size
 *   Issend, Ibsend, Irsend               sent |buf|
 *   Barrier, Wait, Waitall, Init,
 *   Init_thread, Finalize, and the calls
 *   trace mode refuses (Test*, Waitany,
 *   Waitsome, Probe, Iprobe, Scan, Exscan,
 *   Sendrecv_replace, Ibcast, Iallreduce,
 *   Ireduce, Ibarrier)                   time and calls only
 *
 * Trace mode (`perfcast build --trace` links perfcast_trace.o): the same wrappers also call
 * the trace hooks declared in perfcast_rt.h. They are weak symbols, null in a profile build,
 * so this file is one object for both modes and a profile build does exactly what it did
 * before. In trace mode a receive whose source or tag is a wildcard gets a status of its
 * own when the caller passed MPI_STATUS(ES)_IGNORE, and a wait remembers its requests'
 * values before PMPI sets them to MPI_REQUEST_NULL: the trace names a request by its
 * source, destination and tag.
 *
 * (MPI_IN_PLACE takes the count and type of the other buffer.) The table is repeated in
 * ../README.md; keep both in step. Every operation name is one static string: the core
 * keys call-path nodes by the name's address.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfcast_rt.h"

static const char OP_INIT[] = "MPI_Init", OP_INIT_THREAD[] = "MPI_Init_thread",
                  OP_FINALIZE[] = "MPI_Finalize", OP_SEND[] = "MPI_Send",
                  OP_ISEND[] = "MPI_Isend", OP_SSEND[] = "MPI_Ssend", OP_BSEND[] = "MPI_Bsend",
                  OP_RSEND[] = "MPI_Rsend", OP_ISSEND[] = "MPI_Issend",
                  OP_IBSEND[] = "MPI_Ibsend", OP_IRSEND[] = "MPI_Irsend", OP_RECV[] = "MPI_Recv",
                  OP_IRECV[] = "MPI_Irecv", OP_SENDRECV[] = "MPI_Sendrecv",
                  OP_WAIT[] = "MPI_Wait", OP_WAITALL[] = "MPI_Waitall",
                  OP_BARRIER[] = "MPI_Barrier", OP_BCAST[] = "MPI_Bcast",
                  OP_REDUCE[] = "MPI_Reduce", OP_ALLREDUCE[] = "MPI_Allreduce",
                  OP_GATHER[] = "MPI_Gather", OP_SCATTER[] = "MPI_Scatter",
                  OP_ALLGATHER[] = "MPI_Allgather", OP_ALLGATHERV[] = "MPI_Allgatherv",
                  OP_ALLTOALL[] = "MPI_Alltoall", OP_ALLTOALLV[] = "MPI_Alltoallv",
                  OP_REDUCE_SCATTER[] = "MPI_Reduce_scatter", OP_TEST[] = "MPI_Test",
                  OP_TESTALL[] = "MPI_Testall", OP_TESTANY[] = "MPI_Testany",
                  OP_TESTSOME[] = "MPI_Testsome", OP_WAITANY[] = "MPI_Waitany",
                  OP_WAITSOME[] = "MPI_Waitsome", OP_PROBE[] = "MPI_Probe",
                  OP_IPROBE[] = "MPI_Iprobe", OP_SCAN[] = "MPI_Scan", OP_EXSCAN[] = "MPI_Exscan",
                  OP_SENDRECV_REPLACE[] = "MPI_Sendrecv_replace", OP_IBCAST[] = "MPI_Ibcast",
                  OP_IALLREDUCE[] = "MPI_Iallreduce", OP_IREDUCE[] = "MPI_Ireduce",
                  OP_IBARRIER[] = "MPI_Ibarrier";

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

/* Under SMPI the rank resumes after every MPI call at a new simulated instant (or the same
 * one, after other ranks ran): the core's clock restarts there. Null outside SMPI builds. */
static inline void resumed(void)
{
    if (perfcast_resumed != NULL)
        perfcast_resumed();
}

static inline int tracing(void)
{
    return perfcast_trace_enter != NULL;
}

/* Time `call` (wall and CPU), then record it; in trace mode, end the compute block before
 * it and write its action (`trace`, a statement) after it. `p` must be computed before the
 * call: the communicator may be freed by it. */
#define TRACED(operation, comm, p, sent, received, call, trace)                               \
    do {                                                                                      \
        int tracing_ = tracing();                                                             \
        if (tracing_)                                                                         \
            perfcast_trace_enter((operation), (comm));                                        \
        uint64_t start_ = perfcast_now(), cpu_start_ = perfcast_cpu_now();                    \
        int result_ = (call);                                                                 \
        resumed();                                                                            \
        uint64_t cpu_ = perfcast_cpu_now() - cpu_start_;                                      \
        perfcast_record_mpi((operation), perfcast_now() - start_, cpu_, (p), (sent),          \
                            (received));                                                      \
        if (tracing_) {                                                                       \
            trace;                                                                            \
            perfcast_trace_leave();                                                           \
        }                                                                                     \
        return result_;                                                                       \
    } while (0)

/* A call trace mode cannot express: recorded like any other in a profile build. */
#define UNSUPPORTED_IN_TRACE(operation, p, call)                                              \
    do {                                                                                      \
        if (tracing())                                                                        \
            perfcast_trace_unsupported(operation);                                            \
        uint64_t start_ = perfcast_now(), cpu_start_ = perfcast_cpu_now();                    \
        int result_ = (call);                                                                 \
        resumed();                                                                            \
        uint64_t cpu_ = perfcast_cpu_now() - cpu_start_;                                      \
        perfcast_record_mpi((operation), perfcast_now() - start_, cpu_, (p), 0, 0);           \
        return result_;                                                                       \
    } while (0)

static int world_rank, world_ranks;
static uint64_t world_run_id;

static void join_world(void)
{
    int rank = 0, ranks = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (perfcast_trace_prepare != NULL)
        perfcast_trace_prepare(rank);
    uint64_t id = rank == 0 ? perfcast_new_run_id() : 0;
    PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    perfcast_set_world(rank, ranks, id);
    world_rank = rank;
    world_ranks = ranks;
    world_run_id = id;
}

/* The end of MPI_Init(_thread): the trace's clock starts when the application resumes. */
static void start_trace(int result, const char *operation)
{
    if (result == MPI_SUCCESS && perfcast_trace_start != NULL)
        perfcast_trace_start(world_rank, world_ranks, world_run_id, operation);
}

int MPI_Init(int *argc, char ***argv)
{
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Init(argc, argv);
    resumed();
    if (result == MPI_SUCCESS)
        join_world();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_INIT, perfcast_now() - start, cpu, comm_size(MPI_COMM_WORLD), 0, 0);
    start_trace(result, OP_INIT);
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Init_thread(argc, argv, required, provided);
    resumed();
    if (result == MPI_SUCCESS)
        join_world();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_INIT_THREAD, perfcast_now() - start, cpu, comm_size(MPI_COMM_WORLD),
                        0, 0);
    start_trace(result, OP_INIT_THREAD);
    return result;
}

int MPI_Finalize(void)
{
    int p = comm_size(MPI_COMM_WORLD);
    if (tracing()) {
        perfcast_trace_enter(OP_FINALIZE, MPI_COMM_WORLD);
        perfcast_trace_finish();
    }
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Finalize();
    resumed();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_FINALIZE, perfcast_now() - start, cpu, p, 0, 0);
    return result;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    perfcast_mark_aborted();
    return PMPI_Abort(comm, errorcode);
}

#define BLOCKING_SEND(operation, pmpi)                                                        \
    TRACED(operation, comm, comm_size(comm), bytes(count, type), 0,                           \
           pmpi(buf, count, type, dest, tag, comm),                                           \
           perfcast_trace_p2p("send", dest, tag, count, type, NULL, NULL))

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    BLOCKING_SEND(OP_SEND, PMPI_Send);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    BLOCKING_SEND(OP_SSEND, PMPI_Ssend);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    BLOCKING_SEND(OP_BSEND, PMPI_Bsend);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    BLOCKING_SEND(OP_RSEND, PMPI_Rsend);
}

#define NONBLOCKING_SEND(operation, pmpi)                                                     \
    TRACED(operation, comm, comm_size(comm), bytes(count, type), 0,                           \
           pmpi(buf, count, type, dest, tag, comm, request),                                  \
           perfcast_trace_p2p("isend", dest, tag, count, type, NULL, request))

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    NONBLOCKING_SEND(OP_ISEND, PMPI_Isend);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    NONBLOCKING_SEND(OP_ISSEND, PMPI_Issend);
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    NONBLOCKING_SEND(OP_IBSEND, PMPI_Ibsend);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    NONBLOCKING_SEND(OP_IRSEND, PMPI_Irsend);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MPI_Status own;
    if (tracing() && status == MPI_STATUS_IGNORE)
        status = &own;
    TRACED(OP_RECV, comm, comm_size(comm), 0, bytes(count, type),
           PMPI_Recv(buf, count, type, source, tag, comm, status),
           perfcast_trace_p2p("recv", source, tag, count, type, status, NULL));
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    TRACED(OP_IRECV, comm, comm_size(comm), 0, bytes(count, type),
           PMPI_Irecv(buf, count, type, source, tag, comm, request),
           perfcast_trace_p2p("irecv", source, tag, count, type, NULL, request));
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    if (tracing() && status == MPI_STATUS_IGNORE)
        status = &own;
    TRACED(OP_SENDRECV, comm, comm_size(comm), bytes(sendcount, sendtype),
           bytes(recvcount, recvtype),
           PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status),
           perfcast_trace_sendrecv(dest, sendtag, sendcount, sendtype, source, recvtag,
                                   recvcount, recvtype, status));
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    MPI_Status own;
    MPI_Request before = MPI_REQUEST_NULL;
    if (tracing()) {
        before = *request;
        if (status == MPI_STATUS_IGNORE)
            status = &own;
    }
    TRACED(OP_WAIT, MPI_COMM_WORLD, 0, 0, 0, PMPI_Wait(request, status),
           perfcast_trace_completed(before, status));
}

static void trace_waitall(int count, const MPI_Request before[], const MPI_Status statuses[])
{
    for (int i = 0; i < count; ++i)
        perfcast_trace_completed(before[i], &statuses[i]);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    if (!tracing() || count <= 0)
        TRACED(OP_WAITALL, MPI_COMM_WORLD, 0, 0, 0, PMPI_Waitall(count, requests, statuses),
               (void)0);
    MPI_Request *before = malloc((size_t)count * sizeof *before);
    MPI_Status *own = statuses == MPI_STATUSES_IGNORE ? malloc((size_t)count * sizeof *own) : NULL;
    if (before == NULL || (statuses == MPI_STATUSES_IGNORE && own == NULL)) {
        fprintf(stderr, "perfcast trace: out of memory in MPI_Waitall\n");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    memcpy(before, requests, (size_t)count * sizeof *before);
    MPI_Status *used = own != NULL ? own : statuses;
    perfcast_trace_enter(OP_WAITALL, MPI_COMM_WORLD);
    uint64_t start = perfcast_now(), cpu_start = perfcast_cpu_now();
    int result = PMPI_Waitall(count, requests, used);
    resumed();
    uint64_t cpu = perfcast_cpu_now() - cpu_start;
    perfcast_record_mpi(OP_WAITALL, perfcast_now() - start, cpu, 0, 0, 0);
    trace_waitall(count, before, used);
    perfcast_trace_leave();
    free(before);
    free(own);
    return result;
}

int MPI_Barrier(MPI_Comm comm)
{
    TRACED(OP_BARRIER, comm, comm_size(comm), 0, 0, PMPI_Barrier(comm), perfcast_trace_barrier());
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t size = bytes(count, type);
    TRACED(OP_BCAST, comm, p, is_root ? (uint64_t)p * size : 0, is_root ? 0 : size,
           PMPI_Bcast(buf, count, type, root, comm),
           perfcast_trace_rooted("bcast", count, type, root));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t size = bytes(count, type);
    TRACED(OP_REDUCE, comm, p, size, is_root ? (uint64_t)p * size : 0,
           PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm),
           perfcast_trace_rooted("reduce", count, type, root));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t size = (uint64_t)p * bytes(count, type);
    TRACED(OP_ALLREDUCE, comm, p, size, size,
           PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm),
           perfcast_trace_allreduce(count, type));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t sent = sendbuf == MPI_IN_PLACE ? bytes(recvcount, recvtype)
                                            : bytes(sendcount, sendtype);
    TRACED(OP_GATHER, comm, p, sent, is_root ? (uint64_t)p * bytes(recvcount, recvtype) : 0,
           PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),
           perfcast_trace_exchange("gather", sendbuf == MPI_IN_PLACE, sendcount, sendtype,
                                   is_root ? recvcount : -1, recvtype, root));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int p = comm_size(comm), is_root = comm_rank(comm) == root;
    uint64_t received = recvbuf == MPI_IN_PLACE ? bytes(sendcount, sendtype)
                                                : bytes(recvcount, recvtype);
    TRACED(OP_SCATTER, comm, p, is_root ? (uint64_t)p * bytes(sendcount, sendtype) : 0, received,
           PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm),
           perfcast_trace_exchange("scatter", recvbuf == MPI_IN_PLACE,
                                   is_root ? sendcount : -1, sendtype, recvcount, recvtype,
                                   root));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = (uint64_t)p * bytes(recvcount, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : (uint64_t)p * bytes(sendcount, sendtype);
    TRACED(OP_ALLGATHER, comm, p, sent, received,
           PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
           perfcast_trace_exchange("allgather", sendbuf == MPI_IN_PLACE, sendcount, sendtype,
                                   recvcount, recvtype, -1));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = sum_bytes(recvcounts, p, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? (uint64_t)p * bytes(recvcounts[comm_rank(comm)],
                                                                  recvtype)
                                            : (uint64_t)p * bytes(sendcount, sendtype);
    TRACED(OP_ALLGATHERV, comm, p, sent, received,
           PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm),
           perfcast_trace_allgatherv(sendbuf == MPI_IN_PLACE, sendcount, sendtype, recvcounts,
                                     recvtype));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = (uint64_t)p * bytes(recvcount, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : (uint64_t)p * bytes(sendcount, sendtype);
    TRACED(OP_ALLTOALL, comm, p, sent, received,
           PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
           perfcast_trace_exchange("alltoall", sendbuf == MPI_IN_PLACE, sendcount, sendtype,
                                   recvcount, recvtype, -1));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    int p = comm_size(comm);
    uint64_t received = sum_bytes(recvcounts, p, recvtype);
    uint64_t sent = sendbuf == MPI_IN_PLACE ? received : sum_bytes(sendcounts, p, sendtype);
    TRACED(OP_ALLTOALLV, comm, p, sent, received,
           PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm),
           perfcast_trace_alltoallv(sendbuf == MPI_IN_PLACE, sendcounts, sendtype, recvcounts,
                                    recvtype));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int p = comm_size(comm), me = comm_rank(comm);
    uint64_t sent = sum_bytes(recvcounts, p, type);
    uint64_t received = me >= 0 ? (uint64_t)p * bytes(recvcounts[me], type) : 0;
    TRACED(OP_REDUCE_SCATTER, comm, p, sent, received,
           PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm),
           perfcast_trace_reduce_scatter(recvcounts, type));
}

/* ---------------------------------------------------------------------------------------
 * Calls trace mode refuses (SimGrid's replay has no faithful action for them, or perfcast
 * does not write one yet); a profile build records them like the others.
 * ------------------------------------------------------------------------------------- */

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_TEST, 0, PMPI_Test(request, flag, status));
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    UNSUPPORTED_IN_TRACE(OP_TESTALL, 0, PMPI_Testall(count, requests, flag, statuses));
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_TESTANY, 0, PMPI_Testany(count, requests, index, flag, status));
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    UNSUPPORTED_IN_TRACE(OP_TESTSOME, 0,
                         PMPI_Testsome(incount, requests, outcount, indices, statuses));
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_WAITANY, 0, PMPI_Waitany(count, requests, index, status));
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    UNSUPPORTED_IN_TRACE(OP_WAITSOME, 0,
                         PMPI_Waitsome(incount, requests, outcount, indices, statuses));
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_PROBE, comm_size(comm), PMPI_Probe(source, tag, comm, status));
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_IPROBE, comm_size(comm),
                         PMPI_Iprobe(source, tag, comm, flag, status));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm)
{
    UNSUPPORTED_IN_TRACE(OP_SCAN, comm_size(comm),
                         PMPI_Scan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm)
{
    UNSUPPORTED_IN_TRACE(OP_EXSCAN, comm_size(comm),
                         PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    UNSUPPORTED_IN_TRACE(OP_SENDRECV_REPLACE, comm_size(comm),
                         PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag,
                                               comm, status));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *request)
{
    UNSUPPORTED_IN_TRACE(OP_IBCAST, comm_size(comm),
                         PMPI_Ibcast(buf, count, type, root, comm, request));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    UNSUPPORTED_IN_TRACE(OP_IALLREDUCE, comm_size(comm),
                         PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request)
{
    UNSUPPORTED_IN_TRACE(OP_IREDUCE, comm_size(comm),
                         PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    UNSUPPORTED_IN_TRACE(OP_IBARRIER, comm_size(comm), PMPI_Ibarrier(comm, request));
}
