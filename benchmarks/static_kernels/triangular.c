/* Triangular loop nest with a data-independent branch that leaves holes (j % 4 != 0). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void triangular(int n, double *restrict x, const double *restrict y) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (j % 4 != 0)
        x[j] += y[i] * y[j];
      else
        x[j] -= 0.5 * y[i];
    }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  double *x = calloc(n, sizeof(double));
  double *y = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++)
    y[i] = 1.0 / (i + 1);
  triangular(n, x, y);
  printf("%g\n", x[n - 1]);
  free(x);
  free(y);
  return 0;
}
