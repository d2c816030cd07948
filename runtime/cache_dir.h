// Where mlpc keeps its on-disk caches (kernel CUBINs, GEMM tuning results). Shared by every cache
// so they all live under one root that one variable moves.
#pragma once

#include <string>

namespace mlpc::runtime {

// The root of mlpc's caches, created (with its parents) if missing:
//   $MLPC_CACHE_DIR             if set and non-empty
//   $XDG_CACHE_HOME/mlpc        if XDG_CACHE_HOME is set to an absolute path (XDG spec)
//   $HOME/.cache/mlpc           otherwise
// Throws mlpc::Error naming the directory and the reason when none can be determined or the
// directory cannot be created. Callers whose cache is optional (all of them: a cache must never
// fail a compile) catch it and carry on without the cache.
std::string cache_dir();

}  // namespace mlpc::runtime
