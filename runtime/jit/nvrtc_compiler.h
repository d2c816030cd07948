// NVRTC: CUDA C++ source -> CUBIN for one arch. Needs no GPU and no driver, so CI compiles every
// generated kernel. No --use_fast_math: erff/tanhf keep their IEEE accuracy.
#pragma once

#include <string>
#include <vector>

namespace mlpc::runtime {

// Compiles one translation unit with --gpu-architecture=ARCH -std=c++17 -I<CUDA include dir>.
// `kernel_name` names the program in messages. A compile error throws mlpc::Error whose message
// starts "kernel NAME failed to compile for sm_XX:" followed by the NVRTC log.
std::vector<char> compile_to_cubin(const std::string& source, const std::string& kernel_name,
                                   const std::string& arch);

// The exact NVRTC option list compile_to_cubin passes for ARCH, in order:
// {"--gpu-architecture=ARCH", "-std=c++17", "-I<cuda_include_dir()>"}, then "--no-cache" where
// nvrtc_has_own_cache(), then extra_nvrtc_options(). The kernel cache hashes it, so anything
// added here changes every cache key. Throws like cuda_include_dir().
std::vector<std::string> nvrtc_options(const std::string& arch);

// The whitespace-separated words of $MLPC_NVRTC_OPTIONS (none when unset): options a user adds
// to every kernel's build, e.g. "-lineinfo" for Nsight Compute's source view.
// NVRTC rejects a bad one in the failing kernel's message (compile_to_cubin).
std::vector<std::string> extra_nvrtc_options();

// Whether this NVRTC (12.9+) keeps its own on-disk cache of compiled programs, which mlpc turns
// off with --no-cache (its own CUBIN cache serves repeats; see nvrtc_options).
bool nvrtc_has_own_cache();

// The directory holding cuda_bf16.h: $CUDA_HOME/include, $CUDA_PATH/include, the build-time
// toolkit, /usr/local/cuda/include, first that has it. Throws mlpc::Error when none does.
std::string cuda_include_dir();

// The arch-specific variant of ARCH, for kernels that use its own instructions (WGMMA,
// setmaxnreg): "sm_90" -> "sm_90a"; an arch already ending in 'a' or 'f' is returned as is.
std::string arch_specific(const std::string& arch);

// NVRTC programs compile_to_cubin has compiled in this process (failed ones too): tests of "no
// recompile" compare it before and after.
int nvrtc_builds_in_process();

// "13.0".
std::string nvrtc_version();

}  // namespace mlpc::runtime
