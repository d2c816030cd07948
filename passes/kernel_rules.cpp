#include "passes/kernel_rules.h"

#include <fmt/format.h>

#include <cstdio>

namespace mlpc::passes {

namespace {

// The compute capability `arch` ("sm_90", "sm_90a") names, 0 for none.
int sm_version(const std::string& arch) {
  int sm = 0;
  return std::sscanf(arch.c_str(), "sm_%d", &sm) == 1 ? sm : 0;
}

}  // namespace

bool mma_gemms_run_on(const std::string& arch) { return sm_version(arch) >= 80; }

Choice decide_small_gemm(double kernel_us, double cublaslt_us, int64_t rows) {
  if (!(kernel_us > 0 && cublaslt_us > 0)) return {false, "could not time both (cuBLASLt kept)"};
  const bool use = kernel_us < cublaslt_us * (1.0 - kSmallGemmMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.2f} us as a kernel vs {:.2f} "
                           "us for cuBLASLt",
                           use ? "generated kernel" : "cuBLASLt", rows, kernel_us, cublaslt_us)};
}

Choice decide_gated_gemm(double gated_us, double apart_us, int64_t rows) {
  if (!(gated_us > 0 && apart_us > 0)) return {false, "could not time both (steps kept apart)"};
  const bool use = gated_us < apart_us * (1.0 - kGatedMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us as one gated GEMM "
                           "kernel vs {:.1f} us for the GEMM(s) and the gating kernel",
                           use ? "gated GEMM kernel" : "kept apart", rows, gated_us, apart_us)};
}

Choice decide_tf32x3(double tf32x3_us, double ieee_us, int64_t rows) {
  if (!(tf32x3_us > 0 && ieee_us > 0)) return {false, "could not time both (IEEE fp32 kept)"};
  const bool use = tf32x3_us < ieee_us * (1.0 - kTf32x3MinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us as 3xTF32 (split "
                           "included) vs {:.1f} us as an IEEE fp32 GEMM",
                           use ? "3xTF32" : "IEEE fp32", rows, tf32x3_us, ieee_us)};
}

Choice decide_transposed_x(double transposed_us, double row_major_us, int64_t rows, bool weight) {
  if (!(transposed_us > 0 && row_major_us > 0))
    return {false, weight ? "could not time both (w kept [n, k])"
                          : "could not time both (x kept row-major)"};
  const bool use = transposed_us < row_major_us * (1.0 - kTransposedXMinGain);
  const char* kept = weight ? "w [n, k]" : "x row-major";
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.1f} us with {} stored "
                           "transposed{} vs {:.1f} us {} (x's kernel and the GEMM)",
                           use ? (weight ? "w transposed" : "x transposed") : kept, rows,
                           transposed_us, weight ? "w" : "x", weight ? " too" : "", row_major_us,
                           weight ? "with x alone" : "row-major")};
}

Choice decide_fused_mlp(double fused_us, double layers_us, int64_t rows) {
  if (!(fused_us > 0 && layers_us > 0)) return {false, "could not time both (layers kept apart)"};
  const bool use = fused_us < layers_us * (1.0 - kFusedMlpMinGain);
  return {use, fmt::format("{}: measured at M={} in a CUDA graph: {:.2f} us as one kernel vs "
                           "{:.2f} us layer by layer",
                           use ? "one kernel" : "layer by layer", rows, fused_us, layers_us)};
}

bool fused_mlps_run_on(const std::string& arch, ir::DType dtype) {
  return sm_version(arch) >= (dtype == ir::DType::F32 ? 90 : 80);
}

std::vector<size_t> options_to_time(const KernelCandidate& c, const SelectOptions& o) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < c.options.size(); ++i) {
    const ir::Impl impl = c.options[i].impl;
    bool time = false;
    switch (c.kind) {
      case ChoiceKind::FusedMlp:
        time = o.fused_mlps == FusedMlps::Measure && fused_mlps_run_on(o.arch, c.dtype);
        break;
      case ChoiceKind::SmallGemm:
        time = o.small_gemms == SmallGemms::Measure &&
               small_gemm_option_timed(impl, o.rows, c.n, c.k) &&
               (impl != ir::Impl::Mma || mma_gemms_run_on(o.arch));
        break;
      case ChoiceKind::Gated:
        time = o.gated_gemms == GatedGemms::Measure &&
               (impl == ir::Impl::GatedWgmma
                    ? gated_gemms_run_on(o.arch)
                    : mma_gemms_run_on(o.arch) && o.rows <= kMmaGemmMaxRows);
        break;
      case ChoiceKind::Tf32x3: time = o.fp32_gemms == Fp32Gemms::Measure && !c.below_ieee; break;
      case ChoiceKind::TransposedX:
      case ChoiceKind::TransposedW: time = o.transposed_x == TransposedX::Measure; break;
    }
    if (time) timed.push_back(i);
  }
  return timed;
}

int timing_repeats(ChoiceKind kind) {
  switch (kind) {
    case ChoiceKind::FusedMlp: return kFusedMlpRepeats;
    case ChoiceKind::SmallGemm: return kSmallGemmRepeats;
    case ChoiceKind::Gated: return kGatedRepeats;
    case ChoiceKind::Tf32x3: return kTf32x3Repeats;
    case ChoiceKind::TransposedX:
    case ChoiceKind::TransposedW: return kTransposedXRepeats;
  }
  return 1;
}

}  // namespace mlpc::passes
