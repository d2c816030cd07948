// NumPy's .npy format: "\x93NUMPY", a version (1.0, 2.0 or 3.0), a header length, then a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (4, 768), } and the raw data.
// mlpc reads little-endian f32 ('<f4'), f16 ('<f2') and f64 ('<f8', what np.random gives);
// C order only. It writes f32 and f16 as themselves and bf16 as f32 ('<f4'): NumPy has no
// bfloat16, and every bf16 value is exactly an f32 one. Every failure is one mlpc::Error
// "PATH: error: ..."; nothing outside the bytes is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host/host_tensor.h"

namespace mlpc::io {

// A header longer than this is refused (NumPy itself refuses more than 10000 bytes by default).
inline constexpr uint64_t kMaxNpyHeader = 65536;

enum class NpyDType { F64, F32, F16 };

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major, exactly the file's values
};

NpyArray parse_npy(std::string_view file_bytes, const std::string& path_for_errors);
NpyArray read_npy(const std::string& path);

// The .npy bytes of `t`: '<f4' for f32 and bf16, '<f2' for f16; version 1.0, header padded so
// the data starts 64-byte aligned, as NumPy writes it.
std::string encode_npy(const runtime::HostTensor& t);
void write_npy(const std::string& path, const runtime::HostTensor& t);

std::string_view npy_descr(NpyDType t);  // "<f8", "<f4", "<f2"

}  // namespace mlpc::io
