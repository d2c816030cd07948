// What each optimization level compiles with (-O0 eager, -O1 pointwise fusion, -O2 measured GEMM
// choices), and the per-choice overrides the CLI exposes. One mapping for the CLI and the
// library API (mlpc/mlpc.h), so `mlpc run -O2` and compile({.level = 2}) build the same plan.
#pragma once

#include <string>

#include "compiler/compile.h"

namespace mlpc {

// Each override is empty (the level's default) or the CLI's value for it: merge_gemms, gated,
// transposed_x and fused_mlp take auto|on|off (gated also mma), small_gemms auto|on|off|mma,
// fp32_gemms auto|ieee|tf32x3. no_fusion forces -O0.
struct LevelOverrides {
  bool no_fusion = false;
  std::string merge_gemms, small_gemms, gated_gemms, fp32_gemms, transposed_x, fused_mlp;
};

// The options of `level` (0, 1 or 2) with `overrides` applied; a level or an override value
// outside those throws mlpc::Error.
// decide_rows and arch are left at their defaults for the caller to set.
CompileOptions options_for_level(int level, const LevelOverrides& overrides = {});

}  // namespace mlpc
