// Host-side tensors: values held as doubles, already rounded to the tensor's dtype, so the fp64
// reference and the GPU see exactly the same numbers. Encoding to device bytes lives here too.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace mlpc::runtime {

struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> dims;  // concrete: the batch dim bound
  std::vector<double> data;   // row-major

  int64_t numel() const;
  int64_t row_len() const { return dims.empty() ? 1 : dims.back(); }
};

// Round to the nearest value representable in `t` (round-to-nearest-even).
double round_to(ir::DType t, double v);
// Raw device bytes (f32, IEEE half or bfloat16) and back.
std::vector<uint8_t> encode(const HostTensor& t);
// `n` floats as raw device bytes of `t` (rounded to nearest even) at `out` (n * its size bytes).
void encode_floats(ir::DType t, const float* values, int64_t n, uint8_t* out);
std::vector<double> decode(ir::DType t, const uint8_t* bytes, int64_t numel);

}  // namespace mlpc::runtime
