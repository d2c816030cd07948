// A progress line for the fp64 reference on a terminal: `mlpc run --device cpu` at full size
// takes seconds, and a silent terminal looks like a hang.
#pragma once

#include <string>

#include "runtime/reference/reference.h"

namespace mlpc {

// Reports on stderr, rewriting one line, once `after_s` seconds have passed, and only when
// stderr is a terminal (MLPC_PROGRESS=1 forces it, for tests); nothing otherwise. The line is
// cleared when the returned object is destroyed.
class TerminalProgress {
 public:
  explicit TerminalProgress(std::string label, double after_s = 2.0);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;
  runtime::ReferenceProgress callback();

 private:
  std::string label_;
  double after_s_;
  bool enabled_;
  bool shown_ = false;
  double start_s_;
};

}  // namespace mlpc
