// One check macro per status type (style.md #11): a failed CUDA runtime, cuBLASLt or NVRTC call
// throws mlpc::Error naming the call, the status and file:line, e.g.
//   CUDA call `cudaMalloc(&p, n)` failed: cudaErrorMemoryAllocation (out of memory) at runtime/exec/executor.cpp:123
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <string>
#include <string_view>

#include "ir/error.h"

namespace mlpc::runtime::detail {

// "runtime/exec/executor.cpp" from "/abs/path/runtime/exec/executor.cpp": the path from the
// source tree's root, which this header's own path gives. Outside the tree (a program built
// against the installed package): the last two path components.
inline std::string_view short_file(std::string_view file) {
  constexpr std::string_view self = __FILE__, here = "runtime/device/cuda_check.h";
  if (self.ends_with(here)) {
    std::string_view root = self.substr(0, self.size() - here.size());
    if (file.starts_with(root)) return file.substr(root.size());
  }
  size_t last = file.rfind('/');
  if (last == std::string_view::npos || last == 0) return file;
  size_t prev = file.rfind('/', last - 1);
  return prev == std::string_view::npos ? file : file.substr(prev + 1);
}

inline std::string status_text(cudaError_t s) {
  return std::string(cudaGetErrorName(s)) + " (" + cudaGetErrorString(s) + ")";
}
inline std::string status_text(cublasStatus_t s) {
  return std::string(cublasLtGetStatusName(s)) + " (" + cublasLtGetStatusString(s) + ")";
}
inline std::string status_text(nvrtcResult s) { return nvrtcGetErrorString(s); }

template <class Status>
[[noreturn]] void throw_call_error(const char* api, const char* call, Status s, const char* file,
                                   int line) {
  throw Error(std::string(api) + " call `" + call + "` failed: " + status_text(s) + " at " +
              std::string(short_file(file)) + ":" + std::to_string(line));
}

}  // namespace mlpc::runtime::detail

// A failed call also leaves its status as the thread's "last error", which the next
// cudaGetLastError() (the check after every kernel launch) would report as its own: a caught
// out-of-memory from cudaMalloc failed the next, unrelated launch. Reading it clears it (a sticky
// error, one that corrupts the context, stays and is reported by every later call anyway).
#define MLPC_CUDA(call)                                                                    \
  do {                                                                                     \
    cudaError_t mlpc_status_ = (call);                                                     \
    if (mlpc_status_ != cudaSuccess) {                                                     \
      (void)cudaGetLastError();                                                            \
      ::mlpc::runtime::detail::throw_call_error("CUDA", #call, mlpc_status_, __FILE__,     \
                                                __LINE__);                                 \
    }                                                                                      \
  } while (0)

#define MLPC_CUBLAS(call)                                                                  \
  do {                                                                                     \
    cublasStatus_t mlpc_status_ = (call);                                                  \
    if (mlpc_status_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::mlpc::runtime::detail::throw_call_error("cuBLAS", #call, mlpc_status_, __FILE__,   \
                                                __LINE__);                                 \
  } while (0)

#define MLPC_NVRTC(call)                                                                   \
  do {                                                                                     \
    nvrtcResult mlpc_status_ = (call);                                                     \
    if (mlpc_status_ != NVRTC_SUCCESS)                                                     \
      ::mlpc::runtime::detail::throw_call_error("NVRTC", #call, mlpc_status_, __FILE__,    \
                                                __LINE__);                                 \
  } while (0)
