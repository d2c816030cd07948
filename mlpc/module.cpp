// Module: a compiled graph (one plan per distinct -O2 decision outcome over the batch sizes,
// compiler/batch_plans.h) run on the caller's memory, an executor per plan made on first use.
// Params live where the caller bound them (or in one upload per set_param), every executor
// reading them from there.
#include "mlpc/mlpc.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "compiler/batch_plans.h"
#include "compiler/levels.h"
#include "dump/report.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "mlpc/device_checks.h"
#include "mlpc/ref_checks.h"
#include "runtime/device/cuda_check.h"
#include "runtime/exec/executor.h"
#include "host/host_tensor.h"
#include "runtime/jit/nvrtc_compiler.h"

namespace mlpc {
namespace {

std::vector<TensorInfo> infos_of(const ir::Graph& g, const std::vector<ir::NodeId>& ids) {
  std::vector<TensorInfo> out;
  for (ir::NodeId id : ids) {
    const ir::Node& n = g.node(id);
    out.push_back({n.name, n.type.dtype, n.type.shape.dims});
  }
  return out;
}

int buffer_named(const codegen::Plan& plan, const std::string& name) {
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].name == name && plan.buffers[i].role == codegen::BufferRole::Param)
      return static_cast<int>(i);
  return -1;
}

// Whether `plan` reads param `name` as stored (a bind is then zero-copy).
bool read_as_stored(const codegen::Plan& plan, const std::string& name) {
  const int i = buffer_named(plan, name);
  if (i < 0) return true;
  if (plan.buffers[i].view_of >= 0) return false;
  return std::none_of(plan.buffers.begin(), plan.buffers.end(),
                      [&](const codegen::Buffer& b) { return b.derived_from() == i; });
}

std::string plan_header(const BatchPlans& plans, const BatchPlan& p) {
  return plans.plans.size() > 1 ? fmt::format("// the plan {}\n", describe_decided_at(p.decided_at))
                                : std::string();
}

// The compiler's options for a spec; throws where the spec asks for what compile refuses.
CompileOptions options_of(const CompileSpec& spec) {
  CompileOptions options = options_for_level(
      spec.level, {.merge_gemms = spec.merge_gemms, .small_gemms = spec.small_gemms,
                   .gated_gemms = spec.gated_gemms, .fp32_gemms = spec.fp32_gemms,
                   .transposed_x = spec.transposed_x, .fused_mlp = spec.fused_mlp});
  options.arch = spec.arch;
  for (int64_t b : spec.decide_batches)
    if (b <= 0) throw Error(fmt::format("decide_batches: {} is not a batch size", b));
  return options;
}

}  // namespace

struct Module::Impl {
  ir::Graph graph;
  CompileSpec spec;
  BatchPlans plans;
  std::vector<TensorInfo> inputs, outputs, params;
  int nvrtc_builds_at_compile = 0;

  // A param's device memory: the caller's (bind_param) or this Module's (set_param).
  struct Param {
    void* ptr = nullptr;
    bool owned = false;
  };
  std::vector<Param> bound;  // per params()
  std::vector<std::unique_ptr<runtime::Executor>> executors;  // per plan, made on first use

  std::mutex mu;  // one forward (or bind) at a time
  cudaEvent_t done = nullptr;  // recorded after each run outside a capture
  cudaStream_t last_stream = nullptr;
  bool ran = false;
  std::vector<const void*> verified;  // the pointers the last device-memory check passed
  std::vector<void*> in_ptrs, out_ptrs;

  ~Impl() {
    // A destructor must not throw: errors here were reported by the calls that caused them.
    executors.clear();  // they read the params: gone first
    for (Param& p : bound)
      if (p.owned && p.ptr) cudaFree(p.ptr);
    if (done) cudaEventDestroy(done);
  }

  size_t param_index(const std::string& name) const {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].name == name) return i;
    std::vector<std::string> names;
    for (const TensorInfo& p : params) names.push_back(p.name);
    throw Error(fmt::format("{} has no param {} (its params: {})", graph.name, name,
                            names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }

  void require_gpu(std::string_view doing) const {
    if (const auto& why = api::no_gpu_reason())
      throw Error(fmt::format("cannot {} {}: {}", doing, graph.name, *why));
  }

  // The executor of plan `k`, made (and given every param bound so far) on first use.
  runtime::Executor& executor(size_t k) {
    if (!executors[k]) {
      const CompiledGraph& c = plans.plans[k].compiled;
      auto ex = std::make_unique<runtime::Executor>(
          c.plan, c.cubins,
          runtime::ExecutorOptions{.tune_gemms = spec.tune_gemms, .cuda_graph = spec.cuda_graphs});
      for (size_t p = 0; p < params.size(); ++p)
        if (bound[p].ptr && buffer_named(c.plan, params[p].name) >= 0)
          ex->bind_param(params[p].name, bound[p].ptr);
      executors[k] = std::move(ex);
    }
    return *executors[k];
  }

  // Points param `p` at `ptr` in every executor made so far (the others take it when made).
  // Returns whether every plan reads it as stored.
  bool bind(size_t p, void* ptr, bool owned) {
    Param old = bound[p];
    bound[p] = {ptr, owned};
    for (size_t k = 0; k < executors.size(); ++k)
      if (executors[k] && buffer_named(plans.plans[k].compiled.plan, params[p].name) >= 0)
        executors[k]->bind_param(params[p].name, ptr);
    if (old.owned && old.ptr && old.ptr != ptr) MLPC_CUDA(cudaFree(old.ptr));
    bool zero_copy = true;
    for (const BatchPlan& plan : plans.plans)
      zero_copy &= read_as_stored(plan.compiled.plan, params[p].name);
    return zero_copy;
  }

  // Uploads the bytes of param `p` into this Module's allocation for it, then binds that.
  void upload(size_t p, const std::vector<uint8_t>& bytes) {
    void* dst = bound[p].owned ? bound[p].ptr : nullptr;
    if (dst) {
      MLPC_CUDA(cudaDeviceSynchronize());  // forwards in flight may read the old values
    } else {
      MLPC_CUDA(cudaMalloc(&dst, std::max<size_t>(bytes.size(), 1)));
    }
    try {
      if (!bytes.empty())
        MLPC_CUDA(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
      bind(p, dst, true);
    } catch (...) {
      if (!bound[p].owned || bound[p].ptr != dst) cudaFree(dst);
      throw;
    }
  }

  void require_params() const {
    for (size_t p = 0; p < params.size(); ++p)
      if (!bound[p].ptr) throw Error(fmt::format("param {} was never set", params[p].name));
  }

  // Device-memory checks of every pointer, skipped when they are the ones checked last.
  void check_pointers(const std::vector<TensorRef>& in, const std::vector<TensorRef>& out) {
    const size_t n = in.size() + out.size();
    bool same = verified.size() == n;
    for (size_t k = 0; same && k < in.size(); ++k) same = verified[k] == in[k].data;
    for (size_t k = 0; same && k < out.size(); ++k) same = verified[in.size() + k] == out[k].data;
    if (same) return;
    verified.clear();
    for (size_t k = 0; k < in.size(); ++k)
      api::check_device_pointer(in[k].data, "input " + inputs[k].name);
    for (size_t k = 0; k < out.size(); ++k)
      api::check_device_pointer(out[k].data, "output " + outputs[k].name);
    for (const TensorRef& r : in) verified.push_back(r.data);
    for (const TensorRef& r : out) verified.push_back(r.data);
  }
};

Module::Module(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

const std::string& Module::name() const { return impl_->graph.name; }
const std::vector<TensorInfo>& Module::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Module::outputs() const { return impl_->outputs; }
const std::vector<TensorInfo>& Module::params() const { return impl_->params; }

std::vector<int64_t> Module::output_shape(size_t output, int64_t batch) const {
  if (output >= impl_->outputs.size())
    throw Error(fmt::format("{} has {} outputs, not {}", impl_->graph.name, impl_->outputs.size(),
                            output + 1));
  std::vector<int64_t> dims = impl_->outputs[output].dims;
  for (int64_t& d : dims)
    if (d == kBatch) d = batch;
  return dims;
}

std::string Module::ir() const {
  std::string out;
  for (const BatchPlan& p : impl_->plans.plans)
    out += plan_header(impl_->plans, p) + ir::print(p.compiled.pipeline.graph);
  return out;
}

std::string Module::fusion_report() const {
  std::string out;
  for (const BatchPlan& p : impl_->plans.plans) {
    out += plan_header(impl_->plans, p) + p.compiled.pipeline.fusion.to_string();
    if (!p.compiled.plan.choices.empty()) {
      out += "// GEMMs: how each one runs, and why\n";
      for (const codegen::StepChoice& ch : p.compiled.plan.choices)
        out += fmt::format("{}: {}\n", ch.step, ch.why);
    }
  }
  return out;
}

std::string Module::plan(int64_t batch) const {
  const BatchPlan& p = impl_->plans.for_batch(batch);
  return plan_header(impl_->plans, p) + plan_text(p.compiled, batch);
}

std::string Module::explain(int64_t batch) const {
  const BatchPlan& p = impl_->plans.for_batch(batch);
  std::string out = plan_header(impl_->plans, p);
  out += fmt::format("{:<40} {:<11} {:>12} {:>10}\n", "launch", "kind", "MB moved", "GFLOP");
  double bytes = 0, flops = 0;
  for (const StepFacts& f : plan_facts(p.compiled.plan, batch)) {
    out += fmt::format("{:<40} {:<11} {:>12.3f} {:>10.3f}\n", f.name, f.kind, f.bytes / 1e6,
                       f.flops / 1e9);
    bytes += static_cast<double>(f.bytes), flops += f.flops;
  }
  out += fmt::format("{:<40} {:<11} {:>12.3f} {:>10.3f}\n", "total", "", bytes / 1e6, flops / 1e9);
  return out;
}

std::vector<std::pair<std::string, std::string>> Module::kernel_sources() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const BatchPlan& p : impl_->plans.plans)
    for (const codegen::Step& s : p.compiled.plan.steps)
      if (const auto* k = std::get_if<codegen::KernelStep>(&s)) {
        std::pair<std::string, std::string> entry{k->name, k->source};
        if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(std::move(entry));
      }
  return out;
}

int Module::launches(int64_t batch) const {
  return impl_->plans.for_batch(batch).compiled.plan.launches();
}

void Module::set_param(const std::string& name, const void* host_data, DType dtype,
                       const std::vector<int64_t>& shape) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const size_t p = m.param_index(name);
  const TensorInfo& info = m.params[p];
  api::check_param(info, dtype, shape, host_data, {DType::F32});
  m.require_gpu("set a param of");
  const int64_t n = ir::Shape{shape}.numel(0);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * ir::dtype_size(info.dtype));
  if (dtype == info.dtype) {
    std::copy_n(static_cast<const uint8_t*>(host_data), bytes.size(), bytes.data());
  } else {  // f32 values, rounded to the param's dtype
    runtime::encode_floats(info.dtype, static_cast<const float*>(host_data), n, bytes.data());
  }
  m.upload(p, bytes);
}

void Module::set_param_f64(const std::string& name, const double* host_data,
                           const std::vector<int64_t>& shape) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const size_t p = m.param_index(name);
  const TensorInfo& info = m.params[p];
  api::check_param(info, info.dtype, shape, host_data);
  m.require_gpu("set a param of");
  runtime::HostTensor t{info.dtype, shape, {}};
  t.data.resize(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = runtime::round_to(info.dtype, host_data[i]);
  m.upload(p, runtime::encode(t));
}

bool Module::bind_param(const std::string& name, const TensorRef& device) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const size_t p = m.param_index(name);
  api::check_param(m.params[p], device.dtype, device.shape, device.data);
  m.require_gpu("bind a param of");
  api::check_device_pointer(device.data, "param " + name);
  return m.bind(p, device.data, false);
}

void Module::run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
                 cudaStream_t stream) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  std::optional<int64_t> rows;
  api::check_refs("input", m.inputs, inputs, rows);
  api::check_refs("output", m.outputs, outputs, rows);
  const int64_t batch = rows.value_or(1);
  m.require_gpu("run");
  m.require_params();
  const size_t k = m.plans.index_for(batch);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MLPC_CUDA(cudaStreamIsCapturing(stream, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  if (capturing && !(m.executors[k] && m.executors[k]->ran(batch)))
    throw Error(fmt::format("run once at batch {} outside a CUDA graph capture first (its GEMMs "
                            "are tuned then)", batch));
  m.check_pointers(inputs, outputs);
  runtime::Executor& ex = m.executor(k);
  if (!m.done) MLPC_CUDA(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
  // Runs are ordered on the GPU whatever stream they come on: a new stream waits for the last.
  if (!capturing && m.ran && stream != m.last_stream) MLPC_CUDA(cudaStreamWaitEvent(stream, m.done, 0));
  try {
    ex.bind_batch(batch);  // a new batch size: its arena (which may not fit)
  } catch (const Error& e) {
    throw Error(fmt::format("cannot run {} at batch {}: {}", m.graph.name, batch, e.what()));
  }
  api::check_no_overlap(m.inputs, inputs, m.outputs, outputs);
  m.in_ptrs.clear();
  m.out_ptrs.clear();
  for (const TensorRef& r : inputs) m.in_ptrs.push_back(r.data);
  for (const TensorRef& r : outputs) m.out_ptrs.push_back(r.data);
  ex.run(m.in_ptrs, m.out_ptrs, stream);
  if (!capturing) {
    MLPC_CUDA(cudaEventRecord(m.done, stream));
    m.last_stream = stream;
    m.ran = true;
  }
}

int Module::nvrtc_builds_since_compile() const {
  return runtime::nvrtc_builds_in_process() - impl_->nvrtc_builds_at_compile;
}

void check_spec(const CompileSpec& spec) { options_of(spec); }

Module compile(const ir::Graph& g, const CompileSpec& spec) {
  const CompileOptions options = options_of(spec);
  const std::vector<int64_t>& batches =
      spec.decide_batches.empty() ? kDefaultDecideBatches : spec.decide_batches;
  auto impl = std::make_unique<Module::Impl>();
  impl->plans = compile_for_batches(g, options, batches);
  impl->nvrtc_builds_at_compile = runtime::nvrtc_builds_in_process();
  impl->graph = g;
  impl->spec = spec;
  impl->inputs = infos_of(g, g.inputs());
  impl->outputs = infos_of(g, g.outputs());
  impl->params = infos_of(g, g.params());
  impl->bound.resize(impl->params.size());
  impl->executors.resize(impl->plans.plans.size());
  for (const BatchPlan& p : impl->plans.plans) {
    const codegen::Plan& plan = p.compiled.plan;
    MLPC_ASSERT(plan.inputs.size() == impl->inputs.size() &&
                    plan.outputs.size() == impl->outputs.size(),
                "a plan's inputs and outputs are the graph's");
    for (size_t i = 0; i < plan.inputs.size(); ++i)
      MLPC_ASSERT(plan.buffers[plan.inputs[i]].name == impl->inputs[i].name,
                  "a plan's inputs are in the graph's order");
  }
  return Module(std::move(impl));
}

Module compile(std::string_view mlp_text, const CompileSpec& spec, std::string_view file) {
  return compile(ir::parse(mlp_text, file), spec);
}

}  // namespace mlpc
