#include "runtime/exec/step_hooks.h"

#include <exception>

namespace mlpc::runtime {
namespace {

thread_local StepObserver* current_observer = nullptr;

}  // namespace

ScopedStepObserver::ScopedStepObserver(StepObserver* o) : previous_(current_observer) {
  current_observer = o;
}

ScopedStepObserver::~ScopedStepObserver() { current_observer = previous_; }

const char* step_name(const codegen::Plan& plan, size_t i) {
  if (i >= plan.steps.size()) return "mlpc step";
  return std::visit([](const auto& s) { return s.name.c_str(); }, plan.steps[i]);
}

StepScope::StepScope(const codegen::Plan& plan, size_t step, cudaStream_t stream)
    : observer_(current_observer), step_(step), stream_(stream) {
  range_.emplace(step_name(plan, step));
  if (observer_) observer_->before_step(step_, stream_);
}

StepScope::~StepScope() {
  // A launch that threw has no interval worth recording.
  if (observer_ && std::uncaught_exceptions() == 0) observer_->after_step(step_, stream_);
}

}  // namespace mlpc::runtime
