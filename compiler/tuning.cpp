#include "compiler/tuning.h"

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ir/error.h"
#include "runtime/device/device.h"
#include "runtime/gemm/gemm_tuner.h"
#include "runtime/jit/kernel_builds.h"
#include "runtime/measure/gemm_bench.h"
#include "host/wall_clock.h"

namespace mlpc {
namespace {

using Clock = std::chrono::steady_clock;

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
      b.role = i == last                     ? BufferRole::Output
               : written.count(i)            ? BufferRole::Intermediate
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

// One fragment to time, and where its time goes.
struct Timing {
  const codegen::Fragment* fragment;
  int repeats;
  size_t candidate;
  std::optional<size_t> option;  // none: the baseline
  std::string key;
};

}  // namespace

bool measures_kernels(const passes::SelectOptions& o) {
  using namespace passes;
  return (o.gated_gemms == GatedGemms::Measure &&
          (gated_gemms_run_on(o.arch) || mma_gemms_run_on(o.arch))) ||
         o.small_gemms == SmallGemms::Measure || o.fp32_gemms == Fp32Gemms::Measure ||
         o.transposed_x == TransposedX::Measure || o.fused_mlps == FusedMlps::Measure;
}

std::vector<codegen::Step> steps_to_time(const std::vector<codegen::CandidateFragments>& cands,
                                         const passes::SelectOptions& o) {
  std::vector<codegen::Step> steps;
  for (const codegen::CandidateFragments& c : cands) {
    const std::vector<size_t> timed = passes::options_to_time(c.candidate, o);
    if (timed.empty()) continue;
    steps.insert(steps.end(), c.baseline.steps.begin(), c.baseline.steps.end());
    for (size_t i : timed)
      steps.insert(steps.end(), c.options[i].steps.begin(), c.options[i].steps.end());
  }
  return steps;
}

TuningResult tune_kernels(const ir::Graph& fused, const passes::SelectOptions& o,
                          bool use_cache) {
  TuningResult r;
  const std::vector<codegen::CandidateFragments> cands = codegen::enumerate_candidates(fused);
  for (const codegen::CandidateFragments& c : cands) r.candidates.push_back(c.candidate);
  if (!measures_kernels(o) || runtime::gpu_unavailable_reason()) return r;
  r.measured = true;

  // Baselines first, then the options, each in the candidates' order: a fixed order (the GPU's
  // state, warm from the timings before, is part of a close call), cheap builds first.
  std::vector<Timing> timings;
  for (size_t ci = 0; ci < cands.size(); ++ci) {
    const std::vector<size_t> timed = passes::options_to_time(cands[ci].candidate, o);
    if (timed.empty()) continue;
    const int repeats = passes::timing_repeats(cands[ci].candidate.kind);
    timings.push_back({&cands[ci].baseline, repeats, ci, std::nullopt, {}});
  }
  for (size_t ci = 0; ci < cands.size(); ++ci) {
    const int repeats = passes::timing_repeats(cands[ci].candidate.kind);
    for (size_t i : passes::options_to_time(cands[ci].candidate, o))
      timings.push_back({&cands[ci].options[i], repeats, ci, i, {}});
  }
  if (timings.empty()) return r;

  runtime::GemmBench bench;
  // Every fragment not timed before starts building now, each on a thread of its own (two
  // fragments with one kernel share its build: runtime::CachedCompiler).
  std::map<std::string, double> us;  // by key: a fragment met twice is timed once
  std::map<std::string, std::shared_future<runtime::KernelBuilds>> builds;
  for (Timing& t : timings) {
    t.key = steps_key(t.fragment->steps, o.arch, o.rows, t.repeats);
    if (us.count(t.key) || builds.count(t.key)) continue;
    if (auto cached = bench.cached_us(t.key)) {
      us[t.key] = *cached / t.repeats;
      continue;
    }
    builds[t.key] = std::async(std::launch::async, [steps = t.fragment->steps, arch = o.arch,
                                                   use_cache] {
                      return runtime::build_kernels(steps, arch, use_cache);
                    }).share();
  }
  for (const Timing& t : timings) {
    passes::KernelCandidate& c = r.candidates[t.candidate];
    if (!us.count(t.key)) {
      try {
        // The plan first, while its kernels may still be building.
        auto t0 = Clock::now();
        const codegen::Plan plan = steps_plan(t.fragment->plan, t.fragment->steps, t.repeats);
        r.timing_ms += runtime::ms_since(t0);
        t0 = Clock::now();
        const runtime::KernelBuilds& built = builds.at(t.key).get();  // rethrows a failed build
        r.build_wait_ms += runtime::ms_since(t0);
        t0 = Clock::now();
        us[t.key] = bench.graph_us(plan, built.cubins, o.rows, t.key) / t.repeats;
        r.timing_ms += runtime::ms_since(t0);
      } catch (const Error& e) {  // the candidate keeps the steps as they are, saying why
        if (c.timing_error.empty()) c.timing_error = e.what();
        us[t.key] = 0;
      }
    }
    (t.option ? c.options[*t.option].us : c.baseline_us) = us[t.key];
  }
  return r;
}

}  // namespace mlpc
