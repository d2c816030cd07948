// Where mlpc keeps its on-disk caches (kernel CUBINs, GEMM tuning results). Shared by every cache
// so they all live under one root that one variable moves.
#pragma once

#include <string>

#include "host/scoped_env.h"

namespace mlpc::runtime {

// The root of mlpc's caches, created (with its parents) if missing:
//   $MLPC_CACHE_DIR             if set and non-empty
//   $XDG_CACHE_HOME/mlpc        if XDG_CACHE_HOME is set to an absolute path (XDG spec)
//   $HOME/.cache/mlpc           otherwise
// Throws mlpc::Error naming the directory and the reason when none can be determined or the
// directory cannot be created. Callers whose cache is optional (all of them: a cache must never
// fail a compile) catch it and carry on without the cache.
std::string cache_dir();

// Points cache_dir() at a new, empty directory for one scope (through MLPC_CACHE_DIR, restored
// after) and removes that directory at the end: what a first compile on a fresh machine sees —
// every cache empty but in use, so a kernel built for a measurement is reused by the plan's
// build. Not thread-safe (it sets the environment): for the CLI's own measurements.
class FreshCacheDir {
 public:
  FreshCacheDir();  // throws mlpc::Error when no temporary directory can be made
  ~FreshCacheDir();
  FreshCacheDir(const FreshCacheDir&) = delete;
  FreshCacheDir& operator=(const FreshCacheDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  ScopedEnv env_;  // MLPC_CACHE_DIR = path_ while this lives
};

}  // namespace mlpc::runtime
