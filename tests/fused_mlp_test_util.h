// What the fused-MLP kernel tests share: a spec by its widths, the IR graph a spec computes (the
// fp64 reference runs it), seeded values in which every layer matters, and a plan of one kernel.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"
#include "compiler/check.h"
#include "ir/parser.h"

namespace mlpc::testing {

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

// The graph `spec` computes: %x, then per layer %w<i> (and %b<i>) as params, %y returned.
inline std::string mlp_text(const codegen::FusedMlpSpec& spec) {
  std::string body, params;
  std::string h = "%x";
  int64_t k = spec.in_width;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const codegen::FusedMlpLayer& l = spec.layers[i];
    const size_t n = i + 1;
    params += fmt::format("  %w{} = param f32[{}, {}]\n", n, l.n, k);
    if (l.bias) params += fmt::format("  %b{} = param f32[{}]\n", n, l.n);
    body += fmt::format("  %m{} = matmul {}, %w{} : f32[M, {}]\n", n, h, n, l.n);
    h = fmt::format("%m{}", n);
    if (l.bias) {
      body += fmt::format("  %a{} = add {}, %b{} : f32[M, {}]\n", n, h, n, l.n);
      h = fmt::format("%a{}", n);
    }
    if (l.act) {
      body += fmt::format("  %h{} = {} {} : f32[M, {}]\n", n, ir::op_name(*l.act), h, l.n);
      h = fmt::format("%h{}", n);
    }
    k = l.n;
  }
  if (spec.residual) {
    body += fmt::format("  %y = add %x, {} : f32[M, {}]\n", h, k);
    h = "%y";
  }
  return fmt::format("func @mlp(%x: f32[M, {}]) -> f32[M, {}] {{\n{}{}  return {}\n}}\n",
                     spec.in_width, k, params, body, h);
}

inline ir::Graph mlp_graph(const codegen::FusedMlpSpec& spec) {
  return ir::parse(mlp_text(spec), "fused_mlp.mlp");
}

// The plan of kernel `k` alone, its buffers in its parameter order: x (input), each layer's
// w<i> and b<i> (params), y (output), named as mlp_text names them.
inline codegen::Plan fused_mlp_plan(const codegen::FusedMlpSpec& spec, codegen::KernelStep k) {
  using codegen::BufferRole;
  codegen::Plan plan;
  plan.graph_name = "mlp";
  auto add = [&](std::string name, std::vector<int64_t> dims, BufferRole role) {
    codegen::Buffer b;
    b.name = std::move(name);
    b.type = ir::TensorType{ir::DType::F32, ir::Shape{std::move(dims)}};
    b.role = role;
    plan.buffers.push_back(std::move(b));
  };
  add("x", {ir::kBatchDim, spec.in_width}, BufferRole::Input);
  int64_t kk = spec.in_width;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    add(fmt::format("w{}", i + 1), {spec.layers[i].n, kk}, BufferRole::Param);
    if (spec.layers[i].bias) add(fmt::format("b{}", i + 1), {spec.layers[i].n}, BufferRole::Param);
    kk = spec.layers[i].n;
  }
  add("y", {ir::kBatchDim, spec.out_width()}, BufferRole::Output);
  k.ir_nodes = {"y"};
  plan.steps.push_back(std::move(k));
  plan.inputs = {0};
  plan.outputs = {static_cast<int>(plan.buffers.size()) - 1};
  return plan;
}

// Seeded values: x standard normal, weights U(+-sqrt(6 / K)) (He's scale: a ReLU layer keeps
// its input's scale, so the last layer's output still depends on the first's, and no layer's
// error hides under the others'), biases U(+-0.25). Rounded to f32.
inline Values mlp_values(const codegen::FusedMlpSpec& spec, int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto tensor = [&](std::vector<int64_t> dims, auto&& draw) {
    runtime::HostTensor t{ir::DType::F32, std::move(dims), {}};
    t.data.resize(static_cast<size_t>(t.numel()));
    for (double& v : t.data) v = static_cast<float>(draw());
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
