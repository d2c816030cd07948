#include "compiler/gpu_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "codegen/tf32x3_plan.h"
#include "compiler/batch_plans.h"
#include "dump/report.h"
#include "ir/error.h"
#include "host/cache_dir.h"
#include "runtime/device/device.h"
#include "runtime/measure/timing.h"
#include "host/wall_clock.h"

namespace mlpc {
namespace {

// Binds `batch` and uploads every input and param of the plan.
void bind_values(runtime::Executor& exec, const codegen::Plan& plan, const Values& values,
          int64_t batch) {
  exec.bind_batch(batch);
  for (const codegen::Buffer& b : plan.buffers)
    if (b.uploaded()) exec.set_tensor(b.name, values.at(b.name));
}

double wall_ms(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return runtime::ms_since(t0);
}

// The cold compile's phases, summed over its plans (one per distinct decision outcome).
nlohmann::json cold_phases(const BatchPlans& cold) {
  double passes = 0, passes_timing = 0, plan = 0, wait = 0, timing = 0, kernels = 0, nvrtc = 0;
  for (const BatchPlan& p : cold.plans) {
    const CompiledGraph& c = p.compiled;
    passes += c.passes_ms, passes_timing += c.passes_timing_ms, plan += c.plan_ms;
    wait += c.plan_build_wait_ms, timing += c.plan_timing_ms, kernels += c.compile_ms;
    nvrtc += c.nvrtc_ms;
  }
  return {{"passes_ms", passes},         {"passes_timing_ms", passes_timing},
          {"plan_ms", plan},             {"plan_build_wait_ms", wait},
          {"plan_timing_ms", timing},    {"kernels_ms", kernels},
          {"nvrtc_ms", nvrtc}};
}

// One mode (eager or compiled): compiled once for every batch size (compiler/batch_plans.h: each
// size's decisions measured at it), then each size run on its plan by that plan's executor, which
// keeps an arena and a CUDA graph per batch; NVRTC never runs again for a new batch.
std::vector<ModeResult> measure(const ir::Graph& g, const CompileOptions& options,
                                const runtime::ExecutorOptions& exec_options,
                                const std::vector<int64_t>& batches, uint64_t seed,
                                const ValuesFor& values_for) {
  // Cold: a first compile on a fresh machine, every cache empty but in use (a kernel NVRTC built
  // for a measurement is the plan's too); without caches (use_cache off) it is what it is.
  double cold_ms = 0;
  BatchPlans cold;
  {
    std::optional<runtime::FreshCacheDir> fresh;
    if (options.use_cache) fresh.emplace();
    cold_ms = wall_ms([&] { cold = compile_for_batches(g, options, batches); });
  }
  compile_for_batches(g, options, batches);  // fills the cache if it was empty
  BatchPlans plans;
  double warm_ms = wall_ms([&] { plans = compile_for_batches(g, options, batches); });

  const nlohmann::json phases = cold_phases(cold);
  std::vector<std::unique_ptr<runtime::Executor>> executors(plans.plans.size());
  std::vector<ModeResult> results;
  for (int64_t batch : batches) {
    ModeResult& m = results.emplace_back();
    m.compile_cold_ms = cold_ms;
    m.compile_warm_ms = warm_ms;
    m.compile_cold_phases = phases;
    const size_t which = plans.index_for(batch);
    const CompiledGraph& c = plans.plans[which].compiled;
    m.plan_decided_at = plans.plans[which].decided_at;
    m.plans_compiled = static_cast<int>(plans.plans.size());
    if (!executors[which])
      executors[which] = std::make_unique<runtime::Executor>(c.plan, c.cubins, exec_options);
    runtime::Executor& exec = *executors[which];
    Values values = values_for ? values_for(batch) : random_values(g, batch, seed);
    std::vector<int64_t> rows = sample_rows(batch);
    bind_values(exec, c.plan, values, batch);
    exec.run();  // the first forward at a batch tunes GEMMs and captures the graph
    exec.run();  // so this one is what timing replays
    m.check = compare_rows(g, exec.outputs(), rows, reference_on_rows(g, values, rows),
                           codegen::needs_tf32x3_tolerance(c.plan), &values);
    if (batches.size() == 1) m.outputs = exec.outputs();
    runtime::GpuMonitor monitor;
    monitor.start();
    runtime::Timing t = runtime::time_forward(exec);
    m.gpu = monitor.stop();
    m.median_us = t.median_us;
    m.min_us = t.min_us;
    m.launches = c.plan.launches();
    m.cuda_graph = exec.uses_cuda_graph();
    m.activation_bytes = static_cast<int64_t>(exec.arena_bytes());
    m.gemms = exec.gemm_choices();
    std::vector<double> us = exec.time_steps();
    nlohmann::json kernels = plan_json(c, batch)["kernels"];
    m.steps = nlohmann::json::array();
    for (size_t i = 0; i < us.size() && i < kernels.size(); ++i) {
      nlohmann::json s = {{"name", kernels[i]["name"]}, {"kind", kernels[i]["kind"]},
                          {"us", us[i]}, {"bytes", kernels[i]["bytes"]},
                          {"gbps", kernels[i]["bytes"].get<double>() / (us[i] * 1e3)}};
      const nlohmann::json& ops = kernels[i]["ops"];
      if (std::find(ops.begin(), ops.end(), "tf32x3") != ops.end()) s["tf32x3"] = true;
      if (kernels[i].contains("flops")) {
        s["flops"] = kernels[i]["flops"];
        s["tflops"] = kernels[i]["flops"].get<double>() / (us[i] * 1e6);
      }
      m.steps.push_back(std::move(s));
    }
  }
  return results;
}

}  // namespace

void require_gpu() {
  if (auto reason = runtime::gpu_unavailable_reason()) throw Error(*reason);
}

void bind_inputs_and_params(runtime::Executor& exec, const codegen::Plan& plan,
                            const Values& values, int64_t batch) {
  bind_values(exec, plan, values, batch);
}

std::vector<runtime::HostTensor> run_on_gpu(const CompiledGraph& c, const Values& values,
                                            int64_t batch, const runtime::ExecutorOptions& exec) {
  require_gpu();
  runtime::Executor e(c.plan, c.cubins, exec);
  bind_values(e, c.plan, values, batch);
  e.run();
  return e.outputs();
}

std::vector<BenchResult> bench(const ir::Graph& g, const std::vector<int64_t>& batches,
                               uint64_t seed, const CompileOptions& compiled,
                               const runtime::ExecutorOptions& exec, const ValuesFor& values_for) {
  require_gpu();
  std::vector<ModeResult> eager = measure(g, {.fusion = false, .arch = compiled.arch},
                                          {.tune_gemms = false, .cuda_graph = false}, batches,
                                          seed, values_for);
  std::vector<ModeResult> fused = measure(g, compiled, exec, batches, seed, values_for);
  std::vector<BenchResult> out;
  for (size_t i = 0; i < batches.size(); ++i) {
    BenchResult& r = out.emplace_back();
    r.graph = g.name;
    r.batch = batches[i];
    r.dtype = std::string(ir::dtype_name(g.node(g.outputs()[0]).type.dtype));
    r.device = runtime::device_info().name;
    r.eager = std::move(eager[i]);
    r.compiled = std::move(fused[i]);
  }
  return out;
}

nlohmann::json to_json(const BenchResult& r) {
  auto mode = [](const ModeResult& m) {
    nlohmann::json gemms = nlohmann::json::array();
    for (const runtime::GemmChoice& c : m.gemms)
      gemms.push_back({{"step", c.step}, {"key", c.key}, {"heuristic_index", c.heuristic_index},
                       {"candidates", c.candidates}, {"us", c.us}, {"from_cache", c.from_cache}});
    return nlohmann::json{{"median_us", m.median_us},
                          {"min_us", m.min_us},
                          {"launches", m.launches},
                          {"cuda_graph", m.cuda_graph},
                          {"max_abs_err", m.check.max_abs_err},
                          {"tolerance_ratio", m.check.worst_ratio},
                          {"within_tolerance", m.check.ok},
                          {"rows_checked", m.check.rows.size()},
                          {"activation_bytes", m.activation_bytes},
                          {"compile_cold_ms", m.compile_cold_ms},
                          {"compile_warm_ms", m.compile_warm_ms},
                          {"compile_cold_phases", m.compile_cold_phases},
                          {"plan_decided_at", m.plan_decided_at},
                          {"plans_compiled", m.plans_compiled},
                          {"gemms", gemms},
                          {"steps", m.steps},
                          {"gpu", runtime::to_json(m.gpu)}};
  };
  return {{"graph", r.graph},   {"batch", r.batch},         {"dtype", r.dtype},
          {"device", r.device}, {"modes", {{"eager", mode(r.eager)}, {"compiled", mode(r.compiled)}}},
          {"speedup", r.speedup()}};
}

std::string to_text(const BenchResult& r) {
  std::string out = fmt::format("@{} {} batch {} on {}\n", r.graph, r.dtype, r.batch, r.device);
  out += fmt::format("  {:<9} {:>11} {:>9} {:>6} {:>13} {:>10} {:>12} {:>14}\n", "mode",
                     "median_us", "launches", "graph", "max_abs_err", "tolerance", "arena_MB",
                     "compile_ms");
  for (auto [name, m] : {std::pair{"eager", &r.eager}, std::pair{"compiled", &r.compiled}})
    out += fmt::format("  {:<9} {:>11.1f} {:>9} {:>6} {:>13.3g} {:>10} {:>12.1f} {:>6.0f}/{:<6.1f}\n",
                       name, m->median_us, m->launches, m->cuda_graph ? "yes" : "no",
                       m->check.max_abs_err,
                       m->check.ok ? "ok" : fmt::format("FAIL x{:.2f}", m->check.worst_ratio),
                       m->activation_bytes / 1e6, m->compile_cold_ms, m->compile_warm_ms);
  out += fmt::format("  speedup (eager / compiled): {:.3f}x  (compile_ms: cold / warm cache)\n",
                     r.speedup());
  // A stream of large GEMMs is power-bound: its clock says as much as its time.
  for (auto [name, m] : {std::pair{"eager", &r.eager}, std::pair{"compiled", &r.compiled}})
    out += fmt::format("  GPU while {} was timed: {}\n", name, runtime::describe(m->gpu));
  const nlohmann::json& ph = r.compiled.compile_cold_phases;
  if (ph.is_object())
    out += fmt::format("  compiled's cold compile: passes {:.0f} ms (timed {:.0f} ms), plan {:.0f} "
                       "ms (both with the decisions measured on the GPU; the plan's waited {:.0f} "
                       "ms for kernel builds, timed {:.0f} ms), kernels {:.0f} ms (NVRTC {:.0f} "
                       "ms summed)\n",
                       ph["passes_ms"].get<double>(), ph.value("passes_timing_ms", 0.0),
                       ph["plan_ms"].get<double>(),
                       ph["plan_build_wait_ms"].get<double>(), ph["plan_timing_ms"].get<double>(),
                       ph["kernels_ms"].get<double>(), ph["nvrtc_ms"].get<double>());
  if (r.compiled.plans_compiled > 1)  // one compile, a plan per decision outcome
    out += fmt::format("  compiled runs the plan {} (one of {} the compile made for the batch "
                       "sizes asked for)\n",
                       describe_decided_at(r.compiled.plan_decided_at),
                       r.compiled.plans_compiled);
  for (auto [name, m] : {std::pair{"eager", &r.eager}, std::pair{"compiled", &r.compiled}}) {
    out += fmt::format("  {} steps, each alone on the GPU:\n", name);
    for (const auto& s : m->steps)
      out += fmt::format("    {:<34} {:>9.1f} us {:>8.0f} GB/s{}\n", s["name"].get<std::string>(),
                         s["us"].get<double>(), s["gbps"].get<double>(),
                         s.contains("tflops") ? fmt::format(" {:>6.1f} TFLOP/s",
                                                            s["tflops"].get<double>())
                                              : "");
  }
  return out;
}

}  // namespace mlpc
