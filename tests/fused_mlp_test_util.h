// What the fused-MLP kernel tests share (CPU: tests/test_fused_mlp_{kernel,simt}.cpp, GPU:
// tests/gpu/test_gpu_fused_mlp{,_simt}.cpp): specs, the same MLP as an IR graph (one node per op,
// so the fp64 reference computes it), seeded values in which every layer matters, and a plan of
// the one generated kernel over that graph's buffers.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"
#include "compiler/check.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "ir/parser.h"

namespace mlpc::testing {

// x [M, in] through widths[0], widths[1], ...: every layer but the last with `act`, the last
// linear (or with `last_act`); a bias on each when `bias`.
inline codegen::FusedMlpSpec mlp_spec(ir::DType dt, int64_t in, const std::vector<int64_t>& widths,
                                      std::optional<ir::Op> act = ir::Op::Relu, bool bias = false,
                                      bool residual = false,
                                      std::optional<ir::Op> last_act = std::nullopt) {
  codegen::FusedMlpSpec s;
  s.dtype = dt;
  s.in_width = in;
  for (size_t i = 0; i < widths.size(); ++i)
    s.layers.push_back({widths[i], bias, i + 1 < widths.size() ? act : last_act});
  s.residual = residual;
  return s;
}

// `spec` as .mlp text: input x, params w1, b1, w2, ..., output y.
inline std::string mlp_text(const codegen::FusedMlpSpec& s) {
  const std::string t(ir::dtype_name(s.dtype));
  std::string body;
  std::string h = "x";
  int64_t k = s.in_width;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const codegen::FusedMlpLayer& l = s.layers[i];
    const size_t n = i + 1;
    const bool last = n == s.layers.size();
    // The value after each stage of the layer, y for the graph's last.
    auto named = [&](const char* stage, bool final) {
      return last && final ? std::string("y") : fmt::format("h{}{}", n, stage);
    };
    std::string v = named(".mm", !l.bias && !l.act && !s.residual);
    body += fmt::format("  %w{0} = param {1}[{2}, {3}]\n  %{5} = matmul %{4}, %w{0} : {1}[M, {2}]\n",
                        n, t, l.n, k, h, v);
    h = v;
    if (l.bias) {
      v = named(".b", !l.act && !s.residual);
      body += fmt::format("  %b{0} = param {1}[{2}]\n  %{4} = add %{3}, %b{0} : {1}[M, {2}]\n", n,
                          t, l.n, h, v);
      h = v;
    }
    if (l.act) {
      v = named("", !s.residual);
      body += fmt::format("  %{0} = {1} %{2} : {3}[M, {4}]\n", v, ir::op_name(*l.act), h, t, l.n);
      h = v;
    }
    k = l.n;
  }
  if (s.residual) {
    body += fmt::format("  %y = add %{}, %x : {}[M, {}]\n", h, t, k);
    h = "y";
  }
  return fmt::format("func @fused_mlp(%x: {0}[M, {1}]) -> {0}[M, {2}] {{\n{3}  return %y\n}}\n",
                     t, s.in_width, s.out_width(), body);
}

inline ir::Graph mlp_graph(const codegen::FusedMlpSpec& s) { return ir::parse(mlp_text(s), "mlp"); }

// A plan of one step, `k` (generated for `s`), over buffers x, w1, (b1), ..., y named as
// mlp_text names its values, so the graph's inputs and params bind to it by name.
inline codegen::Plan fused_mlp_plan(const codegen::FusedMlpSpec& s, codegen::KernelStep k) {
  auto buf = [&](std::string name, std::vector<int64_t> dims, codegen::BufferRole role) {
    codegen::Buffer b;
    b.name = std::move(name);
    b.type = ir::TensorType{s.dtype, ir::Shape{std::move(dims)}};
    b.role = role;
    return b;
  };
  codegen::Plan p;
  p.graph_name = "fused_mlp";
  p.buffers.push_back(buf("x", {ir::kBatchDim, s.in_width}, codegen::BufferRole::Input));
  k.inputs = {0};
  int64_t kin = s.in_width;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const codegen::FusedMlpLayer& l = s.layers[i];
    k.inputs.push_back(static_cast<int>(p.buffers.size()));
    p.buffers.push_back(buf(fmt::format("w{}", i + 1), {l.n, kin}, codegen::BufferRole::Param));
    if (l.bias) {
      k.inputs.push_back(static_cast<int>(p.buffers.size()));
      p.buffers.push_back(buf(fmt::format("b{}", i + 1), {l.n}, codegen::BufferRole::Param));
    }
    kin = l.n;
  }
  const int y = static_cast<int>(p.buffers.size());
  p.buffers.push_back(buf("y", {ir::kBatchDim, s.out_width()}, codegen::BufferRole::Output));
  k.output = y;
  k.ir_nodes = {"y"};
  p.steps = {std::move(k)};
  p.inputs = {0};
  p.outputs = {y};
  return p;
}

// An f32 MLP from `in` through `layers`.
inline codegen::FusedMlpSpec mlp_spec(int64_t in, std::vector<codegen::FusedMlpLayer> layers,
                                      bool residual = false) {
  return {.dtype = ir::DType::F32, .in_width = in, .layers = std::move(layers),
          .residual = residual};
}

// mlp3_small (samples/mlp3_small.mlp): three 256-wide layers with bias, ReLU between.
inline codegen::FusedMlpSpec mlp3_small_spec() {
  return mlp_spec(256, {{256, true, ir::Op::Relu}, {256, true, ir::Op::Relu}, {256, true, {}}});
}

// The MLPs the kernel's tests build and run: mlp3_small's shape, one layer, a residual, eight
// layers, layers narrower than a cluster's columns (idle warps and blocks), K past 256.
inline std::vector<codegen::FusedMlpSpec> varied_specs() {
  using O = ir::Op;
  return {
      mlp3_small_spec(),
      mlp_spec(16, {{16, false, {}}}),
      mlp_spec(64, {{128, true, O::GeluTanh}, {64, true, {}}}, true),
      // 64 wide: the graph's tolerance (a K-long sum's rounding) leaves room for the error that
      // eight layers pass on.
      mlp_spec(64, {{64, true, O::Silu}, {64, false, O::Relu}, {64, true, O::GeluTanh},
                    {64, false, O::Silu}, {64, true, O::Relu}, {64, false, O::GeluTanh},
                    {64, true, O::Silu}, {64, true, {}}},
               true),
      mlp_spec(32, {{32, true, O::Relu}, {32, true, O::Relu}, {32, true, O::Relu},
                    {32, true, O::Relu}}),
      mlp_spec(256, {{16, true, O::Relu}, {256, true, O::Relu}}),
      mlp_spec(16, {{96, true, O::GeluTanh}, {256, false, O::Silu}, {16, true, {}}}),
      mlp_spec(512, {{128, true, O::Relu}, {256, true, {}}}),
  };
}

// Seeded values: x standard normal, weights U(+-sqrt(6 / K)) (He's scale: a ReLU layer keeps
// its input's scale, so the last layer's output still depends on the first's, and no layer's
// error hides under the others'), biases U(+-0.25). Rounded to the spec's dtype.
inline Values mlp_values(const codegen::FusedMlpSpec& spec, int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto tensor = [&](std::vector<int64_t> dims, auto&& draw) {
    runtime::HostTensor t{spec.dtype, std::move(dims), {}};
    t.data.resize(static_cast<size_t>(t.numel()));
    for (double& v : t.data) v = runtime::round_to(spec.dtype, draw());
    return t;
  };
  std::normal_distribution<double> normal;
  Values v;
  int64_t k = spec.in_width;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    std::uniform_real_distribution<double> w(-std::sqrt(6.0 / k), std::sqrt(6.0 / k));
    std::uniform_real_distribution<double> b(-0.25, 0.25);
    v[fmt::format("w{}", i + 1)] = tensor({spec.layers[i].n, k}, [&] { return w(rng); });
    if (spec.layers[i].bias)
      v[fmt::format("b{}", i + 1)] = tensor({spec.layers[i].n}, [&] { return b(rng); });
    k = spec.layers[i].n;
  }
  v["x"] = tensor({batch, spec.in_width}, [&] { return normal(rng); });  // params: any batch
  return v;
}

}  // namespace mlpc::testing
