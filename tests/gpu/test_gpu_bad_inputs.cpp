// The GPU rows of the bad-input catalogue (docs/cli.md, "Exit codes and bad input"; the
// others are in tests/test_bad_inputs.cpp): out of device memory, and a GEMM cuBLASLt has no
// algorithm for.
// Both are mlpc::Error (the CLI prints them in one line with exit code 1) and leave the process
// able to carry on.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <string>

#include "runtime/exec/executor.h"
#include "runtime/gemm/gemm_lt.h"

using namespace mlpc;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// y[M, 16] = x[M, K] . w[16, K]^T, fp32: one cuBLASLt GEMM and no kernels.
codegen::Plan wide_gemm_plan(int64_t k) {
  using codegen::BufferRole;
  auto buf = [](std::string name, std::vector<int64_t> dims, BufferRole role) {
    codegen::Buffer b;
    b.name = std::move(name);
    b.type = ir::TensorType{ir::DType::F32, ir::Shape{std::move(dims)}};
    b.role = role;
    return b;
  };
  codegen::Plan plan;
  plan.graph_name = "wide";
  plan.buffers = {buf("x", {ir::kBatchDim, k}, BufferRole::Input),
                  buf("w", {16, k}, BufferRole::Param),
                  buf("y", {ir::kBatchDim, 16}, BufferRole::Output)};
  codegen::GemmStep gemm;
  gemm.name = "gemm_y";
  gemm.x = 0, gemm.w = 1, gemm.y = 2;
  gemm.n = 16, gemm.k = k;
  gemm.ir_nodes = {"y"};
  plan.steps = {gemm};
  plan.inputs = {0};
  plan.outputs = {2};
  return plan;
}

}  // namespace

TEST_CASE("bad input on the GPU: out of device memory", "[gpu][bad_input]") {
  // x alone is 2^24 rows x 2^16 floats = 4 TiB: far past any GPU's memory.
  runtime::Executor ex(wide_gemm_plan(int64_t{1} << 16), {}, {.tune_gemms = false});
  CHECK_THROWS_WITH(ex.bind_batch(int64_t{1} << 24),
                    StartsWith("CUDA call `cudaMalloc(&b->arena, total)` failed: "
                               "cudaErrorMemoryAllocation (out of memory) at "
                               "runtime/exec/executor.cpp:"));
  // The failed allocation left nothing behind: no stale "last error" for the next launch's
  // check to report as its own (it failed the next test's first kernel), and a batch that fits
  // still binds.
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_NOTHROW(ex.bind_batch(8));
  CHECK(ex.arena_bytes() > 0);
}

TEST_CASE("bad input on the GPU: a GEMM cuBLASLt has no algorithm for", "[gpu][bad_input]") {
  // n = k = 2^40 (the IR's largest dim): no cuBLASLt kernel takes a matrix that size. The
  // heuristic query allocates nothing, so asking is safe.
  runtime::GemmLt lt;
  codegen::GemmStep step;
  step.name = "gemm_huge";
  step.n = step.k = ir::kMaxDim;
  CHECK_THROWS_WITH(lt.prepare(step, 1),
                    StartsWith("cuBLASLt has no algorithm for GEMM gemm_huge (f32, rows=1, "
                               "n=1099511627776, k=1099511627776, epilogue "));
  // An ordinary GEMM on the same handle still prepares.
  step.n = step.k = 64;
  CHECK_NOTHROW(lt.prepare(step, 8));
}
