#include "runtime/cached_compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <exception>

#include "runtime/nvrtc_compiler.h"

namespace mlpc::runtime {

CachedCompiler::CachedCompiler(std::string arch, bool use_cache) : arch_(std::move(arch)) {
  // Everything but the source that goes into a cache key. When any of it cannot be had (no CUDA
  // include dir), skip the cache: compile_to_cubin reports the error.
  try {
    key_options_ = fmt::format("{}", fmt::join(nvrtc_options(arch_), "\n"));
    key_version_ = nvrtc_version();
  } catch (const std::exception&) {
    key_options_.clear();
    key_version_.clear();
    return;
  }
  if (!use_cache || kernel_cache_disabled_by_env()) return;
  cache_.emplace();
  if (!cache_->enabled()) cache_.reset();
}

std::string CachedCompiler::key(const std::string& source) const {
  if (key_version_.empty()) return "";
  return kernel_cache_key(source, key_options_, arch_, key_version_);
}

CachedCompiler::Cubin CachedCompiler::get(const std::string& source, const std::string& name) {
  std::string key;
  if (cache_) {
    key = this->key(source);
    if (std::optional<std::vector<char>> hit = cache_->load(key)) return {std::move(*hit), true};
  }
  const auto t0 = std::chrono::steady_clock::now();
  Cubin c;
  c.bytes = compile_to_cubin(source, name, arch_);
  c.nvrtc_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (cache_) cache_->store(key, c.bytes);
  return c;
}

}  // namespace mlpc::runtime
