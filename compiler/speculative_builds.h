// -O2's tuning step (compiler/tuning.h) times kernels it must first build, and NVRTC is most of
// a cold compile (the gated GEMM kernel's build above all), while the passes' merge and epilogue
// decisions before it keep the GPU busy and the CPU idle. So compile() starts building, on
// other threads, the kernels tuning will time: the candidates' fragments of every merge outcome
// (the epilogues folded by the rule). Tuning, asking for a kernel still being built, waits for
// that build (runtime::CachedCompiler); one it asks for that is not here it builds as before.
// Only where something will be measured (a GPU, a Measure mode) and kernels are built.
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
  std::vector<std::future<void>> builds_;  // one a kernel
};

// The kernels SpeculativeBuilds builds for `g`: those of the candidates' fragments of every merge
// outcome, each (name, source) once (no GPU needed; empty when tuning would time nothing). Two
// may share a name: a gated kernel takes its region's, beside the region's own kernel, so each
// is built on its own, never as one plan.
std::vector<codegen::KernelStep> speculative_kernels(const ir::Graph& g,
                                                     const CompileOptions& options,
                                                     const std::string& arch);

}  // namespace mlpc
