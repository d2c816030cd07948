// cuBLASLt GEMMs for the Plan's GemmSteps: row-major y[rows, n] =
// act(x[rows, k] . w[n, k]^T + bias) [+ residual] with fp32 accumulation (CUBLAS_COMPUTE_32F:
// IEEE fp32 for f32, never plain TF32; a 3xTF32 step, whose operands are TF32 parts along 3k,
// CUBLAS_COMPUTE_32F_FAST_TF32), alpha 1, beta 0 (1 with a residual, or when a K-chunk adds to
// y: C = D = y). One handle and one 32 MiB workspace; descriptors and the algorithm are cached
// per GEMM key (rows, n, k, dtype, epilogue, C or not, 3xTF32 or not, stored row length of x
// and w).
//
// Column-major view: cuBLASLt computes D[n, rows] = op(A)[n, k] . B[k, rows] with A = w read
// transposed, B = x and D = y, so cuBLASLt's m is our n. Its bias epilogues add a vector of
// length m ("bias vector length must match matrix D rows", cublasLt.h) broadcast over D's
// columns: exactly our row vector b[n] added to every row of y. The bias is in the output dtype
// (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default for non-IMMA, non-fp8 kernels is the D type).
// The epilogue applies to alpha.AB + beta.C + bias, so with a residual r (C = r, beta = 1):
//   y = act(x . w^T + r + b),
// which is the IR's act(x . W^T + b) + r only without an activation: passes/gemm_epilogue.h
// hands cuBLASLt a residual only then (and says which CUBLASLT_EPILOGUE_* each step uses).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/plan.h"

namespace mlpc::runtime {

// The device pointers of one GEMM launch; bias and residual are nullptr when the step has none.
struct GemmOperands {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
};

class GemmLt {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  GemmLt();  // needs a GPU: creates the handle and allocates the workspace
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // Builds (once per key) the matmul desc with its epilogue, the layouts and the heuristic's
  // first algorithm. Throws mlpc::Error naming the step, shape and epilogue when cuBLASLt has no
  // algorithm for it.
  void prepare(const codegen::GemmStep& step, int64_t rows);
  // Enqueues the GEMM on `stream` with the key's current algorithm (preparing it first if
  // needed). rows == 0 does nothing. bias / residual: nullptr when the step has none.
  void run(const codegen::GemmStep& step, int64_t rows, const void* x, const void* w, void* y,
           const void* bias, const void* residual, cudaStream_t stream);
  void run(const codegen::GemmStep& step, int64_t rows, const GemmOperands& ops,
           cudaStream_t stream) {
    run(step, rows, ops.x, ops.w, ops.y, ops.bias, ops.residual, stream);
  }

  // ---- for the tuner (runtime/gemm/gemm_tuner.h); rows > 0 ----
  // Up to `max_count` heuristic results for the key, best guess first; only those with
  // state == CUBLAS_STATUS_SUCCESS. Empty when cuBLASLt offers none.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(const codegen::GemmStep& step,
                                                          int64_t rows, int max_count);
  // cublasLtMatmulAlgoCheck for the key's descriptors, and the workspace fits.
  bool algo_usable(const codegen::GemmStep& step, int64_t rows, const cublasLtMatmulAlgo_t& algo);
  // One launch with `algo` instead of the key's current one; returns cuBLASLt's status.
  cublasStatus_t try_run(const codegen::GemmStep& step, int64_t rows,
                         const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops,
                         cudaStream_t stream);
  // Makes `algo` the key's algorithm for later run()s.
  void set_algo(const codegen::GemmStep& step, int64_t rows, const cublasLtMatmulAlgo_t& algo);

 private:
  struct Prepared {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // a: w, b: x, c (= d): y
    cublasLtMatmulAlgo_t algo{};
  };
  // n, k, rows, dtype, epilogue, C enters (residual or accumulate), 3xTF32, stored row of x, w,
  // x stored transposed, w stored transposed
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, bool, int64_t, bool, bool>;

  Prepared& prepared(const codegen::GemmStep& step, int64_t rows);
  // Sets the desc's bias pointer (a 256-byte aligned stand-in when `bias` is null: heuristics
  // and AlgoCheck read only its alignment).
  void set_bias(const codegen::GemmStep& step, Prepared& p, const void* bias);
  cublasStatus_t launch(const codegen::GemmStep& step, Prepared& p,
                        const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops,
                        cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Prepared> cache_;
};

}  // namespace mlpc::runtime
