// PTX of a generated kernel, for `mlpc compile --dump-dir DIR --emit-ptx`: the same NVRTC options
// as compile_to_cubin, but for the virtual arch (sm_90 -> compute_90), whose output is PTX.
#pragma once

#include <string>

namespace mlpc::runtime {

// "sm_90" -> "compute_90", "sm_90a" -> "compute_90a". Throws mlpc::Error for anything else.
std::string virtual_arch(const std::string& arch);

// Throws mlpc::Error "kernel NAME failed to compile to PTX for compute_XX:" + the NVRTC log.
std::string compile_to_ptx(const std::string& source, const std::string& kernel_name,
                           const std::string& arch);

}  // namespace mlpc::runtime
