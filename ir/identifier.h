// Names the IR hands to generated code as C identifiers (kernel symbols, CUDA variables).
#pragma once

#include <string>
#include <string_view>

namespace mlpc::ir {

// `name` with every character a C identifier cannot hold replaced by '_' ("fc1.mm" -> "fc1_mm").
std::string c_identifier_chars(std::string_view name);

}  // namespace mlpc::ir
