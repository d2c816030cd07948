// Writing cache files that concurrent mlpc processes share: through a unique temp file in the
// same folder and a rename, so a reader sees the old file or the new one, never a partial one.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace mlpc::runtime {

// Writes the concatenation of `parts` to `path`. Returns "" on success, else what failed (the
// temp file is removed then).
std::string write_file_atomically(const std::string& path,
                                  std::initializer_list<std::string_view> parts);

}  // namespace mlpc::runtime
