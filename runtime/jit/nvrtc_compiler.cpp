#include "runtime/jit/nvrtc_compiler.h"

#include <nvrtc.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "runtime/device/cuda_check.h"

#ifndef MLPC_CUDA_INCLUDE_DIR
#define MLPC_CUDA_INCLUDE_DIR ""
#endif

namespace mlpc::runtime {
namespace {

std::atomic<int> builds{0};  // nvrtcCompileProgram calls of compile_to_cubin, this process

bool has_bf16_header(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "cuda_bf16.h", ec);
}

bool valid_arch(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
  for (size_t i = 3; i < arch.size(); ++i) {
    char c = arch[i];
    bool last = i + 1 == arch.size();
    if (!(c >= '0' && c <= '9') && !(last && (c == 'a' || c == 'f'))) return false;
  }
  return true;
}

// Destroys the program on every path out of compile_to_cubin.
struct ProgramGuard {
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::pair<int, int> nvrtc_major_minor() {
  int major = 0, minor = 0;
  MLPC_NVRTC(nvrtcVersion(&major, &minor));
  return {major, minor};
}

}  // namespace

std::vector<std::string> extra_nvrtc_options() {
  std::vector<std::string> extra;
  const char* env = std::getenv("MLPC_NVRTC_OPTIONS");
  if (!env) return extra;
  std::istringstream words(env);
  for (std::string w; words >> w;) extra.push_back(w);
  return extra;
}

std::string cuda_include_dir() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root && *root) {
      std::string dir = std::string(root) + "/include";
      if (has_bf16_header(dir)) return dir;
    }
  }
  // CMake may hand over a ;-separated list; take the first entry that has the header.
  std::string built_in = MLPC_CUDA_INCLUDE_DIR;
  size_t start = 0;
  while (start <= built_in.size()) {
    size_t end = built_in.find(';', start);
    if (end == std::string::npos) end = built_in.size();
    std::string dir = built_in.substr(start, end - start);
    if (has_bf16_header(dir)) return dir;
    start = end + 1;
  }
  if (has_bf16_header("/usr/local/cuda/include")) return "/usr/local/cuda/include";
  throw Error("cannot find the CUDA include directory (cuda_bf16.h); set CUDA_HOME");
}

std::string arch_specific(const std::string& arch) {
  if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) return arch;
  return arch + "a";
}

bool nvrtc_has_own_cache() {
  static const bool has = [] {
    const auto [major, minor] = nvrtc_major_minor();
    return major > 12 || (major == 12 && minor >= 9);
  }();
  return has;
}

std::vector<std::string> nvrtc_options(const std::string& arch) {
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "-std=c++17",
                                      "-I" + cuda_include_dir()};
  // NVRTC 12.9+ keeps its own cache of compiled programs in the driver's compute cache
  // (~/.nv/ComputeCache). mlpc has its own CUBIN cache, so that one only costs: on every compile
  // it starts CUDA inside NVRTC, hashes the program and, on a miss, compresses and writes the
  // result, which makes every compile slower (docs/benchmarks.md, "Compile times"). It also made
  // "cold" compiles warm behind mlpc's back on any machine that had built the kernel before.
  if (nvrtc_has_own_cache()) options.push_back("--no-cache");
  for (std::string& extra : extra_nvrtc_options()) options.push_back(std::move(extra));
  return options;
}

std::vector<char> compile_to_cubin(const std::string& source, const std::string& kernel_name,
                                   const std::string& arch) {
  if (!valid_arch(arch))
    throw Error(fmt::format("kernel {}: bad GPU arch '{}' (expected e.g. sm_90)", kernel_name, arch));
  std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());

  ProgramGuard guard;
  std::string file = kernel_name + ".cu";
  MLPC_NVRTC(nvrtcCreateProgram(&guard.prog, source.c_str(), file.c_str(), 0, nullptr, nullptr));
  builds.fetch_add(1, std::memory_order_relaxed);
  nvrtcResult status = nvrtcCompileProgram(guard.prog, static_cast<int>(opts.size()), opts.data());
  if (status != NVRTC_SUCCESS) {
    std::string log = program_log(guard.prog);
    if (log.empty()) log = nvrtcGetErrorString(status);
    throw Error(fmt::format("kernel {} failed to compile for {}:\n{}", kernel_name, arch, log));
  }
  size_t size = 0;
  MLPC_NVRTC(nvrtcGetCUBINSize(guard.prog, &size));
  if (size == 0)
    throw Error(fmt::format("kernel {} failed to compile for {}: NVRTC produced no CUBIN",
                            kernel_name, arch));
  std::vector<char> cubin(size);
  MLPC_NVRTC(nvrtcGetCUBIN(guard.prog, cubin.data()));
  return cubin;
}

int nvrtc_builds_in_process() { return builds.load(std::memory_order_relaxed); }

std::string nvrtc_version() {
  const auto [major, minor] = nvrtc_major_minor();
  return fmt::format("{}.{}", major, minor);
}

}  // namespace mlpc::runtime
