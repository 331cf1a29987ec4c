/* A halo exchange on a 2-D or 3-D Cartesian grid of ranks, for the grid synthesis of
 * perfcast simulate --synthesize (tests/test_simulate_synthesis.py, item 4 of issue 25).
 *
 *   usage: mpirun -np P ./halo DIMENSIONS NEIGHBOURS EDGE STEPS
 *
 * The ranks form MPI_Dims_create's grid of DIMENSIONS (2 or 3) dimensions, not periodic,
 * so that a rank's neighbours depend on where it is: a corner has fewer than an edge, a
 * face or the interior. NEIGHBOURS is "faces" (the 5-point stencil in 2-D, 7-point in 3-D)
 * or "all" (9 and 27 points, as LULESH exchanges with edges and corners too). Every step
 * each rank posts a receive from every neighbour, sweeps its EDGE^DIMENSIONS block, sends
 * its boundary to every neighbour (EDGE^(DIMENSIONS - k) doubles to a neighbour that is
 * k steps away diagonally: a face, an edge, a corner), waits for all of them and joins an
 * MPI_Allreduce of the residual.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEIGHBOURS 26

static int parse_positive(const char *text, const char *what, long most)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0 || value > most) {
        fprintf(stderr, "halo: %s must be an integer from 1 to %ld, got '%s'\n", what, most, text);
        exit(2);
    }
    return (int)value;
}

/* The ranks of the existing neighbours and how many doubles go to each, in a fixed order
 * of directions, so that every rank of one role runs the same sequence. */
static int neighbours(MPI_Comm grid, int dimensions, int all, int edge, int *ranks, int *sizes)
{
    int dims[3], periods[3], here[3], found = 0;
    MPI_Cart_get(grid, dimensions, dims, periods, here);
    int total = dimensions == 2 ? 9 : 27;
    for (int direction = 0; direction < total; ++direction) {
        int there[3], moved = 0, inside = 1, code = direction;
        for (int d = 0; d < dimensions; ++d) {
            int step = code % 3 - 1;
            code /= 3;
            there[d] = here[d] + step;
            moved += step != 0;
            inside &= there[d] >= 0 && there[d] < dims[d];
        }
        if (moved == 0 || !inside || (!all && moved > 1))
            continue;
        MPI_Cart_rank(grid, there, &ranks[found]);
        int size = 1;
        for (int d = moved; d < dimensions; ++d)
            size *= edge;
        sizes[found++] = size;
    }
    return found;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 5 || (strcmp(argv[2], "faces") != 0 && strcmp(argv[2], "all") != 0)) {
        fprintf(stderr, "usage: %s 2|3 faces|all EDGE STEPS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int dimensions = parse_positive(argv[1], "DIMENSIONS", 3);
    if (dimensions < 2) {
        fprintf(stderr, "halo: DIMENSIONS must be 2 or 3\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int all = strcmp(argv[2], "all") == 0;
    int edge = parse_positive(argv[3], "EDGE", 256);
    int steps = parse_positive(argv[4], "STEPS", 100000);
    int size, dims[3] = {0, 0, 0}, periods[3] = {0, 0, 0};
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, dimensions, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, dimensions, dims, periods, 0, &grid);

    int ranks[MAX_NEIGHBOURS], sizes[MAX_NEIGHBOURS];
    int count = neighbours(grid, dimensions, all, edge, ranks, sizes);
    long cells = edge * edge * (dimensions == 3 ? edge : 1);
    double *block = calloc(cells, sizeof *block);
    double *inbox = calloc((size_t)MAX_NEIGHBOURS * edge * edge, sizeof *inbox);
    double *outbox = calloc((size_t)edge * edge, sizeof *outbox);
    if (block == NULL || inbox == NULL || outbox == NULL) {
        fprintf(stderr, "halo: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Request requests[2 * MAX_NEIGHBOURS];
    double residual = 0.0;
    for (int step = 0; step < steps; ++step) {
        for (int n = 0; n < count; ++n)
            MPI_Irecv(inbox + (size_t)n * edge * edge, sizes[n], MPI_DOUBLE, ranks[n], 7, grid,
                      &requests[n]);
        double local = 0.0;
        for (long i = 0; i < cells; ++i) {
            block[i] = 0.5 * block[i] + 1e-3 * (double)(i % 7);
            local += block[i];
        }
        for (int n = 0; n < count; ++n)
            MPI_Isend(outbox, sizes[n], MPI_DOUBLE, ranks[n], 7, grid, &requests[count + n]);
        MPI_Waitall(2 * count, requests, MPI_STATUSES_IGNORE);
        MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, grid);
    }
    int rank;
    MPI_Comm_rank(grid, &rank);
    if (rank == 0)
        printf("halo: %d ranks, %dx%dx%d, residual %g\n", size, dims[0], dims[1],
               dimensions == 3 ? dims[2] : 1, residual);
    free(block);
    free(inbox);
    free(outbox);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
