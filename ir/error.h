// Two kinds of errors (style.md #10): user mistakes throw mlpc::Error with a message that names
// the node or the text location; compiler bugs hit MLPC_ASSERT, which names file:line.
#pragma once

#include <stdexcept>
#include <string>

namespace mlpc {

// A user-facing error: bad text, bad shapes, unknown sample, no GPU, a kernel that fails to build.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void internal_error(const char* file, int line, const std::string& what);

}  // namespace mlpc

#define MLPC_ASSERT(cond, msg)                                                  \
  do {                                                                          \
    if (!(cond)) ::mlpc::internal_error(__FILE__, __LINE__, std::string(msg));  \
  } while (0)
