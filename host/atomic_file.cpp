#include "host/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

namespace mlpc::runtime {
namespace {

// Unique across processes (pid), threads (per-thread generator) and calls (counter).
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(
                                       std::chrono::steady_clock::now().time_since_epoch().count())};
  return fmt::format("{}.{:016x}{:x}", static_cast<long>(::getpid()), rng(), counter++);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::string write_file_atomically(const std::string& path,
                                  std::initializer_list<std::string_view> parts) {
  std::filesystem::path p(path);
  const std::string tmp =
      (p.parent_path() / ("." + p.filename().string() + "." + unique_suffix() + ".tmp")).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
  bool ok = true;
  for (std::string_view part : parts) ok = ok && write_all(fd, part.data(), part.size());
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (ok) return {};
  ::unlink(tmp.c_str());
  return fmt::format("cannot write {}: {}", path, std::strerror(err));
}

}  // namespace mlpc::runtime
