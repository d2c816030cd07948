// Times every cuBLASLt heuristic candidate for row-major y[M, N] = x[M, K] . w[N, K]^T (bf16,
// fp32 accumulation, the layout mlpc's GemmLt uses), to see what the hardware allows per shape:
// the best candidate, the heuristic's first choice, and whether the data's values move the time
// (random values draw more power than zeros, and a power-capped GPU clocks down).
//
// Build (no CMake target: a measurement tool, not part of mlpc):
//   nvcc -O2 -std=c++17 bench/gemm_probe.cpp -lcublasLt -o stage/bin/gemm_probe
// Usage: gemm_probe [--exhaustive] [--f32] [--layouts] [M,N,K ...]   (default: the article's and
// Llama-8B's GeGLU GEMMs; --f32: f32 operands, IEEE fp32 compute, as mlpc's f32 GEMMs;
// --layouts: every way of storing x, w and y (each transposed or not), not only mlpc's: a weight
// can be stored transposed once at load time, and an activation transposed by its producer)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                              \
  do {                                                                             \
    cudaError_t s_ = (x);                                                          \
    if (s_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(s_));                \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#define CHECK_LT(x)                                                                \
  do {                                                                             \
    cublasStatus_t s_ = (x);                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "%s: status %d\n", #x, static_cast<int>(s_));           \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

namespace {

constexpr size_t kWorkspace = size_t{32} << 20;
constexpr int kMaxCandidates = 32;

// The operands' type: bf16, or f32 with --f32.
cudaDataType_t g_type = CUDA_R_16BF;
size_t g_size = 2;
// Time zero-valued operands too (off with --layouts: that comparison is about the layout).
bool g_zeros_too = true;

struct Shape {
  long m, n, k;
};

// How the three matrices are stored, as cuBLAS (column-major) sees y[M, N] = x[M, K] . w[N, K]^T.
// Not swapped: C = y^T (N x M) = op(w) . op(x), so y is stored row-major [M, N]; swapped: C = y
// (M x N) = op(x) . op(w), y stored as [N, M]. op T on x or w means it is stored as mlpc stores
// it (K contiguous); op N on w means w stored as [K, N], on x means x stored as [K, M].
struct Layout {
  bool swap = false;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  std::string name() const {
    const bool w_t = swap ? tb == CUBLAS_OP_T : ta == CUBLAS_OP_N;
    const bool x_t = swap ? ta == CUBLAS_OP_N : tb == CUBLAS_OP_T;
    return std::string("x") + (x_t ? "[K,M]" : "[M,K]") + " w" + (w_t ? "[K,N]" : "[N,K]") +
           " y" + (swap ? "[N,M]" : "[M,N]");
  }
};

void fill(void* d, size_t count, float scale, bool zeros) {
  std::vector<float> f(count);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& v : f) v = zeros ? 0.0f : u(rng);
  if (g_type == CUDA_R_32F) {
    CHECK_CUDA(cudaMemcpy(d, f.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    return;
  }
  std::vector<__nv_bfloat16> h(count);
  for (size_t i = 0; i < count; ++i) h[i] = __float2bfloat16(f[i]);
  CHECK_CUDA(cudaMemcpy(d, h.data(), count * sizeof(h[0]), cudaMemcpyHostToDevice));
}

int attr_int(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int v = -1;
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &got);
  return v;
}

void probe(cublasLtHandle_t h, void* ws, Shape s, cudaStream_t stream, bool exhaustive,
           Layout lay = {}) {
  void *x, *w, *y;
  CHECK_CUDA(cudaMalloc(&x, s.m * s.k * g_size));
  CHECK_CUDA(cudaMalloc(&w, s.n * s.k * g_size));
  CHECK_CUDA(cudaMalloc(&y, s.m * s.n * g_size));

  cublasLtMatmulDesc_t desc;
  CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = lay.ta, tb = lay.tb;
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t a, b, c;
  const long dim_a = lay.swap ? s.m : s.n, dim_b = lay.swap ? s.n : s.m;
  const long rows_a = ta == CUBLAS_OP_T ? s.k : dim_a, rows_b = tb == CUBLAS_OP_N ? s.k : dim_b;
  CHECK_LT(cublasLtMatrixLayoutCreate(&a, g_type, rows_a, s.k * dim_a / rows_a, rows_a));
  CHECK_LT(cublasLtMatrixLayoutCreate(&b, g_type, rows_b, s.k * dim_b / rows_b, rows_b));
  CHECK_LT(cublasLtMatrixLayoutCreate(&c, g_type, dim_a, dim_b, dim_a));
  void* op_a = lay.swap ? x : w;
  void* op_b = lay.swap ? w : x;
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = kWorkspace;
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &wsb, sizeof(wsb)));
  std::vector<cublasLtMatmulHeuristicResult_t> res(kMaxCandidates);
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, kMaxCandidates, res.data(),
                                          &found));
  const double flops = 2.0 * s.m * s.n * s.k;
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const float alpha = 1, beta = 0;
  auto time = [&](const cublasLtMatmulAlgo_t& algo, int reps) -> double {
    for (int i = 0; i < 3; ++i)
      if (cublasLtMatmul(h, desc, &alpha, op_a, a, op_b, b, &beta, y, c, y, c, &algo, ws, kWorkspace,
                         stream) != CUBLAS_STATUS_SUCCESS)
        return -1;
    CHECK_CUDA(cudaEventRecord(e0, stream));
    for (int i = 0; i < reps; ++i)
      cublasLtMatmul(h, desc, &alpha, op_a, a, op_b, b, &beta, y, c, y, c, &algo, ws, kWorkspace,
                     stream);
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1e3 / reps;
  };
  const int reps = flops > 1e11 ? 10 : 50;
  for (int zeros = 0; zeros < (g_zeros_too ? 2 : 1); ++zeros) {
    fill(x, s.m * s.k, 1.0f, zeros);
    fill(w, s.n * s.k, 1.0f / std::sqrt(static_cast<float>(s.k)), zeros);
    std::printf("M=%ld N=%ld K=%ld %s (%s): %d candidates\n", s.m, s.n, s.k,
                lay.name().c_str(), zeros ? "zeros" : "random", found);
    std::vector<std::pair<double, int>> times;
    for (int i = 0; i < found; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      double us = time(res[i].algo, reps);
      if (us > 0) times.push_back({us, i});
    }
    std::sort(times.begin(), times.end());
    for (size_t r = 0; r < times.size() && r < (zeros ? 3u : 8u); ++r) {
      const auto& algo = res[times[r].second].algo;
      std::printf("  #%2d heuristic index %2d: %8.1f us %6.0f TFLOP/s  algo %d tile %d stages %d "
                  "splitk %d swizzle %d cluster %d ws %zu\n",
                  static_cast<int>(r), times[r].second, times[r].first,
                  flops / times[r].first / 1e6, attr_int(algo, CUBLASLT_ALGO_CONFIG_ID),
                  attr_int(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                  attr_int(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                  attr_int(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                  attr_int(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                  attr_int(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), res[times[r].second].workspaceSize);
    }
    for (const auto& [us, i] : times)
      if (i == 0) std::printf("  heuristic #0: %.1f us\n", us);
  }
  if (exhaustive) {
    // Beyond the heuristic: every algo id x tile x stages x swizzle x a few cluster shapes that
    // cublasLtMatmulAlgoCheck accepts, timed on random values.
    fill(x, s.m * s.k, 1.0f, false);
    fill(w, s.n * s.k, 1.0f / std::sqrt(static_cast<float>(s.k)), false);
    int ids[64], nids = 0;
    CHECK_LT(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, g_type, g_type,
                                      g_type, g_type, 64, ids, &nids));
    std::vector<std::pair<double, std::string>> all;
    int checked = 0;
    for (int ai = 0; ai < nids; ++ai) {
      cublasLtMatmulAlgo_t base;
      if (cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, g_type, g_type,
                                 g_type, g_type, ids[ai], &base) != CUBLAS_STATUS_SUCCESS)
        continue;
      auto cap_list = [&](cublasLtMatmulAlgoCapAttributes_t attr) {
        size_t bytes = 0;
        cublasLtMatmulAlgoCapGetAttribute(&base, attr, nullptr, 0, &bytes);
        std::vector<uint32_t> v(bytes / sizeof(uint32_t));
        if (!v.empty()) cublasLtMatmulAlgoCapGetAttribute(&base, attr, v.data(), bytes, &bytes);
        if (v.empty()) v.push_back(0);
        return v;
      };
      std::vector<uint32_t> tiles = cap_list(CUBLASLT_ALGO_CAP_TILE_IDS);
      std::vector<uint32_t> stages = cap_list(CUBLASLT_ALGO_CAP_STAGES_IDS);
      int32_t swz = 0;
      size_t got = 0;
      cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz,
                                        sizeof(swz), &got);
      const uint16_t clusters[] = {0, 2, 3, 5, 6};
      for (uint32_t tile : tiles)
        for (uint32_t stage : stages)
          for (uint32_t sw = 0; sw <= (swz ? 1u : 0u); ++sw)
            for (uint16_t cl : clusters) {
              cublasLtMatmulAlgo_t algo = base;
              cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, 4);
              cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage,
                                                   4);
              cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw,
                                                   4);
              if (cublasLtMatmulAlgoConfigSetAttribute(
                      &algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, 2) !=
                      CUBLAS_STATUS_SUCCESS && cl != 0)
                continue;
              cublasLtMatmulHeuristicResult_t r{};
              if (cublasLtMatmulAlgoCheck(h, desc, a, b, c, c, &algo, &r) !=
                      CUBLAS_STATUS_SUCCESS ||
                  r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > kWorkspace)
                continue;
              if (++checked > 400) break;
              double us = time(algo, reps);
              if (us > 0)
                all.push_back({us, "algo " + std::to_string(ids[ai]) + " tile " +
                                       std::to_string(tile) + " stages " + std::to_string(stage) +
                                       " swizzle " + std::to_string(sw) + " cluster " +
                                       std::to_string(cl)});
            }
    }
    std::sort(all.begin(), all.end());
    std::printf("  exhaustive: %zu configs timed (%d algo ids)\n", all.size(), nids);
    for (size_t r = 0; r < all.size() && r < 6; ++r)
      std::printf("    %8.1f us %6.0f TFLOP/s  %s\n", all[r].first, flops / all[r].first / 1e6,
                  all[r].second.c_str());
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  bool exhaustive = false, layouts = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--exhaustive") exhaustive = true;
    if (std::string(argv[i]) == "--f32") g_type = CUDA_R_32F, g_size = 4;
    if (std::string(argv[i]) == "--layouts") layouts = true, g_zeros_too = false;
    Shape s{};
    if (std::sscanf(argv[i], "%ld,%ld,%ld", &s.m, &s.n, &s.k) == 3) shapes.push_back(s);
  }
  if (shapes.empty())
    shapes = {{8192, 3072, 768},   {8192, 6144, 768},   {8192, 768, 3072},
              {16, 3072, 768},     {16, 6144, 768},     {16, 768, 3072},
              {4096, 14336, 4096}, {4096, 28672, 4096}, {4096, 4096, 14336}};
  cublasLtHandle_t h;
  CHECK_LT(cublasLtCreate(&h));
  void* ws;
  CHECK_CUDA(cudaMalloc(&ws, kWorkspace));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::printf("cuBLASLt %zu\n", cublasLtGetVersion());
  std::vector<Layout> lays = {Layout{}};
  if (layouts) {
    lays.clear();
    for (bool swap : {false, true})
      for (cublasOperation_t ta : {CUBLAS_OP_T, CUBLAS_OP_N})
        for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) lays.push_back({swap, ta, tb});
  }
  for (const Shape& s : shapes)
    for (const Layout& lay : lays) probe(h, ws, s, stream, exhaustive, lay);
  return 0;
}
