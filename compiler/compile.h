// The public compile API: graph -> pass pipeline -> plan -> CUBINs (NVRTC, no GPU needed).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "passes/pipeline.h"

namespace mlpc {

struct CompileOptions {
  bool fusion = true;        // false: eager, one kernel per op
  std::string arch;          // "sm_90"; empty: the device's, or sm_90 without one
  bool build_kernels = true; // run NVRTC on every kernel
};

struct CompiledGraph {
  passes::PipelineResult pipeline;
  codegen::Plan plan;
  std::map<std::string, std::vector<char>> cubins;  // kernel name -> CUBIN
  std::string arch;
  double nvrtc_ms = 0.0;
};

CompiledGraph compile(const ir::Graph& g, const CompileOptions& options);

}  // namespace mlpc
