// Measures the generated gated-GEMM kernel (codegen/gated_gemm_kernel.h) against what it
// replaces: cuBLASLt's tuned merged gate|up GEMM (GemmBench, the same numbers -O2 uses), whose
// [rows, 2n] output a pointwise kernel then reads back. Checks the kernel's output against an
// fp64 host dot product on sampled elements. Needs an sm_90 GPU.
//
// Usage: gated_gemm_probe [ROWS,N,K ...]   (default: the article's and Llama-8B's GeGLU)
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/probe_main.h"
#include "codegen/gated_gemm_kernel.h"
#include "codegen/gated_gemm_plan.h"
#include "ir/error.h"
#include "runtime/device/cuda_check.h"
#include "runtime/measure/gemm_bench.h"
#include "host/host_tensor.h"
#include "runtime/exec/tensor_map.h"

using namespace mlpc;

namespace {

using bench::Shape;

std::vector<uint16_t> random_bf16(size_t count, float scale, uint32_t seed) {
  std::vector<uint16_t> v(count);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& e : v) {
    float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    e = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  }
  return v;
}
double bf16_value(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double gelu_tanh(double g) { return 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))); }

void* upload(const std::vector<uint16_t>& v) {
  void* p = nullptr;
  MLPC_CUDA(cudaMalloc(&p, v.size() * 2));
  MLPC_CUDA(cudaMemcpy(p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  return p;
}

void probe(const Shape& s, runtime::GemmBench& bench, int sms) {
  const auto x = random_bf16(size_t(s.rows) * s.k, 1.0f, 1);
  const auto w = random_bf16(size_t(2) * s.n * s.k, 1.0f / std::sqrt(float(s.k)), 2);
  void* dx = upload(x);
  void* dw = upload(w);
  void* dy = nullptr;
  MLPC_CUDA(cudaMalloc(&dy, size_t(s.rows) * s.n * 2));
  void* ws = nullptr;
  MLPC_CUDA(cudaMalloc(&ws, codegen::gated_gemm_workspace_bytes(sms)));
  MLPC_CUDA(cudaMemset(ws, 0, codegen::gated_gemm_workspace_bytes(sms)));
  const double flops = 2.0 * s.rows * 2.0 * s.n * s.k;
  const double lt = bench.best_us(s.rows, 2 * s.n, s.k, ir::DType::BF16);
  const double copy = bench.copy_us(int64_t(s.rows) * s.n * 2 * 3 / 2);
  fmt::print("{}x{}x{} (gate|up merged n={}): cuBLASLt tuned {:.1f} us ({:.0f} TFLOP/s); "
             "gelu*mul traffic at copy speed {:.1f} us; sum {:.1f} us\n",
             s.rows, s.n, s.k, 2 * s.n, lt, flops / lt * 1e-6, copy, lt + copy);

  const auto tx = runtime::tma_desc_2d(dx, ir::DType::BF16, s.rows, s.k, codegen::kGatedTileRows, codegen::kGatedTileK);
  const auto tg = runtime::tma_desc_2d(dw, ir::DType::BF16, s.n, s.k, codegen::kGatedTileRows, codegen::kGatedTileK);
  const auto tu = runtime::tma_desc_2d(static_cast<char*>(dw) + size_t(s.n) * s.k * 2, ir::DType::BF16,
                                       s.n, s.k, codegen::kGatedTileRows, codegen::kGatedTileK);
  const auto ty = runtime::tma_desc_2d(dy, ir::DType::BF16, s.rows, s.n, codegen::kGatedStoreRows, 64);
  struct Variant {
    const char* what;
    codegen::GatedGemmConfig cfg;
    int max_splits = 0;  // tail tiles split along k into at most this (0: -O2's rule)
    std::vector<std::pair<std::string, std::string>> patch = {};  // edits of the generated source
  };
  // The gelu_tanh forms (__expf/__fdividef, tanhf), 2 stages and a rolled k-loop were measured
  // slower (docs/benchmarks.md; git history has those variants).
  const std::vector<Variant> variants = {
      {"3 stages, epilogue workers (as -O2 builds it)", {3, true}},
      {"3 stages, epilogue workers, tail not split", {3, true}, 1},
      {"3 stages, epilogue workers, clusters of 2 (weights multicast)", {3, true, true, 2}},
      {"3 stages, epilogue workers, clusters of 2, tail not split", {3, true, true, 2}, 1},
      // The first version freed stages with cluster-scope arrives (mbarrier.arrive.release.cluster)
      // and ran far slower, with multicast or without (each block loading all of B); CTA-scope
      // arrives, as built now, took it back to about one block per SM (docs/benchmarks.md).
      {"clusters of 2, no multicast (each block loads all of B)", {3, true, true, 2}, 0,
       {{"mlpc_tma_load_all(b + r * (kBBytes / 2), r ? &tu : &tg, kt * kK, nb * kRows, full);",
         "mlpc_tma_load(b, &tg, kt * kK, nb * kRows, full); mlpc_tma_load(b + kBBytes / 2, &tu, kt * kK, nb * kRows, full);"}}},
      {"clusters of 2, stages freed with release.cluster arrives", {3, true, true, 2}, 0,
       {{"mbarrier.arrive.shared::cluster.b64", "mbarrier.arrive.release.cluster.shared::cluster.b64"}}},
      {"3 stages, epilogue workers, tail in up to 3 k-ranges", {3, true}, 3},
      {"3 stages, epilogue workers, tail in up to 6 k-ranges", {3, true}, 6},
      {"3 stages, consumers combine", {3, false}},
      {"3 stages, consumers combine, tail not split (main before 2026-12-05)", {3, false}, 1},
      {"4 stages, consumers combine", {4, false}}};
  const std::string helpers = codegen::gated_combine_helper(ir::Op::GeluTanh);
  struct Built {
    std::unique_ptr<bench::BuiltKernel> kernel;
    int smem, max_splits, grid;
    std::function<void()> launch;
    std::vector<double> us;  // one median per round
  };
  std::vector<Built> built(variants.size());
  int rows = s.rows, n = s.n, k = s.k;
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const Variant& v = variants[vi];
    Built& b = built[vi];
    const std::string name = "mlpc_gated";
    b.max_splits = v.max_splits > 0 ? v.max_splits : codegen::gated_gemm_max_splits(s.k);
    codegen::GatedGemmConfig cfg = v.cfg;
    cfg.split_tail = b.max_splits > 1;  // as -O2 builds it: no split code where none can run
    std::string src = codegen::generate_gated_gemm_source(
        name, ir::DType::BF16, helpers, "return mlpc_gelu_tanh(g) * u;", cfg);
    for (const auto& [from, to] : v.patch) {
      const size_t at = src.find(from);
      if (at == std::string::npos) throw Error("patch not found: " + from);
      src.replace(at, from.size(), to);
    }
    b.kernel = std::make_unique<bench::BuiltKernel>(src, name, "sm_90a");
    b.smem = codegen::gated_gemm_smem_bytes(v.cfg);
    MLPC_CUDA(cudaKernelSetAttributeForDevice(b.kernel->kern, cudaFuncAttributeMaxDynamicSharedMemorySize, b.smem, 0));
    int slots = sms;  // blocks resident at once, in whole clusters
    if (cfg.cluster_m > 1) {
      cudaLaunchConfig_t lc{};
      lc.blockDim = dim3(codegen::kGatedThreads);
      lc.gridDim = dim3(cfg.cluster_m);
      lc.dynamicSmemBytes = b.smem;
      int clusters = 0;
      MLPC_CUDA(cudaOccupancyMaxActiveClusters(&clusters, b.kernel->func(), &lc));
      slots = clusters * cfg.cluster_m;
      fmt::print("  clusters of {} resident at once: {}\n", cfg.cluster_m, clusters);
    }
    b.grid = static_cast<int>(codegen::gated_gemm_grid(s.rows, s.n, b.max_splits, slots, cfg.cluster_m));
    b.launch = [&, func = b.kernel->func(), smem = b.smem, grid = b.grid, splits = &b.max_splits] {
      void* args[] = {(void*)&tx, (void*)&tg, (void*)&tu, (void*)&ty, &rows, &n, &k, splits, &ws};
      MLPC_CUDA(cudaLaunchKernel(func, dim3(grid), dim3(codegen::kGatedThreads), args, smem, nullptr));
    };
    // Checked on the first launch after the previous variant's many: a counter left non-zero
    // by a launch would leave this one's tail tiles unwritten (NaN from the fill).
    const std::vector<uint16_t> y = bench::output_of_one_launch<uint16_t>(b.launch, dy, size_t(s.rows) * s.n);
    std::mt19937 rng(7);
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < 4096; ++i) {
      const int r = i < 8 ? (i % 2 ? s.rows - 1 : 0) : int(rng() % s.rows);
      // a quarter of the samples in the last two column tiles: at Llama's shape the tile order
      // puts the last round's (split) tiles there
      const int last = std::min(s.n, 2 * codegen::kGatedTileRows);
      const int c = i < 8 ? (i / 2 % 2 ? s.n - 1 : 0)
                          : i % 4 == 0 ? s.n - 1 - int(rng() % last) : int(rng() % s.n);
      double g = 0, u = 0;
      for (int kk = 0; kk < s.k; ++kk) {
        const double xv = bf16_value(x[size_t(r) * s.k + kk]);
        g += xv * bf16_value(w[size_t(c) * s.k + kk]);
        u += xv * bf16_value(w[size_t(s.n + c) * s.k + kk]);
      }
      const double ref = gelu_tanh(g) * u, got = bf16_value(y[size_t(r) * s.n + c]);
      const double err = std::fabs(got - ref) / (std::fabs(ref) + 0.05);
      worst = std::max(worst, err);
      if (!(err < 0.03)) {
        if (bad++ < 5) fmt::print("  MISMATCH y[{},{}] = {} expected {}\n", r, c, got, ref);
      }
    }
    fmt::print("  built {}: sampled error {:.4f}, {} of 4096 bad; NVRTC {:.0f} ms\n", v.what, worst,
               bad, b.kernel->build_ms);
    for (int i = 0; i < 3; ++i) b.launch();  // warm, before any variant's first round
  }
  // Rounds over all variants, so that a clock drift over the run (identical launches have
  // differed by several percent within one run) touches every variant alike; the best round is
  // reported.
  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round)
    for (Built& b : built) b.us.push_back(bench::median_launch_us(b.launch));
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const Built& b = built[vi];
    const double us = *std::min_element(b.us.begin(), b.us.end());
    fmt::print("  gated kernel, {} ({} KiB smem, grid {}, max splits {}): {:.1f} us ({:.0f} TFLOP/s), "
               "{:.3f} of cuBLASLt+copy; rounds {:.1f}\n",
               variants[vi].what, b.smem / 1024, b.grid, b.max_splits, us, flops / us * 1e-6,
               us / (lt + copy), fmt::join(b.us, " / "));
  }
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  cudaFree(ws);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::probe_main(argc, argv, "gated_gemm_probe",
                           {{8192, 3072, 768}, {4096, 14336, 4096}, {16, 3072, 768}, {1000, 3000, 760}},
                           probe);
}
