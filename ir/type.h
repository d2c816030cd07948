// Tensor types: a dtype and a shape of static dims, where the leading dim may be the graph's
// symbolic batch dim (printed by name, e.g. `M`). Kernels take the batch size at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace mlpc::ir {

inline constexpr int64_t kBatchDim = -1;  // marks the symbolic batch dim in Shape::dims
inline constexpr int64_t kMaxDim = int64_t{1} << 40;  // larger static dims are rejected
// Bound on the product of a type's static dims: times any batch the CLI takes (< 2^24) it stays
// far from int64 overflow.
inline constexpr int64_t kMaxStaticElements = int64_t{1} << 36;

struct Shape {
  std::vector<int64_t> dims;

  int rank() const { return static_cast<int>(dims.size()); }
  bool has_batch() const;
  int64_t last() const { return dims.empty() ? 1 : dims.back(); }
  // Number of elements with the batch dim bound to `batch`.
  int64_t numel(int64_t batch) const;
  // Product of all dims but the last, with the batch dim bound: the rows a GEMM or a row-wise
  // kernel sees.
  int64_t rows(int64_t batch) const;
  bool operator==(const Shape&) const = default;
};

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

// "bf16[M, 3072]"; `batch_symbol` names the batch dim.
std::string to_string(const Shape& s, const std::string& batch_symbol = "M");
std::string to_string(const TensorType& t, const std::string& batch_symbol = "M");

}  // namespace mlpc::ir
