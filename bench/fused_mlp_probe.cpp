// How fast the fused MLP on the tensor cores runs (codegen/fused_mlp_mma_kernel.h): x [ROWS,
// WIDTH] through LAYERS - 1 hidden layers of WIDTH (ReLU) and an output layer of 16, f16 and
// bf16, launched as the executor launches it; each output checked on sampled rows against an fp64
// reference that rounds every hidden activation as the kernel does. Prints µs per launch, the
// bandwidth of x and y (and the weights, once), TFLOP/s, registers and NVRTC's time, for the
// kernel with alike hidden layers as one loop and with every layer unrolled (the generated one is
// whichever fused_mlp_loops_pay says).
// Usage: fused_mlp_probe [ROWS,WIDTH,LAYERS ...]   (default: 262144,64,6)
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "bench/probe_main.h"
#include "codegen/fused_mlp_mma_kernel.h"
#include "host/host_tensor.h"
#include "ir/error.h"
#include "runtime/device/device.h"

using namespace mlpc;

namespace {

constexpr int64_t kOut = 16;

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { MLPC_CUDA(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

void probe_dtype(const bench::Shape& shape, ir::DType dt, int sms) {
  codegen::FusedMlpSpec s;
  s.dtype = dt;
  s.in_width = shape.n;
  for (int i = 0; i + 1 < shape.k; ++i) s.layers.push_back({shape.n, false, ir::Op::Relu});
  s.layers.push_back({kOut, false, std::nullopt});
  std::string why;
  if (!codegen::fused_mlp_mma_fits(s, &why)) {
    fmt::print("{} [{}, {}] x {} layers: refused: {}\n", ir::dtype_name(dt), shape.rows, shape.n,
               shape.k, why);
    return;
  }
  codegen::FusedMlpMmaShape form = codegen::fused_mlp_mma_shape(s);
  form.loop_alike_layers = true;
  const auto looped = codegen::generate_fused_mlp_mma_kernel(s, "fused_mlp_probe", form);
  form.loop_alike_layers = false;
  const auto unrolled = codegen::generate_fused_mlp_mma_kernel(s, "fused_mlp_probe", form);
  const auto& f = std::get<codegen::FusedMlpMma>(looped->kind);
  const int64_t rows = shape.rows;

  // Values: x standard normal, weights uniform with variance 2 / K (the ReLU chain keeps scale).
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  auto upload = [&](const std::vector<float>& v) {
    std::vector<uint8_t> bytes(v.size() * 2);
    runtime::encode_floats(dt, v.data(), static_cast<int64_t>(v.size()), bytes.data());
    auto b = std::make_unique<DeviceBuffer>(bytes.size());
    MLPC_CUDA(cudaMemcpy(b->p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    return b;
  };
  auto rounded = [&](std::vector<float> v) {
    for (float& e : v) e = static_cast<float>(runtime::round_to(dt, e));
    return v;
  };
  std::vector<float> x(static_cast<size_t>(rows * s.in_width));
  for (float& e : x) e = normal(rng);
  x = rounded(std::move(x));
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  bufs.push_back(upload(x));
  std::vector<std::vector<float>> w;
  int64_t kin = s.in_width;
  int64_t weight_bytes = 0;
  for (const codegen::FusedMlpLayer& l : s.layers) {
    std::uniform_real_distribution<float> uniform(-std::sqrt(6.0f / kin), std::sqrt(6.0f / kin));
    std::vector<float> wi(static_cast<size_t>(l.n * kin));
    for (float& e : wi) e = uniform(rng);
    w.push_back(rounded(std::move(wi)));
    bufs.push_back(upload(w.back()));
    weight_bytes += l.n * kin * 2;
    kin = l.n;
  }
  DeviceBuffer y(static_cast<size_t>(rows * kOut * 2));
  long long n = rows * kOut;
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b->p);
  ptrs.push_back(y.p);
  std::vector<void*> args;
  for (void*& p : ptrs) args.push_back(&p);
  args.push_back(&n);

  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(f.macs_per_row);
  const double bytes = static_cast<double>(rows * (s.in_width + kOut) * 2 + weight_bytes);
  const std::string arch = runtime::device_arch();
  for (const auto& [variant, k] : {std::pair{"layer loops", &looped}, std::pair{"unrolled", &unrolled}}) {
    const int max_warps = codegen::kFusedMlpMaxWarps;
    const auto t0 = std::chrono::steady_clock::now();
    const bench::BuiltKernel built((*k)->source, (*k)->name, arch);
    const double nvrtc_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int device = 0;
    MLPC_CUDA(cudaGetDevice(&device));
    MLPC_CUDA(cudaKernelSetAttributeForDevice(
        built.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, f.smem_bytes, device));
    codegen::FusedMlpMma launch = f;
    launch.threads = 32 * max_warps;
    codegen::LaunchDims d = codegen::launch_dims(launch, **k, n);
    const int64_t tiles = (rows + f.tile_rows - 1) / f.tile_rows;
    d.grid = static_cast<unsigned>(
        std::clamp<int64_t>((tiles + d.block / 32 - 1) / (d.block / 32), 1, sms));
    auto run = [&] {
      MLPC_CUDA(cudaLaunchKernel(built.func(), dim3(d.grid), dim3(d.block), args.data(),
                                 static_cast<size_t>(f.smem_bytes), nullptr));
    };
    const std::vector<uint16_t> out =
        bench::output_of_one_launch<uint16_t>(run, y.p, static_cast<size_t>(rows * kOut));
    // The reference on 64 rows spread over the batch.
    double worst = 0, sq = 0;
    int64_t checked = 0;
    for (int64_t i = 0; i < 64; ++i) {
      const int64_t r = i * (rows - 1) / 63;
      std::vector<double> h(x.begin() + r * s.in_width, x.begin() + (r + 1) * s.in_width);
      for (size_t l = 0; l < s.layers.size(); ++l) {
        const int64_t kk = static_cast<int64_t>(h.size()), nn = s.layers[l].n;
        std::vector<double> o(static_cast<size_t>(nn));
        for (int64_t j = 0; j < nn; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < kk; ++q) acc += h[q] * w[l][j * kk + q];
          o[j] = l + 1 < s.layers.size() ? runtime::round_to(dt, std::max(acc, 0.0)) : acc;
        }
        h = std::move(o);
      }
      const std::vector<double> got = runtime::decode(
          dt, reinterpret_cast<const uint8_t*>(out.data() + r * kOut), kOut);
      for (int64_t j = 0; j < kOut; ++j) {
        worst = std::max(worst, std::abs(got[j] - h[j]) / (1e-2 + std::abs(h[j])));
        sq += h[j] * h[j];
        ++checked;
      }
    }
    const double us = bench::median_launch_us(run);
    cudaFuncAttributes attr{};
    MLPC_CUDA(cudaFuncGetAttributes(&attr, built.func()));
    fmt::print(
        "{} [{}, {}] x {} layers -> {}, {} (NVRTC {:.0f} ms), at most {} warps a block ({} x {} "
        "threads, {} registers, {} B shared): {:.1f} us, {:.0f} GB/s, {:.1f} TFLOP/s; worst "
        "relative error {:.2g} on {} outputs (rms {:.2g})\n",
        ir::dtype_name(dt), rows, s.in_width, shape.k, kOut, variant, nvrtc_ms, max_warps, d.grid,
        d.block,
        attr.numRegs, f.smem_bytes, us, bytes / us / 1e3, flops / us / 1e6, worst, checked,
        std::sqrt(sq / static_cast<double>(checked)));
  }
}

void probe(const bench::Shape& shape, runtime::GemmBench&, int sms) {
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16}) probe_dtype(shape, dt, sms);
}

}  // namespace

int main(int argc, char** argv) {
  return bench::probe_main(argc, argv, "fused_mlp_probe", {{262144, 64, 6}}, probe);
}
