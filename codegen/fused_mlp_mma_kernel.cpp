#include "codegen/fused_mlp_mma_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/cuda_ops.h"
#include "ir/dtype.h"
#include "ir/graph.h"

namespace mlpc::codegen {
namespace {

constexpr int64_t kRowPad = 8;  // elements past each weight row in shared memory (16 bytes)

// A layer as the kernel computes it: k = its input width, n its output width padded to the MMA's
// N (8), n_real the spec's.
struct Dims {
  int64_t k = 0, n = 0, n_real = 0;
  int64_t stride() const { return k + kRowPad; }
  int64_t weight_bytes() const { return n * stride() * 2; }
};

std::vector<Dims> layer_dims(const FusedMlpSpec& s) {
  std::vector<Dims> d;
  int64_t k = s.in_width;
  for (const FusedMlpLayer& l : s.layers) {
    d.push_back({k, (l.n + 7) / 8 * 8, l.n});
    k = l.n;
  }
  return d;
}

int64_t smem_bytes(const FusedMlpSpec& s) {
  const std::vector<Dims> dims = layer_dims(s);
  int64_t bytes = 0;
  for (size_t i = 0; i < dims.size(); ++i)
    bytes += dims[i].weight_bytes() + (s.layers[i].bias ? dims[i].n * 4 : 0);
  return bytes;
}

int64_t max_width(const FusedMlpSpec& s) {
  int64_t w = s.in_width;
  for (const FusedMlpLayer& l : s.layers) w = std::max(w, l.n);
  return w;
}

// m16 tiles a warp takes (R): as many as keep R * the widest layer within kFusedMlpMaxWidth.
int64_t tiles_per_warp(const FusedMlpSpec& s) {
  return std::clamp<int64_t>(kFusedMlpMaxWidth / max_width(s), 1, 4);
}

bool refuse(std::string* why_not, std::string why) {
  if (why_not) *why_not = std::move(why);
  return false;
}

// GELU (tanh) as x * sigmoid(2u), since 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) exactly: an exp
// and a division where tanhf is a long branchy sequence, inlined at every element of every
// layer (the kernel's time and its NVRTC build). Within a few fp32 ulps, far below the f16/bf16
// rounding that follows; the exponent is capped so the fast division never sees infinity.
constexpr const char* kGeluTanhFast =
    "__device__ __forceinline__ float mlpc_gelu_tanh_fast(float x) {\n"
    "  const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);\n"
    "  return __fdividef(x, 1.0f + __expf(fminf(-2.0f * inner, 80.0f)));\n}\n";

// The fp32 expression of `act` applied to `v` (the value itself without one).
std::string act_expr(const std::optional<ir::Op>& act, const std::string& v) {
  if (!act) return v;
  if (*act == ir::Op::GeluTanh) return fmt::format("mlpc_gelu_tanh_fast({})", v);
  ir::Node n;
  n.op = *act;
  return cuda_expr(n, {v});
}

// The device function `act_expr` calls for `act`, if any.
std::string act_helper(ir::Op act) {
  return act == ir::Op::GeluTanh ? kGeluTanhFast : std::string(cuda_helper(act));
}

std::string act_name(const std::optional<ir::Op>& act) {
  return act ? std::string(ir::op_name(*act)) : "none";
}

// The device functions every fused-MLP kernel uses: the MMA, ldmatrix, packing two floats into
// the dtype's pair (optionally through a ReLU, one instruction either way), and the layer's
// product loop.
std::string device_library(ir::DType dt) {
  const std::string mma_type = dt == ir::DType::BF16 ? "bf16" : "f16";
  return fmt::format(R"(// c += a . b for one m16n8k16 tile (fragments as the PTX ISA lays them out).
__device__ __forceinline__ void mlpc_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {{
  asm("mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {{%0, %1, %2, %3}}, "
      "{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}}

// Four (two) 8x8 matrices of 16-bit elements from shared memory: lane l gives the address of row
// l % 8 of matrix l / 8 and receives row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of each.
__device__ __forceinline__ void mlpc_ldmatrix_x4(unsigned& d0, unsigned& d1, unsigned& d2,
                                                 unsigned& d3, unsigned addr) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0, %1, %2, %3}}, [%4];"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(addr));
}}
__device__ __forceinline__ void mlpc_ldmatrix_x2(unsigned& d0, unsigned& d1, unsigned addr) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{%0, %1}}, [%2];"
               : "=r"(d0), "=r"(d1)
               : "r"(addr));
}}

// lo and hi rounded to {0} and packed, lo in the low half (the lower column).
__device__ __forceinline__ unsigned mlpc_pack2(float lo, float hi) {{
  unsigned d;
  asm("cvt.rn.{0}x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}}
// The same through a ReLU.
__device__ __forceinline__ unsigned mlpc_pack2_relu(float lo, float hi) {{
  unsigned d;
  asm("cvt.rn.relu.{0}x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}}

// One layer's products for R m16 tiles: c[r][j] += a[r] . W^T over K, W's n8 tile j from shared
// memory at w (this lane's ldmatrix address for tile 0, k 0; rows of S elements). An x4 ldmatrix
// gives the B fragments of two k16 slices of one n8 tile, used by all R m16 tiles.
template <int R, int K, int NT, int S>
__device__ __forceinline__ void mlpc_layer(float (&c)[R][NT][4], const unsigned (&a)[R][K / 16][4],
                                           unsigned w) {{
#pragma unroll
  for (int s = 0; s + 2 <= K / 16; s += 2)
#pragma unroll
    for (int j = 0; j < NT; ++j) {{
      unsigned b0, b1, b2, b3;
      mlpc_ldmatrix_x4(b0, b1, b2, b3, w + 2 * (8 * j * S + 16 * s));
#pragma unroll
      for (int r = 0; r < R; ++r) {{
        mlpc_mma(c[r][j], a[r][s], b0, b1);
        mlpc_mma(c[r][j], a[r][s + 1], b2, b3);
      }}
    }}
  if constexpr (K % 32 != 0) {{
    constexpr int s = K / 16 - 1;
#pragma unroll
    for (int j = 0; j < NT; ++j) {{
      unsigned b0, b1;
      mlpc_ldmatrix_x2(b0, b1, w + 2 * (8 * j * S + 16 * s));
#pragma unroll
      for (int r = 0; r < R; ++r) mlpc_mma(c[r][j], a[r][s], b0, b1);
    }}
  }}
}}

// Accumulators starting at the bias (fp32 in shared memory), or at zero.
template <int R, int NT>
__device__ __forceinline__ void mlpc_init(float (&c)[R][NT][4], const float* bias, int q) {{
#pragma unroll
  for (int j = 0; j < NT; ++j) {{
    const float2 b = bias ? *reinterpret_cast<const float2*>(bias + 8 * j + 2 * q)
                          : make_float2(0.0f, 0.0f);
#pragma unroll
    for (int r = 0; r < R; ++r) c[r][j][0] = b.x, c[r][j][1] = b.y, c[r][j][2] = b.x, c[r][j][3] = b.y;
  }}
}}

// A layer's accumulators, through its activation and rounded, as the next layer's A fragments:
// n8 tiles 2s and 2s + 1 of the output are k16 slice s of the input.
template <bool Relu, int R, int NT, typename Act>
__device__ __forceinline__ void mlpc_to_a(const float (&c)[R][NT][4], unsigned (&a)[R][NT / 2][4],
                                          Act act) {{
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int s = 0; s < NT / 2; ++s)
#pragma unroll
      for (int i = 0; i < 4; ++i) {{
        const float* v = &c[r][2 * s + i / 2][2 * (i % 2)];
        if constexpr (Relu) a[r][s][i] = mlpc_pack2_relu(v[0], v[1]);
        else a[r][s][i] = mlpc_pack2(act(v[0]), act(v[1]));
      }}
}}

// Four 16-byte pieces of a weight [NReal, K], the i-th 8 elements for i = i0, i0 + blockDim.x,
// ... (zeros past NReal rows or `total` pieces): four loads in flight per thread.
template <int NReal, int K, typename T>
__device__ __forceinline__ void mlpc_load4(const T* __restrict__ w, int i0, int total,
                                           uint4 (&v)[4]) {{
  constexpr int kC = K / 8;
#pragma unroll
  for (int u = 0; u < 4; ++u) {{
    const int i = i0 + u * blockDim.x;
    v[u] = i < total && i / kC < NReal
               ? *reinterpret_cast<const uint4*>(w + (long long)(i / kC) * K + 8 * (i % kC))
               : make_uint4(0u, 0u, 0u, 0u);
  }}
}}

// Rows [0, N) of a weight [NReal, K] into shared memory at dst, in rows of S elements (zeros past
// NReal), 16 bytes at a time, four loads in flight per thread.
template <int NReal, int N, int K, int S, typename T>
__device__ __forceinline__ void mlpc_stage(const T* __restrict__ w, unsigned char* dst) {{
  constexpr int kC = K / 8, kTotal = N * kC;
  for (int i0 = threadIdx.x; i0 < kTotal; i0 += 4 * blockDim.x) {{
    uint4 v[4];
    mlpc_load4<NReal, K>(w, i0, kTotal, v);
#pragma unroll
    for (int u = 0; u < 4; ++u) {{
      const int i = i0 + u * blockDim.x;
      if (i < kTotal) *reinterpret_cast<uint4*>(dst + 2 * ((i / kC) * S + 8 * (i % kC))) = v[u];
    }}
  }}
}}

// The first layer's weight [N, K] the same way, each row's k permuted as the threads load x: in a
// 32-wide chunk, thread q's 8 elements 8q..8q+7 are the A fragment's k 2q, 8+2q, 16+2q, 24+2q (two
// each); in a 16-wide tail, thread q's 4q..4q+3 are k 2q, 8+2q.
template <int NReal, int N, int K, int S, typename T>
__device__ __forceinline__ void mlpc_stage_first(const T* __restrict__ w, unsigned char* dst) {{
  constexpr int kC = K / 8, kTotal = N * kC, kFull = K / 32 * 4;  // 8-chunks in 32-wide chunks
  for (int i0 = threadIdx.x; i0 < kTotal; i0 += 4 * blockDim.x) {{
    uint4 v[4];
    mlpc_load4<NReal, K>(w, i0, kTotal, v);
#pragma unroll
    for (int u = 0; u < 4; ++u) {{
      const int i = i0 + u * blockDim.x, c = i % kC;
      if (i >= kTotal) continue;
      // Where the chunk's four element pairs go, in elements of the row.
      int at[4];
      if (c < kFull) {{
        const int base = c / 4 * 32, q = c % 4;
        at[0] = base + 2 * q, at[1] = base + 8 + 2 * q, at[2] = base + 16 + 2 * q, at[3] = base + 24 + 2 * q;
      }} else {{
        const int base = kFull * 8, h = c - kFull;  // the tail's first or second 8
        at[0] = base + 4 * h, at[1] = base + 8 + 4 * h, at[2] = base + 4 * h + 2, at[3] = base + 10 + 4 * h;
      }}
      unsigned* row = reinterpret_cast<unsigned*>(dst + 2 * (i / kC) * S);
      row[at[0] / 2] = v[u].x, row[at[1] / 2] = v[u].y, row[at[2] / 2] = v[u].z, row[at[3] / 2] = v[u].w;
    }}
  }}
}}

// A bias [NReal] as fp32 at dst, zeros up to N.
template <int NReal, int N, typename T>
__device__ __forceinline__ void mlpc_stage_bias(const T* __restrict__ b, float* dst) {{
  for (int i = threadIdx.x; i < N; i += blockDim.x) dst[i] = i < NReal ? mlpc_to_float(b[i]) : 0.0f;
}}
)",
                     mma_type);
}

}  // namespace

bool fused_mlp_mma_fits(const FusedMlpSpec& s, std::string* why_not) {
  if (s.dtype != ir::DType::F16 && s.dtype != ir::DType::BF16)
    return refuse(why_not, fmt::format("the tensor-core fused MLP computes f16 or bf16, not {}",
                                       ir::dtype_name(s.dtype)));
  if (s.layers.empty()) return refuse(why_not, "a fused MLP needs at least one layer");
  if (s.in_width <= 0 || s.in_width % 16 != 0)
    return refuse(why_not, fmt::format("in_width {} is not a positive multiple of 16 (the "
                                       "MMA's K)",
                                       s.in_width));
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const FusedMlpLayer& l = s.layers[i];
    const bool last = i + 1 == s.layers.size();
    if (l.n <= 0) return refuse(why_not, fmt::format("layer {} has width {}", i + 1, l.n));
    if (!last && l.n % 16 != 0)
      return refuse(why_not, fmt::format("hidden layer {}'s width {} is not a multiple of 16: it "
                                         "is the next layer's K, 16 per MMA",
                                         i + 1, l.n));
    if (l.act && !ir::is_gemm_activation(*l.act))
      return refuse(why_not, fmt::format("layer {}'s activation {} is not one a GEMM epilogue "
                                         "applies",
                                         i + 1, ir::op_name(*l.act)));
  }
  if (const int64_t w = max_width(s); w > kFusedMlpMaxWidth)
    return refuse(why_not, fmt::format("width {} exceeds {}: a thread holds width / 2 fp32 "
                                       "accumulators per 16 rows, and wider layers would spill "
                                       "registers",
                                       w, kFusedMlpMaxWidth));
  if (s.residual && s.out_width() != s.in_width)
    return refuse(why_not, fmt::format("a residual needs the output width ({}) to equal "
                                       "in_width ({})",
                                       s.out_width(), s.in_width));
  if (const int64_t b = smem_bytes(s); b > kFusedMlpSmemBudget)
    return refuse(why_not, fmt::format("the weights and biases take {} bytes of shared memory "
                                       "(rows padded by 16 bytes), over a block's {} ({} KiB)",
                                       b, kFusedMlpSmemBudget, kFusedMlpSmemBudget / 1024));
  return true;
}

bool fused_mlp_loops_pay(const FusedMlpSpec& s) {
  const std::vector<std::pair<size_t, size_t>> runs = fused_mlp_layer_loops(s);
  if (runs.empty()) return false;
  const int64_t r = tiles_per_warp(s);
  int64_t mmas = 0;
  for (const Dims& d : layer_dims(s)) mmas += r * (d.k / 16) * (d.n / 8);
  const bool costly_act = std::any_of(runs.begin(), runs.end(), [&](const auto& run) {
    const std::optional<ir::Op>& act = s.layers[run.first].act;
    return act && *act != ir::Op::Relu;
  });
  return mmas > kFusedMlpLoopMmas || costly_act;
}

FusedMlpMmaShape fused_mlp_mma_shape(const FusedMlpSpec& s) {
  FusedMlpMmaShape shape;
  shape.r = static_cast<int>(tiles_per_warp(s));
  shape.warps = kFusedMlpMaxWarps;
  shape.smem_bytes = static_cast<int>(smem_bytes(s));
  shape.loop_alike_layers = fused_mlp_loops_pay(s);
  return shape;
}

std::vector<std::pair<size_t, size_t>> fused_mlp_layer_loops(const FusedMlpSpec& s) {
  std::vector<std::pair<size_t, size_t>> runs;
  const std::vector<Dims> dims = layer_dims(s);
  auto alike = [&](size_t a, size_t b) {
    const FusedMlpLayer &x = s.layers[a], &y = s.layers[b];
    return x.n == y.n && x.bias == y.bias && x.act == y.act && dims[a].k == dims[b].k;
  };
  // Hidden layers 1 .. size - 2: the first reads x (its weights permuted), the last stores y.
  for (size_t i = 1; i + 1 < s.layers.size();) {
    size_t j = i;
    if (dims[i].k == s.layers[i].n)
      while (j + 2 < s.layers.size() && alike(i, j + 1)) ++j;
    if (j > i) runs.emplace_back(i, j);
    i = j + 1;
  }
  return runs;
}

std::optional<KernelStep> generate_fused_mlp_mma_kernel(const FusedMlpSpec& s,
                                                        const std::string& name) {
  if (!fused_mlp_mma_fits(s)) return std::nullopt;
  return generate_fused_mlp_mma_kernel(s, name, fused_mlp_mma_shape(s));
}

std::optional<KernelStep> generate_fused_mlp_mma_kernel(const FusedMlpSpec& s,
                                                        const std::string& name,
                                                        const FusedMlpMmaShape& shape) {
  if (!fused_mlp_mma_fits(s)) return std::nullopt;
  std::vector<std::pair<size_t, size_t>> loops;
  if (shape.loop_alike_layers) loops = fused_mlp_layer_loops(s);
  auto loop_at = [&](size_t i) -> const std::pair<size_t, size_t>* {
    for (const auto& run : loops)
      if (run.first <= i && i <= run.second) return &run;
    return nullptr;
  };
  const std::vector<Dims> dims = layer_dims(s);
  const std::string t(cuda_type(s.dtype));
  const std::string t2 = s.dtype == ir::DType::BF16 ? "__nv_bfloat162" : "__half2";
  const std::string to_float2 =
      s.dtype == ir::DType::BF16 ? "__bfloat1622float2" : "__half22float2";
  const int64_t n_layers = static_cast<int64_t>(s.layers.size());
  const int64_t c32 = s.in_width / 32;
  const bool x_tail = s.in_width % 32 != 0;

  // Shared-memory offsets: every weight, then every bias.
  std::vector<int64_t> w_off, b_off;
  int64_t off = 0;
  for (const Dims& d : dims) w_off.push_back(off), off += d.weight_bytes();
  for (size_t i = 0; i < dims.size(); ++i) {
    b_off.push_back(s.layers[i].bias ? off : -1);
    if (s.layers[i].bias) off += dims[i].n * 4;
  }

  // The signature, the chain in words, and the helpers the activations call.
  std::string params = fmt::format("    const {}* __restrict__ in0,  // x [M, {}]\n", t, s.in_width);
  std::string chain = fmt::format("{}", s.in_width);
  std::string helpers;
  std::vector<std::string> w_param, b_param;
  int in = 1;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const FusedMlpLayer& l = s.layers[i];
    w_param.push_back(fmt::format("in{}", in));
    params += fmt::format("    const {}* __restrict__ in{},  // W{} [{}, {}]\n", t, in++, i + 1,
                          l.n, dims[i].k);
    if (l.bias) {
      b_param.push_back(fmt::format("in{}", in));
      params += fmt::format("    const {}* __restrict__ in{},  // b{} [{}]\n", t, in++, i + 1, l.n);
    } else {
      b_param.push_back("");
    }
    chain += fmt::format(" -> {}{}{}", l.n, l.bias ? " +b" : "",
                         l.act ? " " + act_name(l.act) : "");
    if (l.act) {
      const std::string h = act_helper(*l.act);
      if (!h.empty() && helpers.find(h) == std::string::npos) helpers += h;
    }
  }
  if (s.residual) chain += " + x";

  // Staging: every weight and bias into shared memory, once per block.
  std::string stage;
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dims& d = dims[i];
    if (i == 0)
      stage += fmt::format("  mlpc_stage_first<{}, {}, {}, {}>({}, mlpc_smem + {});\n", d.n_real,
                           d.n, d.k, d.stride(), w_param[i], w_off[i]);
    else
      stage += fmt::format("  mlpc_stage<{}, {}, {}, {}>({}, mlpc_smem + {});\n", d.n_real, d.n,
                           d.k, d.stride(), w_param[i], w_off[i]);
    if (s.layers[i].bias)
      stage += fmt::format(
          "  mlpc_stage_bias<{}, {}>({}, reinterpret_cast<float*>(mlpc_smem + {}));\n", d.n_real,
          d.n, b_param[i], b_off[i]);
  }
  // Each layer's ldmatrix address for this lane: row lane % 8 of 8x8 matrix lane / 8, the
  // matrices at k 0, 8, 16, 24 of n8 tile 0.
  std::string lane_addr;
  for (size_t i = 0; i < dims.size(); ++i)
    if (const auto* run = loop_at(i); !run || run->first == i)
      lane_addr += fmt::format(
        "  const unsigned w{0} = smem + {1} + 2 * ((lane & 7) * {2} + 8 * (lane >> 3));\n", i + 1,
        w_off[i], dims[i].stride());

  // The layers: products, then (hidden) the next A fragments or (last) the store.
  std::string layers;
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dims& d = dims[i];
    const FusedMlpLayer& l = s.layers[i];
    const int64_t nt = d.n / 8;
    const bool relu = l.act == ir::Op::Relu;
    const std::string to_a_act =
        fmt::format("[](float v) {{ return {}; }}", relu ? "v" : act_expr(l.act, "v"));
    if (const auto* run = loop_at(i)) {
      // Alike layers: one body over their weights (and biases), evenly spaced in shared memory;
      // the A fragments are rewritten in place, then named as the run's last output.
      const size_t first = run->first, count = run->second - run->first + 1;
      layers += fmt::format(
          "    // Layers {0} to {1}: [{2}] -> [{3}]{4}{5}, {6} alike, one loop.\n"
          "#pragma unroll 1\n"
          "    for (int l = 0; l < {6}; ++l) {{\n"
          "      float c[kR][{7}][4];\n"
          "      mlpc_init(c, {8}, q);\n"
          "      mlpc_layer<kR, {2}, {7}, {9}>(c, a{10}, w{0} + l * {11});\n"
          "      mlpc_to_a<{12}>(c, a{10}, {13});\n"
          "    }}\n"
          "    unsigned (&a{1})[kR][{14}][4] = a{10};\n",
          first + 1, run->second + 1, d.k, l.n, l.bias ? ", bias" : "",
          l.act ? ", " + act_name(l.act) : "", count, nt,
          l.bias ? fmt::format("reinterpret_cast<const float*>(mlpc_smem + {} + l * {})",
                               b_off[first], d.n * 4)
                 : "(const float*)nullptr",
          d.stride(), first, d.weight_bytes(), relu ? "true" : "false", to_a_act, nt / 2);
      i = run->second;
      continue;
    }
    layers += fmt::format(
        "    // Layer {0}: [{1}] -> [{2}]{3}{4}.\n"
        "    float c{0}[kR][{5}][4];\n"
        "    mlpc_init(c{0}, {6}, q);\n"
        "    mlpc_layer<kR, {1}, {5}, {7}>(c{0}, a{8}, w{0});\n",
        i + 1, d.k, l.n, l.bias ? ", bias" : "", l.act ? ", " + act_name(l.act) : "", nt,
        l.bias ? fmt::format("reinterpret_cast<const float*>(mlpc_smem + {})", b_off[i])
               : "(const float*)nullptr",
        d.stride(), i);
    if (static_cast<int64_t>(i) + 1 < n_layers)
      layers += fmt::format(
          "    unsigned a{0}[kR][{1}][4];\n"
          "    mlpc_to_a<{2}>(c{0}, a{0}, {3});\n",
          i + 1, nt / 2, relu ? "true" : "false", to_a_act);
  }
  const Dims& last = dims.back();
  const std::string residual =
      s.residual ? fmt::format(
                       "          const float2 x2 = {}(*reinterpret_cast<const {}*>(in0 + row * "
                       "kIn + col));\n"
                       "          v0 += x2.x, v1 += x2.y;\n",
                       to_float2, t2)
                 : "";
  // An even output width stores element pairs (4-byte aligned then); an odd one each element.
  const std::string store =
      s.out_width() % 2 == 0
          ? "          *reinterpret_cast<unsigned*>(out + row * kOut + col) = mlpc_pack2(v0, v1);\n"
          : "          mlpc_from_float(v0, out + row * kOut + col);\n"
            "          if (col + 1 < kOut) mlpc_from_float(v1, out + row * kOut + col + 1);\n";
  const std::string out_act0 = act_expr(s.layers.back().act, fmt::format("c{}[r][j][2 * h]", n_layers));
  const std::string out_act1 =
      act_expr(s.layers.back().act, fmt::format("c{}[r][j][2 * h + 1]", n_layers));

  // x: this thread's rows g and g + 8 of each m16 tile, 8 elements per 32-wide chunk (4 in a
  // 16-wide tail), as layer 1's A fragments.
  std::string x_decl, x_load, x_frag;
  if (c32 > 0) {
    x_decl += "  uint4 xv[kR][2][kC32];\n";
    x_load +=
        "#pragma unroll\n"
        "        for (int c = 0; c < kC32; ++c)\n"
        "          xv[r][h][c] = ok ? *reinterpret_cast<const uint4*>(p + 32 * c + 8 * q)\n"
        "                           : make_uint4(0u, 0u, 0u, 0u);\n";
    x_frag +=
        "#pragma unroll\n"
        "      for (int c = 0; c < kC32; ++c) {\n"
        "        const uint4 lo = xv[r][0][c], hi = xv[r][1][c];\n"
        "        a0[r][2 * c][0] = lo.x, a0[r][2 * c][1] = hi.x, a0[r][2 * c][2] = lo.y, "
        "a0[r][2 * c][3] = hi.y;\n"
        "        a0[r][2 * c + 1][0] = lo.z, a0[r][2 * c + 1][1] = hi.z, a0[r][2 * c + 1][2] = "
        "lo.w, a0[r][2 * c + 1][3] = hi.w;\n"
        "      }\n";
  }
  if (x_tail) {
    x_decl += "  uint2 xt[kR][2];\n";
    x_load +=
        "        xt[r][h] = ok ? *reinterpret_cast<const uint2*>(p + 32 * kC32 + 4 * q)\n"
        "                      : make_uint2(0u, 0u);\n";
    x_frag +=
        "      a0[r][2 * kC32][0] = xt[r][0].x, a0[r][2 * kC32][1] = xt[r][1].x;\n"
        "      a0[r][2 * kC32][2] = xt[r][0].y, a0[r][2 * kC32][3] = xt[r][1].y;\n";
  }

  std::string src = fmt::format(
      R"(// {name}: generated by mlpc. A fused MLP, {t}, fp32 accumulation, every hidden activation
// rounded to {t} and kept in registers: {chain}.
// mma.sync m16n8k16 over all layers' weights staged in shared memory ({smem} bytes); up to
// {warps} warps a block, each owning {warp_rows} rows a tile, persistent over the row tiles
// (codegen/fused_mlp_mma_kernel.h).
{includes}
{conversions}
{helpers}
{library}
extern "C" __global__ void __launch_bounds__({threads}, 1) {name}(
{params}    {t}* __restrict__ out,  // y [M, {out}]
    long long n) {{
  constexpr int kR = {r};  // m16 tiles per warp
  constexpr int kWarpRows = 16 * kR;
  constexpr int kIn = {in};
  constexpr int kOut = {out};
  constexpr int kC32 = {c32};  // 32-wide chunks of x's row
  extern __shared__ __align__(16) unsigned char mlpc_smem[];
  const long long rows = n / kOut;
{stage}  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;  // the MMA fragments' group and thread in group
  const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(mlpc_smem));
{lane_addr}  const long long tiles = (rows + kWarpRows - 1) / kWarpRows;
  const int warps = blockDim.x >> 5;  // launch_dims: fewer than {warps} for few rows
  const long long stride = (long long)gridDim.x * warps;
  long long tile = (long long)blockIdx.x * warps + warp;
  // x of the tile a round ahead: loaded before this round's layers run. Rows past the end are
  // zeros.
{x_decl}  auto load_x = [&](long long t) {{
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {{
        const long long row = t * kWarpRows + 16 * r + g + 8 * h;
        const bool ok = row < rows;
        const {t}* __restrict__ p = in0 + (ok ? row : 0) * kIn;
{x_load}      }}
  }};
  load_x(tile);
  for (; tile < tiles; tile += stride) {{
    unsigned a0[kR][kIn / 16][4];
#pragma unroll
    for (int r = 0; r < kR; ++r) {{
{x_frag}    }}
    load_x(tile + stride);
{layers}    // y: this thread's rows g and g + 8 of each m16 tile, columns 2q and 2q + 1 of each n8
    // tile; rows past the end and padding columns are not stored.
    const long long row0 = tile * kWarpRows;
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int j = 0; j < {last_nt}; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {{
          const long long row = row0 + 16 * r + g + 8 * h;
          const int col = 8 * j + 2 * q;
          if (row >= rows || col >= kOut) continue;
          float v0 = {out_act0};
          float v1 = {out_act1};
{residual}{store}        }}
  }}
}}
)",
      fmt::arg("name", name), fmt::arg("t", t), fmt::arg("chain", chain),
      fmt::arg("smem", shape.smem_bytes), fmt::arg("warps", shape.warps),
      fmt::arg("warp_rows", shape.warp_rows()), fmt::arg("includes", cuda_includes()),
      fmt::arg("conversions", float_conversions(s.dtype)), fmt::arg("helpers", helpers),
      fmt::arg("library", device_library(s.dtype)), fmt::arg("threads", shape.threads()),
fmt::arg("params", params),
      fmt::arg("out", s.out_width()), fmt::arg("r", shape.r), fmt::arg("in", s.in_width),
      fmt::arg("c32", c32), fmt::arg("stage", stage), fmt::arg("lane_addr", lane_addr),
      fmt::arg("x_decl", x_decl), fmt::arg("x_load", x_load), fmt::arg("x_frag", x_frag),
      fmt::arg("layers", layers), fmt::arg("last_nt", last.n / 8),
      fmt::arg("out_act0", out_act0), fmt::arg("out_act1", out_act1),
      fmt::arg("residual", residual), fmt::arg("store", store));

  KernelStep k;
  k.name = name;
  k.source = std::move(src);
  k.row_len = s.out_width();
  int64_t macs = 0;
  for (const Dims& d : dims) macs += d.n_real * d.k;
  k.kind = FusedMlpMma{.tile_rows = shape.warp_rows(), .threads = shape.threads(),
                       .smem_bytes = shape.smem_bytes, .macs_per_row = macs};
  for (const FusedMlpLayer& l : s.layers) {
    ir::GemmEpilogue e;
    e.bias = l.bias;
    e.act = l.act;
    for (std::string& op : gemm_ops(e)) k.ops.push_back(std::move(op));
  }
  if (s.residual) k.ops.push_back("residual");
  return k;
}

LaunchDims launch_dims(const FusedMlpMma& f, const KernelStep& k, int64_t numel) {
  const int64_t rows = numel / std::max<int64_t>(k.row_len, 1);
  const int64_t tiles = (rows + f.tile_rows - 1) / std::max<int64_t>(f.tile_rows, 1);
  // Warps per block: as few as leave no SM without a tile, up to the kernel's most.
  const int64_t warps = std::clamp<int64_t>((tiles + kGpuSms - 1) / kGpuSms, 1, f.threads / 32);
  const int64_t blocks = std::clamp<int64_t>((tiles + warps - 1) / warps, 1, kGpuSms);
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(32 * warps)};
}

}  // namespace mlpc::codegen
