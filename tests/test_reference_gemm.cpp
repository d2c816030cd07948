// The reference's blocked GEMM against the plain triple loop, on shapes that hit every edge of
// its blocking (a partial group of 4 rows, columns past the last strip of 8, k past a block),
// and the reference's progress reports.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "compiler/reference_progress.h"
#include "ir/parser.h"
#include "runtime/reference/reference.h"
#include "runtime/reference/reference_gemm.h"
#include "host/scoped_env.h"

using namespace mlpc;

TEST_CASE("the blocked reference GEMM equals the plain loop on every edge shape",
          "[reference]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (int64_t rows : {1, 3, 4, 5, 33, 70})
    for (int64_t k : {1, 3, 385, 800})
      for (int64_t n : {1, 7, 8, 13, 64}) {
        std::vector<double> x(rows * k), w(n * k), y(rows * n, -1.0);
        for (double& v : x) v = normal(rng);
        for (double& v : w) v = normal(rng);
        runtime::reference_gemm(x.data(), w.data(), y.data(), rows, k, n);
        double worst = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0;
            for (int64_t i = 0; i < k; ++i) {
              want += x[r * k + i] * w[j * k + i];
              mag += std::abs(x[r * k + i] * w[j * k + i]);
            }
            // Summation order is the same; FMA rounding may differ: relative to sum |terms|.
            worst = std::max(worst, std::abs(y[r * n + j] - want) / std::max(mag, 1e-300));
          }
        INFO("rows " << rows << " k " << k << " n " << n);
        CHECK(worst < 1e-14);
      }
}

TEST_CASE("the reference reports each top-level node before it runs", "[reference]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 4]) -> f32[M, 2] {
  %w = param f32[2, 4]
  %mm = matmul %x, %w : f32[M, 2]
  %y = relu %mm : f32[M, 2]
  return %y
})",
                          "p.mlp");
  std::map<std::string, runtime::HostTensor> values{
      {"x", {ir::DType::F32, {1, 4}, {1, 2, 3, 4}}},
      {"w", {ir::DType::F32, {2, 4}, {1, 0, 0, 0, 0, -1, 0, 0}}}};
  std::vector<std::string> seen;
  auto outs = runtime::reference_forward(
      g, values, [&](size_t done, size_t total, const ir::Node& n) {
        CHECK(total == g.nodes.size());
        CHECK(done == seen.size());
        seen.push_back(n.name);
      });
  CHECK(seen == std::vector<std::string>{"x", "w", "mm", "y", ""});
  CHECK(outs.at(0).data == std::vector<double>{1, 0});
}

TEST_CASE("the progress line is on only for a terminal, or when asked", "[reference]") {
  {
    runtime::ScopedEnv off("MLPC_PROGRESS", "0");
    TerminalProgress p("reference");
    CHECK_FALSE(p.callback());
  }
  runtime::ScopedEnv on("MLPC_PROGRESS", "1");
  TerminalProgress p("reference");
  CHECK(p.callback());
}
