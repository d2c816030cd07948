// -O2's measured decisions (gated GEMM kernels, small GEMM kernels, 3xTF32) time kernels they
// must first build, and NVRTC is most of a cold compile (the gated GEMM kernel's build above
// all), while the merge decision before it keeps the GPU busy and the CPU idle. So compile()
// starts building, on other threads, the kernels those decisions are likely to ask for: the
// plans of every merge outcome with the generated kernels taken and with none taken (the
// epilogue folds by the rule). A decision that asks for a kernel still being built waits for
// that build (runtime::CachedCompiler), one that asks for another builds it as before. Only
// where something will be measured (a GPU, a Measure mode) and kernels are built.
#pragma once

#include <future>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace mlpc {

class SpeculativeBuilds {
 public:
  SpeculativeBuilds(const ir::Graph& g, const CompileOptions& options, const std::string& arch);
  ~SpeculativeBuilds();  // waits for the builds; their failures are dropped (the plan's own
                         // build reports a kernel that does not compile)
  SpeculativeBuilds(const SpeculativeBuilds&) = delete;
  SpeculativeBuilds& operator=(const SpeculativeBuilds&) = delete;

 private:
  std::vector<std::future<void>> builds_;
};

// The plans whose kernels SpeculativeBuilds builds for `g` (no GPU needed; empty when no
// decision of `options` times generated kernels): with the merge decision fixed to each of its
// outcomes, the measured plan decisions all taken, and none.
std::vector<std::vector<codegen::Step>> speculative_plans(const ir::Graph& g,
                                                         const CompileOptions& options,
                                                         const std::string& arch);

}  // namespace mlpc
