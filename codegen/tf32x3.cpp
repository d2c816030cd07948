#include "codegen/tf32x3.h"

#include <bit>

#include "ir/error.h"

namespace mlpc::codegen {

float tf32_round(float v) {
  uint32_t b = std::bit_cast<uint32_t>(v);
  if ((b & 0x7f800000u) != 0x7f800000u) {  // finite: round away the 13 low mantissa bits
    const uint32_t r = (b + 0x1000u) & 0xffffe000u;
    b = (r & 0x7f800000u) == 0x7f800000u ? b & 0xffffe000u : r;
  }
  return std::bit_cast<float>(b);
}

std::vector<float> split_tf32x3(const std::vector<float>& values, int64_t rows, int64_t k,
                                int lo_part) {
  MLPC_ASSERT(static_cast<int64_t>(values.size()) == rows * k && lo_part >= 0 && lo_part < 3,
              "split_tf32x3: bad shape or part");
  std::vector<float> out(static_cast<size_t>(rows * 3 * k));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float v = values[static_cast<size_t>(r * k + c)];
      const float hi = tf32_round(v), lo = tf32_round(v - hi);
      for (int part = 0; part < 3; ++part)
        out[static_cast<size_t>(r * 3 * k + part * k + c)] = part == lo_part ? lo : hi;
    }
  return out;
}

// The device helper stores [lo | hi | hi]: the activation layout.
static_assert(kTf32x3ActivationLoPart == 0);

std::string_view tf32x3_device_helpers() {
  // Kept in step with tf32_round above.
  return R"(// v rounded to TF32 (10 mantissa bits; to nearest, ties away; finite stays finite).
__device__ __forceinline__ float mlpc_tf32(float v) {
  unsigned b = __float_as_uint(v);
  if ((b & 0x7f800000u) != 0x7f800000u) {
    const unsigned r = (b + 0x1000u) & 0xffffe000u;
    b = (r & 0x7f800000u) == 0x7f800000u ? b & 0xffffe000u : r;
  }
  return __uint_as_float(b);
}
// N values of element e of a [rows, row_len] space, stored as their TF32 parts in a
// [rows, 3 * row_len] buffer: [lo | hi | hi] along each row.
template <int N>
__device__ __forceinline__ void mlpc_store_tf32x3(float* __restrict__ out, long long e,
                                                  long long row_len, const float* v) {
  const long long r = e / row_len;
  float* p = out + r * 2 * row_len + e;  // row r of the split buffer, column e % row_len
  float hi[N], lo[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    hi[j] = mlpc_tf32(v[j]);
    lo[j] = mlpc_tf32(v[j] - hi[j]);
  }
  mlpc_store<N>(p, lo);
  mlpc_store<N>(p + row_len, hi);
  mlpc_store<N>(p + 2 * row_len, hi);
}
)";
}

}  // namespace mlpc::codegen
