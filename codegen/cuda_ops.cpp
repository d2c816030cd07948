#include "codegen/cuda_ops.h"

#include <fmt/format.h>

#include <cctype>
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

std::string_view cuda_includes() { return "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"; }

std::string float_conversions(ir::DType t) {
  switch (t) {
    case ir::DType::F32:
      return "__device__ __forceinline__ float mlpc_to_float(float x) { return x; }\n"
             "__device__ __forceinline__ void mlpc_from_float(float x, float* out) { *out = x; }\n";
    case ir::DType::F16:
      return "__device__ __forceinline__ float mlpc_to_float(__half x) { return __half2float(x); }\n"
             "__device__ __forceinline__ void mlpc_from_float(float x, __half* out) {\n"
             "  *out = __float2half_rn(x);\n}\n";
    case ir::DType::BF16:
      return "__device__ __forceinline__ float mlpc_to_float(__nv_bfloat16 x) {\n"
             "  return __bfloat162float(x);\n}\n"
             "__device__ __forceinline__ void mlpc_from_float(float x, __nv_bfloat16* out) {\n"
             "  *out = __float2bfloat16_rn(x);\n}\n";
  }
  return "";
}

std::string_view vector_access() {
  return R"(// N consecutive elements: 16-byte accesses when N elements fill whole 16-byte chunks (p is then
// 16-byte aligned: rows and row vectors start at multiples of 16 bytes), else one at a time.
template <int N, typename T>
__device__ __forceinline__ void mlpc_load(const T* __restrict__ p, float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
  if (N % kPerChunk == 0) {
#pragma unroll
    for (int c = 0; c < N / kPerChunk; ++c) {
      const uint4 raw = reinterpret_cast<const uint4*>(p)[c];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < kPerChunk; ++j) v[c * kPerChunk + j] = mlpc_to_float(e[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = mlpc_to_float(p[j]);
  }
}
// The same elements unconverted: a row held in registers at its own width (bf16 and f16 take half
// the registers of their floats, which is occupancy for a kernel that holds a whole row).
template <int N, typename T>
__device__ __forceinline__ void mlpc_load_raw(const T* __restrict__ p, T* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
  if (N % kPerChunk == 0) {
#pragma unroll
    for (int c = 0; c < N / kPerChunk; ++c)
      reinterpret_cast<uint4*>(v)[c] = reinterpret_cast<const uint4*>(p)[c];
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = p[j];
  }
}
template <int N, typename T>
__device__ __forceinline__ void mlpc_store(T* __restrict__ p, const float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
  if (N % kPerChunk == 0) {
#pragma unroll
    for (int c = 0; c < N / kPerChunk; ++c) {
      uint4 raw;
      T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int j = 0; j < kPerChunk; ++j) mlpc_from_float(v[c * kPerChunk + j], &e[j]);
      reinterpret_cast<uint4*>(p)[c] = raw;
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) mlpc_from_float(v[j], &p[j]);
  }
}
)";
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
