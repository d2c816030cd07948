#include "runtime/kernel_builds.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "ir/error.h"
#include "runtime/cached_compiler.h"
#include "runtime/nvrtc_compiler.h"

namespace mlpc::runtime {

std::string kernel_build_key(const codegen::KernelStep& k, const std::string& arch) {
  return CachedCompiler(k.gated ? arch_specific(arch) : arch, /*use_cache=*/false).key(k.source);
}

std::vector<KernelBuilds> build_kernels_of(const std::vector<std::vector<codegen::Step>>& lists,
                                           const std::string& arch, bool use_cache) {
  // Each distinct kernel (name and source) once, in order of first appearance; `slot` says
  // which one each list's kernel of a name is.
  std::vector<const codegen::KernelStep*> kernels;
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<std::map<std::string, size_t>> slot(lists.size());
  for (size_t l = 0; l < lists.size(); ++l)
    for (const codegen::Step& s : lists[l]) {
      const auto* k = std::get_if<codegen::KernelStep>(&s);
      if (!k) continue;
      auto [it, fresh] = index.try_emplace({k->name, k->source}, kernels.size());
      if (fresh) kernels.push_back(k);
      auto [named, first] = slot[l].try_emplace(k->name, it->second);
      if (!first && named->second != it->second)
        throw Error(fmt::format("two different kernels named {} in one plan", k->name));
    }

  CachedCompiler generic(arch, use_cache);
  // Made only when a step needs it: its constructor checks the arch-specific target's options.
  std::optional<CachedCompiler> gated;
  if (std::any_of(kernels.begin(), kernels.end(), [](auto* k) { return k->gated; }))
    gated.emplace(arch_specific(arch), use_cache);

  std::vector<CachedCompiler::Cubin> built(kernels.size());
  std::vector<std::exception_ptr> failed(kernels.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < kernels.size();) {
      const codegen::KernelStep& k = *kernels[i];
      try {
        built[i] = (k.gated ? *gated : generic).get(k.source, k.name);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(
      kernels.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();  // this thread builds too
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);

  std::vector<KernelBuilds> out(lists.size());
  for (size_t l = 0; l < lists.size(); ++l) {
    out[l].cache_enabled = generic.cache_enabled();
    for (const auto& [name, i] : slot[l]) {
      ++(built[i].hit ? out[l].hits : out[l].misses);
      out[l].nvrtc_ms += built[i].nvrtc_ms;
      out[l].cubins[name] = built[i].bytes;
    }
  }
  return out;
}

KernelBuilds build_kernels(const std::vector<codegen::Step>& steps, const std::string& arch,
                           bool use_cache) {
  return std::move(build_kernels_of({steps}, arch, use_cache).front());
}

}  // namespace mlpc::runtime
