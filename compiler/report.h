// What `mlpc compile` shows: the kernel plan as text and JSON, and the --dump-dir folder.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "compiler/compile.h"

namespace mlpc {

// {"graph", "launches", "kernels": [{"name", "kind", "ops", ...}], "buffers", "passes", "fusion"}
nlohmann::json plan_json(const CompiledGraph& c, int64_t batch);
// One line per launch: kind, name, ops, shapes, bytes moved at `batch`.
std::string plan_text(const CompiledGraph& c, int64_t batch);
// The IR after each pass that changed it (NN-pass.mlp), kernels/NAME.cu, fusion.txt, plan.txt.
void write_dump(const std::string& dir, const CompiledGraph& c, int64_t batch);

}  // namespace mlpc
