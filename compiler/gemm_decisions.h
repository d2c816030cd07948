// Compile-time choices made by measurement on the GPU (issue: "decided by measurement, not by
// rule"): whether sibling GEMMs run merged, whether epilogues fold, whether a tiny GEMM runs as a
// generated kernel. Times come from runtime::GemmBench, tuned and cached
// on disk, so a second compile of the same shapes measures nothing again.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/plan_builder.h"
#include "passes/fuse_epilogue.h"
#include "passes/merge_gemms.h"

namespace mlpc {

// Where the measured plan decisions (small, gated, 3xTF32 GEMMs) spent their time, summed over
// the process: waiting for their kernels to build (NVRTC, ahead or not) and timing the
// alternatives on the GPU. compile() reports its own share (CompiledGraph).
struct DecisionCosts {
  double build_wait_ms = 0;
  double timing_ms = 0;
};
DecisionCosts decision_costs();

enum class MergeGemms { Off, On, Measure };
// Mma: every GEMM (SmallGemms) or gated pattern (GatedGemms) the tensor-core mma kernel can
// compute runs as it (codegen/mma_gemm_kernel.h), whatever the rows: asked for, not measured.
enum class SmallGemms { Off, On, Measure, Mma };
enum class GatedGemms { Off, On, Measure, Mma };
enum class Fp32Gemms { Ieee, Tf32x3, Measure };
enum class TransposedX { Off, On, Measure };

// A merge is taken when the merged GEMM is at least this much faster than the siblings apart:
// closer than that is noise on a shared GPU, and apart keeps the plan torch.compile's.
inline constexpr double kMergeMinGain = 0.01;

// The decider for `mode` at `rows` rows. Measure without a GPU keeps GEMMs apart (and says so).
passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows);

// Epilogue folds (-O2): with `measure` and a GPU, a fold is taken when the GEMM with the epilogue
// is no slower than the GEMM without it plus, when not folding leaves a kernel of its own, that
// kernel's memory traffic (a copy of the output); otherwise every legal fold is taken.
passes::EpilogueDecider epilogue_decider(bool measure, int64_t rows);

// Two timings of one tiny GEMM differ by a few percent from run to run (docs/benchmarks.md), so
// a fold that measures within this much of not folding is taken: it
// reads the bias once in the GEMM instead of in a kernel, and a bias fold is what lets a relu
// fold after it remove a launch (-O2 planned mlp3_small with 5 launches when noise said no).
inline constexpr double kEpilogueNoise = 0.03;

// The rule applied to measured times: fold when
// epilogue_us <= (plain_us + kernel_us) * (1 + kEpilogueNoise).
passes::EpilogueDecision decide_epilogue(double epilogue_us, double plain_us, double kernel_us,
                                         int64_t rows);

// The rule applied to measured times (no GPU): merged_us vs the siblings' separate times.
passes::GemmMergeDecision decide_merge(double merged_us, const std::vector<double>& apart_us,
                                       int64_t rows);

// Small GEMMs as generated kernels (codegen/small_gemm_kernel.h). A CUDA-core kernel cannot win
// against tensor cores once the GEMM has real work: past this many multiply-adds (rows * n * k)
// the GEMM stays a cuBLASLt call without being measured (64 x 256 x 256 is 2^22; the decode-size
// GeGLU's 16 x 6144 x 768, 2^26.2, already runs slower as a kernel: docs/benchmarks.md).
inline constexpr int64_t kSmallGemmMaxMacs = int64_t{1} << 26;
// The kernel is taken when its time inside a CUDA graph is at least this much below cuBLASLt's:
// closer than that is noise, and cuBLASLt keeps the plan torch.compile's.
inline constexpr double kSmallGemmMinGain = 0.05;
// Each GEMM is timed this many times in a row inside one CUDA graph, so its time per launch is
// what it costs in a compiled plan rather than the graph's own launch overhead.
inline constexpr int kSmallGemmRepeats = 8;

// The tensor-core mma kernels (codegen/mma_gemm_kernel.h: plain and gated) read every weight
// once per 16 rows, so past this many rows cuBLASLt's large tiles win: they are measured up to
// it (the decode-size GeGLU's 16 rows), and a plain GEMM also wherever the CUDA-core kernel is
// (at most kSmallGemmMaxMacs: weights so small that re-reading them costs nothing, e.g. the
// article's Linear at 1024 rows, where it beats cuBLASLt: docs/benchmarks.md).
inline constexpr int64_t kMmaGemmMaxRows = 128;
// Whether the small-GEMM decision at `rows` times the mma kernel for an n x k GEMM.
inline bool mma_gemm_measured(int64_t rows, int64_t n, int64_t k) {
  return rows <= kMmaGemmMaxRows || rows * n * k <= kSmallGemmMaxMacs;
}
// Whether the small-GEMM decision at `rows` times `kernel`, a candidate for `gemm`: the
// tensor-core kernel per mma_gemm_measured, the CUDA-core one up to kSmallGemmMaxMacs. (The
// decision also needs a GPU that runs it; the speculative builds build what this allows.)
inline bool small_gemm_candidate_timed(const codegen::KernelStep& kernel,
                                       const codegen::GemmStep& gemm, int64_t rows) {
  return kernel.as<codegen::MmaGemm>() ? mma_gemm_measured(rows, gemm.n, gemm.k)
                                       : rows * gemm.n * gemm.k <= kSmallGemmMaxMacs;
}
// Whether `arch` has mma.sync on bf16/f16 (sm_80 on).
bool mma_gemms_run_on(const std::string& arch);

// The rule applied to measured times (µs per launch inside a CUDA graph).
codegen::KernelChoice decide_small_gemm(double kernel_us, double cublaslt_us, int64_t rows);

// The decider for `mode` at `rows` rows (nullptr for Off and On: build_plan's small_gemms flag
// says On). Measure without a GPU keeps every GEMM a cuBLASLt call, and says so. The kernels it
// times are built through the on-disk CUBIN cache when `use_cache` (compile() then finds them).
codegen::SmallGemmDecider small_gemm_decider(SmallGemms mode, int64_t rows, bool use_cache = true);

// Gated GEMMs (codegen/gated_gemm_kernel.h) replace cuBLASLt's GEMM(s) and the gating kernel
// when their time inside a CUDA graph is at least this much lower: closer than that is noise,
// and the steps apart keep the plan torch.compile's. (At Llama-8B's size the kernel alone has
// timed slower than cuBLASLt plus the gating kernel, yet faster inside a CUDA graph, and was
// taken: the measurement in the plan decides, not the kernel alone; docs/benchmarks.md.)
inline constexpr double kGatedMinGain = 0.02;
// Each alternative is timed this many times in a row inside one CUDA graph.
inline constexpr int kGatedRepeats = 2;

// The rule applied to measured times (µs per forward of the steps inside a CUDA graph).
codegen::KernelChoice decide_gated_gemm(double gated_us, double apart_us, int64_t rows);

// Whether `arch` has the gated GEMM kernel's instructions (TMA, WGMMA): sm_90 and sm_90a.
inline bool gated_gemms_run_on(const std::string& arch) {
  return arch == "sm_90" || arch == "sm_90a";
}

// The decider for `mode` at `rows` rows for target `arch` (nullptr for Off). Only sm_90 has the
// kernel's instructions: any other arch refuses, saying so. On takes every pattern; Measure
// times both alternatives on this GPU (without one it keeps the steps apart, and says so).
codegen::GatedGemmDecider gated_gemm_decider(GatedGemms mode, int64_t rows, const std::string& arch,
                                             bool use_cache = true);

// With --fp32-gemms auto, f32 GEMMs as three TF32 tensor-core products in K-chunks
// (codegen/tf32x3.h: within IEEE fp32's tolerance, not equal to it) replace IEEE fp32 GEMMs (CUDA
// cores) when their time inside a CUDA graph, splitting x included, is at least this much lower.
// A GEMM whose K cannot be cut so keeps IEEE fp32 under auto.
inline constexpr double kTf32x3MinGain = 0.02;
inline constexpr int kTf32x3Repeats = 2;

// The rule applied to measured times (µs per pass inside a CUDA graph).
codegen::KernelChoice decide_tf32x3(double tf32x3_us, double ieee_us, int64_t rows);

// The decider for `mode` at `rows` rows (nullptr for Ieee). Tf32x3 takes every f32 GEMM (in one
// chunk where K cannot be cut: less accurate); Measure times both on this GPU where K allows the
// chunks (without a GPU it keeps IEEE fp32, and says so).
codegen::Tf32x3Decider tf32x3_decider(Fp32Gemms mode, int64_t rows, bool use_cache = true);

// An IEEE f32 GEMM reads its x stored transposed (codegen/transposed_x_plan.h), written so by the
// kernel computing x, when the two steps together take at least this much less time inside a
// CUDA graph than row-major: closer than that is noise, and row-major keeps the plan PyTorch's.
// (On mlp3 it takes fc2 and not fc3, whose bias epilogue gains less than the store costs.)
inline constexpr double kTransposedXMinGain = 0.02;
inline constexpr int kTransposedXRepeats = 2;

// The rule applied to measured times (µs per pass of the kernel and the GEMM in a CUDA graph);
// `weight`: the decision on w, which follows a taken x.
codegen::KernelChoice decide_transposed_x(double transposed_us, double row_major_us, int64_t rows,
                                          bool weight = false);

// The decider for `mode` at `rows` rows (nullptr for Off). On takes every GEMM it is asked
// about, x and then w; Measure times both layouts on this GPU (without one it keeps x row-major,
// and says so).
codegen::TransposedXDecider transposed_x_decider(TransposedX mode, int64_t rows,
                                                 bool use_cache = true);

}  // namespace mlpc
