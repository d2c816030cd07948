// The device's measured peaks, which `mlpc bench --explain` holds each kernel against: copy
// bandwidth (device-to-device cudaMemcpyAsync of a large buffer, bytes read + written) and the
// throughput of a large GEMM per dtype through cuBLASLt (best of its top heuristic candidates),
// and for f32 also of TF32 tensor cores (kTf32Peak: what a 3xTF32 GEMM is held against).
// Measured once per device and dtype, then cached in <cache_dir()>/peaks-<DEVICE>.json
// (host/cache_dir.h), written atomically; MLPC_RECALIBRATE=1 measures again.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/dtype.h"

namespace mlpc::runtime {

struct DevicePeaks {
  std::string device;
  double copy_gbps = 0;                       // GB/s, bytes read + written
  std::map<std::string, double> gemm_tflops;  // by dtype name: "bf16", "f16", "f32"; kTf32Peak
  std::string cache_file;                     // where they were cached; "" when not
  bool from_cache = false;                    // nothing was measured this time
};

// The gemm_tflops key of an f32 GEMM on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
inline constexpr const char* kTf32Peak = "tf32";

// {"format": "mlpc-peaks-v1", "device", "copy_gbps", "gemm_tflops": {"bf16": ...}}
nlohmann::json peaks_to_json(const DevicePeaks& p);
// Throws mlpc::Error naming the field when the JSON is not such an object with positive numbers.
DevicePeaks peaks_from_json(const nlohmann::json& j);
// "peaks-NVIDIA_X_1.json" for "NVIDIA X/1": the device name with anything but [A-Za-z0-9._-]
// replaced by '_'.
std::string peaks_file_name(const std::string& device);

// The current device's peaks with the GEMM peak of `dtype` (and kTf32Peak for f32), measured now
// or read from the cache. Needs a GPU.
DevicePeaks device_peaks(ir::DType dtype);

}  // namespace mlpc::runtime
