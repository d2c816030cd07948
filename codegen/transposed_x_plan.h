// Stores the x of an f32 GEMM transposed, [k, rows], where the decider says so. cuBLAS's
// CUDA-core SGEMMs (IEEE fp32: what f32 GEMMs run as unless 3xTF32 is asked for) are faster
// reading x so than row-major, by a few percent on mlp3's large layers, each cuBLASLt's best
// candidate for its layout (bench/gemm_probe --f32 --layouts; docs/benchmarks.md). Tensor-core GEMMs (bf16, f16) show no such difference and
// are not looked at. The kernel that computes x writes it transposed itself (a tile at a time
// through shared memory), so the plan keeps its launches: a GEMM qualifies when its x is an
// intermediate that only it reads, written by an elementwise kernel of a fused.pointwise region
// (codegen/elementwise_producer.h). Small-GEMM kernels, 3xTF32 GEMMs and K-chunks are left alone.
// Once a GEMM reads x transposed, it may also read its weight transposed, [k, n] (a param derived
// from the weight, written whenever the weight is set): cuBLAS's "NT" SGEMM, fc2 of mlp3 in 5081
// µs against 5203 with x alone transposed. Each is its own decision.
#pragma once

#include "codegen/plan_builder.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// `g` is the graph `plan` was built from. Records each decision in plan.choices.
void apply_transposed_x(Plan& plan, const ir::Graph& g, const TransposedXDecider& decider);

}  // namespace mlpc::codegen
