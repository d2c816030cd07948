// Executes a Plan on the GPU: loads each kernel's CUBIN (cudaLibraryLoadData, no driver API),
// keeps params in their own allocations and every other buffer in one arena per batch size, and
// runs the steps in order on one stream.
//
// The first run() of a batch size tunes its GEMMs (runtime/gemm/gemm_tuner.h) while running the
// forward eagerly, step by step, so each GEMM is timed on the real values its producers just
// wrote. With CUDA graphs on, that same first run() then captures the whole forward into a graph
// (on a private stream, thread-local capture mode) and launches it on the caller's stream; later
// runs only launch the graph. The graph holds the device pointers of that batch's arena and of
// the params, which never move, so uploading new input or param values keeps it valid.
//
// A library caller (mlpc/mlpc.h) brings its own memory instead: params bound to its device
// pointers (bind_param) and per-run input and output pointers (run with pointers), each pointer
// tuple of a batch size getting its own graph (a few kept), or eager launches when the pointers
// change every call; into the caller's own stream capture, launches go directly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "runtime/gemm/gemm_lt.h"
#include "runtime/gemm/gemm_tuner.h"
#include "host/host_tensor.h"

namespace mlpc::runtime {

struct ExecutorOptions {
  bool tune_gemms = true;  // time cuBLASLt's candidates (cached on disk); MLPC_GEMM_TUNING=0: off
  bool cuda_graph = true;  // replay the forward as a CUDA graph; MLPC_CUDA_GRAPH=0: off
};

class Executor {
 public:
  // Arenas (and graphs) of at most this many batch sizes are kept; the least recently bound
  // other one is freed when a new one would exceed it.
  static constexpr size_t kMaxBatches = 8;
  // Graphs kept per batch size, one per pointer tuple of run(inputs, outputs, stream), least
  // recently launched dropped first.
  static constexpr size_t kGraphsPerBatch = 4;
  // Consecutive runs of a batch size that each needed a new graph before it runs eagerly (its
  // pointers change every call: capturing each time would cost more than it saves); the same
  // pointers this many runs in a row bring graphs back.
  static constexpr int kMissesBeforeEager = 8;

  // `cubins` maps each KernelStep's name to its CUBIN (compile_to_cubin). Needs a GPU.
  Executor(const codegen::Plan& plan, std::map<std::string, std::vector<char>> cubins,
           ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Makes `batch` the current batch size: allocates its arena (inputs, intermediates, outputs;
  // 256-byte aligned offsets) and prepares the GEMMs, or takes back the arena and graph of a
  // batch size bound before. Either way, after switching to another batch size the inputs must
  // be set again; params stay.
  void bind_batch(int64_t batch);
  int64_t batch() const { return batch_; }

  // Uploads a param (allocated on its first set) or an arena buffer (needs bind_batch first).
  // The tensor's dtype and dims must match the buffer's type with the batch dim bound. Setting a
  // param also writes the params derived from it (their TF32 parts, Buffer::split_of).
  void set_tensor(const std::string& buffer_name, const HostTensor& t);
  // Uploads raw device bytes (random_bytes: timing operands, with no doubles on the host). Not
  // for a param with TF32 parts or one stacked into a concat.
  void set_bytes(const std::string& buffer_name, const std::vector<uint8_t>& bytes);
  // Writes random values U(-scale, scale) into a buffer on the device (runtime/exec/
  // device_random.h: timing operands); the same buffers as set_bytes.
  void fill_random(const std::string& buffer_name, double scale, uint64_t seed);

  // Points param `name` at the caller's device memory (never freed here), `bytes(0)` of its
  // dtype. Where the plan reads the param as stored, it reads that memory (returns true: no
  // copy); where it reads another form (stacked into a merged GEMM's concat, transposed, TF32
  // parts), that form is derived now from the memory's current values (returns false). A later
  // set_tensor of the param goes to an allocation of its own again.
  bool bind_param(const std::string& name, void* device);

  // Enqueues one forward on `stream`. Throws mlpc::Error if a param or input was never set.
  void run(cudaStream_t stream = nullptr);
  // The same on the caller's memory: `inputs` in plan.inputs order, `outputs` in plan.outputs
  // order, each holding the bound batch size (bind_batch first). Inputs are only read. An output
  // that is an input or a param of the plan (or returned twice) is copied there. When `stream`
  // is capturing into the caller's graph, the launches join that capture; the batch size must
  // have run before (outside a capture: its GEMMs are tuned then), or it throws.
  void run(const std::vector<void*>& inputs, const std::vector<void*>& outputs,
           cudaStream_t stream);
  // Whether `batch` has run and its arena is still kept (a run into a capture may use it).
  bool ran(int64_t batch) const;

  // Synchronizes the device, then copies one buffer back.
  HostTensor download(int buffer_index);
  std::vector<HostTensor> outputs();  // in plan.outputs order

  size_t arena_bytes() const;                 // of the current batch size
  void* device_ptr(int buffer_index) const;  // nullptr when not allocated yet
  const codegen::Plan& plan() const { return plan_; }
  const ExecutorOptions& options() const { return options_; }

  // True when run() replays a CUDA graph for the current batch size (captured by its first
  // run). False before that, with cuda_graph off, or after a capture failed (then run() stays
  // eager, after one warning on stderr).
  bool uses_cuda_graph() const;
  // GPU time of each step alone (µs, in plan order), from `reps` back-to-back launches between
  // CUDA events on the default stream; runs one forward first. Inputs come from the last run,
  // so each step sees real values.
  std::vector<double> time_steps(int reps = 20);
  int graph_captures() const { return captures_; }  // graphs captured so far, all batch sizes
  // Runs of the current batch size that launched eagerly because its pointers kept changing.
  bool eager_fallback() const;
  size_t bound_batches() const { return batches_.size(); }  // arenas kept (<= kMaxBatches)

  // The algorithm chosen for each GEMM step at the current batch size, in plan order; a step
  // appears once its batch size has run (tuned or not). Empty before the first run().
  std::vector<GemmChoice> gemm_choices() const;

 private:
  struct Launch;  // one step, with its device pointers resolved
  struct Copy;    // an output that another buffer holds, copied to the caller's pointer
  struct Bound;   // one batch size: arena, launches, graphs
  // Runs the current batch with inputs and outputs at `io` (plan.inputs then plan.outputs;
  // empty: the arena's).
  void run_with(const std::vector<void*>& io, cudaStream_t stream);
  // Resolves the launches for `io` unless they are already.
  void use_pointers(Bound& b, const std::vector<void*>& io);
  void resolve_launches(Bound& b);
  template <typename Read>
  void resolve_gated(Launch& l, const codegen::KernelStep& k, const codegen::GatedGemm& g,
                     Read&& read);
  void enqueue(Bound& b, cudaStream_t stream, bool tune);
  void enqueue_one(Launch& l, cudaStream_t stream);
  void capture(Bound& b);
  void invalidate_all();
  // Writes the params derived from param `i` (TF32 parts, transpose) from its values `t`, and
  // marks a concat set once every param it stacks is.
  void write_derived(int i, const HostTensor& t);
  void evict_one();
  // A param's device storage, allocated on first use (a param stacked into a concat: its place
  // in the concat's allocation).
  void* param_storage(int buffer_index);
  // Where set_tensor / set_bytes write buffer `i`; throws for the buffers they may not write.
  void* settable(int buffer_index);
  // settable, for raw bytes (set_bytes, fill_random): not a buffer with derived forms or a view.
  void* raw_settable(int buffer_index);
  std::vector<int64_t> bound_dims(int buffer_index) const;
  int buffer_index(const std::string& name) const;

  codegen::Plan plan_;
  ExecutorOptions options_;
  std::map<std::string, std::vector<char>> cubins_;  // kept alive while the libraries are loaded
  std::vector<cudaLibrary_t> libraries_;
  std::map<std::string, cudaKernel_t> kernels_;
  GemmLt gemm_;
  std::unique_ptr<GemmAlgoCache> algo_cache_;  // null with tuning off
  GemmTuner tuner_;
  cudaStream_t capture_stream_ = nullptr;
  bool graphs_ok_ = true;  // false after a failed capture
  int sm_count_ = 0;       // the grid of a persistent (gated GEMM) kernel
  void* gated_workspace_ = nullptr;  // shared by the gated GEMM kernels (allocated on first use)
  int captures_ = 0;

  int64_t batch_ = -1;
  Bound* cur_ = nullptr;
  std::map<int64_t, std::unique_ptr<Bound>> batches_;
  uint64_t bind_clock_ = 0;
  std::vector<void*> params_;  // per buffer; non-null once a param was set
  std::vector<bool> external_;  // per buffer: params_ is the caller's memory (bind_param)
  std::vector<void*> io_;       // per buffer: the caller's pointer for an input or output
  std::vector<bool> set_;      // per buffer: uploaded since the last switch (params: ever)
};

}  // namespace mlpc::runtime
