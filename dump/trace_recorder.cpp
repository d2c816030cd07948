#include "dump/trace_recorder.h"

#include <chrono>

#include "compiler/check.h"
#include "compiler/gpu_session.h"
#include "dump/report.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/exec/step_hooks.h"

namespace mlpc {
namespace {

using Clock = std::chrono::steady_clock;

// Events and host times around each step; CUDA errors are kept (the hooks must not throw) and
// raised once the forward is enqueued.
class Recorder : public runtime::StepObserver {
 public:
  explicit Recorder(size_t steps) : begin_(steps), end_(steps), host_(steps) {
    for (size_t i = 0; i < steps; ++i) {
      MLPC_CUDA(cudaEventCreate(&begin_[i]));
      MLPC_CUDA(cudaEventCreate(&end_[i]));
    }
    MLPC_CUDA(cudaEventCreate(&origin_));
  }
  ~Recorder() override {
    for (size_t i = 0; i < begin_.size(); ++i) {
      if (begin_[i]) cudaEventDestroy(begin_[i]);
      if (end_[i]) cudaEventDestroy(end_[i]);
    }
    if (origin_) cudaEventDestroy(origin_);
  }

  // The GPU's and the host's zero: an event on an idle stream completes when it is recorded.
  void start(cudaStream_t stream) {
    MLPC_CUDA(cudaStreamSynchronize(stream));
    MLPC_CUDA(cudaEventRecord(origin_, stream));
    t0_ = Clock::now();
  }
  void before_step(size_t i, cudaStream_t stream) noexcept override {
    if (i >= begin_.size()) return;
    keep(cudaEventRecord(begin_[i], stream));
    host_[i].first = us_since_start();
  }
  void after_step(size_t i, cudaStream_t stream) noexcept override {
    if (i >= end_.size()) return;
    host_[i].second = us_since_start();
    keep(cudaEventRecord(end_[i], stream));
    recorded_.push_back(i);
  }
  // Fills the launches' intervals, once the forward was enqueued.
  void finish(cudaStream_t stream, std::vector<LaunchTiming>& launches) {
    MLPC_CUDA(error_);
    MLPC_CUDA(cudaStreamSynchronize(stream));
    MLPC_ASSERT(recorded_.size() == launches.size(),
                "trace: every step of the forward is launched once");
    for (size_t i : recorded_) {
      float b = 0, e = 0;
      MLPC_CUDA(cudaEventElapsedTime(&b, origin_, begin_[i]));
      MLPC_CUDA(cudaEventElapsedTime(&e, origin_, end_[i]));
      launches[i].gpu_begin_us = b * 1e3;
      launches[i].gpu_end_us = e * 1e3;
      launches[i].host_begin_us = host_[i].first;
      launches[i].host_end_us = host_[i].second;
    }
  }

 private:
  double us_since_start() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0_).count();
  }
  void keep(cudaError_t e) {
    if (e != cudaSuccess && error_ == cudaSuccess) error_ = e;
  }

  std::vector<cudaEvent_t> begin_, end_;
  std::vector<std::pair<double, double>> host_;
  std::vector<size_t> recorded_;
  cudaEvent_t origin_ = nullptr;
  Clock::time_point t0_;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace

ForwardTrace record_forward(const ir::Graph& g, const CompiledGraph& c, int64_t batch,
                            uint64_t seed, const runtime::ExecutorOptions& exec,
                            const std::string& label) {
  runtime::ExecutorOptions step_by_step = exec;
  step_by_step.cuda_graph = false;
  runtime::Executor e(c.plan, c.cubins, step_by_step);
  bind_inputs_and_params(e, c.plan, random_values(g, batch, seed), batch);
  cudaStream_t stream = nullptr;
  MLPC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ForwardTrace t;
  t.label = label;
  try {
    e.run(stream);  // chooses GEMM algorithms
    e.run(stream);  // warm: modules loaded, caches hot
    for (const StepFacts& f : plan_facts(c.plan, batch))
      t.launches.push_back({.name = f.name, .kind = f.kind, .bytes = f.bytes, .flops = f.flops});
    Recorder r(c.plan.steps.size());
    r.start(stream);
    {
      runtime::ScopedStepObserver observe(&r);
      e.run(stream);
    }
    r.finish(stream, t.launches);
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  MLPC_CUDA(cudaStreamDestroy(stream));
  return t;
}

nlohmann::json trace_bench(const ir::Graph& g, int64_t batch, uint64_t seed,
                           const CompileOptions& compiled, const runtime::ExecutorOptions& exec) {
  require_gpu();
  CompiledGraph eager = compile(g, {.fusion = false, .arch = compiled.arch});
  CompiledGraph fused = compile(g, compiled);
  std::vector<ForwardTrace> forwards = {
      record_forward(g, eager, batch, seed, {.tune_gemms = false, .cuda_graph = false}, "eager"),
      record_forward(g, fused, batch, seed, exec, "compiled")};
  nlohmann::json meta = {{"graph", g.name},
                         {"batch", batch},
                         {"device", runtime::device_info().name},
                         {"note", "each forward launched step by step (no CUDA graph); GPU "
                                  "intervals are CUDA events around each launch"}};
  return chrome_trace(forwards, meta);
}

}  // namespace mlpc
