// On-disk CUBIN cache: a warm compile skips NVRTC entirely.
//
// Entry: <cache_dir()>/kernels/<key>.cubin, where key = kernel_cache_key(...) (32 hex digits).
// File layout (little-endian):
//   bytes  0..7   magic "MLPCBIN1"
//   bytes  8..15  payload length N (uint64)
//   bytes 16..23  checksum of the payload (first 8 bytes of its SHA-256, as uint64)
//   bytes 24..    the payload: N bytes of CUBIN
// load() checks the magic, N against the file size and the checksum; any mismatch is a miss and
// the entry is removed, so the next store() rewrites it. store() writes a unique temp file in the
// same directory (".<key>.<pid>.<random>.tmp") and rename()s it over the entry: readers in other
// processes see either no entry or a whole one, never a partial one. No fsync: a torn write after
// a power loss fails the checksum and is rebuilt.
//
// The cache never fails a compile: every I/O problem makes load() a miss and store() a no-op,
// with at most one warning on stderr per process. MLPC_NO_KERNEL_CACHE=1 turns it off.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpc::runtime {

// A hex digest (32 digits, 128 bits of SHA-256) of everything that determines the CUBIN: the
// source, the exact NVRTC option list, the arch and the NVRTC version. Every field goes in with
// its length first, so no two different inputs hash the same byte stream.
std::string kernel_cache_key(const std::string& source, const std::string& options,
                             const std::string& arch, const std::string& nvrtc_version);

// True when MLPC_NO_KERNEL_CACHE is set to anything but "" or "0".
bool kernel_cache_disabled_by_env();

class KernelCache {
 public:
  // Entries under cache_dir()/kernels. When that cannot be created the cache is disabled
  // (enabled() is false, load() always misses, store() does nothing) after one warning.
  KernelCache();
  // Entries under ROOT/kernels (tests, tools). Same fallback as above.
  explicit KernelCache(const std::string& root);

  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }  // ".../kernels"; empty when disabled
  std::string entry_path(const std::string& key) const;

  // The CUBIN stored under KEY, or nullopt: no entry, unreadable, or corrupt (then removed).
  std::optional<std::vector<char>> load(const std::string& key);
  // Stores CUBIN under KEY atomically. Best effort: never throws, warns once on failure.
  void store(const std::string& key, const std::vector<char>& cubin);

 private:
  void open(const std::string& root);
  bool enabled_ = false;
  std::string dir_;
};

namespace detail {
// SHA-256 of DATA as 64 lowercase hex digits (exposed for its test vectors).
std::string sha256_hex(std::string_view data);
// Prints "mlpc: warning: kernel cache: WHAT" to stderr the first time only.
void warn_once(const std::string& what);
}  // namespace detail

}  // namespace mlpc::runtime
