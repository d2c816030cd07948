// Sets (or unsets) an environment variable for one scope and restores it after: tests that
// point MLPC_CACHE_DIR at a scratch folder, and the CLI's cold-compile measurement
// (host/cache_dir.h's FreshCacheDir), must leave the process as they found it. Not
// thread-safe: it sets the environment.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace mlpc::runtime {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace mlpc::runtime
