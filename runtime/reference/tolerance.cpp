#include "runtime/reference/tolerance.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mlpc::runtime {

Tolerance tolerance_for(ir::DType dtype, int64_t max_k, int depth, bool tf32x3) {
  const double accumulate = tf32x3 && dtype == ir::DType::F32
                                ? 4.0 * std::sqrt(3.0 * static_cast<double>(max_k)) * 0x1.0p-21
                                : 4.0 * std::sqrt(static_cast<double>(max_k)) * 0x1.0p-24;
  auto make = [&](double torch_rtol) {
    const double u = unit_roundoff(dtype);
    return Tolerance{std::max(torch_rtol, depth * u), 8 * u + accumulate};
  };
  switch (dtype) {
    case ir::DType::F32: return make(1.3e-6);
    case ir::DType::F16: return make(1e-3);
    case ir::DType::BF16: return make(1.6e-2);
  }
  return {};
}

Comparison compare_log_softmax(const HostTensor& got, const HostTensor& ref, const Tolerance& tol) {
  Comparison c;
  const size_t n = static_cast<size_t>(ref.row_len());
  if (got.data.size() != ref.data.size() || ref.data.empty() || n == 0) {
    c.max_abs_err = INFINITY;
    return c;
  }
  // A probability stored in the output dtype is off by a unit of its rounding, relative, or by
  // half the subnormal spacing, absolute (f16 holds a 4096-wide softmax's tail as subnormals);
  // in log p at most b = -log(1 - h), h = max(u, s / 2p). One rounded to 0 has no log: both
  // sides are judged at the smallest value the dtype holds.
  const double u = unit_roundoff(ref.dtype), tiny = smallest_subnormal(ref.dtype);
  auto bound = [&](double p) {
    return -std::log1p(-std::min(0.5, std::max(u, 0.5 * tiny / std::max(p, tiny))));
  };
  // Per row: log p - mean(log p); the mean carries the row's average rounding too.
  std::vector<double> g(got.data.size()), r(ref.data.size()), b(ref.data.size());
  double sum_sq = 0.0;
  for (size_t row = 0; row < ref.data.size() / n; ++row) {
    double mean_g = 0.0, mean_r = 0.0, mean_b = 0.0;
    for (size_t i = row * n; i < (row + 1) * n; ++i) {
      g[i] = std::log(std::max(got.data[i], tiny));
      r[i] = std::log(std::max(ref.data[i], tiny));
      b[i] = bound(ref.data[i]);
      mean_g += g[i] / static_cast<double>(n);
      mean_r += r[i] / static_cast<double>(n);
      mean_b += b[i] / static_cast<double>(n);
    }
    for (size_t i = row * n; i < (row + 1) * n; ++i) {
      g[i] -= mean_g;
      r[i] -= mean_r;
      b[i] += mean_b;
      sum_sq += r[i] * r[i];
    }
  }
  c.atol = tol.floor * std::sqrt(sum_sq / static_cast<double>(r.size()));
  c.ok = true;
  for (size_t i = 0; i < r.size(); ++i) {
    const double err = std::fabs(g[i] - r[i]);
    if (!(err == err)) {
      c.ok = false;
      c.worst_ratio = INFINITY;
      continue;
    }
    c.max_abs_err = std::max(c.max_abs_err, err);
    const double allowed = c.atol + tol.rtol * std::fabs(r[i]) + b[i];
    c.worst_ratio = std::max(c.worst_ratio, err / allowed);
  }
  c.ok = c.ok && c.worst_ratio <= 1.0;
  return c;
}

double smallest_subnormal(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F32: return 0x1.0p-149;
    case ir::DType::F16: return 0x1.0p-24;
    case ir::DType::BF16: return 0x1.0p-133;
  }
  return 0.0;
}

double unit_roundoff(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::F32: return 0x1.0p-24;
    case ir::DType::F16: return 0x1.0p-11;
    case ir::DType::BF16: return 0x1.0p-8;
  }
  return 0.0;
}

Comparison compare(const HostTensor& got, const HostTensor& ref, const Tolerance& tol) {
  return compare_contribution(got, ref, nullptr, tol);
}

Comparison compare_contribution(const HostTensor& got, const HostTensor& ref,
                                const HostTensor* base, const Tolerance& tol) {
  Comparison c;
  if (base && base->data.size() != ref.data.size()) {
    c.max_abs_err = INFINITY;
    return c;
  }
  // Judged on d = y - base: the floor and rtol scale with the block's contribution, plus one
  // rounding of y itself to its dtype, which no kernel can avoid.
  auto d = [&](const HostTensor& t, size_t i) { return t.data[i] - (base ? base->data[i] : 0.0); };
  const double y_rounding = base ? unit_roundoff(ref.dtype) : 0.0;
  if (got.data.size() != ref.data.size() || ref.data.empty()) {
    c.max_abs_err = INFINITY;
    return c;
  }
  double sum_sq = 0.0;
  for (size_t i = 0; i < ref.data.size(); ++i) sum_sq += d(ref, i) * d(ref, i);
  c.atol = tol.floor * std::sqrt(sum_sq / static_cast<double>(ref.data.size()));
  c.ok = true;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    double err = std::fabs(d(got, i) - d(ref, i));
    if (!(err == err)) {  // NaN never passes
      c.ok = false;
      c.max_abs_err = NAN;
      c.worst_ratio = INFINITY;
      continue;
    }
    if (err > c.max_abs_err) c.max_abs_err = err;
    double allowed =
        c.atol + tol.rtol * std::fabs(d(ref, i)) + y_rounding * std::fabs(ref.data[i]);
    double ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0.0);
    if (ratio > c.worst_ratio) c.worst_ratio = ratio;
  }
  c.ok = c.ok && c.worst_ratio <= 1.0;
  return c;
}

}  // namespace mlpc::runtime
