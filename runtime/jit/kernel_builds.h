// The kernels of a list of plan steps, built at once: NVRTC runs on the CPU and each program is
// single-threaded (ptxas most of it, the gated GEMM kernel the longest), so one thread per
// kernel makes a compile wait for its slowest kernel
// instead of their sum. Every kernel goes through the on-disk CUBIN cache (CachedCompiler);
// gated GEMM kernels are built for the arch-specific target (sm_90a).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/plan.h"

namespace mlpc::runtime {

struct KernelBuilds {
  std::map<std::string, std::vector<char>> cubins;  // KernelStep::cubin_symbol() -> CUBIN
  int hits = 0, misses = 0;  // from the cache / built by NVRTC (every kernel, with it off)
  double nvrtc_ms = 0.0;     // NVRTC's time summed over the kernels it built
  bool cache_enabled = false;
};

// Every KernelStep of `steps`, the steps of one plan (a kernel met twice is built once; two
// different kernels of one name throw). A kernel that fails to build throws the first failure
// in step order (its NVRTC log), after the other builds have ended.
KernelBuilds build_kernels(const std::vector<codegen::Step>& steps, const std::string& arch,
                           bool use_cache);

// The on-disk cache key of kernel `k` built for `arch` as build_kernels builds it.
std::string kernel_build_key(const codegen::KernelStep& k, const std::string& arch);

}  // namespace mlpc::runtime
