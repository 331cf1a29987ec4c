/* PMPI clock for benchmarks/simulate_vs_measured.py: the native run time that a SimGrid
 * replay predicts is MPI_Init to MPI_Finalize, not process wall (mpirun start-up alone is
 * ~0.3 s here). Preloaded into an uninstrumented program, it starts each rank's clock when
 * PMPI_Init returns, stops it when MPI_Finalize is entered, and rank 0 writes the maximum
 * over ranks (the slowest rank ends the run) to the file named by
 * PERFCAST_BENCH_SECONDS_FILE.
 *
 *   mpicc -O2 -shared -fPIC init_finalize_clock.c -o init_finalize_clock.so
 *   PERFCAST_BENCH_SECONDS_FILE=s.txt mpirun -np 2 -x LD_PRELOAD=./init_finalize_clock.so \
 *       -x PERFCAST_BENCH_SECONDS_FILE ./app
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double started;

static double monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

int MPI_Init(int *argc, char ***argv)
{
    int result = PMPI_Init(argc, argv);
    started = monotonic_seconds();
    return result;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int result = PMPI_Init_thread(argc, argv, required, provided);
    started = monotonic_seconds();
    return result;
}

int MPI_Finalize(void)
{
    double mine = monotonic_seconds() - started, slowest = 0.0;
    int rank = 0;
    PMPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *path = getenv("PERFCAST_BENCH_SECONDS_FILE");
    if (rank == 0 && path != NULL) {
        FILE *out = fopen(path, "w");
        if (out == NULL) {
            perror(path);
        } else {
            fprintf(out, "%.9f\n", slowest);
            fclose(out);
        }
    }
    return PMPI_Finalize();
}
