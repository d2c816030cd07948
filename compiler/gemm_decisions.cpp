#include "compiler/gemm_decisions.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <numeric>
#include <set>

#include "ir/error.h"
#include "runtime/cached_compiler.h"
#include "runtime/device.h"
#include "runtime/gemm_bench.h"
#include "runtime/gemm_tuner.h"
#include "runtime/nvrtc_compiler.h"

namespace mlpc {

passes::GemmMergeDecision decide_merge(double merged_us, const std::vector<double>& apart_us,
                                       int64_t rows) {
  const double apart = std::accumulate(apart_us.begin(), apart_us.end(), 0.0);
  const bool measured = merged_us > 0 && std::all_of(apart_us.begin(), apart_us.end(),
                                                     [](double us) { return us > 0; });
  if (!measured) return {false, "could not time the GEMMs"};
  const bool merge = merged_us < apart * (1.0 - kMergeMinGain);
  return {merge, fmt::format("measured at M={}: {:.1f} us merged vs {:.1f} us for {} GEMMs",
                             rows, merged_us, apart, apart_us.size())};
}

passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows) {
  switch (mode) {
    case MergeGemms::Off: return {};
    case MergeGemms::On:
      return [](const passes::GemmMergeCandidate&) {
        return passes::GemmMergeDecision{true, "asked for (--merge-gemms on)"};
      };
    case MergeGemms::Measure: break;
  }
  if (auto why = runtime::gpu_unavailable_reason())
    return [](const passes::GemmMergeCandidate&) {
      return passes::GemmMergeDecision{false, "no GPU to measure on"};
    };
  // One bench for every candidate of this compile; created on the first candidate.
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows](const passes::GemmMergeCandidate& c) {
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    std::vector<double> apart;
    int64_t total_n = 0;
    for (int64_t n : c.n) {
      apart.push_back((*bench)->best_us(rows, n, c.k, c.dtype));
      total_n += n;
    }
    return decide_merge((*bench)->best_us(rows, total_n, c.k, c.dtype), apart, rows);
  };
}

namespace {

std::optional<codegen::Epilogue> epilogue_of(ir::Op op) {
  switch (op) {
    case ir::Op::MatMul: return codegen::Epilogue::None;
    case ir::Op::MatMulBias: return codegen::Epilogue::Bias;
    case ir::Op::MatMulBiasRelu: return codegen::Epilogue::ReluBias;
    case ir::Op::MatMulBiasGeluTanh: return codegen::Epilogue::GeluTanhBias;
    default: return std::nullopt;  // a residual through C: GemmBench does not time those
  }
}

}  // namespace

passes::EpilogueDecision decide_epilogue(double epilogue_us, double plain_us, double kernel_us,
                                         int64_t rows) {
  if (!(epilogue_us > 0 && plain_us > 0)) return {true, "could not time the GEMMs (the rule)"};
  const bool fold = epilogue_us <= (plain_us + kernel_us) * (1.0 + kEpilogueNoise);
  std::string alternative = kernel_us > 0 ? fmt::format("{:.1f} + {:.1f} us for a kernel of its "
                                                        "own", plain_us, kernel_us)
                                          : fmt::format("{:.1f} us with it in the fused kernel",
                                                        plain_us);
  return {fold, fmt::format("measured at M={}: {:.1f} us vs {}", rows, epilogue_us, alternative)};
}

passes::EpilogueDecider epilogue_decider(bool measure, int64_t rows) {
  if (!measure || runtime::gpu_unavailable_reason()) return {};
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows](const passes::EpilogueCandidate& c) {
    auto from = epilogue_of(c.from), to = epilogue_of(c.to);
    if (!from || !to) return passes::EpilogueDecision{true, "the rule (residuals are not timed)"};
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    runtime::GemmBench& b = **bench;
    const double kernel =
        c.removes_kernel
            ? b.copy_us(rows * c.n * static_cast<int64_t>(ir::dtype_size(c.dtype)))
            : 0.0;
    return decide_epilogue(b.best_us(rows, c.n, c.k, c.dtype, *to),
                           b.best_us(rows, c.n, c.k, c.dtype, *from), kernel, rows);
  };
}

codegen::KernelChoice decide_small_gemm(double kernel_us, double cublaslt_us, int64_t rows) {
  if (!(kernel_us > 0 && cublaslt_us > 0)) return {false, "could not time both (cuBLASLt kept)"};
  const bool use = kernel_us < cublaslt_us * (1.0 - kSmallGemmMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.2f} us as a kernel vs {:.2f} "
                           "us for cuBLASLt",
                           use ? "generated kernel" : "cuBLASLt", rows, kernel_us, cublaslt_us)};
}

namespace {

// `steps` (in order, `repeats` times) over copies of the buffers they use: what no step writes
// becomes an input (or stays a param), what the last step writes the output, the rest
// intermediates (a merged GEMM's stacked weight becomes a param of its own).
codegen::Plan steps_plan(const codegen::Plan& so_far, std::vector<codegen::Step> steps,
                         int repeats) {
  using codegen::BufferRole;
  std::set<int> written;
  for (const codegen::Step& s : steps) written.insert(codegen::step_buffers(s).back());
  const int last = codegen::step_buffers(steps.back()).back();
  codegen::Plan p;
  std::map<int, int> index;
  auto take = [&](int& i) {
    if (i < 0) return;
    auto [it, fresh] = index.try_emplace(i, static_cast<int>(p.buffers.size()));
    if (fresh) {
      codegen::Buffer b = so_far.buffers[static_cast<size_t>(i)];
      b.role = i == last                            ? BufferRole::Output
               : written.count(i)                   ? BufferRole::Intermediate
               : b.role == BufferRole::Param ? BufferRole::Param
                                                    : BufferRole::Input;
      b.view_of = -1;
      b.view_offset = 0;
      b.stacked = false;
      if (b.role == BufferRole::Input) p.inputs.push_back(it->second);
      if (b.role == BufferRole::Output) p.outputs.push_back(it->second);
      p.buffers.push_back(std::move(b));
    }
    i = it->second;
  };
  for (codegen::Step& s : steps)
    for (int* b : codegen::step_buffer_refs(s)) take(*b);
  p.graph_name = std::visit([](const auto& s) { return s.name; }, steps.front());
  for (int r = 0; r < repeats; ++r) p.steps.insert(p.steps.end(), steps.begin(), steps.end());
  return p;
}

codegen::Plan repeated_step_plan(const codegen::Plan& so_far, const codegen::Step& step) {
  return steps_plan(so_far, {step}, kSmallGemmRepeats);
}

}  // namespace

codegen::SmallGemmDecider small_gemm_decider(SmallGemms mode, int64_t rows, bool use_cache) {
  if (mode != SmallGemms::Measure) return {};
  const bool gpu = !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows, gpu, use_cache](const codegen::Plan& plan, const codegen::GemmStep& g,
                                       const codegen::KernelStep& k) {
    if (rows * g.n * g.k > kSmallGemmMaxMacs)
      return codegen::KernelChoice{
          false, fmt::format("cuBLASLt: {} x {} x {} (M x N x K) is past the 2^26 "
                             "multiply-adds a CUDA-core kernel can win (not measured)",
                             rows, g.n, g.k)};
    if (!gpu) return codegen::KernelChoice{false, "cuBLASLt: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      runtime::GemmBench& b = **bench;
      const std::string arch = runtime::device_arch();
      runtime::CachedCompiler compiler(arch, use_cache);
      // Keys: the kernel by its source (as the CUBIN cache keys it), cuBLASLt by its tuning key.
      const std::string kernel_key = fmt::format("{}|graph{}|kernel|{}|M{}", arch,
                                                 kSmallGemmRepeats, compiler.key(k.source), rows);
      const std::string gemm_key =
          fmt::format("graph{}|{}", kSmallGemmRepeats,
                      runtime::gemm_tuning_key(g, rows, arch, runtime::cublaslt_version()));
      // The kernel's CUBIN is fetched only when its time is not cached.
      double kernel_us = b.cached_us(kernel_key).value_or(0.0);
      if (kernel_us == 0.0) {
        std::map<std::string, std::vector<char>> cubins;
        cubins[k.name] = compiler.get(k.source, k.name).bytes;
        kernel_us = b.graph_us(repeated_step_plan(plan, k), cubins, rows, kernel_key);
      }
      const double gemm_us = b.graph_us(repeated_step_plan(plan, g), {}, rows, gemm_key);
      return decide_small_gemm(kernel_us / kSmallGemmRepeats, gemm_us / kSmallGemmRepeats, rows);
    } catch (const Error& e) {  // a measurement that fails leaves the GEMM as it was
      return codegen::KernelChoice{false, fmt::format("cuBLASLt: could not time: {}", e.what())};
    }
  };
}

codegen::KernelChoice decide_gated_gemm(double gated_us, double apart_us, int64_t rows) {
  if (!(gated_us > 0 && apart_us > 0)) return {false, "could not time both (steps kept apart)"};
  const bool use = gated_us < apart_us * (1.0 - kGatedMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us as one gated GEMM "
                           "kernel vs {:.1f} us for the GEMM(s) and the gating kernel",
                           use ? "gated GEMM kernel" : "kept apart", rows, gated_us, apart_us)};
}

codegen::GatedGemmDecider gated_gemm_decider(GatedGemms mode, int64_t rows, const std::string& arch,
                                             bool use_cache) {
  if (mode == GatedGemms::Off) return {};
  const bool hopper = arch == "sm_90" || arch == "sm_90a";
  const bool gpu = mode == GatedGemms::Measure && !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [=](const codegen::Plan& plan, const codegen::KernelStep& gated,
             const std::vector<codegen::Step>& apart) {
    if (!hopper)
      return codegen::KernelChoice{
          false, fmt::format("kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the "
                             "target is {}", arch)};
    if (mode == GatedGemms::On) return codegen::KernelChoice{true, "gated GEMM kernel (--gated-gemms on)"};
    if (!gpu) return codegen::KernelChoice{false, "kept apart: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      runtime::GemmBench& b = **bench;
      runtime::CachedCompiler generic(arch, use_cache);
      runtime::CachedCompiler specific(runtime::arch_specific(arch), use_cache);
      // Keys: kernels by their source (as the CUBIN cache keys them), GEMMs by their tuning key.
      std::map<std::string, std::vector<char>> cubins;
      std::string apart_key = fmt::format("{}|graph{}|apart|M{}", arch, kGatedRepeats, rows);
      for (const codegen::Step& s : apart) {
        if (auto* g = std::get_if<codegen::GemmStep>(&s)) {
          apart_key += "|" + runtime::gemm_tuning_key(*g, rows, arch, runtime::cublaslt_version());
        } else {
          const auto& k = std::get<codegen::KernelStep>(s);
          apart_key += "|" + generic.key(k.source);
          cubins[k.name] = generic.get(k.source, k.name).bytes;
        }
      }
      const std::string gated_key = fmt::format("{}|graph{}|gated|{}|M{}", arch, kGatedRepeats,
                                                specific.key(gated.source), rows);
      double gated_us = b.cached_us(gated_key).value_or(0.0);
      if (gated_us == 0.0)
        gated_us = b.graph_us(steps_plan(plan, {gated}, kGatedRepeats),
                              {{gated.name, specific.get(gated.source, gated.name).bytes}}, rows,
                              gated_key);
      const double apart_us = b.graph_us(steps_plan(plan, apart, kGatedRepeats), cubins, rows, apart_key);
      return decide_gated_gemm(gated_us / kGatedRepeats, apart_us / kGatedRepeats, rows);
    } catch (const Error& e) {  // a measurement that fails leaves the steps as they were
      return codegen::KernelChoice{false, fmt::format("kept apart: could not time: {}", e.what())};
    }
  };
}

}  // namespace mlpc
