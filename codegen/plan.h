// A Plan is what codegen hands the runtime: buffers, and an ordered list of steps, each one
// kernel launch (a cuBLASLt GEMM or a generated CUDA kernel). No CUDA calls here.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "codegen/kernel_kinds.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "ir/type.h"

namespace mlpc::codegen {

enum class BufferRole { Input, Param, Intermediate, Output };

struct Buffer {
  std::string name;  // the IR value it holds
  ir::TensorType type;
  BufferRole role = BufferRole::Intermediate;
  // A param stacked into a concat (passes/merge_gemms) lives inside that param's allocation:
  // `view_of` is the concat's buffer index and `view_offset` its byte offset there.
  int view_of = -1;
  int64_t view_offset = 0;
  bool stacked = false;  // a concat: filled only through the params that view into it
  // A param derived from param `split_of` [n, k]: its three TF32 parts as [n, 3k], chunk by
  // chunk of split_chunk columns (codegen/tf32x3.h), written by the runtime whenever that param
  // is set, never set itself.
  int split_of = -1;
  int64_t split_chunk = 0;
  // A param derived from param `transpose_of` [n, k]: the same values as [k, n], for a GEMM with
  // w_transposed (codegen/transposed_x_plan.h), written by the runtime whenever that param is
  // set, never set itself.
  int transpose_of = -1;
  // Stored transposed, as [last dim, rows] (column-major): written by a kernel with
  // Store::Transposed and read only by GEMMs with x_transposed (codegen/transposed_x_plan.h).
  bool transposed = false;
  // The param this one is derived from (split_of or transpose_of), or -1.
  int derived_from() const { return split_of >= 0 ? split_of : transpose_of; }
  // Values a caller uploads: inputs and params, but not concats or derived params.
  bool uploaded() const {
    return (role == BufferRole::Input || role == BufferRole::Param) && !stacked &&
           derived_from() < 0;
  }
  int64_t bytes(int64_t batch) const;
  int64_t numel(int64_t batch) const { return type.shape.numel(batch); }
};

// y[rows, n] = act(x[rows, k] . w[n, k]^T + bias) + residual (ir::GemmEpilogue), row-major,
// fp32 accumulation; rows = x's leading dims. Which backends run which epilogue:
// passes/gemm_epilogue.h (cuBLASLt takes a residual as its C, beta = 1).
struct GemmStep {
  std::string name;  // stable: "gemm_<output value>"
  int x = -1, w = -1, y = -1;  // buffer indices
  ir::GemmEpilogue epilogue;  // its bias and residual are the buffers below
  int bias = -1;      // buffer index of the bias row vector, when the epilogue has one
  int residual = -1;  // buffer index of the residual, when the epilogue has one
  int64_t n = 0, k = 0;
  ir::DType dtype = ir::DType::F32;
  std::vector<std::string> ir_nodes;  // value names it computes
  // An f32 GEMM as three TF32 tensor-core products (codegen/tf32x3.h): x and w are then the
  // [rows, 3k] and [n, 3k] split buffers, k stays the product's own. Off: IEEE fp32 (SGEMM).
  bool tf32x3 = false;
  // One K-chunk of a 3xTF32 GEMM cut along K (codegen/tf32x3.h): k is the chunk's length, and
  // x and w are read from stored column k_begin on, in rows of row_stride stored values (0: rows
  // are stored_k() long, one chunk). `accumulate`: the product is added to what y holds (C = y,
  // beta = 1; every chunk after the first), so the chunks run in plan order.
  int64_t k_begin = 0;
  int64_t row_stride = 0;
  bool accumulate = false;
  // x is stored transposed, [k, rows] (codegen/transposed_x_plan.h): cuBLASLt reads it as its
  // transposed B operand. IEEE f32 GEMMs only (cuBLAS's CUDA-core SGEMM runs faster so).
  bool x_transposed = false;
  // w is stored transposed, [k, n] (a param derived from the weight: Buffer::transpose_of), read
  // as cuBLASLt's untransposed A operand. Only with x_transposed (cuBLAS's "NT" SGEMM).
  bool w_transposed = false;
  int64_t stored_k() const { return tf32x3 ? 3 * k : k; }
  int64_t stored_row() const { return row_stride > 0 ? row_stride : stored_k(); }
  // Whether cuBLASLt's C enters (beta = 1): a residual, or y itself for a later K-chunk.
  bool adds_c() const { return residual >= 0 || accumulate; }
};

// How a generated kernel is launched: one of the kinds of codegen/kernel_kinds.h.
using KernelKind = std::variant<Elementwise, RowReduction, SimtGemm, MmaGemm, GatedMmaGemm,
                                GatedGemm, FusedMlpMma, FusedMlpSimt>;

// One generated kernel. Its signature (but for GatedGemm's) is
//   extern "C" __global__ void NAME(const T0* in0, ..., const Tk* ink, T* out, long long n)
// where n is the element count of the output; inputs are full-size or row vectors.
struct KernelStep {
  std::string name;    // the __global__ function, also the IR symbol
  std::string source;  // a complete CUDA C++ translation unit
  // The __global__ function in the CUBIN this step launches: empty for `name`; else the name of
  // a step earlier in the plan that computes the same region on the same types, whose source
  // this step holds too, so NVRTC builds it once (codegen/plan_builder: share_identical_kernels).
  std::string symbol;
  const std::string& cubin_symbol() const { return symbol.empty() ? name : symbol; }
  std::vector<int> inputs;  // buffer indices, in parameter order
  int output = -1;
  int64_t row_len = 1;  // last dim of the iteration space (a GEMM's n)
  int vec = 1;          // elements per thread per access (16-byte accesses when > 1)
  KernelKind kind;      // what it is launched as
  std::vector<std::string> ops;       // IR op names it computes, in order
  std::vector<std::string> ir_nodes;  // IR value names it computes, in order

  // The kind's facts (codegen/kernel_kinds.h), whatever the kind.
  std::string_view kind_name() const {
    return std::visit([](const auto& kd) { return kd.kName; }, kind);
  }
  // The GEMM products it computes (a gated GEMM of either kernel computes two), 0 for no GEMM.
  int gemm_products() const {
    return std::visit([](const auto& kd) { return kd.kProducts; }, kind);
  }
  // The K of its products, 0 for no GEMM.
  int64_t product_k() const {
    return std::visit(
        [](const auto& kd) -> int64_t {
          if constexpr (std::decay_t<decltype(kd)>::kProducts > 0) return kd.k;
          else return 0;
        },
        kind);
  }
  // Multiply-adds per row of its output: its products' K times row_len, or a kind's own count
  // (a fused MLP's layers summed); 0 for no GEMM. Reports count 2 FLOPs each.
  int64_t macs_per_row() const {
    return std::visit(
        [&](const auto& kd) -> int64_t {
          if constexpr (requires { kd.macs_per_row; }) return kd.macs_per_row;
          else return kd.kProducts * product_k() * row_len;
        },
        kind);
  }
  // Bytes of dynamic shared memory its launch takes (0 for most kinds).
  int smem_bytes() const {
    return std::visit(
        [](const auto& kd) -> int {
          if constexpr (requires { kd.smem_bytes; }) return kd.smem_bytes;
          else return 0;
        },
        kind);
  }
  bool arch_specific() const {
    return std::visit([](const auto& kd) { return kd.kArchSpecific; }, kind);
  }
  // The kind if it is K, else nullptr.
  template <class K>
  const K* as() const { return std::get_if<K>(&kind); }
  // How its output is laid out: a pointwise kernel's store, row-major for every other kind.
  Store store() const {
    const auto* e = as<Elementwise>();
    return e ? e->store : Store::RowMajor;
  }
};

using Step = std::variant<GemmStep, KernelStep>;

// What a GEMM with epilogue `e` computes, as a step's ops: "matmul", then "bias", the
// activation and "residual" where it has them.
std::vector<std::string> gemm_ops(const ir::GemmEpilogue& e);

// Every buffer index a step names: what it reads first (a GEMM's x, w, bias, residual, -1 where
// it has none; a kernel's inputs), what it writes last; an accumulating GEMM also reads y,
// which is not listed twice. The refs form renumbers them in place.
std::vector<int> step_buffers(const Step& s);
std::vector<int*> step_buffer_refs(Step& s);

// SMs of the GPUs launches are sized for (Hopper SXM parts): grid caps and waves count them.
inline constexpr int64_t kGpuSms = 132;

struct LaunchDims {
  unsigned grid = 1, block = 256;
};
// Each kind's grid and block for `numel` output elements are declared by its generator
// (pointwise_kernel.h, reduction_kernel.h, small_gemm_kernel.h, mma_gemm_kernel.h; the gated
// GEMM's in gated_gemm_kernel.h, launched with its TMA descriptors by the executor).

// A choice kernel selection made (passes/select_kernels.h), with its measured reason, noted on
// the step it concerns: whether a GEMM runs as a generated kernel, two GEMMs and their gating
// kernel as one gated GEMM, an f32 GEMM as 3xTF32 or reading x (and w) transposed.
struct StepChoice {
  std::string step;   // the step's name, e.g. "gemm_h1"
  bool taken = false; // the generated kernel (or 3xTF32) was chosen over the plain GEMM
  std::string why;
};

struct Plan {
  std::string graph_name;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<int> inputs;   // buffer indices, in argument order
  std::vector<int> outputs;  // buffer indices, in return order
  std::vector<StepChoice> choices;
  int launches() const { return static_cast<int>(steps.size()); }
};

// `base`, or the first of base_2, base_3, ... not in `taken`; it joins `taken`. Two values can
// map to one identifier ("a.b" and "a_b"): kernel symbols are made unique with this.
std::string take_unique_name(std::set<std::string>& taken, const std::string& base);

// What is wrong with how `plan` stores its operands (codegen/transposed_x_plan.h), or nullopt: a
// buffer stored transposed must be written by a transposed-store kernel and read only as the x
// of GEMMs reading it so (never a 3xTF32 GEMM or a K-chunk); a transposed w is a param read with
// a transposed x; a param derived as a transpose is its source's [k, n]; a graph's inputs and
// outputs are row-major. Buffer indices must be valid. The executor and the fuzz targets check it.
std::optional<std::string> layout_error(const Plan& plan);

// Drops the intermediate buffers no step reads or writes, renumbering the rest.
void drop_unused_buffers(Plan& plan);

}  // namespace mlpc::codegen
