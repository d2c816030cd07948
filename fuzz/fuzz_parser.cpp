// libFuzzer target: IR text -> parse -> verify -> print -> parse round trip (fuzz_checks.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlpc::fuzz::check_parser({reinterpret_cast<const char*>(data), size});
  return 0;
}
