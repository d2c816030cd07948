// A choice of how some GEMMs run, as data: what kernel selection (passes/select_kernels.h)
// decides over. Codegen enumerates the candidates of a graph with the plan fragment of each
// option (codegen/candidates.h), the tuning step times those fragments on the GPU
// (compiler/tuning.h) and writes the times here; the pass reads nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/impl.h"

namespace mlpc::passes {

// What a candidate chooses, in the order selection makes the choices: a whole MLP in one kernel
// first, then a gated pattern (each takes its GEMMs out of the rest), then each GEMM's kernel,
// then an f32 GEMM's 3xTF32 or its layout, x first and then, once x is transposed, w.
enum class ChoiceKind { FusedMlp, Gated, SmallGemm, Tf32x3, TransposedX, TransposedW };
inline constexpr int kChoiceKinds = 6;

// The choice that sets `impl` on a node, or none for Auto and Cublaslt (nothing chosen over the
// steps as they are). x and w transposed is TransposedW's, made after TransposedX's x.
inline std::optional<ChoiceKind> choice_kind(ir::Impl impl) {
  switch (impl) {
    case ir::Impl::FusedMlp: return ChoiceKind::FusedMlp;
    case ir::Impl::GatedWgmma:
    case ir::Impl::GatedMma: return ChoiceKind::Gated;
    case ir::Impl::Simt:
    case ir::Impl::Mma: return ChoiceKind::SmallGemm;
    case ir::Impl::Tf32x3: return ChoiceKind::Tf32x3;
    case ir::Impl::CublasltXt: return ChoiceKind::TransposedX;
    case ir::Impl::CublasltXtWt: return ChoiceKind::TransposedW;
    case ir::Impl::Auto:
    case ir::Impl::Cublaslt: return std::nullopt;
  }
  return std::nullopt;
}

struct ImplOption {
  ir::Impl impl = ir::Impl::Auto;
  double us = 0;  // µs per pass of its fragment at the rows decided for; 0: not timed
};

struct KernelCandidate {
  ChoiceKind kind = ChoiceKind::SmallGemm;
  std::string step;                // the plan step whose record it is ("gemm_h1", a gated kernel)
  std::vector<std::string> nodes;  // the IR values whose impl the choice sets, matmuls first
                                   // (a fused MLP's: its layers in chain order)
  int64_t n = 0, k = 0;            // the GEMM's (a gated pattern's: each product's)
  ir::DType dtype = ir::DType::F32;
  std::vector<ImplOption> options;  // what codegen can lower instead, in its order
  double baseline_us = 0;           // the steps as they are, timed; 0: not timed
  std::string detail;  // SmallGemm without options: why none; Tf32x3: how K is cut; FusedMlp:
                       // the layers it takes and where (and why) it stops
  bool below_ieee = false;  // Tf32x3: one chunk, less accurate than IEEE fp32
  std::string timing_error;  // what went wrong timing it, when something did
};

// A decision, as the plan and the reports record it under the step's name.
struct KernelRecord {
  ChoiceKind kind = ChoiceKind::SmallGemm;
  std::string step;
  bool taken = false;
  std::string why;
};

}  // namespace mlpc::passes
