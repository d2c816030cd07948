// Every GPU correctness check can fail: for each sample, at -O1 and -O2 (decode and large
// batches, so the mma, gated and cuBLASLt kernels each appear), each step is made to compute
// something wrong (tests/gpu/fault_injection.h) and the check the GPU tests and `mlpc bench` use
// (compare_rows against the fp64 reference, residual blocks on y - x too) must reject it. The
// table it prints is the one in docs/testing.md.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <iostream>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/levels.h"
#include "compiler/samples.h"
#include "codegen/tf32x3_plan.h"
#include "fault_injection.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/step_hooks.h"

using namespace mlpc;

namespace {

struct Config {
  int level;
  int64_t batch;
};

Check check_run(const ir::Graph& g, runtime::Executor& ex, const CompiledGraph& c,
                const Values& values, int64_t batch) {
  ex.run();
  const std::vector<int64_t> rows = sample_rows(batch);
  return compare_rows(g, ex.outputs(), rows, reference_on_rows(g, values, rows),
                      codegen::needs_tf32x3_tolerance(c.plan), &values);
}

}  // namespace

TEST_CASE("every injected fault is caught by the check that passes the clean run",
          "[gpu][faults]") {
  std::cout << "| sample | level | batch | tolerance (rtol, floor x rms) | fault | clean ratio "
               "| faulty ratio (y; own part) | caught |\n|---|---|---|---|---|---|---|---|\n";
  int faults = 0, caught = 0;
  for (const SampleInfo& s : samples()) {
    const ir::Graph g = make_sample(s.name);
    for (Config cfg : {Config{1, 512}, Config{2, 64}, Config{2, 2048}}) {
      CompileOptions o = options_for_level(cfg.level);
      o.decide_rows = cfg.batch;
      const CompiledGraph c = compile(g, o);
      runtime::Executor ex(c.plan, c.cubins, {.tune_gemms = true, .cuda_graph = false});
      const Values values = random_values(g, cfg.batch, 11);
      bind_inputs_and_params(ex, c.plan, values, cfg.batch);
      const Check clean = check_run(g, ex, c, values, cfg.batch);
      INFO(s.name << " -O" << cfg.level << " at " << cfg.batch << " rows");
      REQUIRE(clean.ok);
      const runtime::Tolerance tol =
          graph_tolerance(g, g.node(g.outputs()[0]).type.dtype,
                          codegen::needs_tf32x3_tolerance(c.plan));
      for (const testing::Fault& f : testing::faults_for(c.plan)) {
        Check bad;
        {
          testing::FaultInjector inject(ex, f, cfg.batch);
          runtime::ScopedStepObserver on(&inject);
          bad = check_run(g, ex, c, values, cfg.batch);
        }
        ++faults;
        caught += !bad.ok;
        std::cout << fmt::format("| {} | -O{} | {} | {:.2g}, {:.2g} | {} | {:.2f} | {:.3g}; {:.3g} "
                                 "| {} |\n",
                                 s.name, cfg.level, cfg.batch, tol.rtol, tol.floor,
                                 f.describe(c.plan), clean.worst_ratio, bad.worst_ratio,
                                 bad.contribution_worst_ratio, bad.ok ? "NO" : "yes");
        INFO(f.describe(c.plan));
        CHECK_FALSE(bad.ok);
      }
      // The faults are undone: the same executor passes again.
      CHECK(check_run(g, ex, c, values, cfg.batch).ok);
    }
  }
  std::cout << fmt::format("{} faults injected, {} caught\n", faults, caught);
  CHECK(faults > 0);
}
