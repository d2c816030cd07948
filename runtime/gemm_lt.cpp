#include "runtime/gemm_lt.h"

#include <fmt/format.h>

#include "runtime/cuda_check.h"

namespace mlpc::runtime {
namespace {

cudaDataType_t cuda_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return CUDA_R_32F;
    case ir::DType::F16: return CUDA_R_16F;
    case ir::DType::BF16: return CUDA_R_16BF;
  }
  MLPC_ASSERT(false, "unknown dtype");
  return CUDA_R_32F;
}

std::string describe(const codegen::GemmStep& s, int64_t rows) {
  return fmt::format("GEMM {} ({}, rows={}, n={}, k={})", s.name, ir::dtype_name(s.dtype), rows,
                     s.n, s.k);
}

void destroy(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t c) {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

}  // namespace

GemmLt::GemmLt() {
  MLPC_CUBLAS(cublasLtCreate(&handle_));
  cudaError_t s = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (s != cudaSuccess) {
    cublasLtDestroy(handle_);
    MLPC_CUDA(s);
  }
}

GemmLt::~GemmLt() {
  for (auto& [key, p] : cache_) destroy(p.desc, p.a, p.b, p.c);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void GemmLt::prepare(const codegen::GemmStep& step, int64_t rows) {
  if (rows > 0) prepared(step, rows);
}

GemmLt::Prepared& GemmLt::prepared(const codegen::GemmStep& step, int64_t rows) {
  Key key{step.n, step.k, rows, static_cast<int>(step.dtype)};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  MLPC_ASSERT(step.n > 0 && step.k > 0 && rows > 0, "empty GEMM " + step.name);

  // Column-major view of the row-major product: D[n, rows] = op(A)[n, k] . B[k, rows], with
  // A = w read transposed (stored k x n, ld k), B = x (k x rows, ld k), D = y (n x rows, ld n).
  Prepared p;
  const cudaDataType_t type = cuda_type(step.dtype);
  const auto n = static_cast<uint64_t>(step.n), k = static_cast<uint64_t>(step.k);
  const auto m = static_cast<uint64_t>(rows);
  try {
    MLPC_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                               sizeof(trans_a)));
    MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                               sizeof(trans_b)));
    MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, type, k, n, static_cast<int64_t>(k)));
    MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, type, k, m, static_cast<int64_t>(k)));
    MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, type, n, m, static_cast<int64_t>(n)));

    cublasLtMatmulPreference_t pref = nullptr;
    MLPC_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kWorkspaceBytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result,
                                          &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      throw Error(fmt::format("cuBLASLt has no algorithm for {}: {}", describe(step, rows),
                              detail::status_text(st != CUBLAS_STATUS_SUCCESS ? st : result.state)));
    p.algo = result.algo;
  } catch (...) {
    destroy(p.desc, p.a, p.b, p.c);
    throw;
  }
  return cache_.emplace(key, p).first->second;
}

void GemmLt::run(const codegen::GemmStep& step, int64_t rows, const void* x, const void* w,
                 void* y, cudaStream_t stream) {
  if (rows == 0) return;
  Prepared& p = prepared(step, rows);
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y,
                                     p.c, &p.algo, workspace_, kWorkspaceBytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS call cublasLtMatmul failed for {}: {}", describe(step, rows),
                            detail::status_text(st)));
}

}  // namespace mlpc::runtime
