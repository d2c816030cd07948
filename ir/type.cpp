#include "ir/type.h"

#include <fmt/format.h>

namespace mlpc::ir {

bool Shape::has_batch() const {
  for (int64_t d : dims)
    if (d == kBatchDim) return true;
  return false;
}

int64_t Shape::numel(int64_t batch) const {
  int64_t n = 1;
  for (int64_t d : dims) n *= (d == kBatchDim ? batch : d);
  return n;
}

int64_t Shape::rows(int64_t batch) const {
  int64_t n = 1;
  for (int i = 0; i + 1 < rank(); ++i) n *= (dims[i] == kBatchDim ? batch : dims[i]);
  return n;
}

std::string to_string(const Shape& s, const std::string& batch_symbol) {
  std::string out = "[";
  for (int i = 0; i < s.rank(); ++i) {
    if (i) out += ", ";
    out += s.dims[i] == kBatchDim ? batch_symbol : std::to_string(s.dims[i]);
  }
  return out + "]";
}

std::string to_string(const TensorType& t, const std::string& batch_symbol) {
  return fmt::format("{}{}", dtype_name(t.dtype), to_string(t.shape, batch_symbol));
}

}  // namespace mlpc::ir
