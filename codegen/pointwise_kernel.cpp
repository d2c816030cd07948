#include "codegen/pointwise_kernel.h"
#include "ir/identifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "codegen/cuda_ops.h"
#include "codegen/tf32x3.h"
#include "ir/error.h"

namespace mlpc::codegen {
namespace {

// A C identifier for an IR value: names may hold '.' or start with a digit.
std::string var(const std::string& ir_name) { return "v_" + ir::c_identifier_chars(ir_name); }

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

// The body of a transposed-store kernel after its signature: tiles of kRows rows x kCols = 32 *
// kVec columns of the [rows, row_len] space, read a row at a time (a warp reads kCols columns,
// kVec per lane: coalesced), computed into shared memory, then written a column at a time
// (kRows / kVec lanes write one column's kRows values, kVec each: coalesced again) into the
// [row_len, rows] output. rows = n / row_len at run time; a store falls back to single elements
// where rows leaves a vector unaligned. `loads` reads x{j}[kVec] at element index i, `compute`
// is the element function of lane q of them; kRowLen is declared before.
std::string transposed_store_loop(const std::string& loads, const std::string& compute,
                                  TransposeTile tile) {
  MLPC_ASSERT((tile.vec == 1 || tile.vec == 4) && tile.rows % tile.vec == 0 &&
                  tile.rows / tile.vec <= 32 && 32 % (tile.rows / tile.vec) == 0 &&
                  tile.rows % 8 == 0,
              "unsupported transposed tile");
  return fmt::format(R"(  constexpr int kVec = {vec}, kRows = {rows}, kCols = 32 * kVec;  // the tile
  constexpr int kSteps = kRows / 8;  // 8 warps
  constexpr int kLanesPerCol = kRows / kVec;  // lanes writing one column of the tile
  constexpr long long kColTiles = (kRowLen + kCols - 1) / kCols;
  __shared__ float tile[kRows][kCols + 1];  // +1: the column walk spreads over the banks
  const long long rows = n / kRowLen;
  const long long tiles = (rows + kRows - 1) / kRows * kColTiles;
  const bool aligned = rows % kVec == 0;  // whole vectors along the output's rows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {{
    const long long r0 = t / kColTiles * kRows, c0 = t % kColTiles * kCols;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {{
      const int tr = s * 8 + warp, tc = lane * kVec;
      const long long r = r0 + tr, c = c0 + tc;
      if (r < rows && c < kRowLen) {{  // kRowLen % kVec == 0: the whole vector is inside
        const long long i = r * kRowLen + c;
{loads}#pragma unroll
        for (int q = 0; q < kVec; ++q) tile[tr][tc + q] = {compute};
      }}
    }}
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {{
      const int tc = (s * 8 + warp) * (32 / kLanesPerCol) + lane / kLanesPerCol;
      const int tr = lane % kLanesPerCol * kVec;
      const long long r = r0 + tr, c = c0 + tc;
      if (c >= kRowLen || r >= rows) continue;
      float v[kVec];
#pragma unroll
      for (int q = 0; q < kVec; ++q) v[q] = tile[tr + q][tc];
      if (aligned && r + kVec <= rows) {{
        mlpc_store<kVec>(out + c * rows + r, v);
      }} else {{
        for (int q = 0; q < kVec && r + q < rows; ++q) mlpc_from_float(v[q], &out[c * rows + r + q]);
      }}
    }}
    __syncthreads();  // the tile is refilled by the next pass
  }}
}}
)",
                     fmt::arg("vec", tile.vec), fmt::arg("rows", tile.rows),
                     fmt::arg("loads", loads), fmt::arg("compute", compute));
}

}  // namespace

std::string element_var(const std::string& ir_name) { return var(ir_name); }

std::string element_body(const ir::Graph& body) {
  std::string src;
  for (const ir::Node& n : body.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return || n.op == ir::Op::Slice) continue;
    std::vector<std::string> args;
    for (ir::NodeId o : n.operands) args.push_back(var(body.node(o).name));
    src += fmt::format("  const float {} = {};\n", var(n.name), cuda_expr(n, args));
  }
  return src + fmt::format("  return {};\n", var(body.node(body.outputs()[0]).name));
}

KernelStep generate_pointwise_kernel(const ir::Graph& g, const ir::Node& fused,
                                     const PointwiseOptions& options) {
  MLPC_ASSERT(fused.op == ir::Op::FusedPointwise && fused.body, "not a fused.pointwise node");
  const bool split = options.store == Store::Tf32x3Split;
  MLPC_ASSERT(!split || fused.type.dtype == ir::DType::F32,
              "TF32 parts of a non-f32 value %" + fused.name);
  const bool transposed = options.store == Store::Transposed;
  const ir::Graph& body = *fused.body;
  const ir::Shape& space = fused.type.shape;
  const std::string space_str = ir::to_string(fused.type, g.batch_symbol);

  KernelStep k;
  k.name = fused.symbol;
  if (split) k.kind = Elementwise{.store = Store::Tf32x3Split};
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
  const int64_t chunk = options.tf32x3_chunk > 0 ? options.tf32x3_chunk : k.row_len;
  MLPC_ASSERT(!split || k.row_len % chunk == 0,
              "TF32 chunk does not divide the row of %" + fused.name);
  if (split && chunk % vec != 0) vec = 1;  // the three parts of a vector share a chunk
  // A transposed store reads and writes its tile in vectors of tile.vec where every row of every
  // operand starts aligned to one (else element by element, in tiles of 32 x 32).
  TransposeTile tile = options.transposed_tile;
  if (transposed) {
    bool aligned = k.row_len % tile.vec == 0;
    for (const Load& l : loads)
      if (l.access == Access::Strided) aligned &= l.ld % tile.vec == 0 && l.offset % tile.vec == 0;
    if (!aligned) tile = {.rows = 32, .vec = 1};
    vec = 1;  // the grid-stride vector loop is not used
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
  if (k.ops.empty()) src += "//   no op: the value itself\n";  // a split kernel (codegen/tf32x3_plan)
  src += fmt::format("// Reads {}; writes %{} {}{}.\n", fmt::join(reads, ", "), fused.name,
                     space_str,
                     split ? fmt::format(" as its three TF32 parts [lo | hi | hi] per {}-column "
                                         "chunk of each row", chunk)
                     : transposed ? fmt::format(" stored transposed, as [{}, rows]", k.row_len)
                                  : "");
  src += cuda_includes();
  src += "\n";
  for (ir::DType t : dtypes) src += float_conversions(t);
  if (vec > 1 || split || transposed) src += "\n" + std::string(vector_access());
  if (split) src += "\n" + std::string(tf32x3_device_helpers());
  std::set<ir::Op> helpers_done;
  for (const ir::Node& n : body.nodes)
    if (!cuda_helper(n.op).empty() && helpers_done.insert(n.op).second)
      src += "\n" + std::string(cuda_helper(n.op));

  // The computation for one element, shared by the vector loop and the scalar tail.
  std::vector<std::string> params;
  for (const Load& l : loads) params.push_back("float " + l.var);
  src += fmt::format("\n__device__ __forceinline__ float {}_element({}) {{\n", k.name,
                     fmt::join(params, ", "));
  src += element_body(body) + "}\n";

  // The kernel: a grid-stride loop over the output's n elements.
  src += kernel_signature(k.name, 256, body, ins, fused);
  if (any_row || split || transposed)
    src += fmt::format("  constexpr long long kRowLen = {};\n", k.row_len);
  if (split)
    src += fmt::format("  constexpr long long kChunk = {};  // K-chunk of the split layout\n"
                       "  n /= 3;  // out holds three TF32 parts per element of the space\n",
                       chunk);
  auto index = [&](const Load& l, const char* at) {
    switch (l.access) {
      case Access::Full: return std::string(at);
      case Access::Row: return fmt::format("{} % kRowLen", at);
      case Access::Strided:
        return fmt::format("{0} / kRowLen * {1} + {2} + {0} % kRowLen", at, l.ld, l.offset);
    }
    return std::string(at);
  };
  if (transposed) {
    std::string vec_loads;
    std::vector<std::string> lanes;
    for (size_t j = 0; j < loads.size(); ++j) {
      vec_loads += fmt::format("        float x{0}[kVec];\n        mlpc_load<kVec>(in{1} + ({2}), x{0});\n",
                               j, loads[j].input, index(loads[j], "i"));
      lanes.push_back(fmt::format("x{}[q]", j));
    }
    src += transposed_store_loop(vec_loads,
                                 fmt::format("{}_element({})", k.name, fmt::join(lanes, ", ")),
                                 tile);
    // The tile it fell back to, where it did.
    k.kind = Elementwise{.store = Store::Transposed, .transpose_tile = tile};
    k.source = std::move(src);
    return k;
  }
  std::vector<std::string> scalar_args;
  for (const Load& l : loads)
    scalar_args.push_back(fmt::format("mlpc_to_float(in{}[{}])", l.input, index(l, "e")));
  std::string scalar_stmt =
      split ? fmt::format("{{ const float y = {}_element({}); mlpc_store_tf32x3<1>(out, e, kRowLen, "
                          "kChunk, &y); }}", k.name, fmt::join(scalar_args, ", "))
            : fmt::format("mlpc_from_float({}_element({}), &out[e]);", k.name,
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
                       "    {};\n  }}\n",
                       k.name, fmt::join(lanes, ", "),
                       split ? "mlpc_store_tf32x3<kVec>(out, i, kRowLen, kChunk, y)"
                             : "mlpc_store<kVec>(out + i, y)");
    src += "  // Scalar tail: the thread that stopped inside the last partial vector.\n";
    src += "  for (long long e = i; e < n; ++e) " + scalar_stmt + "\n}\n";
  }
  k.source = std::move(src);
  return k;
}

LaunchDims launch_dims(const Elementwise& e, const KernelStep& k, int64_t numel) {
  constexpr int64_t kBlock = 256;
  constexpr int64_t kMaxGrid = kGpuSms * 32;  // 32 blocks per SM; beyond that, the kernel loops
  if (e.store == Store::Tf32x3Split) numel /= 3;  // threads cover the space, not its three parts
  if (e.store == Store::Transposed) {  // a block per tile (transposed_store_loop)
    const int64_t tile = int64_t{e.transpose_tile.rows} * e.transpose_tile.cols();
    const int64_t tiles = (numel + tile - 1) / tile;
    return {static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, kMaxGrid)),
            static_cast<unsigned>(kBlock)};
  }
  int64_t work = (numel + k.vec - 1) / k.vec;
  int64_t grid = std::clamp<int64_t>((work + kBlock - 1) / kBlock, 1, kMaxGrid);
  return {static_cast<unsigned>(grid), static_cast<unsigned>(kBlock)};
}

}  // namespace mlpc::codegen
