// fuzz_safetensors' property (see fuzz_checks.h for the contract): the bytes of a weights file
// are parsed or rejected with one line naming the file; an accepted file's tensors lie inside
// its data section, match their shapes, decode, and survive encode -> parse -> decode.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <string_view>

#include "fuzz/fuzz_checks.h"
#include "io/safetensors.h"

namespace mlpc::fuzz {

inline const std::string kFuzzWeights = "fuzz.safetensors";

inline bool same_values(const runtime::HostTensor& a, const runtime::HostTensor& b) {
  if (a.dtype != b.dtype || a.dims != b.dims || a.data.size() != b.data.size()) return false;
  for (size_t i = 0; i < a.data.size(); ++i)
    if (!(a.data[i] == b.data[i] || (std::isnan(a.data[i]) && std::isnan(b.data[i]))))
      return false;
  return true;
}

inline void check_safetensors(std::string_view bytes) {
  std::vector<io::SafetensorsEntry> entries;
  try {
    entries = io::parse_safetensors(bytes, kFuzzWeights);
  } catch (const Error& e) {
    check_rejection(e, kFuzzWeights);
    return;
  }
  const uint64_t data_size = io::safetensors_data(bytes).size();
  std::map<std::string, runtime::HostTensor> tensors;
  for (const io::SafetensorsEntry& e : entries) {
    if (e.begin > e.end || e.end > data_size) broken("tensor " + e.name + " lies outside the data");
    runtime::HostTensor t = io::decode_tensor(bytes, e);
    if (t.dims != e.shape || t.dtype != e.dtype) broken("tensor " + e.name + " decodes to another type");
    if (static_cast<uint64_t>(t.data.size()) * io::stored_itemsize(e) != e.end - e.begin)
      broken("tensor " + e.name + " decodes to another size");
    // An F64 tensor is written back as F32: compare with its values rounded so.
    if (e.f64)
      for (double& v : t.data) v = runtime::round_to(ir::DType::F32, v);
    if (!tensors.emplace(e.name, std::move(t)).second) broken("tensor " + e.name + " listed twice");
  }
  std::string again = io::encode_safetensors(tensors);
  std::vector<io::SafetensorsEntry> reparsed;
  try {
    reparsed = io::parse_safetensors(again, "encoded.safetensors");
  } catch (const Error& e) {
    broken(std::string("an encoded file does not parse back: ") + e.what());
  }
  if (reparsed.size() != tensors.size()) broken("encode -> parse changes the tensor count");
  for (const io::SafetensorsEntry& e : reparsed) {
    auto it = tensors.find(e.name);
    if (it == tensors.end() || !same_values(io::decode_tensor(again, e), it->second))
      broken("tensor " + e.name + " changes through encode -> parse -> decode");
  }
}

}  // namespace mlpc::fuzz
