// The GPU tests' main: without a usable GPU it prints why and exits 77, which CTest reports as
// skipped (SKIP_RETURN_CODE), so CI machines without a driver stay green.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "runtime/device/device.h"

int main(int argc, char** argv) {
  if (auto why = mlpc::runtime::gpu_unavailable_reason()) {
    std::printf("SKIPPED: GPU tests need a CUDA GPU: %s\n", why->c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
