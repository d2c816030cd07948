#include "codegen/plan_builder.h"
#include "codegen/rewrite_site.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "codegen/fused_mlp_plan.h"
#include "codegen/gated_gemm_plan.h"
#include "codegen/tf32x3_plan.h"
#include "codegen/transposed_x_plan.h"
#include "codegen/pointwise_kernel.h"
#include "codegen/reduction_kernel.h"
#include "codegen/mma_gemm_kernel.h"
#include "codegen/small_gemm_kernel.h"
#include "ir/error.h"
#include "passes/gemm_epilogue.h"

namespace mlpc::codegen {
namespace {

// Why neither generated GEMM kernel can compute `s`: it stays a cuBLASLt call.
std::string no_kernel_reason(const GemmStep& s) {
  if (std::string why = passes::cannot_run(passes::GemmBackend::SmallGemm, s.epilogue);
      !why.empty())
    return fmt::format("cuBLASLt: {} ({})", why, ir::epilogue_formula(s.epilogue));
  return fmt::format("cuBLASLt: no generated GEMM kernel takes {} x {} (N x K) in {}", s.n, s.k,
                     ir::dtype_name(s.dtype));
}

// A GEMM whose epilogue cuBLASLt cannot run (only written by hand: fuse_epilogue folds none):
// one generated GEMM kernel where one takes it, else cuBLASLt as far as it goes (x . W^T, the
// bias, the activation where it has it) into a buffer of its own and a pointwise kernel for the
// rest of the epilogue. Either way the plan's choices say why.
void add_beyond_cublaslt(Plan& plan, const ir::Graph& g, GemmStep s,
                         std::set<std::string>& kernel_names) {
  const std::string why = passes::cannot_run(passes::GemmBackend::CublasLt, s.epilogue);
  std::optional<KernelStep> k = generate_small_gemm_kernel(s);
  if (!k) k = generate_mma_gemm_kernel(s);
  if (k) {
    plan.choices.push_back({s.name, true, "generated kernel: " + why});
    k->name = take_unique_name(kernel_names, k->name);
    plan.steps.push_back(std::move(*k));
    return;
  }
  const ir::GemmEpilogue e = s.epilogue;
  ir::GemmEpilogue lt{.bias = e.bias, .act = e.act};
  if (!passes::can_run(passes::GemmBackend::CublasLt, lt)) lt.act.reset();
  const bool act_in_kernel = e.act && !lt.act;
  const Buffer y = plan.buffers[static_cast<size_t>(s.y)];  // a copy: buffers grow below
  std::set<std::string> buffer_names;
  for (const Buffer& b : plan.buffers) buffer_names.insert(b.name);
  Buffer t{take_unique_name(buffer_names, y.name + ".gemm"), y.type, BufferRole::Intermediate};
  const int t_index = static_cast<int>(plan.buffers.size());
  plan.buffers.push_back(t);
  const int residual = s.residual, y_index = s.y;
  const std::vector<std::string> ir_nodes = s.ir_nodes;
  plan.choices.push_back({s.name, false,
                          fmt::format("cuBLASLt ({}) and a pointwise kernel: {}",
                                      ir::epilogue_formula(lt), why)});
  s.epilogue = lt;
  s.residual = -1;
  s.y = t_index;
  plan.steps.push_back(std::move(s));

  // The rest, act(t) + residual, as a region over the GEMM's buffer (and the residual).
  auto body = std::make_shared<ir::Graph>();
  body->name = g.name;
  body->batch_symbol = g.batch_symbol;
  body->nodes.push_back({.op = ir::Op::Input, .name = t.name, .type = t.type});
  ir::NodeId last{0};
  std::string ops;
  if (residual >= 0) {
    const Buffer& r = plan.buffers[static_cast<size_t>(residual)];
    body->nodes.push_back({.op = ir::Op::Input, .name = r.name, .type = r.type});
  }
  auto add = [&](ir::Node n) {
    ops += (ops.empty() ? "" : "_") + std::string(ir::op_name(n.op));
    body->nodes.push_back(std::move(n));
    last = ir::NodeId{static_cast<uint32_t>(body->nodes.size() - 1)};
  };
  if (act_in_kernel)
    add({.op = *e.act, .name = y.name + ".act", .type = y.type, .operands = {last}});
  if (residual >= 0)
    add({.op = ir::Op::Add, .name = y.name, .type = y.type, .operands = {last, ir::NodeId{1}}});
  body->nodes.push_back({.op = ir::Op::Return, .operands = {last}});
  const ir::Node region{.op = ir::Op::FusedPointwise,
                        .name = y.name,
                        .type = y.type,
                        .symbol = take_unique_name(kernel_names, "mlpc_epilogue_" + ops),
                        .body = body};
  KernelStep pk = generate_pointwise_kernel(g, region);
  pk.inputs = {t_index};
  if (residual >= 0) pk.inputs.push_back(residual);
  pk.output = y_index;
  pk.ir_nodes = ir_nodes;
  plan.steps.push_back(std::move(pk));
}

// Each GEMM step a generated kernel can compute is a site: its options are those kernels (the
// CUDA-core one where it applies, then the tensor-core one); one with none still is, so that its
// record says why it stays a cuBLASLt call.
void apply_small_gemms(Plan& plan, const Lowering& lowering, std::set<std::string>& kernel_names) {
  if (!lowering.looks_at(passes::ChoiceKind::SmallGemm)) return;
  for (Step& step : plan.steps) {
    const auto* s = std::get_if<GemmStep>(&step);
    if (!s) continue;
    RewriteSite site{.kind = passes::ChoiceKind::SmallGemm, .step = s->name, .nodes = s->ir_nodes,
                     .n = s->n, .k = s->k, .dtype = s->dtype, .plan = &plan, .replaced = {*s}};
    if (auto k = generate_small_gemm_kernel(*s))
      site.options.push_back({.impl = ir::Impl::Simt, .rewritten = {std::move(*k)}});
    if (auto k = generate_mma_gemm_kernel(*s))
      site.options.push_back({.impl = ir::Impl::Mma, .rewritten = {std::move(*k)}});
    if (site.options.empty()) site.detail = no_kernel_reason(*s);
    const std::optional<size_t> taken = lowering.pick(site);
    lowering.record(plan, site, taken.has_value());
    if (!taken) continue;
    KernelStep kernel = std::get<KernelStep>(std::move(site.options[*taken].rewritten.front()));
    kernel.name = take_unique_name(kernel_names, kernel.name);
    step = std::move(kernel);
  }
}

// What a fused region computes, without its names: each body node's op, operands (by position),
// type and constant, so two regions that differ only in value names compare equal.
std::string region_structure(const ir::Graph& g, const ir::Node& fused) {
  std::string key = fmt::format("{} {}\n", ir::op_name(fused.op), ir::to_string(fused.type));
  for (const ir::Node& n : fused.body->nodes) {
    key += fmt::format("{} {} {:a}", ir::op_name(n.op), ir::to_string(n.type), n.scalar);
    for (ir::NodeId o : n.operands) key += fmt::format(" {}", o.index);
    key += '\n';
  }
  for (ir::NodeId o : fused.operands) key += ir::to_string(g.node(o).type) + ";";
  return key;
}

// Regions met again (eager's hundred relus, a long chain cut into equal regions) launch the
// kernel built for the first: same source, one NVRTC build. Run last, on the kernels as the plan
// launches them: a kernel another step rewrote (a transposed store, TF32 parts) keeps its own.
void share_identical_kernels(Plan& plan, const std::map<std::string, std::string>& structure) {
  auto launch_key = [&](const KernelStep& k) -> std::optional<std::string> {
    auto it = structure.find(k.name);
    // Only kernels of a region as generated: a pointwise kernel storing row-major, a row kernel.
    const std::optional<std::string> launch = std::visit(
        Overloaded{[](const Elementwise& e) -> std::optional<std::string> {
                     if (e.store != Store::RowMajor) return std::nullopt;
                     return "pointwise";
                   },
                   [](const RowReduction& r) -> std::optional<std::string> {
                     return fmt::format("row {} {} {}", r.threads_per_row, r.rows_per_block,
                                        r.out_row_len);
                   },
                   [](const auto&) -> std::optional<std::string> { return std::nullopt; }},
        k.kind);
    if (it == structure.end() || !launch) return std::nullopt;
    std::string key = fmt::format("{}|{} {} {}|", it->second, k.row_len, k.vec, *launch);
    for (int b : k.inputs) key += ir::to_string(plan.buffers[b].type) + ";";
    return key + ir::to_string(plan.buffers[k.output].type);
  };
  std::map<std::string, const KernelStep*> first;
  for (Step& step : plan.steps) {
    auto* k = std::get_if<KernelStep>(&step);
    if (!k) continue;
    std::optional<std::string> key = launch_key(*k);
    if (!key) continue;
    auto [it, fresh] = first.try_emplace(*key, k);
    if (fresh) continue;
    k->symbol = it->second->name;
    k->source = it->second->source;
  }
}

}  // namespace

Plan build_plan(const ir::Graph& g, const PlanOptions& options) {
  return lower_plan(g, lowering_from_ir(g, options.records));
}

Plan lower_plan(const ir::Graph& g, const Lowering& lowering) {
  Plan plan;
  plan.graph_name = g.name;
  std::vector<int> buffer_of(g.size(), -1);
  auto add_buffer = [&](const ir::Node& n, BufferRole role) {
    buffer_of[g.id_of(n).index] = static_cast<int>(plan.buffers.size());
    plan.buffers.push_back({n.name, n.type, role});
    return buffer_of[g.id_of(n).index];
  };
  auto buf = [&](ir::NodeId id) { return buffer_of[id.index]; };
  // Kernel symbols taken: the fused regions' (unique, the verifier checks), then each small-GEMM
  // kernel's as it is made.
  std::set<std::string> kernel_names;
  for (const ir::Node& n : g.nodes)
    if (ir::is_fused(n.op)) kernel_names.insert(n.symbol);
  std::map<std::string, std::string> structure;  // fused kernel name -> its region's structure

  for (const ir::Node& n : g.nodes) {
    switch (n.op) {
      case ir::Op::Input: plan.inputs.push_back(add_buffer(n, BufferRole::Input)); break;
      case ir::Op::Param: add_buffer(n, BufferRole::Param); break;
      case ir::Op::Concat: {  // one allocation; its params become views into it, in order
        const int whole = add_buffer(n, BufferRole::Param);
        plan.buffers[whole].stacked = true;
        int64_t offset = 0;
        for (ir::NodeId o : n.operands) {
          Buffer& part = plan.buffers[buf(o)];
          part.view_of = whole;
          part.view_offset = offset;
          offset += part.bytes(0);
        }
        break;
      }
      case ir::Op::MatMul: {
        if (n.impl == ir::Impl::FusedMlp)
          throw Error(fmt::format("node %{}: impl fused_mlp runs as a fused.mlp region, which the "
                                  "fuse-mlp pass makes", n.name));
        GemmStep s;
        s.epilogue = n.epilogue;
        if (n.epilogue.bias) s.bias = buf(n.operands[2]);
        if (n.epilogue.residual) s.residual = buf(n.operands.back());
        s.name = "gemm_" + n.name;
        s.x = buf(n.operands[0]);
        s.w = buf(n.operands[1]);
        s.y = add_buffer(n, BufferRole::Intermediate);
        s.n = n.type.shape.last();
        s.k = g.node(n.operands[0]).type.shape.last();
        s.dtype = n.type.dtype;
        s.ir_nodes = {n.name};
        if (!passes::can_run(passes::GemmBackend::CublasLt, s.epilogue)) {
          add_beyond_cublaslt(plan, g, std::move(s), kernel_names);
          break;
        }
        plan.steps.push_back(std::move(s));  // a generated kernel instead: decided below
        break;
      }
      case ir::Op::FusedPointwise:
      case ir::Op::FusedReduction: {
        KernelStep k = n.op == ir::Op::FusedPointwise ? generate_pointwise_kernel(g, n)
                                                      : generate_reduction_kernel(g, n);
        for (ir::NodeId o : n.operands) k.inputs.push_back(buf(o));
        k.output = add_buffer(n, BufferRole::Intermediate);
        structure[k.name] = region_structure(g, n);
        plan.steps.push_back(std::move(k));
        break;
      }
      case ir::Op::FusedMlp: {
        std::vector<int> operands;
        for (ir::NodeId o : n.operands) operands.push_back(buf(o));
        KernelStep k = lower_fused_mlp(n, operands, add_buffer(n, BufferRole::Intermediate));
        lowering.record(plan, {.kind = passes::ChoiceKind::FusedMlp, .step = n.symbol}, true);
        plan.steps.push_back(std::move(k));
        break;
      }
      case ir::Op::Return:
        for (ir::NodeId o : n.operands) {
          Buffer& b = plan.buffers[buf(o)];
          if (b.role == BufferRole::Intermediate) b.role = BufferRole::Output;
          plan.outputs.push_back(buf(o));
        }
        break;
      default:
        throw Error(fmt::format("node %{} ({}): codegen needs every pointwise op inside a "
                                "fused.pointwise region; run fusion or isolate-pointwise first",
                                n.name, ir::op_name(n.op)));
    }
  }
  // Fused MLPs, then gated GEMMs: each takes GEMMs only while they are plain GEMM steps, so
  // the small-GEMM sites (below) come after, for what they leave.
  apply_fused_mlps(plan, g, lowering);
  apply_gated_gemms(plan, g, lowering);
  apply_small_gemms(plan, lowering, kernel_names);
  apply_tf32x3(plan, g, lowering);
  apply_transposed_x(plan, g, lowering);
  share_identical_kernels(plan, structure);
  return plan;
}

}  // namespace mlpc::codegen
