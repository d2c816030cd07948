// The fused MLP on the tensor cores (codegen/fused_mlp_mma_kernel.h) on the GPU against the fp64
// reference: a plan of the one generated kernel, run by the executor at batches of one row, a
// ragged tail (127, 1000) and 2^18 rows (many tiles a warp), for 1 to 8 layers at width 64,
// widths 32 and 128, biases with GELU (tanh), a residual and an odd output width; f16 and bf16.
// Values: testing::mlp_values (He-scaled weights, so every layer matters). Last, the same MLPs
// through the compiler: -O2's fused.mlp region, one launch, against the reference.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>

#include "codegen/fused_mlp_mma_kernel.h"
#include "compiler/check.h"
#include "compiler/gemm_decisions.h"
#include "compiler/gpu_session.h"
#include "compiler/levels.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/exec/executor.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "../fused_mlp_test_util.h"
#include "check_on_gpu.h"

using namespace mlpc;
using testing::mlp_spec;

namespace {


std::string describe(const codegen::FusedMlpSpec& s) {
  std::string d = fmt::format("{} {}", ir::dtype_name(s.dtype), s.in_width);
  for (const codegen::FusedMlpLayer& l : s.layers)
    d += fmt::format(" -> {}{}{}", l.n, l.bias ? " +b" : "",
                     l.act ? " " + std::string(ir::op_name(*l.act)) : "");
  return d + (s.residual ? " + x" : "");
}

// `s` as one kernel through the executor, at each batch, against the reference on sampled rows.
void check_kernel(const codegen::FusedMlpSpec& s, const std::vector<int64_t>& batches,
                  bool loops) {
  INFO(describe(s) << (loops ? ", alike layers looped" : ", every layer unrolled"));
  codegen::FusedMlpMmaShape shape = codegen::fused_mlp_mma_shape(s);
  shape.loop_alike_layers = loops;
  auto k = codegen::generate_fused_mlp_mma_kernel(s, "fused_mlp_test", shape);
  REQUIRE(k);
  const codegen::Plan plan = testing::fused_mlp_plan(s, *k);
  std::map<std::string, std::vector<char>> cubins;
  cubins[k->name] = runtime::compile_to_cubin(k->source, k->name, runtime::device_arch());
  runtime::Executor ex(plan, cubins);
  const ir::Graph g = testing::mlp_graph(s);
  for (int64_t batch : batches) {
    INFO("batch " << batch);
    const Values values = testing::mlp_values(s, batch, 1000 + static_cast<uint64_t>(batch));
    bind_inputs_and_params(ex, plan, values, batch);
    ex.run();
    const std::vector<int64_t> rows = sample_rows(batch);
    const std::vector<runtime::HostTensor> ref = reference_on_rows(g, values, rows);
    // The values keep their scale through every layer: not all zero, not blown up.
    double sq = 0;
    for (double e : ref[0].data) sq += e * e;
    const double rms = std::sqrt(sq / static_cast<double>(ref[0].data.size()));
    CHECK(rms > 0.05);
    CHECK(rms < 20);
    const Check c = compare_rows(g, ex.outputs(), rows, ref, false, &values);
    INFO("max_abs_err " << c.max_abs_err << ", tolerance ratio " << c.worst_ratio
                        << ", contribution ratio " << c.contribution_worst_ratio);
    CHECK(c.ok);
  }
}

// Both forms of the kernel where they differ (alike hidden layers looped or unrolled).
void check_spec(const codegen::FusedMlpSpec& s, const std::vector<int64_t>& batches) {
  check_kernel(s, batches, true);
  if (!codegen::fused_mlp_layer_loops(s).empty()) check_kernel(s, batches, false);
}

bool skip() {
  if (passes::mma_gemms_run_on(runtime::device_arch())) return false;
  WARN("skipped: the fused MLP mma kernel needs sm_80, this GPU is " + runtime::device_arch());
  return true;
}

const std::vector<int64_t> kBatches = {1, 127, 1000, int64_t{1} << 18};

}  // namespace

TEST_CASE("fused MLP mma kernel matches the reference: 1 to 8 layers at width 64",
          "[gpu][fused_mlp]") {
  if (skip()) return;
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16})
    for (int layers = 1; layers <= 8; ++layers) {
      std::vector<int64_t> widths(static_cast<size_t>(layers - 1), 64);
      widths.push_back(16);
      check_spec(mlp_spec(dt, 64, widths), kBatches);
    }
}

TEST_CASE("fused MLP mma kernel matches the reference: widths 32 and 128, epilogues, odd widths",
          "[gpu][fused_mlp]") {
  if (skip()) return;
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16}) {
    check_spec(mlp_spec(dt, 32, {32, 32, 32, 32, 8}), kBatches);
    check_spec(mlp_spec(dt, 64, {128, 128, 128, 128, 16}), kBatches);
    // The widest that fits: 8 layers, 128 wide.
    check_spec(mlp_spec(dt, 64, {128, 128, 128, 128, 128, 128, 128, 1}), {127, 1000});
    check_spec(mlp_spec(dt, 64, {64, 64, 16}, ir::Op::GeluTanh, /*bias=*/true, false,
                        ir::Op::GeluTanh),
               kBatches);
    // narrow_gelu's shape: biases and GELU in a loop of three alike layers, a residual at the end.
    check_spec(mlp_spec(dt, 64, {64, 64, 64, 64, 64}, ir::Op::GeluTanh, /*bias=*/true,
                        /*residual=*/true),
               kBatches);
    check_spec(mlp_spec(dt, 64, {128, 64}, ir::Op::Silu, true, /*residual=*/true), kBatches);
    // in_width 48 (a 16-wide tail of x), output width 3.
    check_spec(mlp_spec(dt, 48, {64, 3}, ir::Op::Relu, true), {1, 127, 1000});
    check_spec(mlp_spec(dt, 16, {16}), {1, 127});
  }
}

TEST_CASE("fused MLP mma kernel stores no row past the end and every element of y",
          "[gpu][fused_mlp]") {
  if (skip()) return;
  const codegen::FusedMlpSpec s = mlp_spec(ir::DType::F16, 64, {64, 64, 3});
  auto k = codegen::generate_fused_mlp_mma_kernel(s, "fused_mlp_tail");
  REQUIRE(k);
  const std::vector<char> cubin = runtime::compile_to_cubin(k->source, k->name, runtime::device_arch());
  cudaLibrary_t lib = nullptr;
  MLPC_CUDA(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  MLPC_CUDA(cudaLibraryGetKernel(&kernel, lib, k->name.c_str()));
  const int64_t rows = 77, guard = 4096;
  const Values v = testing::mlp_values(s, rows, 3);
  std::vector<void*> ptrs;
  for (const char* name : {"x", "w1", "w2", "w3"}) {
    const std::vector<uint8_t> bytes = runtime::encode(v.at(name));
    void* p = nullptr;
    MLPC_CUDA(cudaMalloc(&p, bytes.size()));
    MLPC_CUDA(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    ptrs.push_back(p);
  }
  const size_t y_bytes = static_cast<size_t>((rows * 3 + guard) * 2);
  void* y = nullptr;
  MLPC_CUDA(cudaMalloc(&y, y_bytes));
  MLPC_CUDA(cudaMemset(y, 0xFF, y_bytes));  // NaN in f16
  long long n = rows * 3;
  std::vector<void*> args;
  for (void*& p : ptrs) args.push_back(&p);
  args.push_back(&y);
  args.push_back(&n);
  const codegen::LaunchDims d = codegen::launch_dims(*k->as<codegen::FusedMlpMma>(), *k, n);
  MLPC_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(d.grid), dim3(d.block),
                             args.data(), static_cast<size_t>(k->smem_bytes()), nullptr));
  MLPC_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> out(y_bytes);
  MLPC_CUDA(cudaMemcpy(out.data(), y, y_bytes, cudaMemcpyDeviceToHost));
  const std::vector<double> got = runtime::decode(ir::DType::F16, out.data(), rows * 3 + guard);
  int64_t unwritten = 0, past_end = 0;
  for (int64_t i = 0; i < rows * 3; ++i) unwritten += std::isnan(got[static_cast<size_t>(i)]);
  for (int64_t i = rows * 3; i < rows * 3 + guard; ++i)
    past_end += !std::isnan(got[static_cast<size_t>(i)]);
  CHECK(unwritten == 0);
  CHECK(past_end == 0);
  for (void* p : ptrs) cudaFree(p);
  cudaFree(y);
  cudaLibraryUnload(lib);
}

TEST_CASE("fused.mlp regions from -O2 run as one launch and match the reference",
          "[gpu][fused_mlp]") {
  if (skip()) return;
  const bool hopper = passes::fused_mlps_run_on(runtime::device_arch(), ir::DType::F32);
  std::vector<codegen::FusedMlpSpec> specs = {
      mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 64, 16}),
      mlp_spec(ir::DType::BF16, 64, {128, 128, 16}, ir::Op::GeluTanh, /*bias=*/true),
      mlp_spec(ir::DType::F16, 32, {32, 32, 1})};
  if (hopper) specs.push_back(testing::mlp3_small_spec());  // the f32 cluster kernel
  for (const codegen::FusedMlpSpec& s : specs) {
    INFO(describe(s));
    CompileOptions o = options_for_level(2, {.fused_mlp = "on"});
    o.decide_rows = 1000;
    const ir::Graph g = testing::mlp_graph(s);
    const CompiledGraph c = compile(g, o);
    REQUIRE(c.plan.launches() == 1);
    for (int64_t batch : kBatches) {
      INFO("batch " << batch);
      const Values values = testing::mlp_values(s, batch, 77);
      const std::vector<int64_t> rows = sample_rows(batch);
      testing::check_rows_on_gpu(g, c, values, batch, rows, reference_on_rows(g, values, rows));
    }
  }
}
