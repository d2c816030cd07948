// MLPC_LOGS=passes,fusion,output_code,builds (in the spirit of TORCH_LOGS): what compile() prints
// to stderr as it runs, from the C++ API and the CLI alike. Unset or empty: nothing.
#pragma once

#include <string>

#include "compiler/compile.h"

namespace mlpc {

struct LogTopics {
  bool passes = false;       // the IR after each pass that changed it, with the pass's time
  bool fusion = false;       // every fusion decision with its reason
  bool output_code = false;  // each generated kernel's source; each GEMM's cuBLASLt call
  bool builds = false;       // each kernel build as it happens (runtime/jit/build_log.h)
  bool any() const { return passes || fusion || output_code || builds; }
};

// Parses "passes,fusion,output_code,builds" ("all" turns on every topic; spaces are ignored). Throws
// mlpc::Error naming MLPC_LOGS and the known topics for an unknown one.
LogTopics parse_log_topics(const std::string& spec);
// The topics $MLPC_LOGS asks for.
LogTopics log_topics_from_env();

// What the topics print for one compile once its plan is built, each line prefixed
// "[mlpc:TOPIC] "; pure, for tests. (builds prints as the builds happen, not here.)
std::string compile_log(const CompiledGraph& c, const LogTopics& topics);
// Writes compile_log(c, topics) to stderr; compile() calls it.
void log_compile(const CompiledGraph& c, const LogTopics& topics);

}  // namespace mlpc
