// The fp64 reference interpreter against values computed by hand, and the tolerance rules.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <random>

#include "compiler/check.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "host/host_tensor.h"
#include "host/random_init.h"
#include "runtime/reference/reference.h"
#include "runtime/reference/tolerance.h"

using namespace mlpc;
using runtime::HostTensor;

namespace {

std::vector<double> eval1(const std::string& text, const Values& values) {
  return runtime::reference_forward(ir::parse(text, "r.mlp"), values).at(0).data;
}

HostTensor f32(std::vector<int64_t> dims, std::vector<double> data) {
  return {ir::DType::F32, std::move(dims), std::move(data)};
}

}  // namespace

TEST_CASE("matmul is x . w^T with w stored [out, in], plus a broadcast bias", "[reference]") {
  auto y = eval1(R"(
func @f(%x: f32[M, 2]) -> f32[M, 3] {
  %w = param f32[3, 2]
  %b = param f32[3]
  %mm = matmul %x, %w : f32[M, 3]
  %y = add %mm, %b : f32[M, 3]
  return %y
})",
                 {{"x", f32({2, 2}, {1, 2, 3, 4})},
                  {"w", f32({3, 2}, {1, 0, 0, 1, 1, 1})},
                  {"b", f32({3}, {10, 20, 30})}});
  CHECK(y == std::vector<double>{11, 22, 33, 13, 24, 37});
}

TEST_CASE("unary ops match their definitions at known points", "[reference]") {
  const Values x = {{"x", f32({1, 3}, {-1, 0, 1})}};
  auto run = [&](const char* op) {
    return eval1(std::string("func @f(%x: f32[M, 3]) -> f32[M, 3] {\n  %y = ") + op +
                     " %x : f32[M, 3]\n  return %y\n}\n",
                 x);
  };
  CHECK(run("relu") == std::vector<double>{0, 0, 1});
  CHECK(run("gelu")[2] == Approx(0.8413447460685429).epsilon(1e-15));  // Phi(1)
  CHECK(run("gelu")[0] == Approx(-0.15865525393145707).epsilon(1e-15));
  CHECK(run("gelu_tanh")[2] == Approx(0.8411919906082768).epsilon(1e-15));
  CHECK(run("silu")[2] == Approx(0.7310585786300049).epsilon(1e-15));
  CHECK(run("sigmoid")[1] == 0.5);
  CHECK(run("tanh")[2] == Approx(0.7615941559557649).epsilon(1e-15));
  CHECK(run("exp")[0] == Approx(0.36787944117144233).epsilon(1e-15));
  CHECK(run("neg") == std::vector<double>{1, 0, -1});
}

TEST_CASE("scale, sub, div and cast rounding", "[reference]") {
  auto y = eval1(R"(
func @f(%x: f32[M, 2], %z: f32[M, 2]) -> f32[M, 2] {
  %a = sub %x, %z : f32[M, 2]
  %b = div %a, %z : f32[M, 2]
  %c = scale %b, 0.5 : f32[M, 2]
  return %c
})",
                 {{"x", f32({1, 2}, {5, 9})}, {"z", f32({1, 2}, {1, 3})}});
  CHECK(y == std::vector<double>{2, 1});
  auto r = eval1(R"(
func @f(%x: f32[M, 1]) -> bf16[M, 1] {
  %c = cast %x : bf16[M, 1]
  return %c
})",
                 {{"x", f32({1, 1}, {1.00390625})}});  // 1 + 2^-8: halfway, rounds to even
  CHECK(r == std::vector<double>{1.0});
}

TEST_CASE("the fused graph computes what the unfused graph computes", "[reference]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 16]) -> f32[M, 16] {
  %w = param f32[16, 16]
  %b = param f32[16]
  %mm = matmul %x, %w : f32[M, 16]
  %y = add %mm, %b : f32[M, 16]
  %a = gelu_tanh %y : f32[M, 16]
  %s = silu %y : f32[M, 16]
  %o = mul %a, %s : f32[M, 16]
  return %o
})", "f.mlp");
  Values v = random_values(g, 5, 7);
  auto plain = runtime::reference_forward(g, v);
  auto fused = runtime::reference_forward(passes::run_pipeline(g, {}).graph, v);
  CHECK(plain[0].data == fused[0].data);
}

TEST_CASE("seeded values are reproducible, rounded, and independent of the batch", "[reference]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: bf16[M, 8]) -> bf16[M, 4] {
  %w = param bf16[4, 8]
  %y = matmul %x, %w : bf16[M, 4]
  return %y
})", "f.mlp");
  Values a = random_values(g, 3, 1), b = random_values(g, 5, 1), c = random_values(g, 3, 2);
  CHECK(std::equal(a["x"].data.begin(), a["x"].data.end(), b["x"].data.begin()));
  CHECK(a["w"].data == b["w"].data);
  CHECK(a["w"].data != c["w"].data);
  for (double w : a["w"].data) {
    CHECK(std::fabs(w) <= 1.0 / std::sqrt(8.0));  // nn.Linear: U(-1/sqrt(in), 1/sqrt(in))
    CHECK(runtime::round_to(ir::DType::BF16, w) == w);
  }
}

TEST_CASE("the reference on sampled rows equals those rows of the full run", "[reference]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 8]) -> f32[M, 4] {
  %w = param f32[4, 8]
  %y = matmul %x, %w : f32[M, 4]
  %z = relu %y : f32[M, 4]
  return %z
})", "f.mlp");
  Values v = random_values(g, 100, 3);
  std::vector<int64_t> rows = sample_rows(100, 10);
  CHECK(rows.front() == 0);
  CHECK(rows.back() == 99);
  auto full = runtime::reference_forward(g, v);
  auto some = reference_on_rows(g, v, rows);
  CHECK(runtime::take_rows(full[0], rows).data == some[0].data);
  Check ok = compare_rows(g, full, rows, some);
  CHECK(ok.ok);
  CHECK(ok.max_abs_err == 0.0);
  full[0].data[rows[3] * 4 + 1] += 1.0;  // one wrong element in a checked row
  CHECK_FALSE(compare_rows(g, full, rows, some).ok);
}

TEST_CASE("tolerances: per dtype, growing with the GEMM length, and NaN never passes", "[reference]") {
  auto bf16 = runtime::tolerance_for(ir::DType::BF16, 768);
  auto fp32 = runtime::tolerance_for(ir::DType::F32, 4096);
  CHECK(bf16.rtol == 1.6e-2);
  CHECK(fp32.rtol == 1.3e-6);
  CHECK(runtime::tolerance_for(ir::DType::F32, 16384).floor > fp32.floor);
  HostTensor ref = f32({1, 2}, {1.0, -1.0});
  HostTensor nan = f32({1, 2}, {1.0, std::nan("")});
  CHECK_FALSE(runtime::compare(nan, ref, fp32).ok);
  CHECK(runtime::compare(ref, ref, fp32).ok);
}

TEST_CASE("a reference run too large for host memory is refused up front", "[reference]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 4096]) -> f32[M, 4096] {
  %y = relu %x : f32[M, 4096]
  return %y
})", "f.mlp");
  CHECK_NOTHROW(check_reference_fits(g, 1024));
  CHECK_THROWS_WITH(check_reference_fits(g, 1 << 24),
                    Catch::Contains("the fp64 reference of @f at batch 16777216 needs 1024.0 GiB"));
}

TEST_CASE("a residual block is judged on its contribution too", "[reference]") {
  // y = x + 0.1 * tanh(x W^T): the block adds ~5% to y. Its result scaled by 1.2 (a wrong
  // kernel) moves y by ~1% of its size, under bf16's tolerance on y, but not on y - x.
  ir::Graph g = ir::parse(R"(
func @res(%x: bf16[M, 64]) -> bf16[M, 64] {
  %w = param bf16[64, 64]
  %h = matmul %x, %w : bf16[M, 64]
  %t = tanh %h : bf16[M, 64]
  %f = scale %t, 0.1 : bf16[M, 64]
  %y = add %x, %f : bf16[M, 64]
  return %y
})", "res.mlp");
  REQUIRE(residual_base(g, 0) != nullptr);
  CHECK(residual_base(g, 0)->name == "x");
  Values v = random_values(g, 32, 5);
  std::vector<int64_t> rows = sample_rows(32, 32);
  std::vector<runtime::HostTensor> ref = reference_on_rows(g, v, rows);
  std::vector<runtime::HostTensor> good = ref, bad = ref;
  const runtime::HostTensor& x = v.at("x");
  for (size_t i = 0; i < ref[0].data.size(); ++i) {
    good[0].data[i] = runtime::round_to(ir::DType::BF16, ref[0].data[i]);
    bad[0].data[i] = x.data[i] + 1.2 * (ref[0].data[i] - x.data[i]);
  }
  CHECK(compare_rows(g, good, rows, ref, false, &v).ok);
  const Check on_y = compare_rows(g, bad, rows, ref);
  CHECK(on_y.ok);  // what a check of y alone says
  const Check both = compare_rows(g, bad, rows, ref, false, &v);
  INFO("contribution ratio " << both.contribution_worst_ratio);
  CHECK_FALSE(both.ok);
  CHECK(both.contribution_worst_ratio > 1.0);
}

TEST_CASE("a softmax output is judged on its log-probabilities too", "[reference]") {
  // Logits of ~0.1 give near-uniform probabilities: a logit off by 0.03 (a dropped bias) moves
  // its probability by 3%, inside bf16's tolerance on y only where y is not judged in logs.
  ir::Graph g = ir::parse(R"(
func @cls(%x: bf16[M, 1000]) -> bf16[M, 1000] {
  %z = scale %x, 0.1 : bf16[M, 1000]
  %p = softmax %z : bf16[M, 1000]
  return %p
})", "cls.mlp");
  Values v = random_values(g, 8, 2);
  std::vector<int64_t> rows = sample_rows(8, 8);
  std::vector<runtime::HostTensor> ref = reference_on_rows(g, v, rows);
  std::vector<runtime::HostTensor> good = ref, bad = ref;
  for (size_t i = 0; i < ref[0].data.size(); ++i) {
    good[0].data[i] = runtime::round_to(ir::DType::BF16, ref[0].data[i]);
    bad[0].data[i] = runtime::round_to(ir::DType::BF16, ref[0].data[i] * (i % 1000 == 7 ? 1.03 : 1.0));
  }
  const Check ok = compare_rows(g, good, rows, ref);
  INFO("clean: ratio " << ok.worst_ratio << ", log ratio " << ok.contribution_worst_ratio);
  CHECK(ok.ok);
  const Check off = compare_rows(g, bad, rows, ref);
  INFO("class 7 off by 3%: ratio " << off.worst_ratio << ", log ratio " << off.contribution_worst_ratio);
  CHECK(off.worst_ratio <= 1.0);  // what a check of y alone says
  CHECK_FALSE(off.ok);
}

TEST_CASE("log-softmax check: f16 subnormal tails pass, a wrong logit fails", "[reference]") {
  // Two rows of 4096 logits spread wide enough that f16 stores the smallest probabilities as
  // subnormals, whose relative rounding is far above f16's unit roundoff.
  constexpr int64_t kRows = 2, kN = 4096;
  runtime::HostTensor ref{ir::DType::F16, {kRows, kN}, {}};
  std::mt19937 gen(7);
  std::normal_distribution<double> normal(0.0, 2.5);
  std::vector<double> logits(kRows * kN);
  for (double& v : logits) v = normal(gen);
  auto softmax = [&](const std::vector<double>& z) {
    std::vector<double> p(z.size());
    for (int64_t r = 0; r < kRows; ++r) {
      double mx = -INFINITY, sum = 0.0;
      for (int64_t i = 0; i < kN; ++i) mx = std::max(mx, z[r * kN + i]);
      for (int64_t i = 0; i < kN; ++i) sum += p[r * kN + i] = std::exp(z[r * kN + i] - mx);
      for (int64_t i = 0; i < kN; ++i) p[r * kN + i] /= sum;
    }
    return p;
  };
  ref.data = softmax(logits);
  const double smallest = *std::min_element(ref.data.begin(), ref.data.end());
  REQUIRE(smallest < 0x1.0p-14);  // below f16's smallest normal: the case this test is about
  runtime::HostTensor got = ref;
  for (double& v : got.data) v = runtime::round_to(ir::DType::F16, v);
  const runtime::Tolerance tol = runtime::tolerance_for(ir::DType::F16, kN, 3);
  const runtime::Comparison ok = runtime::compare_log_softmax(got, ref, tol);
  CHECK(ok.ok);
  CHECK(ok.worst_ratio < 1.0);

  std::vector<double> wrong = logits;
  wrong[kN + 17] += 0.5;  // one logit of the second row off by half a unit
  runtime::HostTensor bad = ref;
  bad.data = softmax(wrong);
  for (double& v : bad.data) v = runtime::round_to(ir::DType::F16, v);
  const runtime::Comparison caught = runtime::compare_log_softmax(bad, ref, tol);
  CHECK_FALSE(caught.ok);
  CHECK(caught.worst_ratio > 1.0);
}
