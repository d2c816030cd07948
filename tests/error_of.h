// The message of the mlpc::Error `f` throws, or "(no error)": error tests compare it whole.
#pragma once

#include <functional>
#include <string>

#include "ir/error.h"

namespace mlpc::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mlpc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace mlpc::test
