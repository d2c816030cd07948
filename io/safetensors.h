// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [3072, 768], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"key": "value"}}
// then the data section, which the tensors tile exactly (offsets are relative to its start).
// The reader trusts nothing in the file: every length, offset and shape is checked against the
// file's real size, with overflow checks, before anything is read; every failure is one
// mlpc::Error "PATH: error: ..." naming the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "host/host_tensor.h"

namespace mlpc::io {

// A header larger than this is refused before it is parsed (the Rust reference reader's cap).
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t{100} << 20;

struct SafetensorsEntry {
  std::string name;
  ir::DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  // Stored as F64 (PyTorch's float64 export): decoded as doubles into an F32-typed tensor, which
  // binding rounds to the param's dtype like any other narrowing.
  bool f64 = false;
};

// Bytes per element as stored in the file: 8 for F64, else the dtype's size.
uint64_t stored_itemsize(const SafetensorsEntry& e);

// The tensors of a whole file held in memory, ordered by offset. Throws mlpc::Error; never reads
// outside `file_bytes`.
std::vector<SafetensorsEntry> parse_safetensors(std::string_view file_bytes,
                                                const std::string& path_for_errors);

// The data section of a file that parse_safetensors accepted.
std::string_view safetensors_data(std::string_view file_bytes);

// The values of `e` (a tensor of a file that parse_safetensors accepted), in its own dtype.
runtime::HostTensor decode_tensor(std::string_view file_bytes, const SafetensorsEntry& e);

// A safetensors file holding `tensors` in their own dtypes, data in name order.
std::string encode_safetensors(const std::map<std::string, runtime::HostTensor>& tensors);

// "F32", "F16", "BF16": the format's names of mlpc's dtypes.
std::string_view safetensors_dtype_name(ir::DType t);

// A name from a file, quoted and made safe for a one-line message (escaped, shortened).
std::string quote_name(std::string_view name);

}  // namespace mlpc::io
