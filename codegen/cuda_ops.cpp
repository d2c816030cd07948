#include "codegen/cuda_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"

namespace mlpc::codegen {
namespace {

// A C float literal that round-trips the fp32 value: "0.5f", "2.0f", "1e-05f".
std::string float_literal(double v) {
  std::string s = fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

}  // namespace

std::string_view cuda_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return "float";
    case ir::DType::F16: return "__half";
    case ir::DType::BF16: return "__nv_bfloat16";
  }
  return "?";
}

std::string_view cuda_helper(ir::Op op) {
  switch (op) {
    case ir::Op::Gelu:
      return "__device__ __forceinline__ float mlpc_gelu(float x) {\n"
             "  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));\n}\n";
    case ir::Op::GeluTanh:
      return "__device__ __forceinline__ float mlpc_gelu_tanh(float x) {\n"
             "  const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);\n"
             "  return 0.5f * x * (1.0f + tanhf(inner));\n}\n";
    case ir::Op::Silu:
      return "__device__ __forceinline__ float mlpc_silu(float x) {\n"
             "  return x / (1.0f + expf(-x));\n}\n";
    case ir::Op::Sigmoid:
      return "__device__ __forceinline__ float mlpc_sigmoid(float x) {\n"
             "  return 1.0f / (1.0f + expf(-x));\n}\n";
    default: return "";
  }
}

std::string cuda_expr(const ir::Node& n, const std::vector<std::string>& a) {
  switch (n.op) {
    case ir::Op::Add: return fmt::format("{} + {}", a[0], a[1]);
    case ir::Op::Sub: return fmt::format("{} - {}", a[0], a[1]);
    case ir::Op::Mul: return fmt::format("{} * {}", a[0], a[1]);
    case ir::Op::Div: return fmt::format("{} / {}", a[0], a[1]);
    case ir::Op::Relu: return fmt::format("fmaxf({}, 0.0f)", a[0]);
    case ir::Op::Gelu: return fmt::format("mlpc_gelu({})", a[0]);
    case ir::Op::GeluTanh: return fmt::format("mlpc_gelu_tanh({})", a[0]);
    case ir::Op::Silu: return fmt::format("mlpc_silu({})", a[0]);
    case ir::Op::Sigmoid: return fmt::format("mlpc_sigmoid({})", a[0]);
    case ir::Op::Tanh: return fmt::format("tanhf({})", a[0]);
    case ir::Op::Exp: return fmt::format("expf({})", a[0]);
    case ir::Op::Neg: return fmt::format("-{}", a[0]);
    case ir::Op::Scale: return fmt::format("{} * {}", a[0], float_literal(n.scalar));
    case ir::Op::AddScalar: return fmt::format("{} + {}", a[0], float_literal(n.scalar));
    case ir::Op::Rsqrt: return fmt::format("rsqrtf({})", a[0]);
    case ir::Op::Sqrt: return fmt::format("sqrtf({})", a[0]);
    case ir::Op::Square: return fmt::format("{0} * {0}", a[0]);
    case ir::Op::Cast:
      // Rounding to the target type is what a cast means, even when the value stays in a register.
      switch (n.type.dtype) {
        case ir::DType::F32: return a[0];
        case ir::DType::F16: return fmt::format("__half2float(__float2half_rn({}))", a[0]);
        case ir::DType::BF16: return fmt::format("__bfloat162float(__float2bfloat16_rn({}))", a[0]);
      }
      break;
    default: break;
  }
  MLPC_ASSERT(false, fmt::format("no CUDA expression for op '{}'", ir::op_name(n.op)));
}

std::string kernel_signature(std::string_view name, int threads, const ir::Graph& body,
                             const std::vector<ir::NodeId>& inputs, const ir::Node& fused) {
  std::vector<std::string> sig;
  for (size_t i = 0; i < inputs.size(); ++i)
    sig.push_back(fmt::format("    const {}* __restrict__ in{},  // %{}",
                              cuda_type(body.node(inputs[i]).type.dtype), i,
                              body.node(inputs[i]).name));
  sig.push_back(fmt::format("    {}* __restrict__ out,  // %{}", cuda_type(fused.type.dtype),
                            fused.name));
  sig.push_back("    long long n) {");
  return fmt::format("\nextern \"C\" __global__ void __launch_bounds__({}) {}(\n{}\n", threads,
                     name, fmt::join(sig, "\n"));
}

}  // namespace mlpc::codegen
