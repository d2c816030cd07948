// libFuzzer target: parsed graphs through every pass setting, codegen and the memory planner,
// with the verifier on after each pass (fuzz_checks.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlpc::fuzz::check_pipeline({reinterpret_cast<const char*>(data), size});
  return 0;
}
