#include "compiler/gemm_decisions.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <numeric>
#include <set>

#include "codegen/tf32x3_plan.h"
#include "ir/error.h"
#include "runtime/device/device.h"
#include "runtime/measure/gemm_bench.h"
#include "runtime/gemm/gemm_tuner.h"
#include "runtime/jit/kernel_builds.h"
#include "host/wall_clock.h"

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
    if (c.from.residual || c.to.residual)  // GemmBench times no residual
      return passes::EpilogueDecision{true, "the rule (residuals are not timed)"};
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    runtime::GemmBench& b = **bench;
    const double kernel =
        c.removes_kernel
            ? b.copy_us(rows * c.n * static_cast<int64_t>(ir::dtype_size(c.dtype)))
            : 0.0;
    return decide_epilogue(b.best_us(rows, c.n, c.k, c.dtype, c.to),
                           b.best_us(rows, c.n, c.k, c.dtype, c.from), kernel, rows);
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
      b.split_of = -1;  // timing needs values, not the weight's true parts
      b.transpose_of = -1;
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

// The timing cache key of `steps` run `repeats` passes in a row at `rows` rows for `arch`:
// kernels by their CUBIN cache keys, GEMMs by their tuning keys.
std::string steps_key(const std::vector<codegen::Step>& steps, const std::string& arch,
                      int64_t rows, int repeats) {
  std::string key = fmt::format("{}|graph{}|M{}", arch, repeats, rows);
  for (const codegen::Step& s : steps) {
    if (auto* g = std::get_if<codegen::GemmStep>(&s))
      key += "|" + runtime::gemm_tuning_key(*g, rows, arch, runtime::cublaslt_version());
    else if (auto* k = std::get_if<codegen::KernelStep>(&s))
      key += "|" + runtime::kernel_build_key(*k, arch);
  }
  return key;
}

std::mutex costs_mutex;
DecisionCosts costs;

// One side of a decision: `steps` of `plan`.
struct Alternative {
  const codegen::Plan* plan;
  std::vector<codegen::Step> steps;
};

// µs per pass of each alternative, timed `repeats` passes in a row inside one CUDA graph, with
// kernels built for `arch`; cached under steps_key. The kernels of every alternative not cached
// build at once, each alternative's on a thread of its own; the alternatives are timed in the
// order given (the GPU's state, power-capped and warm from the measurements before, is part of
// a close call: the order is kept fixed), each as soon as its kernels are built.
std::vector<double> alternatives_us(runtime::GemmBench& b, const std::vector<Alternative>& alts,
                                    const std::string& arch, int64_t rows, int repeats,
                                    bool use_cache) {
  std::vector<double> us(alts.size(), 0.0);
  std::vector<std::string> keys;
  std::vector<std::future<runtime::KernelBuilds>> builds(alts.size());
  for (size_t i = 0; i < alts.size(); ++i) {
    keys.push_back(steps_key(alts[i].steps, arch, rows, repeats));
    if (auto cached = b.cached_us(keys[i]))
      us[i] = *cached / repeats;
    else
      builds[i] = std::async(std::launch::async, [&alts, i, &arch, use_cache] {
        return runtime::build_kernels(alts[i].steps, arch, use_cache);
      });
  }
  for (size_t i = 0; i < alts.size(); ++i) {
    if (!builds[i].valid()) continue;  // cached
    // The plan and its random inputs first, while its kernels may still be building: the inputs
    // are the most of a timing's setup, and the gated kernel's build is a cold compile's longest.
    auto t0 = std::chrono::steady_clock::now();
    const codegen::Plan plan = steps_plan(*alts[i].plan, alts[i].steps, repeats);
    const runtime::GemmBench::Inputs inputs = runtime::GemmBench::random_inputs(plan, rows);
    double timing = runtime::ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const runtime::KernelBuilds built = builds[i].get();  // waits; rethrows a failed build
    const double waited = runtime::ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    us[i] = b.graph_us(plan, built.cubins, rows, keys[i], &inputs) / repeats;
    timing += runtime::ms_since(t0);
    std::lock_guard lock(costs_mutex);
    costs.build_wait_ms += waited;
    costs.timing_ms += timing;
  }
  return us;
}

}  // namespace

DecisionCosts decision_costs() {
  std::lock_guard lock(costs_mutex);
  return costs;
}

namespace {

// What a generated GEMM kernel is, for a decision's record.
std::string kernel_kind(const codegen::KernelStep& k) {
  return k.as<codegen::MmaGemm>() ? "tensor-core mma kernel" : "CUDA-core kernel";
}

// The fastest of `kernels` timed (us[i] > 0), or nullopt.
std::optional<size_t> fastest(const std::vector<double>& us, const std::vector<size_t>& kernels) {
  std::optional<size_t> best;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (us[i] > 0 && (!best || us[i] < us[*best])) best = i;
  return best;
}

// The other timed candidates, for the record: "; CUDA-core kernel 4.10 us" (`decimals` after
// the point), each named by label(i), i indexing `us`.
std::string others_timed(const std::vector<double>& us, size_t chosen, int decimals,
                         const std::function<std::string(size_t)>& label) {
  std::string s;
  for (size_t i = 0; i < us.size(); ++i)
    if (i != chosen) s += fmt::format("; {} {:.{}f} us", label(i), us[i], decimals);
  return s;
}

}  // namespace

bool mma_gemms_run_on(const std::string& arch) {
  int sm = 0;
  return std::sscanf(arch.c_str(), "sm_%d", &sm) == 1 && sm >= 80;
}

codegen::SmallGemmDecider small_gemm_decider(SmallGemms mode, int64_t rows, bool use_cache) {
  if (mode == SmallGemms::Mma)
    return [](const codegen::Plan&, const codegen::GemmStep&,
              const std::vector<codegen::KernelStep>& kernels) {
      for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels[i].as<codegen::MmaGemm>())
          return codegen::KernelChoice{true, "tensor-core mma kernel (--small-gemms mma)", i};
      return codegen::KernelChoice{false, "cuBLASLt: the mma kernel cannot compute it"};
    };
  if (mode != SmallGemms::Measure) return {};
  const bool gpu = !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows, gpu, use_cache](const codegen::Plan& plan, const codegen::GemmStep& g,
                                       const std::vector<codegen::KernelStep>& kernels) {
    // The kernels that can win at this size (the others are not measured).
    std::vector<size_t> apply;
    for (size_t i = 0; i < kernels.size(); ++i)
      if (small_gemm_candidate_timed(kernels[i], g, rows) &&
          (!kernels[i].as<codegen::MmaGemm>() || !gpu || mma_gemms_run_on(runtime::device_arch())))
        apply.push_back(i);
    if (apply.empty())
      return codegen::KernelChoice{
          false, fmt::format("cuBLASLt: {} x {} x {} (M x N x K) is past the 2^26 "
                             "multiply-adds a CUDA-core kernel can win and the {} rows of the "
                             "tensor-core mma kernel (not measured)",
                             rows, g.n, g.k, kMmaGemmMaxRows)};
    if (!gpu) return codegen::KernelChoice{false, "cuBLASLt: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      runtime::GemmBench& b = **bench;
      const std::string arch = runtime::device_arch();
      std::vector<Alternative> alts;
      for (size_t i : apply) alts.push_back({&plan, {kernels[i]}});
      alts.push_back({&plan, {g}});
      std::vector<double> us = alternatives_us(b, alts, arch, rows, kSmallGemmRepeats, use_cache);
      const double cublaslt_us = us.back();
      us.pop_back();
      const std::optional<size_t> best = fastest(us, apply);
      if (!best) return decide_small_gemm(0.0, cublaslt_us, rows);
      codegen::KernelChoice c = decide_small_gemm(us[*best], cublaslt_us, rows);
      c.kernel = apply[*best];
      auto kind = [&](size_t i) { return kernel_kind(kernels[apply[i]]); };
      if (apply.size() > 1 || kernels[c.kernel].as<codegen::MmaGemm>())
        c.why += fmt::format(" (the {}{})", kind(*best), others_timed(us, *best, 2, kind));
      return c;
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
  const bool hopper = gated_gemms_run_on(arch);
  const bool mma = mma_gemms_run_on(arch) && rows <= kMmaGemmMaxRows;
  const bool gpu = mode == GatedGemms::Measure && !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [=](const codegen::Plan& plan, const std::vector<codegen::KernelStep>& kernels,
             const std::vector<codegen::Step>& apart) {
    // The candidates this arch and size allow: the Hopper kernel first, then the mma one.
    std::vector<size_t> apply;
    for (size_t i = 0; i < kernels.size(); ++i)
      if (kernels[i].as<codegen::GatedGemm>() ? hopper : mma) apply.push_back(i);
    if (mode == GatedGemms::Mma) {
      for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels[i].as<codegen::GatedMmaGemm>())
          return codegen::KernelChoice{true, "gated mma kernel (--gated-gemms mma)", i};
      return codegen::KernelChoice{false, "kept apart: the mma kernel cannot compute it"};
    }
    if (mode == GatedGemms::On) {
      if (!hopper || !kernels.front().as<codegen::GatedGemm>())
        return codegen::KernelChoice{
            false, fmt::format("kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the "
                               "target is {}", arch)};
      return codegen::KernelChoice{true, "gated GEMM kernel (--gated-gemms on)"};
    }
    if (apply.empty())
      return codegen::KernelChoice{
          false, fmt::format("kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the "
                             "target is {}{}", arch,
                             mma_gemms_run_on(arch)
                                 ? fmt::format(", and the mma one at most {} rows", kMmaGemmMaxRows)
                                 : "")};
    if (!gpu) return codegen::KernelChoice{false, "kept apart: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      runtime::GemmBench& b = **bench;
      // The steps apart first: their kernels (no sm_90a build) are ready long before the gated
      // kernel, so their timing runs while it builds, off a cold compile's longest path.
      std::vector<Alternative> alts = {{&plan, apart}};
      for (size_t i : apply) alts.push_back({&plan, {kernels[i]}});
      std::vector<double> us = alternatives_us(b, alts, arch, rows, kGatedRepeats, use_cache);
      const double apart_us = us.front();
      us.erase(us.begin());
      const std::optional<size_t> best = fastest(us, apply);
      if (!best) return decide_gated_gemm(0.0, apart_us, rows);
      codegen::KernelChoice c = decide_gated_gemm(us[*best], apart_us, rows);
      c.kernel = apply[*best];
      if (kernels[c.kernel].as<codegen::GatedMmaGemm>() || apply.size() > 1) {
        auto kind = [&](size_t i) -> std::string {
          return kernels[apply[i]].as<codegen::GatedMmaGemm>() ? "the mma kernel"
                                                               : "the Hopper kernel";
        };
        c.why += fmt::format(" ({}{})", kind(*best), others_timed(us, *best, 1, kind));
      }
      return c;
    } catch (const Error& e) {  // a measurement that fails leaves the steps as they were
      return codegen::KernelChoice{false, fmt::format("kept apart: could not time: {}", e.what())};
    }
  };
}


codegen::KernelChoice decide_tf32x3(double tf32x3_us, double ieee_us, int64_t rows) {
  if (!(tf32x3_us > 0 && ieee_us > 0)) return {false, "could not time both (IEEE fp32 kept)"};
  const bool use = tf32x3_us < ieee_us * (1.0 - kTf32x3MinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us as 3xTF32 (split "
                           "included) vs {:.1f} us as an IEEE fp32 GEMM",
                           use ? "3xTF32" : "IEEE fp32", rows, tf32x3_us, ieee_us)};
}

codegen::Tf32x3Decider tf32x3_decider(Fp32Gemms mode, int64_t rows, bool use_cache) {
  if (mode == Fp32Gemms::Ieee) return {};
  const bool gpu = mode == Fp32Gemms::Measure && !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [=](const codegen::Plan& plan, const std::vector<codegen::Step>& replaced,
             const codegen::Plan& trial, const std::vector<codegen::Step>& rewritten) {
    // How the rewrite cut K (codegen/tf32x3.h), for the record.
    int chunks = 0;
    bool below_ieee = false;
    for (const codegen::Step& s : rewritten)
      if (const auto* g = std::get_if<codegen::GemmStep>(&s)) {
        ++chunks;
        below_ieee |= codegen::tf32x3_below_ieee(*g);
      }
    const auto* first = std::get_if<codegen::GemmStep>(&replaced.back());
    const std::string cut =
        below_ieee ? fmt::format("one chunk, K = {} (less accurate than IEEE fp32)",
                                 first ? first->k : 0)
                   : fmt::format("K in {} chunks of {}", chunks, first ? first->k / chunks : 0);
    if (mode == Fp32Gemms::Tf32x3)
      return codegen::KernelChoice{true, "3xTF32 (--fp32-gemms tf32x3), " + cut};
    if (below_ieee)
      return codegen::KernelChoice{
          false, fmt::format("IEEE fp32: K = {} cannot be cut into chunks that keep 3xTF32 as "
                             "accurate (not measured)", first ? first->k : 0)};
    if (!gpu) return codegen::KernelChoice{false, "IEEE fp32: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      const std::string arch = runtime::device_arch();
      const std::vector<double> us = alternatives_us(
          **bench, {{&trial, rewritten}, {&plan, replaced}}, arch, rows, kTf32x3Repeats, use_cache);
      codegen::KernelChoice c = decide_tf32x3(us[0], us[1], rows);
      if (c.use_kernel) c.why += ", " + cut;
      return c;
    } catch (const Error& e) {  // a measurement that fails leaves the GEMM as it was
      return codegen::KernelChoice{false, fmt::format("IEEE fp32: could not time: {}", e.what())};
    }
  };
}

namespace {

// What a transposed-x decision says it kept when it does not take the rewrite.
const char* kept_layout(bool weight) { return weight ? "w [n, k]" : "x row-major"; }

}  // namespace

codegen::KernelChoice decide_transposed_x(double transposed_us, double row_major_us,
                                          int64_t rows, bool weight) {
  if (!(transposed_us > 0 && row_major_us > 0))
    return {false, weight ? "could not time both (w kept [n, k])"
                          : "could not time both (x kept row-major)"};
  const bool use = transposed_us < row_major_us * (1.0 - kTransposedXMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us with {} stored "
                           "transposed{} vs {:.1f} us {} (x's kernel and the GEMM)",
                           use ? (weight ? "w transposed" : "x transposed") : kept_layout(weight),
                           rows, transposed_us, weight ? "w" : "x", weight ? " too" : "",
                           row_major_us, weight ? "with x alone" : "row-major")};
}

codegen::TransposedXDecider transposed_x_decider(TransposedX mode, int64_t rows, bool use_cache) {
  if (mode == TransposedX::Off) return {};
  const bool gpu = mode == TransposedX::Measure && !runtime::gpu_unavailable_reason();
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [=](const codegen::Plan& plan, const std::vector<codegen::Step>& replaced,
             const codegen::Plan& trial, const std::vector<codegen::Step>& rewritten) {
    // The weight's decision: the GEMM reads w transposed in `rewritten` and not in `replaced`.
    auto reads_w_transposed = [](const std::vector<codegen::Step>& steps) {
      const auto* g = std::get_if<codegen::GemmStep>(&steps.back());
      return g && g->w_transposed;
    };
    const bool weight = reads_w_transposed(rewritten) && !reads_w_transposed(replaced);
    if (mode == TransposedX::On)
      return codegen::KernelChoice{
          true, weight ? "w transposed (--transposed-x on)" : "x transposed (--transposed-x on)"};
    if (!gpu) return codegen::KernelChoice{false, "x row-major: no GPU to measure on"};
    try {
      if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
      const std::vector<double> us =
          alternatives_us(**bench, {{&plan, replaced}, {&trial, rewritten}},
                          runtime::device_arch(), rows, kTransposedXRepeats, use_cache);
      return decide_transposed_x(us[1], us[0], rows, weight);
    } catch (const Error& e) {  // a measurement that fails leaves x (or w) as it was
      return codegen::KernelChoice{
          false, fmt::format("{}: could not time: {}", kept_layout(weight), e.what())};
    }
  };
}

}  // namespace mlpc
