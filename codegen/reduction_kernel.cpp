#include "codegen/reduction_kernel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "codegen/cuda_ops.h"
#include "codegen/pointwise_kernel.h"
#include "ir/error.h"
#include "ir/row_space.h"

namespace mlpc::codegen {
namespace {

using ir::Node;
using ir::NodeId;

std::string describe(const ir::Graph& body, const Node& n) {
  std::string s = fmt::format("%{} = {}", n.name, ir::op_name(n.op));
  for (size_t i = 0; i < n.operands.size(); ++i)
    s += fmt::format("{} %{}", i ? "," : "", body.node(n.operands[i]).name);
  if (ir::has_scalar(n.op)) s += fmt::format(", {}", n.scalar);
  return s;
}

constexpr std::string_view kWarpCombine = R"(
// Butterfly combines: every lane ends with the same total (a + b == b + a, step by step).
struct MlpcSum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MlpcMax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <typename Op>
__device__ __forceinline__ float mlpc_warp_combine(float v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float mlpc_warp_sum(float v) { return mlpc_warp_combine(v, MlpcSum{}); }
__device__ __forceinline__ float mlpc_warp_max(float v) { return mlpc_warp_combine(v, MlpcMax{}); }
)";

// A block-wide combine over kWarps warps through shared memory; every thread gets the total.
constexpr std::string_view kBlockCombine = R"(
template <int kWarps, typename Op>
__device__ __forceinline__ float mlpc_block_combine(float v, float* smem, Op op) {
  v = mlpc_warp_combine(v, op);
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = smem[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) t = op(t, smem[w]);
  __syncthreads();  // smem is written again by the next combine
  return t;
}
template <int kWarps>
__device__ __forceinline__ float mlpc_block_sum(float v, float* smem) {
  return mlpc_block_combine<kWarps>(v, smem, MlpcSum{});
}
template <int kWarps>
__device__ __forceinline__ float mlpc_block_max(float v, float* smem) {
  return mlpc_block_combine<kWarps>(v, smem, MlpcMax{});
}
)";

// Registers per thread a cached input may take (floats); more and the row is re-read per pass.
constexpr int kMaxCachedFloats = 32;

class RowKernel {
 public:
  RowKernel(const ir::Graph& g, const Node& fused)
      : g_(g),
        fused_(fused),
        body_(*fused.body),
        element_(body_.size(), false),
        kept_(body_.size(), false),
        stored_(body_.size(), false) {}

  KernelStep run();

 private:
  bool element(NodeId id) const { return element_[id.index]; }
  // Only the row itself stays in registers across passes; a row vector (a weight, a bias) is
  // the same for every row, so each pass reloads it from L1 instead of holding registers that
  // would cost occupancy (layernorm's x, weight and bias held 96 floats: 122 registers).
  bool held(size_t input) const {
    return shape_.cached && in_role_[input] == ir::RowRole::Full;
  }
  std::string load_expr(size_t input) const {
    return held(input) ? fmt::format("mlpc_to_float(x{}[j][k])", input)
                       : fmt::format("x{}[k]", input);
  }
  std::set<uint32_t> cone(NodeId target) const;
  void choose_kept(const std::vector<NodeId>& passes);
  void emit_chunk_loop(const std::set<uint32_t>& cone, const std::string& per_element,
                       const std::string& before, const std::string& after);
  std::string elements(const std::set<uint32_t>& cone) const;

  const ir::Graph& g_;
  const Node& fused_;
  const ir::Graph& body_;
  ir::RowSpace space_;
  std::vector<NodeId> ins_;
  std::vector<ir::RowRole> in_role_;
  std::vector<bool> element_;  // per body node: varies along the row (else one value per row)
  std::vector<int> input_of_;  // per body node: its input index, or -1
  // Per body node: an element value computed in one pass and read again by a later one, kept in
  // registers (k_<name>[kChunks][kVec]) instead of being recomputed: softmax's exp.
  std::vector<bool> kept_;
  std::vector<bool> stored_;  // kept and already written by an earlier pass
  RowShape shape_;
  int vec_ = 1;
  std::string src_;
};

// The element-level nodes `target` needs (itself included when element-level), stopping at
// per-row values, which are computed once per row before.
std::set<uint32_t> RowKernel::cone(NodeId target) const {
  std::set<uint32_t> out;
  std::vector<NodeId> todo{target};
  while (!todo.empty()) {
    NodeId id = todo.back();
    todo.pop_back();
    if (!element(id) || !out.insert(id.index).second) continue;
    if (stored_[id.index]) continue;  // read back from registers
    for (NodeId o : body_.node(id).operands) todo.push_back(o);
  }
  return out;
}

// The fp32 statements computing `cone` for element k of chunk j, in program order.
std::string RowKernel::elements(const std::set<uint32_t>& cone) const {
  std::string s;
  for (uint32_t i : cone) {
    const Node& n = body_.nodes[i];
    if (n.op == ir::Op::Input) {
      s += fmt::format("        const float {} = {};\n", element_var(n.name),
                       load_expr(input_of_[i]));
      continue;
    }
    if (stored_[i]) {
      s += fmt::format("        const float {0} = k_{0}[j][k];\n", element_var(n.name));
      continue;
    }
    std::vector<std::string> args;
    for (NodeId o : n.operands) args.push_back(element_var(body_.node(o).name));
    if (n.op == ir::Op::Div && !element(n.operands[1])) {
      // By one value per row (softmax's sum): times its reciprocal, which the compiler takes
      // once per row; an IEEE division per element cost softmax a fifth of its instructions.
      s += fmt::format("        const float {} = {} * (1.0f / {});\n", element_var(n.name), args[0],
                       args[1]);
    } else {
      s += fmt::format("        const float {} = {};\n", element_var(n.name), cuda_expr(n, args));
    }
    if (kept_[i]) s += fmt::format("        k_{0}[j][k] = {0};\n", element_var(n.name));
  }
  return s;
}

// One pass over the row: for each chunk this thread owns, `before` (once per chunk), then for
// each of its kVec elements the cone's statements and `per_element`, then `after`.
void RowKernel::emit_chunk_loop(const std::set<uint32_t>& cone, const std::string& per_element,
                                const std::string& before, const std::string& after) {
  src_ += shape_.cached ? "#pragma unroll\n" : "";
  src_ += "    for (int j = 0; j < kChunks; ++j) {\n"
          "      const int col = (j * kThreadsPerRow + lane) * kVec;\n"
          "      if (col < kRowLen) {  // the last chunk of a row can be partial\n";
  for (uint32_t i : cone)
    if (input_of_[i] >= 0 && !held(static_cast<size_t>(input_of_[i])))
      src_ += fmt::format("      float x{0}[kVec];\n      mlpc_load<kVec>(row{0} + col, x{0});\n",
                          input_of_[i]);
  src_ += before;
  src_ += "#pragma unroll\n      for (int k = 0; k < kVec; ++k) {\n";
  src_ += elements(cone);
  src_ += per_element;
  src_ += "      }\n";
  src_ += after;
  src_ += "      }\n    }\n";
}

// Values worth keeping: costly element ops (exp, tanh, division, ...) that an earlier pass
// computes and a later pass or the output needs again, when the row is held in registers (a
// re-read row has no registers to spare).
void RowKernel::choose_kept(const std::vector<NodeId>& passes) {
  if (!shape_.cached) return;
  auto costly = [](ir::Op op) {
    switch (op) {
      case ir::Op::Exp: case ir::Op::Tanh: case ir::Op::Gelu: case ir::Op::GeluTanh:
      case ir::Op::Silu: case ir::Op::Sigmoid: case ir::Op::Div: case ir::Op::Sqrt:
      case ir::Op::Rsqrt: return true;
      default: return false;
    }
  };
  std::vector<int> first_pass(body_.size(), -1);
  std::vector<NodeId> readers = passes;
  if (element(body_.outputs()[0])) readers.push_back(body_.outputs()[0]);
  for (size_t p = 0; p < readers.size(); ++p)
    for (uint32_t i : cone(p < passes.size() ? body_.node(readers[p]).operands[0] : readers[p])) {
      if (first_pass[i] < 0) first_pass[i] = static_cast<int>(p);
      else if (first_pass[i] < static_cast<int>(p) && costly(body_.nodes[i].op)) kept_[i] = true;
    }
}

KernelStep RowKernel::run() {
  std::optional<ir::RowSpace> space = ir::row_space_of(body_);
  MLPC_ASSERT(space && ir::row_space_error(body_).empty(),
              fmt::format("fused.reduction @{} is not a row kernel", fused_.symbol));
  space_ = *space;
  const int64_t n_row = space_.row_len;
  if (n_row >= (int64_t{1} << 31))
    throw Error(fmt::format("node %{}: rows of {} elements are too long for a row kernel "
                            "(the limit is 2^31)", fused_.name, n_row));
  const std::string bs = g_.batch_symbol;

  // Which values vary along the row: inputs by shape, reductions never, pointwise ops when an
  // operand does.
  ins_ = body_.inputs();
  input_of_.assign(body_.size(), -1);
  size_t min_size = 4;
  std::set<ir::DType> dtypes{fused_.type.dtype};
  for (size_t i = 0; i < ins_.size(); ++i) {
    const ir::TensorType& t = body_.node(ins_[i]).type;
    ir::RowRole r = *space_.role(t.shape);
    in_role_.push_back(r);
    input_of_[ins_[i].index] = static_cast<int>(i);
    element_[ins_[i].index] = r != ir::RowRole::PerRow;
    dtypes.insert(t.dtype);
    if (element_[ins_[i].index]) min_size = std::min(min_size, ir::dtype_size(t.dtype));
  }
  for (const Node& n : body_.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return || ir::is_reduction(n.op)) continue;
    for (NodeId o : n.operands)
      if (element(o)) element_[body_.id_of(n).index] = true;
  }
  const NodeId out = body_.outputs()[0];
  const bool out_element = element(out);
  if (out_element) min_size = std::min(min_size, ir::dtype_size(fused_.type.dtype));
  vec_ = static_cast<int>(16 / min_size);
  if (n_row % vec_ != 0) vec_ = 1;  // a vector would straddle two rows
  shape_ = choose_row_shape(n_row, vec_);

  KernelStep k;
  k.name = fused_.symbol;
  k.row_len = n_row;
  k.vec = vec_;
  const RowReduction launch{.threads_per_row = shape_.threads_per_row,
                            .rows_per_block = shape_.rows_per_block,
                            .out_row_len = out_element ? n_row : 1};
  k.kind = launch;

  // Header: what this kernel fuses, in IR terms.
  bool block = shape_.threads_per_row > 32;
  src_ = fmt::format("// {}: generated by mlpc from @{}.\n// {} per row of {} (row length {}); "
                     "fuses:\n", k.name, g_.name, block ? "One block" : "One warp",
                     ir::to_string(space_.full, bs), n_row);
  for (const Node& n : body_.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return) continue;
    src_ += "//   " + describe(body_, n) + "\n";
    k.ops.emplace_back(ir::op_name(n.op));
    k.ir_nodes.push_back(n.name);
  }
  std::vector<std::string> reads;
  const char* role_names[] = {"", " (row vector)", " (per row)"};
  for (size_t i = 0; i < ins_.size(); ++i)
    reads.push_back(fmt::format(
        "%{} {}{}", body_.node(ins_[i]).name, ir::to_string(body_.node(ins_[i]).type, bs),
        in_role_[i] == ir::RowRole::RowVector ? role_names[1]
        : in_role_[i] == ir::RowRole::PerRow  ? role_names[2]
                                              : role_names[0]));
  src_ += fmt::format("// Reads {}; writes %{} {}.\n", fmt::join(reads, ", "), fused_.name,
                      ir::to_string(fused_.type, bs));
  src_ += fmt::format("// {} vectors of {} per thread per row{}.\n", shape_.chunks, vec_,
                      shape_.cached ? ", kept in registers across passes"
                                    : ", re-read in every pass (too long for registers)");
  src_ += row_kernel_prelude();
  if (block) src_ += kBlockCombine;
  std::set<ir::Op> helpers_done;
  for (const Node& n : body_.nodes)
    if (!cuda_helper(n.op).empty() && helpers_done.insert(n.op).second)
      src_ += "\n" + std::string(cuda_helper(n.op));

  // Signature, constants, the loop over this thread's rows.
  src_ += kernel_signature(k.name, shape_.threads_per_row * shape_.rows_per_block, body_, ins_,
                           fused_);
  src_ += fmt::format(
      "  constexpr int kRowLen = {};\n  constexpr int kVec = {};\n"
      "  constexpr int kThreadsPerRow = {};\n  constexpr int kRowsPerBlock = {};\n"
      "  constexpr int kChunks = {};  // vectors per thread per row\n"
      "  const long long rows = n / {};\n",
      n_row, vec_, shape_.threads_per_row, shape_.rows_per_block, shape_.chunks,
      launch.out_row_len);
  if (block)
    src_ += "  __shared__ float smem[kThreadsPerRow / 32];\n"
            "  const int lane = threadIdx.x;\n  const int slot = 0;\n";
  else
    src_ += "  const int lane = threadIdx.x & 31;\n  const int slot = threadIdx.x >> 5;\n";
  src_ += "  for (long long row = (long long)blockIdx.x * kRowsPerBlock + slot; row < rows;\n"
          "       row += (long long)gridDim.x * kRowsPerBlock) {\n";
  for (size_t i = 0; i < ins_.size(); ++i) {
    const std::string& name = body_.node(ins_[i]).name;
    switch (in_role_[i]) {
      case ir::RowRole::Full:
        src_ += fmt::format("    const auto* __restrict__ row{0} = in{0} + row * kRowLen;\n", i);
        break;
      case ir::RowRole::RowVector:
        src_ += fmt::format("    const auto* __restrict__ row{0} = in{0};\n", i);
        break;
      case ir::RowRole::PerRow:
        src_ += fmt::format("    const float {} = mlpc_to_float(in{}[row]);\n",
                            element_var(name), i);
        break;
    }
  }
  if (shape_.cached) {
    src_ += "    // The row, loaded once and held at its own width.\n";
    for (size_t i = 0; i < ins_.size(); ++i)
      if (held(i))
        src_ += fmt::format("    alignas(16) {} x{}[kChunks][kVec];\n",
                            cuda_type(body_.node(ins_[i]).type.dtype), i);
    src_ += "#pragma unroll\n    for (int j = 0; j < kChunks; ++j) {\n"
            "      const int col = (j * kThreadsPerRow + lane) * kVec;\n"
            "      if (col < kRowLen) {\n";
    for (size_t i = 0; i < ins_.size(); ++i)
      if (held(i)) src_ += fmt::format("        mlpc_load_raw<kVec>(row{0} + col, x{0}[j]);\n", i);
    src_ += "      }\n    }\n";
  }
  std::vector<NodeId> passes;
  for (const Node& n : body_.nodes)
    if (ir::is_reduction(n.op)) passes.push_back(body_.id_of(n));
  choose_kept(passes);
  for (size_t i = 0; i < kept_.size(); ++i)
    if (kept_[i])
      src_ += fmt::format("    float k_{}[kChunks][kVec];  // kept for a later pass\n",
                          element_var(body_.nodes[i].name));

  // Per-row values in program order: each reduction is a pass over the row; the pointwise ops
  // on per-row values follow as soon as their operands are known.
  std::vector<bool> done(body_.size(), false);
  for (NodeId i : ins_) done[i.index] = true;
  auto emit_ready_row_values = [&] {
    for (const Node& n : body_.nodes) {
      uint32_t i = body_.id_of(n).index;
      if (done[i] || element_[i] || n.op == ir::Op::Return || ir::is_reduction(n.op)) continue;
      bool ready = std::all_of(n.operands.begin(), n.operands.end(),
                               [&](NodeId o) { return done[o.index]; });
      if (!ready) continue;
      std::vector<std::string> args;
      for (NodeId o : n.operands) args.push_back(element_var(body_.node(o).name));
      src_ += fmt::format("    const float {} = {};  // per row\n", element_var(n.name),
                          cuda_expr(n, args));
      done[i] = true;
    }
  };
  emit_ready_row_values();
  int pass = 0;
  for (const Node& n : body_.nodes) {
    if (!ir::is_reduction(n.op)) continue;
    const bool is_max = n.op == ir::Op::ReduceMax;
    const std::string acc = fmt::format("acc{}", pass++);
    const NodeId operand = n.operands[0];
    src_ += fmt::format("    // Pass {}: %{} = {} %{}, fp32 accumulation.\n", pass, n.name,
                        ir::op_name(n.op), body_.node(operand).name);
    src_ += fmt::format("    float {} = {};\n", acc,
                        is_max ? "__int_as_float(0xff800000);  // -inf" : "0.0f");
    std::string fold = is_max ? fmt::format("        {0} = fmaxf({0}, {1});\n", acc,
                                            element_var(body_.node(operand).name))
                              : fmt::format("        {0} += {1};\n", acc,
                                            element_var(body_.node(operand).name));
    const std::set<uint32_t> pass_cone = cone(operand);
    emit_chunk_loop(pass_cone, fold, "", "");
    for (uint32_t i : pass_cone) stored_[i] = stored_[i] || kept_[i];
    std::string combine = block ? fmt::format("mlpc_block_{}<kThreadsPerRow / 32>({}, smem)",
                                              is_max ? "max" : "sum", acc)
                                : fmt::format("mlpc_warp_{}({})", is_max ? "max" : "sum", acc);
    if (n.op == ir::Op::ReduceMean) combine += " * (1.0f / kRowLen)";
    src_ += fmt::format("    const float {} = {};\n", element_var(n.name), combine);
    done[body_.id_of(n).index] = true;
    emit_ready_row_values();
  }

  // The output: a row written back, or one value per row.
  if (out_element) {
    src_ += fmt::format("    // The output row.\n"
                        "    {}* __restrict__ out_row = out + row * kRowLen;\n",
                        cuda_type(fused_.type.dtype));
    emit_chunk_loop(cone(out),
                    fmt::format("        y[k] = {};\n", element_var(body_.node(out).name)),
                    "      float y[kVec];\n", "      mlpc_store<kVec>(out_row + col, y);\n");
  } else {
    src_ += fmt::format("    if (lane == 0) mlpc_from_float({}, &out[row]);\n",
                        element_var(body_.node(out).name));
  }
  src_ += "  }\n}\n";
  k.source = std::move(src_);
  return k;
}

}  // namespace

RowShape choose_row_shape(int64_t row_len, int vec) {
  RowShape s;
  const int64_t vectors = (row_len + vec - 1) / vec;
  constexpr int64_t kTargetChunks = 4;  // 16-byte loads in flight per thread
  if (vectors <= 32 * kTargetChunks) {
    // A warp per row, eight rows to a block: no shared memory, no block barrier.
    s.threads_per_row = 32;
    s.rows_per_block = 8;
  } else {
    int64_t t = 64;
    while (t < 1024 && t * kTargetChunks < vectors) t *= 2;
    s.threads_per_row = static_cast<int>(t);
    s.rows_per_block = 1;
  }
  s.chunks = static_cast<int>((vectors + s.threads_per_row - 1) / s.threads_per_row);
  s.cached = s.chunks * vec <= kMaxCachedFloats;
  return s;
}

std::string_view row_kernel_prelude() {
  static const std::string prelude = [] {
    std::string s(cuda_includes());
    s += "\n";
    for (ir::DType t : {ir::DType::F32, ir::DType::F16, ir::DType::BF16}) s += float_conversions(t);
    s += "\n" + std::string(vector_access()) + std::string(kWarpCombine);
    return s;
  }();
  return prelude;
}

KernelStep generate_reduction_kernel(const ir::Graph& g, const Node& fused) {
  MLPC_ASSERT(fused.op == ir::Op::FusedReduction && fused.body, "not a fused.reduction node");
  return RowKernel(g, fused).run();
}

LaunchDims launch_dims(const RowReduction& r, const KernelStep&, int64_t numel) {
  constexpr int64_t kMaxRowGrid = int64_t{1} << 30;  // beyond that, the kernel loops over rows
  const int64_t rows = numel / std::max<int64_t>(r.out_row_len, 1);
  const int64_t grid =
      std::clamp<int64_t>((rows + r.rows_per_block - 1) / r.rows_per_block, 1, kMaxRowGrid);
  return {static_cast<unsigned>(grid), static_cast<unsigned>(r.threads_per_row * r.rows_per_block)};
}

}  // namespace mlpc::codegen
