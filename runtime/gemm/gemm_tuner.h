// GEMM autotuning: for each distinct GEMM key (arch, dtype, rows x n x k, epilogue, residual,
// cuBLASLt version) time cuBLASLt's top heuristic candidates on the real buffers and keep the
// fastest, in memory and on disk.
//
// On disk: <cache_dir()>/gemm_algos.json (host/cache_dir.h: $MLPC_CACHE_DIR,
// $XDG_CACHE_HOME/mlpc or ~/.cache/mlpc):
//   {"format": "mlpc-gemm-algos-v1",
//    "entries": {"sm_90|bf16|8192x3072x768|gelu_bias|res0|cublasLt13.1.0":
//                  {"algo": "<128 hex digits: the 8 uint64 words of cublasLtMatmulAlgo_t, each
//                            as 16 digits, most significant first>",
//                   "us": 48.8, "heuristic_index": 3, "candidates": 8}, ...}}
// (runtime/measure/gemm_bench also keeps its device-copy timings here, as "sm_90|copy|<bytes>"
// entries with an all-zero algo.)
// Writes merge with what is on disk, then go to a temp file in the same directory that is
// rename()d over the file, so readers never see a partial file. A file that cannot be read or
// parsed, or whose structure or types are wrong, is ignored as a whole (one warning on stderr
// per process) and replaced by the next write. A cached algorithm is re-validated with
// cublasLtMatmulAlgoCheck before use and re-tuned when invalid. The cache never fails a run.
//
// Everything above the GemmTuner class works without a GPU (tests/test_gemm_cache.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/plan.h"
#include "passes/gemm_epilogue.h"
#include "runtime/gemm/tuning_budget.h"

namespace mlpc::runtime {

// What was chosen for one GEMM step at the bound batch (Executor::gemm_choices).
struct GemmChoice {
  std::string step;         // GemmStep::name
  std::string key;          // gemm_tuning_key()
  int heuristic_index = 0;  // position of the chosen algo in cuBLASLt's heuristic list
  int candidates = 0;       // how many candidates were timed (1 when tuning is off)
  double us = 0;            // median time of one launch when tuned; 0 when not measured
  bool from_cache = false;  // taken from gemm_algos.json instead of being timed now
  int launches = 0;         // launches the tuning spent, warm-ups included (0 when not timed now)
  double tuning_ms = 0;     // their GPU time
};

struct GemmKey {
  std::string arch;  // "sm_90"
  ir::DType dtype = ir::DType::F32;
  int64_t rows = 0, n = 0, k = 0;
  passes::LtEpilogue epilogue = passes::LtEpilogue::Default;
  bool residual = false;
  std::string cublaslt_version;  // "13.1.0"
  bool tf32x3 = false;  // an f32 GEMM as three TF32 products (codegen/tf32x3.h)
  int64_t ld = 0;  // x's and w's stored row when a K-chunk reads part of it (codegen/plan.h)
  bool x_transposed = false;  // x stored [k, rows] (codegen/transposed_x_plan.h)
  bool w_transposed = false;  // w stored [k, n]
};

// "sm_90|bf16|8192x3072x768|gelu_bias|res0|cublasLt13.1.0" (rows x n x k), then "|tf32x3" for a
// 3xTF32 GEMM, "|ld12288" for a K-chunk of one, "|xT" for an x stored transposed and "|wT" for a
// w stored so. res1: C enters (a residual, or y itself).
std::string gemm_tuning_key(const GemmKey& k);
// The key of `step` at `rows` rows: what the tuner, GemmBench and -O2's decisions all look up.
std::string gemm_tuning_key(const codegen::GemmStep& step, int64_t rows, const std::string& arch,
                            const std::string& cublaslt_version);

// cublasLtGetVersion() as "major.minor.patch".
std::string cublaslt_version();

// True when MLPC_GEMM_TUNING is set to "0" (tuning off: cuBLASLt's heuristic #0 is used).
bool gemm_tuning_disabled_by_env();

using AlgoWords = std::array<uint64_t, 8>;  // the bytes of a cublasLtMatmulAlgo_t
std::string algo_to_hex(const AlgoWords& a);
std::optional<AlgoWords> algo_from_hex(std::string_view hex);

struct GemmAlgoRecord {
  AlgoWords algo{};
  double us = 0;
  int heuristic_index = 0;
  int candidates = 0;
  bool operator==(const GemmAlgoRecord&) const = default;
};
using GemmAlgoRecords = std::map<std::string, GemmAlgoRecord>;

nlohmann::json gemm_records_to_json(const GemmAlgoRecords& records);
// nullopt when `j` is not a well-formed cache document (any entry with a wrong type or value).
std::optional<GemmAlgoRecords> gemm_records_from_json(const nlohmann::json& j);

// The file gemm_algos.json, with an in-memory copy loaded on first use.
class GemmAlgoCache {
 public:
  static constexpr const char* kFileName = "gemm_algos.json";

  // Under cache_dir(); when that cannot be determined or created the cache is disabled
  // (find() always misses, store() only remembers in memory) after one warning.
  GemmAlgoCache();
  // Under ROOT (created if missing), for tests and tools.
  explicit GemmAlgoCache(const std::string& root);

  bool enabled() const { return enabled_; }
  const std::string& path() const { return path_; }  // empty when disabled

  std::optional<GemmAlgoRecord> find(const std::string& key);
  // Remembers the record and writes the file (merged with its current contents) atomically.
  // Never throws: I/O problems warn once.
  void store(const std::string& key, const GemmAlgoRecord& record);
  // Forgets the in-memory copy: the next find() reads the file again.
  void reload() { loaded_ = false; }

 private:
  void open(const std::string& root);
  // The file's records; nullopt (after a warning) when it exists but is unreadable or corrupt.
  std::optional<GemmAlgoRecords> read_file() const;
  void ensure_loaded();

  bool enabled_ = false;
  bool loaded_ = false;
  std::string path_;
  GemmAlgoRecords records_;
};

namespace detail {
// Prints "mlpc: warning: GEMM tuning cache: WHAT" to stderr the first time only.
void gemm_cache_warn_once(const std::string& what);
}  // namespace detail

class GemmLt;
struct GemmOperands;

// Picks the algorithm of each GEMM key once, on the real buffers, and installs it in GemmLt.
// The GPU time it spends per key is budgeted (runtime/gemm/tuning_budget.h): every candidate
// is launched once, back to back (a warm-up, timed when the GPU never waited for it), then timed
// in rounds of launches held behind a gate, as many as the policy asks for. Needs a GPU. Never
// call it while a stream is being captured.
class GemmTuner {
 public:
  // cuBLASLt's heuristic candidates timed per key.
  static constexpr int kMaxCandidates = 8;
  // Warm-up launches per candidate before its timed ones (its first may load its module).
  static constexpr int kWarmup = 1;
  // The most timed launches per candidate (short GEMMs get all of them).
  static constexpr int kTimed = kTuneMaxSamples;

  // `cache` may be null (tuning results are then kept in memory only).
  GemmTuner(GemmLt& lt, GemmAlgoCache* cache);
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;

  std::string key(const codegen::GemmStep& step, int64_t rows) const;
  // The choice made for this key in this tuner, if any.
  const GemmChoice* chosen(const codegen::GemmStep& step, int64_t rows) const;

  // Chooses (cache, else timing) and installs the algorithm for step's key unless this tuner
  // already did. Waits for the device first (the operands' producers ran on `stream`), then
  // times on a private stream; returns with that stream drained. rows > 0.
  GemmChoice tune(const codegen::GemmStep& step, int64_t rows, const GemmOperands& ops,
                  cudaStream_t stream);
  // Records heuristic #0 (already installed by GemmLt::prepare) as the choice: tuning off.
  GemmChoice untuned(const codegen::GemmStep& step, int64_t rows);

 private:
  using Candidates = std::vector<cublasLtMatmulHeuristicResult_t>;
  // One launch of each candidate, back to back, each between two events: its GPU time, and
  // whether it counts as a timed launch (warmup_is_sample).
  std::vector<WarmupLaunch> warm_up(const codegen::GemmStep& step, int64_t rows,
                                    const Candidates& cands, const GemmOperands& ops);
  // launches[i] timed launches of candidate i, interleaved, all enqueued behind a gate before
  // the GPU starts them: their µs per candidate, nullopt for one that failed to launch.
  std::vector<std::optional<std::vector<double>>> time_round(const codegen::GemmStep& step,
                                                             int64_t rows, const Candidates& cands,
                                                             const std::vector<int>& launches,
                                                             const GemmOperands& ops);
  // At least `count` events in events_.
  void reserve_events(size_t count);

  GemmLt& lt_;
  GemmAlgoCache* cache_;
  std::string arch_, version_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::map<std::string, GemmChoice> chosen_;  // by key; GemmChoice::step is the first step's
};

}  // namespace mlpc::runtime
