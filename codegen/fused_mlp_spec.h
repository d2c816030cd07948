// What a fused-MLP region computes, as the kernel generators read it: a chain of GEMMs whose
// hidden activations never leave the chip (issue "Whole MLPs in one kernel"). The region pass
// (passes/) builds it from the IR; the generators (codegen/fused_mlp_*_kernel.h) take nothing
// else, so a kernel can be generated and tested without a graph.
//
//   h_0 = x                                   x: [rows, in_width]
//   h_i = act_i(h_{i-1} . W_i^T + b_i)        W_i: [n_i, n_{i-1}], b_i: [n_i] (when bias)
//   y   = h_L (+ x when residual)             y: [rows, n_L]
//
// Every h_i is rounded to `dtype` before the next layer reads it, as the per-layer plan stores
// it, so the two agree to the dtype's rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/dtype.h"
#include "ir/op.h"

namespace mlpc::codegen {

struct FusedMlpLayer {
  int64_t n = 0;              // output width
  bool bias = false;          // a row vector [n] added before the activation
  std::optional<ir::Op> act;  // one of ir::is_gemm_activation's ops, or none
  bool operator==(const FusedMlpLayer&) const = default;
};

struct FusedMlpSpec {
  ir::DType dtype = ir::DType::F16;  // of x, every weight, bias and y; fp32 accumulation
  int64_t in_width = 0;
  std::vector<FusedMlpLayer> layers;  // at least one
  bool residual = false;              // y += x at the end (needs n_L == in_width)
  int64_t out_width() const { return layers.empty() ? 0 : layers.back().n; }
  bool operator==(const FusedMlpSpec&) const = default;
};

// The kernel's parameters, in order: x, then per layer its weight and (when bias) its bias,
// then y and y's element count (`long long n`), as every generated kernel ends.

}  // namespace mlpc::codegen
