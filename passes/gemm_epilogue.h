// Which matmul epilogues (ir::GemmEpilogue: y = act(x . W^T + bias) + residual) each GEMM backend
// runs: the one table fuse_epilogue's legality, plan building, the kernel generators and
// runtime/gemm_lt all ask.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mlpc::passes {

enum class GemmBackend {
  CublasLt,   // runtime/gemm_lt: every GEMM no generated kernel takes runs here
  SmallGemm,  // codegen/small_gemm_kernel: CUDA cores
  MmaGemm,    // codegen/mma_gemm_kernel: tensor cores by mma.sync
};

// The cuBLASLt epilogues mlpc uses (CUBLASLT_EPILOGUE_*, named without its header). GELU is
// cuBLASLt's tanh approximation.
enum class LtEpilogue { Default, Bias, Relu, ReluBias, Gelu, GeluBias };

// The cuBLASLt epilogue computing `e`, or nullopt when none does. A residual enters as C with
// beta = 1, which cuBLASLt adds before its activation (act(x . W^T + C + bias)): a residual goes
// only with no activation, where both orders agree.
std::optional<LtEpilogue> cublaslt_epilogue(const ir::GemmEpilogue& e);
// "none", "bias", "relu", "relu_bias", "gelu", "gelu_bias": its name in GEMM tuning keys.
std::string_view lt_epilogue_name(LtEpilogue e);

// Why `backend` cannot run `e`, or an empty string when it can. The generated kernels apply a
// bias and any activation in fp32 before their one store, but take no residual.
std::string cannot_run(GemmBackend backend, const ir::GemmEpilogue& e);
inline bool can_run(GemmBackend backend, const ir::GemmEpilogue& e) {
  return cannot_run(backend, e).empty();
}

}  // namespace mlpc::passes
