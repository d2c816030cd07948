#include "mlpc/device_checks.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "ir/error.h"
#include "mlpc/mlpc.h"
#include "runtime/device/device.h"

namespace mlpc::api {

const std::optional<std::string>& no_gpu_reason() {
  static const std::optional<std::string> reason = runtime::gpu_unavailable_reason();
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
