// What bench/'s kernel probes share: shapes from the command line ("ROWS,N,K" each, defaults
// when none), a kernel built by NVRTC and loaded, its first output, and the median event-timed
// cost of a launch. Header-only: each probe is one file.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "runtime/device/cuda_check.h"
#include "runtime/measure/gemm_bench.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "host/wall_clock.h"

namespace mlpc::bench {

struct Shape {
  int rows, n, k;
};

// `name` in `source`, built by NVRTC for `arch` (how long that took) and loaded; unloaded when
// this goes.
struct BuiltKernel {
  cudaLibrary_t lib{};
  cudaKernel_t kern{};
  double build_ms = 0;
  BuiltKernel(const std::string& source, const std::string& name, const std::string& arch) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<char> cubin = runtime::compile_to_cubin(source, name, arch);
    build_ms = runtime::ms_since(start);
    MLPC_CUDA(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    MLPC_CUDA(cudaLibraryGetKernel(&kern, lib, name.c_str()));
  }
  ~BuiltKernel() { cudaLibraryUnload(lib); }
  BuiltKernel(const BuiltKernel&) = delete;
  BuiltKernel& operator=(const BuiltKernel&) = delete;
  const void* func() const { return reinterpret_cast<const void*>(kern); }
};

// Median µs per call of `launch`, from 7 event-timed batches of 20 after 5 warm-up calls.
inline double median_launch_us(const std::function<void()>& launch) {
  cudaEvent_t e0, e1;
  MLPC_CUDA(cudaEventCreate(&e0));
  MLPC_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> times;
  for (int rep = 0; rep < 7; ++rep) {
    MLPC_CUDA(cudaEventRecord(e0));
    for (int i = 0; i < 20; ++i) launch();
    MLPC_CUDA(cudaEventRecord(e1));
    MLPC_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    MLPC_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms * 1000 / 20);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The output of one `launch` into `out` (count elements of T), poisoned with 0xFF bytes before
// it, so that what the kernel does not write shows as NaN.
template <class T>
std::vector<T> output_of_one_launch(const std::function<void()>& launch, void* out, size_t count) {
  MLPC_CUDA(cudaMemset(out, 0xFF, count * sizeof(T)));
  launch();
  MLPC_CUDA(cudaDeviceSynchronize());
  std::vector<T> y(count);
  MLPC_CUDA(cudaMemcpy(y.data(), out, count * sizeof(T), cudaMemcpyDeviceToHost));
  return y;
}

// A probe's main: runs probe(shape, bench, SM count) for each shape given as "ROWS,N,K", or for
// `defaults` when none is. Exit status 2 for a bad shape, 1 for a failure.
inline int probe_main(int argc, char** argv, const char* tool, std::vector<Shape> defaults,
                      const std::function<void(const Shape&, runtime::GemmBench&, int)>& probe) {
  try {
    std::vector<Shape> shapes;
    for (int i = 1; i < argc; ++i) {
      Shape s{};
      if (std::sscanf(argv[i], "%d,%d,%d", &s.rows, &s.n, &s.k) != 3) {
        fmt::print(stderr, "{}: bad shape '{}': expected ROWS,N,K\n", tool, argv[i]);
        return 2;
      }
      shapes.push_back(s);
    }
    if (shapes.empty()) shapes = std::move(defaults);
    int sms = 0;
    MLPC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    runtime::GemmBench bench;
    for (const Shape& s : shapes) probe(s, bench, sms);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", tool, e.what());
    return 1;
  }
  return 0;
}

}  // namespace mlpc::bench
