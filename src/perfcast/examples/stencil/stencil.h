#ifndef STENCIL_H
#define STENCIL_H
#include <mpi.h>

/* Row-major blocks of (rows + 2) x cols doubles: row 0 and row rows+1 are halo rows. */
void init_grid(double *u, int rows, int cols, int rank);
double sweep(const double *u, double *unew, int rows, int cols);
void exchange_halo(double *u, int rows, int cols, MPI_Comm comm);
double global_residual(double local, MPI_Comm comm);

#endif
