#include "runtime/gemm/gemm_lt.h"

#include <fmt/format.h>

#include "passes/gemm_epilogue.h"
#include "runtime/device/cuda_check.h"
#include "runtime/gemm/gemm_tuner.h"

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

// The step's cuBLASLt epilogue (passes/gemm_epilogue.h says which exist); a step it cannot run
// is a planning bug.
passes::LtEpilogue lt_kind(const codegen::GemmStep& s) {
  std::optional<passes::LtEpilogue> e = passes::cublaslt_epilogue(s.epilogue);
  MLPC_ASSERT(e.has_value(), fmt::format("GEMM {}: cuBLASLt cannot run its epilogue {}: {}", s.name,
                                         ir::epilogue_formula(s.epilogue),
                                         passes::cannot_run(passes::GemmBackend::CublasLt,
                                                            s.epilogue)));
  return *e;
}

cublasLtEpilogue_t lt_epilogue(passes::LtEpilogue e) {
  switch (e) {
    case passes::LtEpilogue::Default: return CUBLASLT_EPILOGUE_DEFAULT;
    case passes::LtEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case passes::LtEpilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case passes::LtEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    // cuBLASLt's GELU is the tanh approximation (design.md, Numerics): gelu_tanh only.
    case passes::LtEpilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case passes::LtEpilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  MLPC_ASSERT(false, "unknown epilogue");
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_bias(const codegen::GemmStep& s) { return s.epilogue.bias; }

std::string describe(const codegen::GemmStep& s, int64_t rows) {
  return fmt::format("GEMM {} ({}{}, rows={}, n={}, k={}, epilogue {}{}{})", s.name,
                     ir::dtype_name(s.dtype), s.tf32x3 ? " as 3xTF32" : "", rows, s.n, s.k,
                     ir::epilogue_formula(s.epilogue), s.accumulate ? ", adding to y" : "",
                     s.x_transposed ? (s.w_transposed ? ", x and w stored transposed"
                                                      : ", x stored transposed")
                                    : "");
}

void destroy(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t c) {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

// Owns a preference for one heuristic query.
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() {
    MLPC_CUBLAS(cublasLtMatmulPreferenceCreate(&p));
    uint64_t ws = GemmLt::kWorkspaceBytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulPreferenceDestroy(p);
      MLPC_CUBLAS(st);
    }
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
};

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

void GemmLt::set_bias(const codegen::GemmStep& step, Prepared& p, const void* bias) {
  if (!has_bias(step)) return;
  // The workspace is 256-byte aligned, like every buffer the Executor hands out.
  const void* ptr = bias ? bias : workspace_;
  MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr,
                                             sizeof(ptr)));
}

GemmLt::Prepared& GemmLt::prepared(const codegen::GemmStep& step, int64_t rows) {
  const Key key{step.n,
                step.k,
                rows,
                static_cast<int>(step.dtype),
                static_cast<int>(lt_kind(step)),
                step.adds_c(),
                step.tf32x3,
                step.stored_row(),
                step.x_transposed,
                step.w_transposed};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  MLPC_ASSERT(step.n > 0 && step.k > 0 && rows > 0, "empty GEMM " + step.name);

  // Column-major view of the row-major product: D[n, rows] = op(A)[n, k] . B[k, rows], with
  // A = w read transposed (stored k x n, ld k), B = x (k x rows, ld k), C = D = y (n x rows,
  // ld n); a residual uses the same layout as D. A K-chunk's A and B are column ranges of wider
  // rows: ld is the stored row length, the pointers start at the chunk. An x stored transposed,
  // [k, rows], is B read transposed (rows x k, ld rows); a w stored transposed, [k, n], is A read
  // as it is (n x k, ld n).
  Prepared p;
  const cudaDataType_t type = cuda_type(step.dtype);
  const auto n = static_cast<uint64_t>(step.n), k = static_cast<uint64_t>(step.stored_k());
  const auto ld = static_cast<int64_t>(step.stored_row());
  const auto m = static_cast<uint64_t>(rows);
  try {
    // A 3xTF32 step's operands are TF32 parts already (codegen/tf32x3.h): TF32 tensor cores
    // compute its products exactly, and accumulate in fp32.
    MLPC_CUBLAS(cublasLtMatmulDescCreate(
        &p.desc, step.tf32x3 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MLPC_ASSERT((!step.x_transposed && !step.w_transposed) ||
                    (!step.tf32x3 && step.row_stride == 0),
                "GEMM " + step.name + ": a transposed x or w is not read in K-chunks or TF32 parts");
    const cublasOperation_t trans_a = step.w_transposed ? CUBLAS_OP_N : CUBLAS_OP_T,
                            trans_b = step.x_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                               sizeof(trans_a)));
    MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                               sizeof(trans_b)));
    const auto epilogue = static_cast<uint32_t>(lt_epilogue(lt_kind(step)));
    MLPC_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                               sizeof(epilogue)));
    // The bias type is left at its default (-1): the D type for every kernel we use
    // (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), i.e. our dtype.
    set_bias(step, p, nullptr);
    if (step.w_transposed)
      MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, type, n, k, static_cast<int64_t>(n)));
    else
      MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, type, k, n, ld));
    if (step.x_transposed)
      MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, type, m, k, static_cast<int64_t>(m)));
    else
      MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, type, k, m, ld));
    MLPC_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, type, n, m, static_cast<int64_t>(n)));

    Preference pref;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c,
                                                       pref.p, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
      throw Error(fmt::format(
          "cuBLASLt has no algorithm for {}: {}", describe(step, rows),
          st != CUBLAS_STATUS_SUCCESS ? detail::status_text(st)
          : found < 1                 ? std::string("the heuristic returned none")
                                      : detail::status_text(result.state)));
    p.algo = result.algo;
  } catch (...) {
    destroy(p.desc, p.a, p.b, p.c);
    throw;
  }
  return cache_.emplace(key, p).first->second;
}

std::vector<cublasLtMatmulHeuristicResult_t> GemmLt::candidates(const codegen::GemmStep& step,
                                                                int64_t rows, int max_count) {
  MLPC_ASSERT(rows > 0 && max_count > 0, "bad candidate query for " + step.name);
  Prepared& p = prepared(step, rows);
  set_bias(step, p, nullptr);
  Preference pref;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(max_count));
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref.p,
                                                     max_count, results.data(), &found);
  std::vector<cublasLtMatmulHeuristicResult_t> out;
  if (st != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < found && i < max_count; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes)
      out.push_back(results[i]);
  return out;
}

bool GemmLt::algo_usable(const codegen::GemmStep& step, int64_t rows,
                         const cublasLtMatmulAlgo_t& algo) {
  Prepared& p = prepared(step, rows);
  set_bias(step, p, nullptr);
  cublasLtMatmulHeuristicResult_t result{};
  cublasStatus_t st =
      cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &algo, &result);
  return st == CUBLAS_STATUS_SUCCESS && result.state == CUBLAS_STATUS_SUCCESS &&
         result.workspaceSize <= kWorkspaceBytes;
}

void GemmLt::set_algo(const codegen::GemmStep& step, int64_t rows,
                      const cublasLtMatmulAlgo_t& algo) {
  prepared(step, rows).algo = algo;
}

cublasStatus_t GemmLt::launch(const codegen::GemmStep& step, Prepared& p,
                              const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops,
                              cudaStream_t stream) {
  MLPC_ASSERT(!has_bias(step) || ops.bias, "GEMM " + step.name + ": epilogue without a bias");
  MLPC_ASSERT((step.residual >= 0) == (ops.residual != nullptr),
              "GEMM " + step.name + ": residual pointer does not match the step");
  // The desc is shared by every step with the same key: the bias pointer is set per launch
  // (a host-side attribute, read when the launch is enqueued or captured).
  set_bias(step, p, ops.bias);
  // C = D = y in place for an accumulating chunk (same layout: cuBLASLt allows it).
  const float alpha = 1.0f, beta = step.adds_c() ? 1.0f : 0.0f;
  const void* c = ops.residual ? ops.residual : ops.y;
  return cublasLtMatmul(handle_, p.desc, &alpha, ops.w, p.a, ops.x, p.b, &beta, c, p.c, ops.y,
                        p.c, &algo, workspace_, kWorkspaceBytes, stream);
}

cublasStatus_t GemmLt::try_run(const codegen::GemmStep& step, int64_t rows,
                               const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops,
                               cudaStream_t stream) {
  MLPC_ASSERT(rows > 0, "empty GEMM " + step.name);
  return launch(step, prepared(step, rows), algo, ops, stream);
}

void GemmLt::run(const codegen::GemmStep& step, int64_t rows, const void* x, const void* w,
                 void* y, const void* bias, const void* residual, cudaStream_t stream) {
  if (rows == 0) return;
  Prepared& p = prepared(step, rows);
  cublasStatus_t st = launch(step, p, p.algo, GemmOperands{x, w, y, bias, residual}, stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS call cublasLtMatmul failed for {}: {}", describe(step, rows),
                            detail::status_text(st)));
}

}  // namespace mlpc::runtime
