#include "runtime/gemm/gemm_tuner.h"

#include "host/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ir/error.h"
#include "host/cache_dir.h"
#include "runtime/device/cuda_check.h"
#include "runtime/device/device.h"
#include "runtime/gemm/gemm_lt.h"

namespace mlpc::runtime {

static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(AlgoWords),
              "cublasLtMatmulAlgo_t is no longer 8 uint64 words: bump the cache format");

namespace {

constexpr const char* kFormat = "mlpc-gemm-algos-v1";
constexpr uintmax_t kMaxFileBytes = uintmax_t{64} << 20;  // anything larger is not ours

// One record from its JSON object; nullopt on any wrong type or out-of-range value.
std::optional<GemmAlgoRecord> record_from_json(const nlohmann::json& e) {
  if (!e.is_object()) return std::nullopt;
  auto algo = e.find("algo");
  auto us = e.find("us");
  auto index = e.find("heuristic_index");
  auto count = e.find("candidates");
  if (algo == e.end() || us == e.end() || index == e.end() || count == e.end())
    return std::nullopt;
  if (!algo->is_string() || !us->is_number() || !index->is_number_integer() ||
      !count->is_number_integer())
    return std::nullopt;
  GemmAlgoRecord r;
  auto words = algo_from_hex(algo->get_ref<const std::string&>());
  if (!words) return std::nullopt;
  r.algo = *words;
  r.us = us->get<double>();
  const auto i = index->get<int64_t>(), n = count->get<int64_t>();
  if (!std::isfinite(r.us) || r.us < 0 || n < 1 || n > 1024 || i < 0 || i >= n)
    return std::nullopt;
  r.heuristic_index = static_cast<int>(i);
  r.candidates = static_cast<int>(n);
  return r;
}

}  // namespace

// ---- keys and (de)serialization (no GPU) --------------------------------------------------------

std::string gemm_tuning_key(const GemmKey& k) {
  return fmt::format("{}|{}|{}x{}x{}|{}|res{}|cublasLt{}{}{}{}{}", k.arch, ir::dtype_name(k.dtype),
                     k.rows, k.n, k.k, passes::lt_epilogue_name(k.epilogue), k.residual ? 1 : 0,
                     k.cublaslt_version, k.tf32x3 ? "|tf32x3" : "",
                     k.ld > 0 ? fmt::format("|ld{}", k.ld) : "", k.x_transposed ? "|xT" : "",
                     k.w_transposed ? "|wT" : "");
}

std::string gemm_tuning_key(const codegen::GemmStep& step, int64_t rows, const std::string& arch,
                            const std::string& cublaslt_version) {
  const std::optional<passes::LtEpilogue> lt = passes::cublaslt_epilogue(step.epilogue);
  MLPC_ASSERT(lt.has_value(), "GEMM " + step.name + ": cuBLASLt does not run its epilogue");
  return gemm_tuning_key({arch, step.dtype, rows, step.n, step.k, *lt,
                          step.adds_c(), cublaslt_version, step.tf32x3, step.row_stride,
                          step.x_transposed, step.w_transposed});
}

std::string cublaslt_version() {
  const size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

bool gemm_tuning_disabled_by_env() {
  const char* v = std::getenv("MLPC_GEMM_TUNING");
  return v && std::strcmp(v, "0") == 0;
}

std::string algo_to_hex(const AlgoWords& a) {
  std::string s;
  s.reserve(128);
  for (uint64_t w : a) s += fmt::format("{:016x}", w);
  return s;
}

std::optional<AlgoWords> algo_from_hex(std::string_view hex) {
  if (hex.size() != 128) return std::nullopt;
  AlgoWords a{};
  for (size_t i = 0; i < 128; ++i) {
    const char c = hex[i];
    uint64_t d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    a[i / 16] = a[i / 16] << 4 | d;
  }
  return a;
}

nlohmann::json gemm_records_to_json(const GemmAlgoRecords& records) {
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [key, r] : records)
    entries[key] = {{"algo", algo_to_hex(r.algo)},
                    {"us", std::isfinite(r.us) ? r.us : 0.0},
                    {"heuristic_index", r.heuristic_index},
                    {"candidates", r.candidates}};
  return {{"format", kFormat}, {"entries", std::move(entries)}};
}

std::optional<GemmAlgoRecords> gemm_records_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto format = j.find("format");
  auto entries = j.find("entries");
  if (format == j.end() || !format->is_string() || *format != kFormat) return std::nullopt;
  if (entries == j.end() || !entries->is_object()) return std::nullopt;
  GemmAlgoRecords out;
  for (auto it = entries->begin(); it != entries->end(); ++it) {
    auto r = record_from_json(it.value());
    if (!r) return std::nullopt;
    out.emplace(it.key(), *r);
  }
  return out;
}

namespace detail {

void gemm_cache_warn_once(const std::string& what) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    std::fprintf(stderr, "mlpc: warning: GEMM tuning cache: %s\n", what.c_str());
}

}  // namespace detail

// ---- the file -----------------------------------------------------------------------------------

GemmAlgoCache::GemmAlgoCache() {
  try {
    open(cache_dir());
  } catch (const std::exception& e) {
    detail::gemm_cache_warn_once(std::string(e.what()) + " (tuning results are not kept)");
  }
}

GemmAlgoCache::GemmAlgoCache(const std::string& root) { open(root); }

void GemmAlgoCache::open(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec || !fs::is_directory(root, ec)) {
    detail::gemm_cache_warn_once(fmt::format("cannot create {}: {} (tuning results are not kept)",
                                             root, ec ? ec.message() : "not a directory"));
    return;
  }
  path_ = (fs::path(root) / kFileName).string();
  enabled_ = true;
}

std::optional<GemmAlgoRecords> GemmAlgoCache::read_file() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path_, ec) && !ec) return GemmAlgoRecords{};  // no file yet: empty, no warning
  const uintmax_t size = fs::file_size(path_, ec);
  if (ec || size > kMaxFileBytes) {
    detail::gemm_cache_warn_once(fmt::format("ignoring {}: {}", path_,
                                             ec ? ec.message() : std::string("too large")));
    return std::nullopt;
  }
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    detail::gemm_cache_warn_once(fmt::format("ignoring {}: cannot read it", path_));
    return std::nullopt;
  }
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  std::optional<GemmAlgoRecords> records;
  if (!j.is_discarded()) records = gemm_records_from_json(j);
  if (!records)
    detail::gemm_cache_warn_once(
        fmt::format("ignoring {}: not a valid {} file (it will be rewritten)", path_, kFormat));
  return records;
}

void GemmAlgoCache::ensure_loaded() {
  if (loaded_) return;
  loaded_ = true;
  if (!enabled_) return;
  if (auto disk = read_file())
    for (auto& [key, r] : *disk) records_.insert_or_assign(key, r);
}

std::optional<GemmAlgoRecord> GemmAlgoCache::find(const std::string& key) {
  ensure_loaded();
  auto it = records_.find(key);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void GemmAlgoCache::store(const std::string& key, const GemmAlgoRecord& record) {
  ensure_loaded();
  records_.insert_or_assign(key, record);
  if (!enabled_) return;
  // Merge: entries other processes wrote since we loaded stay; ours win on equal keys.
  GemmAlgoRecords merged = read_file().value_or(GemmAlgoRecords{});
  for (const auto& [k, r] : records_) merged.insert_or_assign(k, r);
  const std::string text = gemm_records_to_json(merged).dump(2) + "\n";

  std::string err = write_file_atomically(path_, {text});
  if (!err.empty()) detail::gemm_cache_warn_once(err);
}

// ---- the tuner (GPU) ----------------------------------------------------------------------------

namespace {

// A host function that holds its stream until the host opens the gate, so the timed launches
// are all enqueued before the GPU starts them and the events measure GPU time, not the host's
// enqueue rate. It gives up after a few seconds, so a bug can slow tuning but never hang it.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> timed_out{false};
};

void CUDART_CB wait_for_gate(void* p) {
  auto* gate = static_cast<Gate*>(p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!gate->open.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) {
      gate->timed_out.store(true);
      return;
    }
    std::this_thread::yield();
  }
}

// A device buffer's bytes copied aside and written back when this goes out of scope (after the
// device is done with the buffer: the destructor synchronizes). Null `ptr`: does nothing.
class SavedOutput {
 public:
  SavedOutput(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {
    if (!ptr_ || bytes_ == 0) return;
    MLPC_CUDA(cudaMalloc(&copy_, bytes_));
    MLPC_CUDA(cudaMemcpy(copy_, ptr_, bytes_, cudaMemcpyDeviceToDevice));
    MLPC_CUDA(cudaDeviceSynchronize());  // the timing stream does not wait for the legacy one
  }
  ~SavedOutput() {
    if (!copy_) return;
    cudaDeviceSynchronize();
    cudaMemcpy(ptr_, copy_, bytes_, cudaMemcpyDeviceToDevice);
    cudaFree(copy_);
  }
  SavedOutput(const SavedOutput&) = delete;
  SavedOutput& operator=(const SavedOutput&) = delete;

 private:
  void* ptr_;
  size_t bytes_;
  void* copy_ = nullptr;
};

}  // namespace

GemmTuner::GemmTuner(GemmLt& lt, GemmAlgoCache* cache)
    : lt_(lt), cache_(cache), arch_(device_arch()), version_(cublaslt_version()) {
  MLPC_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

GemmTuner::~GemmTuner() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (stream_) cudaStreamDestroy(stream_);
}

void GemmTuner::reserve_events(size_t count) {
  while (events_.size() < count) {
    cudaEvent_t e = nullptr;
    MLPC_CUDA(cudaEventCreate(&e));
    events_.push_back(e);
  }
}

std::string GemmTuner::key(const codegen::GemmStep& step, int64_t rows) const {
  return gemm_tuning_key(step, rows, arch_, version_);
}

const GemmChoice* GemmTuner::chosen(const codegen::GemmStep& step, int64_t rows) const {
  auto it = chosen_.find(key(step, rows));
  return it == chosen_.end() ? nullptr : &it->second;
}

GemmChoice GemmTuner::untuned(const codegen::GemmStep& step, int64_t rows) {
  GemmChoice c{step.name, key(step, rows), 0, 1, 0.0, false};
  return chosen_.emplace(c.key, c).first->second;
}

std::vector<WarmupLaunch> GemmTuner::warm_up(const codegen::GemmStep& step, int64_t rows,
                                             const Candidates& cands, const GemmOperands& ops) {
  // No gate: the first launch of an algorithm may load its module, which can synchronize the
  // context. Each launch is enqueued while the one before still runs, if the host keeps up.
  reserve_events(2 * cands.size());
  std::vector<WarmupLaunch> out(cands.size());
  std::vector<double> enqueue_us(cands.size(), 0.0);
  std::vector<bool> behind(cands.size(), false);
  int previous = -1;  // the last candidate launched
  for (size_t i = 0; i < cands.size(); ++i) {
    MLPC_CUDA(cudaEventRecord(events_[2 * i], stream_));
    const auto t0 = std::chrono::steady_clock::now();
    out[i].ok = lt_.try_run(step, rows, cands[i].algo, ops, stream_) == CUBLAS_STATUS_SUCCESS;
    enqueue_us[i] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (out[i].ok && previous >= 0) {
      // Still running the previous launch now that this one is queued: the GPU never waits.
      const cudaError_t q = cudaEventQuery(events_[2 * static_cast<size_t>(previous) + 1]);
      if (q == cudaErrorNotReady)
        (void)cudaGetLastError();  // not an error, but it is left as the last one: clear it
      else
        MLPC_CUDA(q);
      behind[i] = q == cudaErrorNotReady;
    }
    MLPC_CUDA(cudaEventRecord(events_[2 * i + 1], stream_));
    if (out[i].ok) previous = static_cast<int>(i);
  }
  MLPC_CUDA(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!out[i].ok) continue;
    float ms = 0;
    MLPC_CUDA(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
    out[i].gpu_us = ms * 1e3;
    out[i].sample = warmup_is_sample(out[i].gpu_us, enqueue_us[i], behind[i]);
  }
  return out;
}

std::vector<std::optional<std::vector<double>>> GemmTuner::time_round(
    const codegen::GemmStep& step, int64_t rows, const Candidates& cands,
    const std::vector<int>& launches, const GemmOperands& ops) {
  // Interleaved (a round of each candidate, then the next round), so a drift of the GPU's clock
  // over the round weighs on every candidate alike.
  struct Slot {
    size_t cand;
    size_t event;
  };
  std::vector<Slot> slots;
  const int most = launches.empty() ? 0 : *std::max_element(launches.begin(), launches.end());
  for (int r = 0; r < most; ++r)
    for (size_t i = 0; i < cands.size() && i < launches.size(); ++i)
      if (r < launches[i]) slots.push_back({i, 2 * slots.size()});
  reserve_events(2 * slots.size());

  std::vector<bool> ok(cands.size(), true);
  Gate gate;
  MLPC_CUDA(cudaLaunchHostFunc(stream_, wait_for_gate, &gate));
  try {
    for (const Slot& s : slots) {
      MLPC_CUDA(cudaEventRecord(events_[s.event], stream_));
      if (ok[s.cand])
        ok[s.cand] =
            lt_.try_run(step, rows, cands[s.cand].algo, ops, stream_) == CUBLAS_STATUS_SUCCESS;
      MLPC_CUDA(cudaEventRecord(events_[s.event + 1], stream_));
    }
  } catch (...) {
    gate.open.store(true, std::memory_order_release);
    cudaStreamSynchronize(stream_);
    throw;
  }
  gate.open.store(true, std::memory_order_release);
  MLPC_CUDA(cudaStreamSynchronize(stream_));
  if (gate.timed_out.load())
    detail::gemm_cache_warn_once("the stream gate timed out while timing GEMMs: "
                                 "measured times include host enqueue gaps");
  std::vector<std::optional<std::vector<double>>> out(cands.size());
  for (size_t i = 0; i < cands.size() && i < launches.size(); ++i)
    if (launches[i] > 0 && ok[i]) out[i].emplace();
  for (const Slot& s : slots) {
    if (!out[s.cand]) continue;
    float ms = 0;
    MLPC_CUDA(cudaEventElapsedTime(&ms, events_[s.event], events_[s.event + 1]));
    out[s.cand]->push_back(ms * 1e3);
  }
  return out;
}

GemmChoice GemmTuner::tune(const codegen::GemmStep& step, int64_t rows, const GemmOperands& ops,
                           cudaStream_t stream) {
  MLPC_ASSERT(rows > 0, "tuning an empty GEMM " + step.name);
  const std::string k = key(step, rows);
  if (auto it = chosen_.find(k); it != chosen_.end()) return it->second;

  if (cache_) {
    if (auto rec = cache_->find(k)) {
      cublasLtMatmulAlgo_t algo;
      std::memcpy(&algo, rec->algo.data(), sizeof(algo));
      if (lt_.algo_usable(step, rows, algo)) {
        lt_.set_algo(step, rows, algo);
        GemmChoice c{step.name, k, rec->heuristic_index, rec->candidates, rec->us, true};
        return chosen_.emplace(k, c).first->second;
      }
    }
  }

  // Timing on the real operands: their producers ran on `stream`, uploads (cudaMemcpy from
  // pageable memory may return before its DMA ends) on the legacy stream. Tuning is a slow
  // path: wait for the whole device.
  (void)stream;
  MLPC_CUDA(cudaDeviceSynchronize());
  std::vector<cublasLtMatmulHeuristicResult_t> cands = lt_.candidates(step, rows, kMaxCandidates);
  // A K-chunk that adds to y would keep adding while being timed: y is kept aside meanwhile.
  const SavedOutput saved(step.accumulate ? ops.y : nullptr,
                          static_cast<size_t>(rows * step.n) * ir::dtype_size(step.dtype));
  const TuningOutcome t = run_tuning(
      [&] { return warm_up(step, rows, cands, ops); },
      [&](const std::vector<int>& launches) { return time_round(step, rows, cands, launches, ops); });
  if (!t.best) return untuned(step, rows);  // nothing timed: keep prepare()'s heuristic #0
  const size_t best = *t.best;
  const double best_us = t.us;

  lt_.set_algo(step, rows, cands[best].algo);
  GemmChoice c{step.name,  k,     static_cast<int>(best), static_cast<int>(cands.size()),
               best_us,    false, t.launches,             t.gpu_us / 1e3};
  if (cache_) {
    GemmAlgoRecord rec;
    std::memcpy(rec.algo.data(), &cands[best].algo, sizeof(rec.algo));
    rec.us = best_us;
    rec.heuristic_index = static_cast<int>(best);
    rec.candidates = static_cast<int>(cands.size());
    cache_->store(k, rec);
  }
  return chosen_.emplace(k, c).first->second;
}

}  // namespace mlpc::runtime
