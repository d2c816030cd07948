#include "compiler/gpu_session.h"

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/timing.h"

namespace mlpc {
namespace {

std::unique_ptr<runtime::Executor> load(const CompiledGraph& c, const Values& values,
                                        int64_t batch) {
  auto exec = std::make_unique<runtime::Executor>(c.plan, c.cubins);
  exec->bind_batch(batch);
  for (const codegen::Buffer& b : c.plan.buffers)
    if (b.role == codegen::BufferRole::Input || b.role == codegen::BufferRole::Param)
      exec->set_tensor(b.name, values.at(b.name));
  return exec;
}

ModeResult measure(const ir::Graph& g, const CompiledGraph& c, const Values& values,
                   int64_t batch, const std::vector<int64_t>& rows,
                   const std::vector<runtime::HostTensor>& reference) {
  ModeResult m;
  auto exec = load(c, values, batch);
  exec->run();
  m.check = compare_rows(g, exec->outputs(), rows, reference);
  runtime::Timing t = runtime::time_forward(*exec);
  m.median_us = t.median_us;
  m.min_us = t.min_us;
  m.launches = c.plan.launches();
  m.activation_bytes = static_cast<int64_t>(exec->arena_bytes());
  return m;
}

}  // namespace

void require_gpu() {
  if (auto reason = runtime::gpu_unavailable_reason()) throw Error(*reason);
}

std::vector<runtime::HostTensor> run_on_gpu(const CompiledGraph& c, const Values& values,
                                            int64_t batch) {
  require_gpu();
  auto exec = load(c, values, batch);
  exec->run();
  return exec->outputs();
}

BenchResult bench(const ir::Graph& g, int64_t batch, uint64_t seed,
                  const CompileOptions& compiled) {
  require_gpu();
  BenchResult r;
  r.graph = g.name;
  r.batch = batch;
  r.dtype = std::string(ir::dtype_name(g.node(g.outputs()[0]).type.dtype));
  r.device = runtime::device_info().name;
  Values values = random_values(g, batch, seed);
  std::vector<int64_t> rows = sample_rows(batch);
  std::vector<runtime::HostTensor> reference = reference_on_rows(g, values, rows);
  for (bool fusion : {false, true}) {
    CompileOptions options = compiled;
    if (!fusion) options = {.fusion = false, .arch = compiled.arch};
    CompiledGraph c = compile(g, options);
    ModeResult m = measure(g, c, values, batch, rows, reference);
    m.compile_ms = c.nvrtc_ms;
    (fusion ? r.compiled : r.eager) = m;
  }
  return r;
}

nlohmann::json to_json(const BenchResult& r) {
  auto mode = [](const ModeResult& m) {
    return nlohmann::json{{"median_us", m.median_us},
                          {"min_us", m.min_us},
                          {"launches", m.launches},
                          {"max_abs_err", m.check.max_abs_err},
                          {"tolerance_ratio", m.check.worst_ratio},
                          {"within_tolerance", m.check.ok},
                          {"rows_checked", m.check.rows.size()},
                          {"activation_bytes", m.activation_bytes},
                          {"nvrtc_ms", m.compile_ms}};
  };
  return {{"graph", r.graph},   {"batch", r.batch},         {"dtype", r.dtype},
          {"device", r.device}, {"modes", {{"eager", mode(r.eager)}, {"compiled", mode(r.compiled)}}},
          {"speedup", r.speedup()}};
}

std::string to_text(const BenchResult& r) {
  std::string out = fmt::format("@{} {} batch {} on {}\n", r.graph, r.dtype, r.batch, r.device);
  out += fmt::format("  {:<9} {:>11} {:>9} {:>13} {:>10}\n", "mode", "median_us", "launches",
                     "max_abs_err", "tolerance");
  for (auto [name, m] : {std::pair{"eager", &r.eager}, std::pair{"compiled", &r.compiled}})
    out += fmt::format("  {:<9} {:>11.1f} {:>9} {:>13.3g} {:>10}\n", name, m->median_us,
                       m->launches, m->check.max_abs_err,
                       m->check.ok ? "ok" : fmt::format("FAIL x{:.2f}", m->check.worst_ratio));
  out += fmt::format("  speedup (eager / compiled): {:.3f}x\n", r.speedup());
  return out;
}

}  // namespace mlpc
