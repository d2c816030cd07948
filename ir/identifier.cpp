#include "ir/identifier.h"

#include <cctype>

namespace mlpc::ir {

std::string c_identifier_chars(std::string_view name) {
  std::string s(name);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

}  // namespace mlpc::ir
