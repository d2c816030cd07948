#include "compiler/compile.h"

#include <chrono>

#include "codegen/plan_builder.h"
#include "runtime/device.h"
#include "runtime/nvrtc_compiler.h"

namespace mlpc {

CompiledGraph compile(const ir::Graph& g, const CompileOptions& options) {
  CompiledGraph c;
  c.pipeline = passes::run_pipeline(g, {.fusion = options.fusion});
  c.plan = codegen::build_plan(c.pipeline.graph);
  c.arch = options.arch.empty() ? runtime::device_arch() : options.arch;
  if (!options.build_kernels) return c;
  auto t0 = std::chrono::steady_clock::now();
  for (const codegen::Step& s : c.plan.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s))
      c.cubins[k->name] = runtime::compile_to_cubin(k->source, k->name, c.arch);
  c.nvrtc_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

}  // namespace mlpc
