// The `mlpc` command line: samples, compile, run, bench, demo. Returns the exit code:
// 0 ok, 1 bad input or a failure (one line on stderr), 2 bad command line, 3 no usable GPU.
#pragma once

namespace mlpc {

int run_cli(int argc, char** argv);

}  // namespace mlpc
