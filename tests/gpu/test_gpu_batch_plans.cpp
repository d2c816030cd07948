// One -O2 compile for several batch sizes (compiler/batch_plans.h) on the GPU: each size's
// decisions measured at it, and every batch, asked for or not, run on the plan that covers it
// and matching the fp64 reference. Which plan wins where is the benchmark's to show (mlpc bench
// --batch 1,16,...), not asserted here.
#include <catch2/catch.hpp>

#include "compiler/batch_plans.h"
#include "compiler/samples.h"
#include "check_on_gpu.h"

using namespace mlpc;

TEST_CASE("one -O2 compile for decode and large batches runs every batch on its plan",
          "[gpu][batch_plans]") {
  CompileOptions o{.fusion = true, .epilogues = true};
  o.merge_gemms = MergeGemms::Measure;
  o.small_gemms = SmallGemms::Measure;
  o.gated_gemms = GatedGemms::Measure;
  for (const char* sample : {"geglu", "mlp3_small"}) {
    const ir::Graph g = make_sample(sample);
    const BatchPlans plans = compile_for_batches(g, o, {16, 4096});
    for (const BatchPlan& p : plans.plans) {
      std::string why;
      for (const codegen::StepChoice& ch : p.compiled.plan.choices) why += ch.step + ": " + ch.why + "\n";
      UNSCOPED_INFO(sample << " plan " << describe_decided_at(p.decided_at) << ", "
                           << p.compiled.plan.launches() << " launches:\n" << why);
    }
    // Asked for, between, below and past the sizes asked for.
    for (int64_t batch : {16, 4096, 1, 17, 100, 5000}) {
      const BatchPlan& p = plans.for_batch(batch);
      INFO(sample << " batch " << batch << " on the plan " << describe_decided_at(p.decided_at));
      testing::check_on_gpu(g, p.compiled, batch, 31);
    }
  }
}
