#include "codegen/fused_mlp_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "codegen/fused_mlp_mma_kernel.h"
#include "codegen/fused_mlp_simt_kernel.h"
#include "ir/error.h"
#include "ir/mlp_chain.h"
#include "passes/fuse_mlp.h"

namespace mlpc::codegen {

FusedMlpSpec fused_mlp_spec(const ir::Graph& g, const std::vector<passes::MlpLayer>& layers) {
  const ir::Node& x = g.node(g.node(layers.front().matmul).operands[0]);
  FusedMlpSpec s{.dtype = x.type.dtype, .in_width = x.type.shape.last()};
  for (const passes::MlpLayer& l : layers)
    s.layers.push_back({g.node(l.output).type.shape.last(), l.epilogue.bias, l.epilogue.act});
  s.residual = layers.back().epilogue.residual;
  return s;
}

bool fused_mlp_kernel_fits(const FusedMlpSpec& spec, std::string* why_not) {
  // The f32 kernel's arch check is selection's (passes::fused_mlps_run_on): sm_90 here asks
  // only whether the spec fits.
  return spec.dtype == ir::DType::F32 ? fused_mlp_simt_fits(spec, "sm_90", why_not)
                                      : fused_mlp_mma_fits(spec, why_not);
}

std::optional<KernelStep> generate_fused_mlp_kernel(const FusedMlpSpec& spec,
                                                    const std::string& symbol,
                                                    std::string* why_not) {
  if (!fused_mlp_kernel_fits(spec, why_not)) return std::nullopt;
  if (spec.dtype != ir::DType::F32) return generate_fused_mlp_mma_kernel(spec, symbol);
  // 8 warps a block where it fits (fewer, larger clusters ran faster in
  // bench/fused_mlp_simt_probe), else the kernel's default tile.
  const FusedMlpSimtConfig wide{.rows_per_tile = 8, .warps = 8};
  return fused_mlp_simt_fits(spec, "sm_90", nullptr, wide)
             ? generate_fused_mlp_simt_kernel(spec, symbol, wide)
             : generate_fused_mlp_simt_kernel(spec, symbol);
}

namespace {

// The kernel's buffers for `layers` of `g`: x, then each layer's weight and bias, by `buffer`.
template <typename Buffer>
std::vector<int> kernel_inputs(const ir::Graph& g, const std::vector<passes::MlpLayer>& layers,
                               Buffer&& buffer) {
  std::vector<int> in = {buffer(g.node(layers.front().matmul).operands[0])};
  for (const passes::MlpLayer& l : layers) {
    in.push_back(buffer(g.node(l.matmul).operands[1]));
    if (l.bias) in.push_back(buffer(*l.bias));
  }
  return in;
}

}  // namespace

KernelStep lower_fused_mlp(const ir::Node& n, const std::vector<int>& operand_buffers, int output) {
  std::string why;
  const ir::Graph& body = *n.body;
  const std::vector<ir::NodeId> matmuls = ir::mlp_chain_layers(body, &why);
  if (matmuls.empty()) throw Error(fmt::format("node %{}: {}", n.name, why));
  const std::vector<passes::MlpLayer> layers = passes::plain_layers(body, matmuls);
  std::optional<KernelStep> k =
      generate_fused_mlp_kernel(fused_mlp_spec(body, layers), n.symbol, &why);
  if (!k) throw Error(fmt::format("node %{}: no fused-MLP kernel computes it: {}", n.name, why));
  // Body input i is operand i.
  const std::vector<ir::NodeId> inputs = body.inputs();
  k->inputs = kernel_inputs(body, layers, [&](ir::NodeId id) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == id) return operand_buffers.at(i);
    throw Error(fmt::format("node %{}: %{} is not a region input", n.name, body.node(id).name));
  });
  k->output = output;
  k->ir_nodes = {n.name};
  return std::move(*k);
}

namespace {

int buffer_named(const Plan& plan, const std::string& name) {
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].name == name) return static_cast<int>(i);
  throw Error(fmt::format("fused MLP: no buffer holds %{}", name));
}

// The steps computing `names`, in plan order: each layer's GEMM (and the kernel finishing an
// epilogue cuBLASLt cannot run, which names the layer among its IR nodes) and the kernel of a
// layer's tail region (which writes the layer's output; it names its body's nodes).
std::vector<size_t> steps_of(const Plan& plan, const std::set<std::string>& names) {
  std::vector<size_t> at;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    const std::vector<std::string>& nodes =
        std::visit([](const auto& s) -> const std::vector<std::string>& { return s.ir_nodes; },
                   step);
    const bool names_one = std::any_of(nodes.begin(), nodes.end(), [&](const std::string& v) {
      return names.count(v) > 0;
    });
    const int written = step_buffers(step).back();
    if (names_one || (written >= 0 && names.count(plan.buffers[written].name)))
      at.push_back(i);
  }
  return at;
}

// The values the layers of `run` compute: each matmul and each layer's output.
std::set<std::string> run_values(const ir::Graph& g, const std::vector<passes::MlpLayer>& run) {
  std::set<std::string> names;
  for (const passes::MlpLayer& l : run) {
    names.insert(g.node(l.matmul).name);
    names.insert(g.node(l.output).name);
  }
  return names;
}

// The site of the layers of `run`; `stop`: why it ends after the last.
RewriteSite fused_mlp_site(const Plan& plan, const ir::Graph& g,
                           const std::vector<passes::MlpLayer>& run, const std::string& stop) {
  const FusedMlpSpec spec = fused_mlp_spec(g, run);
  RewriteSite site{.kind = passes::ChoiceKind::FusedMlp,
                   .step = passes::fused_mlp_symbol(g, run),
                   .n = spec.out_width(),
                   .k = spec.in_width,
                   .dtype = spec.dtype,
                   .plan = &plan};
  std::vector<std::string> outputs;
  for (const passes::MlpLayer& l : run) {
    site.nodes.push_back(g.node(l.matmul).name);
    outputs.push_back(g.node(l.output).name);
  }
  for (size_t i : steps_of(plan, run_values(g, run))) site.replaced.push_back(plan.steps[i]);
  site.detail = fmt::format("{} layers, %{} to %{}; stops: {}", run.size(), outputs.front(),
                            outputs.back(), stop);
  std::optional<KernelStep> k = generate_fused_mlp_kernel(spec, site.step);
  if (!k) return site;
  k->inputs = kernel_inputs(g, run,
                            [&](ir::NodeId id) { return buffer_named(plan, g.node(id).name); });
  k->output = buffer_named(plan, outputs.back());
  k->ir_nodes = outputs;
  site.options.push_back({.impl = ir::Impl::FusedMlp, .rewritten = {std::move(*k)}});
  return site;
}

}  // namespace

void apply_fused_mlps(Plan& plan, const ir::Graph& g, const Lowering& lowering) {
  if (!lowering.looks_at(passes::ChoiceKind::FusedMlp)) return;
  for (const passes::MlpChain& chain : passes::find_mlp_chains(g)) {
    const std::vector<passes::MlpLayer>& all = chain.layers;
    // From each start, the longest run the kernel takes; the layer after a run stays apart, so
    // that two runs chosen never meet (fuse-mlp would make them one region).
    size_t first = 0;
    while (first + 1 < all.size()) {
      size_t last = all.size() - 1;
      std::string why;
      for (; last > first; --last) {
        const std::vector<passes::MlpLayer> run(all.begin() + first, all.begin() + last + 1);
        if (fused_mlp_kernel_fits(fused_mlp_spec(g, run), &why)) break;
      }
      if (last == first) {  // not even two layers from here: a site that says why
        RewriteSite site = fused_mlp_site(plan, g, {all[first], all[first + 1]}, "");
        site.options.clear();
        site.detail = fmt::format("%{} and %{}: the kernel refuses them: {}",
                                  g.node(all[first].output).name,
                                  g.node(all[first + 1].output).name, why);
        lowering.pick(site);
        lowering.record(plan, site, false);
        ++first;
        continue;
      }
      const std::vector<passes::MlpLayer> run(all.begin() + first, all.begin() + last + 1);
      const std::string stop =
          last + 1 == all.size()
              ? chain.stop
              : fmt::format("%{} would not fit the kernel: {}",
                            g.node(all[last + 1].output).name, why);
      RewriteSite site = fused_mlp_site(plan, g, run, stop);
      const std::optional<size_t> taken = lowering.pick(site);
      lowering.record(plan, site, taken.has_value());
      if (taken) {
        // One kernel at the last replaced step's place: its inputs exist before the first.
        const std::vector<size_t> at = steps_of(plan, run_values(g, run));
        Step kernel = site.options[*taken].rewritten.front();
        plan.steps[at.back()] = std::move(kernel);
        for (auto it = at.rbegin() + 1; it != at.rend(); ++it)
          plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(*it));
      }
      first = last + 2;
    }
  }
}

}  // namespace mlpc::codegen
