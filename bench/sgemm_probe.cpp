// Measures a hand-written fp32 GEMM with a bias + GELU (erf) epilogue (mlp3's fc1 and fc2 in one
// kernel each instead of a GEMM and a GELU kernel) against what it would replace: cuBLASLt's
// tuned IEEE fp32 GEMM with its bias epilogue (GemmBench, the numbers -O2 uses) followed by a
// GELU kernel over the [rows, n] output. Each
// configuration is built with NVRTC, checked against an fp64 host dot product on sampled
// outputs, and timed with CUDA events. Needs a GPU.
//
// Usage: sgemm_probe [ROWS,N,K ...]   (default: mlp3's three GEMMs at 8192 rows)
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/probe_main.h"
#include "codegen/cuda_ops.h"
#include "ir/error.h"
#include "runtime/device/cuda_check.h"
#include "runtime/measure/gemm_bench.h"

using namespace mlpc;

namespace {

constexpr int kPad = 4;  // floats after each bk-long row of a shared-memory tile

// A hand-written fp32 GEMM for the CUDA cores with the bias + GELU (erf) epilogue that cuBLASLt
// lacks: y = gelu(x[M, k] . w[n, k]^T + bias), IEEE fp32. A block of 32 * warps_m * warps_n
// threads computes a (32 * warps_m) x (64 * warps_n) tile; a warp 32 x 64, as 4 x 8 threads of
// 8 x 8 outputs at rows r0 + 4i, columns c0 + 8j, so that the 16-byte shared-memory reads of one
// instruction (4 consecutive k of a row, rows padded to bk + 4 floats) fall on distinct banks.
// x and w tiles stream through `stages` buffers by cp.async, k-contiguous as in memory; blocks
// walk the output group_m row tiles at a time (w tiles shared in L2). Needs n % tile_cols == 0
// and k % bk == 0; rows is free. (A k-major variant, tiles transposed on the way in by 4-byte
// cp.async and 2 + 2 vector reads per k, measured slower than this layout: its transposing
// loads cost more than its reads save; figures in docs/benchmarks.md.)
struct Config {
  int warps_m = 4, warps_n = 2, bk = 16, stages = 3, min_blocks = 1, group_m = 8;
  int threads() const { return 32 * warps_m * warps_n; }
  int tile_rows() const { return 32 * warps_m; }
  int tile_cols() const { return 64 * warps_n; }
  int smem_bytes() const { return stages * (tile_rows() + tile_cols()) * (bk + kPad) * 4; }
  long grid(long rows, long n) const { return (rows + tile_rows() - 1) / tile_rows() * (n / tile_cols()); }
};

std::string sgemm_source(const std::string& name, const Config& c) {
  return fmt::format(
      R"(// {name}: mlpc's bench/sgemm_probe. y[M, n] = gelu(x[M, k] . w[n, k]^T + bias), IEEE fp32 on
// the CUDA cores. Block tile {bm} x {bn} x {bk}, {stages} cp.async stages; a thread owns 8 x 8
// outputs at rows r0 + 4i, columns c0 + 8j.
{helper}
__device__ __forceinline__ void mlpc_cp_async16(float* smem, const float* gmem, bool valid) {{
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0));
}}

extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ y, int rows, int n, int k) {{
  constexpr int BM = {bm}, BN = {bn}, BK = {bk}, LDK = BK + {pad}, STAGES = {stages};
  constexpr int THREADS = {threads}, WARPS_N = {warps_n}, GROUP_M = {group_m};
  constexpr int A_FLOATS = BM * LDK, STAGE_FLOATS = (BM + BN) * LDK;
  extern __shared__ float4 mlpc_smem4[];
  float* smem = reinterpret_cast<float*>(mlpc_smem4);

  // Grouped tile order: GROUP_M row tiles side by side, so a wave shares w tiles in L2.
  const int tiles_m = (rows + BM - 1) / BM, tiles_n = n / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group, first_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % group_rows) * BM, n0 = (in_group / group_rows) * BN;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r0 = (warp / WARPS_N) * 32 + lane / 8;  // this thread's rows: r0 + 4i
  const int c0 = (warp % WARPS_N) * 64 + lane % 8;  // this thread's columns: c0 + 8j

  const int k_tiles = k / BK;
  auto load_stage = [&](int stage, int kt) {{
    float* as = smem + stage * STAGE_FLOATS;
    float* bs = as + A_FLOATS;
    const int k0 = kt * BK;
#pragma unroll
    for (int ch = tid; ch < BM * BK / 4; ch += THREADS) {{
      const int r = ch / (BK / 4), q = ch % (BK / 4);
      const bool valid = m0 + r < rows;  // rows past the end read zeros
      const float* src = x + static_cast<long long>(valid ? m0 + r : 0) * k + k0 + q * 4;
      mlpc_cp_async16(as + r * LDK + q * 4, src, valid);
    }}
#pragma unroll
    for (int ch = tid; ch < BN * BK / 4; ch += THREADS) {{
      const int r = ch / (BK / 4), q = ch % (BK / 4);
      mlpc_cp_async16(bs + r * LDK + q * 4, w + static_cast<long long>(n0 + r) * k + k0 + q * 4, true);
    }}
  }};

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {{
    if (s < k_tiles) load_stage(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }}
  for (int kt = 0; kt < k_tiles; ++kt) {{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
    __syncthreads();  // stage kt is in; every thread is done with stage kt - 1
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load_stage(next % STAGES, next);
    asm volatile("cp.async.commit_group;\n" ::);
    const float* as = smem + (kt % STAGES) * STAGE_FLOATS + r0 * LDK;
    const float* bs = smem + (kt % STAGES) * STAGE_FLOATS + A_FLOATS + c0 * LDK;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 4) {{
      float4 a[8], b[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] = *reinterpret_cast<const float4*>(as + i * 4 * LDK + kk);
#pragma unroll
      for (int j = 0; j < 8; ++j) b[j] = *reinterpret_cast<const float4*>(bs + j * 8 * LDK + kk);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {{
          acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
          acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
          acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
          acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
        }}
    }}
  }}
  asm volatile("cp.async.wait_group 0;\n" ::);

  float bias_v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) bias_v[j] = bias[n0 + c0 + 8 * j];
#pragma unroll
  for (int i = 0; i < 8; ++i) {{
    const int row = m0 + r0 + 4 * i;
    if (row < rows) {{
      float* out = y + static_cast<long long>(row) * n + n0 + c0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {{
        out[8 * j] = mlpc_gelu(acc[i][j] + bias_v[j]);
      }}
    }}
  }}
}}
)",
      fmt::arg("name", name), fmt::arg("helper", codegen::cuda_helper(ir::Op::Gelu)),
      fmt::arg("bm", c.tile_rows()), fmt::arg("bn", c.tile_cols()), fmt::arg("bk", c.bk),
      fmt::arg("pad", kPad), fmt::arg("stages", c.stages), fmt::arg("threads", c.threads()),
      fmt::arg("min_blocks", c.min_blocks), fmt::arg("warps_n", c.warps_n),
      fmt::arg("group_m", c.group_m));
}

using bench::Shape;

std::vector<float> random_f32(size_t count, float scale, uint32_t seed) {
  std::vector<float> v(count);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& e : v) e = u(rng);
  return v;
}

float* upload(const std::vector<float>& v) {
  float* p = nullptr;
  MLPC_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), v.size() * 4));
  MLPC_CUDA(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return p;
}

// The GELU kernel cuBLASLt's GEMM needs after it (vectorized, grid-stride), on mlpc's GELU.
std::string gelu_source() {
  return std::string(codegen::cuda_helper(ir::Op::Gelu)) + R"(
extern "C" __global__ void __launch_bounds__(256) gelu_f32(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n4; i += 256ll * gridDim.x) {
    float4 v = in[i];
    v.x = mlpc_gelu(v.x); v.y = mlpc_gelu(v.y); v.z = mlpc_gelu(v.z); v.w = mlpc_gelu(v.w);
    out[i] = v;
  }
}
)";
}

double gelu_ref(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }

void probe(const Shape& s, runtime::GemmBench& bench, int sms) {
  const auto x = random_f32(size_t(s.rows) * s.k, 1.0f, 1);
  const auto w = random_f32(size_t(s.n) * s.k, 1.0f / std::sqrt(float(s.k)), 2);
  const auto b = random_f32(size_t(s.n), 0.5f, 3);
  float* dx = upload(x);
  float* dw = upload(w);
  float* db = upload(b);
  float* dy = nullptr;
  MLPC_CUDA(cudaMalloc(reinterpret_cast<void**>(&dy), size_t(s.rows) * s.n * 4));
  const double flops = 2.0 * s.rows * double(s.n) * s.k;

  const double lt = bench.best_us(s.rows, s.n, s.k, ir::DType::F32, {.bias = true});
  const bench::BuiltKernel gelu(gelu_source(), "gelu_f32", "sm_90");
  long long n4 = static_cast<long long>(s.rows) * s.n / 4;
  void* gelu_args[] = {&dy, &dy, &n4};
  const double gelu_us = bench::median_launch_us([&] {
    MLPC_CUDA(cudaLaunchKernel(gelu.func(), dim3(sms * 8), dim3(256),
                               gelu_args, 0, nullptr));
  });
  fmt::print("{}x{}x{}: cuBLASLt fp32 tuned + bias {:.1f} us ({:.1f} TFLOP/s) + gelu kernel {:.1f} us "
             "= {:.1f} us\n",
             s.rows, s.n, s.k, lt, flops / lt * 1e-6, gelu_us, lt + gelu_us);

  std::vector<Config> configs = {
      {4, 2, 16, 3, 1}, {4, 2, 16, 4, 1}, {4, 2, 32, 3, 1}, {4, 2, 8, 4, 1}, {4, 2, 16, 3, 2},
      {2, 2, 16, 3, 2}, {4, 1, 16, 3, 2}, {2, 4, 16, 3, 1}, {8, 1, 16, 3, 1}, {4, 2, 16, 3, 1, 16},
  };
  for (const Config& c : configs) {
    if (s.n % c.tile_cols() != 0 || s.k % c.bk != 0) continue;
    const std::string name = "mlpc_sgemm";
    const bench::BuiltKernel m(sgemm_source(name, c), name, "sm_90");
    const int smem = c.smem_bytes();
    MLPC_CUDA(cudaKernelSetAttributeForDevice(m.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem, 0));
    cudaFuncAttributes fa{};
    MLPC_CUDA(cudaFuncGetAttributes(&fa, m.func()));
    int rows = s.rows, n = s.n, k = s.k;
    void* args[] = {&dx, &dw, &db, &dy, &rows, &n, &k};
    const long grid = c.grid(s.rows, s.n);
    auto launch = [&] {
      MLPC_CUDA(cudaLaunchKernel(m.func(), dim3(grid), dim3(c.threads()), args, smem, nullptr));
    };
    const std::vector<float> y = bench::output_of_one_launch<float>(launch, dy, size_t(s.rows) * s.n);
    std::mt19937 rng(7);
    double worst = 0;
    for (int i = 0; i < 2048; ++i) {
      const int r = i < 4 ? (i % 2 ? s.rows - 1 : 0) : int(rng() % s.rows);
      const int col = i < 4 ? (i / 2 ? s.n - 1 : 0) : int(rng() % s.n);
      double acc = b[col], mag = std::fabs(b[col]);
      for (int kk = 0; kk < s.k; ++kk) {
        const double p = double(x[size_t(r) * s.k + kk]) * w[size_t(col) * s.k + kk];
        acc += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(y[size_t(r) * s.n + col] - gelu_ref(acc)) / (mag + 1e-30);
      if (!(err <= worst)) worst = err;
    }
    const double us = bench::median_launch_us(launch);
    fmt::print("  sgemm {}x{} bk {} stages {} minblocks {} group {} ({} threads, {} regs, {} KiB smem, "
               "grid {}): {:.1f} us ({:.1f} TFLOP/s) = {:.3f} of cuBLASLt+gelu, {:.3f} of cuBLASLt "
               "alone; error/sum|x.w| {:.2e}{}; NVRTC {:.0f} ms\n",
               c.tile_rows(), c.tile_cols(), c.bk, c.stages,
               c.min_blocks, c.group_m, c.threads(), fa.numRegs, smem / 1024, grid, us,
               flops / us * 1e-6, us / (lt + gelu_us), us / lt, worst,
               worst < 1e-6 ? "" : " BAD", m.build_ms);
    std::fflush(stdout);
  }
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(db);
  cudaFree(dy);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::probe_main(argc, argv, "sgemm_probe",
                           {{8192, 4096, 1024}, {8192, 4096, 4096}, {8192, 1024, 4096}}, probe);
}
