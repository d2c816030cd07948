// index.html in the dump folder, as tlparse gives torch.compile: one offline page (no scripts,
// no network) linking the IR after each pass in pipeline order, the rendered graph, every kernel
// next to the IR nodes it computes, the fusion report and the plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace mlpc {

struct DumpIndex {
  struct Pass {
    std::string pass;   // "input" for 00-input.mlp
    bool changed = false;
    double ms = 0;
    std::string file;   // "" when the pass changed nothing (no file written)
  };
  std::vector<Pass> passes;  // in pipeline order, the input first
  bool has_svg = false;      // graph.svg was rendered
  bool has_ptx = false;      // kernels/NAME.ptx were written
};

std::string index_html(const CompiledGraph& c, int64_t batch, const DumpIndex& index);

// Text with & < > " escaped for HTML.
std::string html_escape(const std::string& s);

}  // namespace mlpc
