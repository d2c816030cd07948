#include "runtime/executor.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cuda_check.h"
#include "runtime/device.h"

namespace mlpc::runtime {
namespace {

constexpr size_t kArenaAlign = 256;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

const codegen::Plan& require_gpu(const codegen::Plan& plan) {
  if (auto why = gpu_unavailable_reason())
    throw Error(fmt::format("cannot execute {}: {}", plan.graph_name, *why));
  return plan;
}

void check_plan(const codegen::Plan& plan) {
  const int nb = static_cast<int>(plan.buffers.size());
  auto valid = [&](int i) { return i >= 0 && i < nb; };
  for (const codegen::Step& step : plan.steps) {
    if (const auto* g = std::get_if<codegen::GemmStep>(&step)) {
      MLPC_ASSERT(valid(g->x) && valid(g->w) && valid(g->y), "GEMM " + g->name + ": bad buffer");
      const ir::TensorType& x = plan.buffers[g->x].type;
      const ir::TensorType& w = plan.buffers[g->w].type;
      const ir::TensorType& y = plan.buffers[g->y].type;
      MLPC_ASSERT(x.shape.last() == g->k && y.shape.last() == g->n &&
                      w.shape.dims == std::vector<int64_t>({g->n, g->k}),
                  "GEMM " + g->name + ": buffer shapes do not match n, k");
      MLPC_ASSERT(x.dtype == g->dtype && w.dtype == g->dtype && y.dtype == g->dtype,
                  "GEMM " + g->name + ": buffer dtypes differ from the step's");
      MLPC_ASSERT(x.shape.rows(7) == y.shape.rows(7) && x.shape.rows(1) == y.shape.rows(1),
                  "GEMM " + g->name + ": x and y have different rows");
    } else {
      const auto& k = std::get<codegen::KernelStep>(step);
      MLPC_ASSERT(valid(k.output), "kernel " + k.name + ": bad output buffer");
      for (int i : k.inputs) MLPC_ASSERT(valid(i), "kernel " + k.name + ": bad input buffer");
    }
  }
  for (int i : plan.outputs) MLPC_ASSERT(valid(i), "plan output: bad buffer");
}

}  // namespace

struct Executor::Launch {
  // A GEMM step ...
  const codegen::GemmStep* gemm = nullptr;
  int64_t rows = 0;
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  // ... or a kernel step: args points into ptrs and n, so a Launch never moves once built.
  cudaKernel_t kernel = nullptr;
  codegen::LaunchDims dims;
  std::vector<void*> ptrs;
  long long n = 0;
  std::vector<void*> args;
};

Executor::Executor(const codegen::Plan& plan, std::map<std::string, std::vector<char>> cubins)
    : plan_(require_gpu(plan)), cubins_(std::move(cubins)) {
  check_plan(plan_);
  const size_t nb = plan_.buffers.size();
  offsets_.assign(nb, 0);
  params_.assign(nb, nullptr);
  set_.assign(nb, false);
  try {
    for (const codegen::Step& step : plan_.steps) {
      const auto* k = std::get_if<codegen::KernelStep>(&step);
      if (!k || kernels_.count(k->name)) continue;
      auto it = cubins_.find(k->name);
      if (it == cubins_.end() || it->second.empty())
        throw Error(fmt::format("no CUBIN for kernel {}", k->name));
      cudaLibrary_t lib = nullptr;
      MLPC_CUDA(cudaLibraryLoadData(&lib, it->second.data(), nullptr, nullptr, 0, nullptr,
                                    nullptr, 0));
      libraries_.push_back(lib);
      cudaKernel_t kernel = nullptr;
      MLPC_CUDA(cudaLibraryGetKernel(&kernel, lib, k->name.c_str()));
      kernels_[k->name] = kernel;
    }
  } catch (...) {
    for (cudaLibrary_t lib : libraries_) cudaLibraryUnload(lib);
    throw;
  }
}

Executor::~Executor() {
  // Errors are ignored here: a destructor must not throw, and a sticky error was reported already.
  if (arena_) cudaFree(arena_);
  for (void* p : params_)
    if (p) cudaFree(p);
  for (cudaLibrary_t lib : libraries_) cudaLibraryUnload(lib);
}

int Executor::buffer_index(const std::string& name) const {
  for (size_t i = 0; i < plan_.buffers.size(); ++i)
    if (plan_.buffers[i].name == name) return static_cast<int>(i);
  throw Error(fmt::format("{} has no buffer named '{}'", plan_.graph_name, name));
}

std::vector<int64_t> Executor::bound_dims(int i) const {
  const codegen::Buffer& b = plan_.buffers[i];
  std::vector<int64_t> dims = b.type.shape.dims;
  for (int64_t& d : dims) {
    if (d != ir::kBatchDim) continue;
    if (batch_ < 0)
      throw Error(fmt::format("buffer {} has a batch dim: call bind_batch first", b.name));
    d = batch_;
  }
  return dims;
}

void* Executor::device_ptr(int i) const {
  MLPC_ASSERT(i >= 0 && i < static_cast<int>(plan_.buffers.size()), "bad buffer index");
  if (plan_.buffers[i].role == codegen::BufferRole::Param) return params_[i];
  return arena_ ? static_cast<char*>(arena_) + offsets_[i] : nullptr;
}

void Executor::bind_batch(int64_t batch) {
  if (batch < 0) throw Error(fmt::format("bad batch size {}", batch));
  if (batch == batch_) return;
  launches_valid_ = false;
  if (arena_) MLPC_CUDA(cudaFree(arena_));
  arena_ = nullptr;
  arena_bytes_ = 0;
  batch_ = -1;
  size_t total = 0;
  for (size_t i = 0; i < plan_.buffers.size(); ++i) {
    const codegen::Buffer& b = plan_.buffers[i];
    if (b.role == codegen::BufferRole::Param) continue;
    set_[i] = false;
    offsets_[i] = align_up(total, kArenaAlign);
    total = offsets_[i] + static_cast<size_t>(b.bytes(batch));
  }
  total = align_up(total, kArenaAlign);
  if (total > 0) MLPC_CUDA(cudaMalloc(&arena_, total));
  arena_bytes_ = total;
  batch_ = batch;
  for (const codegen::Step& step : plan_.steps)
    if (const auto* g = std::get_if<codegen::GemmStep>(&step))
      gemm_.prepare(*g, plan_.buffers[g->y].type.shape.rows(batch));
}

void Executor::set_tensor(const std::string& name, const HostTensor& t) {
  const int i = buffer_index(name);
  const codegen::Buffer& b = plan_.buffers[i];
  const std::vector<int64_t> dims = bound_dims(i);
  if (t.dtype != b.type.dtype || t.dims != dims ||
      static_cast<int64_t>(t.data.size()) != b.numel(batch_ < 0 ? 1 : batch_))
    throw Error(fmt::format("tensor for {}: expected {}[{}], got {}[{}] with {} values", name,
                            ir::dtype_name(b.type.dtype), fmt::join(dims, ", "),
                            ir::dtype_name(t.dtype), fmt::join(t.dims, ", "), t.data.size()));
  const std::vector<uint8_t> bytes = encode(t);
  void* dst = nullptr;
  if (b.role == codegen::BufferRole::Param) {
    if (!params_[i]) {
      MLPC_CUDA(cudaMalloc(&params_[i], std::max<size_t>(bytes.size(), 1)));
      launches_valid_ = false;
    }
    dst = params_[i];
  } else {
    dst = device_ptr(i);
  }
  if (!bytes.empty()) MLPC_CUDA(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  set_[i] = true;
}

void Executor::resolve_launches() {
  auto read = [&](int i) -> void* {
    const codegen::Buffer& b = plan_.buffers[i];
    bool must_be_set =
        b.role == codegen::BufferRole::Param || b.role == codegen::BufferRole::Input;
    if (must_be_set && !set_[i])
      throw Error(fmt::format("{} {} was not set", b.role == codegen::BufferRole::Param
                                                       ? "param" : "input", b.name));
    return device_ptr(i);
  };
  launches_.clear();
  launches_.reserve(plan_.steps.size());  // no reallocation below: args point into elements
  for (const codegen::Step& step : plan_.steps) {
    Launch& l = launches_.emplace_back();
    if (const auto* g = std::get_if<codegen::GemmStep>(&step)) {
      l.gemm = g;
      l.rows = plan_.buffers[g->y].type.shape.rows(batch_);
      l.x = read(g->x);
      l.w = read(g->w);
      l.y = device_ptr(g->y);
    } else {
      const auto& k = std::get<codegen::KernelStep>(step);
      l.kernel = kernels_.at(k.name);
      for (int i : k.inputs) l.ptrs.push_back(read(i));
      l.ptrs.push_back(device_ptr(k.output));
      l.n = static_cast<long long>(plan_.buffers[k.output].numel(batch_));
      l.dims = codegen::launch_dims(k, l.n);
      for (void*& p : l.ptrs) l.args.push_back(&p);
      l.args.push_back(&l.n);
    }
  }
  launches_valid_ = true;
}

void Executor::run(cudaStream_t stream) {
  if (batch_ < 0) throw Error(fmt::format("cannot run {}: call bind_batch first", plan_.graph_name));
  if (!launches_valid_) resolve_launches();
  for (Launch& l : launches_) {
    if (l.gemm) {
      gemm_.run(*l.gemm, l.rows, l.x, l.w, l.y, stream);
    } else if (l.n > 0) {
      MLPC_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(l.kernel), dim3(l.dims.grid),
                                 dim3(l.dims.block), l.args.data(), 0, stream));
      MLPC_CUDA(cudaGetLastError());
    }
  }
}

HostTensor Executor::download(int i) {
  MLPC_ASSERT(i >= 0 && i < static_cast<int>(plan_.buffers.size()), "bad buffer index");
  const codegen::Buffer& b = plan_.buffers[i];
  HostTensor t;
  t.dtype = b.type.dtype;
  t.dims = bound_dims(i);
  const int64_t numel = t.numel();
  std::vector<uint8_t> bytes(static_cast<size_t>(numel) * ir::dtype_size(t.dtype));
  MLPC_CUDA(cudaDeviceSynchronize());
  if (!bytes.empty()) {
    const void* src = device_ptr(i);
    if (!src) throw Error(fmt::format("buffer {} has no device memory yet", b.name));
    MLPC_CUDA(cudaMemcpy(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost));
  }
  t.data = decode(t.dtype, bytes.data(), numel);
  return t;
}

std::vector<HostTensor> Executor::outputs() {
  std::vector<HostTensor> out;
  for (int i : plan_.outputs) out.push_back(download(i));
  return out;
}

}  // namespace mlpc::runtime
