// Lowers a fused graph (after the pass pipeline) to a Plan: one buffer per value that lives in
// memory, one step per GEMM and per fused.pointwise region, in program order.
#pragma once

#include <functional>
#include <string>

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// Whether a generated kernel replaces cuBLASLt steps (a small GEMM, a gated GEMM), and why;
// `kernel`: which of the candidate kernels offered (when use_kernel).
struct KernelChoice {
  bool use_kernel = false;
  std::string why;
  size_t kernel = 0;
};
// Asked for each GEMM that a generated kernel can compute, with every such kernel (candidates,
// in order: codegen/small_gemm_kernel.h's CUDA-core kernel where it applies, then
// codegen/mma_gemm_kernel.h's tensor-core one); `plan` holds the buffers made so far, the GEMM's
// among them.
using SmallGemmDecider = std::function<KernelChoice(const Plan& plan, const GemmStep& gemm,
                                                    const std::vector<KernelStep>& kernels)>;

// Whether two GEMMs of one input and the pointwise kernel that combines them (gate and up; apart
// or merged) become one gated GEMM kernel. `kernels`: the candidates, in order: the Hopper kernel
// (codegen/gated_gemm_kernel.h), then the mma.sync one (codegen/mma_gemm_kernel.h) where the
// shape allows. `replaced`: the steps it would replace, in plan order, their buffers in `plan`.
using GatedGemmDecider = std::function<KernelChoice(
    const Plan& plan, const std::vector<KernelStep>& kernels, const std::vector<Step>& replaced)>;

// Whether a rewrite of some steps is taken. `replaced`: the steps of `plan` that change;
// `rewritten`: what replaces them in `trial`, the plan with the change made.
using RewriteDecider =
    std::function<KernelChoice(const Plan& plan, const std::vector<Step>& replaced,
                               const Plan& trial, const std::vector<Step>& rewritten)>;
// Whether an f32 GEMM runs as three TF32 products (codegen/tf32x3_plan.h); replaced: the GEMM,
// and the kernel writing its x when that kernel would store the split parts itself.
using Tf32x3Decider = RewriteDecider;
// Whether an f32 GEMM reads its x stored transposed (codegen/transposed_x_plan.h); replaced: the
// kernel writing x, then the GEMM.
using TransposedXDecider = RewriteDecider;

struct PlanOptions {
  // GEMMs as generated kernels instead of cuBLASLt calls: for GEMMs so small that cuBLASLt's
  // fixed cost is most of their time. `small_gemms`: every GEMM the CUDA-core kernel can compute
  // (codegen/small_gemm_kernel.h: n a multiple of 32, no residual) runs as it; otherwise the
  // decider, when there is one, chooses per GEMM among cuBLASLt and the kernels that can compute
  // it (and the plan records each choice).
  bool small_gemms = false;
  SmallGemmDecider small_gemm_decider;
  // Asked for each gated pattern (codegen/gated_gemm_plan.h); none: no gated GEMMs.
  GatedGemmDecider gated_gemm_decider;
  // Asked for each f32 GEMM that is a cuBLASLt step; none: every one stays an IEEE SGEMM.
  Tf32x3Decider tf32x3_decider;
  // Asked for each IEEE f32 cuBLASLt GEMM whose x an elementwise kernel writes for it alone;
  // none: every x stays row-major.
  TransposedXDecider transposed_x_decider;
};

Plan build_plan(const ir::Graph& g, const PlanOptions& options = {});

}  // namespace mlpc::codegen
