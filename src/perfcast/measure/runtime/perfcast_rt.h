/* perfcast measurement runtime: the interface between the call-path core (perfcast_rt.c)
 * and the MPI interposition layer (perfcast_mpi.c). Internal to perfcast; applications
 * never include it. */
#ifndef PERFCAST_RT_H
#define PERFCAST_RT_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t perfcast_now(void);

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

/* A fresh run identifier (rank 0 makes it, the MPI layer broadcasts it). */
uint64_t perfcast_new_run_id(void);

/* Called from the MPI_Abort wrapper: the run is being torn down, write no profile. */
void perfcast_mark_aborted(void);

#endif
