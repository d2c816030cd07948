// The rules kernel selection applies (passes/select_kernels.h): which options of a candidate are
// worth timing at a batch size, and what measured times decide. Pure functions of numbers, so
// they are tested without a GPU; the times come from the tuning step (compiler/tuning.h).
#pragma once

#include <cstdint>
#include <string>

#include "ir/impl.h"
#include "passes/kernel_candidate.h"

namespace mlpc::passes {

// How each choice is made: never, always (asked for, not measured), or by measurement. Mma: every
// GEMM (SmallGemms) or gated pattern (GatedGemms) the tensor-core mma kernel can compute runs
// as it, whatever the rows.
enum class SmallGemms { Off, On, Measure, Mma };
enum class GatedGemms { Off, On, Measure, Mma };
enum class Fp32Gemms { Ieee, Tf32x3, Measure };
enum class TransposedX { Off, On, Measure };
enum class FusedMlps { Off, On, Measure };

// A choice made: whether the candidate's option `option` replaces the steps as they are.
struct Choice {
  bool take = false;
  std::string why;
  size_t option = 0;
};

// Small GEMMs as generated kernels. A CUDA-core kernel cannot win against tensor cores once the
// GEMM has real work: past this many multiply-adds (rows * n * k) the GEMM stays a cuBLASLt
// call without being measured (docs/benchmarks.md has the decode-size GeGLU that shows it).
inline constexpr int64_t kSmallGemmMaxMacs = int64_t{1} << 26;
// The kernel is taken when its time inside a CUDA graph is at least this much below cuBLASLt's:
// closer than that is noise, and cuBLASLt keeps the plan torch.compile's.
inline constexpr double kSmallGemmMinGain = 0.05;
// Each GEMM is timed this many times in a row inside one CUDA graph, so its time per launch is
// what it costs in a compiled plan rather than the graph's own launch overhead.
inline constexpr int kSmallGemmRepeats = 8;

// The tensor-core mma kernels read every weight once per 16 rows, so past this many rows
// cuBLASLt's large tiles win: they are measured up to it, and a plain GEMM also wherever the
// CUDA-core kernel is (weights so small that re-reading them costs nothing).
inline constexpr int64_t kMmaGemmMaxRows = 128;
inline bool mma_gemm_measured(int64_t rows, int64_t n, int64_t k) {
  return rows <= kMmaGemmMaxRows || rows * n * k <= kSmallGemmMaxMacs;
}
// Whether a small-GEMM decision at `rows` times option `impl` (Simt or Mma) of an n x k GEMM.
inline bool small_gemm_option_timed(ir::Impl impl, int64_t rows, int64_t n, int64_t k) {
  return impl == ir::Impl::Mma ? mma_gemm_measured(rows, n, k) : rows * n * k <= kSmallGemmMaxMacs;
}
// Whether `arch` has mma.sync on bf16/f16 (sm_80 on).
bool mma_gemms_run_on(const std::string& arch);
Choice decide_small_gemm(double kernel_us, double cublaslt_us, int64_t rows);

// Gated GEMMs replace the GEMM(s) and the gating kernel when their time inside a CUDA graph is
// at least this much lower: closer than that is noise, and the steps apart keep the plan
// torch.compile's. The measurement in the plan decides, not the kernel alone.
inline constexpr double kGatedMinGain = 0.02;
inline constexpr int kGatedRepeats = 2;
Choice decide_gated_gemm(double gated_us, double apart_us, int64_t rows);
// Whether `arch` has the Hopper gated kernel's instructions (TMA, WGMMA): sm_90 and sm_90a.
inline bool gated_gemms_run_on(const std::string& arch) {
  return arch == "sm_90" || arch == "sm_90a";
}

// 3xTF32 (codegen/tf32x3.h) replaces an IEEE f32 GEMM when its time inside a CUDA graph,
// splitting x included, is at least this much lower.
inline constexpr double kTf32x3MinGain = 0.02;
inline constexpr int kTf32x3Repeats = 2;
Choice decide_tf32x3(double tf32x3_us, double ieee_us, int64_t rows);

// An IEEE f32 GEMM reads x (then w) stored transposed when x's kernel and the GEMM take at least
// this much less time so: closer than that is noise, and row-major keeps PyTorch's layout.
inline constexpr double kTransposedXMinGain = 0.02;
inline constexpr int kTransposedXRepeats = 2;
// `weight`: the decision on w, which follows a taken x.
Choice decide_transposed_x(double transposed_us, double row_major_us, int64_t rows,
                           bool weight = false);

// A whole MLP in one kernel (passes/fuse_mlp.h) replaces its layers' steps when its time inside
// a CUDA graph is at least this much lower: closer than that is noise, and the layers apart keep
// the plan torch.compile's.
inline constexpr double kFusedMlpMinGain = 0.02;
inline constexpr int kFusedMlpRepeats = 2;
Choice decide_fused_mlp(double fused_us, double layers_us, int64_t rows);
// Whether `arch` runs the fused-MLP kernel of `dtype`: mma.sync for f16 and bf16 (sm_80 on),
// thread-block clusters for f32 (sm_90 on).
bool fused_mlps_run_on(const std::string& arch, ir::DType dtype);

struct SelectOptions {
  FusedMlps fused_mlps = FusedMlps::Off;
  SmallGemms small_gemms = SmallGemms::Off;
  GatedGemms gated_gemms = GatedGemms::Off;
  Fp32Gemms fp32_gemms = Fp32Gemms::Ieee;
  TransposedX transposed_x = TransposedX::Off;
  int64_t rows = 4096;  // the batch size the decisions are for
  std::string arch = "sm_90";
  bool measured = false;  // the candidates' times come from a GPU (else: the rules alone)
  bool any() const {
    return fused_mlps != FusedMlps::Off || small_gemms != SmallGemms::Off ||
           gated_gemms != GatedGemms::Off ||
           fp32_gemms != Fp32Gemms::Ieee || transposed_x != TransposedX::Off;
  }
};

// The options of `c` (indices into c.options) a measured decision times under `o`; empty when
// the decision is not measured (a mode that asks, no option the size allows).
std::vector<size_t> options_to_time(const KernelCandidate& c, const SelectOptions& o);
// How many passes in a row a candidate of `kind` is timed in one CUDA graph.
int timing_repeats(ChoiceKind kind);

}  // namespace mlpc::passes
