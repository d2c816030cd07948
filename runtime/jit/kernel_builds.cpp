#include "runtime/jit/kernel_builds.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <optional>

#include "ir/error.h"
#include "runtime/jit/cached_compiler.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "host/parallel_for.h"

namespace mlpc::runtime {

std::string kernel_build_key(const codegen::KernelStep& k, const std::string& arch) {
  return CachedCompiler(k.arch_specific() ? arch_specific(arch) : arch, /*use_cache=*/false)
      .key(k.source);
}

KernelBuilds build_kernels(const std::vector<codegen::Step>& steps, const std::string& arch,
                           bool use_cache) {
  // Each kernel once, in step order.
  std::vector<const codegen::KernelStep*> kernels;
  std::map<std::string, const codegen::KernelStep*> by_name;
  for (const codegen::Step& s : steps) {
    const auto* k = std::get_if<codegen::KernelStep>(&s);
    if (!k) continue;
    auto [it, fresh] = by_name.try_emplace(k->cubin_symbol(), k);
    if (fresh)
      kernels.push_back(k);
    else if (it->second->source != k->source)
      throw Error(fmt::format("two different kernels named {} in one plan", k->cubin_symbol()));
  }

  CachedCompiler generic(arch, use_cache);
  // Made only when a step needs it: its constructor checks the arch-specific target's options.
  std::optional<CachedCompiler> specific;
  if (std::any_of(kernels.begin(), kernels.end(), [](auto* k) { return k->arch_specific(); }))
    specific.emplace(arch_specific(arch), use_cache);

  std::vector<CachedCompiler::Cubin> built(kernels.size());
  std::vector<std::exception_ptr> failed(kernels.size());
  parallel_for(static_cast<int64_t>(kernels.size()), [&](int64_t i) {
    const codegen::KernelStep& k = *kernels[static_cast<size_t>(i)];
    try {
      built[static_cast<size_t>(i)] =
          (k.arch_specific() ? *specific : generic).get(k.source, k.cubin_symbol());
    } catch (...) {
      failed[static_cast<size_t>(i)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);

  KernelBuilds out;
  out.cache_enabled = generic.cache_enabled();
  for (size_t i = 0; i < kernels.size(); ++i) {
    ++(built[i].hit ? out.hits : out.misses);
    out.nvrtc_ms += built[i].nvrtc_ms;
    out.cubins[kernels[i]->cubin_symbol()] = std::move(built[i].bytes);
  }
  return out;
}

}  // namespace mlpc::runtime
