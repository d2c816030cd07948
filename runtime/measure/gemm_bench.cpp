#include "runtime/measure/gemm_bench.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <vector>

#include "runtime/jit/build_log.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/exec/device_random.h"
#include "runtime/exec/executor.h"
#include "runtime/gemm/gemm_lt.h"
#include "runtime/gemm/gemm_tuner.h"
#include "host/host_tensor.h"
#include "runtime/measure/replay_budget.h"
#include "runtime/measure/timing.h"
#include "host/wall_clock.h"

namespace mlpc::runtime {
namespace {

// A device buffer, grown on demand and freed with its owner.
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  void* reserve(size_t n) {
    if (n <= bytes) return p;
    if (p) MLPC_CUDA(cudaFree(p));
    p = nullptr;
    bytes = 0;
    MLPC_CUDA(cudaMalloc(&p, n));
    bytes = n;
    return p;
  }
};

}  // namespace

// The cuBLASLt handle, the tuner and the scratch buffers: made on the first shape the disk cache
// does not hold, so a compile whose shapes are all cached allocates and fills nothing.
struct GemmBench::Timer {
  explicit Timer(GemmAlgoCache& cache) : tuner{lt, &cache} {}
  GemmLt lt;
  GemmTuner tuner;
  DeviceBuffer x, w, y, bias;
};

struct GemmBench::State {
  GemmAlgoCache cache;
  std::unique_ptr<Timer> timer;
  Timer& timer_made() {
    if (!timer) timer = std::make_unique<Timer>(cache);
    return *timer;
  }
};

GemmBench::GemmBench() {
  if (auto why = gpu_unavailable_reason()) throw Error("no usable CUDA GPU: " + *why);
  s_ = std::make_unique<State>();
}

GemmBench::~GemmBench() = default;

double GemmBench::best_us(int64_t rows, int64_t n, int64_t k, ir::DType dtype,
                          const ir::GemmEpilogue& epilogue) {
  MLPC_ASSERT(!epilogue.residual, "GemmBench times no residual");
  codegen::GemmStep step;
  step.name = fmt::format("gemm_bench_{}x{}x{}", rows, n, k);
  step.epilogue = epilogue;
  step.n = n;
  step.k = k;
  step.dtype = dtype;
  const std::string key = gemm_tuning_key(step, rows, device_arch(), cublaslt_version());
  if (auto us = cached_us(key)) return *us;
  TimingEvent event{.thread = build_log_thread(), .start_ms = build_log_now_ms()};
  const auto t0 = std::chrono::steady_clock::now();
  Timer& t = s_->timer_made();
  const auto size = static_cast<int64_t>(ir::dtype_size(dtype));
  GemmOperands ops;
  ops.x = t.x.reserve(static_cast<size_t>(rows * k * size));
  ops.w = t.w.reserve(static_cast<size_t>(n * k * size));
  ops.y = t.y.reserve(static_cast<size_t>(rows * n * size));
  if (epilogue.bias) ops.bias = t.bias.reserve(static_cast<size_t>(n * size));
  fill_random_device(const_cast<void*>(ops.x), rows * k, dtype, 1.0, 1);
  fill_random_device(const_cast<void*>(ops.w), n * k, dtype,
                     1.0 / std::sqrt(static_cast<double>(k)), 2);
  if (ops.bias) fill_random_device(const_cast<void*>(ops.bias), n, dtype, 0.1, 3);
  MLPC_CUDA(cudaDeviceSynchronize());
  t.lt.prepare(step, rows);
  event.setup_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  GemmChoice c = t.tuner.tune(step, rows, ops, nullptr);
  event.timing_ms = ms_since(t1);
  event.us = c.us;
  event.plan = fmt::format("cuBLASLt's candidates for {} ({}; {} launches, {:.1f} ms of GPU time)",
                           key, c.from_cache ? "cached" : fmt::format("{} candidates", c.candidates),
                           c.launches, c.tuning_ms);
  log_timing(event);
  return c.us;
}

double GemmBench::copy_us(int64_t bytes) {
  if (bytes <= 0) return 0.0;
  // Kept in the same file as the GEMM timings (an entry with no algorithm), so that a warm
  // compile at -O2 measures nothing at all.
  const std::string key = fmt::format("{}|copy|{}", device_arch(), bytes);
  if (auto rec = s_->cache.find(key); rec && rec->us > 0) return rec->us;
  Timer& t = s_->timer_made();
  void* src = t.x.reserve(static_cast<size_t>(bytes));
  void* dst = t.y.reserve(static_cast<size_t>(bytes));
  cudaEvent_t start = nullptr, stop = nullptr;
  MLPC_CUDA(cudaEventCreate(&start));
  MLPC_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  try {
    auto copy_once = [&] {
      MLPC_CUDA(cudaEventRecord(start));
      MLPC_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice));
      MLPC_CUDA(cudaEventRecord(stop));
      MLPC_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      MLPC_CUDA(cudaEventElapsedTime(&ms, start, stop));
      return ms * 1e3;
    };
    // The first copy warms up, and its time picks the schedule (runtime/measure/replay_budget.h):
    // the full one (a second warm-up, then kCopies timed) unless it would pass the budget.
    constexpr int kCopies = 10;
    const double first = copy_once();
    const ReplaySchedule plan = replay_schedule(first, {1, kCopies, 0.0});
    if (plan.full) {
      copy_once();
      for (int i = 0; i < kCopies; ++i) us.push_back(copy_once());
    } else {
      us.push_back(first);
      while (static_cast<int>(us.size()) < plan.reps) us.push_back(copy_once());
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(us.begin(), us.end());
  GemmAlgoRecord rec;  // no algorithm: one "candidate", the copy
  rec.candidates = 1;
  rec.us = us[us.size() / 2];
  s_->cache.store(key, rec);
  return rec.us;
}

std::optional<double> GemmBench::cached_us(const std::string& key) {
  if (auto rec = s_->cache.find(key); rec && rec->us > 0) return rec->us;
  return std::nullopt;
}

double GemmBench::graph_us(const codegen::Plan& plan,
                           const std::map<std::string, std::vector<char>>& cubins, int64_t rows,
                           const std::string& key) {
  if (auto us = cached_us(key)) return *us;
  TimingEvent event{.thread = build_log_thread(), .start_ms = build_log_now_ms()};
  const auto t0 = std::chrono::steady_clock::now();
  Executor ex(plan, cubins, {.tune_gemms = true, .cuda_graph = true});
  ex.bind_batch(rows);
  uint64_t seed = 1;
  for (const codegen::Buffer& b : plan.buffers) {
    if (!b.uploaded()) continue;
    const int64_t fan_in = b.type.shape.rank() > 1 ? b.type.shape.last() : 1;
    ex.fill_random(b.name, b.role == codegen::BufferRole::Input ? 1.0 : 1.0 / std::sqrt(fan_in),
                   seed++);
  }
  event.setup_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  cudaStream_t stream = nullptr;
  MLPC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Timing t;
  double first_run_ms = 0;
  try {
    // The first run tunes the GEMMs (within their own budget) and captures the graph; then the
    // replays, as many as kReplayBudgetUs allows after the first says how long one takes.
    ex.run(stream);
    MLPC_CUDA(cudaStreamSynchronize(stream));
    first_run_ms = ms_since(t1);
    t = time_forward_within(ex, stream, kReplayBudgetUs,
                            {.warmup = 2, .reps = 7, .min_rep_ms = 2.0});
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  MLPC_CUDA(cudaStreamDestroy(stream));
  event.timing_ms = ms_since(t1);
  event.us = t.median_us;
  std::set<std::string> tuned;  // the keys this run tuned (found in no cache); steps repeat them
  int launches = 0;
  double tuning_ms = 0;
  for (const GemmChoice& c : ex.gemm_choices())
    if (c.launches > 0 && tuned.insert(c.key).second)
      launches += c.launches, tuning_ms += c.tuning_ms;
  event.plan = fmt::format("{} ({} steps; first run {:.1f} ms{}, then {} x {} forwards)",
                           plan.graph_name, plan.steps.size(), first_run_ms,
                           !tuned.empty() ? fmt::format(", GEMMs tuned in {} launches, {:.1f} ms of GPU time",
                                               launches, tuning_ms)
                                 : "",
                           t.reps, t.iters);
  log_timing(event);
  GemmAlgoRecord rec;  // no algorithm: one "candidate", the plan
  rec.candidates = 1;
  rec.us = t.median_us;
  s_->cache.store(key, rec);
  return rec.us;
}

}  // namespace mlpc::runtime
