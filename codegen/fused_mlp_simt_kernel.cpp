#include "codegen/fused_mlp_simt_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "codegen/cuda_ops.h"
#include "ir/dtype.h"
#include "ir/error.h"

namespace mlpc::codegen {
namespace {

int cols_per_warp(const FusedMlpSimtConfig& c) { return 32 / c.rows_per_tile; }
int block_cols(const FusedMlpSimtConfig& c) { return c.warps * cols_per_warp(c); }

int64_t max_out_width(const FusedMlpSpec& spec) {
  int64_t w = 0;
  for (const FusedMlpLayer& l : spec.layers) w = std::max(w, l.n);
  return w;
}

// Layer i's input width, K.
int64_t layer_k(const FusedMlpSpec& spec, size_t i) {
  return i == 0 ? spec.in_width : spec.layers[i - 1].n;
}

// The widest activation a block holds: x, or a hidden layer's output.
int64_t max_buffer_width(const FusedMlpSpec& spec) {
  int64_t w = spec.in_width;
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i) w = std::max(w, spec.layers[i].n);
  return w;
}

// Floats per row of an activation buffer: padded by 4 so that the rows a warp stores into start
// in different banks.
int64_t buffer_stride(const FusedMlpSpec& spec) { return max_buffer_width(spec) + 4; }

int buffers(const FusedMlpSpec& spec) { return spec.layers.size() > 1 ? 2 : 1; }

// Where things lie in the block's shared memory, in floats: the activation buffers, then each
// layer's weight slice [block_cols, K] and bias slice [block_cols].
struct SmemLayout {
  std::vector<int64_t> weights, bias;  // per layer; bias -1 without one
  int64_t floats = 0;
};
SmemLayout smem_layout(const FusedMlpSpec& spec, const FusedMlpSimtConfig& c) {
  SmemLayout s;
  s.floats = int64_t{buffers(spec)} * c.rows_per_tile * buffer_stride(spec);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    s.weights.push_back(s.floats);
    s.floats += block_cols(c) * layer_k(spec, i);
    s.bias.push_back(spec.layers[i].bias ? s.floats : -1);
    if (spec.layers[i].bias) s.floats += block_cols(c);
  }
  return s;
}

// Blocks per cluster: enough for the widest layer's columns, rounded up to a power of two so that
// few cluster shapes occur (each a variant to test); an extra block idles in that layer.
int cluster_size(const FusedMlpSpec& spec, const FusedMlpSimtConfig& c) {
  const int64_t blocks = (max_out_width(spec) + block_cols(c) - 1) / block_cols(c);
  int size = 1;
  while (size < blocks) size *= 2;
  return size;
}

// Why the kernel cannot compute `spec` with `c` on any arch, or nullopt.
std::optional<std::string> refusal(const FusedMlpSpec& spec, const FusedMlpSimtConfig& c) {
  if (!(c.rows_per_tile == 4 || c.rows_per_tile == 8 || c.rows_per_tile == 16) ||
      !(c.warps == 2 || c.warps == 4 || c.warps == 8))
    return fmt::format("no such configuration: {} rows a tile, {} warps a block", c.rows_per_tile,
                       c.warps);
  if (spec.dtype != ir::DType::F32)
    return fmt::format("{} is not f32: this kernel computes in IEEE fp32 on the CUDA cores",
                       ir::dtype_name(spec.dtype));
  if (spec.layers.empty()) return std::string("no layers");
  if (spec.layers.size() > kFusedMlpSimtMaxLayers)
    return fmt::format("{} layers, more than {}: each is unrolled into the kernel",
                       spec.layers.size(), kFusedMlpSimtMaxLayers);
  std::vector<int64_t> widths{spec.in_width};
  for (const FusedMlpLayer& l : spec.layers) widths.push_back(l.n);
  for (int64_t w : widths)
    if (w <= 0 || w % 4 != 0)
      return fmt::format("width {} is not a positive multiple of 4 (rows are read as float4)", w);
  for (size_t i = 0; i < spec.layers.size(); ++i)
    if (const auto& act = spec.layers[i].act; act && !ir::is_gemm_activation(*act))
      return fmt::format("layer {}'s {} is not a GEMM activation", i + 1, ir::op_name(*act));
  if (spec.residual && spec.out_width() != spec.in_width)
    return fmt::format("a residual needs y as wide as x ({} vs {})", spec.out_width(),
                       spec.in_width);
  if (cluster_size(spec, c) > kMaxClusterSize)
    return fmt::format("width {} needs more than {} blocks of {} columns in a cluster",
                       max_out_width(spec), kMaxClusterSize, block_cols(c));
  const int64_t bytes = smem_layout(spec, c).floats * 4;
  if (bytes > kFusedMlpSimtMaxSmemBytes)
    return fmt::format("its weight slices and activations need {} bytes of shared memory a "
                       "block, more than {}",
                       bytes, kFusedMlpSimtMaxSmemBytes);
  return std::nullopt;
}

// What every kernel of this kind holds: cp.async, the warp's weight slices and its tile product.
constexpr const char* kHelpers = R"(
// Asynchronous copies to shared memory (sm_80): 16 or 4 bytes, zero-filled where !valid. One
// group per layer, committed in layer order, so a layer waits for its own group alone.
__device__ __forceinline__ void mlpc_cp_async16(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void mlpc_cp_async4(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void mlpc_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `kPending` of this thread's groups are still in flight.
template <int kPending>
__device__ __forceinline__ void mlpc_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Copies the warp's slice of a layer's weight W[N, K] and bias b[N] (b may be null): rows col0 ..
// col0 + kColsPerWarp - 1 to ws [kColsPerWarp, K], their biases to bs (zero past N).
template <int K, int N>
__device__ __forceinline__ void mlpc_load_slice(float* ws, float* bs, const float* w,
                                                const float* b, int col0, int lane) {
  constexpr int kChunks = kColsPerWarp * (K / 4);
#pragma unroll
  for (int i0 = 0; i0 < kChunks; i0 += 32) {
    const int i = i0 + lane, c = i / (K / 4), chunk = i % (K / 4);
    const bool valid = col0 + c < N;
    if (kChunks % 32 == 0 || i < kChunks)
      mlpc_cp_async16(ws + c * K + 4 * chunk, valid ? w + (col0 + c) * K + 4 * chunk : w, valid);
  }
  if (b != nullptr && lane < kColsPerWarp)
    mlpc_cp_async4(bs + lane, col0 + lane < N ? b + col0 + lane : b, col0 + lane < N);
}

// One step of the warp's reduction of 32 sums: lanes kHalf apart swap halves of acc[0, 2 kHalf)
// (the lane with bit kHalf keeps the upper half) and add, leaving acc[0, kHalf).
template <int kHalf>
__device__ __forceinline__ void mlpc_halve(float (&acc)[32], int lane) {
  const bool upper = (lane & kHalf) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float lo = acc[i], hi = acc[i + kHalf];
    acc[i] = (upper ? hi : lo) + __shfl_xor_sync(0xffffffffu, upper ? lo : hi, kHalf);
  }
  if constexpr (kHalf > 1) mlpc_halve<kHalf / 2>(acc, lane);
}

// The warp's kRows x kColsPerWarp outputs of a layer, before the bias, from its input h
// [kRows, K] and its weight slice ws [kColsPerWarp, K]: each lane sums its 16-byte chunks of K
// (lane, lane + 32, ...) for all 32 outputs, then the warp halves the 32 sums five times, so
// lane l returns the whole sum of output l: row l / kColsPerWarp, column col0 + l % kColsPerWarp.
template <int K>
__device__ __forceinline__ float mlpc_warp_tile(const float* h, const float* ws, int lane) {
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int j = 0; j < (K / 4 + 31) / 32; ++j) {
    const int chunk = lane + 32 * j;
    if (chunk < K / 4) {
      float4 w[kColsPerWarp];
#pragma unroll
      for (int c = 0; c < kColsPerWarp; ++c)
        w[c] = *reinterpret_cast<const float4*>(ws + c * K + 4 * chunk);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 x = *reinterpret_cast<const float4*>(h + r * kStride + 4 * chunk);
#pragma unroll
        for (int c = 0; c < kColsPerWarp; ++c) {
          float& a = acc[r * kColsPerWarp + c];
          a = fmaf(x.x, w[c].x, a);
          a = fmaf(x.y, w[c].y, a);
          a = fmaf(x.z, w[c].z, a);
          a = fmaf(x.w, w[c].w, a);
        }
      }
    }
  }
  mlpc_halve<16>(acc, lane);
  return acc[0];
}
)";

constexpr const char* kClusterHelpers = R"(
// The cluster barrier, split: arrive (release: this thread's stores before it are seen by
// whoever waits) and wait (acquire). The relaxed arrive orders nothing: it only says this block
// runs, so its shared memory may be written.
__device__ __forceinline__ void mlpc_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void mlpc_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void mlpc_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Stores v at p, a shared-memory address of this block, in every block of the cluster.
__device__ __forceinline__ void mlpc_store_to_cluster(float* p, float v) {
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(p));
#pragma unroll
  for (unsigned q = 0; q < kCluster; ++q) {
    unsigned remote;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(q));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
  }
}
)";

std::string layer_formula(const FusedMlpSpec& spec, size_t i) {
  const FusedMlpLayer& l = spec.layers[i];
  std::string v = fmt::format("{} . W{}^T", i == 0 ? "x" : fmt::format("h{}", i), i + 1);
  if (l.bias) v += fmt::format(" + b{}", i + 1);
  if (l.act) v = fmt::format("{}({})", ir::op_name(*l.act), v);
  const bool last = i + 1 == spec.layers.size();
  if (last && spec.residual) v += " + x";
  return fmt::format("//   {} = {}   [M, {}]\n", last ? "y" : fmt::format("h{}", i + 1), v, l.n);
}

}  // namespace

bool fused_mlp_simt_fits(const FusedMlpSpec& spec, std::string_view arch, std::string* why_not,
                         const FusedMlpSimtConfig& config) {
  std::optional<std::string> why = refusal(spec, config);
  int sm = 0;
  if (!why && !(std::sscanf(std::string(arch).c_str(), "sm_%d", &sm) == 1 && sm >= 90))
    why = fmt::format("{} has no thread-block clusters (sm_90 on)", arch);
  if (why && why_not) *why_not = *why;
  return !why;
}

std::optional<KernelStep> generate_fused_mlp_simt_kernel(const FusedMlpSpec& spec,
                                                         const std::string& name,
                                                         const FusedMlpSimtConfig& config) {
  if (refusal(spec, config)) return std::nullopt;
  const size_t layers = spec.layers.size();
  const int cluster = cluster_size(spec, config);
  const int threads = config.warps * 32;
  const SmemLayout smem = smem_layout(spec, config);
  // Columns the warps of a cluster cover: a layer narrower leaves the warps past it idle.
  const int64_t cluster_cols = int64_t{cluster} * block_cols(config);

  KernelStep k;
  k.name = name;
  int param = 0;
  std::vector<int> weight_param(layers), bias_param(layers, -1);
  k.inputs.push_back(param++);  // x
  int64_t macs = 0;
  for (size_t i = 0; i < layers; ++i) {
    weight_param[i] = param;
    k.inputs.push_back(param++);
    if (spec.layers[i].bias) {
      bias_param[i] = param;
      k.inputs.push_back(param++);
    }
    macs += spec.layers[i].n * layer_k(spec, i);
    const std::vector<std::string> ops =
        gemm_ops({.bias = spec.layers[i].bias, .act = spec.layers[i].act});
    k.ops.insert(k.ops.end(), ops.begin(), ops.end());
  }
  if (spec.residual) k.ops.emplace_back("residual");
  k.output = param;
  k.row_len = spec.out_width();
  k.vec = 4;
  k.kind = FusedMlpSimt{.k = spec.in_width,
                        .macs_per_row = macs,
                        .rows_per_tile = config.rows_per_tile,
                        .cluster = cluster,
                        .threads = threads,
                        .smem_bytes = static_cast<int>(smem.floats * 4)};

  std::string src = fmt::format(
      "// {}: generated by mlpc. A whole MLP in IEEE fp32 (fmaf on the CUDA cores), x [M, {}]:\n",
      name, spec.in_width);
  for (size_t i = 0; i < layers; ++i) src += layer_formula(spec, i);
  src += fmt::format(
      "// A cluster of {c} blocks computes a tile of {r} rows through every layer. Warp w of\n"
      "// block q computes columns (w * {c} + q) * {cw} .. + {cw1} of each layer from its\n"
      "// slice of the weights (all layers' slices copied in at the start), its lanes\n"
      "// splitting K, and stores them into every block's shared memory, so after one cluster\n"
      "// barrier each block holds the whole layer output, the next layer's input.\n",
      fmt::arg("c", cluster), fmt::arg("r", config.rows_per_tile),
      fmt::arg("cw", cols_per_warp(config)), fmt::arg("cw1", cols_per_warp(config) - 1));
  src += fmt::format(
      "\nconstexpr int kRows = {};  // rows of a cluster's tile\n"
      "constexpr int kColsPerWarp = {};  // columns of a warp's outputs: kRows x them = 32\n"
      "constexpr int kThreads = {};  // per block\n"
      "constexpr int kCluster = {};  // blocks per cluster\n"
      "constexpr int kStride = {};  // floats per row of an activation buffer\n"
      "constexpr int kIn = {}, kOut = {};  // widths of x and y\n",
      config.rows_per_tile, cols_per_warp(config), threads, cluster, buffer_stride(spec),
      spec.in_width, spec.out_width());
  src += kHelpers;
  if (layers > 1) src += kClusterHelpers;
  std::set<ir::Op> helpers_done;
  for (const FusedMlpLayer& l : spec.layers)
    if (l.act && !cuda_helper(*l.act).empty() && helpers_done.insert(*l.act).second)
      src += "\n" + std::string(cuda_helper(*l.act));

  // The signature: x, each layer's weight and bias, y, n.
  src += fmt::format(
      "\nextern \"C\" __global__ void __cluster_dims__({}, 1, 1) __launch_bounds__({}) {}(\n"
      "    const float* __restrict__ in0,  // x [M, {}]\n",
      cluster, threads, name, spec.in_width);
  for (size_t i = 0; i < layers; ++i) {
    src += fmt::format("    const float* __restrict__ in{},  // W{} [{}, {}]\n", weight_param[i],
                       i + 1, spec.layers[i].n, layer_k(spec, i));
    if (bias_param[i] >= 0)
      src += fmt::format("    const float* __restrict__ in{},  // b{} [{}]\n", bias_param[i],
                         i + 1, spec.layers[i].n);
  }
  src += fmt::format("    float* __restrict__ out,  // y [M, {}]\n    long long n) {{\n",
                     spec.out_width());
  src +=
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
      "  const int rank = static_cast<int>(blockIdx.x % kCluster);  // in the cluster\n"
      "  const int col0 = (warp * kCluster + rank) * kColsPerWarp;\n"
      "  // The output this lane stores, in every layer.\n"
      "  const int row = lane / kColsPerWarp, col = col0 + lane % kColsPerWarp;\n"
      "  const long long rows = n / kOut;\n"
      "  const long long row0 = static_cast<long long>(blockIdx.x / kCluster) * kRows;\n";
  src += fmt::format(
      "  // Shared memory ({} bytes): a layer's input and output in turn, [kRows, kStride]\n"
      "  // each (x first), then each layer's weight and bias slices; w<i> and b<i> are this\n"
      "  // warp's rows.\n"
      "  extern __shared__ __align__(16) float smem[];\n"
      "  float* const act0 = smem;\n",
      smem.floats * 4);
  if (layers > 1) src += "  float* const act1 = smem + kRows * kStride;\n";
  for (size_t i = 0; i < layers; ++i) {
    src += fmt::format("  float* const w{} = smem + {} + warp * kColsPerWarp * {};\n", i + 1,
                       smem.weights[i], layer_k(spec, i));
    if (smem.bias[i] >= 0)
      src += fmt::format("  float* const b{} = smem + {} + warp * kColsPerWarp;\n", i + 1,
                         smem.bias[i]);
  }
  if (layers > 1) src += "  mlpc_cluster_arrive_relaxed();\n";

  src +=
      "  // Everything this block reads from global memory, in flight at once: x's rows (zero\n"
      "  // past the last) with layer 1's weights, then each layer's, a group each.\n"
      "  constexpr int kXChunks = kRows * (kIn / 4);\n"
      "#pragma unroll\n"
      "  for (int i0 = 0; i0 < kXChunks; i0 += kThreads) {\n"
      "    const int i = i0 + threadIdx.x, r = i / (kIn / 4), chunk = i % (kIn / 4);\n"
      "    if (kXChunks % kThreads == 0 || i < kXChunks)\n"
      "      mlpc_cp_async16(act0 + r * kStride + 4 * chunk,\n"
      "                      row0 + r < rows ? in0 + (row0 + r) * kIn + 4 * chunk : in0,\n"
      "                      row0 + r < rows);\n"
      "  }\n";
  for (size_t i = 0; i < layers; ++i) {
    const bool bias = spec.layers[i].bias;
    const std::string load = fmt::format(
        "mlpc_load_slice<{}, {}>(w{}, {}, in{}, {}, col0, lane);", layer_k(spec, i),
        spec.layers[i].n, i + 1, bias ? fmt::format("b{}", i + 1) : "nullptr", weight_param[i],
        bias ? fmt::format("in{}", bias_param[i]) : "nullptr");
    // A warp whose columns all lie past n_i has no slice of layer i.
    if (spec.layers[i].n < cluster_cols)
      src += fmt::format("  if (col0 < {}) {}\n", spec.layers[i].n, load);
    else
      src += fmt::format("  {}\n", load);
    src += "  mlpc_cp_async_commit();\n";
  }

  for (size_t i = 0; i < layers; ++i) {
    const FusedMlpLayer& l = spec.layers[i];
    const bool last = i + 1 == layers;
    src += fmt::format("  // Layer {}: [M, {}] -> [M, {}]{}{}\n", i + 1, layer_k(spec, i), l.n,
                       l.bias ? ", bias" : "",
                       l.act ? fmt::format(", {}", ir::op_name(*l.act)) : "");
    // Groups after this layer's may still be in flight. The first layer reads x, copied by every
    // warp; later ones only what the warp's own lanes copied (and what the cluster barrier
    // published).
    src += fmt::format("  mlpc_cp_async_wait<{}>();\n  {}\n", layers - 1 - i,
                       i == 0 ? "__syncthreads();" : "__syncwarp();");
    if (i == 0 && spec.residual)
      src += "  const float res = col < kOut ? act0[row * kStride + col] : 0.0f;  // x\n";
    src += "  {\n";
    std::string compute =
        fmt::format("mlpc_warp_tile<{}>(act{}, w{}, lane)", layer_k(spec, i), i % 2, i + 1);
    if (l.bias) compute += fmt::format(" + b{}[lane % kColsPerWarp]", i + 1);
    if (l.act) {  // every GEMM activation is a call: its argument needs no parentheses
      ir::Node node;
      node.op = *l.act;
      compute = cuda_expr(node, {compute});
    }
    if (last && spec.residual) compute = fmt::format("{} + res", compute);
    // The warp's lanes compute together (shuffles), only then do some of them store; a warp with
    // no columns in this layer computes nothing.
    const bool idle_warps = l.n < cluster_cols;
    if (last) {
      const char* pad = idle_warps ? "  " : "";
      if (idle_warps) src += "    if (col0 < kOut) {\n";
      src += fmt::format(
          "{0}    const float v = {1};\n"
          "{0}    if (row0 + row < rows && col < kOut) out[(row0 + row) * kOut + col] = v;\n",
          pad, compute);
      if (idle_warps) src += "    }\n";
      src += "  }\n";
      break;
    }
    if (idle_warps)
      src += fmt::format("    const float v = col0 < {} ? {} : 0.0f;\n", l.n, compute);
    else
      src += fmt::format("    const float v = {};\n", compute);
    if (i == 0) src += "    mlpc_cluster_wait();  // every block of the cluster runs\n";
    src += fmt::format(
        "    {}mlpc_store_to_cluster(act{} + row * kStride + col, v);\n"
        "    mlpc_cluster_arrive();\n"
        "    mlpc_cluster_wait();  // the layer's output is whole in every block\n"
        "  }}\n",
        idle_warps ? fmt::format("if (col < {}) ", l.n) : "", (i + 1) % 2);
  }
  src += "}\n";
  k.source = std::move(src);
  return k;
}

LaunchDims launch_dims(const FusedMlpSimt& f, const KernelStep& k, int64_t numel) {
  const int64_t rows = numel / std::max<int64_t>(k.row_len, 1);
  const int64_t tiles = (rows + f.rows_per_tile - 1) / std::max(f.rows_per_tile, 1);
  // A grid of 2^31 - 1 blocks holds more rows than any GPU's memory holds rows of y.
  MLPC_ASSERT(tiles * f.cluster < (int64_t{1} << 31), "fused MLP: too many rows for one grid");
  return {static_cast<unsigned>(std::max<int64_t>(tiles, 1) * f.cluster),
          static_cast<unsigned>(f.threads)};
}

}  // namespace mlpc::codegen
