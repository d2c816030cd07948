// Rewrites f32 GEMMs of a built plan as 3xTF32 GEMMs (codegen/tf32x3.h) where the lowering picks
// it. The GEMM then reads x3 = x's three TF32 parts and w3 = its weight's (a derived param the
// runtime fills when the weight is set) and runs on TF32 tensor cores with fp32 accumulation.
// x3 is written by the pointwise kernel that computes x when this GEMM is x's only reader (that
// kernel stores the parts instead of x: no extra pass, no extra launch), and otherwise by a split
// kernel of its own, shared by every GEMM of the same x. Where K allows (codegen/tf32x3.h's
// tf32x3_chunk_k) the GEMM becomes one GEMM per K-chunk, each adding to y, which keeps it at
// IEEE fp32's accuracy (within its tolerance); else it stays one GEMM, less accurate. GEMMs
// that are generated kernels, and GEMMs over a stacked (merged) weight, are left alone.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// The rewrite itself is codegen/rewrite_site.h's apply_tf32x3.

// Whether `step` is a 3xTF32 GEMM less accurate than IEEE fp32: not one of the K-chunks of
// tf32x3_chunk_k (codegen/tf32x3.h).
bool tf32x3_below_ieee(const GemmStep& step);
// Whether some GEMM of `plan` is: its results are then checked with 3xTF32's wider tolerance.
bool needs_tf32x3_tolerance(const Plan& plan);

}  // namespace mlpc::codegen
