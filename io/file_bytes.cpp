#include "io/file_bytes.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "ir/error.h"
#include "host/atomic_file.h"

namespace mlpc::io {

std::string read_file_bytes(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(fmt::format("{}: error: cannot read: no such file", path));
  if (!std::filesystem::is_regular_file(status))
    throw Error(fmt::format("{}: error: cannot read: not a regular file", path));
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(fmt::format("{}: error: cannot read: {}", path, ec.message()));
  if (size > max_bytes)
    throw Error(fmt::format("{}: error: the file has {} bytes, more than the {} mlpc reads", path,
                            size, max_bytes));
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error(fmt::format("{}: error: cannot read: {}", path, std::strerror(errno)));
  std::string bytes(size, '\0');
  size_t got = size ? std::fread(bytes.data(), 1, size, f.get()) : 0;
  // A file that shrank or grew while being read is not the file whose size was checked.
  if (got != size || std::fgetc(f.get()) != EOF)
    throw Error(fmt::format("{}: error: cannot read: the file changed while being read", path));
  return bytes;
}

void write_file_bytes(const std::string& path, std::string_view bytes) {
  std::string failed = runtime::write_file_atomically(path, {bytes});
  if (!failed.empty()) throw Error(fmt::format("{}: error: {}", path, failed));  // failed: "cannot write ..."
}

}  // namespace mlpc::io
