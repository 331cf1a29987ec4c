/* perfcast measurement runtime: the interface between the call-path core (perfcast_rt.c)
 * and the MPI interposition layer (perfcast_mpi.c). Internal to perfcast; applications
 * never include it. */
#ifndef PERFCAST_RT_H
#define PERFCAST_RT_H

#include <stddef.h>
#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t perfcast_now(void);

/* Only in the runtime built for SimGrid SMPI (perfcast build --smpi), where perfcast_now()
 * is the rank's simulated time: called right after every MPI call returns, when the rank
 * resumes at the simulated instant its call ended. Weak: null in every other build. */
void perfcast_resumed(void) __attribute__((weak));

/* Nanoseconds of the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), or 0 when CPU
 * time is not measured (PERFCAST_CPU_TIME unset): then the system call is not made. */
uint64_t perfcast_cpu_now(void);

/* Record one completed MPI call as a leaf below the calling thread's current call path:
 * operation name (a string literal: it is the node's key), elapsed wall and CPU time, the
 * size of the communicator it ran on, and the bytes it sent and received by the rules in
 * README.md. */
void perfcast_record_mpi(const char *operation, uint64_t elapsed_ns, uint64_t cpu_ns,
                         int comm_size, uint64_t bytes_sent, uint64_t bytes_received);

/* Called once from the MPI_Init wrapper: this process's rank, the world size, and a run
 * identifier that all ranks share (so a reader can tell runs apart). */
void perfcast_set_world(int rank, int ranks, uint64_t run_id);

/* Only in the runtime built for SimGrid SMPI: the MPI_COMM_WORLD rank this copy of the
 * program runs as, -1 before MPI_Init. Every rank is a copy in one process, so there is no
 * launcher variable (OMPI_COMM_WORLD_RANK) of its own; perfcast_threshold.c names its
 * statistics file with it. */
int perfcast_world_rank(void);

/* A fresh run identifier (rank 0 makes it, the MPI layer broadcasts it). */
uint64_t perfcast_new_run_id(void);

/* Called from the MPI_Abort wrapper: the run is being torn down, write no profile. */
void perfcast_mark_aborted(void);

/* Trace mode (perfcast_trace.c, linked by `perfcast build --trace`) needs to name the call
 * path an MPI call closes: the node of `operation` below the calling thread's current call
 * path (created if new; perfcast_record_mpi then finds the same node), and the path of a
 * node of the calling thread, in the profile's notation (main->sweep->MPI_Allreduce),
 * written to `buffer` (truncated to `capacity`). The current node is 0 at the top level. */
uint32_t perfcast_mpi_node(const char *operation);
uint32_t perfcast_current_node(void);
void perfcast_call_path(uint32_t node, char *buffer, size_t capacity);

/* The trace hooks are weak everywhere but in perfcast_trace.c, which defines
 * PERFCAST_TRACE_DEFINITIONS: in a program built without --trace they are null, and the
 * MPI layer (one object for both modes) skips them. */
#ifdef PERFCAST_TRACE_DEFINITIONS
#define PERFCAST_TRACE_HOOK
#else
#define PERFCAST_TRACE_HOOK __attribute__((weak))
#endif

/* Adds `ns` to the current compute block of the trace as if it had run there (the threshold
 * iteration rule: iterations skipped but accounted for); summed per rank into the trace's
 * "credited" seconds. Call it through a weak reference: it exists only in trace mode. */
PERFCAST_TRACE_HOOK void perfcast_trace_credit(uint64_t ns);

#ifdef MPI_VERSION
/* The MPI layer's calls into the trace writer, in the order a run makes them:
 * prepare (in MPI_Init, before the run id broadcast), start (end of MPI_Init); per traced
 * call enter (before it: ends the compute block, checks the communicator), one action hook
 * after it, leave; unsupported (a call trace mode cannot express: stops the run); finish
 * (in MPI_Finalize, before PMPI_Finalize: writes the files). */
PERFCAST_TRACE_HOOK void perfcast_trace_prepare(int rank);
PERFCAST_TRACE_HOOK void perfcast_trace_start(int rank, int ranks, uint64_t run_id,
                                              const char *init_operation);
PERFCAST_TRACE_HOOK void perfcast_trace_enter(const char *operation, MPI_Comm comm);
PERFCAST_TRACE_HOOK void perfcast_trace_leave(void);
PERFCAST_TRACE_HOOK void perfcast_trace_unsupported(const char *operation);
PERFCAST_TRACE_HOOK void perfcast_trace_finish(void);
/* Point to point: "send"/"recv"/"isend"/"irecv"; `status` (recv) gives the source and tag
 * of a receive from MPI_ANY_SOURCE/MPI_ANY_TAG; `request` (isend/irecv) is remembered. */
PERFCAST_TRACE_HOOK void perfcast_trace_p2p(const char *action, int peer, int tag, int count,
                                            MPI_Datatype type, const MPI_Status *status,
                                            const MPI_Request *request);
PERFCAST_TRACE_HOOK void perfcast_trace_sendrecv(int dest, int sendtag, int sendcount,
                                                 MPI_Datatype sendtype, int source, int recvtag,
                                                 int recvcount, MPI_Datatype recvtype,
                                                 const MPI_Status *status);
/* A completed request: its value before the wait, and the status the wait gave. */
PERFCAST_TRACE_HOOK void perfcast_trace_completed(MPI_Request request, const MPI_Status *status);
/* Collectives, each in SimGrid's action syntax (see perfcast_trace.c). `in_place` says the
 * send buffer was MPI_IN_PLACE. */
PERFCAST_TRACE_HOOK void perfcast_trace_barrier(void);
PERFCAST_TRACE_HOOK void perfcast_trace_rooted(const char *action, int count, MPI_Datatype type,
                                               int root);
PERFCAST_TRACE_HOOK void perfcast_trace_allreduce(int count, MPI_Datatype type);
PERFCAST_TRACE_HOOK void perfcast_trace_exchange(const char *action, int in_place, int sendcount,
                                                 MPI_Datatype sendtype, int recvcount,
                                                 MPI_Datatype recvtype, int root);
PERFCAST_TRACE_HOOK void perfcast_trace_allgatherv(int in_place, int sendcount,
                                                   MPI_Datatype sendtype, const int recvcounts[],
                                                   MPI_Datatype recvtype);
PERFCAST_TRACE_HOOK void perfcast_trace_alltoallv(int in_place, const int sendcounts[],
                                                  MPI_Datatype sendtype, const int recvcounts[],
                                                  MPI_Datatype recvtype);
PERFCAST_TRACE_HOOK void perfcast_trace_reduce_scatter(const int recvcounts[], MPI_Datatype type);
#endif

#endif
