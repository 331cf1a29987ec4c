/* STREAM-like triad: a[i] = b[i] + s * c[i]. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void triad(int n, double *restrict a, const double *restrict b,
                                     const double *restrict c, double s) {
  for (int i = 0; i < n; i++)
    a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  double *a = malloc(sizeof(double) * n);
  double *b = malloc(sizeof(double) * n);
  double *c = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    b[i] = i;
    c[i] = 2.0 * i;
  }
  triad(n, a, b, c, 3.0);
  printf("%g\n", a[n - 1]);
  free(a);
  free(b);
  free(c);
  return 0;
}
