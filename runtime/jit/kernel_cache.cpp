#include "runtime/jit/kernel_cache.h"

#include "host/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include <fmt/format.h>

#include "ir/error.h"
#include "host/cache_dir.h"

namespace mlpc::runtime {
namespace {

// ---- SHA-256 (FIPS 180-4) ----------------------------------------------------------------------

class Sha256 {
 public:
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    while (n > 0) {
      size_t take = std::min(n, size_t{64} - fill_);
      std::memcpy(buf_ + fill_, p, take);
      fill_ += take, p += take, n -= take;
      if (fill_ == 64) block(buf_), fill_ = 0;
    }
  }
  void update_u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    update(b, 8);
  }
  // A field with its length first: concatenations of different fields never collide.
  void field(std::string_view s) {
    update_u64(s.size());
    update(s.data(), s.size());
  }
  std::array<unsigned char, 32> finish() {
    uint64_t bits = total_ * 8;
    unsigned char pad = 0x80;
    update(&pad, 1);
    unsigned char zero = 0;
    while (fill_ != 56) update(&zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len, 8);
    std::array<unsigned char, 32> out;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<unsigned char>(h_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const unsigned char* p) {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 |
             uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
             h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }

  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char buf_[64];
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) s[2 * i] = digits[p[i] >> 4], s[2 * i + 1] = digits[p[i] & 15];
  return s;
}

// ---- entry format -------------------------------------------------------------------------------

constexpr char kMagic[8] = {'M', 'L', 'P', 'C', 'B', 'I', 'N', '1'};
constexpr size_t kHeaderSize = 24;
constexpr uint64_t kMaxPayload = uint64_t{1} << 30;  // a CUBIN over 1 GiB is a corrupt length

uint64_t checksum(const char* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  auto d = h.finish();
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(d[i]) << (8 * i);
  return v;
}

void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Keys name files: only hex digits, so a key can never escape the directory.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

namespace detail {

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data.data(), data.size());
  auto d = h.finish();
  return hex(d.data(), d.size());
}

void warn_once(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    std::fprintf(stderr, "mlpc: warning: kernel cache: %s (compiling without it)\n", what.c_str());
}

}  // namespace detail

std::string kernel_cache_key(const std::string& source, const std::string& options,
                             const std::string& arch, const std::string& nvrtc_version) {
  Sha256 h;
  h.field("mlpc-kernel-cache-key-v1");
  h.field(source);
  h.field(options);
  h.field(arch);
  h.field(nvrtc_version);
  auto d = h.finish();
  return hex(d.data(), 16);
}

bool kernel_cache_disabled_by_env() {
  const char* v = std::getenv("MLPC_NO_KERNEL_CACHE");
  return v && *v && std::strcmp(v, "0") != 0;
}

KernelCache::KernelCache() {
  try {
    open(cache_dir());
  } catch (const std::exception& e) {
    detail::warn_once(e.what());
  }
}

KernelCache::KernelCache(const std::string& root) { open(root); }

void KernelCache::open(const std::string& root) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(root) / "kernels";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    detail::warn_once(fmt::format("cannot create {}: {}", dir.string(),
                                  ec ? ec.message() : std::string("not a directory")));
    return;
  }
  dir_ = dir.string();
  enabled_ = true;
}

std::string KernelCache::entry_path(const std::string& key) const {
  return dir_ + "/" + key + ".cubin";
}

std::optional<std::vector<char>> KernelCache::load(const std::string& key) {
  if (!enabled_ || !valid_key(key)) return std::nullopt;
  std::string path = entry_path(key);
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return std::nullopt;  // no entry (or unreadable): a plain miss
  struct stat st;
  bool ok = ::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<uint64_t>(st.st_size) >= kHeaderSize;
  char header[kHeaderSize];
  std::vector<char> payload;
  if (ok) ok = read_all(f.fd, header, kHeaderSize) && std::memcmp(header, kMagic, 8) == 0;
  if (ok) {
    uint64_t n = get_u64(header + 8);
    ok = n > 0 && n <= kMaxPayload && static_cast<uint64_t>(st.st_size) == kHeaderSize + n;
    if (ok) {
      payload.resize(n);
      ok = read_all(f.fd, payload.data(), n) && checksum(payload.data(), n) == get_u64(header + 16);
    }
  }
  if (!ok) {
    // Corrupt or torn: drop it so the rebuild writes a good one. A failed unlink is harmless,
    // the store() after the rebuild renames over it.
    ::unlink(path.c_str());
    return std::nullopt;
  }
  return payload;
}

void KernelCache::store(const std::string& key, const std::vector<char>& cubin) {
  if (!enabled_ || !valid_key(key) || cubin.empty()) return;
  char header[kHeaderSize];
  std::memcpy(header, kMagic, 8);
  put_u64(header + 8, cubin.size());
  put_u64(header + 16, checksum(cubin.data(), cubin.size()));
  std::string err = write_file_atomically(
      entry_path(key), {std::string_view(header, kHeaderSize),
                        std::string_view(cubin.data(), cubin.size())});
  if (!err.empty()) detail::warn_once(err);
}

}  // namespace mlpc::runtime
