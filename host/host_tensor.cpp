#include "host/host_tensor.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace mlpc::runtime {
namespace {

uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

uint16_t float_to_half_bits(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float half_bits_to_float(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

}  // namespace

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double round_to(ir::DType t, double v) {
  float f = static_cast<float>(v);
  switch (t) {
    case ir::DType::F32: return f;
    case ir::DType::F16: return half_bits_to_float(float_to_half_bits(f));
    case ir::DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(f));
  }
  return f;
}

namespace {

// `n` values (float or double, each rounded to float first) as raw device bytes of `t` at `out`.
template <class T>
void encode_values(ir::DType t, const T* values, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(values[i]);
    if (t == ir::DType::F32) {
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint16_t b = t == ir::DType::BF16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
      std::memcpy(&out[i * 2], &b, 2);
    }
  }
}

}  // namespace

void encode_floats(ir::DType t, const float* values, int64_t n, uint8_t* out) {
  encode_values(t, values, n, out);
}

std::vector<uint8_t> encode(const HostTensor& t) {
  std::vector<uint8_t> out(t.data.size() * ir::dtype_size(t.dtype));
  encode_values(t.dtype, t.data.data(), static_cast<int64_t>(t.data.size()), out.data());
  return out;
}

std::vector<double> decode(ir::DType t, const uint8_t* bytes, int64_t numel) {
  std::vector<double> out(numel);
  for (int64_t i = 0; i < numel; ++i) {
    if (t == ir::DType::F32) {
      float f;
      std::memcpy(&f, bytes + i * 4, 4);
      out[i] = f;
    } else {
      uint16_t b;
      std::memcpy(&b, bytes + i * 2, 2);
      out[i] = t == ir::DType::BF16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
    }
  }
  return out;
}

}  // namespace mlpc::runtime
