/* A compute-bound ring for benchmarks/synthesis_vs_simulated.py --program ring.
 *
 *   usage: mpirun -np P ./ring PASSES STEPS
 *
 * Every step, each rank exchanges 8 doubles with its neighbours on a periodic ring, runs
 * PASSES multiply-adds over an array of 256 doubles (its burst: about 37 ns a pass here)
 * and joins an MPI_Allreduce of one double, so a step lasts as long as the slowest rank's
 * burst. The array is 2 KiB, so that every rank's data stays in this machine's 2 MiB L2
 * cache even when SimGrid SMPI runs 1024 ranks one after another in one process: the
 * stencil's bursts (266 KiB a rank) become 80 % slower there at p = 256, a step that the
 * direct simulation shows and a cluster would not, which this program leaves out so that
 * the comparison measures the synthesis alone.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LENGTH 256
#define HALO 8

static double data[LENGTH];

static int parse_positive(const char *text, const char *what)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0 || value > 100000000) {
        fprintf(stderr, "ring: %s must be a positive integer, got '%s'\n", what, text);
        exit(2);
    }
    return (int)value;
}

static double burst(int passes)
{
    for (int pass = 0; pass < passes; ++pass)
        for (int i = 0; i < LENGTH; ++i)
            data[i] = data[i] * 0.999999 + 1e-6;
    return data[0];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3) {
        fprintf(stderr, "usage: %s PASSES STEPS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int passes = parse_positive(argv[1], "PASSES");
    int steps = parse_positive(argv[2], "STEPS");
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int i = 0; i < LENGTH; ++i)
        data[i] = rank + i;
    int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
    double total = 0.0;
    for (int step = 0; step < steps; ++step) {
        MPI_Sendrecv(data, HALO, MPI_DOUBLE, right, 0, data + LENGTH - HALO, HALO, MPI_DOUBLE,
                     left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double mine = burst(passes);
        MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("ring: p=%d passes=%d steps=%d total=%.6e\n", ranks, passes, steps, total);
    MPI_Finalize();
    return 0;
}
