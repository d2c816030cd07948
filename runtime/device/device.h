// Which GPU, if any, this process can use. Safe to call on a machine without a driver: that is
// how binaries say "this needs a GPU" instead of crashing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace mlpc::runtime {

// nullopt when at least one CUDA device is usable; otherwise one line saying why not, e.g.
// "no NVIDIA driver or GPU found: cudaGetDeviceCount returned 35 (CUDA driver version is
// insufficient ...); libcuda.so.1 is not installed".
std::optional<std::string> gpu_unavailable_reason();

struct DeviceInfo {
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  size_t memory = 0;  // bytes of global memory
};

// The current device; throws mlpc::Error (the reason above) when there is none.
DeviceInfo device_info();

// "sm_90" style arch of the current device; "sm_90" (the GPU machine's) when there is no GPU.
std::string device_arch();

}  // namespace mlpc::runtime
