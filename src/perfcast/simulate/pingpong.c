/* The measurements behind `perfcast platform calibrate` (src/perfcast/simulate/calibrate.py).
 *
 *   mpirun -np 2 ./pingpong REPETITIONS COMPUTE_STEPS SIZE...
 *
 * Ranks 0 and 1 exchange MPI_BYTE messages: first many small untimed round trips (the
 * shared-memory channel is set up, the cores leave their idle states), then REPETITIONS
 * passes over all SIZEs, each size untimed round trips (the buffer is in the cache, the
 * protocol for this size chosen; ten for a message up to 64 KiB, whose first round trips
 * after a 16 MiB one measurably still pay for the caches it emptied) and a timed one,
 * printed by rank 0 as "pingpong SIZE SECONDS" (a round trip: twice the one-way time).
 * Passes rather than all
 * repetitions of one size in a row: a burst of other work on the machine then disturbs one
 * round trip of many sizes, which the caller's medians drop, not all of one size.
 *
 * Then rank 0 times the compute reference: COMPUTE_STEPS steps of x = x * m + c, each step
 * depending on the one before, so the rate is the latency of a double multiply and add on
 * this core and cannot be vectorised away, in COMPUTE_SLICES slices, each printed as
 * "compute STEPS SECONDS CHECKSUM" (the checksum keeps the compiler from dropping the loop).
 * A slice is timed with the thread's CPU clock, so that time the core spent on other work
 * (rank 1 polling in its barrier, another program) is not counted as this core being slow:
 * timed by the wall clock, the rate of four calibrations on this loaded 2-core machine
 * ranged over 4.6x (7.6e7 to 3.5e8 steps/s). The caller takes the fastest slice, the one
 * least disturbed by what the CPU clock still counts (a cache emptied by another process).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    FIRST_WARMUP_ROUND_TRIPS = 2000,
    SMALL_MESSAGE = 65536,
    SMALL_UNTIMED_ROUND_TRIPS = 10,
    TAG = 17,
    COMPUTE_SLICES = 10
};

static long parse_count(const char *text, const char *what) {
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 0) {
        fprintf(stderr, "pingpong: %s must be a whole number, not '%s'\n", what, text);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return value;
}

static void round_trip(int rank, char *buffer, int size) {
    if (rank == 0) {
        MPI_Send(buffer, size, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
        MPI_Recv(buffer, size, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(buffer, size, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buffer, size, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
    }
}

static double thread_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static void compute_reference(long steps) {
    volatile double seed = 1.0; /* unknown to the compiler: the loop cannot be folded */
    double x = seed, m = 0.999999999, c = 1e-9;
    long slice = steps / COMPUTE_SLICES > 0 ? steps / COMPUTE_SLICES : 1;
    for (long done = 0; done < steps; done += slice) {
        long now = steps - done < slice ? steps - done : slice;
        double start = thread_seconds();
        for (long i = 0; i < now; i++)
            x = x * m + c;
        double seconds = thread_seconds() - start;
        printf("compute %ld %.9e %.6f\n", now, seconds, x);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 3 || ranks < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s REPETITIONS COMPUTE_STEPS SIZE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long repetitions = parse_count(argv[1], "REPETITIONS");
    long steps = parse_count(argv[2], "COMPUTE_STEPS");
    long largest = 1;
    for (int i = 3; i < argc; i++) {
        long size = parse_count(argv[i], "SIZE");
        largest = size > largest ? size : largest;
    }
    char *buffer = malloc((size_t)largest);
    if (buffer == NULL) {
        fprintf(stderr, "pingpong: cannot allocate %ld bytes\n", largest);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(buffer, 1, (size_t)largest);
    /* the first timed sizes would otherwise pay for connection set-up and a cold core */
    for (int w = 0; w < FIRST_WARMUP_ROUND_TRIPS; w++)
        round_trip(rank, buffer, 1);
    for (long r = 0; r < repetitions; r++) {
        for (int i = 3; i < argc; i++) {
            int size = (int)parse_count(argv[i], "SIZE");
            int untimed = size <= SMALL_MESSAGE ? SMALL_UNTIMED_ROUND_TRIPS : 1;
            for (int w = 0; w < untimed; w++)
                round_trip(rank, buffer, size);
            double start = MPI_Wtime();
            round_trip(rank, buffer, size);
            double seconds = MPI_Wtime() - start;
            if (rank == 0)
                printf("pingpong %d %.9e\n", size, seconds);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && steps > 0)
        compute_reference(steps);
    MPI_Barrier(MPI_COMM_WORLD);
    free(buffer);
    MPI_Finalize();
    return 0;
}
