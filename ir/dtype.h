// Element types of the IR. Storage dtype only: pointwise math always runs in fp32 on the GPU
// and in fp64 in the reference interpreter.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace mlpc::ir {

enum class DType { F32, F16, BF16 };

std::string_view dtype_name(DType t);  // "f32", "f16", "bf16"
std::optional<DType> parse_dtype(std::string_view s);
std::size_t dtype_size(DType t);

}  // namespace mlpc::ir
