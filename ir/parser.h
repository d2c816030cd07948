// Parses the .mlp text form (see printer.h) into a verified graph. Errors throw mlpc::Error with
// the message "FILE:LINE:COL: error: WHAT" naming the offending token.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mlpc::ir {

Graph parse(std::string_view text, std::string_view file = "<input>");
Graph parse_file(const std::string& path);  // unreadable file: "PATH: error: cannot read ..."

}  // namespace mlpc::ir
