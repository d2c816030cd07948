// Stores the x of an f32 GEMM transposed, [k, rows], where the lowering picks it. cuBLAS's
// CUDA-core SGEMMs (IEEE fp32: what f32 GEMMs run as unless 3xTF32 is asked for) are faster
// reading x so than row-major, by a few percent on mlp3's large layers, each cuBLASLt's best
// candidate for its layout (bench/gemm_probe --f32 --layouts; docs/benchmarks.md). Tensor-core GEMMs (bf16, f16) show no such difference and
// are not looked at. The kernel that computes x writes it transposed itself (a tile at a time
// through shared memory), so the plan keeps its launches: a GEMM qualifies when its x is an
// intermediate that only it reads, written by an elementwise kernel of a fused.pointwise region
// (codegen/elementwise_producer.h). Small-GEMM kernels, 3xTF32 GEMMs and K-chunks are left alone.
// Once a GEMM reads x transposed, it may also read its weight transposed, [k, n] (a param derived
// from the weight, written whenever the weight is set): cuBLAS's "NT" SGEMM, faster again on
// mlp3's fc2 (docs/benchmarks.md). Each is its own decision.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// The rewrite itself is codegen/rewrite_site.h's apply_transposed_x.

}  // namespace mlpc::codegen
