// Rewrites f32 GEMMs of a built plan as 3xTF32 GEMMs (codegen/tf32x3.h) where the decider says
// so. The GEMM then reads x3 = x's three TF32 parts and w3 = its weight's (a derived param the
// runtime fills when the weight is set) and runs on TF32 tensor cores with fp32 accumulation.
// x3 is written by the pointwise kernel that computes x when this GEMM is x's only reader (that
// kernel stores the parts instead of x: no extra pass, no extra launch), and otherwise by a split
// kernel of its own, shared by every GEMM of the same x. GEMMs that are generated kernels, and
// GEMMs over a stacked (merged) weight, are left alone.
#pragma once

#include "codegen/plan_builder.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// `g` is the graph `plan` was built from. Records each decision in plan.choices.
void apply_tf32x3(Plan& plan, const ir::Graph& g, const Tf32x3Decider& decider);

// Whether some GEMM of `plan` runs as 3xTF32 (its results then have 3xTF32's tolerance).
bool has_tf32x3_gemm(const Plan& plan);

}  // namespace mlpc::codegen
