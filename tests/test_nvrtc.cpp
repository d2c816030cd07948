// NVRTC and the no-GPU paths of the runtime: all of this runs in CI, which has no GPU and no
// driver.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <optional>
#include <string>

#include "runtime/jit/cached_compiler.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "host/scoped_env.h"

using namespace mlpc::runtime;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

const char* kBf16Kernel = R"(
#include <cuda_bf16.h>
extern "C" __global__ void mlpc_test_gelu_bf16(const __nv_bfloat16* in0, __nv_bfloat16* out,
                                               long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float x = __bfloat162float(in0[i]);
    out[i] = __float2bfloat16_rn(0.5f * x * (1.0f + erff(x * 0.70710678f)));
  }
}
)";

bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

TEST_CASE("NVRTC compiles a bf16 kernel to an sm_90 CUBIN", "[nvrtc]") {
  std::vector<char> cubin = compile_to_cubin(kBf16Kernel, "mlpc_test_gelu_bf16", "sm_90");
  REQUIRE(cubin.size() > 4);
  CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
  CHECK_THAT(nvrtc_version(), StartsWith("1"));
  CHECK_THAT(cuda_include_dir(), !Contains(";"));
}

TEST_CASE("NVRTC's own program cache is off where it has one (12.9+): mlpc's CUBIN cache serves "
          "repeats", "[nvrtc]") {
  const std::vector<std::string> options = nvrtc_options("sm_90");
  REQUIRE(options.size() >= 3);
  CHECK(options[0] == "--gpu-architecture=sm_90");
  CHECK(options[1] == "-std=c++17");
  CHECK_THAT(options[2], StartsWith("-I"));
  const std::string version = nvrtc_version();
  const int major = std::stoi(version);
  const int minor = std::stoi(version.substr(version.find('.') + 1));
  const bool has_cache = major > 12 || (major == 12 && minor >= 9);
  CHECK(nvrtc_has_own_cache() == has_cache);
  CHECK((options.back() == "--no-cache") == has_cache);
  // and NVRTC takes the list: a kernel builds with it (the option would be rejected otherwise).
  CHECK(compile_to_cubin(kBf16Kernel, "mlpc_test_gelu_bf16", "sm_90a").size() > 4);
}

TEST_CASE("MLPC_NVRTC_OPTIONS adds options to every build and to the cache key, and a bad one fails "
          "the build with NVRTC's message", "[nvrtc]") {
  const std::vector<std::string> plain = nvrtc_options("sm_90");
  {
    mlpc::runtime::ScopedEnv env("MLPC_NVRTC_OPTIONS", "  --Ofast-compile=mid\t-lineinfo ");
    const std::vector<std::string> options = nvrtc_options("sm_90");
    REQUIRE(options.size() == plain.size() + 2);
    CHECK(std::equal(plain.begin(), plain.end(), options.begin()));
    CHECK(options[plain.size()] == "--Ofast-compile=mid");
    CHECK(options[plain.size() + 1] == "-lineinfo");
    CHECK(compile_to_cubin(kBf16Kernel, "mlpc_test_gelu_bf16", "sm_90").size() > 4);
    mlpc::runtime::CachedCompiler with("sm_90", /*use_cache=*/false);
    mlpc::runtime::CachedCompiler without_env_key = [] {
      mlpc::runtime::ScopedEnv none("MLPC_NVRTC_OPTIONS", std::nullopt);
      return mlpc::runtime::CachedCompiler("sm_90", false);
    }();
    CHECK(with.key(kBf16Kernel) != without_env_key.key(kBf16Kernel));
  }
  {
    mlpc::runtime::ScopedEnv env("MLPC_NVRTC_OPTIONS", "--no-such-option");
    CHECK_THROWS_WITH(compile_to_cubin(kBf16Kernel, "mlpc_test_gelu_bf16", "sm_90"),
                      StartsWith("kernel mlpc_test_gelu_bf16 failed to compile for sm_90:") &&
                          Contains("--no-such-option"));
  }
  CHECK(nvrtc_options("sm_90") == plain);
}

TEST_CASE("NVRTC compile errors name the kernel, the arch and the log", "[nvrtc]") {
  const std::string bad = R"(
extern "C" __global__ void mlpc_test_broken(float* out, long long n) {
  out[0] = undeclared_thing + ;
}
)";
  try {
    compile_to_cubin(bad, "mlpc_test_broken", "sm_90");
    FAIL("a kernel with a syntax error compiled");
  } catch (const mlpc::Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK_THAT(msg, StartsWith("kernel mlpc_test_broken failed to compile for sm_90:"));
    CHECK_THAT(msg, Contains("mlpc_test_broken.cu(3)"));  // the NVRTC log line
    CHECK_THAT(msg, Contains("error"));
  }
  CHECK_THROWS_WITH(compile_to_cubin("", "k", "90"), Contains("bad GPU arch"));
}

TEST_CASE("check macros name the call, the status and the place", "[nvrtc]") {
  CHECK_THROWS_WITH([] { MLPC_CUDA(cudaError_t(cudaErrorMemoryAllocation)); }(),
                    StartsWith("CUDA call `cudaError_t(cudaErrorMemoryAllocation)` failed: "
                               "cudaErrorMemoryAllocation (out of memory) at "
                               "tests/test_nvrtc.cpp:"));
  CHECK_THROWS_WITH([] { MLPC_CUBLAS(CUBLAS_STATUS_NOT_SUPPORTED); }(),
                    StartsWith("cuBLAS call `CUBLAS_STATUS_NOT_SUPPORTED` failed: "
                               "CUBLAS_STATUS_NOT_SUPPORTED ("));
  CHECK_THROWS_WITH([] { MLPC_NVRTC(NVRTC_ERROR_INVALID_INPUT); }(),
                    StartsWith("NVRTC call `NVRTC_ERROR_INVALID_INPUT` failed: "
                               "NVRTC_ERROR_INVALID_INPUT at tests/test_nvrtc.cpp:"));
  CHECK_NOTHROW([] { MLPC_CUDA(cudaSuccess); }());
  // A file in a subfolder is named from the tree's root, as its #include names it.
  const std::string_view self = __FILE__;
  const std::string root(self.substr(0, self.size() - sizeof("tests/test_nvrtc.cpp") + 1));
  CHECK(detail::short_file(root + "runtime/exec/executor.cpp") == "runtime/exec/executor.cpp");
}

TEST_CASE("without a driver the runtime says why there is no GPU", "[nvrtc]") {
  auto why = gpu_unavailable_reason();
  if (driver_present()) {
    WARN("libcuda.so.1 is present: " << (why ? *why : std::string("a GPU is usable")));
    return;
  }
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Contains("cudaGetDeviceCount returned 35"));
  CHECK_THAT(*why, Contains("insufficient"));
  CHECK(device_arch() == "sm_90");
  CHECK_THROWS_WITH(device_info(), Contains("no NVIDIA driver or GPU found: "));
  CHECK_THAT(*why, Contains("libcuda.so.1 is not installed"));
  // Asking again gives the same answer: no sticky error left behind.
  CHECK(gpu_unavailable_reason() == why);
}
