// `mlpc bench --explain` and `--trace` on top of a bench result: the explain tables of both
// modes against the device's calibrated peaks, and the Chrome trace written to a file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dump/explain.h"
#include "compiler/gpu_session.h"
#include "runtime/measure/calibrate.h"

namespace mlpc {

// The peaks to hold a graph of `dtype` ("bf16") against. Throws mlpc::Error when the GEMM peak
// of that dtype was not measured.
Peaks peaks_for(const runtime::DevicePeaks& p, const std::string& dtype);
// "peaks of DEVICE: copy C GB/s, bf16 GEMM T TFLOP/s (cached in FILE)"
std::string peaks_text(const runtime::DevicePeaks& p);

std::string explain_bench_text(const BenchResult& r, const runtime::DevicePeaks& p);
// {"peaks": {...}, "eager": explain_json, "compiled": explain_json}
nlohmann::json explain_bench_json(const BenchResult& r, const runtime::DevicePeaks& p);

// Writes the trace JSON to `path`; throws mlpc::Error "PATH: error: cannot write ..." on failure.
void write_trace_file(const std::string& path, const nlohmann::json& trace);

}  // namespace mlpc
