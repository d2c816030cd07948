// Whole files in and out. Reading asks the file system for the size first and allocates exactly
// that (refusing what is not a regular file, or larger than `max_bytes`), so no size written
// inside a file ever decides an allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlpc::io {

inline constexpr uint64_t kMaxFileBytes = uint64_t{64} << 30;

// The bytes of `path`; mlpc::Error "PATH: error: ..." when it cannot be read whole.
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = kMaxFileBytes);

// Writes `bytes` to `path` (through a temp file and a rename); mlpc::Error when it cannot.
void write_file_bytes(const std::string& path, std::string_view bytes);

}  // namespace mlpc::io
