/* miniFE-like conjugate gradient on a CSR matrix: the 5-point Laplacian on an m x m grid
 * with periodic boundaries (plus a diagonal shift so it stays positive definite), so every
 * row has exactly 5 nonzeros. The solver runs a fixed number of iterations so that its cost
 * depends on sizes only. The CSR row loop is annotated: its bounds come from memory. */
#include <stdio.h>
#include <stdlib.h>

static void waxpby(int n, double alpha, const double *x, double beta, const double *y,
                   double *w) {
  for (int i = 0; i < n; i++)
    w[i] = alpha * x[i] + beta * y[i];
}

static double dot(int n, const double *x, const double *y) {
  double sum = 0.0;
  for (int i = 0; i < n; i++)
    sum += x[i] * y[i];
  return sum;
}

static void matvec(int nrows, const int *row_ptr, const int *cols, const double *vals,
                   const double *x, double *y) {
  for (int row = 0; row < nrows; row++) {
    double sum = 0.0;
    for (int k = row_ptr[row]; k < row_ptr[row + 1]; k++) {
#pragma @Annotation {lp_init:row_begin, lp_cond:row_end}
      sum += vals[k] * x[cols[k]];
    }
    y[row] = sum;
  }
}

__attribute__((noinline)) double cg_solve(int n, int iters, const int *row_ptr, const int *cols,
                                          const double *vals, const double *b, double *x,
                                          double *r, double *p, double *Ap) {
  waxpby(n, 1.0, b, 0.0, b, r);
  waxpby(n, 1.0, r, 0.0, r, p);
  double rtrans = dot(n, r, r);
  for (int it = 0; it < iters; it++) {
    matvec(n, row_ptr, cols, vals, p, Ap);
    double alpha = rtrans / dot(n, p, Ap);
    waxpby(n, 1.0, x, alpha, p, x);
    waxpby(n, 1.0, r, -alpha, Ap, r);
    double old = rtrans;
    rtrans = dot(n, r, r);
    waxpby(n, 1.0, r, rtrans / old, p, p);
  }
  return rtrans;
}

int main(int argc, char **argv) {
  int m = argc > 1 ? atoi(argv[1]) : 20;
  int iters = argc > 2 ? atoi(argv[2]) : 10;
  int n = m * m;
  int *row_ptr = malloc(sizeof(int) * (n + 1));
  int *cols = malloc(sizeof(int) * 5 * n);
  double *vals = malloc(sizeof(double) * 5 * n);
  int nnz = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++) {
      row_ptr[i * m + j] = nnz;
      int nb[5][2] = {{(i + m - 1) % m, j}, {i, (j + m - 1) % m}, {i, j},
                      {i, (j + 1) % m}, {(i + 1) % m, j}};
      for (int t = 0; t < 5; t++) {
        cols[nnz] = nb[t][0] * m + nb[t][1];
        vals[nnz] = t == 2 ? 4.5 : -1.0;
        nnz++;
      }
    }
  row_ptr[n] = nnz;
  double *b = malloc(sizeof(double) * n), *x = calloc(n, sizeof(double));
  double *r = malloc(sizeof(double) * n), *p = malloc(sizeof(double) * n);
  double *Ap = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++)
    b[i] = 1.0;
  double res = cg_solve(n, iters, row_ptr, cols, vals, b, x, r, p, Ap);
  printf("%d %g\n", nnz, res);
  return 0;
}
