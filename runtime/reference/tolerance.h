// What "close enough to the fp64 reference" means, per dtype, in one place.
//
//   |got - ref| <= atol + rtol * |ref|,  atol = floor * rms(ref)
//
// rtol is torch.testing's per-dtype default (f32 1.3e-6, bf16 1.6e-2, f16 1e-3): the error of
// rounding a single result. A chain of `depth` ops stored one after another in the dtype (eager
// writes every intermediate) can carry up to depth roundings of u each, so rtol is at least
// depth * u (u = 2^-24 f32, 2^-11 f16, 2^-8 bf16). Whole graphs add two effects that scale with the size of the values
// summed, not with |ref| (which can be near zero for any element), so they form the absolute
// floor, in units of rms(ref):
//  - each GEMM accumulates in fp32: about sqrt(K) roundings of 2^-24 (4 sigma allowed);
//  - every value stored in f16/bf16 on the way (GEMM outputs, eager intermediates) carries a
//    relative rounding error of up to u (2^-11 f16, 2^-8 bf16) into later sums; over millions of
//    elements the largest such error reaches ~6 u (8 u allowed).
// A graph with an f32 GEMM run as 3xTF32 in one chunk (codegen/tf32x3.h: K too short or ragged
// to cut) gets a wider accumulation floor: each product keeps ~21 bits (the parts round at 2^-22
// each, lo.lo is dropped) and tensor cores do not accumulate in IEEE round-to-nearest (they
// truncate: Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021;
// bench/tf32x3_accuracy.py finds the error growing with the chain's length), so the unit is
// 2^-21 over the K' = 3K terms summed, with room above what mlp3 in one chunk measures
// (docs/kernels/overview.md, "3xTF32"). 3xTF32 in K-chunks of tf32x3_chunk_k is held to IEEE
// fp32's tolerance (`tf32x3` false): chunks keep each accumulation chain short.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "host/host_tensor.h"

namespace mlpc::runtime {

struct Tolerance {
  double rtol = 0.0;
  double floor = 0.0;  // atol in units of rms(ref)
};

// `max_k`: the largest GEMM reduction length in the graph (0 when there is none); `depth`: the
// most ops on any path from an input to an output; `tf32x3`: an f32 GEMM ran as 3xTF32 in one
// chunk (codegen/tf32x3_plan.h's needs_tf32x3_tolerance).
Tolerance tolerance_for(ir::DType dtype, int64_t max_k, int depth = 1, bool tf32x3 = false);

struct Comparison {
  double max_abs_err = 0.0;
  double atol = 0.0;       // the absolute floor used
  double worst_ratio = 0;  // max over elements of |got-ref| / (atol + rtol |ref|); <= 1 passes
  bool ok = false;         // also false on any NaN or shape mismatch
};

Comparison compare(const HostTensor& got, const HostTensor& ref, const Tolerance& tol);

// For a residual block y = base + f(...): compares got - base with ref - base, with the floor
// and rtol taken relative to that contribution, plus one unit of y's own rounding. A check of y
// alone passes a wrong f whose error hides under base's magnitude; this one does not.
Comparison compare_contribution(const HostTensor& got, const HostTensor& ref,
                                const HostTensor* base, const Tolerance& tol);

// For a softmax output (rows of probabilities): compares the log-probabilities centred per row
// (the logits up to a constant), the floor and rtol relative to them, plus the probabilities'
// own rounding (relative, or half a subnormal spacing where p is that small). Near-uniform
// probabilities hide a wrong logit under the tolerance on y; its log does not.
Comparison compare_log_softmax(const HostTensor& got, const HostTensor& ref, const Tolerance& tol);

// 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16): the relative error of rounding to `dtype`.
double unit_roundoff(ir::DType dtype);
// 2^-149 (f32), 2^-24 (f16), 2^-133 (bf16): the spacing of `dtype`'s subnormals.
double smallest_subnormal(ir::DType dtype);

}  // namespace mlpc::runtime
