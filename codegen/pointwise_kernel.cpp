#include "codegen/pointwise_kernel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "codegen/cuda_ops.h"
#include "ir/error.h"

namespace mlpc::codegen {
namespace {

// A C identifier for an IR value: names may hold '.' or start with a digit.
std::string var(const std::string& ir_name) {
  std::string s = "v_";
  for (char c : ir_name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

std::string describe(const ir::Graph& body, const ir::Node& n) {
  std::string s = fmt::format("%{} = {}", n.name, ir::op_name(n.op));
  for (size_t i = 0; i < n.operands.size(); ++i)
    s += fmt::format("{} %{}", i ? "," : "", body.node(n.operands[i]).name);
  if (n.op == ir::Op::Scale || n.op == ir::Op::Slice) s += fmt::format(", {}", n.scalar);
  return s;
}

// How a kernel reads one value: element e of the iteration space maps to element e of a full
// tensor, to column e % row_len of a row vector, or to column offset + e % row_len of row
// e / row_len of a wider tensor with `ld` columns (a slice).
enum class Access { Full, Row, Strided };
struct Load {
  size_t input = 0;  // the kernel parameter it reads
  std::string var;   // the element function's parameter
  Access access = Access::Full;
  int64_t offset = 0, ld = 0;  // Strided only
};

constexpr std::string_view kIncludes = "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n";

std::string conversions(ir::DType t) {
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

constexpr std::string_view kVectorAccess = R"(// N consecutive elements through 16-byte accesses: p is 16-byte aligned, N * sizeof(T) a
// multiple of 16.
template <int N, typename T>
__device__ __forceinline__ void mlpc_load(const T* __restrict__ p, float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < N / kPerChunk; ++c) {
    const uint4 raw = reinterpret_cast<const uint4*>(p)[c];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerChunk; ++j) v[c * kPerChunk + j] = mlpc_to_float(e[j]);
  }
}
template <int N, typename T>
__device__ __forceinline__ void mlpc_store(T* __restrict__ p, const float* v) {
  constexpr int kPerChunk = 16 / sizeof(T);
#pragma unroll
  for (int c = 0; c < N / kPerChunk; ++c) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerChunk; ++j) mlpc_from_float(v[c * kPerChunk + j], &e[j]);
    reinterpret_cast<uint4*>(p)[c] = raw;
  }
}
)";

}  // namespace

KernelStep generate_pointwise_kernel(const ir::Graph& g, const ir::Node& fused) {
  MLPC_ASSERT(fused.op == ir::Op::FusedPointwise && fused.body, "not a fused.pointwise node");
  const ir::Graph& body = *fused.body;
  const ir::Shape& space = fused.type.shape;
  const std::string space_str = ir::to_string(fused.type, g.batch_symbol);

  KernelStep k;
  k.name = fused.symbol;
  k.row_len = space.last();

  // Operands: full tensors over the iteration space, row vectors indexed by column, or wider
  // tensors read only through slices (a merged GEMM's output): each slice is its own load.
  std::vector<ir::NodeId> ins = body.inputs();
  std::vector<Load> loads;
  std::set<ir::DType> dtypes{fused.type.dtype};
  size_t min_size = ir::dtype_size(fused.type.dtype);
  for (size_t i = 0; i < ins.size(); ++i) {
    const ir::Node& in = body.node(ins[i]);
    dtypes.insert(in.type.dtype);
    min_size = std::min(min_size, ir::dtype_size(in.type.dtype));
    if (in.type.shape == space) {
      loads.push_back({i, var(in.name), Access::Full});
    } else if (in.type.shape.rank() == 1 && in.type.shape.dims[0] == k.row_len) {
      loads.push_back({i, var(in.name), Access::Row});
    }
  }
  for (const ir::Node& n : body.nodes) {
    if (n.op != ir::Op::Slice) continue;
    const ir::NodeId src = n.operands[0];
    const auto input = static_cast<size_t>(std::find(ins.begin(), ins.end(), src) - ins.begin());
    MLPC_ASSERT(input < ins.size(), "slice of a value computed inside the region: %" + n.name);
    loads.push_back({input, var(n.name), Access::Strided, static_cast<int64_t>(n.scalar),
                     body.node(src).type.shape.last()});
  }
  for (size_t i = 0; i < ins.size(); ++i)
    MLPC_ASSERT(std::any_of(loads.begin(), loads.end(), [&](const Load& l) { return l.input == i; }),
                "region operand %" + body.node(ins[i]).name +
                    " is neither full-size, a row vector, nor read through a slice");
  int vec = static_cast<int>(16 / min_size);
  for (const Load& l : loads) {
    // A vector must not straddle two rows, and a strided one must start 16-byte aligned.
    if (l.access != Access::Full && k.row_len % vec != 0) vec = 1;
    if (l.access == Access::Strided && (l.ld % vec != 0 || l.offset % vec != 0)) vec = 1;
  }
  k.vec = vec;
  const bool any_row = std::any_of(loads.begin(), loads.end(),
                                   [](const Load& l) { return l.access != Access::Full; });

  // Header: what this kernel fuses, in IR terms.
  std::string src = fmt::format("// {}: generated by mlpc from @{}.\n// One pass over {}; fuses:\n",
                                k.name, g.name, space_str);
  std::vector<std::string> reads;
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto row = std::find_if(loads.begin(), loads.end(), [&](const Load& l) {
      return l.input == i && l.access != Access::Full;
    });
    const char* how = row == loads.end()              ? ""
                      : row->access == Access::Row ? " (row vector)"
                                                   : " (through slices)";
    reads.push_back(fmt::format("%{} {}{}", body.node(ins[i]).name,
                                ir::to_string(body.node(ins[i]).type, g.batch_symbol), how));
  }
  for (const ir::Node& n : body.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return) continue;
    src += "//   " + describe(body, n) + "\n";
    k.ops.emplace_back(ir::op_name(n.op));
    k.ir_nodes.push_back(n.name);
  }
  src += fmt::format("// Reads {}; writes %{} {}.\n", fmt::join(reads, ", "), fused.name,
                     space_str);
  src += kIncludes;
  src += "\n";
  for (ir::DType t : dtypes) src += conversions(t);
  if (vec > 1) src += "\n" + std::string(kVectorAccess);
  std::set<ir::Op> helpers_done;
  for (const ir::Node& n : body.nodes)
    if (!cuda_helper(n.op).empty() && helpers_done.insert(n.op).second)
      src += "\n" + std::string(cuda_helper(n.op));

  // The computation for one element, shared by the vector loop and the scalar tail.
  std::vector<std::string> params;
  for (const Load& l : loads) params.push_back("float " + l.var);
  src += fmt::format("\n__device__ __forceinline__ float {}_element({}) {{\n", k.name,
                     fmt::join(params, ", "));
  for (const ir::Node& n : body.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return || n.op == ir::Op::Slice) continue;
    std::vector<std::string> args;
    for (ir::NodeId o : n.operands) args.push_back(var(body.node(o).name));
    src += fmt::format("  const float {} = {};\n", var(n.name), cuda_expr(n, args));
  }
  src += fmt::format("  return {};\n}}\n", var(body.node(body.outputs()[0]).name));

  // The kernel: a grid-stride loop over the output's n elements.
  src += kernel_signature(k.name, 256, body, ins, fused);
  if (any_row) src += fmt::format("  constexpr long long kRowLen = {};\n", k.row_len);
  auto index = [&](const Load& l, const char* at) {
    switch (l.access) {
      case Access::Full: return std::string(at);
      case Access::Row: return fmt::format("{} % kRowLen", at);
      case Access::Strided:
        return fmt::format("{0} / kRowLen * {1} + {2} + {0} % kRowLen", at, l.ld, l.offset);
    }
    return std::string(at);
  };
  std::vector<std::string> scalar_args;
  for (const Load& l : loads)
    scalar_args.push_back(fmt::format("mlpc_to_float(in{}[{}])", l.input, index(l, "e")));
  std::string scalar_stmt = fmt::format("mlpc_from_float({}_element({}), &out[e]);", k.name,
                                        fmt::join(scalar_args, ", "));
  if (vec == 1) {
    src += "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
           "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;"
           " e += stride) {\n";
    src += "    " + scalar_stmt + "\n  }\n}\n";
  } else {
    src += fmt::format("  constexpr int kVec = {};  // {} bytes per access of the narrowest type\n",
                       vec, vec * min_size);
    src += "  const long long stride = (long long)gridDim.x * blockDim.x * kVec;\n"
           "  long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * kVec;\n"
           "  for (; i + kVec <= n; i += stride) {\n";
    std::vector<std::string> lanes;
    for (size_t j = 0; j < loads.size(); ++j) {
      src += fmt::format("    float x{}[kVec];\n    mlpc_load<kVec>(in{} + ({}), x{});\n", j,
                         loads[j].input, index(loads[j], "i"), j);
      lanes.push_back(fmt::format("x{}[j]", j));
    }
    src += fmt::format("    float y[kVec];\n#pragma unroll\n"
                       "    for (int j = 0; j < kVec; ++j) y[j] = {}_element({});\n"
                       "    mlpc_store<kVec>(out + i, y);\n  }}\n",
                       k.name, fmt::join(lanes, ", "));
    src += "  // Scalar tail: the thread that stopped inside the last partial vector.\n";
    src += "  for (long long e = i; e < n; ++e) " + scalar_stmt + "\n}\n";
  }
  k.source = std::move(src);
  return k;
}

}  // namespace mlpc::codegen
