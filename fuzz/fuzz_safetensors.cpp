// libFuzzer target: the bytes of a .safetensors weights file -> header and offsets checks,
// decode, encode round trip (safetensors_check.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/safetensors_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlpc::fuzz::check_safetensors({reinterpret_cast<const char*>(data), size});
  return 0;
}
