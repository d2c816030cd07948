// The library API (mlpc/mlpc.h) on the GPU, on buffers the test allocates as a user program
// would: every sample at every level matches the fp64 reference at several batch sizes; params
// bound zero-copy or derived; the caller's own graph capture; pointers that change every call;
// two threads on one Module; the errors; no leaks over many compile-run-destroy cycles.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "codegen/tf32x3_plan.h"
#include "../error_of.h"
#include "compiler/check.h"
#include "compiler/samples.h"
#include "mlpc/mlpc.h"
#include "host/host_tensor.h"

using namespace mlpc;

namespace {

void cuda_ok(cudaError_t s) { REQUIRE(s == cudaSuccess); }

// A tensor in device memory the test owns, as a user's program would hold it.
struct DeviceTensor {
  DType dtype;
  std::vector<int64_t> dims;
  void* p = nullptr;
  size_t bytes = 0;

  DeviceTensor(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {
    bytes = static_cast<size_t>(runtime::HostTensor{dtype, dims, {}}.numel()) * ir::dtype_size(t);
    cuda_ok(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
  }
  explicit DeviceTensor(const runtime::HostTensor& t) : DeviceTensor(t.dtype, t.dims) { upload(t); }
  ~DeviceTensor() { cudaFree(p); }
  DeviceTensor(const DeviceTensor&) = delete;

  void upload(const runtime::HostTensor& t) {
    const std::vector<uint8_t> b = runtime::encode(t);
    REQUIRE(b.size() == bytes);
    cuda_ok(cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice));
  }
  runtime::HostTensor download() const {
    std::vector<uint8_t> b(bytes);
    cuda_ok(cudaDeviceSynchronize());
    cuda_ok(cudaMemcpy(b.data(), p, bytes, cudaMemcpyDeviceToHost));
    runtime::HostTensor t{dtype, dims, {}};
    t.data = runtime::decode(dtype, b.data(), t.numel());
    return t;
  }
  TensorRef ref() const { return {p, dtype, dims}; }
};

// One forward's buffers at `batch`: the inputs of `values`, zeroed outputs.
struct Io {
  std::vector<std::unique_ptr<DeviceTensor>> in, out;
  Io(const Module& m, const Values& values, int64_t batch) {
    for (const TensorInfo& i : m.inputs()) in.push_back(std::make_unique<DeviceTensor>(values.at(i.name)));
    for (size_t o = 0; o < m.outputs().size(); ++o)
      out.push_back(std::make_unique<DeviceTensor>(m.outputs()[o].dtype, m.output_shape(o, batch)));
  }
  std::vector<TensorRef> ins() const {
    std::vector<TensorRef> r;
    for (const auto& t : in) r.push_back(t->ref());
    return r;
  }
  std::vector<TensorRef> outs() const {
    std::vector<TensorRef> r;
    for (const auto& t : out) r.push_back(t->ref());
    return r;
  }
  std::vector<runtime::HostTensor> results() const {
    std::vector<runtime::HostTensor> r;
    for (const auto& t : out) r.push_back(t->download());
    return r;
  }
};

void set_params(Module& m, const Values& values) {
  for (const TensorInfo& p : m.params()) {
    const runtime::HostTensor& t = values.at(p.name);
    m.set_param_f64(p.name, t.data.data(), t.dims);
  }
}

// Values at `batch` whose params are those of `seed` at batch 1 (what set_params gave the module).
Values values_at(const ir::Graph& g, int64_t batch, uint64_t seed, uint64_t input_seed) {
  Values params = random_values(g, 1, seed);
  Values v = random_values(g, batch, input_seed);
  for (ir::NodeId id : g.params()) v[g.node(id).name] = params.at(g.node(id).name);
  return v;
}

void check_outputs(const ir::Graph& g, const std::vector<runtime::HostTensor>& got,
                   const Values& values, int64_t batch, bool tf32x3 = false) {
  const std::vector<int64_t> rows = sample_rows(batch);
  const Check c = compare_rows(g, got, rows, reference_on_rows(g, values, rows), tf32x3, &values);
  INFO("batch " << batch << ": max_abs_err " << c.max_abs_err << ", ratio " << c.worst_ratio);
  CHECK(c.ok);
}

using mlpc::test::error_of;

}  // namespace

TEST_CASE("api: samples at every level match the reference on the caller's buffers",
          "[gpu][api]") {
  for (const char* sample : {"linear", "geglu", "mlp3_small", "ffn"}) {
    const ir::Graph g = make_sample(sample);
    for (int level : {0, 1, 2}) {
      INFO(sample << " -O" << level);
      Module m = compile(g, {.level = level});
      set_params(m, random_values(g, 1, 5));
      for (int64_t batch : {1, 16, 1000}) {
        const Values v = values_at(g, batch, 5, 100 + batch);
        Io io(m, v, batch);
        m.run(io.ins(), io.outs());
        m.run(io.ins(), io.outs());  // the second replays the graph the first captured
        check_outputs(g, io.results(), v, batch);
      }
      CHECK(m.nvrtc_builds_since_compile() == 0);
    }
  }
}

TEST_CASE("api: bind_param reads the caller's memory, or derives what the plan stacks",
          "[gpu][api]") {
  const ir::Graph g = make_sample("geglu");
  const Values params = random_values(g, 1, 9);
  std::map<std::string, std::unique_ptr<DeviceTensor>> w;
  for (ir::NodeId id : g.params())
    w[g.node(id).name] = std::make_unique<DeviceTensor>(params.at(g.node(id).name));
  const int64_t batch = 64;
  const Values v = values_at(g, batch, 9, 3);

  SECTION("-O1: every param zero-copy") {
    Module m = compile(g, {.level = 1});
    for (auto& [name, t] : w) CHECK(m.bind_param(name, t->ref()));
    Io io(m, v, batch);
    m.run(io.ins(), io.outs());
    check_outputs(g, io.results(), v, batch);
    // New values in the same memory: the next run reads them (no copy was taken).
    const Values other = random_values(g, 1, 10);
    w.at("down.weight")->upload(other.at("down.weight"));
    Values v2 = v;
    v2["down.weight"] = other.at("down.weight");
    m.run(io.ins(), io.outs());
    check_outputs(g, io.results(), v2, batch);
  }
  SECTION("-O2 with merged gate and up: those two are copied into the concat") {
    Module m = compile(g, {.level = 2, .merge_gemms = "on", .gated_gemms = "off"});
    REQUIRE(m.ir().find("concat %gate.weight, %up.weight") != std::string::npos);
    CHECK_FALSE(m.bind_param("gate.weight", w.at("gate.weight")->ref()));
    CHECK_FALSE(m.bind_param("up.weight", w.at("up.weight")->ref()));
    CHECK(m.bind_param("down.weight", w.at("down.weight")->ref()));
    Io io(m, v, batch);
    m.run(io.ins(), io.outs());
    check_outputs(g, io.results(), v, batch);
  }
  SECTION("fp32 with 3xTF32: the TF32 parts are derived at bind") {
    const ir::Graph f = make_sample("mlp3_small");
    Module m = compile(f, {.level = 2, .fp32_gemms = "tf32x3"});
    const Values fp = random_values(f, 1, 4);
    std::vector<std::unique_ptr<DeviceTensor>> keep;
    bool any_copied = false;
    for (const TensorInfo& p : m.params()) {
      keep.push_back(std::make_unique<DeviceTensor>(fp.at(p.name)));
      any_copied |= !m.bind_param(p.name, keep.back()->ref());
    }
    CHECK(any_copied);  // the weights' TF32 parts
    const Values fv = values_at(f, 256, 4, 8);
    Io io(m, fv, 256);
    m.run(io.ins(), io.outs());
    check_outputs(f, io.results(), fv, 256, /*tf32x3=*/true);
  }
}

TEST_CASE("api: a run captured into the caller's CUDA graph replays correctly", "[gpu][api]") {
  const ir::Graph g = make_sample("geglu");
  Module m = compile(g, {.level = 2});
  set_params(m, random_values(g, 1, 2));
  const int64_t batch = 16;
  Values v = values_at(g, batch, 2, 1);
  Io io(m, v, batch);
  cudaStream_t s;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // A batch size never run cannot be captured: its GEMMs are tuned on its first run.
  Io other(m, values_at(g, 32, 2, 1), 32);
  cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(error_of([&] { m.run(other.ins(), other.outs(), s); }) ==
        "run once at batch 32 outside a CUDA graph capture first (its GEMMs are tuned then)");
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(s, &graph);
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();

  m.run(io.ins(), io.outs(), s);  // outside a capture: tunes
  cuda_ok(cudaStreamSynchronize(s));
  cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  m.run(io.ins(), io.outs(), s);
  cuda_ok(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0));
  for (uint64_t seed : {11, 12}) {  // new input values, the caller's graph replayed
    v = values_at(g, batch, 2, seed);
    io.in[0]->upload(v.at("x"));
    cuda_ok(cudaGraphLaunch(exec, s));
    cuda_ok(cudaStreamSynchronize(s));
    check_outputs(g, io.results(), v, batch);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST_CASE("api: input and output pointers that change every call", "[gpu][api]") {
  const ir::Graph g = make_sample("geglu");
  Module m = compile(g, {.level = 1});
  set_params(m, random_values(g, 1, 6));
  const int64_t batch = 16;
  // More pointer tuples than graphs kept per batch: the LRU turns over, then the eager fallback
  // takes over; then one tuple repeated brings graphs back.
  std::vector<Values> values;
  std::vector<std::unique_ptr<Io>> ios;
  for (int i = 0; i < 12; ++i) {
    values.push_back(values_at(g, batch, 6, 200 + i));
    ios.push_back(std::make_unique<Io>(m, values.back(), batch));
  }
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < ios.size(); ++i) {
      INFO("round " << round << " tuple " << i);
      m.run(ios[i]->ins(), ios[i]->outs());
      check_outputs(g, ios[i]->results(), values[i], batch);
    }
  for (int i = 0; i < 20; ++i) {
    cuda_ok(cudaMemset(ios[0]->out[0]->p, 0, ios[0]->out[0]->bytes));
    m.run(ios[0]->ins(), ios[0]->outs());
    if (i % 5 == 4) check_outputs(g, ios[0]->results(), values[0], batch);
  }
  // Two tuples alternating: both stay in the graph LRU.
  for (int i = 0; i < 10; ++i) {
    const size_t k = static_cast<size_t>(i % 2);
    m.run(ios[k]->ins(), ios[k]->outs());
    check_outputs(g, ios[k]->results(), values[k], batch);
  }
}

TEST_CASE("api: two threads share one Module, each with its inputs and stream", "[gpu][api]") {
  const ir::Graph g = make_sample("geglu");
  Module m = compile(g, {.level = 2});
  set_params(m, random_values(g, 1, 8));
  struct Worker {
    int64_t batch;
    Values v;
    std::unique_ptr<Io> io;
    std::vector<runtime::HostTensor> expected;
    cudaStream_t s = nullptr;
    int bad = 0;
  };
  std::vector<Worker> workers(2);
  for (int t = 0; t < 2; ++t) {
    Worker& w = workers[t];
    w.batch = t == 0 ? 16 : 200;
    w.v = values_at(g, w.batch, 8, 40 + t);
    w.io = std::make_unique<Io>(m, w.v, w.batch);
    cuda_ok(cudaStreamCreateWithFlags(&w.s, cudaStreamNonBlocking));
    m.run(w.io->ins(), w.io->outs(), w.s);  // tunes this batch
    m.run(w.io->ins(), w.io->outs(), w.s);  // as every later run: the chosen GEMM algorithms
    cuda_ok(cudaStreamSynchronize(w.s));
    w.expected = w.io->results();
    check_outputs(g, w.expected, w.v, w.batch);
  }
  std::vector<std::thread> threads;
  for (Worker& w : workers)
    threads.emplace_back([&m, &w] {
      for (int i = 0; i < 50; ++i) {
        cudaMemsetAsync(w.io->out[0]->p, 0, w.io->out[0]->bytes, w.s);
        m.run(w.io->ins(), w.io->outs(), w.s);
        cudaStreamSynchronize(w.s);
        std::vector<uint8_t> raw(w.io->out[0]->bytes);
        cudaMemcpy(raw.data(), w.io->out[0]->p, raw.size(), cudaMemcpyDeviceToHost);
        const std::vector<double> got =
            runtime::decode(w.io->out[0]->dtype, raw.data(), w.expected[0].numel());
        // The same forward as the expected one, up to split-K summation order: a forward of the
        // other thread's input (or a zeroed output) is far off.
        for (size_t j = 0; j < got.size(); ++j)
          if (std::abs(got[j] - w.expected[0].data[j]) > 0.02 + 0.02 * std::abs(w.expected[0].data[j])) {
            ++w.bad;
            break;
          }
      }
    });
  for (std::thread& t : threads) t.join();
  for (Worker& w : workers) {
    INFO("batch " << w.batch);
    CHECK(w.bad == 0);
    cudaStreamDestroy(w.s);
  }
}

TEST_CASE("api: errors on the GPU name what is wrong, and the module runs on", "[gpu][api]") {
  const ir::Graph g = make_sample("geglu");
  Module m = compile(g, {.level = 1});
  const int64_t batch = 16;
  const Values v = values_at(g, batch, 3, 3);
  Io io(m, v, batch);
  CHECK(error_of([&] { m.run(io.ins(), io.outs()); }) == "param gate.weight was never set");
  set_params(m, random_values(g, 1, 3));

  CHECK(error_of([&] { m.run(io.ins(), {}); }) == "expected 1 output (down), got 0");
  CHECK(error_of([&] {
          m.run({{io.in[0]->p, DType::F32, {batch, 768}}}, io.outs());
        }) == "input x: expected bf16[M, 768], got f32[16, 768]");
  std::vector<uint16_t> host(batch * 768);
  const std::string not_device = error_of([&] {
    m.run({{host.data(), DType::BF16, {batch, 768}}}, io.outs());
  });
  INFO(not_device);
  CHECK(not_device.rfind("input x: pointer ", 0) == 0);
  CHECK(not_device.find("is not device memory") != std::string::npos);
  CHECK(error_of([&] {
          m.run(io.ins(), {{io.in[0]->p, DType::BF16, {batch, 768}}});
        }) == "output down overlaps input x");

  // An arena that cannot fit: a clean error, and the module still runs at a normal batch.
  const int64_t huge = int64_t{1} << 40;
  const std::string oom = error_of([&] {
    m.run({{io.in[0]->p, DType::BF16, {huge, 768}}}, {{io.out[0]->p, DType::BF16, {huge, 768}}});
  });
  INFO(oom);
  CHECK(oom.rfind("cannot run geglu at batch 1099511627776: ", 0) == 0);
  CHECK(oom.find('\n') == std::string::npos);
  m.run(io.ins(), io.outs());
  check_outputs(g, io.results(), v, batch);
}

TEST_CASE("api: compile, run and destroy 1000 times leaks no device memory", "[gpu][api][leak]") {
  const std::vector<ir::Graph> graphs = {make_sample("linear"), make_sample("mlp3_small")};
  auto cycle = [&](int i) {
    const ir::Graph& g = graphs[static_cast<size_t>(i) % graphs.size()];
    Module m = compile(g, {.level = 1});
    set_params(m, random_values(g, 1, 1));
    const int64_t batch = 1 + i % 3 * 7;
    const Values v = values_at(g, batch, 1, 1);
    Io io(m, v, batch);
    m.run(io.ins(), io.outs());
    m.run(io.ins(), io.outs());
    cuda_ok(cudaDeviceSynchronize());
  };
  for (int i = 0; i < 6; ++i) cycle(i);  // warm: kernel and GEMM caches, cuBLASLt handles
  size_t free0 = 0, free1 = 0, total = 0;
  cuda_ok(cudaMemGetInfo(&free0, &total));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) cycle(i);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cuda_ok(cudaMemGetInfo(&free1, &total));
  const double lost_mb = (static_cast<double>(free0) - static_cast<double>(free1)) / 1e6;
  INFO("1000 cycles in " << s << " s; device memory lost " << lost_mb << " MB");
  CHECK(lost_mb < 8.0);
  CHECK(s < 60.0);
}
