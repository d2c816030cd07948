// How long NVRTC takes over geglu's two kinds of kernel, alone and side by side: the gated GEMM
// kernel (sm_90a; the longest build of a cold -O2 compile, which waits for it) and the gelu*mul
// pointwise kernel (sm_90). Each is built `reps` times alone, then the gated kernel again with
// 1, 2 and 3 pointwise builds on other threads (a cold compile builds them side by side).
// Needs no GPU; MLPC_NVRTC_OPTIONS applies to every build (e.g. "--ptxas-options=-O1").
//
// Usage: nvrtc_build_probe [reps]   (default 3)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "compiler/compile.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "host/wall_clock.h"

namespace {

using namespace mlpc;

const codegen::KernelStep& first_kernel(const codegen::Plan& plan, bool gated) {
  for (const codegen::Step& s : plan.steps)
    if (const auto* k = std::get_if<codegen::KernelStep>(&s);
        k && (k->as<codegen::GatedGemm>() != nullptr) == gated)
      return *k;
  throw Error(fmt::format("geglu's plan has no {} kernel", gated ? "gated" : "pointwise"));
}

double build_ms(const codegen::KernelStep& k, const std::string& arch) {
  const auto t0 = std::chrono::steady_clock::now();
  runtime::compile_to_cubin(k.source, k.name, arch);
  return runtime::ms_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90", .build_kernels = false,
                     .measure_epilogues = false};
    o.gated_gemms = GatedGemms::On;
    const CompiledGraph gated = compile(make_sample("geglu"), o);
    o.gated_gemms = GatedGemms::Off;
    o.epilogues = false;
    const CompiledGraph apart = compile(make_sample("geglu"), o);
    const codegen::KernelStep& g = first_kernel(gated.plan, true);
    const codegen::KernelStep& p = first_kernel(apart.plan, false);
    fmt::print("NVRTC {}, extra options '{}'\n", runtime::nvrtc_version(),
               fmt::join(runtime::extra_nvrtc_options(), " "));
    fmt::print("first build in this process (NVRTC's start-up): pointwise {:.0f} ms\n",
               build_ms(p, "sm_90"));
    for (int r = 0; r < reps; ++r)
      fmt::print("alone: gated {:.0f} ms, pointwise {:.0f} ms\n", build_ms(g, "sm_90a"),
                 build_ms(p, "sm_90"));
    for (int r = 0; r < reps; ++r)
      for (int others = 1; others <= 3; ++others) {
        double gated_ms = 0;
        std::vector<double> pointwise_ms(others);
        std::vector<std::thread> threads;
        threads.emplace_back([&] { gated_ms = build_ms(g, "sm_90a"); });
        for (int i = 0; i < others; ++i)
          threads.emplace_back([&, i] { pointwise_ms[i] = build_ms(p, "sm_90"); });
        for (std::thread& t : threads) t.join();
        fmt::print("gated {:.0f} ms beside {} pointwise build(s) ({:.0f} ms)\n", gated_ms, others,
                   fmt::join(pointwise_ms, ", "));
      }
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvrtc_build_probe: {}\n", e.what());
    return 1;
  }
  return 0;
}
