// mlpc's public C++ API: compile an MLP graph once, then run it on the caller's device buffers
// and stream, at any batch size. Everything a program needs is declared here (and in the tracing
// API it includes); the rest of the tree is the compiler's inside.
//
//   mlpc::Tracer t("geglu");
//   mlpc::Tensor x = t.input("x", mlpc::DType::BF16, {mlpc::kBatch, 768});
//   ...
//   mlpc::Module m = mlpc::compile(t.finish({y}), {.level = 2});
//   m.bind_param("gate.weight", {d_wg, mlpc::DType::BF16, {3072, 768}});  // no copy
//   m.run({{d_x, mlpc::DType::BF16, {rows, 768}}}, {{d_y, mlpc::DType::BF16, {rows, 768}}}, stream);
//
// Errors are mlpc::Error (a std::runtime_error) with a one-line message naming the input, output
// or param at fault. Threading: a Module is safe to call from several threads; its runs are
// serialized (one forward at a time, each ordered after the previous one on the GPU, whatever
// stream it came on). For parallel forwards, compile one Module per thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/tracing.h"  // Tracer, Tensor, kBatch and the ops: the graph-building API
#include "ir/error.h"        // mlpc::Error
#include "ir/graph.h"

namespace mlpc {

using DType = ir::DType;

struct CompileSpec {
  // 0: eager (one kernel per op); 1: pointwise fusion (what torch.compile does); 2: also GEMM
  // epilogues, merged and generated GEMM kernels, each decided by measurement on this GPU.
  int level = 2;
  // The batch sizes -O2 measures its decisions at; every batch size runs, each on the plan of
  // the nearest size at or above it (compiler/batch_plans.h). Empty: kDefaultDecideBatches.
  std::vector<int64_t> decide_batches;
  std::string arch;          // "sm_90"; empty: the device's (sm_90 without one)
  bool cuda_graphs = true;   // replay each forward as a CUDA graph (when not captured by the caller)
  bool tune_gemms = true;    // time cuBLASLt's candidates on each GEMM's first run (cached on disk)
  // Overrides of the level's kernel choices, as `mlpc compile`'s flags of the same names take
  // them; empty: the level's. merge_gemms, transposed_x, fused_mlp: auto|on|off; small_gemms,
  // gated_gemms: auto|on|off|mma; fp32_gemms: auto|ieee|tf32x3.
  std::string merge_gemms, small_gemms, gated_gemms, fp32_gemms, transposed_x, fused_mlp;
};

// What -O2 decides at when the caller names no batch sizes: decode-size and large batches.
inline const std::vector<int64_t> kDefaultDecideBatches = {16, 4096};

// A tensor in the caller's memory: row-major, contiguous. `shape` binds the batch dim.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

// An input, output or param of the compiled graph: its dims hold kBatch where the batch goes.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
};

class Module {
 public:
  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  ~Module();

  const std::string& name() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  const std::vector<TensorInfo>& params() const;
  // An output's shape when the inputs have `batch` rows.
  std::vector<int64_t> output_shape(size_t output, int64_t batch) const;

  // What `mlpc compile` prints: the IR after the passes, the fusion and kernel-choice report,
  // the kernel plan of each plan compiled (at `batch` rows for its byte counts), and the
  // generated CUDA source of every kernel.
  std::string ir() const;
  std::string fusion_report() const;
  std::string plan(int64_t batch = 4096) const;
  std::string explain(int64_t batch = 4096) const;  // bytes and FLOPs per launch
  std::vector<std::pair<std::string, std::string>> kernel_sources() const;
  int launches(int64_t batch) const;  // kernel launches per forward at `batch` rows

  // Params by name. set_param copies host values (of the param's dtype, or f32/f64, converted
  // as PyTorch's .to() rounds) to the device. bind_param uses the caller's device memory as is
  // (no copy) where the plan reads the param as stored; where it needs the param in another
  // form (stacked with its sibling for a merged GEMM, transposed, split into TF32 parts) it
  // derives that form once, at bind time. Returns false when it copied. The memory must stay
  // valid while the Module runs; after changing its values, bind again.
  void set_param(const std::string& name, const void* host_data, DType dtype,
                 const std::vector<int64_t>& shape);
  void set_param_f64(const std::string& name, const double* host_data,
                     const std::vector<int64_t>& shape);
  bool bind_param(const std::string& name, const TensorRef& device);

  // One forward, enqueued on `stream`: reads `inputs` and writes `outputs` (in the orders of
  // inputs() and outputs()), device memory the caller owns (16-byte aligned, as cudaMalloc's
  // is), every batch dim the same. An output may not overlap an input or another output.
  // Never synchronizes, except on the first run at a new batch size (its GEMMs are tuned then).
  // May be captured into the caller's CUDA graph once that batch size has run outside a capture.
  void run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
           cudaStream_t stream = nullptr);

  // NVRTC builds in this process since this Module was compiled (0 when nothing else compiles:
  // every kernel of every plan is built by compile). For tests of "no recompile".
  int nvrtc_builds_since_compile() const;

  struct Impl;

 private:
  friend Module compile(const ir::Graph& g, const CompileSpec& spec);
  explicit Module(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compiles a traced or parsed graph: runs the passes at the level, builds every kernel with
// NVRTC. Needs no GPU, except for -O2's measured decisions (without one, the documented rules).
Module compile(const ir::Graph& g, const CompileSpec& spec = {});
// The same from the `.mlp` text form; errors name `file:line:col`.
Module compile(std::string_view mlp_text, const CompileSpec& spec = {},
               std::string_view file = "<input>");

// Throws the Error compile would for what `spec` asks (a level, a kernel choice, a batch size),
// without compiling: a caller holding options for later compiles checks them once, up front.
void check_spec(const CompileSpec& spec);

// Whether a usable GPU is here, and if not, why: "no NVIDIA driver or GPU found: ..." with the
// CUDA runtime's own reason (runtime/device/device.h).
bool gpu_available(std::string* why = nullptr);

}  // namespace mlpc
