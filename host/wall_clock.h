// Milliseconds of wall time since a steady_clock point: the compile phases, NVRTC builds and
// -O2 decisions report them.
#pragma once

#include <chrono>

namespace mlpc::runtime {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace mlpc::runtime
