// What the API asks of the CUDA runtime before it runs: whether there is a GPU (with the reason
// a driver-less machine gets), and whether a pointer is device memory. Safe without a driver.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mlpc::api {

// nullopt with a usable GPU, else "no NVIDIA driver or GPU found: ..."; asked once a process.
const std::optional<std::string>& no_gpu_reason();

// Throws mlpc::Error "WHAT: pointer P is not device memory (...)" unless `p` is device or
// managed memory the CUDA runtime knows.
void check_device_pointer(const void* p, std::string_view what);

}  // namespace mlpc::api
