#include "host/cache_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "ir/error.h"

namespace mlpc::runtime {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::string cache_dir() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (std::string d = env("MLPC_CACHE_DIR"); !d.empty()) {
    dir = d;
  } else if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && fs::path(x).is_absolute()) {
    dir = fs::path(x) / "mlpc";
  } else if (std::string h = env("HOME"); !h.empty()) {
    dir = fs::path(h) / ".cache" / "mlpc";
  } else {
    throw Error("no cache directory: set MLPC_CACHE_DIR (HOME and XDG_CACHE_HOME are unset)");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw Error("cannot create the cache directory " + dir.string() + ": " +
                (ec ? ec.message() : std::string("not a directory")));
  return dir.string();
}

namespace {

std::string make_temp_dir() {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "mlpc-cold-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    throw Error("cannot make a temporary cache directory under " +
                fs::temp_directory_path().string());
  return tmpl;
}

}  // namespace

FreshCacheDir::FreshCacheDir() : path_(make_temp_dir()), env_("MLPC_CACHE_DIR", path_) {}

FreshCacheDir::~FreshCacheDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a leftover temp dir harms nothing
}

}  // namespace mlpc::runtime
