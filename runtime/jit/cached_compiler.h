// NVRTC through the on-disk CUBIN cache (runtime/jit/kernel_cache.h) for one arch: what compile()
// does for every kernel of a plan and -O2's small-GEMM decision for the kernel it times, so a
// kernel built for a measurement is a cache hit when the plan is compiled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/jit/kernel_cache.h"

namespace mlpc::runtime {

class CachedCompiler {
 public:
  // The key's fixed parts (NVRTC's options and version) are computed once here. The cache is used
  // when `use_cache`, MLPC_NO_KERNEL_CACHE is not set, its directory is usable and those parts
  // could be had; otherwise every kernel is built (and compile_to_cubin reports what is missing).
  CachedCompiler(std::string arch, bool use_cache);

  bool cache_enabled() const { return cache_.has_value(); }
  // The cache key of `source` (kernel_cache_key), whether or not the cache is used; empty when
  // its fixed parts could not be had.
  std::string key(const std::string& source) const;

  struct Cubin {
    std::vector<char> bytes;
    bool hit = false;       // NVRTC did not run for it: from the cache, or another thread's build
    double nvrtc_ms = 0.0;  // NVRTC's time on a miss
  };
  // Kernel `name` of `source`: from the cache, from the build of it another thread of this
  // process is running (waited for), or built by NVRTC and stored. Thread-safe.
  Cubin get(const std::string& source, const std::string& name);

 private:
  std::string arch_;
  std::optional<KernelCache> cache_;
  std::string key_options_, key_version_;  // empty when they could not be had
};

}  // namespace mlpc::runtime
