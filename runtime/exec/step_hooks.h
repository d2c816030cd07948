// What the executor wraps around each step it enqueues: an NVTX range named after the step, and
// the hooks of this thread's step observer, if one is installed (the trace recorder puts CUDA
// events and host timestamps around each launch that way). Without an observer the cost is one
// thread-local load per step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <optional>

#include "codegen/plan.h"
#include "runtime/exec/nvtx.h"

namespace mlpc::runtime {

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Called just before and just after the step's launch call(s); must not throw.
  virtual void before_step(size_t step, cudaStream_t stream) noexcept = 0;
  virtual void after_step(size_t step, cudaStream_t stream) noexcept = 0;
};

// Installs `o` as this thread's observer for its lifetime (the previous one comes back after).
class ScopedStepObserver {
 public:
  explicit ScopedStepObserver(StepObserver* o);
  ~ScopedStepObserver();
  ScopedStepObserver(const ScopedStepObserver&) = delete;
  ScopedStepObserver& operator=(const ScopedStepObserver&) = delete;

 private:
  StepObserver* previous_;
};

// The name of step `i`: its GemmStep or KernelStep name.
const char* step_name(const codegen::Plan& plan, size_t i);

class StepScope {
 public:
  StepScope(const codegen::Plan& plan, size_t step, cudaStream_t stream);
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  std::optional<NvtxRange> range_;
  StepObserver* observer_;
  size_t step_;
  cudaStream_t stream_;
};

}  // namespace mlpc::runtime
