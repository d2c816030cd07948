#include "passes/pipeline.h"

#include <chrono>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/expand_composites.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_pointwise.h"
#include "passes/fuse_reduction.h"

namespace mlpc::passes {

bool run_pass(PipelineResult& r, const std::string& name,
              const std::function<bool(ir::Graph&)>& pass) {
  auto t0 = std::chrono::steady_clock::now();
  const bool changed = pass(r.graph);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (changed) ir::verify(r.graph);
  r.passes.push_back({name, changed, ms, changed ? ir::print(r.graph) : std::string()});
  return changed;
}

PipelineResult run_pipeline(ir::Graph g, const PipelineOptions& options) {
  PipelineResult result;
  ir::verify(g);
  result.input_ir = ir::print(g);
  result.graph = std::move(g);
  auto run = [&](const char* name, const std::function<bool(ir::Graph&)>& pass) {
    run_pass(result, name, pass);
  };

  run("expand-composites", expand_composites);
  run("dce", dce);
  run("cse", cse);
  if (options.fusion && options.epilogues)
    run("fuse-epilogue", [&](ir::Graph& x) {
      return fuse_epilogue(x, &result.fusion, options.epilogue_decider);
    });
  if (options.fusion && options.merge_gemms)
    run("merge-gemms", [&](ir::Graph& x) {
      return merge_gemms(x, options.merge_gemms, &result.fusion);
    });
  if (options.fusion)
    run("fuse-reduction", [&](ir::Graph& x) { return fuse_reduction(x, &result.fusion); });
  else
    run("isolate-reduction", isolate_reduction);
  if (options.fusion)
    run("fuse-pointwise", [&](ir::Graph& x) { return fuse_pointwise(x, &result.fusion); });
  else
    run("isolate-pointwise", isolate_pointwise);
  // Fusion can leave a producer dead once every user recomputes it.
  run("dce", dce);
  return result;
}

}  // namespace mlpc::passes
