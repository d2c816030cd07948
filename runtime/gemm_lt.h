// cuBLASLt GEMMs for the Plan's GemmSteps: row-major y[rows, n] = x[rows, k] . w[n, k]^T with
// fp32 accumulation (CUBLAS_COMPUTE_32F, never TF32), alpha 1, beta 0. One handle and one 32 MiB
// workspace; descriptors and the heuristic's algorithm are cached per GEMM shape.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "codegen/plan.h"

namespace mlpc::runtime {

class GemmLt {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  GemmLt();  // needs a GPU: creates the handle and allocates the workspace
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // Builds (once per shape) the matmul desc, the layouts and the heuristic's first algorithm.
  // Throws mlpc::Error naming the step and shape when cuBLASLt has no algorithm for it.
  void prepare(const codegen::GemmStep& step, int64_t rows);
  // Enqueues the GEMM on `stream` (preparing it first if needed). rows == 0 does nothing.
  void run(const codegen::GemmStep& step, int64_t rows, const void* x, const void* w, void* y,
           cudaStream_t stream);

 private:
  struct Prepared {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // a: w, b: x, c (= d): y
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int>;  // n, k, rows, dtype

  Prepared& prepared(const codegen::GemmStep& step, int64_t rows);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Prepared> cache_;
};

}  // namespace mlpc::runtime
