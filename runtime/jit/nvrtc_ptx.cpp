#include "runtime/jit/nvrtc_ptx.h"

#include <nvrtc.h>

#include <fmt/format.h>

#include <vector>

#include "runtime/device/cuda_check.h"
#include "runtime/jit/nvrtc_compiler.h"

namespace mlpc::runtime {
namespace {

struct Program {
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

}  // namespace

std::string virtual_arch(const std::string& arch) {
  bool ok = arch.size() >= 5 && arch.compare(0, 3, "sm_") == 0;
  for (size_t i = 3; ok && i < arch.size(); ++i) {
    char c = arch[i];
    ok = (c >= '0' && c <= '9') || (i + 1 == arch.size() && (c == 'a' || c == 'f'));
  }
  if (!ok) throw Error(fmt::format("bad GPU arch '{}' (expected e.g. sm_90)", arch));
  return "compute_" + arch.substr(3);
}

std::string compile_to_ptx(const std::string& source, const std::string& kernel_name,
                           const std::string& arch) {
  const std::string target = virtual_arch(arch);
  std::vector<std::string> options = nvrtc_options(arch);
  options.front() = "--gpu-architecture=" + target;
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());

  Program p;
  const std::string file = kernel_name + ".cu";
  MLPC_NVRTC(nvrtcCreateProgram(&p.prog, source.c_str(), file.c_str(), 0, nullptr, nullptr));
  if (nvrtcResult status = nvrtcCompileProgram(p.prog, static_cast<int>(opts.size()), opts.data());
      status != NVRTC_SUCCESS) {
    size_t size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(p.prog, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      if (nvrtcGetProgramLog(p.prog, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    if (log.empty()) log = nvrtcGetErrorString(status);
    throw Error(fmt::format("kernel {} failed to compile to PTX for {}:\n{}", kernel_name, target,
                            log));
  }
  size_t size = 0;
  MLPC_NVRTC(nvrtcGetPTXSize(p.prog, &size));
  std::string ptx(size, '\0');
  MLPC_NVRTC(nvrtcGetPTX(p.prog, ptx.data()));
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace mlpc::runtime
