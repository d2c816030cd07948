#include "compiler/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "ir/error.h"

namespace mlpc {
namespace {

namespace fs = std::filesystem;
using codegen::GemmStep;
using codegen::KernelStep;

struct StepFacts {
  std::string name, kind;
  std::vector<std::string> ops, nodes;
  int64_t bytes = 0;  // device memory read + written at this batch
  double flops = 0;
};

StepFacts facts(const codegen::Plan& p, const codegen::Step& s, int64_t batch) {
  StepFacts f;
  if (auto* g = std::get_if<GemmStep>(&s)) {
    f = {g->name, "gemm", {g->op}, g->ir_nodes};
    f.bytes = p.buffers[g->x].bytes(batch) + p.buffers[g->w].bytes(batch) +
              p.buffers[g->y].bytes(batch);
    for (int extra : {g->bias, g->residual})
      if (extra >= 0) f.bytes += p.buffers[extra].bytes(batch);
    f.flops = 2.0 * static_cast<double>(p.buffers[g->x].type.shape.rows(batch)) * g->n * g->k;
  } else {
    const auto& k = std::get<KernelStep>(s);
    f = {k.name, "pointwise", k.ops, k.ir_nodes};
    for (int i : k.inputs) f.bytes += p.buffers[i].bytes(batch);
    f.bytes += p.buffers[k.output].bytes(batch);
  }
  return f;
}

std::string_view role_name(codegen::BufferRole r) {
  switch (r) {
    case codegen::BufferRole::Input: return "input";
    case codegen::BufferRole::Param: return "param";
    case codegen::BufferRole::Intermediate: return "intermediate";
    case codegen::BufferRole::Output: return "output";
  }
  return "?";
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(fmt::format("{}: error: cannot write file", path.string()));
}

}  // namespace

nlohmann::json plan_json(const CompiledGraph& c, int64_t batch) {
  const codegen::Plan& p = c.plan;
  nlohmann::json kernels = nlohmann::json::array();
  for (const codegen::Step& s : p.steps) {
    StepFacts f = facts(p, s, batch);
    nlohmann::json k = {{"name", f.name}, {"kind", f.kind}, {"ops", f.ops},
                        {"ir_nodes", f.nodes}, {"bytes", f.bytes}};
    if (f.flops > 0) k["flops"] = f.flops;
    if (auto* ks = std::get_if<KernelStep>(&s)) k["vector_width"] = ks->vec;
    kernels.push_back(std::move(k));
  }
  nlohmann::json buffers = nlohmann::json::array();
  for (const codegen::Buffer& b : p.buffers)
    buffers.push_back({{"name", b.name}, {"type", ir::to_string(b.type)},
                       {"role", role_name(b.role)}, {"bytes", b.bytes(batch)}});
  nlohmann::json passes = nlohmann::json::array();
  for (const passes::PassRecord& r : c.pipeline.passes)
    passes.push_back({{"pass", r.pass}, {"changed", r.changed}, {"ms", r.ms}});
  nlohmann::json fusion = nlohmann::json::array();
  for (const passes::FusionDecision& d : c.pipeline.fusion.decisions)
    fusion.push_back({{"group", d.group}, {"producer", d.producer}, {"consumer", d.consumer},
                      {"fused", d.verdict != passes::Verdict::Rejected},
                      {"verdict", d.verdict == passes::Verdict::Fused        ? "fused"
                                  : d.verdict == passes::Verdict::Recomputed ? "recomputed"
                                                                             : "rejected"},
                      {"reason", d.reason}});
  return {{"graph", p.graph_name}, {"batch", batch},     {"arch", c.arch},
          {"launches", p.launches()}, {"kernels", kernels}, {"buffers", buffers},
          {"passes", passes},         {"fusion", fusion},   {"nvrtc_ms", c.nvrtc_ms}};
}

std::string plan_text(const CompiledGraph& c, int64_t batch) {
  const codegen::Plan& p = c.plan;
  std::string out = fmt::format("plan for @{} at batch {}: {} launch{}\n", p.graph_name, batch,
                                p.launches(), p.launches() == 1 ? "" : "es");
  int i = 0;
  for (const codegen::Step& s : p.steps) {
    StepFacts f = facts(p, s, batch);
    out += fmt::format("  {:>2}. {:<9} {:<32} {:<24} {:>9.2f} MB", i++, f.kind, f.name,
                       fmt::format("{}", fmt::join(f.ops, "+")), f.bytes / 1e6);
    if (f.flops > 0) out += fmt::format("  {:.2f} GFLOP", f.flops / 1e9);
    out += "\n";
  }
  return out;
}

void write_dump(const std::string& dir, const CompiledGraph& c, int64_t batch) {
  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root / "kernels", ec);
  if (ec) throw Error(fmt::format("{}: error: cannot create dump folder: {}", dir, ec.message()));
  write_file(root / "00-input.mlp", c.pipeline.input_ir);
  int n = 1;
  for (const passes::PassRecord& r : c.pipeline.passes)
    if (r.changed) write_file(root / fmt::format("{:02}-{}.mlp", n++, r.pass), r.ir);
  for (const codegen::Step& s : c.plan.steps)
    if (auto* k = std::get_if<KernelStep>(&s))
      write_file(root / "kernels" / (k->name + ".cu"), k->source);
  write_file(root / "fusion.txt", c.pipeline.fusion.to_string());
  write_file(root / "plan.txt", plan_text(c, batch));
}

}  // namespace mlpc
