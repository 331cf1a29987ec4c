// C++ kernel with templates: a small grid class whose accessors and a templated
// Jacobi sweep and norm are inlined into the driver.
#include <cstdio>
#include <cstdlib>
#include <vector>

template <typename T> class Grid {
public:
  explicit Grid(int n) : n_(n), data_(static_cast<size_t>(n) * n) {}
  T &at(int i, int j) { return data_[static_cast<size_t>(i) * n_ + j]; }
  const T &at(int i, int j) const { return data_[static_cast<size_t>(i) * n_ + j]; }
  int size() const { return n_; }

private:
  int n_;
  std::vector<T> data_;
};

template <typename T> void jacobi_sweep(int n, const Grid<T> &in, Grid<T> &out, T weight) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      out.at(i, j) = weight * (in.at(i - 1, j) + in.at(i + 1, j) + in.at(i, j - 1) +
                               in.at(i, j + 1));
}

template <typename T> T sum_squares(int n, const Grid<T> &g) {
  T total = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      total += g.at(i, j) * g.at(i, j);
  return total;
}

__attribute__((noinline)) double relax(int n, int sweeps, Grid<double> &a, Grid<double> &b) {
  for (int s = 0; s < sweeps; s++) {
    jacobi_sweep<double>(n, a, b, 0.25);
    jacobi_sweep<double>(n, b, a, 0.25);
  }
  return sum_squares<double>(n, a);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 64;
  int sweeps = argc > 2 ? std::atoi(argv[2]) : 4;
  Grid<double> a(n), b(n);
  for (int i = 0; i < n; i++)
    a.at(i, 0) = 1.0;
  std::printf("%g\n", relax(n, sweeps, a, b));
  return 0;
}
