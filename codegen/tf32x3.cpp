#include "codegen/tf32x3.h"

#include <algorithm>
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

int64_t tf32x3_chunk_k(int64_t k) {
  if (k < kTf32x3MinK) return 0;
  for (int64_t c = std::min(kTf32x3MaxChunk, k / 4) / kTf32x3ChunkAlign * kTf32x3ChunkAlign;
       c > 0; c -= kTf32x3ChunkAlign)
    if (k % c == 0) return c;
  return 0;
}

std::vector<float> split_tf32x3(const std::vector<float>& values, int64_t rows, int64_t k,
                                int lo_part, int64_t chunk) {
  MLPC_ASSERT(static_cast<int64_t>(values.size()) == rows * k && lo_part >= 0 && lo_part < 3 &&
                  chunk > 0 && k % chunk == 0,
              "split_tf32x3: bad shape, part or chunk");
  std::vector<float> out(static_cast<size_t>(rows * 3 * k));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float v = values[static_cast<size_t>(r * k + c)];
      const float hi = tf32_round(v), lo = tf32_round(v - hi);
      // Chunk j = c / chunk occupies columns [3 j chunk, 3 (j + 1) chunk) of the row.
      const int64_t at = r * 3 * k + 3 * (c / chunk) * chunk + c % chunk;
      for (int part = 0; part < 3; ++part)
        out[static_cast<size_t>(at + part * chunk)] = part == lo_part ? lo : hi;
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
// [rows, 3 * row_len] buffer: [lo | hi | hi] for each chunk of `chunk` columns along each row.
template <int N>
__device__ __forceinline__ void mlpc_store_tf32x3(float* __restrict__ out, long long e,
                                                  long long row_len, long long chunk,
                                                  const float* v) {
  const long long r = e / row_len, c = e - r * row_len;
  // Row r starts at 3 r row_len; column c's chunk c / chunk at 3 chunk (c / chunk).
  float* p = out + 3 * r * row_len + 2 * (c / chunk) * chunk + c;
  float hi[N], lo[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    hi[j] = mlpc_tf32(v[j]);
    lo[j] = mlpc_tf32(v[j] - hi[j]);
  }
  mlpc_store<N>(p, lo);
  mlpc_store<N>(p + chunk, hi);
  mlpc_store<N>(p + 2 * chunk, hi);
}
)";
}

}  // namespace mlpc::codegen
