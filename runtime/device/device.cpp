#include "runtime/device/device.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <fmt/format.h>

#include "runtime/device/cuda_check.h"

namespace mlpc::runtime {

namespace {

// Whether the driver library is installed at all: without it the runtime reports 35 ("driver
// version is insufficient"), which reads as an old driver, not as a machine without one.
bool driver_library_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

std::optional<std::string> gpu_unavailable_reason() {
  int count = 0;
  cudaError_t s = cudaGetDeviceCount(&count);
  if (s != cudaSuccess) {
    cudaGetLastError();  // clear it, so later calls do not see a stale error
    const std::string call = fmt::format("cudaGetDeviceCount returned {} ({})",
                                         static_cast<int>(s), cudaGetErrorString(s));
    if (s == cudaErrorInsufficientDriver && !driver_library_present())
      return fmt::format("no NVIDIA driver or GPU found: {}; libcuda.so.1 is not installed", call);
    if (s == cudaErrorInsufficientDriver)
      return fmt::format("the NVIDIA driver is older than this CUDA runtime needs: {}", call);
    if (s == cudaErrorNoDevice) return fmt::format("no NVIDIA driver or GPU found: {}", call);
    return fmt::format("no usable CUDA GPU: {}", call);
  }
  if (count < 1) return std::string("no NVIDIA driver or GPU found: cudaGetDeviceCount found 0 devices");
  return std::nullopt;
}

DeviceInfo device_info() {
  if (auto why = gpu_unavailable_reason()) throw Error(*why);
  int dev = 0;
  MLPC_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  MLPC_CUDA(cudaGetDeviceProperties(&prop, dev));
  DeviceInfo info;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory = prop.totalGlobalMem;
  return info;
}

std::string device_arch() {
  if (gpu_unavailable_reason()) return "sm_90";
  int dev = 0, major = 0, minor = 0;
  MLPC_CUDA(cudaGetDevice(&dev));
  MLPC_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  MLPC_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return fmt::format("sm_{}{}", major, minor);
}

}  // namespace mlpc::runtime
