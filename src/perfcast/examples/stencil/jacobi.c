/* 2-D Jacobi stencil, weak scaling: every rank owns a size x size block of a global
 * (p*size) x size grid, split by rows on a periodic ring of ranks.
 *
 *   usage: mpirun -np P ./jacobi SIZE ITERATIONS
 *
 * The functions live in separate files (grid.c, halo.c) so that the call tree is the same
 * at every optimisation level: no compiler inlines across translation units without LTO.
 * Known complexity per call path: see README.md.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "stencil.h"

static int parse_positive(const char *text, const char *what)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0 || value > 1000000) {
        fprintf(stderr, "jacobi: %s must be a positive integer, got '%s'\n", what, text);
        exit(2);
    }
    return (int)value;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3) {
        fprintf(stderr, "usage: %s SIZE ITERATIONS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int size = parse_positive(argv[1], "SIZE");
    int iterations = parse_positive(argv[2], "ITERATIONS");
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    /* size interior rows plus one halo row above and below */
    double *u = calloc((size_t)(size + 2) * size, sizeof *u);
    double *unew = calloc((size_t)(size + 2) * size, sizeof *unew);
    if (u == NULL || unew == NULL) {
        fprintf(stderr, "jacobi: out of memory for SIZE=%d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    init_grid(u, size, size, rank);
    init_grid(unew, size, size, rank);

    double residual = 0.0;
    for (int it = 0; it < iterations; ++it) {
        exchange_halo(u, size, size, MPI_COMM_WORLD);
        residual = global_residual(sweep(u, unew, size, size), MPI_COMM_WORLD);
        double *swap = u;
        u = unew;
        unew = swap;
    }
    if (rank == 0)
        printf("jacobi: size=%d p=%d iterations=%d residual=%.6e\n", size, ranks, iterations,
               residual);
    free(u);
    free(unew);
    MPI_Finalize();
    return 0;
}
