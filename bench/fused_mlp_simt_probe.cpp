// Times the fp32 fused-MLP kernel (codegen/fused_mlp_simt_kernel.h) against what it replaces:
// mlp3_small's three generated CUDA-core GEMM launches (codegen/small_gemm_kernel.h, bias and
// ReLU in their epilogues). Per configuration of the fused kernel (rows a tile, warps a block)
// and for the baseline: the output checked against an fp64 host reference, the GPU time of the
// kernel(s) back to back (CUDA events), and the host-timed time per forward of a CUDA graph
// holding one forward, launched over and over on a stream (what `mlpc bench` reports as
// median_us: launch overhead included). Needs a GPU.
//
// Usage: fused_mlp_simt_probe [ROWS,WIDTH,LAYERS ...]   (default: mlp3_small at 64 rows: 64,256,3)
// Every layer is WIDTH -> WIDTH with a bias, ReLU between (none after the last).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/probe_main.h"
#include "codegen/fused_mlp_simt_kernel.h"
#include "codegen/small_gemm_kernel.h"
#include "host/wall_clock.h"
#include "ir/error.h"
#include "runtime/device/device.h"

using namespace mlpc;

namespace {

// A device buffer of floats, freed when this goes.
struct DeviceFloats {
  float* p = nullptr;
  size_t count = 0;
  explicit DeviceFloats(const std::vector<float>& host) : count(host.size()) {
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
    MLPC_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), bytes));
    MLPC_CUDA(cudaMemcpy(p, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceFloats() { cudaFree(p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
};

// Median over 7 repetitions of the host time per call of `forward` (which enqueues one forward
// on `s`), 200 calls a repetition, after 20 warm-up calls.
double host_us_per_forward(const std::function<void()>& forward, cudaStream_t s) {
  for (int i = 0; i < 20; ++i) forward();
  MLPC_CUDA(cudaStreamSynchronize(s));
  std::vector<double> us;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) forward();
    MLPC_CUDA(cudaStreamSynchronize(s));
    us.push_back(runtime::ms_since(t0) * 1e3 / 200);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// A CUDA graph of whatever `enqueue` puts on a stream, timed per forward on that stream.
double graph_us(const std::function<void(cudaStream_t)>& enqueue) {
  cudaStream_t s = nullptr;
  MLPC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MLPC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue(s);
  MLPC_CUDA(cudaStreamEndCapture(s, &graph));
  MLPC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  const double us = host_us_per_forward([&] { MLPC_CUDA(cudaGraphLaunch(exec, s)); }, s);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return us;
}

// The largest |got - ref| / (1 + |ref|) over the output.
double max_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::isfinite(got[i])
                                ? std::abs(got[i] - ref[i]) / (1 + std::abs(ref[i]))
                                : INFINITY);
  return worst;
}

void probe(const bench::Shape& s, runtime::GemmBench&, int sms) {
  const int64_t rows = s.rows, width = s.n, layers = s.k;
  codegen::FusedMlpSpec spec{.dtype = ir::DType::F32, .in_width = width};
  auto act = [&](int64_t l) { return l + 1 < layers ? std::optional(ir::Op::Relu) : std::nullopt; };
  for (int64_t l = 0; l < layers; ++l) spec.layers.push_back({width, true, act(l)});
  const std::string arch = runtime::device_arch();

  // Values as nn.Linear's init and a standard normal x; the fp64 reference from them.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(-1.0f / std::sqrt(float(width)),
                                                1.0f / std::sqrt(float(width)));
  std::vector<float> x(static_cast<size_t>(rows * width));
  for (float& v : x) v = normal(rng);
  std::vector<std::vector<float>> w(layers), b(layers);
  for (int64_t l = 0; l < layers; ++l) {
    w[l].resize(static_cast<size_t>(width * width));
    b[l].resize(static_cast<size_t>(width));
    for (float& v : w[l]) v = uniform(rng);
    for (float& v : b[l]) v = uniform(rng);
  }
  std::vector<double> ref(x.begin(), x.end()), next(ref.size());
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        double sum = b[l][c];
        for (int64_t k = 0; k < width; ++k) sum += ref[r * width + k] * w[l][c * width + k];
        next[r * width + c] = l + 1 < layers ? std::max(sum, 0.0) : sum;
      }
    std::swap(ref, next);
  }
  const DeviceFloats dx(x), dy(std::vector<float>(x.size())), dh(std::vector<float>(x.size())),
      dh2(std::vector<float>(x.size()));
  std::vector<std::unique_ptr<DeviceFloats>> dw, db;
  for (int64_t l = 0; l < layers; ++l) {
    dw.push_back(std::make_unique<DeviceFloats>(w[l]));
    db.push_back(std::make_unique<DeviceFloats>(b[l]));
  }
  const long long n = static_cast<long long>(rows * width);
  fmt::print("fused MLP probe: {} rows, {} layers {} -> {} (bias, relu between), f32, {} ({} "
             "SMs)\n",
             rows, layers, width, width, arch, sms);

  // The baseline: one generated CUDA-core GEMM per layer, h ping-ponging through global memory.
  {
    std::vector<std::unique_ptr<bench::BuiltKernel>> built;
    std::vector<codegen::LaunchDims> dims;
    for (int64_t l = 0; l < layers; ++l) {
      codegen::GemmStep g;
      g.name = fmt::format("probe_gemm_{}", l + 1);
      g.x = 0, g.w = 1, g.bias = 2, g.y = 3;
      g.n = width, g.k = width;
      g.dtype = ir::DType::F32;
      g.epilogue = {.bias = true, .act = act(l)};
      const std::optional<codegen::KernelStep> k = codegen::generate_small_gemm_kernel(g);
      MLPC_ASSERT(k.has_value(), "the small-GEMM kernel refused the baseline's layer");
      built.push_back(std::make_unique<bench::BuiltKernel>(k->source, k->name, arch));
      dims.push_back(codegen::launch_dims(std::get<codegen::SimtGemm>(k->kind), *k, n));
    }
    auto enqueue = [&](cudaStream_t st) {
      const float* in = dx.p;
      for (int64_t l = 0; l < layers; ++l) {
        float* out = l + 1 == layers ? dy.p : (l % 2 == 0 ? dh.p : dh2.p);
        void* args[] = {&in, &dw[l]->p, &db[l]->p, &out, const_cast<long long*>(&n)};
        MLPC_CUDA(cudaLaunchKernel(built[l]->func(), dim3(dims[l].grid), dim3(dims[l].block), args,
                                   0, st));
        in = out;
      }
    };
    const std::vector<float> got =
        bench::output_of_one_launch<float>([&] { enqueue(nullptr); }, dy.p, x.size());
    fmt::print("  {} CUDA-core GEMM launches: max error {:.2e}, kernels {:.2f} us, graph {:.2f} "
               "us per forward\n",
               layers, max_error(got, ref), bench::median_launch_us([&] { enqueue(nullptr); }),
               graph_us(enqueue));
  }

  for (const codegen::FusedMlpSimtConfig& config :
       {codegen::FusedMlpSimtConfig{}, codegen::FusedMlpSimtConfig{.rows_per_tile = 8, .warps = 8},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 16, .warps = 4},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 16, .warps = 8},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 4, .warps = 4}}) {
    const std::string label = fmt::format("fused, {:2} rows a tile, {} warps a block",
                                          config.rows_per_tile, config.warps);
    std::string why;
    if (!codegen::fused_mlp_simt_fits(spec, arch, &why, config)) {
      fmt::print("  {}: refused: {}\n", label, why);
      continue;
    }
    const codegen::KernelStep k =
        *codegen::generate_fused_mlp_simt_kernel(spec, "probe_fused_mlp", config);
    const auto& f = std::get<codegen::FusedMlpSimt>(k.kind);
    const bench::BuiltKernel built(k.source, k.name, arch);
    int device = 0;
    MLPC_CUDA(cudaGetDevice(&device));
    MLPC_CUDA(cudaKernelSetAttributeForDevice(
        built.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, f.smem_bytes, device));
    if (f.cluster > codegen::kPortableClusterSize)
      MLPC_CUDA(cudaKernelSetAttributeForDevice(
          built.kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, device));
    const codegen::LaunchDims d = codegen::launch_dims(f, k, n);
    std::vector<void*> args{const_cast<float**>(&dx.p)};
    for (int64_t l = 0; l < layers; ++l) {
      args.push_back(&dw[l]->p);
      args.push_back(&db[l]->p);
    }
    args.push_back(const_cast<float**>(&dy.p));
    args.push_back(const_cast<long long*>(&n));
    auto enqueue = [&](cudaStream_t st) {
      MLPC_CUDA(cudaLaunchKernel(built.func(), dim3(d.grid), dim3(d.block), args.data(),
                                 static_cast<size_t>(f.smem_bytes), st));
    };
    // How many of its clusters fit on the GPU at once (-1: the runtime would not say).
    cudaLaunchConfig_t lc{};
    lc.gridDim = dim3(d.grid);
    lc.blockDim = dim3(d.block);
    lc.dynamicSmemBytes = static_cast<size_t>(f.smem_bytes);
    int clusters = -1;
    if (cudaOccupancyMaxActiveClusters(&clusters, built.func(), &lc) != cudaSuccess) {
      clusters = -1;
      (void)cudaGetLastError();
    }
    const std::vector<float> got =
        bench::output_of_one_launch<float>([&] { enqueue(nullptr); }, dy.p, x.size());
    fmt::print("  {}: clusters of {}, {} blocks, {} B shared memory, {} clusters fit at once: "
               "max error {:.2e}, kernel {:.2f} us, graph {:.2f} us per forward\n",
               label, f.cluster, d.grid, f.smem_bytes, clusters, max_error(got, ref),
               bench::median_launch_us([&] { enqueue(nullptr); }), graph_us(enqueue));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::probe_main(argc, argv, "fused_mlp_simt_probe", {{64, 256, 3}}, probe);
}
