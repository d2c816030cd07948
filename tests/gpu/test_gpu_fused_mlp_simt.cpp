// The fp32 fused-MLP kernel (codegen/fused_mlp_simt_kernel.h) on the GPU: a plan of its one step,
// run through the Executor, against the fp64 reference on seeded values in which every layer
// matters. mlp3_small's shape and others (one layer to eight, bias or not, relu, gelu_tanh, silu,
// a residual, layers narrower than the cluster), ragged batches, the other tile configurations;
// then twice in a row, in the executor's CUDA graph and in a caller's graph holding two
// forwards, launched twice: nothing a launch leaves behind may change the next one.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>


#include "codegen/fused_mlp_simt_kernel.h"
#include "compiler/check.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/exec/executor.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "../fused_mlp_test_util.h"

using namespace mlpc;
using codegen::FusedMlpSpec;
using testing::mlp_spec;

namespace {

using O = ir::Op;

struct Built {
  codegen::Plan plan;
  std::map<std::string, std::vector<char>> cubins;
};

Built build(const FusedMlpSpec& spec, const codegen::FusedMlpSimtConfig& config = {}) {
  auto k = codegen::generate_fused_mlp_simt_kernel(spec, "fused_mlp_gpu", config);
  REQUIRE(k);
  Built b{testing::fused_mlp_plan(spec, *k), {}};
  b.cubins[k->name] = runtime::compile_to_cubin(k->source, k->name, runtime::device_arch());
  return b;
}

// Binds `batch`, uploads `values` and poisons y (all bits set: NaN), so that an element the
// kernel does not write fails the check.
void bind_values(runtime::Executor& ex, const Values& values, int64_t batch,
                 const FusedMlpSpec& spec) {
  ex.bind_batch(batch);
  for (const auto& [name, t] : values) ex.set_tensor(name, t);
  ex.set_bytes("y", std::vector<uint8_t>(static_cast<size_t>(batch * spec.out_width() * 4), 0xFF));
}

// `y` is the reference of `spec` on `values`, on rows sampled from the batch.
void check(const FusedMlpSpec& spec, const Values& values, int64_t batch,
           const runtime::HostTensor& y) {
  const ir::Graph g = testing::mlp_graph(spec);
  const std::vector<int64_t> rows = sample_rows(batch, 128);
  const Check c =
      compare_rows(g, {y}, rows, reference_on_rows(g, values, rows), false, &values);
  INFO("max_abs_err " << c.max_abs_err << ", tolerance ratio " << c.worst_ratio
                      << ", contribution ratio " << c.contribution_worst_ratio);
  CHECK(c.ok);
}

// One run of `ex` (a plan of `spec`'s kernel) at `batch` on values drawn from `seed`, checked.
void run_and_check(runtime::Executor& ex, const FusedMlpSpec& spec, int64_t batch,
                   uint64_t seed) {
  INFO("batch " << batch);
  const Values values = testing::mlp_values(spec, batch, seed);
  bind_values(ex, values, batch, spec);
  ex.run();
  check(spec, values, batch, ex.outputs().at(0));
}

}  // namespace

TEST_CASE("fused MLP simt kernel matches the reference", "[gpu][fused_mlp]") {
  for (const FusedMlpSpec& spec : testing::varied_specs()) {
    INFO(testing::mlp_text(spec));
    const Built b = build(spec);
    runtime::Executor ex(b.plan, b.cubins, {.tune_gemms = false, .cuda_graph = false});
    for (int64_t batch : {1, 64, 127, 1000}) run_and_check(ex, spec, batch, 7);
  }
}

TEST_CASE("fused MLP simt kernel: any number of rows, one cluster a tile", "[gpu][fused_mlp]") {
  const FusedMlpSpec spec = testing::mlp3_small_spec();
  const Built b = build(spec);
  runtime::Executor ex(b.plan, b.cubins, {.tune_gemms = false, .cuda_graph = false});
  for (int64_t batch : {8, 9, 4097, 20000}) run_and_check(ex, spec, batch, 8);
}

TEST_CASE("fused MLP simt kernel: other tiles and block sizes", "[gpu][fused_mlp]") {
  for (const codegen::FusedMlpSimtConfig& config :
       {codegen::FusedMlpSimtConfig{.rows_per_tile = 4, .warps = 4},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 16, .warps = 8},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 8, .warps = 8},
        codegen::FusedMlpSimtConfig{.rows_per_tile = 8, .warps = 2}}) {
    for (const FusedMlpSpec& spec :
         {testing::mlp3_small_spec(),
          mlp_spec(64, {{128, true, O::Silu}, {64, false, {}}}, true)}) {
      if (!codegen::fused_mlp_simt_fits(spec, runtime::device_arch(), nullptr, config)) continue;
      INFO(config.rows_per_tile << " rows, " << config.warps << " warps\n"
                                << testing::mlp_text(spec));
      const Built b = build(spec, config);
      runtime::Executor ex(b.plan, b.cubins, {.tune_gemms = false, .cuda_graph = false});
      for (int64_t batch : {1, 64, 127}) run_and_check(ex, spec, batch, 9);
    }
  }
}

TEST_CASE("fused MLP simt kernel: launch after launch, in CUDA graphs", "[gpu][fused_mlp]") {
  for (const FusedMlpSpec& spec :
       {testing::mlp3_small_spec(),
        mlp_spec(64, {{128, true, O::GeluTanh}, {64, true, {}}}, true)}) {
    INFO(testing::mlp_text(spec));
    const int64_t batch = 127;
    const Built b = build(spec);
    runtime::Executor ex(b.plan, b.cubins, {.tune_gemms = false, .cuda_graph = true});
    Values values = testing::mlp_values(spec, batch, 10);
    bind_values(ex, values, batch, spec);
    // Eager, then captured into the executor's graph and launched, then the graph replayed with
    // new inputs.
    for (int run = 0; run < 3; ++run) {
      INFO("run " << run);
      if (run == 2) {
        values["x"] = testing::mlp_values(spec, batch, 11).at("x");
        ex.set_tensor("x", values["x"]);
      }
      ex.run();
      check(spec, values, batch, ex.outputs().at(0));
    }
    CHECK(ex.uses_cuda_graph());

    // The caller's graph: two forwards into two outputs, the graph launched twice.
    const size_t x_bytes = static_cast<size_t>(batch * spec.in_width * 4);
    const size_t y_bytes = static_cast<size_t>(batch * spec.out_width() * 4);
    void *x = nullptr, *y1 = nullptr, *y2 = nullptr;
    MLPC_CUDA(cudaMalloc(&x, x_bytes));
    MLPC_CUDA(cudaMalloc(&y1, y_bytes));
    MLPC_CUDA(cudaMalloc(&y2, y_bytes));
    const std::vector<uint8_t> x_host = runtime::encode(values["x"]);
    MLPC_CUDA(cudaMemcpy(x, x_host.data(), x_bytes, cudaMemcpyHostToDevice));
    cudaStream_t s = nullptr;
    MLPC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ex.run({x}, {y1}, s);  // these pointers' first run, outside a capture
    MLPC_CUDA(cudaStreamSynchronize(s));
    cudaGraph_t graph = nullptr;
    MLPC_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    ex.run({x}, {y1}, s);
    ex.run({x}, {y2}, s);
    MLPC_CUDA(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec = nullptr;
    MLPC_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int launch = 0; launch < 2; ++launch) {
      INFO("graph launch " << launch);
      MLPC_CUDA(cudaMemsetAsync(y1, 0xFF, y_bytes, s));
      MLPC_CUDA(cudaMemsetAsync(y2, 0xFF, y_bytes, s));
      MLPC_CUDA(cudaGraphLaunch(exec, s));
      MLPC_CUDA(cudaStreamSynchronize(s));
      for (void* y : {y1, y2}) {
        std::vector<uint8_t> bytes(y_bytes);
        MLPC_CUDA(cudaMemcpy(bytes.data(), y, y_bytes, cudaMemcpyDeviceToHost));
        const runtime::HostTensor got{ir::DType::F32, {batch, spec.out_width()},
                                      runtime::decode(ir::DType::F32, bytes.data(),
                                                      batch * spec.out_width())};
        check(spec, values, batch, got);
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    cudaFree(x);
    cudaFree(y1);
    cudaFree(y2);
  }
}
