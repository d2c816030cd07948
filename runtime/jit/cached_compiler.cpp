#include "runtime/jit/cached_compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <mutex>

#include "runtime/jit/build_log.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "host/wall_clock.h"

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

namespace {

// Builds running in this process, by cache key: a request for a kernel another thread is
// building waits for that build instead of running NVRTC again (compile() builds ahead, on
// other threads, kernels its measured decisions then ask for: compiler/speculative_builds.h).
struct InFlight {
  std::mutex m;
  std::map<std::string, std::shared_future<std::vector<char>>> builds;
};

InFlight& in_flight() {
  static InFlight f;
  return f;
}

}  // namespace

CachedCompiler::Cubin CachedCompiler::get(const std::string& source, const std::string& name) {
  const bool logged = build_log_on();
  const double asked_ms = logged ? build_log_now_ms() : 0.0;
  auto log = [&](BuildEvent::From from) {
    if (logged)
      log_build({name, arch_, from, build_log_thread(), asked_ms, build_log_now_ms() - asked_ms});
  };
  const std::string key = this->key(source);
  if (cache_ && !key.empty())
    if (std::optional<std::vector<char>> hit = cache_->load(key)) {
      log(BuildEvent::From::DiskCache);
      return {std::move(*hit), true};
    }
  std::promise<std::vector<char>> mine;
  if (!key.empty()) {
    std::unique_lock lock(in_flight().m);
    auto [it, fresh] = in_flight().builds.try_emplace(key, mine.get_future().share());
    if (!fresh) {
      std::shared_future<std::vector<char>> theirs = it->second;
      lock.unlock();
      Cubin theirs_cubin{theirs.get(), true};  // rethrows their build's failure
      log(BuildEvent::From::InFlight);
      return theirs_cubin;
    }
  }
  auto done = [&] {
    if (key.empty()) return;
    std::lock_guard lock(in_flight().m);
    in_flight().builds.erase(key);
  };
  // A build of it may have ended between the first look and registering this one.
  if (cache_ && !key.empty())
    if (std::optional<std::vector<char>> hit = cache_->load(key)) {
      mine.set_value(*hit);
      done();
      log(BuildEvent::From::DiskCache);
      return {std::move(*hit), true};
    }
  const auto t0 = std::chrono::steady_clock::now();
  Cubin c;
  try {
    c.bytes = compile_to_cubin(source, name, arch_);
  } catch (...) {
    mine.set_exception(std::current_exception());
    done();
    log(BuildEvent::From::Failed);
    throw;
  }
  c.nvrtc_ms = ms_since(t0);
  if (cache_) cache_->store(key, c.bytes);
  mine.set_value(c.bytes);
  done();
  log(BuildEvent::From::Nvrtc);
  return c;
}

}  // namespace mlpc::runtime
