#include "runtime/measure/calibrate.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/plan.h"
#include "host/atomic_file.h"
#include "host/cache_dir.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/gemm/gemm_lt.h"

namespace mlpc::runtime {
namespace {

constexpr const char* kFormat = "mlpc-peaks-v1";
constexpr size_t kCopyBytes = size_t{512} << 20;  // far beyond any GPU's L2
constexpr int kTrials = 5, kRepsPerTrial = 10;
constexpr int kGemmCandidates = 8;

// Frees device memory and the events on every path out.
struct DeviceScratch {
  std::vector<void*> ptrs;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaStream_t stream = nullptr;
  DeviceScratch() {
    MLPC_CUDA(cudaEventCreate(&start));
    MLPC_CUDA(cudaEventCreate(&stop));
    MLPC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~DeviceScratch() {
    for (void* p : ptrs) cudaFree(p);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    MLPC_CUDA(cudaMalloc(&p, bytes));
    ptrs.push_back(p);
    // A non-zero pattern (0x3C3C.. is ~0.0115 in bf16, f16 and f32 alike): GEMMs on zeros draw
    // less power and can run faster than on real data.
    MLPC_CUDA(cudaMemset(p, 0x3C, bytes));
    return p;
  }
  // Best per-call milliseconds of `reps` calls over `kTrials` trials.
  template <class F>
  double best_ms(F&& call, int reps) {
    double best = 1e30;
    for (int t = 0; t < kTrials; ++t) {
      MLPC_CUDA(cudaEventRecord(start, stream));
      for (int r = 0; r < reps; ++r) call();
      MLPC_CUDA(cudaEventRecord(stop, stream));
      MLPC_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      MLPC_CUDA(cudaEventElapsedTime(&ms, start, stop));
      best = std::min(best, static_cast<double>(ms) / reps);
    }
    return best;
  }
};

double measure_copy_gbps() {
  DeviceScratch s;
  void* src = s.alloc(kCopyBytes);
  void* dst = s.alloc(kCopyBytes);
  auto copy = [&] {
    MLPC_CUDA(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, s.stream));
  };
  copy();  // warm
  double ms = s.best_ms(copy, kRepsPerTrial);
  return 2.0 * kCopyBytes / (ms * 1e6);
}

// `tf32`: an f32 GEMM on TF32 tensor cores, as one of a 3xTF32 GEMM's (a 3xTF32 step of
// product length k/3 is one TF32 GEMM of length k over the parts: codegen/tf32x3.h).
double measure_gemm_tflops(ir::DType dtype, bool tf32 = false) {
  // Large enough to reach the tensor-core peak; f32 on CUDA cores at a size that still takes
  // milliseconds rather than a second; TF32 square over the parts (6144 = 3 x 2048).
  const int64_t n = tf32 ? 6144 : dtype == ir::DType::F32 ? 4096 : 8192;
  codegen::GemmStep step;
  step.name = "calibration_gemm";
  step.n = n;
  step.k = tf32 ? n / 3 : n;
  step.tf32x3 = tf32;
  step.dtype = dtype;
  DeviceScratch s;
  const size_t bytes = static_cast<size_t>(n * n) * ir::dtype_size(dtype);
  GemmOperands ops{s.alloc(bytes), s.alloc(bytes), s.alloc(bytes), nullptr, nullptr};
  GemmLt gemm;
  gemm.prepare(step, n);
  double best_ms = 1e30;
  for (const cublasLtMatmulHeuristicResult_t& c : gemm.candidates(step, n, kGemmCandidates)) {
    if (!gemm.algo_usable(step, n, c.algo)) continue;
    if (gemm.try_run(step, n, c.algo, ops, s.stream) != CUBLAS_STATUS_SUCCESS) continue;
    best_ms = std::min(best_ms, s.best_ms([&] { gemm.try_run(step, n, c.algo, ops, s.stream); }, 3));
  }
  if (best_ms >= 1e30)
    throw Error(fmt::format("calibration: cuBLASLt ran no {} GEMM of {}^3",
                            tf32 ? kTf32Peak : ir::dtype_name(dtype), n));
  return 2.0 * n * n * n / (best_ms * 1e9);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool positive(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

}  // namespace

nlohmann::json peaks_to_json(const DevicePeaks& p) {
  return {{"format", kFormat}, {"device", p.device}, {"copy_gbps", p.copy_gbps},
          {"gemm_tflops", p.gemm_tflops}};
}

DevicePeaks peaks_from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& what) { return Error("device peaks: " + what); };
  if (!j.is_object()) throw bad("not a JSON object");
  if (!j.contains("format") || j["format"] != kFormat)
    throw bad(fmt::format("\"format\" is not \"{}\"", kFormat));
  if (!j.contains("device") || !j["device"].is_string()) throw bad("\"device\" is not a string");
  if (!j.contains("copy_gbps") || !positive(j["copy_gbps"]))
    throw bad("\"copy_gbps\" is not a positive number");
  if (!j.contains("gemm_tflops") || !j["gemm_tflops"].is_object())
    throw bad("\"gemm_tflops\" is not an object");
  DevicePeaks p;
  p.device = j["device"].get<std::string>();
  p.copy_gbps = j["copy_gbps"].get<double>();
  for (const auto& [dtype, v] : j["gemm_tflops"].items()) {
    if (!ir::parse_dtype(dtype) && dtype != kTf32Peak) throw bad(fmt::format("\"gemm_tflops\": unknown dtype '{}'", dtype));
    if (!positive(v)) throw bad(fmt::format("\"gemm_tflops\".{} is not a positive number", dtype));
    p.gemm_tflops[dtype] = v.get<double>();
  }
  return p;
}

std::string peaks_file_name(const std::string& device) {
  std::string name = "peaks-";
  for (char c : device)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return name + ".json";
}

DevicePeaks device_peaks(ir::DType dtype) {
  const std::string device = device_info().name;
  const std::string dt(ir::dtype_name(dtype));
  std::filesystem::path file;
  try {
    file = std::filesystem::path(cache_dir()) / peaks_file_name(device);
  } catch (const std::exception&) {
    // No cache directory: measure every time.
  }
  const char* again = std::getenv("MLPC_RECALIBRATE");
  const bool recalibrate = again && std::strcmp(again, "1") == 0;
  DevicePeaks p;
  bool loaded = false;
  if (!file.empty() && !recalibrate && std::filesystem::is_regular_file(file)) {
    try {
      p = peaks_from_json(nlohmann::json::parse(read_text(file)));
      loaded = p.device == device;
    } catch (const std::exception&) {
      loaded = false;  // unreadable: measured again and replaced below
    }
  }
  if (!loaded) p = DevicePeaks{.device = device};
  const bool f32 = dtype == ir::DType::F32;
  p.from_cache = loaded && p.gemm_tflops.count(dt) && (!f32 || p.gemm_tflops.count(kTf32Peak));
  if (p.from_cache) {
    p.cache_file = file.string();
    return p;
  }
  if (!loaded) p.copy_gbps = measure_copy_gbps();
  if (!p.gemm_tflops.count(dt)) p.gemm_tflops[dt] = measure_gemm_tflops(dtype);
  if (f32 && !p.gemm_tflops.count(kTf32Peak))
    p.gemm_tflops[kTf32Peak] = measure_gemm_tflops(dtype, /*tf32=*/true);
  if (!file.empty() &&
      write_file_atomically(file.string(), {peaks_to_json(p).dump(2), "\n"}).empty())
    p.cache_file = file.string();
  return p;
}

}  // namespace mlpc::runtime
