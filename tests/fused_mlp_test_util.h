// What the fused-MLP kernel tests share (CPU: tests/test_fused_mlp_kernel.cpp, GPU:
// tests/gpu/test_gpu_fused_mlp.cpp): specs, the same MLP as an IR graph (one node per op, so the
// fp64 reference computes it), and a plan of the one generated kernel over that graph's buffers.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "codegen/fused_mlp_spec.h"
#include "codegen/plan.h"
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

}  // namespace mlpc::testing
