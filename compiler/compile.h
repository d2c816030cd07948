// The public compile API: graph -> pass pipeline -> plan -> CUBINs (NVRTC, no GPU needed).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "compiler/gemm_decisions.h"
#include "passes/kernel_rules.h"
#include "passes/pipeline.h"

namespace mlpc {

// The batch size compile-time measurements assume when the caller names none.
inline constexpr int64_t kDefaultDecideRows = 4096;

struct CompileOptions {
  bool fusion = true;        // false: eager, one kernel per op
  bool epilogues = false;    // -O2: fold bias / relu / gelu_tanh / residual into GEMM epilogues
  std::string arch;          // "sm_90"; empty: the device's, or sm_90 without one
  bool build_kernels = true; // run NVRTC on every kernel
  bool use_cache = true;     // on-disk CUBIN cache (runtime/jit/kernel_cache.h);
                             // MLPC_NO_KERNEL_CACHE=1 turns it off as well
  // Sibling GEMMs (gate and up): merged never, always, or when measured faster on this GPU at
  // `decide_rows` rows (compiler/gemm_decisions.h). Only with fusion.
  MergeGemms merge_gemms = MergeGemms::Off;
  int64_t decide_rows = 0;  // 0: kDefaultDecideRows
  // With epilogues: take each legal fold only when measured no slower than the fused-kernel
  // alternative on this GPU (without a GPU: every legal fold, the rule).
  bool measure_epilogues = true;
  // GEMMs that fit codegen/small_gemm_kernel.h as generated kernels instead of cuBLASLt calls:
  // never, always, or each one that measures faster on this GPU at `decide_rows` rows
  // (compiler/gemm_decisions.h); the plan records each choice (Plan::choices).
  SmallGemms small_gemms = SmallGemms::Off;
  // Two GEMMs of one input and the pointwise kernel combining them (gate, up, gelu·mul) as one
  // generated Hopper kernel (codegen/gated_gemm_kernel.h), sm_90 only: never, always, or where
  // measured faster on this GPU at `decide_rows` rows; recorded in Plan::choices.
  GatedGemms gated_gemms = GatedGemms::Off;
  // f32 GEMMs: IEEE fp32 (CUDA cores, what PyTorch runs with TF32 off), 3xTF32 (TF32 tensor
  // cores in K-chunks, within IEEE's tolerance where K allows the chunks: codegen/tf32x3.h), or
  // chunked 3xTF32 where measured faster on this GPU at `decide_rows` rows; recorded in
  // Plan::choices. Ieee unless asked: results change.
  Fp32Gemms fp32_gemms = Fp32Gemms::Ieee;
  // IEEE f32 GEMMs reading their x stored transposed, written so by the kernel computing it
  // (codegen/transposed_x_plan.h): never, always, or where measured faster on this GPU at
  // `decide_rows` rows; recorded in Plan::choices. Results are the same SGEMM's either way.
  TransposedX transposed_x = TransposedX::Off;
  // Chains of narrow layers as one kernel each (passes/fuse_mlp.h, codegen/fused_mlp_plan.h):
  // never, always where the kernel takes them, or where measured faster on this GPU at
  // `decide_rows` rows than the layers apart; recorded in Plan::choices.
  FusedMlps fused_mlps = FusedMlps::Off;
};

// The batch size the -O2 decisions measure at: options.decide_rows, else kDefaultDecideRows.
inline int64_t decide_rows(const CompileOptions& options) {
  return options.decide_rows > 0 ? options.decide_rows : kDefaultDecideRows;
}

// What kernel selection is asked to choose for `arch` (not yet whether it has times).
passes::SelectOptions select_options(const CompileOptions& options, const std::string& arch);

struct CompiledGraph {
  passes::PipelineResult pipeline;
  codegen::Plan plan;
  std::map<std::string, std::vector<char>> cubins;  // KernelStep::cubin_symbol() -> CUBIN
  std::string arch;
  // Wall time of each phase. passes_ms includes the passes' measured decisions (merged and
  // epilogue GEMMs: compiler/decision_timing.h); plan_ms the tuning step (compiler/tuning.h: NVRTC of the candidates'
  // kernels and their timing), kernel selection and the lowering.
  double passes_ms = 0.0;
  double passes_timing_ms = 0.0;  // of passes_ms: timing the merge and epilogue GEMMs on the GPU
  double plan_ms = 0.0;
  double plan_build_wait_ms = 0.0;  // of plan_ms: tuning waiting for its kernels' builds
  double plan_timing_ms = 0.0;      // of plan_ms: tuning timing fragments on the GPU
  double nvrtc_ms = 0.0;    // NVRTC's time summed over the plan's kernels it built (cache misses)
  double compile_ms = 0.0;  // wall time of building the plan's kernels (in parallel), hits included
  // Kernels found in the on-disk cache / built by NVRTC; hits + misses = number of kernels.
  // With the cache off every kernel is a miss.
  int cache_hits = 0;
  int cache_misses = 0;
  bool cache_enabled = false;  // the cache was consulted (on, and its directory usable)
};

CompiledGraph compile(const ir::Graph& g, const CompileOptions& options);

}  // namespace mlpc
