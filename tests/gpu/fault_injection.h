// Test-only fault injection: a step observer (runtime/exec/step_hooks.h) that makes one step of a
// plan compute something wrong, through device copies around its launch: a quarter of a weight's K
// zeroed (one K-chunk skipped), a bias zeroed, a residual zeroed, two operands swapped (gate and
// up), or a kernel's output dropped. Every weight and operand is restored after the step, so the
// next fault starts clean. Needs eager launches (no CUDA graph): the hooks run per launch.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "codegen/plan.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/step_hooks.h"

namespace mlpc::testing {

struct Fault {
  enum class Kind { ZeroWeightKChunk, ZeroBias, ZeroResidual, SwapOperands, DropOutput };
  Kind kind;
  size_t step = 0;
  int a = -1, b = -1;  // buffers: the weight / bias / residual / output (a), and a swap's b
  std::string describe(const codegen::Plan& plan) const;
};

// Every fault that changes what `plan` computes, for each step that has one.
std::vector<Fault> faults_for(const codegen::Plan& plan);

class FaultInjector : public runtime::StepObserver {
 public:
  FaultInjector(runtime::Executor& ex, Fault f, int64_t batch);
  ~FaultInjector() override;
  void before_step(size_t step, cudaStream_t stream) noexcept override;
  void after_step(size_t step, cudaStream_t stream) noexcept override;

 private:
  struct Region {  // a 2-D block of a buffer: `rows` rows of `width` bytes, `pitch` apart
    char* base = nullptr;
    size_t pitch = 0, width = 0, rows = 0;
  };
  Region region(int buffer, bool k_chunk) const;
  void save_and_zero(const Region& r, cudaStream_t s) noexcept;
  void restore(const Region& r, cudaStream_t s) noexcept;
  void swap(cudaStream_t s) noexcept;

  runtime::Executor& ex_;
  Fault f_;
  int64_t batch_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace mlpc::testing
