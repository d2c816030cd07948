// graph.dot in the dump folder: the compiled graph's dataflow for Graphviz. Each fused kernel is
// a cluster named after the kernel; GEMMs (blue boxes), pointwise ops (orange ellipses) and
// reductions (green hexagons) are styled apart; inputs, params and the result have their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "compiler/compile.h"

namespace mlpc {

std::string graph_dot(const CompiledGraph& c, int64_t batch);

// The `dot` executable on PATH, or "" when Graphviz is not installed.
std::string find_dot();
// Runs `dot -Tsvg DOT -o SVG`; false (and no SVG) when dot is missing or fails.
bool render_svg(const std::filesystem::path& dot_file, const std::filesystem::path& svg_file);

}  // namespace mlpc
