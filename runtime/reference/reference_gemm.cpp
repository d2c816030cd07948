#include "runtime/reference/reference_gemm.h"

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "host/parallel_for.h"

namespace mlpc::runtime {
namespace {

// w packed in strips of 8 output columns, each strip [k][8]: the inner loop reads 64
// contiguous bytes per k instead of 8 rows of w far apart.
constexpr int64_t kStrip = 8;
constexpr int64_t kRowsPerTask = 32;  // rows a task computes against every strip
constexpr int64_t kKBlock = 384;      // a strip's k-range kept hot in cache across the rows

std::vector<double> pack_strips(const double* w, int64_t k, int64_t n) {
  const int64_t strips = n / kStrip;
  std::vector<double> p(static_cast<size_t>(strips * k * kStrip));
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t c = 0; c < kStrip; ++c) {
      const double* wrow = w + (s * kStrip + c) * k;
      double* out = p.data() + s * k * kStrip + c;
      for (int64_t i = 0; i < k; ++i) out[i * kStrip] = wrow[i];
    }
  return p;
}

// y[0..rows_here, 0..8) += x[.., k0..k1) * strip[k0..k1, 0..8), rows_here <= 4, plain C++.
void strip_generic(const double* x, int64_t k, const double* strip, double* y, int64_t n,
                   int64_t rows_here, int64_t k0, int64_t k1) {
  for (int64_t r = 0; r < rows_here; ++r) {
    double acc[kStrip];
    for (int64_t c = 0; c < kStrip; ++c) acc[c] = y[r * n + c];
    for (int64_t i = k0; i < k1; ++i) {
      const double xv = x[r * k + i];
      for (int64_t c = 0; c < kStrip; ++c) acc[c] += xv * strip[i * kStrip + c];
    }
    for (int64_t c = 0; c < kStrip; ++c) y[r * n + c] = acc[c];
  }
}

#if defined(__x86_64__)
// The same for 4 rows at once, in 8 AVX2 accumulators.
__attribute__((target("avx2,fma"))) void strip_avx2(const double* x, int64_t k,
                                                     const double* strip, double* y, int64_t n,
                                                     int64_t k0, int64_t k1) {
  __m256d a00 = _mm256_loadu_pd(y), a01 = _mm256_loadu_pd(y + 4);
  __m256d a10 = _mm256_loadu_pd(y + n), a11 = _mm256_loadu_pd(y + n + 4);
  __m256d a20 = _mm256_loadu_pd(y + 2 * n), a21 = _mm256_loadu_pd(y + 2 * n + 4);
  __m256d a30 = _mm256_loadu_pd(y + 3 * n), a31 = _mm256_loadu_pd(y + 3 * n + 4);
  const double *x0 = x, *x1 = x + k, *x2 = x + 2 * k, *x3 = x + 3 * k;
  for (int64_t i = k0; i < k1; ++i) {
    const __m256d w0 = _mm256_loadu_pd(strip + i * kStrip);
    const __m256d w1 = _mm256_loadu_pd(strip + i * kStrip + 4);
    __m256d b = _mm256_broadcast_sd(x0 + i);
    a00 = _mm256_fmadd_pd(b, w0, a00);
    a01 = _mm256_fmadd_pd(b, w1, a01);
    b = _mm256_broadcast_sd(x1 + i);
    a10 = _mm256_fmadd_pd(b, w0, a10);
    a11 = _mm256_fmadd_pd(b, w1, a11);
    b = _mm256_broadcast_sd(x2 + i);
    a20 = _mm256_fmadd_pd(b, w0, a20);
    a21 = _mm256_fmadd_pd(b, w1, a21);
    b = _mm256_broadcast_sd(x3 + i);
    a30 = _mm256_fmadd_pd(b, w0, a30);
    a31 = _mm256_fmadd_pd(b, w1, a31);
  }
  _mm256_storeu_pd(y, a00);
  _mm256_storeu_pd(y + 4, a01);
  _mm256_storeu_pd(y + n, a10);
  _mm256_storeu_pd(y + n + 4, a11);
  _mm256_storeu_pd(y + 2 * n, a20);
  _mm256_storeu_pd(y + 2 * n + 4, a21);
  _mm256_storeu_pd(y + 3 * n, a30);
  _mm256_storeu_pd(y + 3 * n + 4, a31);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

void rows_task(const double* x, const double* w, const std::vector<double>& packed, double* y,
               int64_t r0, int64_t r1, int64_t k, int64_t n) {
  const int64_t strips = n / kStrip;
  for (int64_t r = r0; r < r1; ++r)
    std::fill(y + r * n, y + (r + 1) * n, 0.0);
  for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
    const int64_t k1 = std::min(k, k0 + kKBlock);
    for (int64_t s = 0; s < strips; ++s) {
      const double* strip = packed.data() + s * k * kStrip;
      for (int64_t r = r0; r < r1; r += 4) {
        const int64_t here = std::min<int64_t>(4, r1 - r);
        double* yr = y + r * n + s * kStrip;
#if defined(__x86_64__)
        if (here == 4 && has_avx2()) {
          strip_avx2(x + r * k, k, strip, yr, n, k0, k1);
          continue;
        }
#endif
        strip_generic(x + r * k, k, strip, yr, n, here, k0, k1);
      }
    }
  }
  // Columns past the last whole strip, straight from w.
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = strips * kStrip; j < n; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w[j * k + i];
      y[r * n + j] = acc;
    }
}

}  // namespace

void reference_gemm(const double* x, const double* w, double* y, int64_t rows, int64_t k,
                    int64_t n) {
  if (rows <= 0 || n <= 0) return;
  const std::vector<double> packed = pack_strips(w, k, n);
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, [&](int64_t t) {
    const int64_t r0 = t * kRowsPerTask;
    rows_task(x, w, packed, y, r0, std::min(rows, r0 + kRowsPerTask), k, n);
  });
}

}  // namespace mlpc::runtime
