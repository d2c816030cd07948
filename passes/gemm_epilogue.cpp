#include "passes/gemm_epilogue.h"

#include <fmt/format.h>

namespace mlpc::passes {

std::optional<LtEpilogue> cublaslt_epilogue(const ir::GemmEpilogue& e) {
  if (e.residual && e.act) return std::nullopt;
  if (!e.act) return e.bias ? LtEpilogue::Bias : LtEpilogue::Default;
  if (*e.act == ir::Op::Relu) return e.bias ? LtEpilogue::ReluBias : LtEpilogue::Relu;
  if (*e.act == ir::Op::GeluTanh) return e.bias ? LtEpilogue::GeluBias : LtEpilogue::Gelu;
  return std::nullopt;
}

std::string_view lt_epilogue_name(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::Default: return "none";
    case LtEpilogue::Bias: return "bias";
    case LtEpilogue::Relu: return "relu";
    case LtEpilogue::ReluBias: return "relu_bias";
    case LtEpilogue::Gelu: return "gelu";
    case LtEpilogue::GeluBias: return "gelu_bias";
  }
  return "?";
}

std::string cannot_run(GemmBackend backend, const ir::GemmEpilogue& e) {
  if (backend == GemmBackend::CublasLt) {
    if (cublaslt_epilogue(e)) return {};
    if (e.residual && e.act)
      return fmt::format("cuBLASLt adds the residual (its C) before the activation, not after "
                         "{}", ir::op_name(*e.act));
    if (*e.act == ir::Op::Gelu)
      return "cuBLASLt's GELU epilogue is the tanh approximation; gelu is exact (erf)";
    return fmt::format("cuBLASLt has no {} epilogue", ir::op_name(*e.act));
  }
  if (e.residual) return "the generated GEMM kernels take no residual";
  return {};
}

}  // namespace mlpc::passes
