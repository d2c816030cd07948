#include "fault_injection.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/device/cuda_check.h"

namespace mlpc::testing {
namespace {

// A kernel combining two operands asymmetrically (gelu(g) * u, silu(g) * u): swapping them is a
// different function. A plain add or mul of two operands is not, so it gets no swap fault.
bool asymmetric_combine(const codegen::KernelStep& k) {
  return k.inputs.size() >= 2 && (k.name.find("gelu") != std::string::npos ||
                                  k.name.find("silu") != std::string::npos ||
                                  k.name.find("sigmoid") != std::string::npos);
}

}  // namespace

std::string Fault::describe(const codegen::Plan& plan) const {
  const std::string step_name = runtime::step_name(plan, step);
  auto buf = [&](int i) { return i >= 0 ? plan.buffers[i].name : std::string("?"); };
  switch (kind) {
    case Kind::ZeroWeightKChunk:
      return fmt::format("{}: first K-quarter of {} skipped", step_name, buf(a));
    case Kind::ZeroBias: return fmt::format("{}: bias {} dropped", step_name, buf(a));
    case Kind::ZeroResidual: return fmt::format("{}: residual {} dropped", step_name, buf(a));
    case Kind::SwapOperands:
      return fmt::format("{}: {} and {} swapped", step_name, buf(a), buf(b));
    case Kind::DropOutput: return fmt::format("{}: output {} never written", step_name, buf(a));
  }
  return "?";
}

std::vector<Fault> faults_for(const codegen::Plan& plan) {
  using K = Fault::Kind;
  std::vector<Fault> out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (const auto* g = std::get_if<codegen::GemmStep>(&plan.steps[i])) {
      if (g->k >= 4 && !g->w_transposed) out.push_back({K::ZeroWeightKChunk, i, g->w});
      if (g->bias >= 0) out.push_back({K::ZeroBias, i, g->bias});
      if (g->residual >= 0) out.push_back({K::ZeroResidual, i, g->residual});
      continue;
    }
    const auto& k = std::get<codegen::KernelStep>(plan.steps[i]);
    if (k.gemm_products() == 2) {
      out.push_back({K::SwapOperands, i, k.inputs[1], k.inputs[2]});  // gate and up swapped
      out.push_back({K::ZeroWeightKChunk, i, k.inputs[1]});
    } else if (k.product_k() >= 4) {
      out.push_back({K::ZeroWeightKChunk, i, k.inputs[1]});
      if (k.inputs.size() > 2) out.push_back({K::ZeroBias, i, k.inputs[2]});
    } else if (asymmetric_combine(k) &&
               plan.buffers[k.inputs[0]].type == plan.buffers[k.inputs[1]].type) {
      out.push_back({K::SwapOperands, i, k.inputs[0], k.inputs[1]});
    }
    if (k.gemm_products() == 0) out.push_back({K::DropOutput, i, k.output});
  }
  return out;
}

FaultInjector::FaultInjector(runtime::Executor& ex, Fault f, int64_t batch)
    : ex_(ex), f_(f), batch_(batch) {
  for (int i : {f_.a, f_.b})
    if (i >= 0)
      scratch_bytes_ = std::max(scratch_bytes_,
                                static_cast<size_t>(ex_.plan().buffers[i].bytes(batch_)));
  if (scratch_bytes_) MLPC_CUDA(cudaMalloc(&scratch_, scratch_bytes_));
}

FaultInjector::~FaultInjector() {
  if (scratch_) cudaFree(scratch_);
}

FaultInjector::Region FaultInjector::region(int buffer, bool k_chunk) const {
  const codegen::Buffer& b = ex_.plan().buffers[buffer];
  Region r;
  r.base = static_cast<char*>(ex_.device_ptr(buffer));
  const size_t elem = ir::dtype_size(b.type.dtype);
  const size_t row = static_cast<size_t>(b.type.shape.last()) * elem;
  r.pitch = row;
  r.rows = static_cast<size_t>(b.bytes(batch_)) / std::max<size_t>(row, 1);
  // One K-chunk: the first quarter of every row of w [n, k] (rounded to whole elements).
  r.width = k_chunk ? std::max<size_t>(row / 4 / elem, 1) * elem : row;
  return r;
}

void FaultInjector::save_and_zero(const Region& r, cudaStream_t s) noexcept {
  cudaMemcpy2DAsync(scratch_, r.width, r.base, r.pitch, r.width, r.rows,
                    cudaMemcpyDeviceToDevice, s);
  cudaMemset2DAsync(r.base, r.pitch, 0, r.width, r.rows, s);
}

void FaultInjector::restore(const Region& r, cudaStream_t s) noexcept {
  cudaMemcpy2DAsync(r.base, r.pitch, scratch_, r.width, r.width, r.rows,
                    cudaMemcpyDeviceToDevice, s);
}

void FaultInjector::swap(cudaStream_t s) noexcept {
  const size_t bytes = static_cast<size_t>(ex_.plan().buffers[f_.a].bytes(batch_));
  void* a = ex_.device_ptr(f_.a);
  void* b = ex_.device_ptr(f_.b);
  cudaMemcpyAsync(scratch_, a, bytes, cudaMemcpyDeviceToDevice, s);
  cudaMemcpyAsync(a, b, bytes, cudaMemcpyDeviceToDevice, s);
  cudaMemcpyAsync(b, scratch_, bytes, cudaMemcpyDeviceToDevice, s);
}

void FaultInjector::before_step(size_t step, cudaStream_t s) noexcept {
  if (step != f_.step) return;
  using K = Fault::Kind;
  switch (f_.kind) {
    case K::ZeroWeightKChunk: save_and_zero(region(f_.a, true), s); break;
    case K::ZeroBias:
    case K::ZeroResidual: save_and_zero(region(f_.a, false), s); break;
    case K::SwapOperands: swap(s); break;
    case K::DropOutput: break;
  }
}

void FaultInjector::after_step(size_t step, cudaStream_t s) noexcept {
  if (step != f_.step) return;
  using K = Fault::Kind;
  switch (f_.kind) {
    case K::ZeroWeightKChunk: restore(region(f_.a, true), s); break;
    case K::ZeroBias:
    case K::ZeroResidual: restore(region(f_.a, false), s); break;
    case K::SwapOperands: swap(s); break;  // swapped back
    case K::DropOutput:
      cudaMemsetAsync(ex_.device_ptr(f_.a), 0,
                      static_cast<size_t>(ex_.plan().buffers[f_.a].bytes(batch_)), s);
      break;
  }
}

}  // namespace mlpc::testing
