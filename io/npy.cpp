#include "io/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <optional>

#include "io/file_bytes.h"
#include "io/safetensors.h"
#include "ir/error.h"
#include "ir/type.h"

namespace mlpc::io {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

size_t itemsize(NpyDType t) { return t == NpyDType::F64 ? 8 : t == NpyDType::F32 ? 4 : 2; }

// The header dict, a small subset of Python literal syntax: strings, True/False, tuples of ints.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: error: npy header: {}", path_, what));
  }

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  };

  Fields parse() {
    Fields f;
    expect('{');
    while (!peek('}')) {
      std::string key = string();
      expect(':');
      if ((key == "descr" && f.descr) || (key == "fortran_order" && f.fortran_order) ||
          (key == "shape" && f.shape))
        fail(fmt::format("the key {} is given twice", quote_name(key)));
      if (key == "descr") f.descr = string();
      else if (key == "fortran_order") f.fortran_order = boolean();
      else if (key == "shape") f.shape = tuple();
      else fail(fmt::format("unexpected key {}", quote_name(key)));
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) fail("text after the closing '}'");
    if (!f.descr || !f.fortran_order || !f.shape)
      fail("the dict needs 'descr', 'fortran_order' and 'shape'");
    return f;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(fmt::format("expected '{}' at byte {}", c, pos_));
    ++pos_;
  }
  std::string string() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      fail(fmt::format("expected a quoted string at byte {}", pos_));
    char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) fail("a string has no closing quote");
    std::string_view v = s_.substr(pos_, end - pos_);
    if (v.find('\\') != std::string_view::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return std::string(v);
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (s_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    fail(fmt::format("expected True or False at byte {}", pos_));
  }
  int64_t integer() {
    skip_space();
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > ir::kMaxDim) fail(fmt::format("a dim of 'shape' is larger than 2^40"));
    }
    if (pos_ == start) fail(fmt::format("expected a non-negative integer at byte {}", pos_));
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!peek(')')) {
      dims.push_back(integer());
      if (!peek(')')) expect(',');
    }
    expect(')');
    return dims;
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

uint64_t read_le(std::string_view bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
  return v;
}

NpyDType dtype_of(const std::string& descr, const std::string& path) {
  for (NpyDType t : {NpyDType::F64, NpyDType::F32, NpyDType::F16})
    if (descr == npy_descr(t)) return t;
  std::string hint = descr.size() == 3 && descr[0] == '>' && descr[1] == 'f'
                         ? "big-endian data: save it little-endian ('<')"
                     : descr == "<V2" || descr == "|V2"
                         ? "bfloat16 (ml_dtypes) data: save it as float32, mlpc rounds to bf16"
                         : "mlpc reads '<f4', '<f2' and '<f8'";
  throw Error(fmt::format("{}: error: npy dtype {} is not supported ({})", path, quote_name(descr),
                          hint));
}

}  // namespace

std::string_view npy_descr(NpyDType t) {
  switch (t) {
    case NpyDType::F64: return "<f8";
    case NpyDType::F32: return "<f4";
    case NpyDType::F16: return "<f2";
  }
  return "?";
}

NpyArray parse_npy(std::string_view bytes, const std::string& path) {
  auto fail = [&](const std::string& what) {
    throw Error(fmt::format("{}: error: {}", path, what));
  };
  if (bytes.size() < kMagic.size() + 2 || bytes.substr(0, kMagic.size()) != kMagic)
    fail("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if ((major < 1 || major > 3) || minor != 0)
    fail(fmt::format("npy version {}.{} is not supported (1.0, 2.0, 3.0 are)", major, minor));
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + length_bytes;
  if (bytes.size() < prefix) fail("the file ends inside the npy header length");
  const uint64_t header_len = read_le(bytes, kMagic.size() + 2, length_bytes);
  if (header_len > kMaxNpyHeader)
    fail(fmt::format("npy header length {} is over the {}-byte limit", header_len, kMaxNpyHeader));
  if (header_len > bytes.size() - prefix)
    fail(fmt::format("npy header length {} runs past the end of the file ({} bytes)", header_len,
                     bytes.size()));

  HeaderParser::Fields f = HeaderParser(bytes.substr(prefix, header_len), path).parse();
  NpyArray a{dtype_of(*f.descr, path), *f.shape, {}};
  if (*f.fortran_order) fail("Fortran-order arrays are not supported: save it in C order");

  uint64_t want = itemsize(a.dtype);
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want))
      fail("the shape has more elements than fit in 64 bits");
  const uint64_t have = bytes.size() - prefix - header_len;
  if (want != have)
    fail(fmt::format("shape ({}) in {} takes {} bytes of data, the file has {}",
                     fmt::join(a.shape, ", "), npy_descr(a.dtype), want, have));

  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data() + prefix + header_len);
  const int64_t numel = static_cast<int64_t>(want / itemsize(a.dtype));
  if (a.dtype == NpyDType::F64) {
    a.data.resize(numel);
    if (numel) std::memcpy(a.data.data(), data, want);  // little-endian host, as mlpc requires
  } else {
    a.data = runtime::decode(a.dtype == NpyDType::F32 ? ir::DType::F32 : ir::DType::F16, data, numel);
  }
  return a;
}

NpyArray read_npy(const std::string& path) { return parse_npy(read_file_bytes(path), path); }

std::string encode_npy(const runtime::HostTensor& t) {
  runtime::HostTensor stored = t;
  if (stored.dtype == ir::DType::BF16) stored.dtype = ir::DType::F32;  // exact
  std::string shape = t.dims.size() == 1 ? fmt::format("({},)", t.dims[0])
                                         : fmt::format("({})", fmt::join(t.dims, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   stored.dtype == ir::DType::F32 ? "<f4" : "<f2", shape);
  // NumPy's padding: spaces and a newline up to a multiple of 64 (a whole 64 when already there).
  const size_t prefix = kMagic.size() + 4;  // magic, version 1.0, u16 length
  header.append(64 - (prefix + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  std::vector<uint8_t> data = runtime::encode(stored);
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

void write_npy(const std::string& path, const runtime::HostTensor& t) {
  write_file_bytes(path, encode_npy(t));
}

}  // namespace mlpc::io
