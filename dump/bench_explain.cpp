#include "dump/bench_explain.h"

#include <fmt/format.h>

#include <fstream>

#include "ir/error.h"

namespace mlpc {

Peaks peaks_for(const runtime::DevicePeaks& p, const std::string& dtype) {
  auto it = p.gemm_tflops.find(dtype);
  if (it == p.gemm_tflops.end())
    throw Error(fmt::format("no calibrated {} GEMM peak for {}", dtype, p.device));
  auto tf32 = p.gemm_tflops.find(runtime::kTf32Peak);
  return {.gbps = p.copy_gbps, .tflops = it->second, .dtype = dtype,
          .tf32_tflops = tf32 != p.gemm_tflops.end() ? tf32->second : 0.0};
}

std::string peaks_text(const runtime::DevicePeaks& p) {
  std::string gemms;
  for (const auto& [dtype, tflops] : p.gemm_tflops)
    gemms += fmt::format(", {} GEMM {:.0f} TFLOP/s", dtype, tflops);
  return fmt::format("peaks of {}: copy {:.0f} GB/s{} ({})", p.device, p.copy_gbps, gemms,
                     p.from_cache ? "cached in " + p.cache_file
                     : p.cache_file.empty() ? std::string("measured now, not cached")
                                            : "measured now, cached in " + p.cache_file);
}

std::string explain_bench_text(const BenchResult& r, const runtime::DevicePeaks& p) {
  const Peaks peaks = peaks_for(p, r.dtype);
  std::string out = fmt::format("  where the time goes (@{} batch {}; {})\n", r.graph, r.batch,
                                peaks_text(p));
  for (auto [name, m] : {std::pair{"eager", &r.eager}, std::pair{"compiled", &r.compiled}}) {
    ForwardExplain e = explain_forward(samples_from_steps(m->steps), m->median_us, peaks);
    out += explain_text(e, fmt::format("{} ({} launches{}), each kernel alone on the GPU:", name,
                                       m->launches, m->cuda_graph ? ", one CUDA graph" : ""));
  }
  return out;
}

nlohmann::json explain_bench_json(const BenchResult& r, const runtime::DevicePeaks& p) {
  const Peaks peaks = peaks_for(p, r.dtype);
  nlohmann::json out = {{"peaks", runtime::peaks_to_json(p)}};
  out["eager"] = explain_json(explain_forward(samples_from_steps(r.eager.steps),
                                              r.eager.median_us, peaks));
  out["compiled"] = explain_json(explain_forward(samples_from_steps(r.compiled.steps),
                                                 r.compiled.median_us, peaks));
  return out;
}

void write_trace_file(const std::string& path, const nlohmann::json& trace) {
  std::ofstream out(path, std::ios::binary);
  out << trace.dump(1) << "\n";
  out.close();
  if (!out) throw Error(fmt::format("{}: error: cannot write the trace file", path));
}

}  // namespace mlpc
