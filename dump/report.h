// What `mlpc compile` shows: the kernel plan as text and JSON, and the --dump-dir folder.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace mlpc {

// One step of a plan as every report shows it: the same name in the IR (fused.pointwise symbol,
// "gemm_<value>"), the .cu file, the trace, the explain table and the fusion report.
struct StepFacts {
  std::string name, kind;  // kind: "gemm" | "gated_gemm" | "pointwise" | "reduction" | "fused_mlp"
  std::vector<std::string> ops, nodes;  // IR op names; IR value names it computes
  // Operands stored transposed (codegen/transposed_x_plan.h): "x_transposed", "w_transposed"
  // (a GEMM reads them so), "store_transposed" (a kernel writes its output so).
  std::vector<std::string> layout;
  int64_t bytes = 0;  // device memory read + written at this batch
  double flops = 0;   // GEMMs only: 2 * rows * n * k (twice that for a gated GEMM, the sum over
                      // its layers for a fused MLP)
  ir::DType dtype = ir::DType::F32;  // of its output
  bool generated = true;  // a generated kernel (a .cu file), not a cuBLASLt call
};
StepFacts step_facts(const codegen::Plan& p, const codegen::Step& s, int64_t batch);
std::vector<StepFacts> plan_facts(const codegen::Plan& p, int64_t batch);

// {"graph", "launches", "kernels": [{"name", "kind", "ops", ["layout",] ...}], "buffers",
// "passes", "fusion"}
nlohmann::json plan_json(const CompiledGraph& c, int64_t batch);
// One line per launch: kind, name, ops, shapes, bytes moved at `batch`.
std::string plan_text(const CompiledGraph& c, int64_t batch);

struct DumpOptions {
  bool emit_ptx = false;    // also kernels/NAME.ptx (NVRTC, compute_XX of the compile's arch)
  bool render_svg = true;   // graph.svg through Graphviz `dot`, when it is on PATH
};
// Writes a folder to browse, in the spirit of TORCH_COMPILE_DEBUG:
//   00-input.mlp, NN-PASS.mlp (the IR after each pass that changed it, in pipeline order),
//   kernels/NAME.cu (and .ptx), plan.txt, plan.json, fusion.txt, fusion.md, graph.dot,
//   graph.svg (when Graphviz is installed) and index.html, which links all of them.
void write_dump(const std::string& dir, const CompiledGraph& c, int64_t batch,
                const DumpOptions& options = {});

}  // namespace mlpc
