/* Naive DGEMM: C += A * B for n x n row-major matrices. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void dgemm(int n, const double *A, const double *B, double *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double sum = C[i * n + j];
      for (int k = 0; k < n; k++)
        sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = sum;
    }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  double *A = malloc(sizeof(double) * n * n);
  double *B = malloc(sizeof(double) * n * n);
  double *C = calloc((size_t)n * n, sizeof(double));
  for (int i = 0; i < n * n; i++) {
    A[i] = i % 7;
    B[i] = i % 5;
  }
  dgemm(n, A, B, C);
  printf("%g\n", C[n * n - 1]);
  free(A);
  free(B);
  free(C);
  return 0;
}
