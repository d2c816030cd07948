#include "mlpc/device_checks.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "ir/error.h"
#include "mlpc/mlpc.h"
#include "runtime/device.h"

namespace mlpc::api {

const std::optional<std::string>& no_gpu_reason() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    std::optional<std::string> why = runtime::gpu_unavailable_reason();
    if (!why) return std::nullopt;
    // "no usable CUDA GPU: cudaGetDeviceCount returned 35 (...)": the runtime's part, kept.
    std::string detail = *why;
    if (const size_t colon = detail.find(": "); colon != std::string::npos)
      detail = detail.substr(colon + 2);
    return fmt::format("no NVIDIA driver or GPU found ({})", detail);
  }();
  return reason;
}

void check_device_pointer(const void* p, std::string_view what) {
  cudaPointerAttributes attr{};
  const cudaError_t s = cudaPointerGetAttributes(&attr, p);
  if (s != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(fmt::format("{}: pointer {} is not device memory ({})", what, p,
                            cudaGetErrorString(s)));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    throw Error(fmt::format("{}: pointer {} is not device memory ({} memory)", what, p,
                            attr.type == cudaMemoryTypeHost ? "pinned host" : "host"));
}

}  // namespace mlpc::api

namespace mlpc {

bool gpu_available(std::string* why) {
  const std::optional<std::string>& reason = api::no_gpu_reason();
  if (reason && why) *why = *reason;
  return !reason;
}

}  // namespace mlpc
