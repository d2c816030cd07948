// runtime/random_bytes: the timing operands of -O2's measurements. Reproducible, within the
// scale, every value its own, and the same whatever the number of threads drawing it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include <cmath>

#include "compiler/check.h"
#include "compiler/samples.h"
#include "host/host_tensor.h"
#include "runtime/reference/reference.h"
#include "host/random_init.h"

using namespace mlpc;
using namespace mlpc::runtime;

TEST_CASE("random_bytes: reproducible, uniform within the scale, values their own", "[random]") {
  // Past one slice (2^18 values), so several threads draw it.
  constexpr int64_t kCount = (int64_t{1} << 19) + 12345;
  for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16}) {
    INFO(ir::dtype_name(dt));
    const std::vector<uint8_t> a = random_bytes(dt, kCount, 0.25, 42);
    REQUIRE(a.size() == static_cast<size_t>(kCount) * ir::dtype_size(dt));
    CHECK(random_bytes(dt, kCount, 0.25, 42) == a);
    CHECK(random_bytes(dt, kCount, 0.25, 43) != a);
    // Value i depends on (seed, i) only: a shorter draw is a prefix of a longer one.
    const std::vector<uint8_t> head = random_bytes(dt, 1000, 0.25, 42);
    CHECK(std::equal(head.begin(), head.end(), a.begin()));

    const std::vector<double> v = decode(dt, a.data(), kCount);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    CHECK(*lo >= -0.25);
    CHECK(*hi <= 0.25);
    CHECK(*lo < -0.249);
    CHECK(*hi > 0.249);
    double sum = 0;
    int64_t above = 0;
    for (double x : v) sum += x, above += x > 0.125;
    CHECK(std::abs(sum / kCount) < 1e-3);                      // centred
    CHECK(std::abs(above / double(kCount) - 0.25) < 5e-3);     // uniform: a quarter above s/2
    // Not a short pattern repeated: the second half differs from the first.
    CHECK_FALSE(std::equal(v.begin(), v.begin() + kCount / 2, v.begin() + kCount / 2));
    if (dt == ir::DType::F32) CHECK(std::set<double>(v.begin(), v.end()).size() > kCount * 0.95);
  }
  CHECK(random_bytes(ir::DType::F32, 0, 1.0, 1).empty());
}

TEST_CASE("seeded values make every layer of a residual block matter", "[random]") {
  // ffn: y = x + down(gelu_tanh(gate(n)) * up(n)), n = rmsnorm(x). With norm weights seeded
  // like a Linear's (~0.03), the whole MLP added ~4e-5 to an output of RMS 1: a check of y passed
  // whatever the GEMMs computed. Norm weights now start at 1, as nn.RMSNorm's do.
  const mlpc::ir::Graph g = mlpc::make_sample("ffn");
  const int64_t batch = 64;
  mlpc::Values v = mlpc::random_values(g, batch, mlpc::runtime::kDefaultSeed);
  CHECK(v.at("norm.weight").data == std::vector<double>(768, 1.0));
  const std::vector<double> y = mlpc::runtime::reference_forward(g, v).at(0).data;
  std::fill(v.at("down.weight").data.begin(), v.at("down.weight").data.end(), 0.0);
  const std::vector<double> y0 = mlpc::runtime::reference_forward(g, v).at(0).data;
  double sq = 0, diff = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    sq += y[i] * y[i];
    diff += (y[i] - y0[i]) * (y[i] - y0[i]);
  }
  const double rms = std::sqrt(sq / y.size()), change = std::sqrt(diff / y.size());
  INFO("output RMS " << rms << ", RMS change when down.weight is zero " << change);
  CHECK(change >= 0.10 * rms);
}
