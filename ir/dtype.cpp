#include "ir/dtype.h"

#include <cstdio>
#include <cstdlib>

#include "ir/error.h"

namespace mlpc {

void internal_error(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: internal compiler error: %s\n", file, line, what.c_str());
  std::abort();
}

}  // namespace mlpc

namespace mlpc::ir {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "f32") return DType::F32;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  return std::nullopt;
}

std::size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

}  // namespace mlpc::ir
