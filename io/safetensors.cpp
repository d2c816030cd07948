#include "io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "ir/error.h"
#include "ir/type.h"

namespace mlpc::io {
namespace {

using nlohmann::json;

constexpr size_t kLengthBytes = 8;

// The format's other dtypes: named in the error, so the user knows to convert, not to fix a typo.
constexpr std::string_view kOtherDtypes[] = {"I64", "I32", "I16", "I8", "U64", "U32",
                                             "U16", "U8", "BOOL", "F8_E5M2", "F8_E4M3",
                                             "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};

uint64_t read_le64(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < kLengthBytes; ++i)
    v |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return v;
}

struct Reader {
  const std::string& path;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: error: {}", path, what));
  }
  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    fail(fmt::format("tensor {}: {}", quote_name(name), what));
  }

  // The header's JSON, refusing duplicate keys at any depth (JSON allows them; nlohmann would
  // keep the last one silently, so two readers could disagree about the file).
  json parse_header(std::string_view text) const {
    if (text.empty() || text.front() != '{') fail("the header does not start with '{'");
    std::vector<std::set<std::string>> keys;
    auto callback = [&](int, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      if (event == json::parse_event_t::object_end) keys.pop_back();
      if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
        fail(fmt::format("the header has the key {} twice", quote_name(parsed.get<std::string>())));
      return true;
    };
    try {
      return json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
      std::string what = e.what();
      if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
      fail(fmt::format("the header is not valid JSON: {}", quote_name(what)));
    }
  }

  // The dtype, and whether the file stores it as F64 (then F32, the values kept as doubles).
  std::pair<ir::DType, bool> dtype_of(const std::string& name, const json& j) const {
    if (!j.is_string()) fail(name, "\"dtype\" is not a string");
    const std::string& s = j.get_ref<const std::string&>();
    for (ir::DType t : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
      if (s == safetensors_dtype_name(t)) return {t, false};
    if (s == "F64") return {ir::DType::F32, true};
    if (std::find(std::begin(kOtherDtypes), std::end(kOtherDtypes), s) != std::end(kOtherDtypes))
      fail(name, fmt::format("dtype {} is not one mlpc takes (F32, F16, BF16, F64)", s));
    fail(name, fmt::format("unknown dtype {}", quote_name(s)));
  }

  std::vector<int64_t> shape_of(const std::string& name, const json& j) const {
    if (!j.is_array()) fail(name, "\"shape\" is not a list");
    std::vector<int64_t> shape;
    for (const json& d : j) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{ir::kMaxDim})
        fail(name, fmt::format("shape {} has a dim that is not an integer in [0, 2^40]", d.dump()));
      shape.push_back(d.get<int64_t>());
    }
    return shape;
  }

  // Bytes the tensor must take: numel * itemsize, refusing overflow.
  uint64_t byte_size(const SafetensorsEntry& e) const {
    uint64_t n = stored_itemsize(e);
    for (int64_t d : e.shape)
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
        fail(e.name, "its shape has more elements than fit in 64 bits");
    return n;
  }

  SafetensorsEntry entry_of(const std::string& name, const json& j, uint64_t data_size) const {
    if (name.empty()) fail("a tensor has an empty name");
    if (!j.is_object()) fail(name, "is not an object {dtype, shape, data_offsets}");
    for (const auto& [key, _] : j.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        fail(name, fmt::format("unknown field {}", quote_name(key)));
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!j.contains(key)) fail(name, fmt::format("has no \"{}\"", key));
    const auto [dtype, f64] = dtype_of(name, j["dtype"]);
    SafetensorsEntry e{name, dtype, shape_of(name, j["shape"])};
    e.f64 = f64;
    const json& off = j["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail(name, fmt::format("\"data_offsets\" {} is not [BEGIN, END] in bytes", off.dump()));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end) fail(name, fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
    if (e.end > data_size)
      fail(name, fmt::format("data_offsets [{}, {}] run past the end of the data section ({} bytes)",
                             e.begin, e.end, data_size));
    uint64_t want = byte_size(e);
    if (e.end - e.begin != want)
      fail(name, fmt::format("shape [{}] in {} takes {} bytes but data_offsets [{}, {}] hold {}",
                             fmt::join(e.shape, ", "),
                             e.f64 ? std::string_view("F64") : safetensors_dtype_name(e.dtype), want,
                             e.begin, e.end, e.end - e.begin));
    return e;
  }

  // The tensors must tile the data section: no overlap (two tensors sharing bytes), no gap.
  void check_tiling(const std::vector<SafetensorsEntry>& sorted, uint64_t data_size) const {
    uint64_t covered = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const SafetensorsEntry& e : sorted) {
      if (e.begin < covered)
        fail(e.name, fmt::format("data_offsets [{}, {}] overlap those of tensor {} [{}, {}]",
                                 e.begin, e.end, quote_name(prev->name), prev->begin, prev->end));
      if (e.begin > covered)
        fail(fmt::format("bytes [{}, {}) of the data section belong to no tensor", covered, e.begin));
      covered = e.end;
      prev = &e;
    }
    if (covered != data_size)
      fail(fmt::format("bytes [{}, {}) of the data section belong to no tensor", covered, data_size));
  }
};

void check_metadata(const Reader& r, const json& j) {
  if (!j.is_object()) r.fail("\"__metadata__\" is not an object");
  for (const auto& [key, value] : j.items())
    if (!value.is_string())
      r.fail(fmt::format("\"__metadata__\" entry {} is not a string", quote_name(key)));
}

}  // namespace

std::string_view safetensors_dtype_name(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return "F32";
    case ir::DType::F16: return "F16";
    case ir::DType::BF16: return "BF16";
  }
  return "?";
}

std::string quote_name(std::string_view name) {
  constexpr size_t kMax = 120;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + (name.size() > kMax ? "...'" : "'");
}

std::vector<SafetensorsEntry> parse_safetensors(std::string_view file_bytes,
                                                const std::string& path_for_errors) {
  Reader r{path_for_errors};
  if (file_bytes.size() < kLengthBytes)
    r.fail(fmt::format("not a safetensors file: {} bytes, fewer than the 8-byte header length",
                       file_bytes.size()));
  const uint64_t header_size = read_le64(file_bytes);
  if (header_size > kMaxSafetensorsHeader)
    r.fail(fmt::format("header length {} is over the {} MiB limit", header_size,
                       kMaxSafetensorsHeader >> 20));
  if (header_size > file_bytes.size() - kLengthBytes)
    r.fail(fmt::format("header length {} runs past the end of the file ({} bytes)", header_size,
                       file_bytes.size()));
  const uint64_t data_size = file_bytes.size() - kLengthBytes - header_size;
  json header = r.parse_header(file_bytes.substr(kLengthBytes, header_size));
  if (!header.is_object()) r.fail("the header is not a JSON object");

  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") check_metadata(r, value);
    else entries.push_back(r.entry_of(name, value, data_size));
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  r.check_tiling(entries, data_size);
  return entries;
}

std::string_view safetensors_data(std::string_view file_bytes) {
  MLPC_ASSERT(file_bytes.size() >= kLengthBytes, "not a parsed safetensors file");
  uint64_t header_size = read_le64(file_bytes);
  MLPC_ASSERT(header_size <= file_bytes.size() - kLengthBytes, "not a parsed safetensors file");
  return file_bytes.substr(kLengthBytes + header_size);
}

runtime::HostTensor decode_tensor(std::string_view file_bytes, const SafetensorsEntry& e) {
  std::string_view data = safetensors_data(file_bytes);
  MLPC_ASSERT(e.begin <= e.end && e.end <= data.size(), "tensor outside the data section");
  runtime::HostTensor t{e.dtype, e.shape, {}};
  MLPC_ASSERT(static_cast<uint64_t>(t.numel()) * stored_itemsize(e) == e.end - e.begin,
              "tensor size does not match its offsets");
  if (e.f64) {  // little-endian IEEE doubles, as the format stores them
    t.data.resize(static_cast<size_t>(t.numel()));
    if (!t.data.empty()) std::memcpy(t.data.data(), data.data() + e.begin, e.end - e.begin);
    return t;
  }
  t.data = runtime::decode(e.dtype, reinterpret_cast<const uint8_t*>(data.data() + e.begin),
                           t.numel());
  return t;
}

uint64_t stored_itemsize(const SafetensorsEntry& e) {
  return e.f64 ? sizeof(double) : ir::dtype_size(e.dtype);
}

std::string encode_safetensors(const std::map<std::string, runtime::HostTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    std::vector<uint8_t> bytes = runtime::encode(t);
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                    {"shape", t.dims},
                    {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the data section starts 8-byte aligned
  std::string out(kLengthBytes, '\0');
  for (size_t i = 0; i < kLengthBytes; ++i)
    out[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
  return out + text + data;
}

}  // namespace mlpc::io
